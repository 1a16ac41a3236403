//! The vocabulary of the table of build-file fields: what one field is
//! (`Field`: its key, the build input it lands in, how its resolved value
//! is read from the typed query, its kind, default, choices and meaning),
//! the inputs and durabilities keys land in, and the `--set` prefixes of the
//! entries a user names.

use crate::build_file::BuildQuery;

/// The `--set` key prefix of per-product input overrides:
/// `planning.matrix_inputs.OP=fp8|fp16` (also the settings' key of each).
pub const MATRIX_INPUTS_OVERRIDE_PREFIX: &str = "planning.matrix_inputs.";

/// The same overrides named as the build file's table holds them:
/// `planning.matrix_inputs_by_op.OP=fp8|fp16`.
pub const MATRIX_INPUTS_BY_OP_PREFIX: &str = "planning.matrix_inputs_by_op.";

/// The key prefix of per-phase policy overrides: `schedule.override.PHASE=POLICY`.
pub const PHASE_OVERRIDE_PREFIX: &str = "schedule.override.";

/// The key prefix of per-operator layout overrides:
/// `layout.override.OP=PARTITION[/ORDER]`.
pub const LAYOUT_OVERRIDE_PREFIX: &str = "layout.override.";

/// The TOML type a key holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    Integer,
    /// An integer exponent or the string `"auto"` (`workload.fp8_scale`).
    Scale,
    Float,
    Boolean,
    String,
    /// A table of further keys.
    Table,
    /// An array of tables (`[[schedule.override]]`).
    TableArray,
    /// A table whose keys the user names (ops) and whose values are
    /// strings (`[planning.matrix_inputs_by_op]`).
    StringTable,
    /// An array of strings (`cache.trusted_keys`).
    StringArray,
}

impl KeyKind {
    /// How a user would describe a value of this kind.
    pub fn describe(self) -> &'static str {
        match self {
            KeyKind::Integer => "an integer",
            KeyKind::Scale => "an integer or a string (see the range)",
            KeyKind::Float => "a number",
            KeyKind::Boolean => "a boolean (true or false)",
            KeyKind::String => "a string",
            KeyKind::Table => "a table",
            KeyKind::TableArray => "an array of tables",
            KeyKind::StringTable => "a table of strings",
            KeyKind::StringArray => "an array of strings",
        }
    }
}

/// How rarely an input changes, and so how much of the database salsa may
/// skip verifying when something else changes (salsa's durability).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Durability {
    Low,
    Medium,
    High,
}

impl Durability {
    /// The word for it in the build-file reference.
    pub fn name(self) -> &'static str {
        match self {
            Durability::Low => "low",
            Durability::Medium => "medium",
            Durability::High => "high",
        }
    }
}

/// A field of the compiler's build input (`incremental::BuildInputs`):
/// where a key's value lands, named as `Session::update` reports a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Input {
    Name,
    Model,
    Batch,
    FuseQkv,
    Fp8Scale,
    Attention,
    Weights,
    Machine,
    Planning,
    Schedule,
    Overrides,
    Outputs,
}

impl Input {
    /// Every input, in `BuildInputs`' order.
    pub const ALL: [Input; 12] = [
        Input::Name,
        Input::Model,
        Input::Batch,
        Input::FuseQkv,
        Input::Fp8Scale,
        Input::Attention,
        Input::Weights,
        Input::Machine,
        Input::Planning,
        Input::Schedule,
        Input::Overrides,
        Input::Outputs,
    ];

    /// The `BuildInputs` field's name.
    pub fn name(self) -> &'static str {
        match self {
            Input::Name => "name",
            Input::Model => "model",
            Input::Batch => "batch",
            Input::FuseQkv => "fuse_qkv",
            Input::Fp8Scale => "fp8_scale",
            Input::Attention => "attention",
            Input::Weights => "weights",
            Input::Machine => "machine",
            Input::Planning => "planning",
            Input::Schedule => "schedule",
            Input::Overrides => "overrides",
            Input::Outputs => "outputs",
        }
    }

    /// The architecture's durabilities: what the workload and machine are
    /// changes rarely, planning flags sometimes, scheduling, overrides,
    /// outputs and the name often.
    pub fn durability(self) -> Durability {
        match self {
            Input::Model
            | Input::Batch
            | Input::FuseQkv
            | Input::Fp8Scale
            | Input::Attention
            | Input::Weights
            | Input::Machine => Durability::High,
            Input::Planning => Durability::Medium,
            Input::Name | Input::Schedule | Input::Overrides | Input::Outputs => Durability::Low,
        }
    }
}

/// How a field's resolved value is read from the typed query: what the
/// settings a rebuild compares show for it (`settings::query_settings`).
#[derive(Clone, Copy, Debug)]
pub enum Reader {
    /// No setting of its own: a table, or a key only the command line reads
    /// (`cache.*`, which lands in no build input).
    Unread,
    /// A member of an array of tables (`schedule.override.policy`): the
    /// array's entries show it.
    Member,
    /// The key's resolved value, as the settings show it.
    Value(fn(&BuildQuery) -> String),
    /// The key's resolved value, or `None` where the query holds no such
    /// key (`workload.weights.seeded` of a checkpoint's weights).
    Optional(fn(&BuildQuery) -> Option<String>),
    /// Entries the user names, each a setting of its own: `(key, value)`
    /// with the key as `--set` writes it (`schedule.override.PHASE`,
    /// `layout.override.OP`, `planning.matrix_inputs.OP`).
    Entries(fn(&BuildQuery) -> Vec<(String, String)>),
}

/// One key of the build file.
#[derive(Clone, Copy, Debug)]
pub struct Field {
    /// The dotted path (`workload.layers`; `layout.override.op` for a key of
    /// an array of tables).
    pub key: &'static str,
    /// The build input the key's value lands in (its durability is the
    /// input's); `None` for tables and for keys only the command line
    /// reads (`cache.*`).
    pub input: Option<Input>,
    /// How its resolved value is read from a query; every field with an
    /// input has a reader (checked when the crate compiles, below the
    /// table).
    pub reader: Reader,
    pub kind: KeyKind,
    /// The value when the key is absent, as a user would write it.
    pub default: &'static str,
    /// The values validation accepts, in words.
    pub allowed: &'static str,
    /// The closed set of values, when there is one (each one is tested).
    pub choices: &'static [&'static str],
    pub meaning: &'static str,
}
