//! Activation calibration and the product recipe as queries.
//!
//! `activation_calibration` runs the FP32 reference on the calibration
//! input (`crate::sim::calibration`) and is keyed by what it reads: the
//! graph, the weights (their source and FP8 scale) and the calibration
//! input, never the rest of the planning flags (a firewall query,
//! `calibration_input`, projects the one flag it needs). It is kept in the
//! persistent cache like the schedules, so a warm build does not run the
//! reference again. Seeded weights are streamed one layer at a time; a
//! checkpoint's are the `weights` query's (and its calibration is not kept
//! on disk: its key would have to digest the whole file).
//!
//! `product_recipe` turns the planning flags and, under calibration, the
//! calibrated scales into each product's inputs, which `layouts` plans.

use std::sync::Arc;

use super::database::Db;
use super::inputs::BuildInputs;
use super::model_graph::graph;
use super::on_disk::{cache_on_disk, persisted_by_bincode};
use crate::build_file::{ActivationScale, CalibrationInput, WeightSource};
use crate::cache::{CacheKey, Provenance};
use crate::model::weights::StreamedSeededWeights;
use crate::numerics::dot::ProductRecipe;
use crate::sim::calibration::{
    ActivationCalibration, SCALE_RANGE, calibrate_checked, product_positions,
};
use crate::target::kernel_cost::MatrixInputs;

persisted_by_bincode! {
    ActivationCalibration => Calibration,
}

/// Why calibration could not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalibrationError {
    /// The weights could not be made or read.
    #[error("activation calibration: {0}")]
    Weights(String),
    /// The calibration file cannot be read as the model's input.
    #[error("{0}")]
    Input(String),
    /// The reference failed on the calibration input.
    #[error("activation calibration: the FP32 reference on the calibration input failed: {0}")]
    Reference(String),
}

/// Firewall: the calibration input when the build calibrates the scales
/// of FP8 activations (some product takes FP8 inputs), `None` otherwise.
#[salsa::tracked(returns(ref))]
pub fn calibration_input(db: &dyn Db, build: BuildInputs) -> Option<CalibrationInput> {
    let planning = build.planning(db);
    let any_fp8 = planning.matrix_inputs == MatrixInputs::Fp8
        || planning
            .matrix_input_overrides
            .values()
            .any(|inputs| *inputs == MatrixInputs::Fp8);
    match &planning.activation_scale {
        ActivationScale::Calibrate { input } if any_fp8 => Some(input.clone()),
        _ => None,
    }
}

/// The calibration of every product position on the build's calibration
/// input (the seeded input when the build does not calibrate).
#[salsa::tracked(returns(ref))]
pub fn activation_calibration(
    db: &dyn Db,
    build: BuildInputs,
) -> Result<Arc<ActivationCalibration>, CalibrationError> {
    let graph = graph(db, build);
    let input = calibration_input(db, build)
        .clone()
        .unwrap_or(CalibrationInput::Seeded);
    let patches = match &input {
        CalibrationInput::Seeded => None,
        CalibrationInput::File { path } => Some(
            crate::host_io::patches::of_file(path, build.model(db), build.batch(db))
                .map_err(|message| {
                    CalibrationError::Input(format!(
                        "workload.calibration = \"{}\": {message}",
                        path.display()
                    ))
                })?
                .into_iter()
                .map(crate::numerics::half_float::round_f16)
                .collect::<Vec<f32>>(),
        ),
    };
    let source = build.weights(db);
    let fp8_scale = build.fp8_scale(db);
    let input_values = patches.clone();
    // The reference makes no query call: it checks for a cancelled build
    // before every op itself.
    let before_op = || db.unwind_if_revision_cancelled();
    let run = || -> Result<ActivationCalibration, CalibrationError> {
        match source {
            WeightSource::Seeded { seed } => {
                let parameters = StreamedSeededWeights::new(graph, *seed, fp8_scale, patches)
                    .map_err(|error| CalibrationError::Weights(error.to_string()))?;
                calibrate_checked(graph, &parameters, &before_op)
            }
            WeightSource::SafeTensors { path, .. } => {
                let weights = super::weights::weights(db, build).clone().map_err(|error| {
                    CalibrationError::Weights(format!(
                        "workload.weights.safetensors = \"{}\": {error}\n  \
                         help: name a SafeTensors file of this model's weights, or use weights = {{ seeded = 1 }}",
                        path.display()
                    ))
                })?;
                let mut weights = crate::model::weights::Weights::clone(&weights);
                if let Some(patches) = patches {
                    weights.input = patches;
                }
                calibrate_checked(graph, &weights, &before_op)
            }
        }
        .map_err(|error| CalibrationError::Reference(error.to_string()))
    };
    if source.is_checkpoint() {
        return run().map(Arc::new);
    }
    let positions = product_positions(graph);
    let key = || {
        Ok::<_, CalibrationError>(calibration_key(
            build.model(db),
            build.batch(db),
            build.fuse_qkv(db),
            source,
            fp8_scale,
            input_values.as_deref(),
        ))
    };
    let check = |calibration: &ActivationCalibration, _: Provenance| {
        let ops: Vec<&str> = calibration
            .positions
            .iter()
            .map(|position| position.op.as_str())
            .collect();
        if ops != positions.iter().map(String::as_str).collect::<Vec<_>>() {
            return Err(crate::cache::Refusal::Shape(format!(
                "its positions {ops:?} are not the graph's products {positions:?}"
            )));
        }
        match calibration
            .positions
            .iter()
            .find(|position| !SCALE_RANGE.contains(&i32::from(position.scale)))
        {
            Some(position) => Err(crate::cache::Refusal::Shape(format!(
                "position `{}` has scale {}, beyond {SCALE_RANGE:?}",
                position.op, position.scale
            ))),
            None => Ok(()),
        }
    };
    cache_on_disk(db, key, check, run).map(Arc::new)
}

/// The persistent cache's key of a calibration: what the graph is made
/// from (model, batch, fused q/k/v), the weights (seed and FP8 scale) and
/// the calibration input's values (`None`: the seeded input).
pub fn calibration_key(
    model: &crate::model::config::ModelConfig,
    batch: u32,
    fuse_qkv: bool,
    weights: &WeightSource,
    fp8_scale: crate::model::quantisation::Fp8Scale,
    input: Option<&[f32]>,
) -> CacheKey {
    let input: Option<Vec<u32>> =
        input.map(|values| values.iter().map(|value| value.to_bits()).collect());
    CacheKey::of(
        "activation calibration",
        &(model, batch, fuse_qkv, weights, fp8_scale, input),
    )
}

/// Each product's inputs: its precision (`planning.matrix_inputs` or the
/// product's override) and, for FP8, the fixed scale or its position's
/// calibrated one.
#[salsa::tracked(returns(ref))]
pub fn product_recipe(
    db: &dyn Db,
    build: BuildInputs,
) -> Result<Arc<ProductRecipe>, CalibrationError> {
    let planning = build.planning(db);
    let calibration = match calibration_input(db, build) {
        Some(_) => Some(activation_calibration(db, build).clone()?),
        None => None,
    };
    Ok(Arc::new(crate::sim::calibration::recipe(
        planning,
        calibration.as_deref(),
    )))
}
