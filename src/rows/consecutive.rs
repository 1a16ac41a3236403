//! A simple consecutive placement of a problem's local allocations, for the
//! row checker and exchange replay: per tile, alias roots in local order from
//! the tile's base address, each aligned to at least 8 bytes and as large as
//! its largest member's instances. It is not the compiler's placement and
//! must not be used for packaging.

use super::error::RowError;
use crate::schedule::ExchangeProblem;
use crate::target::memory::{TILE_BASE_ADDRESS, TILE_END_ADDRESS};

/// Smallest alignment of a placed root (keeps paired transfers aligned).
const MINIMUM_ALIGNMENT: u32 = 8;

/// Bytes of storage of each alias root (indexed by local allocation; 0 for
/// a member that is not a root): its largest member's instances. An
/// explicitly bound member may itself be empty and address its root's.
pub fn root_storage_bytes(problem: &ExchangeProblem) -> Vec<u64> {
    let mut size = vec![0u64; problem.allocations.len()];
    for allocation in &problem.allocations {
        let bytes = u64::from(allocation.bytes) * u64::from(allocation.iterations.max(1));
        if let Some(root) = size.get_mut(allocation.alias_root as usize) {
            *root = (*root).max(bytes);
        }
    }
    size
}

/// Byte addresses of every local allocation, and each tile's used bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConsecutivePlacement {
    /// Per local allocation: its byte address.
    pub base: Vec<u32>,
    /// Per tile: bytes used from `TILE_BASE_ADDRESS`.
    pub used: Vec<u32>,
}

impl ConsecutivePlacement {
    pub fn new(problem: &ExchangeProblem) -> Result<ConsecutivePlacement, RowError> {
        let count = problem.allocations.len();
        let size = root_storage_bytes(problem);
        let mut next = vec![u64::from(TILE_BASE_ADDRESS); problem.tiles as usize];
        let mut base = vec![0u32; count];
        for (index, allocation) in problem.allocations.iter().enumerate() {
            if allocation.alias_root as usize != index {
                continue;
            }
            let tile = allocation.tile as usize;
            let alignment = u64::from(allocation.alignment.max(MINIMUM_ALIGNMENT));
            let start = next[tile].div_ceil(alignment) * alignment;
            let end = start + size[index];
            if end > u64::from(TILE_END_ADDRESS) {
                return Err(RowError::PlacementOverflow {
                    tile: allocation.tile,
                    bytes: end - u64::from(TILE_BASE_ADDRESS),
                });
            }
            base[index] = start as u32;
            next[tile] = end;
        }
        for (index, allocation) in problem.allocations.iter().enumerate() {
            base[index] = base[allocation.alias_root as usize];
        }
        let used = next
            .iter()
            .map(|&end| (end - u64::from(TILE_BASE_ADDRESS)) as u32)
            .collect();
        Ok(ConsecutivePlacement { base, used })
    }

    /// Byte address of `offset` in local allocation `allocation`.
    ///
    /// Every local allocation of the problem has a base; an unknown one is a
    /// broken invariant (a debug assertion), never silently address 0.
    pub fn resolve(&self, allocation: u32, offset: u32) -> u32 {
        let base = self.base.get(allocation as usize).copied();
        debug_assert!(
            base.is_some(),
            "allocation {allocation} is not among the {} placed",
            self.base.len()
        );
        base.unwrap_or(0).wrapping_add(offset)
    }
}
