//! Per-tile address assignment from live ranges: greedy, blocks confined to
//! one region (interleaved operands, code) before ordinary data and each
//! group largest first, each block at the lowest aligned address of its class's range
//! that no already-placed, simultaneously live block occupies. Iterated
//! allocations are one block of `iterations * bytes`, so their instances are
//! equal, consecutive and strided by `bytes`. Reservations (the exchange
//! table as code in region 0 first, then the patch lists) are live
//! throughout and placed before anything else.
//!
//! Memory elements: a block is kept out of the elements of the blocks it
//! must stay apart from (`super::separation`: sent and received by one
//! exchange) by treating those blocks as occupying their whole elements,
//! and a block an exchange touches starts past the elements holding the
//! exchange code. A block that cannot be placed so is placed without
//! these constraints (its conflicts are then counted by `super::conflicts`),
//! and a tile that does not fit with them is placed without them.
//!
//! Paired receives: a block may come with a preferred address (its partner
//! tile's linked block's, `super::separation`); such blocks are placed
//! first, at that address when it is free, aligned and in range, else as
//! any other. The lower tile of a pair places its linked blocks above its
//! partner's reservations too ([`PartnerFloor`]): the partner's data starts
//! there, so an address below it is one the partner can never take. A tile
//! that does not fit so is placed without preferences or partner floor.
//!
//! Owns the address choice for one tile; it must not compute liveness or
//! judge the result (`check` does that independently).

use super::separation::Separation;
use crate::expand::program::LowProgram;
use crate::target::memory::{
    LOADABLE_LIMIT, MemoryClass, TILE_BASE_ADDRESS, element_bounds, element_of,
};

/// One block to place on a tile.
#[derive(Clone, Copy, Debug)]
pub struct Block {
    /// Allocation root id.
    pub allocation: u32,
    pub bytes: u32,
    pub alignment: u32,
    pub class: MemoryClass,
    pub first: u32,
    pub last: u32,
}

/// A block that could not be placed.
#[derive(Clone, Copy, Debug)]
pub struct Failure {
    pub block: Block,
}

/// Placed blocks: `(allocation, base)`.
pub type Assigned = Vec<(u32, u32)>;

fn align_up(address: u64, alignment: u32) -> u64 {
    let alignment = alignment.max(1) as u64;
    address.div_ceil(alignment) * alignment
}

/// What keeps a tile's blocks in separate memory elements.
#[derive(Clone, Copy)]
pub struct ElementRules<'a> {
    pub separation: &'a Separation,
    /// End of the tile's exchange code (the exchange table); exchanged
    /// blocks start past its last element. `None`: no code.
    pub code_end: Option<u32>,
    /// `(allocation root, address)` where a block should go (its paired
    /// partner's address), sorted by root.
    pub preferred: &'a [(u32, u32)],
    /// Where the partner tile's data starts, for the blocks the partner
    /// will want at the same address.
    pub partner_floor: Option<PartnerFloor<'a>>,
}

/// The partner tile's lowest data addresses, which a linked block (one the
/// partner places at the same address) keeps above.
#[derive(Clone, Copy)]
pub struct PartnerFloor<'a> {
    /// Per allocation root: whether the partner links a block to it.
    pub linked: &'a [bool],
    /// End of the partner's reservations.
    pub reserved_end: u32,
    /// End of the partner's exchange code, if it has any.
    pub code_end: Option<u32>,
}

/// The byte range of the elements `start..end` touches.
fn element_span(start: u64, end: u64) -> (u64, u64) {
    if end <= start {
        return (start, end);
    }
    let clamp = |address: u64| address.min(u64::from(u32::MAX)) as u32;
    let first = element_bounds(element_of(clamp(start))).start;
    let last = element_bounds(element_of(clamp(end - 1))).end;
    (u64::from(first).min(start), u64::from(last).max(end))
}

/// Addresses for `blocks` on one tile, above `reserved_end` (the end of the
/// tile's reservations, which start at the tile base), keeping the memory
/// element rules where the tile's memory allows.
pub fn place_tile(
    blocks: Vec<Block>,
    reserved_end: u32,
    rules: Option<ElementRules>,
) -> Result<Assigned, Failure> {
    match rules {
        Some(rules) => place_blocks(blocks.clone(), reserved_end, Some(rules))
            .or_else(|_| {
                let unpaired = ElementRules {
                    preferred: &[],
                    partner_floor: None,
                    ..rules
                };
                place_blocks(blocks.clone(), reserved_end, Some(unpaired))
            })
            .or_else(|_| place_blocks(blocks, reserved_end, None)),
        None => place_blocks(blocks, reserved_end, None),
    }
}

/// The lowest address at or above `lowest` where `block` fits between
/// `busy` intervals (sorted), or `None` past `limit`.
fn first_fit(block: &Block, lowest: u64, busy: &[(u64, u64)], limit: u64) -> Option<u64> {
    let mut candidate = align_up(lowest, block.alignment);
    for &(start, end) in busy {
        if candidate + block.bytes as u64 <= start {
            break;
        }
        if end > candidate {
            candidate = align_up(end, block.alignment);
        }
    }
    (candidate + block.bytes as u64 <= limit).then_some(candidate)
}

fn place_blocks(
    mut blocks: Vec<Block>,
    reserved_end: u32,
    rules: Option<ElementRules>,
) -> Result<Assigned, Failure> {
    // Blocks confined to one region first (they have nowhere else to go),
    // then ordinary data, which fills what they leave in either region.
    let confined = |block: &Block| block.class != MemoryClass::Standard;
    let preferred: &[(u32, u32)] = rules.map_or(&[], |rules| rules.preferred);
    let preference = |block: &Block| {
        preferred
            .binary_search_by_key(&block.allocation, |&(root, _)| root)
            .ok()
            .map(|index| u64::from(preferred[index].1))
    };
    blocks.sort_by(|left, right| {
        preference(right)
            .is_some()
            .cmp(&preference(left).is_some())
            .then(confined(right).cmp(&confined(left)))
            .then(right.bytes.cmp(&left.bytes))
            .then(left.first.cmp(&right.first))
            .then(left.allocation.cmp(&right.allocation))
    });
    // Placed: (start, end, first, last, allocation).
    let mut placed: Vec<(u64, u64, u32, u32, u32)> = Vec::with_capacity(blocks.len());
    let mut assigned = Vec::with_capacity(blocks.len());
    let mut busy: Vec<(u64, u64)> = Vec::new();
    let mut plain: Vec<(u64, u64)> = Vec::new();
    for block in blocks {
        busy.clear();
        plain.clear();
        for &(start, end, first, last, allocation) in &placed {
            if first > block.last || block.first > last {
                continue;
            }
            plain.push((start, end));
            let apart = rules
                .is_some_and(|rules| rules.separation.kept_apart(block.allocation, allocation));
            busy.push(if apart {
                element_span(start, end)
            } else {
                (start, end)
            });
        }
        busy.sort_unstable();
        plain.sort_unstable();
        let range = block.class.address_range();
        let lowest = (range.start as u64).max(reserved_end as u64);
        let limit = range.end as u64;
        let past_code = |lowest: u64, code_end: Option<u32>| match (rules, code_end) {
            (Some(rules), Some(code_end)) if rules.separation.is_exchanged(block.allocation) => {
                lowest.max(element_span(u64::from(code_end) - 1, u64::from(code_end)).1)
            }
            _ => lowest,
        };
        let mut constrained_lowest = past_code(lowest, rules.and_then(|rules| rules.code_end));
        // A block the partner tile wants at the same address starts where
        // the partner's data may (`PartnerFloor`).
        if let Some(floor) = rules.and_then(|rules| rules.partner_floor)
            && floor
                .linked
                .get(block.allocation as usize)
                .copied()
                .unwrap_or(false)
        {
            let partner_lowest = (range.start as u64).max(u64::from(floor.reserved_end));
            constrained_lowest = constrained_lowest.max(past_code(partner_lowest, floor.code_end));
        }
        let wanted = preference(&block).filter(|&address| {
            let end = address + block.bytes as u64;
            address >= constrained_lowest
                && address.is_multiple_of(u64::from(block.alignment.max(1)))
                && end <= limit
                && busy
                    .iter()
                    .all(|&(start, stop)| stop <= address || end <= start)
        });
        let candidate = wanted
            .or_else(|| first_fit(&block, constrained_lowest, &busy, limit))
            .or_else(|| first_fit(&block, lowest, &plain, limit))
            .ok_or(Failure { block })?;
        placed.push((
            candidate,
            candidate + block.bytes as u64,
            block.first,
            block.last,
            block.allocation,
        ));
        assigned.push((block.allocation, candidate as u32));
    }
    Ok(assigned)
}

/// Usable bytes of a tile for data (tile base to the loadable limit).
pub const USABLE_BYTES: u32 = LOADABLE_LIMIT - TILE_BASE_ADDRESS;

/// Blocks of every placed allocation root, by tile.
pub fn blocks_by_tile(program: &LowProgram, ranges: &[Option<(u32, u32)>]) -> Vec<Vec<Block>> {
    // An alias root's block covers its largest member, aligned for all.
    let mut footprint: Vec<(u64, u32)> = program
        .allocations
        .iter()
        .map(|allocation| {
            (
                allocation.bytes as u64 * allocation.iterations.max(1) as u64,
                allocation.alignment,
            )
        })
        .collect();
    for (id, allocation) in program.allocations.iter().enumerate() {
        let root = allocation.alias_group as usize;
        if root != id && root < footprint.len() {
            let (bytes, alignment) = footprint[id];
            footprint[root].0 = footprint[root].0.max(bytes);
            footprint[root].1 = footprint[root].1.max(alignment);
        }
    }
    let mut tiles: Vec<Vec<Block>> = vec![Vec::new(); program.tiles as usize];
    for (id, range) in ranges.iter().enumerate() {
        let Some((first, last)) = *range else {
            continue;
        };
        let allocation = &program.allocations[id];
        let bytes = footprint[id].0.min(u32::MAX as u64) as u32;
        if let Some(tile) = tiles.get_mut(allocation.tile as usize) {
            tile.push(Block {
                allocation: id as u32,
                bytes,
                alignment: footprint[id].1,
                class: allocation.class,
                first,
                last,
            });
        }
    }
    tiles
}
