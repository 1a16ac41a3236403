//! Activation calibration (`planning.activation_scale = "calibrate"`): the
//! plan's FP8 products take the calibrated scale of their position, the
//! calibration is re-run only when what it reads changes (salsa's event
//! log), a warm build reads it from the persistent cache instead of running
//! the reference, and a calibration file is read as `--image` reads it.

use crate::common;

use std::sync::Arc;

use common::{counts, expanded_ops, query, scratch, superstep};
use superstep::build_file::{ActivationScale, CalibrationInput};
use superstep::cache::{EntryKind, PersistentCache};
use superstep::expand::program::{Kernel, Step};
use superstep::incremental::calibration::calibration_key;
use superstep::numerics::dot::ProductInputs;
use superstep::session::{Session, TrackedQuery};
use superstep::sim::calibration::ActivationCalibration;

const TINY: &str = "queries/vit-tiny.toml";
const CALIBRATED: &[&str] = &[
    "planning.matrix_inputs=fp8",
    "planning.activation_scale=calibrate",
];

/// Every matrix-product kernel's inputs and every attention kernel's `PV`
/// inputs, by the op its run belongs to.
fn kernel_scales(session: &Session) -> Vec<(String, ProductInputs)> {
    let layouts = session.layouts().expect("layouts");
    let expansions = session.op_expansions().expect("expansions");
    let mut scales = Vec::new();
    for (op, expansion) in layouts.ops.iter().zip(expansions.iter()) {
        for step in &expansion.steps {
            if let Step::Kernels { runs, .. } = step {
                for run in runs {
                    match run.kernel {
                        Kernel::MatMul { inputs, .. }
                        | Kernel::Attention {
                            value_product: inputs,
                            ..
                        }
                        | Kernel::AttentionPartial {
                            value_product: inputs,
                            ..
                        } => scales.push((op.name.clone(), inputs)),
                        _ => {}
                    }
                }
            }
        }
    }
    scales.sort_by(|a, b| a.0.cmp(&b.0));
    scales.dedup();
    scales
}

#[test]
fn every_fp8_product_takes_its_positions_calibrated_scale() {
    let mut session = Session::new(&query(TINY, CALIBRATED));
    session.build().expect("build");
    let calibration = session.activation_calibration().expect("calibrated");
    let names: Vec<&str> = calibration
        .positions
        .iter()
        .map(|position| position.op.as_str())
        .collect();
    assert_eq!(
        names,
        [
            "embed.patch",
            "layer.attn.core",
            "layer.attn.out",
            "layer.attn.qkv",
            "layer.mlp.down",
            "layer.mlp.up"
        ]
    );
    for position in &calibration.positions {
        let range = 240.0 * 2f64.powi(i32::from(position.scale));
        assert!(position.largest > 0.0 && position.largest * 2.0 <= range);
        assert!(position.largest * 2.0 > range / 2.0, "{position:?}");
        assert!(position.relative_rms > 0.0 && position.relative_rms < 0.07);
    }
    // Attention's position calibrates its values, the others their
    // activations.
    for position in &calibration.positions {
        let values = position.op == "layer.attn.core";
        assert_eq!(
            position.operand == superstep::sim::calibration::CalibratedOperand::Values,
            values,
            "{position:?}"
        );
    }
    let scales = kernel_scales(&session);
    assert!(scales.iter().any(|(op, _)| op == "layer.attn.core"));
    for (op, inputs) in scales {
        let position = calibration.position(&op).expect("a position per product");
        assert_eq!(
            inputs,
            ProductInputs::Fp8 {
                activation_scale: position.scale
            },
            "{op}"
        );
    }
    // A fixed scale is every product's, and nothing is calibrated.
    let fixed = Session::new(&query(
        TINY,
        &["planning.matrix_inputs=fp8", "planning.activation_scale=-3"],
    ));
    assert!(fixed.activation_calibration().is_none());
    assert!(kernel_scales(&fixed).iter().all(|(_, inputs)| *inputs
        == ProductInputs::Fp8 {
            activation_scale: -3
        }));
}

#[test]
fn calibration_reruns_only_when_what_it_reads_changes() {
    let mut session = Session::new(&query(TINY, CALIBRATED));
    let cold = counts(&session.build().expect("build").executions);
    assert_eq!(cold.get(&TrackedQuery::ActivationCalibration), Some(&1));
    // A scheduling and a planning flag: the calibration is not read again.
    let edited = [
        CALIBRATED,
        &["schedule.policy=list", "planning.copy_motion=false"],
    ]
    .concat();
    session.update(&query(TINY, &edited));
    let executions = counts(&session.build().expect("build").executions);
    assert_eq!(executions.get(&TrackedQuery::ActivationCalibration), None);
    // Other weights change what the reference computes.
    let rescaled = [CALIBRATED, &["workload.weights.seeded=7"]].concat();
    session.update(&query(TINY, &rescaled));
    let executions = counts(&session.build().expect("build").executions);
    assert_eq!(
        executions.get(&TrackedQuery::ActivationCalibration),
        Some(&1)
    );
}

#[test]
fn a_warm_build_reads_the_calibration_from_the_cache() {
    let directory = scratch("calibration", "warm");
    let cache = Arc::new(PersistentCache::open(&directory, 1 << 30).expect("cache"));
    let query = query(TINY, CALIBRATED);
    let mut cold = Session::with_cache(&query, Some(cache.clone()));
    cold.build().expect("build");
    let calibrated = cold.activation_calibration().expect("calibrated");
    let key = calibration_key(
        &query.workload.model,
        query.workload.batch,
        query.workload.fuse_qkv,
        &query.workload.weights,
        query.workload.fp8_scale,
        None,
    );
    let stored: ActivationCalibration = cache
        .load(EntryKind::Calibration, &key)
        .expect("the calibration is stored");
    assert_eq!(stored, *calibrated);
    // Replace the entry by a calibration no reference run would give: a
    // build that reads it plans with it, so the reference did not run.
    let mut planted = stored.clone();
    for position in &mut planted.positions {
        position.scale += 3;
    }
    cache.store(EntryKind::Calibration, &key, &planted);
    let fresh = Arc::new(PersistentCache::open(&directory, 1 << 30).expect("cache"));
    let mut warm = Session::with_cache(&query, Some(fresh));
    warm.build().expect("build");
    assert_eq!(*warm.activation_calibration().expect("calibrated"), planted);
    for (op, inputs) in kernel_scales(&warm) {
        let position = planted.position(&op).expect("position");
        assert_eq!(
            inputs,
            ProductInputs::Fp8 {
                activation_scale: position.scale
            }
        );
    }
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn a_calibration_file_is_read_when_the_build_file_is() {
    let directory = scratch("calibration", "file");
    // A 4 x 4 grid of 4 x 4 patches as superstep orders them: 16 rows of
    // 3 x 4 x 4 values.
    let values: Vec<f32> = (0..16 * 48)
        .map(|index| (index % 17) as f32 / 8.0 - 1.0)
        .collect();
    let path = directory.join("patches.npy");
    std::fs::write(&path, superstep::host_io::npy::encode(&[16, 48], &values)).expect("write");
    let setting = format!("workload.calibration={}", path.display());
    let on_file = query(TINY, &[CALIBRATED, &[setting.as_str()]].concat());
    match &on_file.planning.activation_scale {
        ActivationScale::Calibrate {
            input: CalibrationInput::File { path: named },
        } => assert_eq!(named, &path),
        other => panic!("{other:?}"),
    }
    let mut session = Session::new(&on_file);
    session.build().expect("build");
    let on_file = session.activation_calibration().expect("calibrated");
    let mut seeded = Session::new(&query(TINY, CALIBRATED));
    seeded.build().expect("build");
    assert_ne!(
        on_file.positions[0].largest,
        seeded
            .activation_calibration()
            .expect("calibrated")
            .positions[0]
            .largest
    );
    // A file that is there but is not the model's input, and one that is
    // not there: exit 2 naming the key.
    let wrong = directory.join("wrong.npy");
    std::fs::write(&wrong, superstep::host_io::npy::encode(&[3, 5], &[0.0; 15])).expect("write");
    let output = superstep(&[
        "build",
        TINY,
        "--set",
        "planning.matrix_inputs=fp8",
        "--set",
        &format!("workload.calibration={}", wrong.display()),
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("workload.calibration"), "{stderr}");
    let missing = directory.join("absent.png");
    let output = superstep(&[
        "build",
        TINY,
        "--set",
        "planning.matrix_inputs=fp8",
        "--set",
        "planning.activation_scale=calibrate",
        "--set",
        &format!("workload.calibration={}", missing.display()),
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("workload.calibration"), "{stderr}");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn one_products_matrix_inputs_replan_only_what_depends_on_it() {
    let base = [
        "planning.matrix_inputs=fp8",
        "planning.activation_scale=calibrate",
    ];
    let mut session = Session::new(&query(TINY, &base));
    session.build().expect("build");
    let calibration = session.activation_calibration().expect("calibrated");
    let changed = [&base[..], &["planning.matrix_inputs.layer.mlp.up=fp16"]].concat();
    session.update(&query(TINY, &changed));
    let executions = session.build().expect("build").executions;
    let expanded = expanded_ops(&session, &executions);
    assert!(
        expanded.contains("layer.mlp.up"),
        "{expanded:?} {:?}",
        counts(&executions)
    );
    // The product, its own operand conversions, and the LayerNorm that
    // wrote its activations in FP8 for it and now writes FP16
    // (`planning.fp8_cast = "producer"`): nothing else.
    assert!(
        expanded
            .iter()
            .all(|op| op.starts_with("layer.mlp.up") || op == "layer.ln2"),
        "only the product, its operand conversions and its producer re-expand: {expanded:?}"
    );
    assert!(expanded.contains("layer.ln2"), "{expanded:?}");
    let ran = counts(&executions);
    assert_eq!(ran.get(&TrackedQuery::ActivationCalibration), None);
    // Only the one product's problems are costed anew.
    assert!(
        ran.get(&TrackedQuery::MatmulCosting).copied().unwrap_or(0) <= 2,
        "{ran:?}"
    );
    for (op, inputs) in kernel_scales(&session) {
        let expected = if op == "layer.mlp.up" {
            ProductInputs::Fp16
        } else {
            ProductInputs::Fp8 {
                activation_scale: calibration.position(&op).expect("position").scale,
            }
        };
        assert_eq!(inputs, expected, "{op}");
    }
    // Every product FP16 but one: that one is still calibrated.
    let one_fp8 = Session::new(&query(
        TINY,
        &[
            "planning.matrix_inputs=fp16",
            "planning.activation_scale=calibrate",
            "planning.matrix_inputs.layer.attn.qkv=fp8",
        ],
    ));
    let scales = kernel_scales(&one_fp8);
    assert!(scales.iter().all(|(op, inputs)| match inputs {
        ProductInputs::Fp8 { activation_scale } =>
            op == "layer.attn.qkv"
                && *activation_scale == calibration.position(op).expect("position").scale,
        ProductInputs::Fp16 => op != "layer.attn.qkv",
    }));
}

#[test]
fn an_unknown_product_is_refused_naming_the_key_and_the_products() {
    let output = superstep(&[
        "build",
        TINY,
        "--set",
        "planning.matrix_inputs.layer.mlp.sideways=fp16",
    ]);
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("planning.matrix_inputs.layer.mlp.sideways")
            && stderr.contains("layer.mlp.down, layer.mlp.up"),
        "{stderr}"
    );
    let output = superstep(&[
        "build",
        TINY,
        "--set",
        "planning.matrix_inputs.layer.mlp.up=fp4",
    ]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("neither \"fp8\" nor \"fp16\""));
}

/// The lines of `superstep build`'s table of calibrated scales: its
/// heading and one line per product position.
fn scale_table(stdout: &str) -> Vec<String> {
    stdout
        .lines()
        .skip_while(|line| !line.contains("FP8 activation scales, calibrated"))
        .take_while(|line| line.contains("FP8 activation scales") || line.contains(" scale "))
        .map(str::to_string)
        .collect()
}

#[test]
fn the_calibration_flag_is_the_calibration_key_of_every_build_command() {
    let directory = scratch("calibration", "flag");
    let outputs = format!("outputs.directory={}", directory.display());
    let photo = "tests/fixtures/host_io/photo.png";
    let build = |extra: &[&str]| {
        let mut arguments = vec![
            "build",
            TINY,
            "--set",
            "planning.matrix_inputs=fp8",
            "--set",
            outputs.as_str(),
        ];
        arguments.extend_from_slice(extra);
        superstep(&arguments)
    };
    let table = |extra: &[&str]| {
        let output = build(extra);
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        scale_table(&String::from_utf8_lossy(&output.stdout))
    };
    let by_flag = table(&["--calibration", photo]);
    let by_key = table(&["--set", &format!("workload.calibration={photo}")]);
    let seeded = table(&[]);
    assert!(by_flag.len() > 1, "{by_flag:?}");
    assert!(
        by_flag[0].contains(&format!("calibrated on {photo}")),
        "{by_flag:?}"
    );
    assert!(
        seeded[0].contains("calibrated on the seeded input"),
        "{seeded:?}"
    );
    assert_eq!(by_flag, by_key);
    assert_ne!(by_flag[1..], seeded[1..]);
    // A --set of the key names the input instead of the flag.
    let overridden = table(&[
        "--calibration",
        photo,
        "--set",
        "workload.calibration=tests/fixtures/host_io/pixels.npy",
    ]);
    assert!(overridden[0].contains("pixels.npy"), "{overridden:?}");

    // A file that is not there, and one that is not a photo: exit 2
    // naming the file.
    let absent = directory.join("absent.png");
    let not_a_photo = directory.join("notes.png");
    std::fs::write(&not_a_photo, "not a photo").expect("write");
    for file in [&absent, &not_a_photo] {
        let output = build(&["--calibration", file.to_str().expect("path")]);
        assert_eq!(output.status.code(), Some(2), "{}", file.display());
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains(&file.display().to_string()), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }

    // The calibration input is an input: no output may be written over it.
    let array = directory.join("calibration.npy");
    std::fs::copy("tests/fixtures/host_io/pixels.npy", &array).expect("copy");
    let before = std::fs::read(&array).expect("read");
    for command in ["run", "simulate"] {
        let output = superstep(&[
            command,
            TINY,
            "--set",
            "planning.matrix_inputs=fp8",
            "--calibration",
            array.to_str().expect("path"),
            "--output",
            array.to_str().expect("path"),
        ]);
        assert_eq!(output.status.code(), Some(2), "{command}");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(stderr.contains("which this command reads"), "{stderr}");
        assert_eq!(std::fs::read(&array).expect("read"), before, "{command}");
    }

    // Every command that compiles a build explains the flag.
    for command in ["build", "run", "simulate", "phases", "diff"] {
        let output = superstep(&[command, "--help"]);
        let help = String::from_utf8_lossy(&output.stdout);
        assert!(
            help.contains("--calibration <FILE>") && help.contains("workload.calibration"),
            "{command}: {help}"
        );
    }
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn the_build_files_table_of_product_inputs_plans_as_the_set_form_does() {
    let directory = scratch("calibration", "table");
    let text = std::fs::read_to_string(TINY).expect("read").replacen(
        "[planning]\n",
        "[planning]\nmatrix_inputs = \"fp8\"\n",
        1,
    ) + "\n[planning.matrix_inputs_by_op]\n\"layer.mlp.up\" = \"fp16\"\n";
    let path = directory.join("vit-tiny.toml");
    std::fs::write(&path, text).expect("write");
    let path = path.to_str().expect("path");
    let by_table = kernel_scales(&Session::new(&query(path, &[])));
    let by_set = kernel_scales(&Session::new(&query(
        TINY,
        &[
            "planning.matrix_inputs=fp8",
            "planning.matrix_inputs.layer.mlp.up=fp16",
        ],
    )));
    let uniform = kernel_scales(&Session::new(&query(TINY, &["planning.matrix_inputs=fp8"])));
    assert_eq!(by_table, by_set);
    assert_ne!(by_table, uniform);
    for (op, inputs) in &by_table {
        assert_eq!(
            *inputs == ProductInputs::Fp16,
            op == "layer.mlp.up",
            "{op}: {inputs:?}"
        );
    }
    // A --set wins over the file's entry for its op.
    let reverted = kernel_scales(&Session::new(&query(
        path,
        &["planning.matrix_inputs.layer.mlp.up=fp8"],
    )));
    assert_eq!(reverted, uniform);
    let _ = std::fs::remove_dir_all(&directory);
}
