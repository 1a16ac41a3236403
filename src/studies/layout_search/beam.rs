//! The graph-level beam over layout plans, priced without scheduling: states
//! over the heavy ops (matrix products and attention) in program order,
//! each choosing one partition per op decided so far (the later ops keep
//! the cost model's plan). A state's price is the whole program's
//! proxy: each heavy op's cost-model cycles, plus for every conversion the
//! planner inserts (Rearrange) the endpoint bound of its transfers (the
//! most words one tile sends or receives, from the conversion's own
//! expansion; memoized by the formats it converts between), the phase's
//! fixed overhead, and the busiest tile's local copies; each times its
//! executions (body ops once per layer). The Repeat body is planned once.
//!
//! Retention is Pareto-aware: states are grouped by the format the ops
//! still to decide can see (the decided op's output format), and within a
//! group only states that no other beats on both the price and the largest
//! working set are kept; then the cheapest `width` overall. Deterministic:
//! every tie is broken by the states' choices.
//!
//! Pure: plain data in (graph, planning settings, starting overrides), plain
//! data out; no database. The local steps (`layout_search`) start from the
//! beam's best and judge it by the compiled program's real estimate.

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

use crate::expand::expand_op;
use crate::expand::program::Step;
use crate::layout::candidates::{Alignment, attention_search_candidates, matmul_search_candidates};
use crate::layout::capacity::MemoryBudget;
use crate::layout::cost::{AttentionOrder, TileOrder};
use crate::layout::format::TensorFormat;
use crate::layout::overrides::{LayoutOverride, Partition};
use crate::layout::plan::{Layouts, OpPlan, PlannedOp};
use crate::layout::planner::{
    CostOracle, DirectCosts, PlanningSettings, attention_problem, matmul_problem, plan_layouts,
};
use crate::model::graph::{Graph, OpKind, Region};
use crate::target::costs;

/// How wide the beam is and how many partitions each op offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BeamSettings {
    pub width: u32,
    pub cheapest: u32,
    pub aligned: u32,
}

impl Default for BeamSettings {
    fn default() -> Self {
        BeamSettings {
            width: 8,
            cheapest: 6,
            aligned: 3,
        }
    }
}

/// One conversion's proxy price.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct ConversionPrice {
    /// Endpoint bound of its transfers, in words (0 without transfers).
    bound: u64,
    /// The busiest tile's local-copy cycles.
    copies: u64,
}

impl ConversionPrice {
    fn cycles(self) -> u64 {
        let exchange = if self.bound > 0 {
            self.bound + costs::PHASE_OVERHEAD_ABOVE_HORIZON_CYCLES
        } else {
            0
        };
        exchange + self.copies
    }
}

/// The conversion prices seen so far, by (op plan, operand formats, result
/// format): most states share most conversions.
/// A priced conversion: the op, its operand formats, its result format.
type PricedConversion = (PlannedOp, Vec<TensorFormat>, TensorFormat, ConversionPrice);

#[derive(Default)]
struct PriceMemo {
    /// By a hash of the conversion; each bucket compared in full.
    prices: HashMap<u64, Vec<PricedConversion>>,
}

impl PriceMemo {
    fn price(
        &mut self,
        op: &PlannedOp,
        inputs: &[&TensorFormat],
        output: &TensorFormat,
    ) -> ConversionPrice {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        op.name.hash(&mut hasher);
        format!("{:?}", op.plan).hash(&mut hasher);
        inputs.hash(&mut hasher);
        output.hash(&mut hasher);
        let key = hasher.finish();
        if let Some(found) = self.prices.get(&key).and_then(|entries| {
            entries
                .iter()
                .find(|(known, known_inputs, known_output, _)| {
                    known.name == op.name
                        && known.plan == op.plan
                        && known_output == output
                        && known_inputs
                            .iter()
                            .zip(inputs)
                            .all(|(left, right)| left == *right)
                })
        }) {
            return found.3;
        }
        let price = conversion_price(op, inputs, output);
        self.prices.entry(key).or_default().push((
            op.clone(),
            inputs.iter().map(|format| (*format).clone()).collect(),
            output.clone(),
            price,
        ));
        price
    }
}

/// The endpoint bound and copy cycles of one conversion, from its expansion.
fn conversion_price(
    op: &PlannedOp,
    inputs: &[&TensorFormat],
    output: &TensorFormat,
) -> ConversionPrice {
    let Ok(expansion) = expand_op(op, inputs, output) else {
        return ConversionPrice {
            bound: u64::MAX / 4,
            copies: 0,
        };
    };
    let tiles = output
        .tiles
        .iter()
        .chain(inputs.iter().flat_map(|format| format.tiles.iter()));
    let tile_count = tiles.copied().max().map_or(1, |tile| tile as usize + 1);
    let mut sent = vec![0u64; tile_count];
    let mut received = vec![0u64; tile_count];
    let mut copied = vec![0u64; tile_count];
    let mut price = ConversionPrice::default();
    for step in &expansion.steps {
        match step {
            Step::Exchange { transfers, .. } => {
                for transfer in 0..transfers.len() {
                    let words = u64::from(transfers.words[transfer]);
                    if let Some(slot) = sent.get_mut(transfers.source_tile[transfer] as usize) {
                        *slot += words;
                    }
                    for destination in transfers.destinations_of(transfer) {
                        if let Some(slot) = received.get_mut(destination.tile as usize) {
                            *slot += words;
                        }
                    }
                }
            }
            Step::Copies { copies, .. } => {
                for copy in copies {
                    if let Some(slot) = copied.get_mut(copy.tile as usize) {
                        *slot += u64::from(copy.row_bytes) * u64::from(copy.rows);
                    }
                }
            }
            _ => {}
        }
    }
    price.bound = sent.iter().chain(&received).copied().max().unwrap_or(0);
    let busiest_copy = copied.iter().copied().max().unwrap_or(0);
    if busiest_copy > 0 {
        price.copies = costs::local_copy_cycles(busiest_copy);
    }
    price
}

/// The proxy price of a whole program's layouts (see the module header).
fn program_price(layouts: &Layouts, memo: &mut PriceMemo) -> u64 {
    let iterations = layouts
        .repeat
        .as_ref()
        .map_or(1, |repeat| repeat.iterations);
    let mut total = 0u64;
    for op in &layouts.ops {
        let runs = u64::from(if op.region == Region::Body {
            iterations
        } else {
            1
        });
        let cycles = match &op.plan {
            OpPlan::MatMul(plan) => plan.cycles,
            OpPlan::Attention(plan) => plan.cycles,
            OpPlan::Rearrange { .. } => {
                let inputs: Vec<&TensorFormat> = op
                    .inputs
                    .iter()
                    .map(|&input| &layouts.value(input).format)
                    .collect();
                memo.price(op, &inputs, &layouts.value(op.output).format)
                    .cycles()
            }
            OpPlan::Blockwise => 0,
        };
        total = total.saturating_add(cycles.saturating_mul(runs));
    }
    total
}

/// The proxy cycles of the conversion op `name` of `layouts` (endpoint
/// bound plus the phase overhead plus its copies), if it is a conversion.
pub fn conversion_proxy(layouts: &Layouts, name: &str) -> Option<u64> {
    let op = layouts.ops.iter().find(|op| op.name == name)?;
    if !matches!(op.plan, OpPlan::Rearrange { .. }) {
        return None;
    }
    let inputs: Vec<&TensorFormat> = op
        .inputs
        .iter()
        .map(|&input| &layouts.value(input).format)
        .collect();
    Some(conversion_price(op, &inputs, &layouts.value(op.output).format).cycles())
}

/// The largest working set of the heavy ops' plans, bytes.
fn largest_working_set(layouts: &Layouts) -> u32 {
    layouts
        .ops
        .iter()
        .map(|op| match &op.plan {
            OpPlan::MatMul(plan) => plan.working_bytes,
            OpPlan::Attention(plan) => plan.working_bytes,
            _ => 0,
        })
        .max()
        .unwrap_or(0)
}

#[derive(Clone)]
struct State {
    choices: BTreeMap<String, Partition>,
    price: u64,
    working: u32,
    signature: u64,
}

/// What the beam found: the cheapest state's overrides and proxy price,
/// and the proxy price of the starting plan.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BeamOutcome {
    pub start_price: u64,
    pub best_price: u64,
    pub overrides: Vec<LayoutOverride>,
    /// States priced.
    pub states: u32,
}

/// The overrides as choices by op name.
pub(super) fn choices_of(overrides: &[LayoutOverride]) -> BTreeMap<String, Partition> {
    overrides
        .iter()
        .map(|entry| (entry.op.clone(), entry.partition))
        .collect()
}

/// The overrides of `choices`, by op name.
pub(super) fn overrides_of(choices: &BTreeMap<String, Partition>) -> Vec<LayoutOverride> {
    choices
        .iter()
        .map(|(op, partition)| LayoutOverride {
            op: op.clone(),
            partition: *partition,
        })
        .collect()
}

fn format_signature(format: &TensorFormat) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    format.hash(&mut hasher);
    hasher.finish()
}

/// The partitions `op` may take under `layouts` (the state's plan so far):
/// as the local steps choose them (`layout_search`), from the op's problem.
pub fn op_candidates(
    graph: &Graph,
    settings: PlanningSettings,
    layouts: &Layouts,
    op_name: &str,
    head_dimension: u32,
    cheapest: u32,
    aligned: u32,
) -> Vec<Partition> {
    // Priced as the planner prices it: with the activations' precisions
    // the planner gives them (FP8 where a producer stores FP8).
    let rewritten =
        crate::layout::fp8_activations::with_fp8_activations(graph, settings.fp8_cast, |_| {
            settings.matrix_inputs
        });
    let graph = &*rewritten;
    let Some(op_id) = graph.op_ids().find(|&id| graph.op(id).name == op_name) else {
        return Vec::new();
    };
    let op = graph.op(op_id);
    let budget = MemoryBudget::of(graph, settings.tiles, settings.reserved_bytes_per_tile);
    match op.kind {
        OpKind::MatMul { .. } => {
            let problem = matmul_problem(
                graph,
                op,
                settings,
                budget.soft_budget(),
                crate::numerics::dot::Accumulation::F32,
            );
            let mut alignments = Vec::new();
            let planned = layouts.ops.iter().find(|planned| planned.name == op_name);
            if let Some(planned) = planned {
                // The value the op reads, before any conversion: its
                // producer's blocks.
                let source = planned.inputs[0];
                let source = layouts
                    .ops
                    .iter()
                    .find(|candidate| {
                        candidate.output == source
                            && matches!(candidate.plan, OpPlan::Rearrange { .. })
                    })
                    .map_or(source, |rearrange| rearrange.inputs[0]);
                let format = &layouts.value(source).format;
                alignments.push(Alignment {
                    axis: 2,
                    quantum: format.block[2],
                });
                alignments.push(Alignment {
                    axis: 0,
                    quantum: format.block[1],
                });
                // Column blocks of whole reduction blocks of the other
                // products of the region.
                for other in &layouts.ops {
                    if let OpPlan::MatMul(plan) = &other.plan
                        && other.name != op_name
                        && other.region == planned.region
                    {
                        alignments.push(Alignment {
                            axis: 1,
                            quantum: plan.block_reduction,
                        });
                    }
                }
            }
            if head_dimension > 0 {
                alignments.push(Alignment {
                    axis: 1,
                    quantum: head_dimension,
                });
            }
            alignments.sort();
            alignments.dedup();
            matmul_search_candidates(&problem, &alignments, cheapest as usize, aligned as usize)
                .iter()
                .map(|plan| Partition::MatMul {
                    rows: plan.row_parts,
                    cols: plan.col_parts,
                    reduction: plan.reduction_parts,
                    // Tried first in the order that lets a replicated
                    // operand pair; the accepted one's other orders follow.
                    order: plan.pairing_order(),
                })
                .collect()
        }
        OpKind::Attention { .. } => {
            let problem = attention_problem(graph, op, settings, budget.soft_budget());
            attention_search_candidates(&problem, cheapest as usize * 2)
                .iter()
                .map(|plan| Partition::Attention {
                    queries: plan.query_parts,
                    keys: plan.key_parts,
                    order: AttentionOrder::PLANNED,
                })
                .collect()
        }
        _ => Vec::new(),
    }
}

/// The beam over the heavy ops of `graph`, from `start` (the build's own
/// overrides). `None` when the starting plan itself cannot be planned.
pub fn beam_search(
    graph: &Graph,
    settings: PlanningSettings,
    recipe: &crate::numerics::dot::ProductRecipe,
    start: &[LayoutOverride],
    head_dimension: u32,
    beam: BeamSettings,
) -> Option<BeamOutcome> {
    let mut oracle = DirectCosts;
    let mut memo = PriceMemo::default();
    let plan = |choices: &BTreeMap<String, Partition>, oracle: &mut dyn CostOracle| {
        plan_layouts(graph, settings, &overrides_of(choices), recipe, oracle).ok()
    };
    let initial = choices_of(start);
    let first = plan(&initial, &mut oracle)?;
    let start_price = program_price(&first, &mut memo);
    let heavy: Vec<String> = first
        .ops
        .iter()
        .filter(|op| matches!(op.plan, OpPlan::MatMul(_) | OpPlan::Attention(_)))
        .map(|op| op.name.clone())
        .collect();
    let mut states = vec![(
        State {
            choices: initial,
            price: start_price,
            working: largest_working_set(&first),
            signature: 0,
        },
        first,
    )];
    let mut priced = 1u32;
    for op in &heavy {
        let mut next: Vec<(State, Layouts)> = Vec::new();
        for (state, layouts) in &states {
            let mut partitions = op_candidates(
                graph,
                PlanningSettings {
                    matrix_inputs: recipe.inputs_of(op),
                    ..settings
                },
                layouts,
                op,
                head_dimension,
                beam.cheapest,
                beam.aligned,
            );
            if let Some(current) = current_partition(layouts, op) {
                partitions.push(current);
            }
            partitions.sort();
            partitions.dedup();
            for partition in partitions {
                let mut choices = state.choices.clone();
                choices.insert(op.clone(), partition);
                let Some(planned) = plan(&choices, &mut oracle) else {
                    continue;
                };
                priced += 1;
                let price = program_price(&planned, &mut memo);
                let signature = planned
                    .ops
                    .iter()
                    .find(|candidate| candidate.name == *op)
                    .map_or(0, |candidate| {
                        format_signature(&planned.value(candidate.output).format)
                    });
                next.push((
                    State {
                        choices,
                        price,
                        working: largest_working_set(&planned),
                        signature,
                    },
                    planned,
                ));
            }
        }
        states = retain(next, beam.width as usize);
        if states.is_empty() {
            return None;
        }
    }
    let (best, _) = states.into_iter().next()?;
    Some(BeamOutcome {
        start_price,
        best_price: best.price,
        overrides: overrides_of(&best.choices),
        states: priced,
    })
}

fn current_partition(layouts: &Layouts, op_name: &str) -> Option<Partition> {
    layouts
        .ops
        .iter()
        .find(|op| op.name == op_name)?
        .plan
        .partition()
}

/// Pareto retention per signature (price, largest working set), then the
/// cheapest `width`; ties by the choices, so the result is deterministic.
fn retain(mut states: Vec<(State, Layouts)>, width: usize) -> Vec<(State, Layouts)> {
    states.sort_by(|(left, _), (right, _)| {
        (left.signature, left.price, left.working, &left.choices).cmp(&(
            right.signature,
            right.price,
            right.working,
            &right.choices,
        ))
    });
    let mut kept: Vec<(State, Layouts)> = Vec::new();
    let mut group_start = 0;
    for (state, layouts) in states {
        if kept
            .get(group_start)
            .is_none_or(|(first, _)| first.signature != state.signature)
        {
            group_start = kept.len();
        }
        // Sorted by price within the group: a state is dominated when an
        // earlier (cheaper or equal) one of its group needs no more memory.
        let dominated = kept[group_start..]
            .iter()
            .any(|(other, _)| other.working <= state.working);
        if !dominated {
            kept.push((state, layouts));
        }
    }
    kept.sort_by(|(left, _), (right, _)| {
        (left.price, left.working, &left.choices).cmp(&(right.price, right.working, &right.choices))
    });
    kept.truncate(width.max(1));
    kept
}

/// The partition in every other tile order.
pub(super) fn other_orders(partition: Partition) -> Vec<Partition> {
    match partition {
        Partition::MatMul {
            rows,
            cols,
            reduction,
            order,
        } => TileOrder::ALL
            .into_iter()
            .filter(|other| *other != order)
            .map(|other| Partition::MatMul {
                rows,
                cols,
                reduction,
                order: other,
            })
            .collect(),
        Partition::Attention {
            queries,
            keys,
            order,
        } => AttentionOrder::ALL
            .into_iter()
            .filter(|other| *other != order)
            .map(|other| Partition::Attention {
                queries,
                keys,
                order: other,
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layout::plan::PlannedValueId;

    fn empty() -> Layouts {
        Layouts {
            values: Vec::new(),
            ops: Vec::new(),
            repeat: None,
            output: PlannedValueId(0),
            resident_weight_bytes_max: 0,
            resident_weight_tile: 0,
        }
    }

    fn state(name: &str, price: u64, working: u32, signature: u64) -> (State, Layouts) {
        let mut choices = BTreeMap::new();
        choices.insert(
            name.to_string(),
            Partition::parse("1x1x1").expect("partition"),
        );
        (
            State {
                choices,
                price,
                working,
                signature,
            },
            empty(),
        )
    }

    fn names(states: &[(State, Layouts)]) -> Vec<String> {
        states
            .iter()
            .map(|(state, _)| state.choices.keys().next().cloned().unwrap_or_default())
            .collect()
    }

    #[test]
    fn retention_keeps_the_pareto_set_per_signature_then_the_cheapest() {
        let states = vec![
            // Signature 1: b is dominated by a (dearer and more memory);
            // c is dearer but smaller: kept.
            state("a", 100, 50, 1),
            state("b", 120, 60, 1),
            state("c", 130, 10, 1),
            // Signature 2: its own front, even though a beats d on both.
            state("d", 110, 70, 2),
        ];
        let kept = retain(states.clone(), 8);
        assert_eq!(names(&kept), ["a", "d", "c"]);
        // The width cap takes the cheapest of the fronts.
        assert_eq!(names(&retain(states.clone(), 2)), ["a", "d"]);
        // Deterministic whatever the input order.
        let mut reversed = states;
        reversed.reverse();
        assert_eq!(names(&retain(reversed, 8)), ["a", "d", "c"]);
    }
}
