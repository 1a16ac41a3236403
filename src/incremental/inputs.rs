//! The build query as a salsa input, one field per concern, each with the
//! durability the architecture gives: workload and machine HIGH, planning
//! flags MEDIUM, schedule policy, per-phase overrides and outputs LOW.
//!
//! `apply_query` creates the input or updates only the fields whose value
//! changed, so an unchanged field never invalidates anything.

use salsa::{Durability, Setter};

use super::database::Db;
use crate::build_file::{
    AttentionChoice, BuildQuery, MachineSettings, Outputs, PhaseOverride, PlanningFlags,
    ScheduleSettings, WeightSource,
};
use crate::model::config::ModelConfig;

#[salsa::input(debug)]
pub struct BuildInputs {
    #[returns(ref)]
    pub name: String,
    #[returns(ref)]
    pub model: ModelConfig,
    #[returns(copy)]
    pub batch: u32,
    #[returns(copy)]
    pub fuse_qkv: bool,
    #[returns(copy)]
    pub fp8_scale: crate::model::quantisation::Fp8Scale,
    #[returns(copy)]
    pub attention: AttentionChoice,
    #[returns(ref)]
    pub weights: WeightSource,
    #[returns(ref)]
    pub machine: MachineSettings,
    #[returns(ref)]
    pub planning: PlanningFlags,
    #[returns(ref)]
    pub schedule: ScheduleSettings,
    #[returns(ref)]
    pub overrides: Vec<PhaseOverride>,
    #[returns(ref)]
    pub outputs: Outputs,
}

/// Creates the input for `query`.
pub fn create_inputs(db: &dyn Db, query: &BuildQuery) -> BuildInputs {
    BuildInputs::builder(
        query.name.clone(),
        query.workload.model.clone(),
        query.workload.batch,
        query.workload.fuse_qkv,
        query.workload.fp8_scale,
        query.workload.attention,
        query.workload.weights.clone(),
        query.machine.clone(),
        query.planning.clone(),
        query.schedule.clone(),
        query.overrides.clone(),
        query.outputs.clone(),
    )
    .name_durability(Durability::LOW)
    .model_durability(Durability::HIGH)
    .batch_durability(Durability::HIGH)
    .fuse_qkv_durability(Durability::HIGH)
    .fp8_scale_durability(Durability::HIGH)
    .attention_durability(Durability::HIGH)
    .weights_durability(Durability::HIGH)
    .machine_durability(Durability::HIGH)
    .planning_durability(Durability::MEDIUM)
    .schedule_durability(Durability::LOW)
    .overrides_durability(Durability::LOW)
    .outputs_durability(Durability::LOW)
    .new(db)
}

/// Sets the fields of `inputs` that differ from `query`; returns the names
/// of the fields that changed.
pub fn apply_query<D: Db>(
    db: &mut D,
    inputs: BuildInputs,
    query: &BuildQuery,
) -> Vec<&'static str> {
    let mut changed = Vec::new();
    macro_rules! update {
        ($field:ident, $setter:ident, $value:expr, $durability:expr) => {
            if *inputs.$field(db) != $value {
                inputs
                    .$setter(db)
                    .with_durability($durability)
                    .to($value.clone());
                changed.push(stringify!($field));
            }
        };
    }
    update!(name, set_name, query.name, Durability::LOW);
    update!(model, set_model, query.workload.model, Durability::HIGH);
    update!(
        weights,
        set_weights,
        query.workload.weights,
        Durability::HIGH
    );
    update!(machine, set_machine, query.machine, Durability::HIGH);
    update!(planning, set_planning, query.planning, Durability::MEDIUM);
    update!(schedule, set_schedule, query.schedule, Durability::LOW);
    update!(overrides, set_overrides, query.overrides, Durability::LOW);
    update!(outputs, set_outputs, query.outputs, Durability::LOW);
    macro_rules! update_copy {
        ($field:ident, $setter:ident, $value:expr, $durability:expr) => {
            if inputs.$field(db) != $value {
                inputs.$setter(db).with_durability($durability).to($value);
                changed.push(stringify!($field));
            }
        };
    }
    update_copy!(batch, set_batch, query.workload.batch, Durability::HIGH);
    update_copy!(
        fuse_qkv,
        set_fuse_qkv,
        query.workload.fuse_qkv,
        Durability::HIGH
    );
    update_copy!(
        fp8_scale,
        set_fp8_scale,
        query.workload.fp8_scale,
        Durability::HIGH
    );
    update_copy!(
        attention,
        set_attention,
        query.workload.attention,
        Durability::HIGH
    );
    changed
}
