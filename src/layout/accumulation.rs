//! How matrix products accumulate partial sums across tiles: one precision
//! for all, or `auto`'s per-product choice by cost under a bound on FP16
//! partials. The planner (`planner`) costs the candidates this names and
//! keeps the one it admits; this module owns the rule only.

use super::cost::MatMulPlan;
use crate::model::graph::Region;
use crate::numerics::dot::Accumulation;

/// How matrix products accumulate their partial sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccumulationPolicy {
    /// Every product the same.
    Fixed(Accumulation),
    /// Per product of the repeated layer: FP16 partial sums when that plan
    /// is cheaper and splits the reduction into at most `f16_max_parts`
    /// parts, else FP32. Each FP16 partial adds one rounding of at most
    /// 2^-11 of its magnitude, so the bound caps the added error at
    /// `f16_max_parts` x 2^-11 of the partials' summed magnitude (the FP16
    /// output itself rounds at 2^-11). Products outside the repeated layer
    /// run once, so FP16 would save little there, and the head's feed the
    /// model's output with nothing after them to dilute the error: they keep
    /// FP32 (measured: FP16 partials in the pooling head's last product cost
    /// SigLIP batch 2 a digit of cosine).
    Auto { f16_max_parts: u32 },
}

impl AccumulationPolicy {
    /// The accumulations to cost for a product in `region`, preferred first.
    pub(super) fn candidates(self, region: Region) -> &'static [Accumulation] {
        match self {
            AccumulationPolicy::Fixed(Accumulation::F32) => &[Accumulation::F32],
            AccumulationPolicy::Fixed(Accumulation::F16) => &[Accumulation::F16],
            AccumulationPolicy::Auto { f16_max_parts: 0 } => &[Accumulation::F32],
            AccumulationPolicy::Auto { .. } if region != Region::Body => &[Accumulation::F32],
            AccumulationPolicy::Auto { .. } => &[Accumulation::F32, Accumulation::F16],
        }
    }

    /// Whether `plan` may be taken over the preferred `incumbent`.
    pub(super) fn admits(self, plan: &MatMulPlan, incumbent: Option<&MatMulPlan>) -> bool {
        match self {
            AccumulationPolicy::Fixed(_) => incumbent.is_none(),
            AccumulationPolicy::Auto { f16_max_parts } => match plan.accumulation {
                Accumulation::F32 => incumbent.is_none(),
                Accumulation::F16 => {
                    plan.reduction_parts > 1
                        && plan.reduction_parts <= f16_max_parts
                        && incumbent.is_none_or(|incumbent| plan.cycles < incumbent.cycles)
                }
            },
        }
    }
}
