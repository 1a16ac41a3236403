//! superstep's own naming: each value under its own name (iterated ones as
//! `layers.{i}.…`), shaped `[rows, cols]` exactly as the graph holds it.

use super::recipe::Recipe;

/// The SafeTensors name of one instance of a weight in superstep's naming.
pub fn tensor_name(value_name: &str, iterated: bool, instance: u32) -> String {
    match (iterated, value_name.strip_prefix("layer.")) {
        (true, Some(rest)) => format!("layers.{instance}.{rest}"),
        _ => value_name.to_string(),
    }
}

pub fn recipe(value: &str, layer: u32) -> Option<Recipe> {
    let iterated = value.starts_with("layer.");
    Some(Recipe::Exact(tensor_name(value, iterated, layer)))
}
