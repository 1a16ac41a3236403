//! Package assembly from the memoized queries: the placed program, every
//! phase's finalized rows and Repeat patches, the stored rows and sharing
//! patches (`crate::package` owns the format, its file and its checks).

use rayon::prelude::*;

use super::lowering::low_program;
use super::phases::{phase_groups, phase_keys, phase_patches, phase_problem, phase_work};
use super::schedules::encoded_rows;
use super::whole_program::{BackendError, placement, row_table};
use super::{BuildInputs, Db};
use crate::expand::visit::step_locations_mut;
use crate::package::{Package, PackageError, PackagePhase, PlacedAllocation};

/// Why a package could not be assembled.
#[derive(Debug, thiserror::Error)]
pub enum AssemblyError {
    #[error(transparent)]
    Build(#[from] BackendError),
    #[error(transparent)]
    Package(#[from] PackageError),
}

/// Assembles the package of a built build: the placed program, every
/// phase's finalized rows and Repeat patches, the stored rows and sharing
/// patches.
pub fn assemble_package(db: &dyn Db, build: BuildInputs) -> Result<Package, AssemblyError> {
    let program = low_program(db, build).clone().map_err(BackendError::from)?;
    let groups = phase_groups(db, build)
        .clone()
        .map_err(BackendError::from)?;
    let placed = placement(db, build).clone()?;
    let table = row_table(db, build).clone()?;
    let mut steps = groups.steps.clone();
    for step in &mut steps {
        step_locations_mut(step, &mut |location| {
            location.offset += placed.base[location.allocation.0 as usize];
        });
    }
    // The memoized inputs of every phase, gathered in order; finalizing
    // (resolving every relocation slot) then runs in parallel.
    let mut inputs = Vec::with_capacity(groups.phases.len());
    for (&key, record) in phase_keys(db, build).iter().zip(&groups.phases) {
        let phase_name = key.key(db).clone();
        let failure = |error: String| PackageError::Rows {
            phase: phase_name.clone(),
            message: error,
        };
        let problem = phase_problem(db, key)
            .clone()
            .map_err(|error| failure(error.to_string()))?;
        let (content, policy) = phase_work(db, key).map_err(|error| failure(error.to_string()))?;
        let rows = encoded_rows(db, content, policy)
            .clone()
            .map_err(|error| failure(error.to_string()))?;
        let patches = phase_patches(db, key)
            .clone()
            .map_err(|error| failure(error.to_string()))?;
        inputs.push((phase_name, record, problem.allocations, rows, patches));
    }
    let phases = inputs
        .into_par_iter()
        .enumerate()
        .map(
            |(index, (phase_name, record, allocations, rows, patches))| {
                let finalized = rows
                    .finalize(|allocation, offset| {
                        placed.base[allocations[allocation as usize].0 as usize] + offset
                    })
                    .map_err(|error| PackageError::Rows {
                        phase: phase_name.clone(),
                        message: error.to_string(),
                    })?;
                // Every phase has a row-table entry; a missing one is a
                // broken invariant, not an empty list.
                let stored_rows =
                    table
                        .stored
                        .get(index)
                        .cloned()
                        .ok_or_else(|| PackageError::Rows {
                            phase: phase_name.clone(),
                            message: format!(
                                "the row table has no entry for phase {index} (it has {})",
                                table.stored.len()
                            ),
                        })?;
                Ok(PackagePhase {
                    key: phase_name,
                    executions: record.executions,
                    step_path: record.step_path.clone(),
                    rows: finalized,
                    repeat_patches: patches.tiles.clone(),
                    stored_rows,
                })
            },
        )
        .collect::<Result<Vec<_>, PackageError>>()?;
    Ok(Package {
        name: build.name(db).clone(),
        tiles: program.tiles,
        fp8_scale: build.fp8_scale(db),
        names: program.names.clone(),
        allocations: program
            .allocations
            .iter()
            .zip(&placed.base)
            .map(|(allocation, &address)| PlacedAllocation {
                tile: allocation.tile,
                address,
                bytes: allocation.bytes,
                iterations: allocation.iterations,
                class: allocation.class,
            })
            .collect(),
        steps,
        phases,
        sharing_patches: table.sharing_patches.clone(),
        exchange_table_base: placed.exchange_table_base.clone(),
        patch_lists_base: placed.patch_lists_base.clone(),
    })
}
