//! The one model of per-tile memory the command line explains, and the
//! messages of a model that does not fit, in its terms.
//!
//! Each tile has 638,976 bytes of SRAM (`0x4c000..0xe8000`); the top 1,104
//! bytes (from `0xe7bb0`) cannot be loaded, so 637,872 bytes are usable.
//! `planning.reserved_bytes_per_tile` (default 65,536) is what the planner
//! keeps back for the exchange table, the patch lists and that unloadable
//! top: the fit check and the layout planner budget data into
//! 638,976 - reserved = 573,440 bytes per tile. Placement then puts each
//! tile's actual exchange table and patch lists at the bottom of its usable
//! bytes and places data in what is left.
//!
//! This module owns the wording only (the figures come from the errors of
//! the layout planner and the placement); it never decides what fits.

use crate::layout::planner::LayoutError;
use crate::place::PlacementError;
use crate::place::allocator::USABLE_BYTES;
use crate::target::mapping::C600_TILES;
use crate::target::memory::SRAM_BYTES_PER_TILE;

/// The model, for `--help` and messages.
pub const MEMORY_MODEL: &str = "Memory per tile: 638,976 bytes of SRAM, of which 637,872 are usable \
(the top 1,104 cannot be loaded). planning.reserved_bytes_per_tile (default 65,536) is kept back for \
the exchange table, the patch lists and that unloadable top, so the planner fits data into \
638,976 - reserved bytes (573,440 by default); placement puts each tile's actual exchange table and \
patch lists first and places data in the rest of the 637,872 usable bytes.";

fn thousands(value: u64) -> String {
    let digits = value.to_string();
    let mut out = String::new();
    for (index, character) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(character);
    }
    out
}

/// What to change, without suggesting more tiles when all are in use
/// (`tiles` is the build's tile count, when known).
fn advice(tiles: Option<u32>) -> String {
    let mut options = Vec::new();
    match tiles {
        Some(count) if count >= C600_TILES => {}
        Some(count) => options.push(format!(
            "use more tiles (machine.tiles, now {count}; the c600 has {C600_TILES})"
        )),
        None => options.push(String::from("use more tiles (machine.tiles)")),
    }
    options.push(String::from("fewer layers (workload.layers)"));
    options.push(String::from("a smaller batch (workload.batch)"));
    let mut text = options.join(", ");
    text.push_str(", or a smaller planning.reserved_bytes_per_tile");
    if tiles.is_some_and(|count| count >= C600_TILES) {
        text.push_str(&format!(" (all {C600_TILES} tiles are already in use)"));
    }
    text
}

/// The placement's "does not fit", in the terms of the memory model.
pub fn placement_message(error: &PlacementError, tiles: Option<u32>) -> String {
    match error {
        PlacementError::DoesNotFit {
            tile,
            bytes_over,
            reserved,
            largest_live,
            ..
        } => {
            let for_data = USABLE_BYTES.saturating_sub(*reserved);
            let live: Vec<String> = largest_live
                .iter()
                .map(|live| format!("{} {} B", live.name, thousands(u64::from(live.bytes))))
                .collect();
            format!(
                "error: the model does not fit: tile {tile} needs {} more bytes than the {} it has \
                 for data ({} usable of its {} bytes of SRAM, less {} for its exchange table and \
                 patch lists); largest live allocations there: {}\n  help: {}\n  note: {MEMORY_MODEL}",
                thousands(u64::from(*bytes_over)),
                thousands(u64::from(for_data)),
                thousands(u64::from(USABLE_BYTES)),
                thousands(u64::from(SRAM_BYTES_PER_TILE)),
                thousands(u64::from(*reserved)),
                live.join(", "),
                advice(tiles)
            )
        }
        PlacementError::ReservationTooLarge { .. } => format!(
            "error: {error}\n  help: raise planning.reserved_bytes_per_tile or use fewer phases\n  \
             note: {MEMORY_MODEL}"
        ),
    }
}

/// The layout planner's "weights do not fit", in the terms of the memory model.
pub fn layout_message(error: &LayoutError, tiles: Option<u32>) -> String {
    match error {
        LayoutError::WeightsDoNotFit {
            tile,
            needed,
            available,
        } => format!(
            "error: the resident weights need {} bytes on tile {tile}, but only {} bytes per tile \
             remain for data (638,976 bytes of SRAM less planning.reserved_bytes_per_tile)\n  \
             help: {}\n  note: {MEMORY_MODEL}",
            thousands(*needed),
            thousands(*available),
            advice(tiles)
        ),
        other => format!("error: {other}"),
    }
}
