//! The build's parameter values as a query: seeded, or read from the
//! SafeTensors file the build names, quantised with the build's FP8 scale.
//!
//! Only the functional simulators (`run`, `simulate`) read it; no compiler
//! query does, so a new FP8 scale re-runs this query and the package's
//! scale field and nothing of the compiler (the scale firewall). The file
//! is read when the query first runs in a session: a session that should
//! see a rewritten file is a new process (`run` and `simulate` are).

use std::path::PathBuf;
use std::sync::Arc;

use super::database::Db;
use super::inputs::BuildInputs;
use super::model_graph::graph;
use crate::build_file::WeightSource;
use crate::model::weights::Weights;

/// Why the weights could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WeightsError {
    /// The SafeTensors file could not be read or does not fit the model.
    #[error("{message}")]
    File { path: PathBuf, message: String },
    /// Seeded weights could not be made for this graph.
    #[error("{message}")]
    Seeded { message: String },
}

/// The parameter values and the host input of the build's graph. Not
/// compared when re-run (`no_eq`): comparing hundreds of megabytes to
/// backdate would cost more than what reads them.
#[salsa::tracked(returns(ref), no_eq)]
pub fn weights(db: &dyn Db, build: BuildInputs) -> Result<Arc<Weights>, WeightsError> {
    let source = build.weights(db);
    source
        .load(graph(db, build), build.fp8_scale(db))
        .map(Arc::new)
        .map_err(|error| match source {
            WeightSource::SafeTensors { path, .. } => WeightsError::File {
                path: path.clone(),
                message: error.to_string(),
            },
            WeightSource::Seeded { .. } => WeightsError::Seeded {
                message: error.to_string(),
            },
        })
}
