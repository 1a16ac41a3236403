//! The build file's capacity check: FP8 weights plus an activation
//! estimate against the SRAM the chosen tiles leave after the per-tile
//! reserve. It is a necessary condition only, checked before anything is
//! compiled (the layout planner and the placement decide); its bounds on
//! the batch and the layer count are what total bytes allow.
//!
//! This module owns that check and its wording.

use super::ACTIVATION_COPIES;
use crate::build_file::error::{Issue, Origin};
use crate::build_file::{MachineSettings, PlanningFlags, Workload};
use crate::model::config::ModelConfig;
use crate::target::mapping::C600_TILES;
use crate::target::memory::SRAM_BYTES_PER_TILE;
use crate::text::thousands as with_separators;

/// Where the values the fit check weighs came from (`None`: a default).
pub(super) struct FitSources {
    pub(super) model: Origin,
    pub(super) layers: Option<Origin>,
    pub(super) batch: Option<Origin>,
    pub(super) tiles: Option<Origin>,
}

/// The capacity check: FP8 weights plus an activation estimate against the
/// SRAM the chosen tiles leave after the per-tile reserve.
pub(super) fn check_fit(
    workload: &Workload,
    machine: &MachineSettings,
    planning: &PlanningFlags,
    sources: FitSources,
) -> Result<(), Issue> {
    let model = &workload.model;
    let weights = u128::from(model.weight_bytes(true));
    let activations_per_image =
        u128::from(model.tokens()) * u128::from(model.width) * 2 * ACTIVATION_COPIES;
    let activations = activations_per_image * u128::from(workload.batch);
    let needed = weights + activations;
    let per_tile = u128::from(SRAM_BYTES_PER_TILE.saturating_sub(planning.reserved_bytes_per_tile));
    let available = u128::from(machine.tiles) * per_tile;
    if needed <= available {
        return Ok(());
    }
    let tiles_needed = needed.div_ceil(per_tile.max(1));
    // Blame the value that makes it not fit: the batch when one image would
    // fit; else what the command line changed (tiles, then layers); else
    // the layers the file wrote; else the model.
    let one_image_fits = weights + activations_per_image <= available;
    let set = |origin: &Option<Origin>| matches!(origin, Some(Origin::Set(_)));
    let (field, origin) = match (&sources.batch, &sources.tiles, &sources.layers) {
        (Some(batch), _, _) if workload.batch > 1 && one_image_fits => {
            ("workload.batch", batch.clone())
        }
        (_, Some(tiles), _) if set(&sources.tiles) => ("machine.tiles", tiles.clone()),
        (_, _, Some(layers)) if set(&sources.layers) => ("workload.layers", layers.clone()),
        (_, _, Some(layers)) => ("workload.layers", layers.clone()),
        _ => ("workload.model", sources.model.clone()),
    };
    let subject = match field {
        "workload.layers" => format!(
            "workload.model = \"{}\" with workload.layers = {}",
            model.name, model.layers
        ),
        "workload.batch" => format!(
            "workload.model = \"{}\" at workload.batch = {}",
            model.name, workload.batch
        ),
        _ => format!("workload.model = \"{}\"", model.name),
    };
    let mut advice: Vec<String> = Vec::new();
    if field == "workload.batch" {
        let largest_batch = available.saturating_sub(weights) / activations_per_image.max(1);
        advice.push(format!(
            "use a batch of at most {} (workload.batch)",
            with_separators(largest_batch)
        ));
    }
    if tiles_needed <= u128::from(C600_TILES) && machine.tiles < C600_TILES {
        advice.push(format!("use at least {tiles_needed} tiles (machine.tiles)"));
    } else if machine.tiles >= C600_TILES {
        advice.push(format!(
            "it needs {} tiles at this reserve and the c600 has {C600_TILES}, all in use",
            with_separators(tiles_needed)
        ));
    } else {
        advice.push(format!(
            "it needs {} tiles at this reserve, more than the {C600_TILES} of the c600",
            with_separators(tiles_needed)
        ));
    }
    if field != "workload.batch" {
        advice.push(match largest_layers(model, activations, available) {
            Some(layers) => format!(
                "use at most {} layers (workload.layers; what total bytes allow at batch {})",
                with_separators(u128::from(layers)),
                workload.batch
            ),
            None => format!(
                "fewer layers do not help: one layer at batch {} does not fit either",
                workload.batch
            ),
        });
    }
    let more_tiles = advice.join(", ");
    Err(Issue::new(
        field,
        origin,
        format!(
            "{subject} does not fit on {} tiles: it needs about {} bytes ({} of FP8 weights and \
             {} of activations at batch {}) but {} tiles x {} bytes (638,976 bytes of SRAM less \
             planning.reserved_bytes_per_tile = {}) = {} bytes are available",
            machine.tiles,
            with_separators(needed),
            with_separators(weights),
            with_separators(activations),
            workload.batch,
            machine.tiles,
            with_separators(per_tile),
            with_separators(u128::from(planning.reserved_bytes_per_tile)),
            with_separators(available),
        ),
    )
    .label("does not fit")
    .help(format!(
        "{more_tiles}, or reduce planning.reserved_bytes_per_tile (now {}) to free SRAM per tile",
        planning.reserved_bytes_per_tile
    )))
}

/// The most layers of `model` whose weights and `activations` bytes fit
/// in `available` bytes by this check's total (`None` when even one does
/// not).
fn largest_layers(model: &ModelConfig, activations: u128, available: u128) -> Option<u32> {
    let bytes_with = |layers: u32| {
        let mut candidate = model.clone();
        candidate.layers = layers;
        u128::from(candidate.weight_bytes(true))
    };
    let fixed = bytes_with(0);
    let per_layer = bytes_with(1).saturating_sub(fixed).max(1);
    let room = available.checked_sub(fixed + activations)?;
    let layers = u32::try_from(room / per_layer).unwrap_or(u32::MAX);
    (layers >= 1).then_some(layers.min(model.layers))
}
