//! Structure-aware fuzzing of every input superstep reads: build files (every
//! key of the schema, random values of every type, deleted and duplicated
//! keys), `--set` strings, exchange snapshots (within and beyond every
//! bound), cache entries and package files.
//!
//! Properties, for every generated input: no panic; a rejected input is an
//! error whose message names the field (or the phase and transfer, or the
//! file) at fault; an accepted one is within bounds (the snapshot importer
//! and the package reader never allocate beyond their documented bounds —
//! the bounded-memory cases of `tests/hardening.rs` run the binary under an
//! address-space limit).
//!
//! The generator is a seeded SplitMix64 stream, so every case is
//! reproducible from its seed; a failing case is shrunk (lines, keys and
//! bytes removed one at a time while the failure persists) before it is
//! reported. Reproducers found are kept as regression tests at the end.
//! Case counts: `FUZZ_CASES` (environment) scales them; the defaults run a
//! few thousand cases in seconds.

use crate::common;

use std::panic::{AssertUnwindSafe, catch_unwind};

use superstep::build_file::schema::{KeyKind, keys_of};
use superstep::build_file::{QueryProblem, parse_query};
use superstep::cache::{CacheKey, EntryKind, entry};
use superstep::package::Package;
use superstep::snapshot::format::Snapshot;
use superstep::snapshot::import::import_phases;

use common::Random;

fn cases(default: u64) -> u64 {
    common::fuzz_cases(default)
}

/// Removes units (lines of `text`) one at a time while `still_fails` holds.
fn shrink_lines(text: &str, still_fails: impl Fn(&str) -> bool) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let mut index = 0;
    while index < lines.len() {
        let mut candidate = lines.clone();
        candidate.remove(index);
        if still_fails(&candidate.join("\n")) {
            lines = candidate;
        } else {
            index += 1;
        }
    }
    lines.join("\n")
}

/// A random integer: small, at and around every bound, huge, negative.
fn integer(random: &mut Random) -> String {
    let interesting: [i128; 18] = [
        0,
        1,
        2,
        -1,
        3,
        16,
        27,
        64,
        1472,
        1473,
        65536,
        638_976,
        u32::MAX as i128,
        u32::MAX as i128 + 1,
        i64::MAX as i128,
        i64::MIN as i128,
        -4,
        99_999_999_999_999_999_999,
    ];
    if random.chance(70) {
        random.pick(&interesting).to_string()
    } else {
        (random.next() as i64 >> random.below(63)).to_string()
    }
}

fn string(random: &mut Random) -> String {
    let words = [
        "siglip-so400m",
        "pe-core-l14",
        "vit-b16",
        "custom",
        "auto",
        "flash",
        "materialized",
        "f32",
        "f16",
        "latency",
        "S256",
        "s256",
        "B1024",
        "B0",
        "B65537",
        "word32",
        "paired64",
        "tanh",
        "erf",
        "map",
        "attention",
        "class-token",
        "c600",
        "layer.mlp.up#0",
        "layer.attn.merge#0",
        "x#",
        "#0",
        "",
        "artifacts",
        "/proc/x",
        "\\u0000",
        "日本",
    ];
    format!("\"{}\"", random.pick(&words))
}

fn value(random: &mut Random, kind: KeyKind) -> String {
    // Usually the right type, sometimes any other.
    let kind = if random.chance(85) {
        kind
    } else {
        *random.pick(&[
            KeyKind::Integer,
            KeyKind::String,
            KeyKind::Boolean,
            KeyKind::Float,
        ])
    };
    match kind {
        KeyKind::Integer => integer(random),
        KeyKind::String => string(random),
        KeyKind::Boolean => random.pick(&["true", "false"]).to_string(),
        KeyKind::Float => random
            .pick(&["1e-6", "0.0", "-1.0", "1e308", "nan", "inf", "1e-300"])
            .to_string(),
        KeyKind::Scale => {
            if random.chance(50) {
                integer(random)
            } else {
                random
                    .pick(&["\"auto\"", "\"Auto\"", "\"fixed\""])
                    .to_string()
            }
        }
        KeyKind::Table | KeyKind::TableArray => "{ }".to_string(),
        KeyKind::StringTable => format!(
            "{{ {} = {} }}",
            random.pick(&["\"layer.mlp.up\"", "\"layer.mlp\"", "\"\"", "x"]),
            if random.chance(80) {
                string(random)
            } else {
                integer(random)
            }
        ),
        KeyKind::StringArray => format!(
            "[{}]",
            if random.chance(50) {
                string(random)
            } else {
                integer(random)
            }
        ),
    }
}

/// A valid value of every key (a tiny custom model on 16 tiles).
fn valid_value(table: &str, key: &str) -> &'static str {
    match (table, key) {
        ("workload", "model") => "\"custom\"",
        ("workload", "layers") => "2",
        ("workload", "batch") => "1",
        ("workload", "fp8_scale") => "-4",
        ("workload", "attention") => "\"auto\"",
        ("workload", "width") => "64",
        ("workload", "mlp") => "256",
        ("workload", "heads") => "4",
        ("workload", "patches") => "16",
        ("workload", "patch") => "4",
        ("workload", "gelu") => "\"tanh\"",
        ("workload", "pooling") => "\"attention\"",
        ("workload", "pooling_heads") => "2",
        ("workload", "projection") => "0",
        ("workload", "layer_norm_epsilon") => "1e-6",
        ("workload", "class_token" | "fuse_qkv") => "true",
        ("workload", "rotary" | "pre_norm") => "false",
        ("machine", "preset") => "\"c600\"",
        ("machine", "tiles") => "16",
        ("machine", "calibration") => "\"calibration/ipu21.txt\"",
        ("planning", "accumulation") => "\"auto\"",
        ("planning", "reserved_bytes_per_tile") => "65536",
        ("planning", "max_partition_candidates") => "64",
        ("planning", "matrix_inputs") => "\"fp16\"",
        ("planning", "matrix_inputs_by_op") => "{ \"layer.mlp.up\" = \"fp8\" }",
        ("planning", "fp8_cast") => "\"producer\"",
        ("planning", "fusion") => "\"auto\"",
        ("planning", "auto_f16_max_parts") => "16",
        ("schedule", "row_allowance") => "256",
        ("planning", "activation_scale") => "-4",
        ("workload", "calibration") => "\"tests/fixtures/host_io/photo.png\"",
        ("schedule", "policy") => "\"latency\"",
        ("schedule", "width") => "\"auto\"",
        ("outputs", "directory") => "\"/tmp/superstep-fuzz\"",
        _ => "true",
    }
}

/// A random build file over the real schema: every key written with a
/// valid value, then a few keys mutated (random value of any type,
/// deleted, duplicated) and sometimes an unknown key or a whole table
/// left out.
fn build_file(random: &mut Random) -> String {
    let tables = ["workload", "machine", "planning", "schedule", "outputs"];
    let mutations = random.below(4);
    let mut targets: Vec<(usize, usize)> = Vec::new();
    for _ in 0..mutations {
        let table = random.below(tables.len() as u64) as usize;
        let keys = keys_of(tables[table]).expect("known table").len();
        targets.push((table, random.below(keys as u64) as usize));
    }
    let mut lines = vec![format!("name = \"fuzz{}\"", random.below(3))];
    for (table_index, table) in tables.iter().enumerate() {
        if random.chance(3) {
            continue; // a whole table left out
        }
        lines.push(format!("[{table}]"));
        let keys = keys_of(table).expect("known table");
        for (key_index, &(key, kind)) in keys.iter().enumerate() {
            let mutated = targets.contains(&(table_index, key_index));
            if matches!(kind, KeyKind::Table | KeyKind::TableArray) {
                if key == "weights" {
                    let (inner, inner_kind) =
                        *random.pick(keys_of("workload.weights").expect("weights"));
                    let inner_value = if mutated {
                        value(random, inner_kind)
                    } else {
                        "1".to_string()
                    };
                    let inner = if mutated { inner } else { "seeded" };
                    lines.push(format!("weights = {{ {inner} = {inner_value} }}"));
                }
                continue;
            }
            if mutated && random.chance(25) {
                continue; // a deleted key
            }
            let chosen = if mutated {
                value(random, kind)
            } else {
                valid_value(table, key).to_string()
            };
            lines.push(format!("{key} = {chosen}"));
            if mutated && random.chance(10) {
                lines.push(format!("{key} = {}", value(random, kind))); // a duplicated key
            }
        }
        if *table == "schedule" && random.chance(20) {
            lines.push(format!(
                "[[schedule.override]]\nphase = {}\npolicy = {}",
                string(random),
                string(random)
            ));
        }
        if random.chance(3) {
            lines.push("widht = 3".to_string()); // an unknown key
        }
    }
    lines.join("\n")
}

/// The property of one build file with `sets`: no panic; an error names a
/// field (or is a TOML syntax error with a span) and renders.
fn check_build_file(text: &str, sets: &[String]) -> Result<(), String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        parse_query("fuzz.toml", text, None, sets)
    }));
    let result = outcome.map_err(|_| "panicked".to_string())?;
    let Err(error) = result else {
        return Ok(());
    };
    let rendered = superstep::build_file::error::render_query_error(&error);
    if rendered.trim().is_empty() {
        return Err("empty message".into());
    }
    // The range a value missed is stated from the side it missed.
    let headline = error.to_string();
    if headline.contains("too large") && headline.contains("must be at least") {
        return Err(format!("an upper bound stated as a lower one: {headline}"));
    }
    if headline.contains("i128") {
        return Err(format!("a 128-bit type in a message: {headline}"));
    }
    match error.problem() {
        QueryProblem::Set(problem) => {
            if !rendered.contains(&problem.argument)
                && !error.to_string().contains(&problem.argument)
            {
                return Err(format!(
                    "a --set error that does not name its argument: {rendered}"
                ));
            }
        }
        QueryProblem::File(problem) => {
            let syntax = problem.message.starts_with("invalid TOML");
            if problem.field.is_none() && !syntax {
                return Err(format!("a file error naming no field: {rendered}"));
            }
            if let Some(field) = &problem.field {
                let last = field.rsplit('.').next().unwrap_or(field);
                let last = last.split('[').next().unwrap_or(last);
                if !rendered.contains(last) {
                    return Err(format!("the message does not name `{field}`: {rendered}"));
                }
            }
        }
        QueryProblem::Read { .. } => return Err("a read error from text".into()),
    }
    Ok(())
}

#[test]
fn fuzz_build_files_never_panic_and_errors_name_the_field() {
    let mut random = Random(0x5eed_0001);
    let (mut accepted, mut compiled) = (0, 0);
    for case in 0..cases(1500) {
        let text = build_file(&mut random);
        if let Err(failure) = check_build_file(&text, &[]) {
            let small = shrink_lines(&text, |candidate| check_build_file(candidate, &[]).is_err());
            panic!("case {case}: {failure}\nshrunk reproducer:\n{small}");
        }
        if let Ok(query) = parse_query("fuzz.toml", &text, None, &[]) {
            accepted += 1;
            // The first accepted ones also go through the first half of
            // the compiler: an accepted query must not make it panic.
            if accepted <= 40 {
                let front = catch_unwind(AssertUnwindSafe(|| {
                    let mut session = superstep::session::Session::new(&query);
                    session.build_low_program().map(|_| ())
                }));
                match front {
                    Err(_) => {
                        panic!("case {case}: an accepted query panicked the compiler:\n{text}")
                    }
                    Ok(Ok(())) => compiled += 1,
                    Ok(Err(_)) => {}
                }
            }
        }
    }
    println!(
        "build files: {} cases, {accepted} accepted, {compiled} compiled",
        cases(1500)
    );
    // The generator reaches valid files too (not only early rejections).
    assert!(
        accepted > 0 && compiled > 0,
        "accepted {accepted}, compiled {compiled}"
    );
}

/// Every dotted key `--set` accepts, plus misspellings.
fn set_keys() -> Vec<String> {
    let mut keys = Vec::new();
    for table in [
        "",
        "workload",
        "workload.weights",
        "machine",
        "planning",
        "schedule",
        "outputs",
    ] {
        for &(key, kind) in keys_of(table).expect("table") {
            if matches!(kind, KeyKind::Table | KeyKind::TableArray) {
                continue;
            }
            keys.push(if table.is_empty() {
                key.to_string()
            } else {
                format!("{table}.{key}")
            });
        }
    }
    keys.extend(
        [
            "workload.layrs",
            "schedule.override.layer.mlp.up#0",
            "schedule.override.",
            "schedule.override.x",
            "",
            ".",
            "workload.",
            "workload.weights.seeded.x",
        ]
        .map(String::from),
    );
    keys
}

#[test]
fn fuzz_set_strings_never_panic_and_errors_name_the_argument() {
    let base = std::fs::read_to_string("queries/vit-tiny.toml").expect("vit-tiny");
    let keys = set_keys();
    let mut random = Random(0x5eed_0002);
    let values = [
        "2",
        "0",
        "-1",
        "9223372036854775807",
        "99999999999999999999",
        "1e12",
        "true",
        "x",
        "\"quoted\"",
        "",
        "=",
        "S64",
        "latency",
        "B0",
        "1.5",
        "nan",
        "[1]",
        "{a=1}",
    ];
    for case in 0..cases(1500) {
        let count = 1 + random.below(3) as usize;
        let sets: Vec<String> = (0..count)
            .map(|_| {
                let key = random.pick(&keys).clone();
                if random.chance(5) {
                    key // no `=`
                } else {
                    format!("{key}={}", random.pick(&values))
                }
            })
            .collect();
        if let Err(failure) = check_build_file(&base, &sets) {
            panic!("case {case}: --set {sets:?}: {failure}");
        }
    }
}

/// A random snapshot's JSON text: mostly valid shapes with values within
/// and beyond every bound.
fn snapshot_text(random: &mut Random) -> String {
    let tile_count = *random.pick(&["4", "16", "0", "65536", "65537", "-1", "1e12", "4294967296"]);
    let tiles: u64 = tile_count.parse().unwrap_or(16).clamp(1, 16);
    let number = |random: &mut Random, typical: u64| -> String {
        if random.chance(90) {
            typical.to_string()
        } else {
            random
                .pick(&[
                    "-4",
                    "0",
                    "4294967295",
                    "4294967296",
                    "1180591620717411303424",
                    "1.5",
                    "\"7\"",
                    "null",
                ])
                .to_string()
        }
    };
    let mut phases = Vec::new();
    for phase in 0..1 + random.below(3) {
        let iterations = 1 + random.below(3);
        let mut transfers = Vec::new();
        for _ in 0..1 + random.below(4) {
            let words = *random.pick(&[1u64, 2, 4, 8, 64, 159_744, 0]);
            let base = 0x4c000 + 8 * random.below(1000);
            let source = random.below(tiles);
            let addresses: Vec<String> = (0..iterations)
                .map(|iteration| number(random, base + iteration * words * 4))
                .collect();
            let destinations: Vec<String> = (0..1 + random.below(3))
                .map(|_| {
                    let beyond = u64::from(random.chance(5));
                    let tile = random.below(tiles + beyond);
                    let address = 0x80000 + 8 * random.below(1000);
                    format!("[{},{}]", number(random, tile), number(random, address))
                })
                .collect();
            transfers.push(format!(
                "{{\"source\":{},\"source_addresses\":[{}],\"destinations\":[{}],\"words\":{},\"width\":\"{}\"}}",
                number(random, source),
                addresses.join(","),
                destinations.join(","),
                number(random, words),
                random.pick(&["Word32", "Paired64", "Word64"])
            ));
        }
        phases.push(format!(
            "{{\"phase\":{},\"transfers\":[{}]}}",
            number(random, phase),
            transfers.join(",")
        ));
    }
    let mut text = format!(
        "{{\"schema_version\":{},\"tile_count\":{tile_count},\"phases\":[{}]}}",
        random.pick(&["4", "4", "4", "3"]),
        phases.join(",")
    );
    if random.chance(5) {
        let cut = random.below(text.len() as u64) as usize;
        text.truncate(cut);
    }
    text
}

fn check_snapshot(text: &str) -> Result<(), String> {
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        match Snapshot::from_slice(text.as_bytes(), "fuzz.json") {
            Err(error) => {
                let message = error.to_string();
                if !message.contains("fuzz.json") {
                    return Err(format!(
                        "a parse error that does not name the file: {message}"
                    ));
                }
                // Located by phase, transfer and field, not by column.
                let located = ["phases[", "field `", "the top level"]
                    .iter()
                    .any(|place| message.contains(place));
                if !located || message.contains(" column ") {
                    return Err(format!("a parse error without its place: {message}"));
                }
                Ok(())
            }
            Ok(snapshot) => match import_phases(&snapshot, &[]) {
                Ok(_) => Ok(()),
                Err(error) => {
                    let message = error.to_string();
                    let located = message.contains("phase")
                        || message.contains("tile_count")
                        || message.contains("schema version")
                        || message.contains("tiles");
                    if located {
                        Ok(())
                    } else {
                        Err(format!("an import error naming no phase: {message}"))
                    }
                }
            },
        }
    }));
    outcome.map_err(|_| "panicked".to_string())?
}

#[test]
fn fuzz_snapshots_never_panic_and_errors_name_the_phase() {
    let mut random = Random(0x5eed_0003);
    for case in 0..cases(1500) {
        let text = snapshot_text(&mut random);
        if let Err(failure) = check_snapshot(&text) {
            panic!("case {case}: {failure}\nsnapshot: {text}");
        }
    }
}

#[test]
fn fuzz_cache_entries_are_rejected_not_decoded() {
    let key = CacheKey([3; 32]);
    let payload: Vec<u8> = (0..200u8).collect();
    let valid = entry::encode(EntryKind::Rows, &key, &payload, None).expect("encodes");
    assert_eq!(
        entry::decode(
            &valid,
            EntryKind::Rows,
            &key,
            &superstep::cache::signing::TrustedKeys::default()
        )
        .expect("valid")
        .payload,
        payload
    );
    let mut random = Random(0x5eed_0004);
    for case in 0..cases(1000) {
        let mut bytes = valid.clone();
        match random.below(4) {
            0 => bytes.truncate(random.below(bytes.len() as u64) as usize),
            1 => {
                for _ in 0..1 + random.below(4) {
                    let index = random.below(bytes.len() as u64) as usize;
                    bytes[index] ^= 1 << random.below(8);
                }
            }
            2 => {
                bytes = (0..random.below(300))
                    .map(|_| random.next() as u8)
                    .collect()
            }
            _ => bytes.extend((0..1 + random.below(8)).map(|_| random.next() as u8)),
        }
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            entry::decode(
                &bytes,
                EntryKind::Rows,
                &key,
                &superstep::cache::signing::TrustedKeys::default(),
            )
            .map(|decoded| decoded.payload)
        }))
        .unwrap_or_else(|_| panic!("case {case}: panicked"));
        if let Ok(decoded) = outcome {
            // Only a byte-identical entry (or one with trailing bytes the
            // length field excludes) may decode, and then to the payload.
            assert_eq!(decoded, payload, "case {case}: a damaged entry decoded");
        }
    }
}

#[test]
fn fuzz_package_files_are_rejected_or_verified_never_panic() {
    use superstep::package::file::{HEADER_BYTES, PackageHeader};
    use superstep::package::verify::verify_package;

    let mut session = superstep::session::Session::new(&common::query(
        "queries/vit-tiny.toml",
        &["workload.layers=1"],
    ));
    session.build().expect("build");
    let package = session.package().expect("package");
    let directory = common::scratch("fuzz", "package");
    let path = directory.join("package.bin");
    let key = CacheKey([9; 32]);
    package.write(&path, &key).expect("write");
    let valid = std::fs::read(&path).expect("read");
    assert!(verify_package(&Package::read(&path).expect("valid")).passed());

    let mut random = Random(0x5eed_0005);
    let mut outcomes = [0u32; 3]; // rejected by the header checks, undecodable, verified
    for case in 0..cases(300) {
        let mut bytes = valid.clone();
        let rehash = random.chance(50);
        match random.below(3) {
            0 => bytes.truncate(random.below(bytes.len() as u64) as usize),
            1 => {
                for _ in 0..1 + random.below(8) {
                    let index = random.below(bytes.len() as u64) as usize;
                    bytes[index] = random.next() as u8;
                }
            }
            _ => {
                // A payload mutation behind a valid header: the decoder and
                // the verifier see it.
                let index =
                    HEADER_BYTES + random.below((bytes.len() - HEADER_BYTES) as u64) as usize;
                bytes[index] = random.next() as u8;
            }
        }
        if rehash && bytes.len() >= HEADER_BYTES {
            let payload = bytes[HEADER_BYTES..].to_vec();
            bytes[..HEADER_BYTES].copy_from_slice(&PackageHeader::of(&payload, &key).to_bytes());
        }
        std::fs::write(&path, &bytes).expect("write");
        let outcome = catch_unwind(AssertUnwindSafe(|| match Package::read(&path) {
            Err(error) => {
                let message = error.to_string();
                assert!(message.contains("package.bin"), "case {case}: {message}");
                if matches!(error, superstep::package::PackageError::Encoding { .. }) {
                    1
                } else {
                    0
                }
            }
            Ok(read) => {
                let _ = verify_package(&read);
                2
            }
        }))
        .unwrap_or_else(|_| panic!("case {case}: panicked"));
        outcomes[outcome] += 1;
    }
    println!("package cases: {outcomes:?} (header-rejected, undecodable, verified)");
    assert!(
        outcomes[0] > 0 && outcomes[2] + outcomes[1] > 0,
        "{outcomes:?}"
    );
}
