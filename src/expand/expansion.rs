//! The per-op expansion result and the small builder that makes it.
//!
//! An op's expansion names memory through local references: a block-replica
//! of one of its operands (resolved to the value's allocations when the low
//! program is assembled) or a scratch allocation it owns. That keeps each
//! op's expansion independent of every other op's, so the query layer can
//! re-expand one op without renumbering the others.

use serde::Serialize;

use super::program::{AllocationId, Location, Provenance, Reason, Step, TransferList};
use crate::hashing::FastMap;
use crate::layout::format::MemoryClass;

/// The output operand's index in `AllocationRef::Value`.
pub const OUTPUT_OPERAND: u8 = u8::MAX;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub enum AllocationRef {
    /// Block-replica `slot` (`block * replicas + replica`) of input
    /// `operand`, or of the output when `operand == OUTPUT_OPERAND`.
    Value { operand: u8, slot: u32 },
    /// The op's own scratch allocation `index`.
    Scratch { index: u32 },
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ScratchAllocation {
    pub tile: u32,
    pub bytes: u32,
    pub alignment: u32,
    pub class: MemoryClass,
    pub reason: Reason,
}

/// One op's part of the low program. `Location::allocation` inside `steps`
/// indexes `references`; provenance `op`/`value` fields are filled in at
/// assembly.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, Serialize)]
pub struct OpExpansion {
    pub references: Vec<AllocationRef>,
    pub scratch: Vec<ScratchAllocation>,
    pub steps: Vec<Step>,
}

#[derive(Default)]
pub struct ExpansionBuilder {
    expansion: OpExpansion,
    index: FastMap<AllocationRef, u32>,
}

pub fn local_provenance(reason: Reason) -> Provenance {
    Provenance {
        op: 0,
        value: None,
        reason,
    }
}

impl ExpansionBuilder {
    pub fn reference(&mut self, reference: AllocationRef) -> AllocationId {
        if let Some(&id) = self.index.get(&reference) {
            return AllocationId(id);
        }
        let id = self.expansion.references.len() as u32;
        self.expansion.references.push(reference);
        self.index.insert(reference, id);
        AllocationId(id)
    }

    pub fn value(&mut self, operand: u8, slot: u32, offset: u32) -> Location {
        Location {
            allocation: self.reference(AllocationRef::Value { operand, slot }),
            offset,
        }
    }

    pub fn scratch(
        &mut self,
        tile: u32,
        bytes: u32,
        class: MemoryClass,
        reason: Reason,
    ) -> Location {
        let index = self.expansion.scratch.len() as u32;
        self.expansion.scratch.push(ScratchAllocation {
            tile,
            bytes,
            alignment: 8,
            class,
            reason,
        });
        Location {
            allocation: self.reference(AllocationRef::Scratch { index }),
            offset: 0,
        }
    }

    pub fn push(&mut self, step: Step) {
        let empty = match &step {
            Step::Kernels { runs, .. } => runs.is_empty(),
            Step::Copies { copies, .. } => copies.is_empty(),
            Step::Fills { fills, .. } => fills.is_empty(),
            Step::Exchange { transfers, .. } => transfers.is_empty(),
            Step::Repeat { body, .. } => body.is_empty(),
            Step::Checkpoint { .. } => false,
        };
        if !empty {
            self.expansion.steps.push(step);
        }
    }

    pub fn exchange(&mut self, reason: Reason, transfers: TransferList) {
        self.push(Step::Exchange {
            provenance: local_provenance(reason),
            transfers,
        });
    }

    pub fn finish(mut self) -> OpExpansion {
        super::program::Step::shrink_exchanges(&mut self.expansion.steps);
        self.expansion
    }
}
