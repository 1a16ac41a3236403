//! Read/write hazards between a group of local copies and zero fills and
//! one exchange's transfers, and between two exchanges about to merge.
//!
//! Owns the dependency test: reads are distinguished from writes, spans are
//! compared per alias root as affine rows (`access::Rows`), and each test is
//! one pass over the exchange's transfers with a small per-root index of the
//! group (no pass over transfer pairs). It must not move or merge anything.

use serde::Serialize;

use super::access::{Roots, Rows};
use crate::expand::program::{AllocationId, Location, Step, TransferList};
use crate::hashing::FastMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub enum HazardKind {
    /// The later access reads bytes the earlier one writes.
    ReadAfterWrite,
    /// The later access writes bytes the earlier one reads.
    WriteAfterRead,
    /// Both write the same bytes.
    WriteAfterWrite,
}

/// Which exchange of a boundary: the one before the copy group or after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub enum Side {
    Preceding,
    Following,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub enum Accessor {
    /// Local copy `index` of the group (copies and fills counted together, in group order).
    Copy { index: u32 },
    /// Zero fill `index` of the group (same numbering as copies).
    Fill { index: u32 },
    /// Transfer `index` of an exchange's transfer list.
    Transfer { exchange: Side, index: u32 },
}

/// One side of a hazard: who, on which allocation, which bytes of it
/// (`start..end`, the conflicting row of a strided copy).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct Access {
    pub accessor: Accessor,
    pub allocation: AllocationId,
    pub start: u32,
    pub end: u32,
}

/// A dependency that forbids reordering `earlier` and `later` (program order).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, serde::Deserialize)]
pub struct Hazard {
    pub kind: HazardKind,
    pub earlier: Access,
    pub later: Access,
}

#[derive(Clone, Copy, Debug)]
struct GroupAccess {
    rows: Rows,
    allocation: AllocationId,
    write: bool,
    accessor: Accessor,
}

/// The group's accesses by alias root, sorted by first byte.
pub struct GroupIndex {
    by_root: FastMap<u32, Vec<GroupAccess>>,
}

fn access_rows(location: Location, row_bytes: u32, rows: u32, stride: u32) -> Rows {
    Rows {
        start: location.offset,
        row_bytes,
        rows,
        stride,
    }
}

impl GroupIndex {
    /// Indexes every copy and fill of `group` (a run of Copies/Fills steps).
    pub fn new(roots: &Roots, group: &[Step]) -> GroupIndex {
        let mut by_root: FastMap<u32, Vec<GroupAccess>> = FastMap::default();
        let mut item = 0u32;
        let mut add = |allocation: AllocationId, rows: Rows, write: bool, accessor: Accessor| {
            let (root, rows) = roots.resolve(allocation, rows);
            by_root.entry(root).or_default().push(GroupAccess {
                rows,
                allocation,
                write,
                accessor,
            });
        };
        for step in group {
            match step {
                Step::Copies { copies, .. } => {
                    for copy in copies {
                        let accessor = Accessor::Copy { index: item };
                        let read =
                            access_rows(copy.source, copy.row_bytes, copy.rows, copy.source_stride);
                        let write = access_rows(
                            copy.destination,
                            copy.row_bytes,
                            copy.rows,
                            copy.destination_stride,
                        );
                        add(copy.source.allocation, read, false, accessor);
                        add(copy.destination.allocation, write, true, accessor);
                        item += 1;
                    }
                }
                Step::Fills { fills, .. } => {
                    for fill in fills {
                        let write =
                            access_rows(fill.destination, fill.row_bytes, fill.rows, fill.stride);
                        add(
                            fill.destination.allocation,
                            write,
                            true,
                            Accessor::Fill { index: item },
                        );
                        item += 1;
                    }
                }
                _ => {}
            }
        }
        for accesses in by_root.values_mut() {
            accesses.sort_by_key(|access| access.rows.start);
        }
        GroupIndex { by_root }
    }

    /// The first group access (in start order) overlapping `[start, end)` on
    /// `root` that `wanted` accepts, with the conflicting row's bytes.
    fn first_overlap(
        &self,
        root: u32,
        start: u32,
        end: u32,
        wanted: impl Fn(&GroupAccess) -> bool,
    ) -> Option<(GroupAccess, (u32, u32))> {
        let accesses = self.by_root.get(&root)?;
        let candidates = accesses.partition_point(|access| access.rows.start < end);
        accesses[..candidates]
            .iter()
            .filter(|access| wanted(access))
            .find_map(|access| {
                access
                    .rows
                    .row_overlapping(start, end)
                    .map(|row| (*access, access.rows.row_span(row)))
            })
    }
}

fn transfer_span(location: Location, words: u32) -> Rows {
    Rows::contiguous(location.offset, words.saturating_mul(4))
}

/// The first hazard (in transfer order) between the group and `transfers`;
/// `side` says whether the exchange comes before the group (`Preceding`) or
/// after it (`Following`) in program order.
pub fn group_against_exchange(
    index: &GroupIndex,
    roots: &Roots,
    transfers: &TransferList,
    side: Side,
) -> Option<Hazard> {
    if index.by_root.is_empty() {
        return None;
    }
    for transfer in 0..transfers.len() {
        let words = transfers.words[transfer];
        let accessor = Accessor::Transfer {
            exchange: side,
            index: transfer as u32,
        };
        let check = |location: Location, exchange_writes: bool| -> Option<Hazard> {
            let (root, rows) = roots.resolve(location.allocation, transfer_span(location, words));
            let (start, end) = rows.row_span(0);
            let (group, (row_start, row_end)) =
                index.first_overlap(root, start, end, |access| exchange_writes || access.write)?;
            let kind = match (exchange_writes, group.write) {
                (true, true) => HazardKind::WriteAfterWrite,
                (true, false) if side == Side::Preceding => HazardKind::ReadAfterWrite,
                (true, false) => HazardKind::WriteAfterRead,
                (false, _) if side == Side::Preceding => HazardKind::WriteAfterRead,
                (false, _) => HazardKind::ReadAfterWrite,
            };
            let exchange_access = Access {
                accessor,
                allocation: location.allocation,
                start: location.offset,
                end: location.offset.saturating_add(words.saturating_mul(4)),
            };
            let group_access = Access {
                accessor: group.accessor,
                allocation: group.allocation,
                start: row_start,
                end: row_end,
            };
            let (earlier, later) = match side {
                Side::Preceding => (exchange_access, group_access),
                Side::Following => (group_access, exchange_access),
            };
            Some(Hazard {
                kind,
                earlier,
                later,
            })
        };
        if let Some(hazard) = check(transfers.source_location[transfer], false) {
            return Some(hazard);
        }
        for destination in transfers.destinations_of(transfer) {
            if let Some(hazard) = check(destination.location, true) {
                return Some(hazard);
            }
        }
    }
    None
}

/// Forwarding between two exchanges about to merge: the first transfer of
/// `following` that reads bytes `preceding` writes. A merged exchange is
/// bulk-synchronous (every send reads memory as it was before the phase, as
/// the interpreter executes it), so such a read would see stale data.
/// Write-after-read and write-after-write between the two lists are harmless
/// under that semantics: reads precede all writes and writes land in list order.
pub fn forwarding(
    roots: &Roots,
    preceding: &TransferList,
    following: &TransferList,
) -> Option<Hazard> {
    // Writes of `preceding` per root: (start, end, transfer, location), sorted
    // by start, with the running maximum end for pruning.
    let mut writes: FastMap<u32, Vec<(u32, u32, u32, Location)>> = FastMap::default();
    for transfer in 0..preceding.len() {
        let words = preceding.words[transfer];
        for destination in preceding.destinations_of(transfer) {
            let (root, rows) = roots.resolve(
                destination.location.allocation,
                transfer_span(destination.location, words),
            );
            let (start, end) = rows.row_span(0);
            writes.entry(root).or_default().push((
                start,
                end,
                transfer as u32,
                destination.location,
            ));
        }
    }
    let mut running_end: FastMap<u32, Vec<u32>> =
        FastMap::with_capacity_and_hasher(writes.len(), Default::default());
    for (&root, spans) in writes.iter_mut() {
        spans.sort_unstable_by_key(|&(start, end, transfer, _)| (start, end, transfer));
        let mut maximum = 0;
        running_end.insert(
            root,
            spans
                .iter()
                .map(|&(_, end, _, _)| {
                    maximum = maximum.max(end);
                    maximum
                })
                .collect(),
        );
    }
    for transfer in 0..following.len() {
        let words = following.words[transfer];
        let location = following.source_location[transfer];
        let (root, rows) = roots.resolve(location.allocation, transfer_span(location, words));
        let (start, end) = rows.row_span(0);
        let Some(spans) = writes.get(&root) else {
            continue;
        };
        let candidates = spans.partition_point(|&(span_start, ..)| span_start < end);
        if candidates == 0 || running_end[&root][candidates - 1] <= start {
            continue;
        }
        let hit = spans[..candidates]
            .iter()
            .find(|&&(_, span_end, _, _)| span_end > start);
        if let Some(&(_, _, earlier, written)) = hit {
            let earlier_words = preceding.words[earlier as usize];
            return Some(Hazard {
                kind: HazardKind::ReadAfterWrite,
                earlier: Access {
                    accessor: Accessor::Transfer {
                        exchange: Side::Preceding,
                        index: earlier,
                    },
                    allocation: written.allocation,
                    start: written.offset,
                    end: written
                        .offset
                        .saturating_add(earlier_words.saturating_mul(4)),
                },
                later: Access {
                    accessor: Accessor::Transfer {
                        exchange: Side::Following,
                        index: transfer as u32,
                    },
                    allocation: location.allocation,
                    start: location.offset,
                    end: location.offset.saturating_add(words.saturating_mul(4)),
                },
            });
        }
    }
    None
}

/// The first hazard between two copy groups of one boundary, `earlier`
/// before `later` in program order (their accessors number each group's own
/// items): a later access overlapping an earlier one where either writes.
/// Roots are visited in increasing order and each group's accesses in start
/// order, so the answer is deterministic; only accesses whose extents can
/// meet are compared, row against row.
pub fn group_against_group(earlier: &GroupIndex, later: &GroupIndex) -> Option<Hazard> {
    let mut roots: Vec<u32> = later
        .by_root
        .keys()
        .copied()
        .filter(|root| earlier.by_root.contains_key(root))
        .collect();
    roots.sort_unstable();
    for root in roots {
        let before = &earlier.by_root[&root];
        for access in &later.by_root[&root] {
            let end = access.rows.extent_end();
            let candidates = before.partition_point(|other| other.rows.start < end);
            for other in &before[..candidates] {
                if !(access.write || other.write) || other.rows.extent_end() <= access.rows.start {
                    continue;
                }
                let Some((first, second)) = other.rows.overlap_with(&access.rows) else {
                    continue;
                };
                let kind = match (other.write, access.write) {
                    (true, true) => HazardKind::WriteAfterWrite,
                    (true, false) => HazardKind::ReadAfterWrite,
                    _ => HazardKind::WriteAfterRead,
                };
                return Some(Hazard {
                    kind,
                    earlier: Access {
                        accessor: other.accessor,
                        allocation: other.allocation,
                        start: first.0,
                        end: first.1,
                    },
                    later: Access {
                        accessor: access.accessor,
                        allocation: access.allocation,
                        start: second.0,
                        end: second.1,
                    },
                });
            }
        }
    }
    None
}
