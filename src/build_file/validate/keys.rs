//! The build-file keys validation names (a diagnostic's field, a value's
//! origin), each the table's own key read in a constant
//! (`fields::known`): a key the table lacks, or a typo, fails to compile,
//! so validation and the table of fields cannot disagree.

use crate::build_file::fields::known;

pub(super) const CACHE_REMOTE: &str = known("cache.remote");
pub(super) const CACHE_REMOTE_DEADLINE_MS: &str = known("cache.remote_deadline_ms");
pub(super) const CACHE_REMOTE_TIMEOUT_MS: &str = known("cache.remote_timeout_ms");
pub(super) const CACHE_TRUSTED_KEYS: &str = known("cache.trusted_keys");
pub(super) const MACHINE_CALIBRATION: &str = known("machine.calibration");
pub(super) const MACHINE_PRESET: &str = known("machine.preset");
pub(super) const MACHINE_TILES: &str = known("machine.tiles");
pub(super) const OUTPUTS_DIRECTORY: &str = known("outputs.directory");
pub(super) const PLANNING_ACCUMULATION: &str = known("planning.accumulation");
pub(super) const PLANNING_ACTIVATION_SCALE: &str = known("planning.activation_scale");
pub(super) const PLANNING_FUSION: &str = known("planning.fusion");
pub(super) const PLANNING_MATRIX_INPUTS: &str = known("planning.matrix_inputs");
pub(super) const PLANNING_MATRIX_INPUTS_BY_OP: &str = known("planning.matrix_inputs_by_op");
pub(super) const PLANNING_MAX_PARTITION_CANDIDATES: &str =
    known("planning.max_partition_candidates");
pub(super) const PLANNING_RESERVED_BYTES_PER_TILE: &str = known("planning.reserved_bytes_per_tile");
pub(super) const SCHEDULE_POLICY: &str = known("schedule.policy");
pub(super) const SCHEDULE_ROW_ALLOWANCE: &str = known("schedule.row_allowance");
pub(super) const SCHEDULE_WIDTH: &str = known("schedule.width");
pub(super) const WORKLOAD_ATTENTION: &str = known("workload.attention");
pub(super) const WORKLOAD_BATCH: &str = known("workload.batch");
pub(super) const WORKLOAD_CALIBRATION: &str = known("workload.calibration");
pub(super) const WORKLOAD_CLASS_TOKEN: &str = known("workload.class_token");
pub(super) const WORKLOAD_GELU: &str = known("workload.gelu");
pub(super) const WORKLOAD_HEADS: &str = known("workload.heads");
pub(super) const WORKLOAD_LAYER_NORM_EPSILON: &str = known("workload.layer_norm_epsilon");
pub(super) const WORKLOAD_LAYERS: &str = known("workload.layers");
pub(super) const WORKLOAD_MLP: &str = known("workload.mlp");
pub(super) const WORKLOAD_MODEL: &str = known("workload.model");
pub(super) const WORKLOAD_PATCH: &str = known("workload.patch");
pub(super) const WORKLOAD_PATCHES: &str = known("workload.patches");
pub(super) const WORKLOAD_POOLING: &str = known("workload.pooling");
pub(super) const WORKLOAD_POOLING_HEADS: &str = known("workload.pooling_heads");
pub(super) const WORKLOAD_PROJECTION: &str = known("workload.projection");
pub(super) const WORKLOAD_ROTARY: &str = known("workload.rotary");
pub(super) const WORKLOAD_WEIGHTS: &str = known("workload.weights");
pub(super) const WORKLOAD_WEIGHTS_NAMING: &str = known("workload.weights.naming");
pub(super) const WORKLOAD_WEIGHTS_SAFETENSORS: &str = known("workload.weights.safetensors");
pub(super) const WORKLOAD_WEIGHTS_SEEDED: &str = known("workload.weights.seeded");
pub(super) const WORKLOAD_WIDTH: &str = known("workload.width");
