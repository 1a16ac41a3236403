//! Making a packing counterfactual: the new piece order, the staging
//! buffers and where each piece's bytes are read and land, then the
//! problem's own coalescing over the new order. Linear in receives plus
//! one sort of the pieces.

use std::cmp::Ordering;

use super::copies::CopyRun;
use super::dependence::Independence;
use super::{Alternative, Packed, Refusal};
use crate::schedule::problem::{ExchangeProblem, LocalAllocation, SymbolicAddress, WORD_BYTES};

/// Byte alignment of a staging buffer (a paired transfer's).
const STAGING_ALIGNMENT: u32 = 8;

/// No staging buffer on this tile.
const NONE: u32 = u32::MAX;

/// `alternative` of `problem`, whose dependency structure is
/// `independence` (from [`super::independence`] of the same problem).
/// The staging alternatives are refused when some piece depends on an
/// earlier one.
pub fn pack(
    problem: &ExchangeProblem,
    alternative: Alternative,
    independence: &Independence,
) -> Result<Packed, Refusal> {
    if alternative.stages()
        && let Some(first) = independence.first
    {
        return Err(Refusal::Dependent {
            pieces: independence.pieces,
            dependent: independence.dependent,
            forwarding: independence.forwarding,
            first,
        });
    }
    let reordered = match alternative {
        Alternative::CoalescedPrefix => independence.prefix as usize,
        _ => problem.pieces(),
    };
    let order = new_order(problem, alternative, reordered);
    let mut packed = ExchangeProblem {
        tiles: problem.tiles,
        iterations: problem.iterations,
        allocations: problem.allocations.clone(),
        explicit_bindings: problem.explicit_bindings.clone(),
        destination_start: vec![0],
        ..ExchangeProblem::default()
    };
    let original_allocations = problem.allocations.len() as u32;
    let source_staging = if alternative.packs_sources() {
        staging_buffers(&mut packed, &sent_bytes(problem))
    } else {
        Vec::new()
    };
    let receive_staging = if alternative.stages_receivers() {
        staging_buffers(&mut packed, &received_bytes(problem))
    } else {
        Vec::new()
    };
    let mut source_cursor = vec![0u32; problem.tiles as usize];
    let mut receive_cursor = vec![0u32; problem.tiles as usize];
    let mut gathers = Vec::new();
    let mut scatters = Vec::new();
    let mut receivers: Vec<(u32, SymbolicAddress)> = Vec::new();
    for &piece in &order {
        let piece = piece as usize;
        let words = problem.words[piece];
        let bytes = words * WORD_BYTES;
        let source_tile = problem.source_tile[piece];
        let mut source = problem.source[piece];
        if alternative.packs_sources() {
            let staged = stage(&source_staging, &mut source_cursor, source_tile, bytes);
            gathers.push(CopyRun {
                tile: source_tile,
                from: source,
                to: staged,
                bytes,
            });
            source = staged;
        }
        receivers.clear();
        for receive in problem.receives_of(piece) {
            let tile = problem.destination_tile[receive];
            let mut destination = problem.destination[receive];
            if alternative.stages_receivers() {
                let staged = stage(&receive_staging, &mut receive_cursor, tile, bytes);
                scatters.push(CopyRun {
                    tile,
                    from: staged,
                    to: destination,
                    bytes,
                });
                destination = staged;
            }
            receivers.push((tile, destination));
        }
        packed.append_piece(source_tile, source, words, &receivers);
    }
    // The dependent tail keeps its pieces exactly (not joined onto the
    // prefix or to each other beyond what the original did).
    let prefix_pieces = packed.pieces() as u32;
    for piece in reordered..problem.pieces() {
        receivers.clear();
        receivers.extend(problem.receives_of(piece).map(|receive| {
            (
                problem.destination_tile[receive],
                problem.destination[receive],
            )
        }));
        packed.push_piece(
            problem.source_tile[piece],
            problem.source[piece],
            problem.words[piece],
            &receivers,
        );
    }
    scatters.sort_by_key(|run| (run.tile, run.from.offset));
    Ok(Packed {
        alternative,
        problem: packed,
        original_allocations,
        gathers,
        scatters,
        prefix_pieces: if alternative == Alternative::CoalescedPrefix {
            prefix_pieces
        } else {
            0
        },
    })
}

/// The order of the first `reordered` pieces: grouped by route (source
/// tile, then the receiving tiles in order), then by what makes the
/// unstaged end contiguous, then by original position.
fn new_order(problem: &ExchangeProblem, alternative: Alternative, reordered: usize) -> Vec<u32> {
    let route = |piece: usize| &problem.destination_tile[problem.receives_of(piece)];
    let first_destination = |piece: usize| problem.destination[problem.receives_of(piece).start];
    let within = |one: usize, other: usize| -> Ordering {
        match alternative {
            // The source is staged: order by where the bytes go.
            Alternative::SourcePacking => first_destination(one).cmp(&first_destination(other)),
            // Both ends staged: any order is contiguous; keep the original.
            Alternative::Both => Ordering::Equal,
            // The destination is staged or kept: order by where bytes come from.
            Alternative::ReceiverStaging | Alternative::CoalescedPrefix => {
                problem.source[one].cmp(&problem.source[other])
            }
        }
    };
    let mut order: Vec<u32> = (0..reordered as u32).collect();
    order.sort_unstable_by(|&one, &other| {
        let (one, other) = (one as usize, other as usize);
        problem.source_tile[one]
            .cmp(&problem.source_tile[other])
            .then_with(|| route(one).cmp(route(other)))
            .then_with(|| within(one, other))
            .then(one.cmp(&other))
    });
    order
}

/// Bytes each tile sends.
fn sent_bytes(problem: &ExchangeProblem) -> Vec<u64> {
    let mut bytes = vec![0u64; problem.tiles as usize];
    for piece in 0..problem.pieces() {
        bytes[problem.source_tile[piece] as usize] +=
            u64::from(problem.words[piece]) * u64::from(WORD_BYTES);
    }
    bytes
}

/// Bytes each tile receives.
fn received_bytes(problem: &ExchangeProblem) -> Vec<u64> {
    let mut bytes = vec![0u64; problem.tiles as usize];
    for piece in 0..problem.pieces() {
        for receive in problem.receives_of(piece) {
            bytes[problem.destination_tile[receive] as usize] +=
                u64::from(problem.words[piece]) * u64::from(WORD_BYTES);
        }
    }
    bytes
}

/// Adds one staging allocation per tile with bytes to stage (in tile
/// order); returns each tile's allocation or [`NONE`].
fn staging_buffers(packed: &mut ExchangeProblem, bytes: &[u64]) -> Vec<u32> {
    bytes
        .iter()
        .enumerate()
        .map(|(tile, &bytes)| {
            if bytes == 0 {
                return NONE;
            }
            let index = packed.allocations.len() as u32;
            packed.allocations.push(LocalAllocation {
                tile: tile as u32,
                bytes: bytes.next_multiple_of(u64::from(STAGING_ALIGNMENT)) as u32,
                iterations: 1,
                alignment: STAGING_ALIGNMENT,
                alias_root: index,
            });
            index
        })
        .collect()
}

/// The next `bytes` of `tile`'s staging buffer.
fn stage(buffers: &[u32], cursor: &mut [u32], tile: u32, bytes: u32) -> SymbolicAddress {
    let offset = cursor[tile as usize];
    cursor[tile as usize] += bytes;
    SymbolicAddress {
        allocation: buffers[tile as usize],
        offset,
    }
}
