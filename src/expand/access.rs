//! What each kernel reads and writes: the one description of a kernel's
//! operand accesses (its operands by name, each read, written, or the
//! kernel's own scratch), in the kernel's field order.
//!
//! Assembly remaps allocation references through it (`visit`), placement's
//! liveness takes reads and writes from it, and the low-program interpreter
//! and the package simulator take the allocations a run writes from it. The
//! low-program validator (`validate`) keeps its own independent reading of
//! every kernel, so that a mistake here cannot hide itself. The estimate
//! prices a kernel's work (MACs, elements, streamed bytes by precision) and
//! names no operand, so it does not repeat this description.

use super::program::{AllocationId, Kernel, Location, MatMulOutput, Operand};

/// How a kernel run uses one operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessRole {
    /// Read: an input, a weight block, a bias, received partial sums.
    Read,
    /// Written: the run's result.
    Write,
    /// The run's own working memory (attention scores): written and read
    /// within the run, read by nothing after it. Executors model it off the
    /// tile; placement keeps it live for the run.
    Scratch,
}

/// One operand of a kernel run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct OperandAccess {
    /// The operand's field name in `Kernel` (`a`, `weight`, `output`, ...).
    pub operand: &'static str,
    pub role: AccessRole,
    pub location: Location,
}

/// The most operands any kernel has (attention: query, key, value, output,
/// scratch).
const MAXIMUM_OPERANDS: usize = 5;

/// A kernel's operand accesses, held inline (no allocation per run).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Accesses {
    count: usize,
    items: [OperandAccess; MAXIMUM_OPERANDS],
}

impl Accesses {
    pub fn as_slice(&self) -> &[OperandAccess] {
        &self.items[..self.count]
    }

    pub fn iter(&self) -> std::slice::Iter<'_, OperandAccess> {
        self.as_slice().iter()
    }

    /// Whether the run writes (or uses as scratch) any part of `allocation`.
    pub fn writes_allocation(&self, allocation: AllocationId) -> bool {
        self.iter().any(|access| {
            access.role != AccessRole::Read && access.location.allocation == allocation
        })
    }
}

fn operand(
    name: &'static str,
    role: AccessRole,
    operand: &mut Operand,
    visit: &mut impl FnMut(&'static str, AccessRole, &mut Location),
) {
    visit(name, role, &mut operand.location);
}

impl Kernel {
    /// Calls `visit` on every operand location of the kernel with its name
    /// and role, in field order: the one place that says what a kernel
    /// touches.
    pub fn visit_accesses_mut(
        &mut self,
        visit: &mut impl FnMut(&'static str, AccessRole, &mut Location),
    ) {
        use AccessRole::{Read, Scratch, Write};
        match self {
            Kernel::MatMul {
                a, weight, output, ..
            } => {
                operand("a", Read, a, visit);
                operand("weight", Read, weight, visit);
                match output {
                    MatMulOutput::Partial(partial) => operand("partial", Write, partial, visit),
                    MatMulOutput::Final { output, bias, .. } => {
                        operand("output", Write, output, visit);
                        operand("bias", Read, bias, visit);
                    }
                }
            }
            Kernel::ReduceBias {
                local,
                received,
                bias,
                output,
                ..
            } => {
                operand("local", Read, local, visit);
                operand("received", Read, received, visit);
                operand("bias", Read, bias, visit);
                operand("output", Write, output, visit);
            }
            Kernel::LayerNorm {
                input,
                gamma,
                beta,
                output,
                ..
            } => {
                operand("input", Read, input, visit);
                operand("gamma", Read, gamma, visit);
                operand("beta", Read, beta, visit);
                operand("output", Write, output, visit);
            }
            Kernel::Gelu { input, output, .. }
            | Kernel::Rotary { input, output, .. }
            | Kernel::Cast { input, output, .. } => {
                operand("input", Read, input, visit);
                operand("output", Write, output, visit);
            }
            Kernel::AttentionPartial {
                query,
                key,
                value,
                partial,
                ..
            } => {
                operand("query", Read, query, visit);
                operand("key", Read, key, visit);
                operand("value", Read, value, visit);
                visit("partial", Write, partial);
            }
            Kernel::AttentionCombine {
                local,
                received,
                output,
                ..
            } => {
                visit("local", Read, local);
                visit("received", Read, received);
                operand("output", Write, output, visit);
            }
            Kernel::Add { a, b, output, .. } => {
                operand("a", Read, a, visit);
                operand("b", Read, b, visit);
                operand("output", Write, output, visit);
            }
            Kernel::Attention {
                query,
                key,
                value,
                output,
                scratch,
                ..
            } => {
                operand("query", Read, query, visit);
                operand("key", Read, key, visit);
                operand("value", Read, value, visit);
                operand("output", Write, output, visit);
                visit("scratch", Scratch, scratch);
            }
        }
    }

    /// The kernel's operand accesses, in field order.
    pub fn accesses(&self) -> Accesses {
        let placeholder = OperandAccess {
            operand: "",
            role: AccessRole::Read,
            location: Location {
                allocation: AllocationId(0),
                offset: 0,
            },
        };
        let mut accesses = Accesses {
            count: 0,
            items: [placeholder; MAXIMUM_OPERANDS],
        };
        let mut copy = *self;
        copy.visit_accesses_mut(&mut |operand, role, location| {
            accesses.items[accesses.count] = OperandAccess {
                operand,
                role,
                location: *location,
            };
            accesses.count += 1;
        });
        accesses
    }

    /// The kernel's kind as messages name it (`matrix product`, `attention`, ...).
    pub fn kind_name(&self) -> &'static str {
        match self {
            Kernel::MatMul { .. } => "matrix product",
            Kernel::ReduceBias { .. } => "reduce-bias",
            Kernel::LayerNorm { .. } => "LayerNorm",
            Kernel::Gelu { .. } => "GELU",
            Kernel::Add { .. } => "add",
            Kernel::Rotary { .. } => "rotary",
            Kernel::Attention { .. } => "attention",
            Kernel::AttentionPartial { .. } => "partial attention",
            Kernel::AttentionCombine { .. } => "attention combine",
            Kernel::Cast { .. } => "cast",
        }
    }

    /// The name of the operand at `allocation` that the kernel reads (the
    /// first such operand in field order), if any.
    pub fn read_operand(&self, allocation: AllocationId) -> Option<&'static str> {
        self.accesses()
            .iter()
            .find(|access| {
                access.role == AccessRole::Read && access.location.allocation == allocation
            })
            .map(|access| access.operand)
    }

    /// Every allocation the kernel writes as its result (scratch excluded:
    /// the executors keep it off the tile).
    pub fn writes(&self) -> Vec<AllocationId> {
        self.accesses()
            .iter()
            .filter(|access| access.role == AccessRole::Write)
            .map(|access| access.location.allocation)
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::expand::program::{AttentionKind, Real};
    use crate::numerics::dot::Accumulation;

    fn at(allocation: u32, offset: u32) -> Operand {
        Operand {
            location: Location {
                allocation: AllocationId(allocation),
                offset,
            },
            line: 0,
            matrix: 0,
        }
    }

    fn summary(kernel: &Kernel) -> Vec<(&'static str, AccessRole, u32)> {
        kernel
            .accesses()
            .iter()
            .map(|access| (access.operand, access.role, access.location.allocation.0))
            .collect()
    }

    #[test]
    fn a_final_matrix_product_reads_a_weight_and_bias_and_writes_its_output() {
        let kernel = Kernel::MatMul {
            a: at(1, 0),
            weight: at(2, 0),
            output: MatMulOutput::Final {
                output: at(3, 0),
                bias: at(4, 0),
                valid_rows: 1,
                valid_cols: 1,
            },
            rows: 1,
            reduction: 1,
            cols: 1,
            valid_rows: 1,
            valid_reduction: 1,
            valid_cols: 1,
            accumulation: Accumulation::F32,
            inputs: crate::numerics::dot::ProductInputs::Fp16,
            activations: crate::numerics::dot::ActivationStore::F16,
        };
        use AccessRole::{Read, Write};
        assert_eq!(
            summary(&kernel),
            vec![
                ("a", Read, 1),
                ("weight", Read, 2),
                ("output", Write, 3),
                ("bias", Read, 4)
            ]
        );
        assert_eq!(kernel.writes(), vec![AllocationId(3)]);
    }

    #[test]
    fn attention_scratch_is_neither_a_read_nor_a_result() {
        let kernel = Kernel::Attention {
            query: at(1, 0),
            key: at(2, 0),
            value: at(3, 0),
            output: at(4, 0),
            scratch: Location {
                allocation: AllocationId(5),
                offset: 8,
            },
            groups: 1,
            queries: 1,
            keys: 1,
            dimension: 1,
            scale: Real::new(1.0),
            kind: AttentionKind::Materialized,
            store: crate::numerics::dot::ActivationStore::F16,
            value_product: crate::numerics::dot::ProductInputs::Fp16,
        };
        let accesses = kernel.accesses();
        assert_eq!(accesses.as_slice().len(), 5);
        assert_eq!(accesses.as_slice()[4].role, AccessRole::Scratch);
        assert_eq!(accesses.as_slice()[4].location.offset, 8);
        assert_eq!(kernel.writes(), vec![AllocationId(4)]);
        assert!(accesses.writes_allocation(AllocationId(5)));
        assert!(!accesses.writes_allocation(AllocationId(1)));
    }

    #[test]
    fn visiting_mutably_remaps_every_operand() {
        let mut kernel = Kernel::Add {
            a: at(1, 0),
            b: at(2, 4),
            output: at(3, 8),
            groups: 1,
            rows: 1,
            cols: 1,
        };
        kernel.visit_accesses_mut(&mut |_, _, location| location.allocation.0 += 10);
        assert_eq!(
            summary(&kernel),
            vec![
                ("a", AccessRole::Read, 11),
                ("b", AccessRole::Read, 12),
                ("output", AccessRole::Write, 13)
            ]
        );
    }
}
