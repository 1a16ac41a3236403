//! Issue 44: every file a command touches (docs/files.md). Outputs are never
//! written over an input (the checkpoint's files, the build file, the
//! outputs folder's own files, another output of the same command), never
//! through a special file or a link, never into a folder that does not
//! exist; inputs are regular files read with a bound (a FIFO never blocks,
//! `/dev/zero` is never read, a header's declared size is what is read);
//! images are bounded by their declared dimensions before decoding; two
//! builds into one outputs folder take turns. Every child process here is
//! bounded in time: a hang is a failure, not a stuck test run.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{scratch, write_superstep_checkpoint};
use superstep::build_file::load_query;
use superstep::direct::load_weights;
use superstep::report::manifest;
use superstep::session::Session;

const TINY: &str = "queries/vit-tiny.toml";

/// How long any one command here may take before it counts as a hang.
const PATIENCE: Duration = Duration::from_secs(60);

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).to_string()
}

/// Runs the binary from the repository root and kills it (failing the
/// test) if it has not finished within [`PATIENCE`].
fn bounded(arguments: &[&str]) -> Output {
    bounded_in(arguments, Path::new(env!("CARGO_MANIFEST_DIR")))
}

fn bounded_in(arguments: &[&str], folder: &Path) -> Output {
    // `SUPERSTEP_BINARY` runs these cases against another build of the
    // binary (an older one, to see each case fail there).
    let binary = std::env::var_os("SUPERSTEP_BINARY")
        .unwrap_or_else(|| env!("CARGO_BIN_EXE_superstep").into());
    let mut child = Command::new(binary)
        .args(arguments)
        .current_dir(folder)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("superstep runs");
    let started = Instant::now();
    loop {
        if child.try_wait().expect("waits").is_some() {
            return child.wait_with_output().expect("output");
        }
        if started.elapsed() > PATIENCE {
            let _ = child.kill();
            let output = child.wait_with_output().expect("output");
            panic!(
                "superstep {arguments:?} hung (killed after {PATIENCE:?}): {}",
                stderr(&output)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Exit code 2, no panic, and every `expected` text in standard error.
fn assert_refused(output: &Output, expected: &[&str]) -> String {
    let message = stderr(output);
    assert_eq!(output.status.code(), Some(2), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    for text in expected {
        assert!(message.contains(text), "missing `{text}` in: {message}");
    }
    message
}

fn text(path: &Path) -> String {
    path.display().to_string()
}

/// The tiny ViT's seeded weights as a checkpoint folder `ck` (with a
/// `config.json` beside it) and a build file naming it: (build file,
/// checkpoint).
fn checkpoint_build(directory: &Path) -> (PathBuf, PathBuf) {
    let query = load_query(Path::new(TINY), &[]).expect("query");
    let mut session = Session::new(&query);
    let graph = session.graph().clone();
    session.build_low_program().expect("front");
    let seeded = load_weights(&query, &graph).expect("seeded weights");
    let folder = directory.join("ck");
    std::fs::create_dir_all(&folder).expect("ck");
    let checkpoint = folder.join("model.safetensors");
    write_superstep_checkpoint(&graph, &seeded, &checkpoint, |_, _, _| {});
    std::fs::write(folder.join("config.json"), "{}\n").expect("config");
    let build = directory.join("query.toml");
    let tiny = std::fs::read_to_string(TINY).expect("vit-tiny");
    std::fs::write(
        &build,
        format!(
            "{}\n",
            tiny.replace(
                "weights = { seeded = 1 }",
                &format!("weights = {{ safetensors = \"{}\" }}", text(&checkpoint))
            )
        ),
    )
    .expect("build file");
    (build, checkpoint)
}

/// A FIFO at `path` (`mkfifo`); false (with a note) where it cannot be made.
fn fifo(path: &Path) -> bool {
    let made = Command::new("mkfifo")
        .arg(path)
        .status()
        .is_ok_and(|status| status.success());
    if !made {
        eprintln!("skipped: mkfifo cannot make {}", path.display());
    }
    made
}

/// Item 1: an output onto any file of the checkpoint (the SafeTensors
/// file, its `config.json`), by every flag that writes one, is refused
/// before it is opened and leaves the file intact.
#[test]
fn item_1_no_output_flag_may_name_a_checkpoint_file() {
    let directory = scratch("files", "checkpoint-outputs");
    let (build, checkpoint) = checkpoint_build(&directory);
    let config = checkpoint.with_file_name("config.json");
    let outputs = format!("outputs.directory={}", text(&directory.join("out")));
    let before = [
        std::fs::read(&checkpoint).expect("checkpoint"),
        std::fs::read(&config).expect("config"),
    ];
    let build = text(&build);
    let mut cases = 0;
    for victim in [&checkpoint, &config] {
        let victim = text(victim);
        let commands: Vec<Vec<&str>> = vec![
            vec!["run", &build, "--set", &outputs, "--output", &victim],
            vec!["simulate", &build, "--set", &outputs, "--output", &victim],
            vec!["--trace", &victim, "phases", &build, "--set", &outputs],
            vec!["capture", &build, "--set", &outputs, "-o", &victim],
            vec!["profile", &build, "--set", &outputs, "-o", &victim],
            vec![
                "search",
                &build,
                "--set",
                &outputs,
                "--write-overrides",
                &victim,
            ],
        ];
        for arguments in commands {
            let output = bounded(&arguments);
            assert_refused(&output, &["which this command reads"]);
            cases += 1;
        }
    }
    assert_eq!(std::fs::read(&checkpoint).expect("checkpoint"), before[0]);
    assert_eq!(std::fs::read(&config).expect("config"), before[1]);
    eprintln!("{cases} cases refused");
    let _ = std::fs::remove_dir_all(&directory);
}

/// Item 1: a sharded checkpoint's index and shards are inputs too.
#[test]
fn item_1_no_output_may_name_an_index_or_a_shard() {
    let source = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/checkpoints/transformers_siglip_sharded");
    let index = source.join("model.safetensors.index.json");
    let shard = std::fs::read_dir(&source)
        .expect("fixture")
        .map(|entry| entry.expect("entry").path())
        .find(|path| {
            path.extension()
                .is_some_and(|extension| extension == "safetensors")
        })
        .expect("a shard");
    let directory = scratch("files", "shard-outputs");
    let weights = format!("workload.weights.safetensors={}", text(&index));
    let outputs = format!("outputs.directory={}", text(&directory));
    for victim in [&index, &shard] {
        let before = std::fs::read(victim).expect("fixture file");
        let output = bounded(&[
            "run",
            TINY,
            "--set",
            &weights,
            "--set",
            &outputs,
            "--output",
            &text(victim),
        ]);
        assert_refused(&output, &["which this command reads"]);
        assert_eq!(std::fs::read(victim).expect("fixture file"), before);
    }
    let _ = std::fs::remove_dir_all(&directory);
}

/// Item 1: `simulate --output` onto the build's own outputs (package,
/// report, record) is refused; so are two outputs of one command that are
/// the same file.
#[test]
fn item_1_the_outputs_folder_and_a_second_output_are_not_overwritten() {
    let directory = scratch("files", "own-outputs");
    let outputs = format!("outputs.directory={}", text(&directory));
    let built = bounded(&["build", TINY, "--set", &outputs, "--quiet", "--no-cache"]);
    assert_eq!(built.status.code(), Some(0), "{}", stderr(&built));
    let folder = directory.join("vit-tiny");
    manifest::check(&folder).expect("the build's folder");
    for name in ["package.bin", "report.json", "build.json"] {
        let output = bounded(&[
            "simulate",
            TINY,
            "--set",
            &outputs,
            "--no-cache",
            "--output",
            &text(&folder.join(name)),
        ]);
        assert_refused(&output, &["outputs folder"]);
    }
    manifest::check(&folder).expect("the folder still agrees with its record");
    let same = text(&directory.join("same.npy"));
    let output = bounded(&[
        "--trace",
        &same,
        "run",
        TINY,
        "--set",
        &outputs,
        "--no-cache",
        "--output",
        &same,
    ]);
    assert_refused(&output, &["also written by --trace"]);
    let _ = std::fs::remove_dir_all(&directory);
}

/// Item 2: `--output` onto a FIFO, a character device (as root) or a
/// dangling link is refused, and the special file or link is left as it was.
#[test]
fn item_2_no_output_replaces_a_special_file_or_goes_through_a_link() {
    use std::os::unix::fs::FileTypeExt;
    let directory = scratch("files", "special-outputs");
    let outputs = format!("outputs.directory={}", text(&directory));
    let mut cases = 0;
    let pipe = directory.join("pipe.npy");
    if fifo(&pipe) {
        let output = bounded(&["run", TINY, "--set", &outputs, "--output", &text(&pipe)]);
        assert_refused(&output, &["FIFO"]);
        assert!(
            std::fs::symlink_metadata(&pipe)
                .expect("still there")
                .file_type()
                .is_fifo()
        );
        cases += 1;
    }
    let device = directory.join("null.npy");
    let made = Command::new("mknod")
        .arg(&device)
        .args(["c", "1", "3"])
        .status()
        .is_ok_and(|status| status.success());
    if made {
        let output = bounded(&["run", TINY, "--set", &outputs, "--output", &text(&device)]);
        assert_refused(&output, &["character device"]);
        assert!(
            std::fs::symlink_metadata(&device)
                .expect("still there")
                .file_type()
                .is_char_device()
        );
        cases += 1;
    } else {
        eprintln!("skipped: mknod needs root");
    }
    let dangling = directory.join("dangling.npy");
    let target = directory.join("made-through-the-link.npy");
    std::os::unix::fs::symlink(&target, &dangling).expect("link");
    let output = bounded(&["run", TINY, "--set", &outputs, "--output", &text(&dangling)]);
    assert_refused(&output, &["symbolic link"]);
    assert!(!target.exists(), "nothing was created through the link");
    assert!(
        std::fs::symlink_metadata(&dangling)
            .expect("link")
            .file_type()
            .is_symlink()
    );
    cases += 1;
    eprintln!("{cases} cases refused");
    let _ = std::fs::remove_dir_all(&directory);
}

/// Item 2: a FIFO named as any input (`--image`, `--input`, `--reference`,
/// `verify FILE`, `simulate --package`, a shard an index names) is refused
/// by kind at once, never waited on.
#[test]
fn item_2_a_fifo_as_an_input_is_refused_without_blocking() {
    let directory = scratch("files", "fifo-inputs");
    let pipe = directory.join("pipe");
    if !fifo(&pipe) {
        return;
    }
    let outputs = format!("outputs.directory={}", text(&directory));
    let pipe_text = text(&pipe);
    let commands: Vec<Vec<&str>> = vec![
        vec!["run", TINY, "--set", &outputs, "--image", &pipe_text],
        vec!["run", TINY, "--set", &outputs, "--input", &pipe_text],
        vec!["run", TINY, "--set", &outputs, "--reference", &pipe_text],
        vec!["verify", &pipe_text],
        vec!["simulate", TINY, "--set", &outputs, "--package", &pipe_text],
    ];
    let count = commands.len();
    for arguments in commands {
        let output = bounded(&arguments);
        assert_refused(&output, &["FIFO", "not a regular file"]);
    }
    // A shard of an index that is a FIFO.
    let checkpoint = directory.join("ck");
    std::fs::create_dir_all(&checkpoint).expect("ck");
    let index = checkpoint.join("model.safetensors.index.json");
    std::fs::write(
        &index,
        r#"{"weight_map": {"patch_embed.weight": "shard.safetensors"}}"#,
    )
    .expect("index");
    assert!(fifo(&checkpoint.join("shard.safetensors")));
    let weights = format!("workload.weights.safetensors={}", text(&index));
    let output = bounded(&[
        "build",
        TINY,
        "--set",
        &outputs,
        "--set",
        &weights,
        "--no-cache",
    ]);
    assert_refused(&output, &["shard.safetensors", "FIFO"]);
    eprintln!("{} cases refused", count + 1);
    let _ = std::fs::remove_dir_all(&directory);
}

/// Item 2: a FIFO at a cache entry's path is a warning and a miss, not a
/// hang: the build finishes, and so does the next one.
#[test]
fn item_2_a_fifo_in_the_cache_is_skipped() {
    let directory = scratch("files", "fifo-cache");
    let outputs = format!("outputs.directory={}", text(&directory));
    let cache = directory.join("cache");
    let cache_text = text(&cache);
    let arguments = [
        "build",
        TINY,
        "--set",
        &outputs,
        "--cache",
        &cache_text,
        "--quiet",
    ];
    let first = bounded(&arguments);
    assert_eq!(first.status.code(), Some(0), "{}", stderr(&first));
    let entry = common::files(&cache)
        .into_iter()
        .find(|path| {
            !path
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with('.'))
        })
        .expect("an entry");
    std::fs::remove_file(&entry).expect("removed");
    assert!(fifo(&entry));
    for _ in 0..2 {
        let again = bounded(&arguments);
        let message = stderr(&again);
        assert_eq!(again.status.code(), Some(0), "{message}");
        assert!(message.contains("FIFO"), "{message}");
    }
    let _ = std::fs::remove_dir_all(&directory);
}

/// Item 3: `/dev/zero` as `--input` or `--reference`, or linked as a
/// checkpoint's shard or a cache entry, is refused by kind (a cache entry:
/// a warning), never read.
#[test]
fn item_3_dev_zero_is_never_read() {
    let directory = scratch("files", "dev-zero");
    let outputs = format!("outputs.directory={}", text(&directory));
    for flag in ["--input", "--reference"] {
        let output = bounded(&["run", TINY, "--set", &outputs, flag, "/dev/zero"]);
        assert_refused(&output, &["/dev/zero", "character device"]);
    }
    let checkpoint = directory.join("ck");
    std::fs::create_dir_all(&checkpoint).expect("ck");
    let index = checkpoint.join("model.safetensors.index.json");
    std::fs::write(
        &index,
        r#"{"weight_map": {"patch_embed.weight": "shard.safetensors"}}"#,
    )
    .expect("index");
    std::os::unix::fs::symlink("/dev/zero", checkpoint.join("shard.safetensors")).expect("link");
    let weights = format!("workload.weights.safetensors={}", text(&index));
    let output = bounded(&[
        "build",
        TINY,
        "--set",
        &outputs,
        "--set",
        &weights,
        "--no-cache",
    ]);
    assert_refused(&output, &["shard.safetensors", "character device"]);
    let cache = directory.join("cache");
    let cache_text = text(&cache);
    let arguments = [
        "build",
        TINY,
        "--set",
        &outputs,
        "--cache",
        &cache_text,
        "--quiet",
    ];
    assert_eq!(bounded(&arguments).status.code(), Some(0));
    let entry = common::files(&cache)
        .into_iter()
        .find(|path| {
            !path
                .file_name()
                .is_some_and(|name| name.to_string_lossy().starts_with('.'))
        })
        .expect("an entry");
    std::fs::remove_file(&entry).expect("removed");
    std::os::unix::fs::symlink("/dev/zero", &entry).expect("link");
    let again = bounded(&arguments);
    assert_eq!(again.status.code(), Some(0), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("character device"),
        "{}",
        stderr(&again)
    );
    let _ = std::fs::remove_dir_all(&directory);
}

/// The bytes of an `.npy` header (version `version`) for `shape` of F32,
/// padded as numpy pads it, declaring `header_length` when given.
fn npy_header(version: u8, shape: &str, header_length: Option<u32>) -> Vec<u8> {
    let dictionary = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': {shape}, }}");
    let prefix = if version == 1 { 10 } else { 12 };
    let mut header = dictionary.into_bytes();
    while (prefix + header.len() + 1) % 64 != 0 {
        header.push(b' ');
    }
    header.push(b'\n');
    let mut bytes = b"\x93NUMPY".to_vec();
    bytes.extend([version, 0]);
    let length = header_length.unwrap_or(header.len() as u32);
    if version == 1 {
        bytes.extend((length as u16).to_le_bytes());
    } else {
        bytes.extend(length.to_le_bytes());
    }
    bytes.extend(header);
    bytes
}

/// Item 3: a sparse 3 GB `.npy` whose header declares 16 x 48 values, a
/// header declaring 4 GiB, and an array with trailing bytes are refused
/// from their headers, before their data is read.
#[test]
fn item_3_an_npy_is_read_as_far_as_its_header_declares() {
    let directory = scratch("files", "npy");
    let outputs = format!("outputs.directory={}", text(&directory));
    let sparse = directory.join("sparse.npy");
    std::fs::write(&sparse, npy_header(1, "(16, 48)", None)).expect("header");
    std::fs::File::options()
        .write(true)
        .open(&sparse)
        .and_then(|file| file.set_len(3 << 30))
        .expect("sparse");
    let output = bounded(&["run", TINY, "--set", &outputs, "--input", &text(&sparse)]);
    assert_refused(
        &output,
        &["sparse.npy", "bytes after the array the header declares"],
    );
    let huge_header = directory.join("huge-header.npy");
    std::fs::write(&huge_header, npy_header(2, "(16, 48)", Some(u32::MAX))).expect("header");
    let output = bounded(&[
        "run",
        TINY,
        "--set",
        &outputs,
        "--input",
        &text(&huge_header),
    ]);
    assert_refused(&output, &["huge-header.npy", "4294967295 bytes"]);
    let trailing = directory.join("trailing.npy");
    let mut bytes = npy_header(1, "(2,)", None);
    bytes.extend([0u8; 12]);
    std::fs::write(&trailing, bytes).expect("trailing");
    let output = bounded(&[
        "run",
        TINY,
        "--set",
        &outputs,
        "--reference",
        &text(&trailing),
    ]);
    assert_refused(&output, &["trailing.npy", "4 bytes after"]);
    let _ = std::fs::remove_dir_all(&directory);
}

/// A PNG of `width` x `height` grey pixels (compressed: a few hundred bytes
/// for a huge image).
fn png(path: &Path, width: u32, height: u32) {
    let image = image::GrayImage::from_pixel(width, height, image::Luma([128]));
    image.save(path).expect("png");
}

/// Item 4: images whose declared dimensions, or whose resize, would need
/// more than the documented bounds are refused from their headers (exit 2)
/// on every preset, before any compile.
#[test]
fn item_4_image_dimensions_are_bounded_before_decoding() {
    let directory = scratch("files", "images");
    let outputs = format!("outputs.directory={}", text(&directory));
    let mut cases = 0;
    for (width, height) in [(1, 100_000), (100_000, 1), (10_000, 1), (20_000, 20_000)] {
        let path = directory.join(format!("{width}x{height}.png"));
        png(&path, width, height);
        for preset in ["queries/pe-core-l14.toml", "queries/vit-b16.toml", TINY] {
            let output = bounded(&[
                "run",
                preset,
                "--set",
                &outputs,
                "--set",
                "workload.batch=1",
                "--image",
                &text(&path),
            ]);
            // The tiny model resizes to 16 x 16 without keeping the aspect
            // ratio: a 10 000 x 1 image is within every bound there.
            if preset == TINY && width.max(height) <= 16_384 {
                assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
                continue;
            }
            assert_refused(
                &output,
                &[&format!("the image is {width} x {height} pixels")],
            );
            cases += 1;
        }
    }
    eprintln!("{cases} cases refused");
    let _ = std::fs::remove_dir_all(&directory);
}

/// Item 8: `search --write-overrides` into a folder that does not exist is
/// refused before the search, and no folder is created.
#[test]
fn item_8_search_never_creates_a_missing_folder() {
    let directory = scratch("files", "search-folder");
    let outputs = format!("outputs.directory={}", text(&directory));
    let missing = directory.join("nodir");
    let output = bounded(&[
        "search",
        TINY,
        "--set",
        &outputs,
        "--no-cache",
        "--write-overrides",
        &text(&missing.join("ov.toml")),
    ]);
    assert_refused(&output, &["search --write-overrides", "does not exist"]);
    assert!(!missing.exists());
    let _ = std::fs::remove_dir_all(&directory);
}

/// Item 5: two builds of one name with different settings, started
/// together into one outputs folder sharing one cache, leave the folder
/// holding one build's files, each byte for byte what that build writes
/// alone, and `build.json` agreeing with every file. `CONCURRENT_ROUNDS`
/// (default 3) sets the rounds; the issue's figure is 20.
#[test]
fn item_5_two_builds_into_one_folder_take_turns() {
    let rounds: u32 = std::env::var("CONCURRENT_ROUNDS")
        .ok()
        .and_then(|text| text.parse().ok())
        .unwrap_or(3);
    let directory = scratch("files", "concurrent");
    let settings = [
        vec!["--set", "schedule.policy=latency"],
        vec!["--set", "schedule.policy=B64"],
    ];
    let compared = ["package.bin", "report.json", "phases.csv", "report.html"];
    // What each build writes alone (builds are deterministic).
    let mut alone = Vec::new();
    for (index, sets) in settings.iter().enumerate() {
        let folder = directory.join(format!("alone-{index}"));
        let outputs = format!("outputs.directory={}", text(&folder));
        let arguments = [
            &["build", TINY, "--quiet", "--no-cache", "--set", &outputs][..],
            sets,
        ]
        .concat();
        let output = bounded(&arguments);
        assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        let built = folder.join("vit-tiny");
        let record = manifest::check(&built).expect("a complete folder");
        let files: Vec<Vec<u8>> = compared
            .iter()
            .map(|name| std::fs::read(built.join(name)).expect("an output"))
            .collect();
        alone.push((record.build_key, files));
    }
    assert_ne!(alone[0].0, alone[1].0, "the two builds differ");
    let shared = directory.join("shared");
    let outputs = format!("outputs.directory={}", text(&shared));
    let cache = text(&directory.join("cache"));
    for round in 0..rounds {
        let children: Vec<_> = settings
            .iter()
            .map(|sets| {
                let arguments = [
                    &[
                        "build", TINY, "--quiet", "--cache", &cache, "--set", &outputs,
                    ][..],
                    sets,
                ]
                .concat();
                let binary = std::env::var_os("SUPERSTEP_BINARY")
                    .unwrap_or_else(|| env!("CARGO_BIN_EXE_superstep").into());
                Command::new(binary)
                    .args(&arguments)
                    .current_dir(env!("CARGO_MANIFEST_DIR"))
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .expect("superstep runs")
            })
            .collect();
        let started = Instant::now();
        for mut child in children {
            while child.try_wait().expect("waits").is_none() {
                if started.elapsed() > PATIENCE {
                    let _ = child.kill();
                    panic!("round {round}: a build hung");
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let output = child.wait_with_output().expect("output");
            assert_eq!(output.status.code(), Some(0), "{}", stderr(&output));
        }
        let folder = shared.join("vit-tiny");
        let record =
            manifest::check(&folder).unwrap_or_else(|error| panic!("round {round}: {error}"));
        let (_, files) = alone
            .iter()
            .find(|(key, _)| *key == record.build_key)
            .expect("the record names one of the two builds");
        for (name, expected) in compared.iter().zip(files) {
            let found = std::fs::read(folder.join(name)).expect("an output");
            assert!(
                &found == expected,
                "round {round}: {name} is not the file of the build build.json names"
            );
        }
    }
    eprintln!("{rounds} rounds: one build's files each time");
    let _ = std::fs::remove_dir_all(&directory);
}
