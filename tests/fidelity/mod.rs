//! Shared helpers: fixture paths, a fixture's metadata, and the agreement
//! bounds every library comparison uses.

mod checkpoints;
mod host_io;
mod pe_core;

use std::path::{Path, PathBuf};

use superstep::model::safetensors::SafeTensors;
use superstep::sim::compare::{Agreement, compare};

/// FP32 rounding over a few layers: the bound of `WORKLOADS.md`'s "to FP32
/// rounding" (library float32 against float64 differs by about 1e-6).
pub const MINIMUM_COSINE: f64 = 0.99999;

pub fn fixture(relative: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(relative)
}

pub fn read_fixture(relative: &str) -> SafeTensors {
    SafeTensors::read(&fixture(relative)).expect("fixture")
}

/// An integer from the fixture's `__metadata__`.
pub fn metadata_number(file: &SafeTensors, key: &str) -> i64 {
    file.metadata()
        .get(key)
        .unwrap_or_else(|| panic!("metadata `{key}`"))
        .parse()
        .unwrap_or_else(|_| panic!("metadata `{key}` is not an integer"))
}

/// The whole tensor `name`, whatever its shape.
pub fn tensor(file: &SafeTensors, name: &str) -> Vec<f32> {
    let shape = file.shape(name).expect(name).to_vec();
    file.tensor_f32(name, &shape).expect(name)
}

/// Compares and prints (visible with `--nocapture`).
pub fn agreement(label: &str, computed: &[f32], expected: &[f32]) -> Agreement {
    assert_eq!(computed.len(), expected.len(), "{label}: element counts");
    let agreement = compare(computed, expected);
    println!(
        "{label}: cosine {:.9}, max abs error {:.3e}",
        agreement.cosine, agreement.max_abs_error
    );
    agreement
}
