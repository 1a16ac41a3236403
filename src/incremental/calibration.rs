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
use super::lowering::graph;
use super::on_disk::{cache_on_disk, persisted_by_bincode};
use crate::build_file::{ActivationScale, CalibrationInput, WeightSource};
use crate::cache::{CacheKey, Source};
use crate::model::weights::StreamedSeededWeights;
use crate::numerics::dot::{ProductInputs, ProductRecipe};
use crate::sim::calibration::{ActivationCalibration, SCALE_RANGE, calibrate, product_positions};
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
    /// The reference failed on the calibration input.
    #[error("activation calibration: the FP32 reference on the calibration input failed: {0}")]
    Reference(String),
}

/// Firewall: the calibration input when the build calibrates its FP8
/// activations' scales, `None` otherwise.
#[salsa::tracked(returns(ref))]
pub fn calibration_input(db: &dyn Db, build: BuildInputs) -> Option<CalibrationInput> {
    let planning = build.planning(db);
    match (&planning.matrix_inputs, &planning.activation_scale) {
        (MatrixInputs::Fp8, ActivationScale::Calibrate { input }) => Some(input.clone()),
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
        CalibrationInput::File { patches, .. } => Some(
            patches
                .iter()
                .map(|&bits| half::f16::from_bits(bits).to_f32())
                .collect::<Vec<f32>>(),
        ),
    };
    let source = build.weights(db);
    let fp8_scale = build.fp8_scale(db);
    let run = || -> Result<ActivationCalibration, CalibrationError> {
        match source {
            WeightSource::Seeded { seed } => {
                let parameters = StreamedSeededWeights::new(graph, *seed, fp8_scale, patches)
                    .map_err(|error| CalibrationError::Weights(error.to_string()))?;
                calibrate(graph, &parameters)
            }
            WeightSource::SafeTensors { .. } => {
                let weights = super::weights::weights(db, build)
                    .clone()
                    .map_err(|error| CalibrationError::Weights(error.to_string()))?;
                let mut weights = crate::model::weights::Weights::clone(&weights);
                if let Some(patches) = patches {
                    weights.input = patches;
                }
                calibrate(graph, &weights)
            }
        }
        .map_err(|error| CalibrationError::Reference(error.to_string()))
    };
    if source.is_checkpoint() {
        return run().map(Arc::new);
    }
    let positions = product_positions(graph);
    let key = || {
        Ok::<_, CalibrationError>(CacheKey::of(
            "activation calibration",
            &(
                build.model(db),
                build.batch(db),
                build.fuse_qkv(db),
                source,
                fp8_scale,
                &input,
            ),
        ))
    };
    let check = |calibration: &ActivationCalibration, _: Source| {
        let ops: Vec<&str> = calibration
            .positions
            .iter()
            .map(|position| position.op.as_str())
            .collect();
        if ops != positions.iter().map(String::as_str).collect::<Vec<_>>() {
            return Err(format!(
                "its positions {ops:?} are not the graph's products {positions:?}"
            ));
        }
        match calibration
            .positions
            .iter()
            .find(|position| !SCALE_RANGE.contains(&i32::from(position.scale)))
        {
            Some(position) => Err(format!(
                "position `{}` has scale {}, beyond {SCALE_RANGE:?}",
                position.op, position.scale
            )),
            None => Ok(()),
        }
    };
    cache_on_disk(db, key, check, run).map(Arc::new)
}

/// Each product's inputs: the build's precision for every product and,
/// for FP8, the fixed scale or each position's calibrated one.
#[salsa::tracked(returns(ref))]
pub fn product_recipe(
    db: &dyn Db,
    build: BuildInputs,
) -> Result<Arc<ProductRecipe>, CalibrationError> {
    let planning = build.planning(db);
    if calibration_input(db, build).is_none() {
        return Ok(Arc::new(ProductRecipe::uniform(planning.uniform_inputs())));
    }
    let calibration = activation_calibration(db, build).clone()?;
    Ok(Arc::new(calibrated_recipe(&calibration)))
}

/// The recipe of FP8 products at their calibrated scales; a product the
/// calibration did not see (there is none: every product of the graph is a
/// position) takes the largest scale any position needed.
pub fn calibrated_recipe(calibration: &ActivationCalibration) -> ProductRecipe {
    let widest = calibration
        .positions
        .iter()
        .map(|position| position.scale)
        .max()
        .unwrap_or(crate::build_file::validate::DEFAULT_ACTIVATION_SCALE);
    ProductRecipe {
        default: ProductInputs::Fp8 {
            activation_scale: widest,
        },
        by_op: calibration
            .positions
            .iter()
            .map(|position| {
                (
                    position.op.clone(),
                    ProductInputs::Fp8 {
                        activation_scale: position.scale,
                    },
                )
            })
            .collect(),
    }
}
