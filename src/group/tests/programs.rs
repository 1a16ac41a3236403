//! Hand-built low programs for the tests of grouping and of the studies
//! over it (the copy-boundary audit): allocations on one tile, single
//! transfers, the seed's strided copy, and the tiny ViT compiled without a
//! database.

use std::path::Path;

use crate::expand::program::{
    Allocation, AllocationId, Destination, LocalCopy, Location, LowProgram, Provenance, Reason,
    Step, TransferList,
};
use crate::layout::format::MemoryClass;

pub(crate) const BYTES: u32 = 4096;

/// Allocations 0..count on tile 0 (4 KiB each, unaliased); names `op0`, `op1`.
pub(crate) fn program(count: u32, steps: Vec<Step>) -> LowProgram {
    let provenance = Provenance {
        op: 0,
        value: None,
        reason: Reason::Rearrange,
    };
    LowProgram {
        tiles: 2,
        names: vec!["op0".into(), "op1".into()],
        allocations: (0..count)
            .map(|id| Allocation {
                tile: 0,
                bytes: BYTES,
                alignment: 4,
                class: MemoryClass::Standard,
                alias_group: id,
                iterations: 1,
                provenance,
            })
            .collect(),
        steps,
        values: Vec::new(),
    }
}

pub(crate) fn at(allocation: u32, offset: u32) -> Location {
    Location {
        allocation: AllocationId(allocation),
        offset,
    }
}

pub(crate) fn provenance(op: u32) -> Provenance {
    Provenance {
        op,
        value: None,
        reason: Reason::Rearrange,
    }
}

/// One transfer of `words` from `source` to `destination`.
pub(crate) fn exchange(op: u32, source: Location, destination: Location, words: u32) -> Step {
    let mut transfers = TransferList::default();
    transfers.push(
        0,
        source,
        words,
        &[Destination {
            tile: 0,
            location: destination,
        }],
    );
    Step::Exchange {
        provenance: provenance(op),
        transfers,
    }
}

/// `rows` rows of 512 bytes every 3,072 bytes (the seed's MLP-up copy shape).
pub(crate) fn strided_copy(source: Location, destination: Location) -> Step {
    Step::Copies {
        provenance: provenance(0),
        copies: vec![LocalCopy {
            tile: 0,
            source,
            destination,
            row_bytes: 512,
            rows: 7,
            source_stride: 512,
            destination_stride: 3072,
        }],
    }
}

pub(crate) fn tiny() -> (
    crate::layout::plan::Layouts,
    LowProgram,
    crate::model::weights::Weights,
) {
    let query =
        crate::build_file::load_query(Path::new("queries/vit-tiny.toml"), &[]).expect("query");
    let (graph, layouts, program) = crate::direct::compile(&query).expect("compile");
    let weights = crate::direct::load_weights(&query, &graph).expect("weights");
    (layouts, program, weights)
}
