//! `run` and `simulate` on real inputs (`scripts/fixtures/host_io.py`): a
//! photo, the pixel values transformers' SiglipImageProcessor made of it,
//! and the library's pooled output of the tiny SigLIP checkpoint for them.
//! The embedding `--output` writes agrees with the library's, the program's
//! (interpreter) and the package simulator's embeddings are the same bits,
//! and every bad input file or count is exit 2 naming it.

use std::path::Path;

use super::{MINIMUM_COSINE, fixture};
use crate::common::{scratch, superstep};
use superstep::host_io::npy;
use superstep::sim::compare::compare;

/// The tiny SigLIP checkpoint's shape on 16 tiles, weights from its file,
/// under the FP16 recipe (FP8 weights widened on the tile): what the
/// library computes, to FP16's tolerance.
fn build_flags() -> Vec<String> {
    let model = fixture("checkpoints/transformers_siglip_vision/model.safetensors");
    [
        "layout.override=auto",
        "planning.matrix_inputs=fp16",
        "workload.width=48",
        "workload.mlp=96",
        "workload.layers=2",
        "workload.heads=2",
        "workload.patches=16",
        "workload.patch=4",
        "workload.pooling_heads=2",
        "machine.tiles=16",
    ]
    .iter()
    .map(|set| set.to_string())
    .chain([format!("workload.weights.safetensors={}", model.display())])
    .flat_map(|set| [String::from("--set"), set])
    .chain([String::from("--no-cache")])
    .collect()
}

fn run(command: &str, extra: &[&str]) -> std::process::Output {
    let flags = build_flags();
    let mut arguments: Vec<&str> = vec![command];
    arguments.extend(flags.iter().map(String::as_str));
    arguments.extend(extra);
    superstep(&arguments)
}

fn text(output: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// The cosine of the printed line that starts with `what against`.
fn printed_cosine(stdout: &str, what: &str) -> f64 {
    let line = stdout
        .lines()
        .find(|line| line.trim_start().starts_with(&format!("{what} against")))
        .unwrap_or_else(|| panic!("no `{what} against` line in:\n{stdout}"));
    let cosine = line.split("cosine ").nth(1).expect("cosine");
    cosine[..cosine.find(',').expect("comma")]
        .parse()
        .expect("number")
}

fn expected() -> Vec<f32> {
    npy::read(&fixture("host_io/expected.npy"))
        .expect("fixture")
        .values
}

#[test]
fn pixel_values_from_the_library_give_its_embedding_in_both_executors() {
    let directory = scratch("host-io", "pixels");
    let pixels = fixture("host_io/pixels.npy");
    let reference = fixture("host_io/expected.npy");
    let mut embeddings = Vec::new();
    for command in ["run", "simulate"] {
        let output_path = directory.join(format!("{command}.npy"));
        let output = run(
            command,
            &[
                "--input",
                pixels.to_str().unwrap(),
                "--reference",
                reference.to_str().unwrap(),
                "--output",
                output_path.to_str().unwrap(),
            ],
        );
        let (stdout, stderr) = text(&output);
        assert!(output.status.success(), "{command}: {stdout}{stderr}");
        assert!(stdout.contains("input: ") && stdout.contains("pixels.npy (shape [1, 3, 16, 16])"));
        assert!(
            printed_cosine(&stdout, "FP32 reference") >= MINIMUM_COSINE,
            "{stdout}"
        );
        assert!(printed_cosine(&stdout, "program") >= 0.9999, "{stdout}");
        let written = npy::read(&output_path).expect("the embedding reads back");
        assert_eq!(written.shape, vec![1, 48]);
        let agreement = compare(&written.values, &expected());
        assert!(agreement.cosine >= 0.9999, "{command}: {agreement}");
        embeddings.push(written.values);
    }
    let bits = |values: &[f32]| {
        values
            .iter()
            .map(|value| value.to_bits())
            .collect::<Vec<_>>()
    };
    assert_eq!(
        bits(&embeddings[0]),
        bits(&embeddings[1]),
        "interpreter and package simulator embeddings differ"
    );
}

#[test]
fn a_photo_is_preprocessed_as_the_library_does() {
    let photo = fixture("host_io/photo.png");
    let reference = fixture("host_io/expected.npy");
    let output = run(
        "run",
        &[
            "--image",
            photo.to_str().unwrap(),
            "--reference",
            reference.to_str().unwrap(),
        ],
    );
    let (stdout, stderr) = text(&output);
    assert!(output.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("resize to 16 x 16 (bicubic)"), "{stdout}");
    // PIL's and the image crate's bicubic round a few bytes differently.
    let cosine = printed_cosine(&stdout, "FP32 reference");
    assert!((0.999..1.0).contains(&cosine), "{stdout}");
}

fn refused(extra: &[&str], needles: &[&str]) {
    let output = run("run", extra);
    let (stdout, stderr) = text(&output);
    assert_eq!(output.status.code(), Some(2), "{extra:?}: {stdout}{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    for needle in needles {
        assert!(
            stderr.contains(needle),
            "{extra:?}: `{needle}` not in:\n{stderr}"
        );
    }
}

#[test]
fn bad_inputs_and_references_are_refused_by_name() {
    let directory = scratch("host-io", "bad");
    let pixels = fixture("host_io/pixels.npy");
    let photo = fixture("host_io/photo.png");
    let expected = fixture("host_io/expected.npy");
    let path = |path: &Path| path.to_str().unwrap().to_string();
    // An array of another shape, as --input and as --reference.
    refused(
        &["--input", &path(&expected)],
        &[
            "expected.npy",
            "shape [1, 48]",
            "pixel values 1 x 3 x 16 x 16",
            "patches 16 x 48",
        ],
    );
    refused(
        &["--input", &path(&pixels), "--reference", &path(&pixels)],
        &["shape [1, 3, 16, 16] is not the output's [1, 48]"],
    );
    // One image for a batch of two.
    refused(
        &["--image", &path(&photo), "--set", "workload.batch=2"],
        &[
            "--image: 1 image for workload.batch = 2",
            "--set workload.batch=1",
        ],
    );
    // Files that are not what they claim.
    let garbage = directory.join("garbage.png");
    std::fs::write(&garbage, b"not a picture at all").unwrap();
    refused(
        &["--image", &path(&garbage)],
        &["garbage.png", "not an image superstep can read"],
    );
    refused(
        &["--input", &path(&garbage)],
        &["garbage.png", "not a NumPy .npy file"],
    );
    let non_finite = directory.join("nan.npy");
    let mut values = npy::read(&pixels).unwrap().values;
    values[7] = f32::NAN;
    std::fs::write(&non_finite, npy::encode(&[1, 3, 16, 16], &values)).unwrap();
    refused(
        &["--input", &path(&non_finite)],
        &["nan.npy", "element 7 is NaN"],
    );
    refused(
        &["--input", &path(&directory.join("missing.npy"))],
        &["missing.npy", "cannot read"],
    );
    // The output may not overwrite an input; --image and --input exclude each other.
    refused(
        &["--input", &path(&pixels), "--output", &path(&pixels)],
        &["--output", "which this command reads"],
    );
    refused(
        &["--input", &path(&pixels), "--image", &path(&photo)],
        &["--image", "cannot be used with"],
    );
}
