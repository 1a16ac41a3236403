//! How far the layout planner's prices are from what the compiled program
//! costs, on a session's current build: the beam's proxy for conversion
//! phases against their schedules ([`calibrate`]) and the planner's price
//! of each matrix product and attention against its compute steps and own
//! exchanges ([`calibrate_operators`]). A search reports both on its chosen
//! plan (`crate::studies::layout_search`).

use std::collections::BTreeMap;

use super::beam::conversion_proxy;
use crate::layout::plan::OpPlan;
use crate::layout::search_record::{Calibration, OpCalibration};
use crate::session::Session;

/// The planner's prediction against the compiled program, per heavy op of
/// the session's current build.
pub fn calibrate_operators(session: &Session) -> Vec<OpCalibration> {
    let (Ok(layouts), Ok(compiled)) = (session.layouts(), session.compute_breakdown()) else {
        return Vec::new();
    };
    let mut own_exchange: BTreeMap<String, u64> = BTreeMap::new();
    for phase in session.phases() {
        let Ok(figures) = phase.figures() else {
            continue;
        };
        let op = phase.key().split('#').next().unwrap_or(phase.key());
        *own_exchange.entry(op.to_string()).or_default() +=
            u64::from(figures.horizon) + crate::target::costs::PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES;
    }
    layouts
        .ops
        .iter()
        .filter_map(|op| {
            let predicted = match &op.plan {
                OpPlan::MatMul(plan) => plan.cycles,
                OpPlan::Attention(plan) => plan.cycles,
                _ => return None,
            };
            let charged = compiled.iter().find(|entry| entry.op == op.name)?;
            Some(OpCalibration {
                op: op.name.clone(),
                partition: op.plan.partition()?.to_string(),
                predicted_cycles: predicted,
                compiled_cycles: charged.cycles / charged.executions.max(1)
                    + own_exchange.get(&op.name).copied().unwrap_or(0),
            })
        })
        .collect()
}

/// The calibration of the beam's proxy on the session's current build:
/// every exchange phase whose ops are all conversions.
pub fn calibrate(session: &Session) -> Vec<Calibration> {
    let Ok(layouts) = session.layouts() else {
        return Vec::new();
    };
    let mut rows = Vec::new();
    for phase in session.phases() {
        let Ok(figures) = phase.figures() else {
            continue;
        };
        let mut ops: Vec<&str> = std::iter::once(phase.key())
            .chain(figures.merged_from.iter().map(String::as_str))
            .map(|key| key.split('#').next().unwrap_or(key))
            .collect();
        ops.sort_unstable();
        ops.dedup();
        let proxies: Option<Vec<u64>> = ops
            .iter()
            .map(|op| conversion_proxy(&layouts, op))
            .collect();
        if let Some(proxies) = proxies {
            rows.push(Calibration {
                phase: phase.key().to_string(),
                conversions: ops.len() as u32,
                proxy_cycles: proxies.iter().sum(),
                real_cycles: u64::from(figures.horizon)
                    + crate::target::costs::PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES,
            });
        }
    }
    rows
}
