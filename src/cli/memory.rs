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

use crate::text::thousands;

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

/// "More tiles", unless every tile of the c600 is in use already.
fn more_tiles(tiles: Option<u32>) -> Option<String> {
    match tiles {
        Some(count) if count >= C600_TILES => None,
        Some(count) => Some(format!(
            "use more tiles (machine.tiles, now {count}; the c600 has {C600_TILES})"
        )),
        None => Some(String::from("use more tiles (machine.tiles)")),
    }
}

/// A "does not fit" in two parts: what does not fit, and what to change.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shortage {
    /// The message, without a leading `error: `.
    pub message: String,
    /// What to change, one line.
    pub help: String,
}

impl Shortage {
    /// The whole message as the terminal shows it, with the memory model.
    pub fn render(&self) -> String {
        format!(
            "error: {}\n  help: {}\n  note: {MEMORY_MODEL}",
            self.message, self.help
        )
    }
}

/// The placement's "does not fit", in the terms of the memory model.
pub fn placement_message(error: &PlacementError, tiles: Option<u32>) -> String {
    placement_shortage(error, tiles).render()
}

/// The layout planner's "does not fit", in the terms of the memory model
/// (any other layout error as it is).
pub fn layout_message(error: &LayoutError, tiles: Option<u32>) -> String {
    match layout_shortage(error, tiles) {
        Some(shortage) => shortage.render(),
        None => format!("error: {error}"),
    }
}

/// The placement's "does not fit", in two parts.
pub fn placement_shortage(error: &PlacementError, tiles: Option<u32>) -> Shortage {
    match error {
        PlacementError::DoesNotFit {
            tile,
            region,
            capacity,
            bytes_over,
            reserved,
            tiles_over,
            first_tiles_over,
            largest_live,
            hint,
            ..
        } => {
            let live: Vec<String> = largest_live
                .iter()
                .map(|live| format!("{} {} B", live.name, thousands(u64::from(live.bytes))))
                .collect();
            let mut listed = first_tiles_over
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ");
            let unlisted = (*tiles_over as usize).saturating_sub(first_tiles_over.len());
            if unlisted > 0 {
                listed.push_str(&format!(" and {} more", thousands(unlisted as u64)));
            }
            let mut help = vec![hint.clone()];
            help.extend(more_tiles(tiles));
            Shortage {
                message: format!(
                    "the model does not fit: {region} of tile {tile} holds {} bytes for this \
                     data and needs {} more; {} tile(s) over: {}. The tile has {} usable of its {} \
                     bytes of SRAM; {} of them hold its exchange table and patch lists. Largest live \
                     allocations there: {}",
                    thousands(u64::from(*capacity)),
                    thousands(u64::from(*bytes_over)),
                    thousands(u64::from(*tiles_over)),
                    listed,
                    thousands(u64::from(USABLE_BYTES)),
                    thousands(u64::from(SRAM_BYTES_PER_TILE)),
                    thousands(u64::from(*reserved)),
                    live.join(", "),
                ),
                help: help.join("; "),
            }
        }
        PlacementError::ReservationTooLarge { .. } => Shortage {
            message: error.to_string(),
            help: String::from(
                "use fewer layers (workload.layers) so fewer exchange phases need rows",
            ),
        },
    }
}

/// The layout planner's "does not fit", in two parts; `None` for a layout
/// error that is not about memory.
pub fn layout_shortage(error: &LayoutError, tiles: Option<u32>) -> Option<Shortage> {
    match error {
        LayoutError::WeightsDoNotFit {
            tile,
            needed,
            available,
        } => Some(Shortage {
            message: format!(
                "the resident weights need {} bytes on tile {tile}, but only {} bytes per tile \
                 remain for data (638,976 bytes of SRAM less planning.reserved_bytes_per_tile)",
                thousands(*needed),
                thousands(*available),
            ),
            help: advice(tiles),
        }),
        LayoutError::DoesNotFit(shortfall) => Some(Shortage {
            message: shortfall.to_string(),
            help: shortfall.advice(),
        }),
        _ => None,
    }
}
