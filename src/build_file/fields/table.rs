//! The table itself: every build-file key with its input, reader, kind,
//! default, choices and meaning, in the order the shipped build files
//! write them, and the check, when the crate compiles, that a key lands in
//! a build input exactly when it has a reader.

use super::vocabulary::{
    Field, Input, KeyKind, LAYOUT_OVERRIDE_PREFIX, MATRIX_INPUTS_OVERRIDE_PREFIX,
    PHASE_OVERRIDE_PREFIX, Reader,
};
use crate::build_file::{ActivationScale, CalibrationInput, WeightSource};
use crate::model::config::Positions;
use crate::target::kernel_cost::MatrixInputs;

const fn field(
    key: &'static str,
    input: Option<Input>,
    reader: Reader,
    kind: KeyKind,
    default: &'static str,
    allowed: &'static str,
    meaning: &'static str,
) -> Field {
    Field {
        key,
        input,
        reader,
        kind,
        default,
        allowed,
        choices: &[],
        meaning,
    }
}

const fn choice(
    key: &'static str,
    input: Option<Input>,
    reader: Reader,
    default: &'static str,
    choices: &'static [&'static str],
    meaning: &'static str,
) -> Field {
    Field {
        key,
        input,
        reader,
        kind: KeyKind::String,
        default,
        allowed: "",
        choices,
        meaning,
    }
}

const fn table(key: &'static str, meaning: &'static str) -> Field {
    field(key, None, Reader::Unread, KeyKind::Table, "", "", meaning)
}

use KeyKind::{Boolean, Float, Integer, Scale, StringArray, TableArray};
use Reader::{Entries, Member, Optional, Unread, Value};

/// Every key, tables before their keys, in the order the shipped build
/// files write them.
pub const FIELDS: &[Field] = &[
    field(
        "name",
        Some(Input::Name),
        Value(|query| query.name.clone()),
        KeyKind::String,
        "the file's name",
        "any non-empty name",
        "Names the artifacts folder: OUTPUTS/NAME/.",
    ),
    table(
        "workload",
        "What to compile: the model, its size and its weights.",
    ),
    choice(
        "workload.model",
        Some(Input::Model),
        Value(|query| query.workload.model.name.clone()),
        "(required)",
        &["siglip-so400m", "pe-core-l14", "vit-b16", "custom"],
        "The model preset; `custom` takes its shape from the keys below.",
    ),
    field(
        "workload.layers",
        Some(Input::Model),
        Value(|query| query.workload.model.layers.to_string()),
        Integer,
        "the preset's (27, 24, 12)",
        "1 or more",
        "Transformer layers.",
    ),
    field(
        "workload.batch",
        Some(Input::Batch),
        Value(|query| query.workload.batch.to_string()),
        Integer,
        "1",
        "1 or more",
        "Images per step.",
    ),
    field(
        "workload.fuse_qkv",
        Some(Input::FuseQkv),
        Value(|query| query.workload.fuse_qkv.to_string()),
        Boolean,
        "true",
        "true | false",
        "One fused q/k/v projection instead of three.",
    ),
    field(
        "workload.fp8_scale",
        Some(Input::Fp8Scale),
        Value(|query| query.workload.fp8_scale.to_string()),
        Scale,
        "-4",
        "-32..=32, or \"auto\"",
        "Weights are stored as FP8 x 2^fp8_scale; `auto`: per tensor and layer, the smallest scale that does not saturate.",
    ),
    field(
        "workload.calibration",
        Some(Input::Planning),
        Value(|query| match &query.planning.activation_scale {
            ActivationScale::Calibrate {
                input: CalibrationInput::File { path, .. },
            } => path.display().to_string(),
            _ => "(the seeded input)".to_string(),
        }),
        KeyKind::String,
        "(the seeded input)",
        "a PNG or JPEG photo, or a .npy array of pixels or patches, relative to the build file",
        "The input planning.activation_scale = \"calibrate\" runs the FP32 reference on.",
    ),
    choice(
        "workload.attention",
        Some(Input::Attention),
        Value(|query| format!("{:?}", query.workload.attention)),
        "auto",
        &["auto", "materialized", "flash"],
        "How attention is computed: all scores at once, key blocks (flash), or the cheaper that fits.",
    ),
    table(
        "workload.weights",
        "Where the weights come from: `{ seeded = N }` or `{ safetensors = \"FILE\" }`.",
    ),
    field(
        "workload.weights.seeded",
        Some(Input::Weights),
        Optional(|query| match &query.workload.weights {
            WeightSource::Seeded { seed } => Some(seed.to_string()),
            WeightSource::SafeTensors { .. } => None,
        }),
        Integer,
        "1",
        "any integer",
        "Deterministic weights from this seed, on the FP8 grid.",
    ),
    field(
        "workload.weights.safetensors",
        Some(Input::Weights),
        Optional(|query| match &query.workload.weights {
            WeightSource::SafeTensors { path, .. } => Some(path.display().to_string()),
            WeightSource::Seeded { .. } => None,
        }),
        KeyKind::String,
        "(none)",
        "a SafeTensors file or a sharded index, relative to the build file",
        "A checkpoint as its library saved it.",
    ),
    choice(
        "workload.weights.naming",
        Some(Input::Weights),
        Optional(|query| match &query.workload.weights {
            WeightSource::SafeTensors { naming, .. } => {
                Some(naming.map_or_else(|| "auto".to_string(), |naming| naming.to_string()))
            }
            WeightSource::Seeded { .. } => None,
        }),
        "auto",
        &[
            "auto",
            "superstep",
            "transformers-siglip",
            "timm-vit",
            "timm-pe-core",
            "perception-models-pe-core",
        ],
        "The checkpoint's tensor naming (auto: recognised from its tensors).",
    ),
    field(
        "workload.width",
        Some(Input::Model),
        Value(|query| query.workload.model.width.to_string()),
        Integer,
        "the preset's",
        "an even number, divisible by heads",
        "Hidden width (custom or any preset's shape).",
    ),
    field(
        "workload.mlp",
        Some(Input::Model),
        Value(|query| query.workload.model.mlp.to_string()),
        Integer,
        "the preset's",
        "an even number",
        "MLP hidden width.",
    ),
    field(
        "workload.heads",
        Some(Input::Model),
        Value(|query| query.workload.model.heads.to_string()),
        Integer,
        "the preset's",
        "1 or more, dividing width",
        "Attention heads.",
    ),
    field(
        "workload.patches",
        Some(Input::Model),
        Value(|query| query.workload.model.patches.to_string()),
        Integer,
        "the preset's",
        "a square number of patches (grid x grid)",
        "Patches per image.",
    ),
    field(
        "workload.patch",
        Some(Input::Model),
        Value(|query| query.workload.model.patch.to_string()),
        Integer,
        "the preset's",
        "an even number of pixels",
        "Patch side in pixels.",
    ),
    field(
        "workload.class_token",
        Some(Input::Model),
        Value(|query| query.workload.model.class_token.to_string()),
        Boolean,
        "the preset's",
        "true | false",
        "Prepend a class token.",
    ),
    choice(
        "workload.gelu",
        Some(Input::Model),
        Value(|query| format!("{:?}", query.workload.model.gelu)),
        "the preset's",
        &["tanh", "erf"],
        "The GELU approximation.",
    ),
    choice(
        "workload.pooling",
        Some(Input::Model),
        Value(|query| format!("{:?}", query.workload.model.pooling)),
        "the preset's",
        &["map", "attention", "class-token"],
        "How the embedding is pooled.",
    ),
    field(
        "workload.pooling_heads",
        Some(Input::Model),
        Value(|query| {
            query
                .workload
                .model
                .pooling
                .heads()
                .map_or_else(|| "none".to_string(), |heads| heads.to_string())
        }),
        Integer,
        "the preset's",
        "1 or more",
        "Heads of the attention pooling.",
    ),
    field(
        "workload.rotary",
        Some(Input::Model),
        Value(|query| (query.workload.model.positions == Positions::LearnedWithRotary).to_string()),
        Boolean,
        "the preset's",
        "true | false",
        "2D rotary embedding on q and k.",
    ),
    field(
        "workload.projection",
        Some(Input::Model),
        Value(|query| {
            query
                .workload
                .model
                .projection
                .map_or_else(|| "none".to_string(), |width| width.to_string())
        }),
        Integer,
        "the preset's",
        "0 (none) or more",
        "Output projection width.",
    ),
    field(
        "workload.pre_norm",
        Some(Input::Model),
        Value(|query| query.workload.model.pre_norm.to_string()),
        Boolean,
        "the preset's",
        "true | false",
        "A layer norm before the first layer.",
    ),
    field(
        "workload.layer_norm_epsilon",
        Some(Input::Model),
        Value(|query| query.workload.model.layer_norm_epsilon.to_string()),
        Float,
        "the preset's",
        "a positive number",
        "Layer norms' epsilon.",
    ),
    table("machine", "The machine to compile for."),
    choice(
        "machine.preset",
        Some(Input::Machine),
        Value(|query| query.machine.preset.clone()),
        "c600",
        &["c600"],
        "The IPU21 C600 (the only preset).",
    ),
    field(
        "machine.tiles",
        Some(Input::Machine),
        Value(|query| query.machine.tiles.to_string()),
        Integer,
        "1472",
        "1..=1472",
        "Use the first N logical tiles.",
    ),
    field(
        "machine.calibration",
        Some(Input::Machine),
        Value(|query| {
            query.machine.calibration.as_ref().map_or_else(
                || "(the shipped table)".to_string(),
                |path| path.display().to_string(),
            )
        }),
        KeyKind::String,
        "(the shipped table)",
        "a calibration file (`superstep calibrate -o FILE`)",
        "The kernel cost model's constants refitted to your own profiles (relative to the build file's folder).",
    ),
    table("planning", "Layouts, accumulation, copy motion and memory."),
    choice(
        "planning.accumulation",
        Some(Input::Planning),
        Value(|query| format!("{:?}", query.planning.accumulation)),
        "auto",
        &["auto", "f32", "f16"],
        "How matrix products accumulate partial sums (auto: FP16 partials where the reduction is split and that plan is cheaper).",
    ),
    field(
        "planning.copy_motion",
        Some(Input::Planning),
        Value(|query| query.planning.copy_motion.to_string()),
        Boolean,
        "true",
        "true | false",
        "Move local copies across exchanges when hazards allow.",
    ),
    choice(
        "planning.fusion",
        Some(Input::Planning),
        Value(|query| query.planning.fusion.name().to_string()),
        "auto",
        &["auto", "same-operator", "across-operators"],
        "Which exchanges copy motion merges (auto: a cross-operator merge only when it is shorter than the two plus the barrier saved).",
    ),
    field(
        "planning.repeat_base",
        Some(Input::Planning),
        Value(|query| query.planning.repeat_base.to_string()),
        Boolean,
        "true",
        "true | false",
        "Repeat patches against a moving base register when that needs fewer patch words.",
    ),
    field(
        "planning.reserved_bytes_per_tile",
        Some(Input::Planning),
        Value(|query| query.planning.reserved_bytes_per_tile.to_string()),
        Integer,
        "65536",
        "below 638976",
        "SRAM kept back for code, exchange tables and patch lists.",
    ),
    field(
        "planning.max_partition_candidates",
        Some(Input::Planning),
        Value(|query| query.planning.max_partition_candidates.to_string()),
        Integer,
        "64",
        "1 or more",
        "Partitions the cost model compares per operator.",
    ),
    field(
        "planning.auto_f16_max_parts",
        Some(Input::Planning),
        Value(|query| query.planning.auto_f16_max_parts.to_string()),
        Integer,
        "16",
        "0 or more",
        "auto accumulation: FP16 partials only for products split into at most this many reduction parts.",
    ),
    choice(
        "planning.matrix_inputs",
        Some(Input::Planning),
        Value(|query| query.planning.matrix_inputs.name().to_string()),
        "fp8",
        &["fp16", "fp8"],
        "What the matrix unit multiplies: fp8 (the production recipe: activations rounded to FP8 at planning.activation_scale, the FP8 rate; attention's PV product too: probabilities at 2^-7, values at their scale, while QK stays FP16) or fp16 (FP8 weights widened on the tile, the FP16 rate; what transformers and timm compute to FP16's tolerance). Products (or an attention, e.g. layer.attn.core) that differ are listed in planning.matrix_inputs_by_op, or set with `--set planning.matrix_inputs.OP=fp8|fp16` (OP as `superstep build` prints it).",
    ),
    field(
        "planning.matrix_inputs_by_op",
        Some(Input::Planning),
        Entries(|query| {
            query
                .planning
                .matrix_input_overrides
                .iter()
                .map(|(op, inputs)| {
                    let key = format!("{MATRIX_INPUTS_OVERRIDE_PREFIX}{op}");
                    (key, inputs.name().to_string())
                })
                .collect()
        }),
        KeyKind::StringTable,
        "(none)",
        "`\"OP\" = \"fp8\"` or `\"fp16\"` per entry, OP a matrix product of the workload (`superstep build --ops`; quoted, as op names hold dots)",
        "`[planning.matrix_inputs_by_op]`: products whose inputs differ from planning.matrix_inputs, e.g. `\"layer.attn.qkv\" = \"fp16\"` (a table of its own, since matrix_inputs is the string every other product takes). `--set planning.matrix_inputs.OP=...` wins over the file's entry for OP.",
    ),
    choice(
        "planning.fp8_cast",
        Some(Input::Planning),
        Value(|query| query.planning.fp8_cast.name().to_string()),
        "producer",
        &["producer", "product"],
        "With matrix_inputs = fp8, where activations are cast to FP8: producer (a LayerNorm, GELU or attention whose every reader is an FP8 product writes FP8 itself, before the exchange: half the words move and no product casts) or product (every product casts its FP16 block on its tile). The numbers computed are the same.",
    ),
    field(
        "planning.activation_scale",
        Some(Input::Planning),
        Value(|query| {
            match (
                &query.planning.matrix_inputs,
                &query.planning.activation_scale,
            ) {
                (MatrixInputs::Fp16, _) => "unused (matrix_inputs = fp16)".to_string(),
                (_, ActivationScale::Fixed(scale)) => scale.to_string(),
                (_, ActivationScale::Calibrate { input }) => match input {
                    CalibrationInput::Seeded => "calibrate (on the seeded input)".to_string(),
                    CalibrationInput::File { path, .. } => {
                        format!("calibrate (on {})", path.display())
                    }
                },
            }
        }),
        Scale,
        "\"calibrate\"",
        "-32..=32, or \"calibrate\"",
        "With matrix_inputs = fp8: activations are stored in F143 as value x 2^-scale (largest magnitude 240 x 2^scale); `calibrate`: per product, the least scale holding twice the largest activation (attention's values, for its PV product) the FP32 reference computes on workload.calibration.",
    ),
    table("layout", "Per-operator layouts."),
    field(
        "layout.override",
        Some(Input::Planning),
        Entries(|query| {
            query
                .planning
                .layout_overrides
                .iter()
                .map(|layout_override| {
                    let key = format!("{LAYOUT_OVERRIDE_PREFIX}{}", layout_override.op);
                    (key, layout_override.partition.to_string())
                })
                .collect()
        }),
        TableArray,
        "(none)",
        "zero or more entries",
        "`[[layout.override]]`: one op's partition and tile order (`superstep search --write-overrides` writes them).",
    ),
    field(
        "layout.override.op",
        Some(Input::Planning),
        Member,
        KeyKind::String,
        "(required)",
        "a matrix product's or attention's provenance (`superstep build --ops`)",
        "The op.",
    ),
    field(
        "layout.override.partition",
        Some(Input::Planning),
        Member,
        KeyKind::String,
        "(required)",
        "ROWSxCOLSxREDUCTION, or QUERIESxKEYS for attention",
        "Its partition.",
    ),
    field(
        "layout.override.order",
        Some(Input::Planning),
        Member,
        KeyKind::String,
        "the default order",
        "rck | rkc | crk | ckr | krc | kcr; qk | kq for attention",
        "Which partition coordinate runs fastest over consecutive tiles (outermost first).",
    ),
    field(
        "layout.override.when",
        Some(Input::Planning),
        Member,
        KeyKind::Table,
        "(every configuration)",
        "an inline table of the keys below",
        "The configurations the entry holds for, e.g. `when = { batch = 1, tiles = 1472 }`: a build whose `workload.batch`, `workload.layers`, `machine.tiles` or `planning.matrix_inputs` differs from one it names skips the entry (its `layouts:` line counts the pins skipped). `superstep search --write-overrides` writes the configuration searched; `--set layout.override.OP=...` pins have none and always apply.",
    ),
    field(
        "layout.override.when.batch",
        Some(Input::Planning),
        Member,
        Integer,
        "(any)",
        "a whole number",
        "The entry holds only at this `workload.batch`.",
    ),
    field(
        "layout.override.when.layers",
        Some(Input::Planning),
        Member,
        Integer,
        "(any)",
        "a whole number",
        "The entry holds only at this `workload.layers`.",
    ),
    field(
        "layout.override.when.tiles",
        Some(Input::Planning),
        Member,
        Integer,
        "(any)",
        "a whole number",
        "The entry holds only at this `machine.tiles`.",
    ),
    choice(
        "layout.override.when.matrix_inputs",
        Some(Input::Planning),
        Member,
        "(any)",
        &["fp8", "fp16"],
        "The entry holds only at this `planning.matrix_inputs`.",
    ),
    table("schedule", "Exchange scheduling."),
    field(
        "schedule.policy",
        Some(Input::Schedule),
        Value(|query| query.schedule.policy.to_string()),
        KeyKind::String,
        "auto",
        "auto | list | matching | latency | S<W> | B<W> (W = wave words, 1..=65536)",
        "The scheduling policy of every phase without an override.",
    ),
    choice(
        "schedule.width",
        Some(Input::Schedule),
        Value(|query| query.schedule.width.to_string()),
        "auto",
        &["auto", "word32", "paired64"],
        "Transfer width (auto: paired where it shortens the phase).",
    ),
    field(
        "schedule.row_allowance",
        Some(Input::Schedule),
        Value(|query| query.schedule.row_allowance.to_string()),
        Integer,
        "256",
        "0 or more bytes",
        "auto: bytes a candidate's largest row may exceed the baseline B1024's by (per exchange a merged phase holds).",
    ),
    field(
        "schedule.prune_by_bounds",
        Some(Input::Schedule),
        Value(|query| query.schedule.prune_by_bounds.to_string()),
        Boolean,
        "true",
        "true | false",
        "Stop work a lower bound shows cannot win (the program is the same).",
    ),
    field(
        "schedule.override",
        Some(Input::Overrides),
        Entries(|query| {
            query
                .overrides
                .iter()
                .map(|phase_override| {
                    let key = format!("{PHASE_OVERRIDE_PREFIX}{}", phase_override.phase);
                    let value = match phase_override.width {
                        Some(width) => format!("{}/{}", phase_override.policy, width.name()),
                        None => phase_override.policy.to_string(),
                    };
                    (key, value)
                })
                .collect()
        }),
        TableArray,
        "(none)",
        "zero or more entries, each phase once",
        "`[[schedule.override]]`: one phase's policy and width.",
    ),
    field(
        "schedule.override.phase",
        Some(Input::Overrides),
        Member,
        KeyKind::String,
        "(required)",
        "a phase key the build has (`superstep phases --kind exchange`)",
        "The phase.",
    ),
    field(
        "schedule.override.policy",
        Some(Input::Overrides),
        Member,
        KeyKind::String,
        "(required)",
        "as schedule.policy",
        "Its policy.",
    ),
    choice(
        "schedule.override.width",
        Some(Input::Overrides),
        Member,
        "schedule.width",
        &["auto", "word32", "paired64"],
        "Its width (auto: paired where it shortens the phase, as schedule.width).",
    ),
    table("outputs", "What a build writes."),
    field(
        "outputs.directory",
        Some(Input::Outputs),
        Value(|query| query.outputs.directory.display().to_string()),
        KeyKind::String,
        "artifacts",
        "a folder path (relative to the current directory)",
        "Where OUTPUTS/NAME/ goes.",
    ),
    field(
        "outputs.report",
        Some(Input::Outputs),
        Value(|query| query.outputs.report.to_string()),
        Boolean,
        "true",
        "true | false",
        "Write report.json.",
    ),
    field(
        "outputs.phases_csv",
        Some(Input::Outputs),
        Value(|query| query.outputs.phases_csv.to_string()),
        Boolean,
        "true",
        "true | false",
        "Write phases.csv and compute.csv.",
    ),
    field(
        "outputs.html",
        Some(Input::Outputs),
        Value(|query| query.outputs.html.to_string()),
        Boolean,
        "true",
        "true | false",
        "Write report.html.",
    ),
    field(
        "outputs.package",
        Some(Input::Outputs),
        Value(|query| query.outputs.package.to_string()),
        Boolean,
        "true",
        "true | false",
        "Write package.bin.",
    ),
    table("cache", "The shared remote cache tier."),
    field(
        "cache.remote",
        None,
        Unread,
        KeyKind::String,
        "(none)",
        "http(s)://HOST/PATH or s3://BUCKET/PREFIX",
        "A remote tier behind the local cache.",
    ),
    field(
        "cache.remote_timeout_ms",
        None,
        Unread,
        Integer,
        "the client's default",
        "1 or more",
        "Per-request timeout of the remote tier.",
    ),
    field(
        "cache.remote_deadline_ms",
        None,
        Unread,
        Integer,
        "the client's default",
        "1 or more",
        "Deadline of the remote tier over one build.",
    ),
    field(
        "cache.trusted_keys",
        None,
        Unread,
        StringArray,
        "[] (none)",
        "public keys, \"ed25519:\" and 64 hex digits",
        "Writers whose signed cache entries are used unchecked.",
    ),
];

// A field lands in a build input exactly when it has a reader, so every
// key that reaches the compiler is a setting a rebuild compares.
const _: () = {
    let mut index = 0;
    while index < FIELDS.len() {
        let field = &FIELDS[index];
        let read = !matches!(field.reader, Reader::Unread);
        assert!(
            field.input.is_some() == read,
            "a field of build_file::fields::FIELDS lands in a build input but has no reader, \
             or has a reader and lands in none"
        );
        index += 1;
    }
};
