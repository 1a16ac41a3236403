//! The build query as a salsa input, one field per concern (the field
//! table's `Input`), each with the durability the table gives it (workload
//! and machine HIGH, planning flags MEDIUM, schedule policy, per-phase
//! overrides, outputs and the name LOW), stated there once.
//!
//! `apply_query` creates the input or updates only the fields whose value
//! changed, so an unchanged field never invalidates anything.

use salsa::{Durability, Setter};

use super::database::Db;
use crate::build_file::fields::{Durability as FieldDurability, Input};
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

/// Salsa's durability for a build input, as the field table gives it.
fn durability(input: Input) -> Durability {
    match input.durability() {
        FieldDurability::High => Durability::HIGH,
        FieldDurability::Medium => Durability::MEDIUM,
        FieldDurability::Low => Durability::LOW,
    }
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
    .name_durability(durability(Input::Name))
    .model_durability(durability(Input::Model))
    .batch_durability(durability(Input::Batch))
    .fuse_qkv_durability(durability(Input::FuseQkv))
    .fp8_scale_durability(durability(Input::Fp8Scale))
    .attention_durability(durability(Input::Attention))
    .weights_durability(durability(Input::Weights))
    .machine_durability(durability(Input::Machine))
    .planning_durability(durability(Input::Planning))
    .schedule_durability(durability(Input::Schedule))
    .overrides_durability(durability(Input::Overrides))
    .outputs_durability(durability(Input::Outputs))
    .new(db)
}

/// Sets the fields of `inputs` that differ from `query`; returns the names
/// of the fields that changed (`Input::name`).
pub fn apply_query<D: Db>(
    db: &mut D,
    inputs: BuildInputs,
    query: &BuildQuery,
) -> Vec<&'static str> {
    let mut changed = Vec::new();
    macro_rules! update {
        ($field:ident, $setter:ident, $value:expr, $input:expr) => {
            if *inputs.$field(db) != $value {
                inputs
                    .$setter(db)
                    .with_durability(durability($input))
                    .to($value.clone());
                changed.push($input.name());
            }
        };
    }
    update!(name, set_name, query.name, Input::Name);
    update!(model, set_model, query.workload.model, Input::Model);
    update!(weights, set_weights, query.workload.weights, Input::Weights);
    update!(machine, set_machine, query.machine, Input::Machine);
    update!(planning, set_planning, query.planning, Input::Planning);
    update!(schedule, set_schedule, query.schedule, Input::Schedule);
    update!(overrides, set_overrides, query.overrides, Input::Overrides);
    update!(outputs, set_outputs, query.outputs, Input::Outputs);
    macro_rules! update_copy {
        ($field:ident, $setter:ident, $value:expr, $input:expr) => {
            if inputs.$field(db) != $value {
                inputs
                    .$setter(db)
                    .with_durability(durability($input))
                    .to($value);
                changed.push($input.name());
            }
        };
    }
    update_copy!(batch, set_batch, query.workload.batch, Input::Batch);
    update_copy!(
        fuse_qkv,
        set_fuse_qkv,
        query.workload.fuse_qkv,
        Input::FuseQkv
    );
    update_copy!(
        fp8_scale,
        set_fp8_scale,
        query.workload.fp8_scale,
        Input::Fp8Scale
    );
    update_copy!(
        attention,
        set_attention,
        query.workload.attention,
        Input::Attention
    );
    changed
}
