//! The local copies a packing counterfactual adds, and what they cost in
//! the seed's terms: ideal cycles at 8 bytes per cycle (the source and the
//! destination critical paths, each the busiest tile's, added), staging
//! bytes (source and receive staging combined on one tile, the fullest
//! tile's), contiguous copy runs and greedy affine copy groups (runs of one
//! length whose two ends step by constant strides), counted over all tiles
//! and on the busiest one. Copy call setup, barriers and bank conflicts are
//! not counted: these are floors, not kernel estimates.

use serde::{Deserialize, Serialize};

use crate::schedule::problem::SymbolicAddress;
use crate::target::costs::LOCAL_COPY_BYTES_PER_CYCLE;

/// One local copy of contiguous bytes on one tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct CopyRun {
    pub tile: u32,
    pub from: SymbolicAddress,
    pub to: SymbolicAddress,
    pub bytes: u32,
}

impl CopyRun {
    /// Whether `next` carries on where this run ends, at both ends.
    fn continued_by(&self, next: &CopyRun) -> bool {
        let follows = |end: SymbolicAddress, start: SymbolicAddress| {
            end.allocation == start.allocation
                && u64::from(end.offset) + u64::from(self.bytes) == u64::from(start.offset)
        };
        self.tile == next.tile && follows(self.from, next.from) && follows(self.to, next.to)
    }
}

/// The copy figures of one counterfactual.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CopyFigures {
    /// Ideal cycles of the busiest tile's gather before the exchange.
    pub source_copy_cycles: u64,
    /// Ideal cycles of the busiest tile's scatter after it.
    pub destination_copy_cycles: u64,
    /// The two critical paths added (the seed's "added ideal copy cycles").
    pub added_copy_cycles: u64,
    /// Bytes the fullest tile stages (source and receive staging together).
    pub staging_bytes_max: u64,
    /// That tile (none when nothing is staged).
    pub staging_tile: Option<u32>,
    /// Contiguous copy runs over all tiles (both ends merged).
    pub copy_runs: u64,
    /// Greedy affine copy groups over all tiles.
    pub affine_groups: u64,
    /// The most affine groups on one tile.
    pub affine_groups_max_per_tile: u64,
}

/// The figures of the copies `gathers` and `scatters` (each grouped by
/// tile, in staging order) on a machine of `tiles` tiles.
pub fn copy_figures(tiles: u32, gathers: &[CopyRun], scatters: &[CopyRun]) -> CopyFigures {
    let mut staged = vec![0u64; tiles as usize];
    let mut groups = vec![0u64; tiles as usize];
    let mut figures = CopyFigures::default();
    for (runs, cycles) in [
        (gathers, &mut figures.source_copy_cycles),
        (scatters, &mut figures.destination_copy_cycles),
    ] {
        let mut bytes = vec![0u64; tiles as usize];
        for run in runs {
            bytes[run.tile as usize] += u64::from(run.bytes);
            staged[run.tile as usize] += u64::from(run.bytes);
        }
        *cycles = bytes
            .iter()
            .map(|&bytes| bytes.div_ceil(LOCAL_COPY_BYTES_PER_CYCLE))
            .max()
            .unwrap_or(0);
        let merged = merge_runs(runs);
        figures.copy_runs += merged.len() as u64;
        for (tile, count) in affine_groups(&merged) {
            groups[tile as usize] += count;
        }
    }
    figures.added_copy_cycles = figures.source_copy_cycles + figures.destination_copy_cycles;
    figures.affine_groups = groups.iter().sum();
    figures.affine_groups_max_per_tile = groups.iter().copied().max().unwrap_or(0);
    if let Some((tile, &bytes)) = staged
        .iter()
        .enumerate()
        .max_by_key(|&(tile, &bytes)| (bytes, std::cmp::Reverse(tile)))
        && bytes > 0
    {
        figures.staging_bytes_max = bytes;
        figures.staging_tile = Some(tile as u32);
    }
    figures
}

/// Consecutive runs joined where both ends continue.
pub fn merge_runs(runs: &[CopyRun]) -> Vec<CopyRun> {
    let mut merged: Vec<CopyRun> = Vec::with_capacity(runs.len());
    for run in runs {
        match merged.last_mut() {
            Some(last) if last.continued_by(run) => last.bytes += run.bytes,
            _ => merged.push(*run),
        }
    }
    merged
}

/// The steps of an affine group's source and destination offsets.
type Strides = (i64, i64);

/// Greedy affine groups of consecutive runs, per tile: a group extends
/// while runs keep its length, its two allocations and the strides its
/// first two members set. Returns (tile, groups) in tile order of `runs`.
pub fn affine_groups(runs: &[CopyRun]) -> Vec<(u32, u64)> {
    let mut counts: Vec<(u32, u64)> = Vec::new();
    // The group being extended: its first run, its strides (once it has
    // two members) and its last run.
    let mut current: Option<(CopyRun, Option<Strides>, CopyRun)> = None;
    let stride = |from: &CopyRun, to: &CopyRun| {
        (
            i64::from(to.from.offset) - i64::from(from.from.offset),
            i64::from(to.to.offset) - i64::from(from.to.offset),
        )
    };
    for run in runs {
        let extends = match &current {
            Some((first, strides, last)) => {
                first.tile == run.tile
                    && first.bytes == run.bytes
                    && first.from.allocation == run.from.allocation
                    && first.to.allocation == run.to.allocation
                    && strides.is_none_or(|strides| stride(last, run) == strides)
            }
            None => false,
        };
        if extends && let Some((_, strides, last)) = &mut current {
            if strides.is_none() {
                *strides = Some(stride(last, run));
            }
            *last = *run;
            continue;
        }
        current = Some((*run, None, *run));
        match counts.last_mut() {
            Some((tile, count)) if *tile == run.tile => *count += 1,
            _ => counts.push((run.tile, 1)),
        }
    }
    counts
}
