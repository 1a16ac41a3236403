//! Workloads: model configurations, the ViT graph builder, the graph's data
//! types, weights (seeded or from SafeTensors) and the checkpoint namings
//! of the reference libraries.

pub mod builder;
pub mod checkpoint;
pub mod config;
pub mod graph;
pub mod quantisation;
pub mod safetensors;
pub mod weights;
