//! Why a checkpoint could not give a model its weights. Every variant names
//! the tensor (as the checkpoint spells it) and the model value it was for,
//! so the message points at the one thing to fix.

use super::naming::Naming;
use super::observed::Mismatch;
use crate::model::safetensors::{SafeTensorsError, ShapeDisplay};

#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    #[error(
        "cannot tell which library saved this checkpoint: it has none of {}; \
         name it with weights = {{ safetensors = \"...\", naming = \"...\" }} ({})",
        Naming::ALL.map(|naming| format!("`{}` ({})", naming.signature()[0], naming.name())).join(", "),
        Naming::ALL.map(Naming::name).join(" | ")
    )]
    UnknownNaming,
    #[error(
        "the checkpoint ({naming} naming) has no tensor `{tensor}` (this model's `{value}`){}",
        Mismatch::sentence(mismatch)
    )]
    MissingTensor {
        naming: Naming,
        tensor: String,
        value: String,
        mismatch: Option<Box<Mismatch>>,
    },
    #[error(
        "the checkpoint's `{tensor}` ({naming} naming, this model's `{value}`) has shape {}, \
         the model needs {}{}",
        ShapeDisplay(found),
        ShapeDisplay(expected),
        Mismatch::sentence(mismatch)
    )]
    ShapeMismatch {
        naming: Naming,
        tensor: String,
        value: String,
        expected: Vec<usize>,
        found: Vec<usize>,
        mismatch: Option<Box<Mismatch>>,
    },
    #[error(
        "the {naming} naming has no tensor for this model's `{value}`: the checkpoint is of \
         another kind of model than this build (choose the preset it was saved from, or \
         another naming)"
    )]
    NoCounterpart { naming: Naming, value: String },
    /// A PE-Core checkpoint (it has an attention pool and a pre-norm) read
    /// for a model without them: its pool, pre-norm and projection would be
    /// ignored, and the embedding would not be the checkpoint's.
    #[error(
        "the checkpoint is PE-Core ({naming} naming: it has `{tensor}`), but this model has no \
         {missing}: its PE-Core parts would be ignored; build it with model = \"pe-core-l14\" \
         (or a custom model with pooling = \"attention\" and pre_norm = true)"
    )]
    PeCoreParts {
        naming: Naming,
        tensor: &'static str,
        missing: &'static str,
    },
    /// Every tensor fits, but the library's `config.json` beside the
    /// checkpoint says another number of heads (which no shape shows).
    #[error("{mismatch} (heads from the `config.json` beside the checkpoint)")]
    Configuration { mismatch: Box<Mismatch> },
    #[error("the checkpoint's `{tensor}`: {source}")]
    Tensor {
        tensor: String,
        source: SafeTensorsError,
    },
}
