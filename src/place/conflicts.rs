//! Element conflicts of a placement: within one exchange, a tile whose send
//! reads and receive writes touch the same memory element (16 KiB in region
//! 0, 32 KiB interleaved in region 1) contends with itself (IPU21.md,
//! "Exchange rules confirmed on hardware"). Counted per (exchange step,
//! tile, element), in two kinds: elements where a send from one allocation
//! root and a receive into another meet (`count`: placement was to keep
//! them apart; nothing in the schedule orders them, so each is a conflict
//! the chip would see unless the events happen not to overlap), and
//! elements where only one root is both sent from and received into
//! (`same_allocation_count`: the scheduler serialises those sends and
//! receives, `crate::schedule::validate::elements` checks that, so they are
//! no conflict at any event). Iterated allocations inside a Repeat are
//! taken over all their instances (conservative).
//!
//! Fetch conflicts: while an exchange runs, the tile fetches its exchange
//! code from the elements holding its exchange table (region 0, IPU21.md
//! "Chip": instruction fetch, exchange send reads and receive writes contend
//! per element). Data placed in those elements and sent or received in the
//! same exchange competes with that fetch; counted per (exchange step,
//! tile, element) the same way.
//!
//! Owns the count only, with its own walk over the exchanges (it does not
//! use the allocator's separation); it must not change addresses.

use serde::Serialize;

use crate::expand::program::{Location, LowProgram, Step};
use crate::target::memory::{CONTENTION_ELEMENTS, element_of};

/// Examples kept in a conflict report.
const EXAMPLES: usize = 16;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ElementConflict {
    /// Index of the exchange among the steps' exchanges (depth-first).
    pub exchange: u32,
    pub tile: u32,
    pub element: u32,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct ElementConflicts {
    pub count: u64,
    pub examples: Vec<ElementConflict>,
    /// Sends or receives in an element that holds the tile's exchange code.
    #[serde(default)]
    pub fetch_count: u64,
    /// Elements where one allocation root is both sent from and received
    /// into, and no other root meets it (the schedule serialises those).
    #[serde(default)]
    pub same_allocation_count: u64,
}

// Every element id fits one bit of a u32 mask.
const _: () = assert!(CONTENTION_ELEMENTS <= 32);

/// Elements touched by `bytes` at `location` (all instances when iterated in a Repeat).
fn mask(
    program: &LowProgram,
    base: &[u32],
    location: Location,
    bytes: u32,
    in_repeat: bool,
) -> u32 {
    let allocation = &program.allocations[location.allocation.0 as usize];
    let start = base[location.allocation.0 as usize] as u64 + location.offset as u64;
    let spread = if in_repeat && allocation.iterations > 1 {
        (allocation.iterations as u64 - 1) * allocation.bytes as u64
    } else {
        0
    };
    let end = start + spread + bytes.max(1) as u64 - 1;
    let first = element_of(start.min(u32::MAX as u64) as u32);
    let last = element_of(end.min(u32::MAX as u64) as u32);
    (first..=last).fold(0, |mask, element| mask | (1u32 << element))
}

struct Counter<'program> {
    program: &'program LowProgram,
    base: &'program [u32],
    /// Per tile: (root, is a receive, elements) of the current exchange's accesses.
    accesses: Vec<Vec<(u32, bool, u32)>>,
    /// Per tile: the elements its exchange code occupies.
    code: &'program [u32],
    exchange: u32,
    result: ElementConflicts,
}

impl Counter<'_> {
    fn record(
        &mut self,
        tile: u32,
        location: Location,
        receive: bool,
        mask: u32,
        touched: &mut Vec<u32>,
    ) {
        let root = self
            .program
            .allocations
            .get(location.allocation.0 as usize)
            .map_or(location.allocation.0, |allocation| allocation.alias_group);
        if let Some(entry) = self.accesses.get_mut(tile as usize) {
            if entry.is_empty() {
                touched.push(tile);
            }
            entry.push((root, receive, mask));
        }
    }

    /// Counts one tile's conflicts in the current exchange and clears its accesses.
    fn settle(&mut self, tile: u32) {
        let mut accesses = std::mem::take(&mut self.accesses[tile as usize]);
        // Per element and side (send, receive): the first root seen, and
        // whether a second one was.
        let mut roots = [[(None::<u32>, false); 2]; CONTENTION_ELEMENTS as usize];
        let (mut send, mut receive) = (0u32, 0u32);
        for &(root, is_receive, mask) in &accesses {
            let mut rest = mask;
            while rest != 0 {
                let element = rest.trailing_zeros() as usize;
                rest &= rest - 1;
                let side = &mut roots[element][usize::from(is_receive)];
                match side.0 {
                    None => side.0 = Some(root),
                    Some(first) if first != root => side.1 = true,
                    Some(_) => {}
                }
            }
            if is_receive {
                receive |= mask;
            } else {
                send |= mask;
            }
        }
        let both = send & receive;
        let mixed = (0..CONTENTION_ELEMENTS)
            .filter(|&element| both & (1 << element) != 0)
            .filter(|&element| {
                let [(sent, sent_more), (received, received_more)] = roots[element as usize];
                sent_more || received_more || sent != received
            })
            .fold(0u32, |mixed, element| mixed | (1 << element));
        self.result.count += mixed.count_ones() as u64;
        self.result.same_allocation_count += (both & !mixed).count_ones() as u64;
        let fetched = (send | receive) & self.code[tile as usize];
        self.result.fetch_count += fetched.count_ones() as u64;
        let mut rest = mixed;
        while rest != 0 && self.result.examples.len() < EXAMPLES {
            let element = rest.trailing_zeros();
            rest &= rest - 1;
            self.result.examples.push(ElementConflict {
                exchange: self.exchange,
                tile,
                element,
            });
        }
        accesses.clear();
        self.accesses[tile as usize] = accesses;
    }

    fn walk(&mut self, steps: &[Step], in_repeat: bool) {
        for step in steps {
            match step {
                Step::Repeat { body, .. } => self.walk(body, true),
                Step::Exchange { transfers, .. } => {
                    let mut touched: Vec<u32> = Vec::new();
                    for transfer in 0..transfers.len() {
                        let bytes = transfers.words[transfer].saturating_mul(4);
                        let location = transfers.source_location[transfer];
                        let send = mask(self.program, self.base, location, bytes, in_repeat);
                        self.record(
                            transfers.source_tile[transfer],
                            location,
                            false,
                            send,
                            &mut touched,
                        );
                        for destination in transfers.destinations_of(transfer) {
                            let receive = mask(
                                self.program,
                                self.base,
                                destination.location,
                                bytes,
                                in_repeat,
                            );
                            self.record(
                                destination.tile,
                                destination.location,
                                true,
                                receive,
                                &mut touched,
                            );
                        }
                    }
                    touched.sort_unstable();
                    touched.dedup();
                    for tile in touched {
                        self.settle(tile);
                    }
                    self.exchange += 1;
                }
                _ => {}
            }
        }
    }
}

/// The elements `start..end` spans (none when empty).
fn span_mask(start: u32, end: u32) -> u32 {
    if end <= start {
        return 0;
    }
    let (first, last) = (element_of(start), element_of(end - 1));
    (first..=last).fold(0, |mask, element| mask | (1u32 << element))
}

/// Element and fetch conflicts of `steps`' exchanges with allocations at
/// `base`; `code[tile]` is the byte range of the tile's exchange table.
pub fn count_conflicts(
    program: &LowProgram,
    steps: &[Step],
    base: &[u32],
    code: &[std::ops::Range<u32>],
) -> ElementConflicts {
    let code_masks: Vec<u32> = (0..program.tiles as usize)
        .map(|tile| {
            code.get(tile)
                .map_or(0, |range| span_mask(range.start, range.end))
        })
        .collect();
    let mut counter = Counter {
        program,
        base,
        accesses: vec![Vec::new(); program.tiles as usize],
        code: &code_masks,
        exchange: 0,
        result: ElementConflicts::default(),
    };
    counter.walk(steps, false);
    counter.result
}
