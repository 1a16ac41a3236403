//! What placement keeps apart for the exchanges' memory elements (IPU21.md,
//! "Exchange rules confirmed on hardware": in one event a tile's send may
//! not read the element an incoming receive writes, and instruction fetch
//! contends for region 0's elements). Per allocation root: the roots of its
//! tile that one exchange sends from while it receives into them (or the
//! reverse), which the allocator places in different elements where memory
//! allows; and whether any exchange touches it at all, which keeps it out of
//! the elements holding the tile's exchange code.
//!
//! Paired receives (IPU21.md: both members of a receiving pair receive at
//! the same address): a transfer received by both tiles of a partner pair
//! at one offset may move as paired 64-bit items, so the roots it lands in
//! on the two tiles are linked, and the allocator places the higher tile's
//! root at its partner's root's address where memory allows.
//!
//! A root both sent from and received into by one exchange cannot be kept
//! apart from itself: the scheduler serialises such a send and receive
//! (`crate::schedule::elements`). Owns the relation only; it must not
//! assign addresses.

use crate::expand::program::{LowProgram, Step};
use crate::target::mapping::partner;

/// Per allocation root: the roots it must not share an element with, and
/// whether an exchange reads or writes it.
#[derive(Clone, Debug, Default)]
pub struct Separation {
    /// Sorted and distinct; empty for non-roots.
    pub apart: Vec<Vec<u32>>,
    pub exchanged: Vec<bool>,
    /// Per root on the higher tile of a partner pair: the roots on the
    /// lower tile it receives paired transfers beside (sorted, distinct).
    pub paired_with: Vec<Vec<u32>>,
}

impl Separation {
    /// Whether roots `first` and `second` are kept in different elements.
    pub fn kept_apart(&self, first: u32, second: u32) -> bool {
        self.apart
            .get(first as usize)
            .is_some_and(|list| list.binary_search(&second).is_ok())
    }

    /// The lower tile's roots `root` receives beside (empty when none).
    pub fn paired(&self, root: u32) -> &[u32] {
        self.paired_with
            .get(root as usize)
            .map_or(&[], Vec::as_slice)
    }

    pub fn is_exchanged(&self, root: u32) -> bool {
        self.exchanged.get(root as usize).copied().unwrap_or(false)
    }
}

/// (tile, is a receive, root) of every endpoint of one exchange: sorted,
/// each tile's sends come before its receives.
type Endpoint = (u32, bool, u32);

fn collect(program: &LowProgram, steps: &[Step], separation: &mut Separation) {
    let root = |allocation: u32| {
        program
            .allocations
            .get(allocation as usize)
            .map_or(allocation, |found| found.alias_group)
    };
    let mut endpoints: Vec<Endpoint> = Vec::new();
    // One transfer's receives: (tile, offset, root).
    let mut receives: Vec<(u32, u32, u32)> = Vec::new();
    for step in steps {
        match step {
            Step::Repeat { body, .. } => collect(program, body, separation),
            Step::Exchange { transfers, .. } => {
                endpoints.clear();
                for (index, location) in transfers.source_location.iter().enumerate() {
                    endpoints.push((
                        transfers.source_tile[index],
                        false,
                        root(location.allocation.0),
                    ));
                }
                for destination in &transfers.destinations {
                    endpoints.push((
                        destination.tile,
                        true,
                        root(destination.location.allocation.0),
                    ));
                }
                for transfer in 0..transfers.len() {
                    receives.clear();
                    receives.extend(transfers.destinations_of(transfer).iter().map(
                        |destination| {
                            (
                                destination.tile,
                                destination.location.offset,
                                root(destination.location.allocation.0),
                            )
                        },
                    ));
                    receives.sort_unstable();
                    for &(tile, offset, higher) in &receives {
                        let lower = partner(tile);
                        if lower >= tile {
                            continue;
                        }
                        let at = receives.partition_point(|receive| receive.0 < lower);
                        if let Some(&(found, found_offset, lower_root)) = receives.get(at)
                            && found == lower
                            && found_offset == offset
                            && let Some(list) = separation.paired_with.get_mut(higher as usize)
                        {
                            list.push(lower_root);
                        }
                    }
                }
                endpoints.sort_unstable();
                endpoints.dedup();
                for &(_, _, root) in &endpoints {
                    if let Some(flag) = separation.exchanged.get_mut(root as usize) {
                        *flag = true;
                    }
                }
                for group in endpoints.chunk_by(|left, right| left.0 == right.0) {
                    let receives = group.partition_point(|endpoint| !endpoint.1);
                    let (sent, received) = group.split_at(receives);
                    for &(_, _, source) in sent {
                        for &(_, _, destination) in received {
                            if source != destination {
                                separation.apart[source as usize].push(destination);
                                separation.apart[destination as usize].push(source);
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

/// The separation `steps`' exchanges ask of `program`'s placement.
pub fn separation(program: &LowProgram, steps: &[Step]) -> Separation {
    let count = program.allocations.len();
    let mut separation = Separation {
        apart: vec![Vec::new(); count],
        exchanged: vec![false; count],
        paired_with: vec![Vec::new(); count],
    };
    collect(program, steps, &mut separation);
    for list in separation
        .apart
        .iter_mut()
        .chain(separation.paired_with.iter_mut())
    {
        list.sort_unstable();
        list.dedup();
    }
    separation
}
