//! The build's graph as a query: the model's shaped SSA graph under the
//! build's batch and q/k/v fusion. Its own file so that the queries before
//! layouts (activation calibration) and the lowering queries both read it
//! without importing each other; `lowering` re-exports it.

use super::database::Db;
use super::inputs::BuildInputs;
use crate::model::builder::{GraphKnobs, build_graph};
use crate::model::graph::Graph;

#[salsa::tracked(returns(ref))]
pub fn graph(db: &dyn Db, build: BuildInputs) -> Graph {
    let knobs = GraphKnobs {
        batch: build.batch(db),
        fuse_qkv: build.fuse_qkv(db),
    };
    build_graph(build.model(db), knobs)
}
