//! The placement's persistent-cache key is a digest of what placement reads
//! (the program's tiles, names and allocations, the grouped steps and the
//! per-tile reservations). For
//! every key of the build file, an edit of it moves the key exactly when it
//! moves those inputs: no field can change a placement and still be served
//! a stale one from disk, and fields placement does not read (outputs, the
//! FP8 scale, schedule fields that leave the rows alone) keep it.

use crate::common;

use std::sync::Arc;

use common::query;
use superstep::build_file::schema::{KeyKind, known_keys};
use superstep::cache::CacheKey;
use superstep::expand::program::{LowProgram, Step};
use superstep::incremental::lowering::low_program;
use superstep::incremental::phases::phase_groups;
use superstep::incremental::whole_program::{placement_key, tile_reservations};
use superstep::incremental::{CompilerDatabase, create_inputs};
use superstep::place::TileReservations;

/// What placement reads, and its key.
struct Inputs {
    key: CacheKey,
    program: Arc<LowProgram>,
    steps: Vec<Step>,
    reservations: Arc<TileReservations>,
}

/// Placement's inputs and key, read from the queries of a database of
/// its own (this test is of a query, below the session's facade).
fn inputs(sets: &[&str]) -> Inputs {
    let db = CompilerDatabase::default();
    let build = create_inputs(&db, &query("queries/vit-tiny.toml", sets));
    Inputs {
        key: *placement_key(&db, build).as_ref().expect("key"),
        program: low_program(&db, build).clone().expect("program"),
        steps: phase_groups(&db, build)
            .as_ref()
            .expect("groups")
            .steps
            .clone(),
        reservations: tile_reservations(&db, build).clone().expect("reservations"),
    }
}

/// One edit per build-file key (several `--set`s where one alone would be
/// invalid), or why the key is not edited on the tiny build.
fn edit_of(key: &str) -> Result<&'static [&'static str], &'static str> {
    Ok(match key {
        "name" => &["name=renamed"],
        "workload.model" => return Err("a preset replaces every shape key of the custom build"),
        "workload.layers" => &["workload.layers=3"],
        "workload.batch" => &["workload.batch=2"],
        "workload.fuse_qkv" => &["workload.fuse_qkv=false"],
        "workload.fp8_scale" => &["workload.fp8_scale=-5"],
        "workload.attention" => &["workload.attention=flash"],
        "workload.width" => &["workload.width=32"],
        "workload.mlp" => &["workload.mlp=128"],
        "workload.heads" => &["workload.heads=2"],
        "workload.patches" => &["workload.patches=9"],
        "workload.patch" => &["workload.patch=2"],
        "workload.class_token" => &["workload.class_token=false", "workload.pooling=map"],
        "workload.gelu" => &["workload.gelu=erf"],
        "workload.pooling" => &["workload.pooling=map"],
        "workload.pooling_heads" => &["workload.pooling=map", "workload.pooling_heads=2"],
        "workload.rotary" => &["workload.rotary=true"],
        "workload.projection" => &["workload.projection=32"],
        "workload.pre_norm" => &["workload.pre_norm=false"],
        "workload.layer_norm_epsilon" => &["workload.layer_norm_epsilon=0.00001"],
        "workload.weights.seeded" => &["workload.weights.seeded=2"],
        "workload.weights.safetensors" => return Err("needs a weights file"),
        "workload.weights.naming" => return Err("needs a weights file"),
        "machine.preset" => &["machine.preset=c600"],
        "machine.tiles" => &["machine.tiles=12"],
        "machine.calibration" => &["machine.calibration=calibration/ipu21.txt"],
        "planning.accumulation" => &["planning.accumulation=f32"],
        "planning.copy_motion" => &["planning.copy_motion=false"],
        "planning.fusion" => &["planning.fusion=across-operators"],
        "planning.repeat_base" => &["planning.repeat_base=false"],
        "planning.reserved_bytes_per_tile" => &["planning.reserved_bytes_per_tile=40000"],
        "planning.max_partition_candidates" => &["planning.max_partition_candidates=2"],
        "planning.auto_f16_max_parts" => &["planning.auto_f16_max_parts=0"],
        "planning.matrix_inputs" => &["planning.matrix_inputs=fp8"],
        "planning.matrix_inputs_by_op" => &["planning.matrix_inputs_by_op.layer.mlp.up=fp8"],
        "planning.fp8_cast" => &["planning.matrix_inputs=fp8", "planning.fp8_cast=product"],
        // A photo whose products' scales differ from the seeded input's in
        // the tiny graph's head or not: the key moves exactly when they do.
        "workload.calibration" => &[
            "planning.matrix_inputs=fp8",
            "workload.calibration=tests/fixtures/host_io/photo.png",
        ],
        "planning.activation_scale" => {
            &["planning.matrix_inputs=fp8", "planning.activation_scale=-3"]
        }
        "layout.override.op" | "layout.override.partition" => {
            &["layout.override.layer.mlp.down=1x4x4"]
        }
        "layout.override.order" => &["layout.override.layer.mlp.down=1x2x6/kcr"],
        "layout.override.when.batch"
        | "layout.override.when.layers"
        | "layout.override.when.tiles"
        | "layout.override.when.matrix_inputs" => {
            return Err(
                "a `when` has no --set form (command-line pins always apply); it only decides \
                 whether its entry applies, which the entry's own edit covers",
            );
        }
        "schedule.policy" => &["schedule.policy=B64"],
        "schedule.width" => &["schedule.width=paired64"],
        "schedule.row_allowance" => &["schedule.row_allowance=0"],
        "schedule.prune_by_bounds" => &["schedule.prune_by_bounds=false"],
        "schedule.override.phase" | "schedule.override.policy" => {
            &["schedule.override.layer.attn.qkv#0=S64"]
        }
        "schedule.override.width" => &["schedule.override.layer.attn.qkv#0=S64/paired64"],
        "outputs.directory" => &["outputs.directory=elsewhere"],
        "outputs.report" => &["outputs.report=false"],
        "outputs.phases_csv" => &["outputs.phases_csv=false"],
        "outputs.html" => &["outputs.html=false"],
        "outputs.package" => &["outputs.package=false"],
        "cache.remote" => &["cache.remote=http://127.0.0.1:9/cache"],
        "cache.remote_timeout_ms" => &["cache.remote_timeout_ms=500"],
        "cache.remote_deadline_ms" => &["cache.remote_deadline_ms=500"],
        "cache.trusted_keys" => {
            return Err("trusted keys decide which cache entries are read, never what is computed");
        }
        _ => return Err("no edit written: add one to this test"),
    })
}

#[test]
fn the_key_moves_exactly_when_what_placement_reads_moves() {
    let base = inputs(&[]);
    let (mut moved, mut kept) = (Vec::new(), Vec::new());
    for (table, keys) in known_keys() {
        for (key, kind) in keys {
            if matches!(kind, KeyKind::Table | KeyKind::TableArray) {
                continue;
            }
            let path = if table.is_empty() {
                key.to_string()
            } else {
                format!("{table}.{key}")
            };
            let sets = match edit_of(&path) {
                Ok(sets) => sets,
                Err(reason) => {
                    assert!(!reason.starts_with("no edit written"), "{path}: {reason}");
                    continue;
                }
            };
            let edited = inputs(sets);
            let inputs_moved = edited.program.tiles != base.program.tiles
                || edited.program.names != base.program.names
                || edited.program.allocations != base.program.allocations
                || edited.steps != base.steps
                || edited.reservations != base.reservations;
            let key_moved = edited.key != base.key;
            assert_eq!(
                key_moved, inputs_moved,
                "{path} ({sets:?}): key moved {key_moved}, placement's inputs moved {inputs_moved}"
            );
            if key_moved {
                moved.push(path);
            } else {
                kept.push(path);
            }
        }
    }
    // Both kinds occur, and the obvious ones are where they belong. A
    // schedule policy changes rows only, and the exchange table is reserved
    // in whole memory elements, which absorb that change: placement stays.
    for path in ["workload.layers", "machine.tiles"] {
        assert!(moved.iter().any(|moved| moved == path), "{path}: {moved:?}");
    }
    for path in [
        "schedule.policy",
        "outputs.directory",
        "workload.fp8_scale",
        "name",
        "cache.remote",
    ] {
        assert!(kept.iter().any(|kept| kept == path), "{path}: {kept:?}");
    }
}
