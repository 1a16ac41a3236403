//! Digest-valid package files with wrong contents (issue 26, item 2): a
//! real package of a small build, mutated (bytes of the payload, and the
//! fields the simulator indexes by: tiles, allocations, addresses, counts,
//! step paths, stored rows, patches), re-encoded and re-digested so the
//! header checks pass. Properties: reading, verifying and simulating never
//! panic; a package `verify` passes (its own checks and the replay of every
//! exchange phase from its rows, as `superstep verify` runs them) executes
//! in the package simulator without a fault (issue 44, item 7); a package
//! `verify` rejects is refused by the simulator's own admission check with
//! the part named; and one consistent in itself but not this build's
//! program is refused by `verify` given the build query, as by `simulate`'s
//! admission (both apply `admit`).
//!
//! Seeded (reproducible); `FUZZ_CASES` scales the case counts.

use crate::common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use superstep::package::Package;
use superstep::package::file::{HEADER_BYTES, PackageHeader, decode};
use superstep::package::verify::verify_package;
use superstep::sim::package::rows_check::check_exchange_rows;
use superstep::sim::package::{SimulationOptions, admit, simulate_with};

use common::Random;

/// A value at, around or far beyond the usual bounds.
fn wild(random: &mut Random, usual: u32) -> u32 {
    match random.below(6) {
        0 => 0,
        1 => usual,
        2 => usual.saturating_add(1),
        3 => u32::MAX,
        4 => u32::MAX / 2 + random.below(1000) as u32,
        _ => random.next() as u32,
    }
}

fn cases(default: u64) -> u64 {
    common::fuzz_cases(default)
}

/// One structural mutation of a field the simulator indexes by.
fn mutate(package: &mut Package, random: &mut Random) -> &'static str {
    let tiles = package.tiles;
    match random.below(12) {
        0 => {
            package.tiles = wild(random, tiles);
            "tiles"
        }
        1 if !package.allocations.is_empty() => {
            let index = random.below(package.allocations.len() as u64) as usize;
            let allocation = &mut package.allocations[index];
            match random.below(4) {
                0 => allocation.tile = wild(random, tiles),
                1 => allocation.address = wild(random, allocation.address),
                2 => allocation.bytes = wild(random, allocation.bytes),
                _ => allocation.iterations = wild(random, allocation.iterations),
            }
            "allocation"
        }
        2 if !package.allocations.is_empty() => {
            let keep = random.below(package.allocations.len() as u64) as usize;
            package.allocations.truncate(keep);
            "allocations truncated"
        }
        3 if !package.phases.is_empty() => {
            let index = random.below(package.phases.len() as u64) as usize;
            let phase = &mut package.phases[index];
            if phase.step_path.is_empty() {
                phase.step_path.push(wild(random, 0));
            } else {
                let at = random.below(phase.step_path.len() as u64) as usize;
                phase.step_path[at] = wild(random, phase.step_path[at]);
            }
            "step path"
        }
        4 if !package.phases.is_empty() => {
            let index = random.below(package.phases.len() as u64) as usize;
            let phase = &mut package.phases[index];
            if !phase.stored_rows.is_empty() {
                let at = random.below(phase.stored_rows.len() as u64) as usize;
                phase.stored_rows[at] = wild(random, phase.stored_rows[at]);
            }
            "stored row"
        }
        5 if !package.phases.is_empty() => {
            let index = random.below(package.phases.len() as u64) as usize;
            let phase = &mut package.phases[index];
            phase.executions = wild(random, phase.executions);
            "executions"
        }
        6 if !package.phases.is_empty() => {
            let index = random.below(package.phases.len() as u64) as usize;
            let phase = &mut package.phases[index];
            if let Some(patches) = phase.repeat_patches.first_mut() {
                match random.below(3) {
                    0 => patches.tile = wild(random, tiles),
                    _ => {
                        if let Some(word) = patches.words.first_mut() {
                            word.word = wild(random, word.word);
                            word.step_words = random.next() as i64;
                        }
                    }
                }
            }
            "repeat patch"
        }
        7 if !package.sharing_patches.is_empty() => {
            let index = random.below(package.sharing_patches.len() as u64) as usize;
            let patch = &mut package.sharing_patches[index];
            match random.below(3) {
                0 => patch.tile = wild(random, tiles),
                1 => patch.phase = wild(random, patch.phase),
                _ => patch.word = wild(random, patch.word),
            }
            "sharing patch"
        }
        8 => {
            let table = if random.below(2) == 0 {
                &mut package.exchange_table_base
            } else {
                &mut package.patch_lists_base
            };
            if !table.is_empty() {
                let at = random.below(table.len() as u64) as usize;
                table[at] = wild(random, table[at]);
            }
            "tile table"
        }
        9 if !package.phases.is_empty() => {
            let index = random.below(package.phases.len() as u64) as usize;
            let phase = &mut package.phases[index];
            let tile = random.below(phase.rows.len().max(1) as u64) as usize;
            if let Some(row) = phase.rows.get_mut(tile)
                && !row.is_empty()
            {
                let at = random.below(row.len() as u64) as usize;
                row[at] = random.next() as u32;
            }
            "row word"
        }
        10 if !package.phases.is_empty() => {
            let index = random.below(package.phases.len() as u64) as usize;
            package.phases.remove(index);
            "phase removed"
        }
        _ => {
            package
                .steps
                .truncate(random.below(package.steps.len() as u64) as usize);
            "steps truncated"
        }
    }
}

#[test]
fn digest_valid_packages_are_verified_or_refused_and_never_panic() {
    let mut session = superstep::session::Session::new(&common::query(
        "queries/vit-tiny.toml",
        &["workload.layers=1"],
    ));
    session.build().expect("build");
    let package = session.package().expect("package");
    let program = session.low_program().expect("program");
    let layouts = session.layouts().expect("layouts");
    let weights = session.weights().expect("weights");
    let options = SimulationOptions {
        strict: false,
        poisoned: false,
    };
    assert!(verify_package(&package).passed());
    admit(&package, &program).expect("the real package is admitted");
    simulate_with(&package, &program, &layouts, &weights, options).expect("simulates");

    assert!(check_exchange_rows(&package).is_ok());
    let valid = package.encode().expect("encodes");

    let mut random = Random(0x5eed_0026);
    // undecodable, refused by verify, verified but not this program's
    // package, verified and simulated, verified and then faulted
    let mut outcomes = [0u32; 5];
    let mut disagreements = Vec::new();
    for case in 0..cases(400) {
        let mut mutated;
        let label;
        if random.below(3) == 0 {
            // Bytes of the payload, re-digested.
            let mut bytes = valid.clone();
            for _ in 0..1 + random.below(4) {
                let index = random.below(bytes.len() as u64) as usize;
                bytes[index] = random.next() as u8;
            }
            let mut file = PackageHeader::of(&bytes, &superstep::cache::CacheKey([1; 32]))
                .to_bytes()
                .to_vec();
            file.extend_from_slice(&bytes);
            match decode(&file[HEADER_BYTES..], "package.bin") {
                Ok(decoded) => mutated = decoded,
                Err(_) => {
                    outcomes[0] += 1;
                    continue;
                }
            }
            label = "payload bytes";
        } else {
            mutated = package.clone();
            label = mutate(&mut mutated, &mut random);
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let verification = verify_package(&mutated);
            let admitted = admit(&mutated, &program);
            if !verification.passed() {
                // The simulator refuses what verify rejects, naming a part.
                let refusal = admitted.expect_err("a package verify rejects is refused");
                assert!(
                    !refusal.problems().is_empty() && !refusal.to_string().is_empty(),
                    "case {case} ({label}): empty refusal"
                );
                return Ok(1);
            }
            if let Err(fault) = check_exchange_rows(&mutated) {
                // `superstep verify` refuses it, naming phase and step.
                assert!(!fault.message.is_empty(), "case {case} ({label})");
                assert_ne!(fault.phase, "", "case {case} ({label})");
                return Ok(1);
            }
            if let Err(refusal) = admitted {
                // Verified on its own, but not a package of this program:
                // `verify FILE QUERY` refuses it, as `simulate` does.
                assert!(!refusal.problems().is_empty(), "case {case} ({label})");
                return Ok(2);
            }
            match simulate_with(&mutated, &program, &layouts, &weights, options) {
                Ok(_) => Ok(3),
                Err(fault) => Err(format!("case {case} ({label}): {fault}")),
            }
        }))
        .unwrap_or_else(|_| panic!("case {case} ({label}): panicked"));
        match outcome {
            Ok(outcome) => outcomes[outcome] += 1,
            Err(disagreement) => {
                outcomes[4] += 1;
                disagreements.push(disagreement);
            }
        }
    }
    println!(
        "package cases: {outcomes:?} (undecodable, refused by verify, refused by verify only \
         given its build (not this program's package), verified and simulated, verified and then \
         faulted)"
    );
    assert!(outcomes[1] > 0 && outcomes[3] > 0, "{outcomes:?}");
    // Whatever the simulator refuses, verify refused first.
    assert!(
        disagreements.is_empty(),
        "verify passed, simulate faulted:\n{}",
        disagreements.join("\n")
    );
}

/// A vit-tiny package written by `superstep build` into `directory`, its
/// header's build key and the decoded package.
fn built_package(directory: &std::path::Path) -> (std::path::PathBuf, PackageHeader, Package) {
    let folder = format!("outputs.directory={}", directory.display());
    let output = common::superstep(&[
        "build",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--set",
        &folder,
    ]);
    assert_eq!(output.status.code(), Some(0), "{output:?}");
    let path = directory.join("vit-tiny").join("package.bin");
    let (package, header) = Package::read_with_header(&path).expect("a package");
    (path, header, package)
}

/// Writes `package` to `path` under `header`'s build key (a valid header and
/// digest: only the contents are wrong).
fn rewrite(path: &std::path::Path, header: &PackageHeader, package: &Package) {
    package.write(path, &header.build).expect("writes");
}

#[test]
fn verify_and_simulate_refuse_a_broken_transfer_list_by_name() {
    let directory = common::scratch("fuzz-package", "transfers");
    let (path, header, mut package) = built_package(&directory);
    let broken = package
        .steps
        .iter_mut()
        .find_map(|step| match step {
            superstep::expand::program::Step::Exchange { transfers, .. } => Some(transfers),
            _ => None,
        })
        .expect("an exchange step");
    broken.destinations[0].tile = 4000;
    rewrite(&path, &header, &package);
    let file = path.display().to_string();
    let verified = common::superstep(&["verify", &file]);
    let message = String::from_utf8_lossy(&verified.stdout).to_string();
    assert_eq!(verified.status.code(), Some(2), "{message}");
    assert!(message.contains("the transfer list"), "{message}");
    assert!(message.contains("tile 4000"), "{message}");
    let simulated = common::superstep(&[
        "simulate",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--package",
        &file,
    ]);
    let message = String::from_utf8_lossy(&simulated.stderr).to_string();
    assert_eq!(simulated.status.code(), Some(2), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(message.contains("cannot be executed safely"), "{message}");
    assert!(message.contains("tile 4000"), "{message}");
    let _ = std::fs::remove_dir_all(&directory);
}

/// A package consistent in itself but not its build's program (an
/// allocation one byte longer, or of two instances, or on another tile:
/// what the fuzz test above finds `verify` alone accepting): `verify FILE`
/// passes it, saying it checked the file on its own; `verify FILE QUERY`
/// refuses it, naming the allocation, exactly as `simulate QUERY
/// --package FILE` does (issue 44, item 7).
#[test]
fn verify_given_its_build_refuses_what_simulate_refuses() {
    let directory = common::scratch("fuzz-package", "another-program");
    let (path, header, package) = built_package(&directory);
    let mut session =
        superstep::session::Session::new(&common::query("queries/vit-tiny.toml", &[]));
    session.build_low_program().expect("first half");
    let program = session.low_program().expect("program");
    let file = path.display().to_string();
    let verified = common::superstep(&["verify", &file, "queries/vit-tiny.toml", "--no-cache"]);
    let message = String::from_utf8_lossy(&verified.stdout).to_string();
    assert_eq!(verified.status.code(), Some(0), "{verified:?}");
    assert!(
        message.contains("checked against vit-tiny's program"),
        "{message}"
    );

    let mutations: [fn(&mut superstep::package::PlacedAllocation); 3] = [
        |allocation| allocation.bytes += 1,
        |allocation| allocation.iterations += 1,
        |allocation| allocation.tile = (allocation.tile + 1) % 16,
    ];
    let mutated = mutations
        .iter()
        .flat_map(|mutation| (0..package.allocations.len()).map(move |index| (mutation, index)))
        .find_map(|(mutation, index)| {
            let mut candidate = package.clone();
            mutation(&mut candidate.allocations[index]);
            (verify_package(&candidate).passed()
                && check_exchange_rows(&candidate).is_ok()
                && admit(&candidate, &program).is_err())
            .then_some(candidate)
        })
        .expect("a mutation verify alone passes and the program's admission refuses");
    rewrite(&path, &header, &mutated);

    let alone = common::superstep(&["verify", &file]);
    let message = String::from_utf8_lossy(&alone.stdout).to_string();
    assert_eq!(alone.status.code(), Some(0), "{alone:?}");
    assert!(message.contains("checked on its own"), "{message}");

    let verified = common::superstep(&["verify", &file, "queries/vit-tiny.toml", "--no-cache"]);
    let message = String::from_utf8_lossy(&verified.stderr).to_string();
    assert_eq!(verified.status.code(), Some(2), "{verified:?}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(
        message.contains("is not the package of vit-tiny's program"),
        "{message}"
    );
    assert!(message.contains("allocation"), "{message}");

    let simulated = common::superstep(&[
        "simulate",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--package",
        &file,
    ]);
    let message = String::from_utf8_lossy(&simulated.stderr).to_string();
    assert_eq!(simulated.status.code(), Some(2), "{message}");
    assert!(message.contains("cannot be executed safely"), "{message}");

    // Given another build's query, the file is refused by its key first.
    let other = common::superstep(&[
        "verify",
        &file,
        "queries/vit-tiny.toml",
        "--no-cache",
        "--set",
        "workload.layers=1",
    ]);
    let message = String::from_utf8_lossy(&other.stderr).to_string();
    assert_eq!(other.status.code(), Some(2), "{other:?}");
    assert!(message.contains("another query"), "{message}");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn verify_refuses_rows_that_do_not_deliver_the_transfer_list() {
    let directory = common::scratch("fuzz-package", "rows");
    let (path, header, mut package) = built_package(&directory);
    let file = path.display().to_string();
    let verified = common::superstep(&["verify", &file]);
    let message = String::from_utf8_lossy(&verified.stdout).to_string();
    assert_eq!(verified.status.code(), Some(0), "{message}");
    assert!(
        message.contains("each delivering exactly its transfer list"),
        "{message}"
    );
    // One transfer of the first exchange step loses its last word: every
    // index and address stays inside its allocation (the package checks
    // pass), but the rows still deliver the word.
    let (transfers, step) = package
        .steps
        .iter_mut()
        .enumerate()
        .find_map(|(index, step)| match step {
            superstep::expand::program::Step::Exchange { transfers, .. } => {
                Some((transfers, index))
            }
            _ => None,
        })
        .expect("an exchange step");
    let shortened = transfers
        .words
        .iter()
        .position(|&words| words > 1)
        .expect("a transfer of more than one word");
    transfers.words[shortened] -= 1;
    rewrite(&path, &header, &package);
    assert!(verify_package(&package).passed());
    let verified = common::superstep(&["verify", &file]);
    let message = String::from_utf8_lossy(&verified.stderr).to_string();
    assert_eq!(verified.status.code(), Some(2), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(
        message.contains("exchange rows disagree with the transfer lists"),
        "{message}"
    );
    assert!(message.contains(&format!("step {step} ")), "{message}");
    assert!(message.contains("tile "), "{message}");
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn simulate_refuses_a_kernel_the_program_does_not_have() {
    let directory = common::scratch("fuzz-package", "kernel");
    let (path, header, mut package) = built_package(&directory);
    // One kernel's shape changed (through its serialised form: any field
    // named `rows` grows by one), everything else as built.
    let run = package
        .steps
        .iter_mut()
        .find_map(|step| match step {
            superstep::expand::program::Step::Kernels { runs, .. } => runs.first_mut(),
            _ => None,
        })
        .expect("a kernel step");
    let mut value = serde_json::to_value(run.kernel).expect("serialises");
    let fields = value
        .as_object_mut()
        .and_then(|object| object.values_mut().next())
        .and_then(serde_json::Value::as_object_mut)
        .expect("a struct variant");
    let rows = fields
        .iter_mut()
        .find(|(name, _)| name.as_str() == "rows" || name.as_str() == "cols")
        .map(|(_, rows)| rows)
        .expect("a shape field");
    *rows = serde_json::json!(rows.as_u64().expect("a count") + 1);
    run.kernel = serde_json::from_value(value).expect("deserialises");
    rewrite(&path, &header, &package);
    let simulated = common::superstep(&[
        "simulate",
        "queries/vit-tiny.toml",
        "--no-cache",
        "--package",
        &path.display().to_string(),
    ]);
    let message = String::from_utf8_lossy(&simulated.stderr).to_string();
    assert_eq!(simulated.status.code(), Some(2), "{message}");
    assert!(!message.contains("panicked"), "{message}");
    assert!(
        message.contains("is not one of the program's kernels"),
        "{message}"
    );
    let _ = std::fs::remove_dir_all(&directory);
}

#[test]
fn an_endless_file_behind_a_valid_header_is_refused_without_reading_it_all() {
    use std::io::Write;
    let payload = vec![0u8; 1000];
    let header = PackageHeader::of(&payload, &superstep::cache::CacheKey([2; 32]));
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_superstep"))
        .args(["verify", "/dev/stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("runs");
    let mut input = child.stdin.take().expect("stdin");
    let writer = std::thread::spawn(move || {
        // Header, then zeros without end (until the reader goes away).
        if input.write_all(&header.to_bytes()).is_err() {
            return 0u64;
        }
        let block = [0u8; 65536];
        let mut written = 0u64;
        while input.write_all(&block).is_ok() {
            written += block.len() as u64;
            if written > 1 << 30 {
                break;
            }
        }
        written
    });
    let output = child.wait_with_output().expect("ends");
    let written = writer.join().expect("writer");
    let message = String::from_utf8_lossy(&output.stderr).to_string();
    assert_eq!(output.status.code(), Some(2), "{message}");
    // A pipe is not a regular file: refused by kind, never read
    // (docs/files.md).
    assert!(message.contains("FIFO"), "{message}");
    assert!(
        written < 64 << 20,
        "read {written} bytes of an endless file"
    );
}
