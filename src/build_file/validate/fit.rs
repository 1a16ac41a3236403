//! The build file's capacity check: FP8 weights plus an activation
//! estimate against the SRAM the chosen tiles leave after the per-tile
//! reserve. It is a necessary condition only, checked before anything is
//! compiled (the layout planner and the placement decide), so its help
//! names the levers and no value: what total bytes allow may still not
//! fit. `superstep build` answers a failed check by building smaller
//! candidates ([`Capacity`] gives it the shortfall).
//!
//! This module owns that check and its wording.

use super::keys::*;
use crate::build_file::error::{Issue, Origin};
use crate::build_file::{MachineSettings, PlanningFlags, Workload};
use crate::target::mapping::C600_TILES;
use crate::target::memory::SRAM_BYTES_PER_TILE;
use crate::text::thousands as with_separators;

/// The activation estimate of the fit check: tokens x width x 2 bytes x batch
/// x this many live copies.
const ACTIVATION_COPIES: u128 = 4;

/// Where the values the fit check weighs came from (`None`: a default).
pub(super) struct FitSources {
    pub(super) model: Origin,
    pub(super) layers: Option<Origin>,
    pub(super) batch: Option<Origin>,
    pub(super) tiles: Option<Origin>,
}

/// What the capacity check weighs: the bytes a configuration needs by its
/// FP8 weights and activation estimate, and what its tiles leave.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Capacity {
    pub weights: u128,
    pub activations_per_image: u128,
    pub activations: u128,
    pub needed: u128,
    /// SRAM per tile after `planning.reserved_bytes_per_tile`.
    pub per_tile: u128,
    pub available: u128,
}

impl Capacity {
    /// The capacity check's figures for a configuration.
    pub fn of(workload: &Workload, machine: &MachineSettings, planning: &PlanningFlags) -> Self {
        let model = &workload.model;
        let weights = u128::from(model.weight_bytes(true));
        let activations_per_image =
            u128::from(model.tokens()) * u128::from(model.width) * 2 * ACTIVATION_COPIES;
        let activations = activations_per_image * u128::from(workload.batch);
        let per_tile =
            u128::from(SRAM_BYTES_PER_TILE.saturating_sub(planning.reserved_bytes_per_tile));
        Capacity {
            weights,
            activations_per_image,
            activations,
            needed: weights + activations,
            per_tile,
            available: u128::from(machine.tiles) * per_tile,
        }
    }

    /// Whether the configuration passes the check (a necessary condition
    /// only: the planner and the placement decide).
    pub fn passes(&self) -> bool {
        self.needed <= self.available
    }

    /// The shortfall in words: what is needed against what is available.
    pub fn shortfall(&self, tiles: u32, batch: u32, reserved_bytes_per_tile: u32) -> String {
        format!(
            "it needs about {} bytes ({} of FP8 weights and {} of activations at batch {batch}) \
             but {tiles} tiles x {} bytes (638,976 bytes of SRAM less \
             planning.reserved_bytes_per_tile = {}) = {} bytes are available",
            with_separators(self.needed),
            with_separators(self.weights),
            with_separators(self.activations),
            with_separators(self.per_tile),
            with_separators(u128::from(reserved_bytes_per_tile)),
            with_separators(self.available),
        )
    }
}

/// The capacity check: FP8 weights plus an activation estimate against the
/// SRAM the chosen tiles leave after the per-tile reserve. Its help names
/// the levers, not values: a value that total bytes allow may still not
/// fit, and only `superstep build` (which builds candidates through
/// placement, `crate::cli::fit`) names the values that do.
pub(super) fn check_fit(
    workload: &Workload,
    machine: &MachineSettings,
    planning: &PlanningFlags,
    sources: FitSources,
) -> Result<(), Issue> {
    let model = &workload.model;
    let capacity = Capacity::of(workload, machine, planning);
    if capacity.passes() {
        return Ok(());
    }
    // Blame the value that makes it not fit: the batch when one image would
    // fit; else what the command line changed (tiles, then layers); else
    // the layers the file wrote; else the model.
    let one_image_fits = capacity.weights + capacity.activations_per_image <= capacity.available;
    let set = |origin: &Option<Origin>| matches!(origin, Some(Origin::Set(_)));
    let (field, origin) = match (&sources.batch, &sources.tiles, &sources.layers) {
        (Some(batch), _, _) if workload.batch > 1 && one_image_fits => {
            (WORKLOAD_BATCH, batch.clone())
        }
        (_, Some(tiles), _) if set(&sources.tiles) => (MACHINE_TILES, tiles.clone()),
        (_, _, Some(layers)) if set(&sources.layers) => (WORKLOAD_LAYERS, layers.clone()),
        (_, _, Some(layers)) => (WORKLOAD_LAYERS, layers.clone()),
        _ => (WORKLOAD_MODEL, sources.model.clone()),
    };
    let subject = match field {
        WORKLOAD_LAYERS => format!(
            "workload.model = \"{}\" with workload.layers = {}",
            model.name, model.layers
        ),
        WORKLOAD_BATCH => format!(
            "workload.model = \"{}\" at workload.batch = {}",
            model.name, workload.batch
        ),
        _ => format!("workload.model = \"{}\"", model.name),
    };
    let mut levers: Vec<String> = Vec::new();
    if workload.batch > 1 {
        levers.push(String::from("a smaller batch (workload.batch)"));
    }
    if model.layers > 1 {
        levers.push(String::from("fewer layers (workload.layers)"));
    }
    if machine.tiles < C600_TILES {
        levers.push(format!(
            "more tiles (machine.tiles, up to the c600's {})",
            with_separators(u128::from(C600_TILES))
        ));
    } else {
        levers.push(format!(
            "not more tiles: all {} of the c600 are in use",
            with_separators(u128::from(C600_TILES))
        ));
    }
    levers.push(format!(
        "a smaller planning.reserved_bytes_per_tile (now {})",
        with_separators(u128::from(planning.reserved_bytes_per_tile))
    ));
    Err(Issue::new(
        field,
        origin,
        format!(
            "{subject} does not fit on {} tiles: {}",
            machine.tiles,
            capacity.shortfall(
                machine.tiles,
                workload.batch,
                planning.reserved_bytes_per_tile
            ),
        ),
    )
    .label("does not fit")
    .help(format!(
        "what could make room: {}; `superstep build` builds smaller candidates through \
         placement and names the largest batch and layer count that fit",
        levers.join(", ")
    )))
}
