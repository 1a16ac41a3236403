//! What placement keeps apart for the exchanges' memory elements (IPU21.md,
//! "Exchange rules confirmed on hardware": in one event a tile's send may
//! not read the element an incoming receive writes, and instruction fetch
//! contends for region 0's elements). Per allocation root: the roots of its
//! tile that one exchange sends from while it receives into them (or the
//! reverse), which the allocator places in different elements where memory
//! allows; and whether any exchange touches it at all, which keeps it out of
//! the elements holding the tile's exchange code.
//!
//! A root both sent from and received into by one exchange cannot be kept
//! apart from itself: the scheduler serialises such a send and receive
//! (`crate::schedule::elements`). Owns the relation only; it must not
//! assign addresses.

use crate::expand::program::{LowProgram, Step};

/// Per allocation root: the roots it must not share an element with, and
/// whether an exchange reads or writes it.
#[derive(Clone, Debug, Default)]
pub struct Separation {
    /// Sorted and distinct; empty for non-roots.
    pub apart: Vec<Vec<u32>>,
    pub exchanged: Vec<bool>,
}

impl Separation {
    /// Whether roots `first` and `second` are kept in different elements.
    pub fn kept_apart(&self, first: u32, second: u32) -> bool {
        self.apart
            .get(first as usize)
            .is_some_and(|list| list.binary_search(&second).is_ok())
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
    };
    collect(program, steps, &mut separation);
    for list in &mut separation.apart {
        list.sort_unstable();
        list.dedup();
    }
    separation
}
