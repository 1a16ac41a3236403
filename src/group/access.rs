//! Byte-range accesses for dependency checks: affine rows (a copy's or a
//! fill's strided rows, or one contiguous transfer span) on an alias root.
//!
//! Owns the span arithmetic and alias resolution only. Rows are compared as
//! arithmetic progressions, never expanded into words; it must not decide
//! whether anything moves (that is `hazard` and `motion`).

use crate::expand::program::{AllocationId, LowProgram};

/// `rows` rows of `row_bytes`, the first at `start`, one every `stride`
/// bytes, relative to the alias root's storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rows {
    pub start: u32,
    pub row_bytes: u32,
    pub rows: u32,
    pub stride: u32,
}

impl Rows {
    pub fn contiguous(start: u32, bytes: u32) -> Rows {
        Rows {
            start,
            row_bytes: bytes,
            rows: 1,
            stride: 0,
        }
    }

    /// Bytes of row `row` as `(start, end)`, saturated at `u32::MAX`.
    pub fn row_span(&self, row: u32) -> (u32, u32) {
        let start = self.start as u64 + row as u64 * self.stride as u64;
        let end = start + self.row_bytes as u64;
        (
            start.min(u32::MAX as u64) as u32,
            end.min(u32::MAX as u64) as u32,
        )
    }

    /// The first row that overlaps `[start, end)`, if any: rows start in
    /// increasing order, so the first row ending after `start` is the only
    /// candidate (constant time, whatever the row count).
    pub fn row_overlapping(&self, start: u32, end: u32) -> Option<u32> {
        if self.rows == 0 || self.row_bytes == 0 || start >= end {
            return None;
        }
        let (origin, bytes, stride) =
            (self.start as u64, self.row_bytes as u64, self.stride as u64);
        let (start, end) = (start as u64, end as u64);
        let first = if start < origin + bytes {
            0
        } else {
            (start - origin - bytes).checked_div(stride)? + 1
        };
        if first >= self.rows as u64 || origin + first * stride >= end {
            return None;
        }
        Some(first as u32)
    }

    /// The first pair of overlapping rows of `self` and `other`, as their
    /// byte spans: walks the rows of whichever has fewer and asks the other
    /// for the one row that can overlap (rows, never words).
    pub fn overlap_with(&self, other: &Rows) -> Option<((u32, u32), (u32, u32))> {
        let (walked, asked, swapped) = if self.rows <= other.rows {
            (self, other, false)
        } else {
            (other, self, true)
        };
        (0..walked.rows).find_map(|row| {
            let span = walked.row_span(row);
            let hit = asked.row_overlapping(span.0, span.1)?;
            let found = asked.row_span(hit);
            Some(if swapped {
                (found, span)
            } else {
                (span, found)
            })
        })
    }

    /// One past the last byte of the last row (saturated).
    pub fn extent_end(&self) -> u32 {
        if self.rows == 0 {
            return self.start;
        }
        self.row_span(self.rows - 1).1
    }
}

/// Alias resolution: every allocation's root (its alias group) and whether
/// the group's members share one instance geometry. Accesses to a group whose
/// members differ in bytes or iterations are widened to the whole storage, a
/// conservative answer that needs no per-iteration reasoning.
pub struct Roots {
    root: Vec<u32>,
    uniform: Vec<bool>,
}

impl Roots {
    pub fn new(program: &LowProgram) -> Roots {
        let count = program.allocations.len();
        let root: Vec<u32> = program
            .allocations
            .iter()
            .enumerate()
            .map(|(index, allocation)| {
                if (allocation.alias_group as usize) < count {
                    allocation.alias_group
                } else {
                    index as u32
                }
            })
            .collect();
        let mut uniform = vec![true; count];
        for (index, allocation) in program.allocations.iter().enumerate() {
            let root_allocation = &program.allocations[root[index] as usize];
            if root_allocation.bytes != allocation.bytes
                || root_allocation.iterations != allocation.iterations
            {
                uniform[root[index] as usize] = false;
            }
        }
        Roots { root, uniform }
    }

    pub fn root(&self, allocation: AllocationId) -> u32 {
        self.root[allocation.0 as usize]
    }

    /// `rows` on `allocation` as seen from its root.
    pub fn resolve(&self, allocation: AllocationId, rows: Rows) -> (u32, Rows) {
        let root = self.root(allocation);
        if self.uniform[root as usize] {
            (root, rows)
        } else {
            (root, Rows::contiguous(0, u32::MAX))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rows;

    #[test]
    fn strided_rows_interleave_without_overlap() {
        // Seven 512-byte rows every 3,072 bytes (the seed's MLP-up copy).
        let rows = Rows {
            start: 0,
            row_bytes: 512,
            rows: 7,
            stride: 3072,
        };
        assert_eq!(rows.row_overlapping(512, 3072), None);
        assert_eq!(rows.row_overlapping(3072 + 511, 3072 + 513), Some(1));
        assert_eq!(rows.row_overlapping(6 * 3072 + 512, u32::MAX), None);
        assert_eq!(rows.row_overlapping(6 * 3072 + 511, u32::MAX), Some(6));
        assert_eq!(rows.row_overlapping(0, 1), Some(0));
        assert_eq!(Rows::contiguous(8, 8).row_overlapping(0, 8), None);
        assert_eq!(Rows::contiguous(8, 8).row_overlapping(15, 16), Some(0));
    }

    #[test]
    fn two_strided_row_sets_overlap_only_where_rows_meet() {
        let rows = Rows {
            start: 0,
            row_bytes: 512,
            rows: 7,
            stride: 3072,
        };
        // The gaps of the same pattern: 2,560 bytes after each row.
        let gaps = Rows {
            start: 512,
            row_bytes: 2560,
            rows: 7,
            stride: 3072,
        };
        assert_eq!(rows.overlap_with(&gaps), None);
        assert_eq!(gaps.overlap_with(&rows), None);
        let narrower = Rows {
            start: 516,
            row_bytes: 2552,
            ..gaps
        };
        assert_eq!(rows.overlap_with(&narrower), None);
        let late = Rows { start: 513, ..gaps };
        assert_eq!(rows.overlap_with(&late), Some(((3072, 3584), (513, 3073))));
        let early = Rows { start: 511, ..gaps };
        assert_eq!(rows.overlap_with(&early), Some(((0, 512), (511, 3071))));
        assert_eq!(early.overlap_with(&rows), Some(((511, 3071), (0, 512))));
        assert_eq!(rows.extent_end(), 6 * 3072 + 512);
    }
}
