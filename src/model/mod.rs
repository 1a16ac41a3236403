//! Workloads: model configurations, the ViT graph builder, the graph's data
//! types, weights (seeded or from SafeTensors).

pub mod builder;
pub mod config;
pub mod graph;
pub mod safetensors;
pub mod weights;
