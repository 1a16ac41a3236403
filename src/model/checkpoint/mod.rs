//! Checkpoints as their libraries saved them: recognising the naming
//! (superstep's own, transformers' SigLIP, timm's ViT and PE-Core, Meta's
//! perception_models PE-Core), finding every value the build's graph needs
//! under its name there, checking its shape, and converting it to
//! superstep's layout (see `recipe`). A
//! checkpoint that lacks a tensor or has another configuration is refused
//! with the tensor named and, when the shapes say so, the configuration it
//! looks like.
//!
//! Owns names and conversions only: the values come back in f32, and
//! quantisation to the program's precisions stays with
//! `crate::model::weights`. One file per naming.

mod error;
mod module;
mod naming;
mod observed;
mod perception_models;
mod recipe;
mod superstep;
#[cfg(test)]
mod tests;
mod timm_pe_core;
mod timm_vit;
mod transformers_siglip;

use std::collections::BTreeMap;
use std::path::Path;

pub use error::CheckpointError;
pub use naming::Naming;
pub use observed::{Mismatch, ShapeSummary};
use recipe::RecipeFailure;
pub use superstep::tensor_name;

use crate::model::graph::{Graph, ValueId, ValueKind};
use crate::model::safetensors::SafeTensors;

/// Every weight of a graph in f32 (instances one after another for
/// iterated weights), and the input patches when the checkpoint has them.
#[derive(Debug)]
pub struct CheckpointValues {
    pub naming: Naming,
    pub tensors: BTreeMap<ValueId, Vec<f32>>,
    pub input: Option<Vec<f32>>,
}

/// The values of `graph`'s weights from `file` (read from `path`), in
/// `naming` or, when `None`, the naming the file's tensors show.
pub fn read_values(
    graph: &Graph,
    file: &SafeTensors,
    path: &Path,
    naming: Option<Naming>,
) -> Result<CheckpointValues, CheckpointError> {
    let (naming, prefix) = match naming {
        Some(naming) => (naming, naming.prefix_in(file).unwrap_or("")),
        None => Naming::detect(file).ok_or(CheckpointError::UnknownNaming)?,
    };
    check_pe_core_parts(graph, naming)?;
    let mismatch = || {
        Mismatch::between(
            ShapeSummary::of_checkpoint(file, naming, prefix, path),
            ShapeSummary::of_graph(graph),
        )
    };
    let instances = graph.repeat.as_ref().map_or(1, |repeat| repeat.iterations);
    let mut tensors = BTreeMap::new();
    let mut input = None;
    for id in graph.value_ids() {
        let value = graph.value(id);
        let (rows, cols) = (value.shape.rows as usize, value.shape.cols as usize);
        match value.kind {
            ValueKind::Weight { iterated } => {
                let count = if iterated { instances } else { 1 };
                let mut values = Vec::with_capacity(rows * cols * count as usize);
                for instance in 0..count {
                    let recipe = naming
                        .recipe(&value.name, instance, prefix)
                        .ok_or_else(|| CheckpointError::NoCounterpart {
                            naming,
                            value: value.name.clone(),
                        })?;
                    let read = recipe.read(file, rows, cols).map_err(|failure| {
                        let value_name = tensor_name(&value.name, iterated, instance);
                        failure_error(failure, naming, value_name, mismatch)
                    })?;
                    values.extend(read);
                }
                tensors.insert(id, values);
            }
            ValueKind::Input
                if naming == Naming::Superstep && file.shape(&value.name).is_some() =>
            {
                let read = recipe::Recipe::Exact(value.name.clone())
                    .read(file, rows, cols)
                    .map_err(|failure| {
                        failure_error(failure, naming, value.name.clone(), mismatch)
                    })?;
                input = Some(read);
            }
            _ => {}
        }
    }
    // Heads leave no trace in tensor shapes; a library config beside the
    // file is the one place they show.
    if let Some(mismatch) = mismatch()
        && mismatch.checkpoint.heads.is_some()
        && mismatch.checkpoint.heads != mismatch.model.heads
    {
        return Err(CheckpointError::Configuration { mismatch });
    }
    Ok(CheckpointValues {
        naming,
        tensors,
        input,
    })
}

/// A PE-Core naming read for a graph without PE-Core's pre-norm or
/// attention pool is refused ([`CheckpointError::PeCoreParts`]).
fn check_pe_core_parts(graph: &Graph, naming: Naming) -> Result<(), CheckpointError> {
    if !matches!(naming, Naming::TimmPeCore | Naming::PerceptionModelsPeCore) {
        return Ok(());
    }
    let has = |stem: &str| {
        graph
            .value_ids()
            .any(|id| graph.value(id).name.starts_with(stem))
    };
    let missing = if !has("head.probe") {
        "attention pool"
    } else if !has("embed.ln_pre") {
        "pre-norm (ln_pre)"
    } else {
        return Ok(());
    };
    Err(CheckpointError::PeCoreParts {
        naming,
        tensor: naming.signature()[naming.signature().len() - 1],
        missing,
    })
}

fn failure_error(
    failure: RecipeFailure,
    naming: Naming,
    value: String,
    mismatch: impl Fn() -> Option<Box<Mismatch>>,
) -> CheckpointError {
    match failure {
        RecipeFailure::Missing { tensor } => CheckpointError::MissingTensor {
            naming,
            tensor,
            value,
            mismatch: mismatch(),
        },
        RecipeFailure::Shape {
            tensor,
            expected,
            found,
        } => CheckpointError::ShapeMismatch {
            naming,
            tensor,
            value,
            expected,
            found,
            mismatch: mismatch(),
        },
        RecipeFailure::Tensor { tensor, source } => CheckpointError::Tensor { tensor, source },
    }
}
