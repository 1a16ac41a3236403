//! The package simulator: the finished package computes what the low
//! program computes, bit for bit, and its checks catch faults in rows,
//! placement and patches, naming tile, step and phase.

use crate::common;
use crate::padding;

use common::{TINY_VARIANTS, query};
use superstep::direct::load_weights;
use superstep::expand::program::Step;
use superstep::expand::visit::step_locations_mut;
use superstep::package::Package;
use superstep::session::Session;
use superstep::sim::compare::compare;
use superstep::sim::interpreter::interpret;
use superstep::sim::package::{
    PackageFault, PackageRun, SimulationOptions, simulate, simulate_with,
};
use superstep::sim::reference::evaluate_reference;

struct Built {
    session: Session,
    package: Package,
    weights: superstep::model::weights::Weights,
}

fn built(file: &str, sets: &[&str]) -> Built {
    let query = query(file, sets);
    let mut session = Session::new(&query);
    session.build().expect("build");
    let package = session.package().expect("package");
    let weights = load_weights(&query, session.graph()).expect("weights");
    Built {
        session,
        package,
        weights,
    }
}

impl Built {
    fn simulate(&self, package: &Package) -> Result<PackageRun, PackageFault> {
        let layouts = self.session.layouts().expect("layouts");
        let program = self.session.low_program().expect("program");
        simulate(package, &program, &layouts, &self.weights)
    }

    /// Counting (not failing on) kernel reads of never-written padding.
    fn simulate_lenient(&self, package: &Package) -> Result<PackageRun, PackageFault> {
        self.simulate_options(
            package,
            SimulationOptions {
                strict: false,
                poisoned: false,
            },
        )
    }

    fn simulate_options(
        &self,
        package: &Package,
        options: SimulationOptions,
    ) -> Result<PackageRun, PackageFault> {
        let layouts = self.session.layouts().expect("layouts");
        let program = self.session.low_program().expect("program");
        simulate_with(package, &program, &layouts, &self.weights, options)
    }

    fn check_against_interpreter_and_reference(&self) -> f64 {
        self.check()
    }

    /// Strict: any kernel read of a byte its value's producer never wrote
    /// (padding the program leaves undefined) fails both simulators.
    fn check(&self) -> f64 {
        self.checked_run().0
    }

    /// The checks of `check`, returning the cosine and the package run.
    fn checked_run(&self) -> (f64, PackageRun) {
        let layouts = self.session.layouts().expect("layouts");
        let program = self.session.low_program().expect("program");
        let run = self.simulate(&self.package).expect("package simulation");
        let interpreted = interpret(&program, &layouts, &self.weights).expect("interpret");
        let reference = evaluate_reference(self.session.graph(), &self.weights).expect("reference");
        let agreement = compare(&run.output, &reference);
        println!("{}: {:?}, {:?}", self.package.name, agreement, run.counts);
        let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
        assert_eq!(
            bits(&run.output),
            bits(&interpreted.output),
            "package output differs from the interpreter's"
        );
        assert_eq!(agreement.non_finite, 0);
        assert!(agreement.cosine >= 0.99, "cosine {}", agreement.cosine);
        (agreement.cosine, run)
    }
}

#[test]
fn tiny_package_matches_the_interpreter_bit_for_bit_and_the_reference() {
    built("queries/vit-tiny.toml", &[]).check_against_interpreter_and_reference();
}

/// FP8 matrix inputs, end to end: with `planning.matrix_inputs = "fp8"`
/// every product rounds its activation block to FP8 at the activation
/// scale before the FP8 x FP8 product; the package computes exactly what
/// the interpreter computes, and both stay close to the FP32 reference
/// (which is not rounded) but no longer equal to the FP16 program.
#[test]
fn fp8_matrix_inputs_compute_the_interpreters_output_bit_for_bit() {
    let fp16 = built("queries/vit-tiny.toml", &["planning.matrix_inputs=fp16"]);
    let fp8 = built(
        "queries/vit-tiny.toml",
        &["planning.matrix_inputs=fp8", "planning.activation_scale=-4"],
    );
    let layouts = fp8.session.layouts().expect("layouts");
    let products = layouts
        .ops
        .iter()
        .filter(|op| matches!(&op.plan, superstep::layout::plan::OpPlan::MatMul(plan)
            if matches!(plan.inputs, superstep::numerics::dot::ProductInputs::Fp8 { activation_scale: -4 })))
        .count();
    assert!(products >= 4, "{products} FP8 products");
    let (cosine_fp8, run_fp8) = fp8.checked_run();
    let (cosine_fp16, run_fp16) = fp16.checked_run();
    println!("cosine: fp16 {cosine_fp16}, fp8 {cosine_fp8}");
    assert_ne!(
        run_fp8.output, run_fp16.output,
        "rounding the activations to FP8 changes the output"
    );
    assert!(cosine_fp8 < cosine_fp16, "{cosine_fp8} vs {cosine_fp16}");
    // Every product rounds its activations; none saturates at 2^-4 on the
    // seeded weights, and FP16 inputs round none.
    assert!(run_fp8.counts.fp8_activations > 0);
    assert_eq!(run_fp8.counts.saturated_activations, 0);
    assert_eq!(run_fp16.counts.fp8_activations, 0);
}

/// Exchange words a program moves, counting a Repeat body once.
fn words_moved(steps: &[superstep::expand::program::Step]) -> u64 {
    use superstep::expand::program::Step;
    steps
        .iter()
        .map(|step| match step {
            Step::Exchange { transfers, .. } => (0..transfers.len())
                .map(|transfer| {
                    transfers.words[transfer] as u64
                        * transfers.destinations_of(transfer).len() as u64
                })
                .sum(),
            Step::Repeat { body, .. } => words_moved(body),
            _ => 0,
        })
        .sum()
}

/// FP8 casts fused into their producers (the default with FP8 inputs:
/// LayerNorm, GELU and attention write FP8 for the products that read
/// them) compute exactly what products casting their own FP16 blocks
/// compute, bit for bit, in the package and the interpreter; the fused
/// program moves fewer exchange words and rounds each activation once
/// instead of once per replicated block.
#[test]
fn fp8_casts_fused_into_producers_compute_what_casting_products_compute() {
    let fp8 = ["planning.matrix_inputs=fp8", "planning.activation_scale=-4"];
    let fused = built("queries/vit-tiny.toml", &fp8);
    // The same partitions for both (the planner prices the two casts
    // differently and could choose other plans, and so other sums).
    let layouts = fused.session.layouts().expect("layouts");
    let pins: Vec<String> = layouts
        .ops
        .iter()
        .filter_map(|op| {
            let partition = op.plan.partition()?;
            Some(format!("layout.override.{}={partition}", op.name))
        })
        .collect();
    let mut sets: Vec<&str> = vec![fp8[0], fp8[1], "planning.fp8_cast=product"];
    sets.extend(pins.iter().map(String::as_str));
    let at_products = built("queries/vit-tiny.toml", &sets);
    let fp8_values = |built: &Built| {
        let layouts = built.session.layouts().expect("layouts");
        layouts
            .values
            .iter()
            .filter(|value| {
                value.format.precision
                    == superstep::model::graph::Precision::F8Activation { scale: -4 }
            })
            .map(|value| value.name.clone())
            .collect::<Vec<_>>()
    };
    let stored = fp8_values(&fused);
    assert!(stored.len() >= 4, "{stored:?}");
    assert!(fp8_values(&at_products).is_empty());
    let (_, run_fused) = fused.checked_run();
    let (_, run_at_products) = at_products.checked_run();
    let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(
        bits(&run_fused.output),
        bits(&run_at_products.output),
        "where the cast runs changes no number"
    );
    assert!(run_fused.counts.fp8_activations > 0);
    assert!(
        run_fused.counts.fp8_activations < run_at_products.counts.fp8_activations,
        "{:?} vs {:?}",
        run_fused.counts,
        run_at_products.counts
    );
    let fused_words = words_moved(&fused.session.low_program().expect("program").steps);
    let product_words = words_moved(&at_products.session.low_program().expect("program").steps);
    assert!(
        fused_words < product_words,
        "{fused_words} vs {product_words} words"
    );
}

/// Attention's `PV` product at FP8, end to end: with FP8 inputs every
/// attention kernel casts its value block to FP8 at the activation scale
/// and multiplies FP8 probabilities (the planner's attention plans say
/// so); the package computes what the interpreter computes, bit for bit,
/// it stays within the FP8 tolerance of the FP32 reference, and it differs
/// from the same program (the same partitions) whose attention keeps an
/// FP16 `PV` product (`planning.matrix_inputs.layer.attn.core = "fp16"`),
/// which rounds exactly the value blocks' elements fewer to FP8.
#[test]
fn fp8_value_products_compute_the_interpreters_output_bit_for_bit() {
    use superstep::layout::plan::OpPlan;
    use superstep::numerics::dot::ProductInputs;
    let fp8 = ["planning.matrix_inputs=fp8", "planning.activation_scale=-4"];
    let narrow = built("queries/vit-tiny.toml", &fp8);
    let layouts = narrow.session.layouts().expect("layouts");
    let attention_inputs = |layouts: &superstep::layout::plan::Layouts| {
        layouts
            .ops
            .iter()
            .filter_map(|op| match &op.plan {
                OpPlan::Attention(plan) => Some(plan.value_product),
                _ => None,
            })
            .collect::<Vec<_>>()
    };
    let inputs = attention_inputs(&layouts);
    assert!(!inputs.is_empty());
    assert!(
        inputs.iter().all(|inputs| *inputs
            == ProductInputs::Fp8 {
                activation_scale: -4
            }),
        "{inputs:?}"
    );
    let pins: Vec<String> = layouts
        .ops
        .iter()
        .filter_map(|op| {
            let partition = op.plan.partition()?;
            Some(format!("layout.override.{}={partition}", op.name))
        })
        .collect();
    let mut sets: Vec<&str> = vec![
        fp8[0],
        fp8[1],
        "planning.matrix_inputs.layer.attn.core=fp16",
    ];
    sets.extend(pins.iter().map(String::as_str));
    let wide = built("queries/vit-tiny.toml", &sets);
    let wide_layouts = wide.session.layouts().expect("layouts");
    assert!(
        attention_inputs(&wide_layouts)
            .iter()
            .all(|inputs| *inputs == ProductInputs::Fp16)
    );
    let (cosine_narrow, run_narrow) = narrow.checked_run();
    let (cosine_wide, run_wide) = wide.checked_run();
    println!("cosine: FP8 PV {cosine_narrow}, FP16 PV {cosine_wide}");
    assert_ne!(run_narrow.output, run_wide.output);
    assert_eq!(run_narrow.counts.saturated_activations, 0);
    // Each attention kernel casts its value block: keys x dimension per
    // group, on every tile and layer that runs one.
    let program = narrow.session.low_program().expect("program");
    let value_elements = value_block_elements(&program.steps, 1);
    assert!(value_elements > 0);
    assert_eq!(
        run_narrow.counts.fp8_activations - run_wide.counts.fp8_activations,
        value_elements
    );
}

/// Elements of the value blocks the program's FP8-`PV` attention kernels
/// cast, a Repeat body counted once per iteration.
fn value_block_elements(steps: &[Step], executions: u64) -> u64 {
    use superstep::expand::program::Kernel;
    use superstep::numerics::dot::ProductInputs;
    steps
        .iter()
        .map(|step| match step {
            Step::Repeat { iterations, body } => {
                value_block_elements(body, executions * u64::from(*iterations))
            }
            Step::Kernels { runs, .. } => runs
                .iter()
                .map(|run| match run.kernel {
                    Kernel::Attention {
                        groups,
                        keys,
                        dimension,
                        value_product: ProductInputs::Fp8 { .. },
                        ..
                    }
                    | Kernel::AttentionPartial {
                        groups,
                        keys,
                        dimension,
                        value_product: ProductInputs::Fp8 { .. },
                        ..
                    } => executions * u64::from(groups * keys * dimension),
                    _ => 0,
                })
                .sum(),
            _ => 0,
        })
        .sum()
}

/// Calibrated activation scales, end to end: each product rounds its
/// activations at its own position's scale (vit-tiny's differ: 2^-6 and
/// 2^-5), the package still computes the interpreter's output bit for bit,
/// in both precisions, at 2 and 3 layers, and nothing saturates on the
/// input the scales were calibrated on.
#[test]
fn calibrated_fp8_inputs_compute_the_interpreters_output_bit_for_bit() {
    for layers in ["workload.layers=2", "workload.layers=3"] {
        let fp8 = built(
            "queries/vit-tiny.toml",
            &[
                layers,
                "planning.matrix_inputs=fp8",
                "planning.activation_scale=calibrate",
            ],
        );
        let calibration = fp8.session.activation_calibration().expect("calibrated");
        let scales: std::collections::BTreeSet<i8> = calibration
            .positions
            .iter()
            .map(|position| position.scale)
            .collect();
        assert!(scales.len() > 1, "{scales:?}");
        let (cosine, run) = fp8.checked_run();
        assert!(cosine > 0.99, "{cosine}");
        assert!(run.counts.fp8_activations > 0);
        assert_eq!(run.counts.saturated_activations, 0);
        let fp16 = built(
            "queries/vit-tiny.toml",
            &[
                layers,
                "planning.matrix_inputs=fp16",
                "planning.activation_scale=calibrate",
            ],
        );
        assert!(fp16.session.activation_calibration().is_none());
        let (_, run) = fp16.checked_run();
        assert_eq!(run.counts.fp8_activations, 0);
    }
}

/// Ragged reduced slices, end to end: vit-tiny's 17 tokens in 3 row
/// blocks of 6, 6 and 5 rows (MLP up) and 2 of 9 and 8 (QKV), each over 4
/// reduction parts, are reduce-scattered in balanced slices (no block is
/// padded to a multiple of 4 rows); the package computes what the
/// interpreter computes, bit for bit, reading no unwritten byte.
#[test]
fn ragged_reduced_slices_compute_the_interpreters_output() {
    let built = built(
        "queries/vit-tiny.toml",
        &[
            "layout.override.layer.mlp.up=3x1x4",
            "layout.override.layer.attn.qkv=2x2x4",
        ],
    );
    let layouts = built.session.layouts().expect("layouts");
    let ragged: Vec<&str> = layouts
        .ops
        .iter()
        .filter_map(|op| match &op.plan {
            superstep::layout::plan::OpPlan::MatMul(plan) if plan.ragged_slices() => {
                Some(op.name.as_str())
            }
            _ => None,
        })
        .collect();
    assert!(ragged.contains(&"layer.mlp.up"), "{ragged:?}");
    assert!(ragged.contains(&"layer.attn.qkv"), "{ragged:?}");
    built.check_against_interpreter_and_reference();
}

/// Paired 64-bit transfers, end to end: in a wider tiny model whose QKV
/// weight blocks sit on partner pairs (`2x8x1/ckr`: rows innermost), the
/// weight broadcast moves paired and the package still computes what the
/// interpreter computes, bit for bit. (The shipped tiny model's pieces are
/// all shorter than 64 items.)
#[test]
fn paired_weight_broadcasts_still_compute_the_interpreters_output() {
    let mut built = built(
        "queries/vit-tiny.toml",
        &[
            "workload.width=256",
            "workload.mlp=1024",
            "layout.override.layer.attn.qkv=2x8x1/ckr",
            "schedule.width=paired64",
        ],
    );
    // Built already: the phase list comes from the memo.
    let outcome = built.session.build().expect("build");
    let keys: Vec<String> = outcome
        .back
        .expect("back end")
        .phases
        .iter()
        .map(|phase| phase.key.clone())
        .collect();
    let paired: usize = keys
        .iter()
        .map(|key| {
            let schedule = built
                .session
                .phase(key)
                .expect("phase")
                .schedule()
                .expect("schedule");
            schedule.paired.iter().filter(|&&paired| paired).count()
        })
        .sum();
    assert!(paired >= 16, "{paired} pieces paired");
    built.check_against_interpreter_and_reference();
}

/// The Repeat's carry converts nothing on the tiny build (the layer's
/// output has the carried value's format), so the layer's last op writes
/// straight into the carried value's allocations and no step is left of
/// the carry; the package still computes the interpreter's bits (each
/// iteration reads what the previous one wrote) and, over 3 layers, the
/// reference's output.
#[test]
fn the_carry_moves_nothing_and_three_layers_still_compute_the_reference() {
    for layers in ["workload.layers=2", "workload.layers=3"] {
        let built = built("queries/vit-tiny.toml", &[layers]);
        let layouts = built.session.layouts().expect("layouts");
        let program = built.session.low_program().expect("program");
        let carry = layouts
            .ops
            .iter()
            .find(|op| op.name == "repeat.carry")
            .expect("the carry op");
        let allocations = |value: superstep::layout::plan::PlannedValueId| {
            &program.values[value.0 as usize].allocations
        };
        assert_eq!(allocations(carry.inputs[0]), allocations(carry.output));
        let carry_name = program_name(&program, "repeat.carry");
        assert!(carry_name.is_none() || steps_of(&program.steps, carry_name) == 0);
        assert!(steps_of(&program.steps, program_name(&program, "layer.mlp.residual")) > 0);
        built.check_against_interpreter_and_reference();
    }
}

/// The index of `name` among the program's names.
fn program_name(program: &superstep::expand::program::LowProgram, name: &str) -> Option<u32> {
    program
        .names
        .iter()
        .position(|known| known == name)
        .map(|index| index as u32)
}

/// Steps (in Repeat bodies too) whose provenance is the op named `op`.
fn steps_of(steps: &[superstep::expand::program::Step], op: Option<u32>) -> usize {
    steps
        .iter()
        .map(|step| match step {
            Step::Repeat { body, .. } => steps_of(body, op),
            Step::Kernels { provenance, .. }
            | Step::Copies { provenance, .. }
            | Step::Fills { provenance, .. }
            | Step::Exchange { provenance, .. } => usize::from(Some(provenance.op) == op),
            Step::Checkpoint { .. } => 0,
        })
        .sum()
}

/// Fused packages (`planning.fusion = "auto"`, the default, and
/// `"across-operators"`) simulate with the same checks as the tiny builds
/// above (strict: bit for bit the interpreter's output, finite, cosine at
/// least 0.99 against the FP32 reference) and with the same output bits as
/// the same-operator package, while running fewer exchange phases: the
/// merges happened, so the check is not vacuous. Merging moves no byte
/// differently, so deliveries and received words are the same.
#[test]
fn fused_packages_match_the_reference_with_fewer_phases() {
    let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    for sets in [&[][..], &["workload.layers=3"][..]] {
        let with = |fusion: &str| {
            let set = format!("planning.fusion={fusion}");
            let mut sets = sets.to_vec();
            sets.push(&set);
            built("queries/vit-tiny.toml", &sets)
        };
        let same = with("same-operator");
        let (_, separate) = same.checked_run();
        for fusion in ["auto", "across-operators"] {
            let fused = with(fusion);
            let (cosine, run) = fused.checked_run();
            println!(
                "{sets:?} {fusion}: cosine {cosine}, {} phases ({} run) against {} ({} run)",
                fused.package.phases.len(),
                run.counts.phases_run,
                same.package.phases.len(),
                separate.counts.phases_run
            );
            assert!(
                fused.package.phases.len() < same.package.phases.len(),
                "{sets:?} {fusion}: {} phases, same-operator {}",
                fused.package.phases.len(),
                same.package.phases.len()
            );
            assert!(
                run.counts.phases_run < separate.counts.phases_run,
                "{sets:?} {fusion}: {} phases run, same-operator {}",
                run.counts.phases_run,
                separate.counts.phases_run
            );
            assert_eq!(run.counts.deliveries, separate.counts.deliveries);
            assert_eq!(run.counts.words_received, separate.counts.words_received);
            assert_eq!(
                bits(&run.output),
                bits(&separate.output),
                "{sets:?} {fusion}: output differs from the same-operator package's"
            );
        }
    }
}

#[test]
fn tiny_package_round_tripped_through_package_bin_simulates() {
    let built = built("queries/vit-tiny.toml", &[]);
    let path = std::env::temp_dir().join(format!("superstep-sim-{}.bin", std::process::id()));
    let key = superstep::cache::CacheKey([7; 32]);
    built.package.write(&path, &key).expect("write");
    // The header, then exactly bincode's encoding of the package (the
    // parallel encoding equals it).
    let file = std::fs::read(&path).expect("package file");
    let header = superstep::package::file::HEADER_BYTES;
    assert_eq!(&file[..8], superstep::package::PACKAGE_MAGIC);
    let expected = bincode::serialize(&built.package).expect("encode");
    assert_eq!(&file[header..], expected.as_slice());
    assert_eq!(file[8..16], (expected.len() as u64).to_le_bytes());
    assert_eq!(&file[48..80], &key.0);
    let read = Package::read(&path).expect("read");
    std::fs::remove_file(&path).ok();
    let a = built.simulate(&built.package).expect("simulate");
    let b = built.simulate(&read).expect("simulate read package");
    assert_eq!(a, b);
}

fn assert_names_tile_step_phase(fault: &PackageFault, what: &str) {
    let text = fault.to_string();
    println!("{what}: {text}");
    assert!(fault.tile.is_some(), "{what}: no tile in `{text}`");
    assert!(text.contains("tile "), "{text}");
    assert!(text.contains("step "), "{text}");
    assert!(fault.phase != "-", "{what}: no phase in `{text}`");
}

/// The first send-address word of some row of some phase (row words
/// starting with a `send`), as (phase, tile, word).
fn a_send_word(package: &Package) -> (usize, usize, usize) {
    use superstep::target::encoding::{Instruction, decode};
    for (phase_index, phase) in package.phases.iter().enumerate() {
        for (tile, row) in phase.rows.iter().enumerate() {
            let mut position = 0;
            while position < row.len() {
                let (instruction, consumed) = decode(&row[position..]).expect("decodes");
                if let Instruction::Send { .. } = instruction {
                    return (phase_index, tile, position);
                }
                position += consumed;
            }
        }
    }
    panic!("no send in any row");
}

#[test]
fn a_corrupted_row_word_is_detected() {
    let built = built("queries/vit-tiny.toml", &[]);
    let mut package = built.package.clone();
    let (phase, tile, word) = a_send_word(&package);
    // Move the send one word on: it still decodes, but sends the wrong bytes.
    package.phases[phase].rows[tile][word] += 1 << 3;
    let fault = built.simulate(&package).expect_err("corrupted row word");
    assert_names_tile_step_phase(&fault, "corrupted row word");
    assert_eq!(fault.phase, package.phases[phase].key);
}

#[test]
fn a_shifted_allocation_is_detected() {
    let built = built("queries/vit-tiny.toml", &[]);
    let mut package = built.package.clone();
    // Shift an exchange destination: the program's locations move with it
    // (as a placement that disagrees with the finalized rows would).
    let destination = package
        .steps
        .iter()
        .find_map(|step| match step {
            superstep::expand::program::Step::Exchange { transfers, .. } => transfers
                .destinations
                .first()
                .map(|d| d.location.allocation),
            _ => None,
        })
        .expect("a top-level exchange");
    package.allocations[destination.0 as usize].address += 64;
    for step in &mut package.steps {
        step_locations_mut(step, &mut |location| {
            if location.allocation == destination {
                location.offset += 64;
            }
        });
    }
    let fault = built.simulate(&package).expect_err("shifted allocation");
    assert_names_tile_step_phase(&fault, "shifted allocation");
}

/// A Repeat-body phase, the position of a tile's Repeat patch list (created
/// empty when the build has none) and the word of a `send` in its row.
fn repeat_send_word(package: &mut Package) -> (usize, usize, u32) {
    use superstep::patch::{BaseChoice, TilePatches};
    use superstep::target::encoding::{Instruction, decode};
    for (index, phase) in package.phases.iter_mut().enumerate() {
        if phase.executions <= 1 {
            continue;
        }
        for tile in 0..phase.rows.len() {
            let row = &phase.rows[tile];
            let mut send = None;
            let mut at = 0;
            while at < row.len() {
                let (instruction, consumed) = decode(&row[at..]).expect("decodes");
                if let Instruction::Send { .. } = instruction {
                    send = Some(at as u32);
                    break;
                }
                at += consumed;
            }
            let Some(word) = send else {
                continue;
            };
            let position = match phase
                .repeat_patches
                .iter()
                .position(|patches| patches.tile == tile as u32)
            {
                Some(position) => position,
                None => {
                    phase.repeat_patches.push(TilePatches {
                        tile: tile as u32,
                        base: BaseChoice::Zero,
                        zero_base_words: 0,
                        words: Vec::new(),
                    });
                    phase.repeat_patches.len() - 1
                }
            };
            return (index, position, word);
        }
    }
    panic!("no Repeat-body phase with a send");
}

/// A wrong patch list: a stray patch moving a send by one layer stride
/// from iteration 1 on.
#[test]
fn a_wrong_repeat_patch_list_is_detected() {
    let built = built("queries/vit-tiny.toml", &["workload.layers=3"]);
    let mut package = built.package.clone();
    let (phase, position, word) = repeat_send_word(&mut package);
    package.phases[phase].repeat_patches[position]
        .words
        .push(superstep::patch::PatchWord {
            word,
            step_words: 16,
        });
    let fault = built.simulate(&package).expect_err("wrong patch list");
    assert_names_tile_step_phase(&fault, "wrong patch list");
    assert_eq!(fault.phase, package.phases[phase].key);
    assert_eq!(fault.iteration, 1);
}

#[test]
fn a_patch_outside_the_row_is_detected() {
    let built = built("queries/vit-tiny.toml", &["workload.layers=3"]);
    let mut package = built.package.clone();
    let (phase, position, _) = repeat_send_word(&mut package);
    package.phases[phase].repeat_patches[position]
        .words
        .push(superstep::patch::PatchWord {
            word: 1 << 20,
            step_words: 16,
        });
    // Refused before anything runs: the admission check (verify's bounds)
    // names the phase, the tile and the word.
    let fault = built.simulate(&package).expect_err("patch outside the row");
    let key = &package.phases[phase].key;
    assert!(fault.message.contains("cannot be executed"), "{fault}");
    assert!(fault.message.contains(key.as_str()), "{fault}");
    assert!(fault.message.contains(", tile "), "{fault}");
    assert!(
        fault
            .message
            .contains("a Repeat patch rewrites word 1048576"),
        "{fault}"
    );
}

/// A tiny build whose Repeat body broadcasts per-layer weights, compiled
/// with `planning.repeat_base=false` so that every moving send address is a
/// real Repeat patch word (with the moving base register, base selection
/// leaves none in the shipped builds).
fn patched_build() -> Built {
    built(
        "queries/vit-tiny.toml",
        &[
            "workload.patches=256",
            "workload.heads=2",
            "workload.width=128",
            "workload.mlp=256",
            "machine.tiles=64",
            "workload.layers=3",
            "planning.repeat_base=false",
        ],
    )
}

#[test]
fn a_build_with_real_repeat_patches_matches_the_interpreter() {
    let built = patched_build();
    let words: usize = built
        .package
        .phases
        .iter()
        .flat_map(|phase| &phase.repeat_patches)
        .map(|patches| patches.words.len())
        .sum();
    assert!(words > 0, "the build has no Repeat patch words");
    built.check();
}

/// Dropping one Repeat patch word the compiler produced leaves that send
/// on iteration 0's instance from iteration 1 on: the receive lands bytes
/// from the wrong source address, named with tile, step, iteration and phase.
#[test]
fn a_dropped_repeat_patch_is_detected() {
    let built = patched_build();
    let mut package = built.package.clone();
    let (phase, position) = package
        .phases
        .iter()
        .enumerate()
        .find_map(|(index, phase)| {
            phase
                .repeat_patches
                .iter()
                .position(|patches| !patches.words.is_empty())
                .map(|position| (index, position))
        })
        .expect("a phase with Repeat patch words");
    let dropped = package.phases[phase].repeat_patches[position]
        .words
        .remove(0);
    let tile = package.phases[phase].repeat_patches[position].tile;
    println!(
        "dropped {dropped:?} of tile {tile} in `{}`",
        package.phases[phase].key
    );
    let fault = built.simulate_lenient(&package).expect_err("dropped patch");
    assert_names_tile_step_phase(&fault, "dropped patch");
    assert_eq!(fault.phase, package.phases[phase].key);
    assert_eq!(fault.iteration, 1);
    assert!(
        fault.message.contains("from tile"),
        "the wrong source is named: {fault}"
    );
}

fn each_step(
    steps: &[superstep::expand::program::Step],
    visit: &mut impl FnMut(&superstep::expand::program::Step),
) {
    for step in steps {
        visit(step);
        if let superstep::expand::program::Step::Repeat { body, .. } = step {
            each_step(body, visit);
        }
    }
}

/// Placing an allocation over another one that is still live (what a
/// liveness bug in placement does) is caught by the simulator's ownership
/// map, independently of the placer's liveness analysis: the victim's next
/// read names the allocation that overwrote it and where.
#[test]
fn an_allocation_placed_over_a_live_one_is_detected() {
    let built = built("queries/vit-tiny.toml", &[]);
    let mut exchanged = std::collections::BTreeSet::new();
    let mut kernel_outputs = std::collections::BTreeSet::new();
    each_step(&built.package.steps, &mut |step| match step {
        Step::Exchange { transfers, .. } => {
            exchanged.extend(transfers.source_location.iter().map(|l| l.allocation.0));
            exchanged.extend(
                transfers
                    .destinations
                    .iter()
                    .map(|d| d.location.allocation.0),
            );
        }
        Step::Kernels { runs, .. } => {
            for run in runs {
                kernel_outputs.extend(run.kernel.writes().iter().map(|id| id.0));
            }
        }
        _ => {}
    });
    let allocations = &built.package.allocations;
    for &moved in kernel_outputs.difference(&exchanged) {
        let placed = &allocations[moved as usize];
        if placed.iterations > 1 {
            continue;
        }
        for (victim, other) in allocations.iter().enumerate() {
            let victim = victim as u32;
            if victim == moved
                || other.tile != placed.tile
                || other.iterations > 1
                || other.bytes < placed.bytes
                || exchanged.contains(&victim)
            {
                continue;
            }
            let mut package = built.package.clone();
            let delta = other.address.wrapping_sub(placed.address);
            package.allocations[moved as usize].address = other.address;
            for step in &mut package.steps {
                step_locations_mut(step, &mut |location| {
                    if location.allocation.0 == moved {
                        location.offset = location.offset.wrapping_add(delta);
                    }
                });
            }
            let Err(fault) = built.simulate(&package) else {
                continue;
            };
            if !fault.message.contains("overwrote") {
                continue;
            }
            assert_names_tile_step_phase(&fault, "allocation placed over a live one");
            assert_eq!(fault.tile, Some(placed.tile));
            // The moved allocation is the reader or the writer.
            assert!(
                fault.message.contains(&format!("allocation {moved} ")),
                "{fault}"
            );
            println!("moved allocation {moved} onto allocation {victim}");
            return;
        }
    }
    panic!("no relocation onto a live allocation was caught");
}

#[test]
fn tiny_three_layers_matches_the_interpreter() {
    built("queries/vit-tiny.toml", &["workload.layers=3"])
        .check_against_interpreter_and_reference();
}

#[test]
#[ignore = "full width, 1,472 tiles: minutes"]
fn siglip_two_layers_package_matches_the_reference() {
    built("queries/siglip-so400m.toml", &["workload.layers=2"]).check();
}

#[test]
#[ignore = "full width, 1,472 tiles: minutes"]
fn siglip_two_layers_calibrated_fp8_package_matches_the_interpreter() {
    built(
        "queries/siglip-so400m.toml",
        &["workload.layers=2", "planning.matrix_inputs=fp8"],
    )
    .check();
}

#[test]
#[ignore = "full width, 1,472 tiles: minutes"]
fn pe_core_two_layers_package_matches_the_reference() {
    built("queries/pe-core-l14.toml", &["workload.layers=2"]).check();
}

#[test]
fn tiny_variants_match_the_interpreter_bit_for_bit() {
    for &sets in TINY_VARIANTS {
        println!("{sets:?}");
        // Strict: every byte a kernel reads, padding included, is defined
        // by the program.
        built("queries/vit-tiny.toml", sets).check();
    }
}

/// PE-Core-L14's failure, small: a matrix-product weight that reaches its
/// tiles by the per-iteration broadcast (stored split over its replicas)
/// has reduction padding the broadcast never writes, and the kernel reads
/// whole blocks. Without zero fills for it, stale bytes there (here and in
/// PE-Core, FP8 NaN codes left by earlier allocations) times the zero
/// padding of `a` made NaN partial sums: this build's output was all NaN
/// (PE-Core's became finite but wrong, cosine 0.165, where the softmax
/// turns NaN rows into zeros). With the fills the output matches the
/// interpreter bit for bit, also with memory starting as NaN and with
/// every byte an operand never wrote read as NaN.
#[test]
fn padded_broadcast_weights_are_defined_even_on_poisoned_memory() {
    // Under the cost model's own plan (its attention's padded query
    // blocks zero-filled: `padding::undefined_padding_is_refused_by_both_simulators`).
    let built = built("queries/vit-tiny.toml", padding::PADDED_ATTENTION);
    built.check();
    let layouts = built.session.layouts().expect("layouts");
    let program = built.session.low_program().expect("program");
    let run = built
        .simulate_options(
            &built.package,
            SimulationOptions {
                strict: false,
                poisoned: true,
            },
        )
        .expect("package simulation");
    let interpreted = interpret(&program, &layouts, &built.weights).expect("interpret");
    let bits = |values: &[f32]| values.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    println!("{:?}", run.counts);
    assert_eq!(
        (
            run.counts.unwritten_kernel_reads,
            run.counts.foreign_kernel_reads
        ),
        (0, 0),
        "{:?}",
        run.first_foreign_read
    );
    assert!(run.output.iter().all(|value| value.is_finite()));
    assert_eq!(bits(&run.output), bits(&interpreted.output));
}

/// The sharing patch of the second phase running from a stored row, at a
/// word where its finalized address differs from the first's (sharing
/// patches between rows whose allocations were placed at the same address
/// rewrite equal words).
fn a_needed_sharing_patch(package: &Package) -> Option<usize> {
    let phases = &package.phases;
    package.sharing_patches.iter().position(|patch| {
        let (tile, phase) = (patch.tile as usize, patch.phase as usize);
        let stored = phases[phase].stored_rows[tile];
        let mut users =
            (0..phases.len()).filter(|&other| phases[other].stored_rows[tile] == stored);
        let (Some(first), Some(second)) = (users.next(), users.next()) else {
            return false;
        };
        let word = patch.word as usize;
        second == phase && phases[first].rows[tile][word] != phases[phase].rows[tile][word]
    })
}

/// Rows that differ only in address words share storage; the sharing
/// patches rewrite those words before the phase runs. Dropping a needed one
/// leaves the stored row at the first phase's address when the second
/// runs: named with tile, step and phase. The builds pin `same-operator`
/// fusion: under the default `auto` every sharing patch of these tiny
/// builds rewrites a word equal in all the rows sharing its storage, so
/// none is needed.
#[test]
fn a_dropped_sharing_patch_is_detected() {
    let same = "planning.fusion=same-operator";
    let candidates: [&[&str]; 3] = [
        &["workload.layers=3", same],
        &["workload.batch=2", same],
        &["workload.layers=3", "workload.fuse_qkv=false", same],
    ];
    for sets in candidates {
        let built = built("queries/vit-tiny.toml", sets);
        let Some(position) = a_needed_sharing_patch(&built.package) else {
            println!("{sets:?}: every sharing patch rewrites an equal word");
            continue;
        };
        built
            .simulate_lenient(&built.package)
            .expect("intact package");
        let mut package = built.package.clone();
        let dropped = package.sharing_patches.remove(position);
        let fault = built
            .simulate_lenient(&package)
            .expect_err("dropped sharing patch");
        assert_names_tile_step_phase(&fault, "dropped sharing patch");
        assert_eq!(fault.tile, Some(dropped.tile));
        assert_eq!(fault.phase, package.phases[dropped.phase as usize].key);
        assert!(fault.message.contains("sharing patch"), "{fault}");
        return;
    }
    panic!("no build with a needed sharing patch");
}
