//! `--set` overrides, and robustness against mutated files.

use super::*;

// --- --set --------------------------------------------------------------------

#[test]
fn set_overrides_fields() {
    let query = parse(
        SIGLIP,
        &[
            "workload.layers=2",
            "machine.tiles=128",
            "schedule.policy=S256",
            "name=foo",
            "workload.weights.seeded=7",
            "workload.attention=\"flash\"",
            "planning.copy_motion=false",
            "planning.repeat_base=false",
            "schedule.override.layer.attention.scores#3=B512",
        ],
    )
    .expect("sets apply");
    assert_eq!(query.workload.model.layers, 2);
    assert_eq!(query.machine.tiles, 128);
    assert_eq!(query.schedule.policy, SchedulePolicy::Stream { words: 256 });
    assert_eq!(query.name, "foo");
    assert_eq!(query.workload.weights, WeightSource::Seeded { seed: 7 });
    assert_eq!(query.workload.attention, AttentionChoice::Flash);
    assert!(!query.planning.copy_motion);
    assert!(!query.planning.repeat_base);
    assert_eq!(query.overrides.len(), 1);
    assert_eq!(query.overrides[0].phase, "layer.attention.scores#3");
    assert_eq!(
        query.overrides[0].policy,
        SchedulePolicy::Balanced { words: 512 }
    );
}

#[test]
fn set_replaces_a_phase_override_and_sets_one_key_each() {
    let query = parse(
        SIGLIP,
        &["schedule.override.layer.mlp.up#0=S64", "workload.layers=4"],
    )
    .expect("sets apply");
    assert_eq!(query.overrides.len(), 1);
    assert_eq!(
        query.overrides[0].policy,
        SchedulePolicy::Stream { words: 64 }
    );
    assert_eq!(query.workload.model.layers, 4);
}

#[test]
fn set_unknown_key() {
    let message = expect_set_error(
        SIGLIP,
        &["workload.layrs=2"],
        "workload.layrs=2",
        Some("workload.layrs"),
    );
    assert!(
        message.contains(
            "unknown key `workload.layrs`; known keys under `workload`: model, layers, batch"
        ),
        "{message}"
    );
    let message = expect_set_error(
        SIGLIP,
        &["machin.tiles=2"],
        "machin.tiles=2",
        Some("machin.tiles"),
    );
    assert!(message.contains("known top-level keys"), "{message}");
    expect_set_error(SIGLIP, &["workload=2"], "workload=2", Some("workload"));
    expect_set_error(
        SIGLIP,
        &["workload.layers.x=2"],
        "workload.layers.x=2",
        Some("workload.layers.x"),
    );
}

#[test]
fn set_wrong_type() {
    let message = expect_set_error(
        SIGLIP,
        &["workload.layers=abc"],
        "workload.layers=abc",
        Some("workload.layers"),
    );
    assert!(message.contains("expects an integer"), "{message}");
    let message = expect_set_error(
        SIGLIP,
        &["outputs.report=3"],
        "outputs.report=3",
        Some("outputs.report"),
    );
    assert!(message.contains("expects a boolean"), "{message}");
}

#[test]
fn set_unquoted_strings() {
    let query = parse(
        SIGLIP,
        &[
            "schedule.policy=B256",
            "name=2024",
            "outputs.directory=out/builds",
        ],
    )
    .expect("unquoted strings");
    assert_eq!(
        query.schedule.policy,
        SchedulePolicy::Balanced { words: 256 }
    );
    assert_eq!(query.name, "2024");
    assert_eq!(query.outputs.directory, PathBuf::from("out/builds"));
}

#[test]
fn set_missing_equals() {
    let message = expect_set_error(SIGLIP, &["workload.layers"], "workload.layers", None);
    assert!(message.contains("no `=`"), "{message}");
    expect_set_error(SIGLIP, &["=3"], "=3", None);
}

#[test]
fn set_values_are_validated_and_name_the_argument() {
    let message = expect_set_error(
        SIGLIP,
        &["workload.heads=7"],
        "workload.heads=7",
        Some("workload.heads"),
    );
    assert!(
        message.contains("workload.heads = 7 does not divide workload.width = 1152"),
        "{message}"
    );
    expect_set_error(
        SIGLIP,
        &["machine.tiles=0"],
        "machine.tiles=0",
        Some("machine.tiles"),
    );
    expect_set_error(
        SIGLIP,
        &["schedule.policy=X12"],
        "schedule.policy=X12",
        Some("schedule.policy"),
    );
    expect_set_error(
        SIGLIP,
        &["workload.layers=0"],
        "workload.layers=0",
        Some("workload.layers"),
    );
    expect_set_error(
        SIGLIP,
        &["schedule.override.layer.mlp.up#1=B0"],
        "schedule.override.layer.mlp.up#1=B0",
        Some("schedule.override.layer.mlp.up#1"),
    );
    expect_set_error(
        SIGLIP,
        &["workload.weights.safetensors=/no/such.safetensors"],
        "workload.weights.safetensors=/no/such.safetensors",
        Some("workload.weights.safetensors"),
    );
    // A model that no longer fits because of an overridden layer count names the --set.
    let text = "[workload]\nmodel = \"vit-b16\"\n[machine]\ntiles = 200\n";
    parse(text, &[]).expect("fits on 200 tiles");
    let message = expect_set_error(
        text,
        &["workload.layers=40"],
        "workload.layers=40",
        Some("workload.layers"),
    );
    assert!(message.contains("does not fit on 200 tiles"), "{message}");
}

// --- robustness ---------------------------------------------------------------

struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, bound: usize) -> usize {
        (self.next() % bound.max(1) as u64) as usize
    }
}

#[test]
fn mutated_inputs_never_panic() {
    const INTERESTING: &[char] = &[
        '"', '=', '[', ']', '{', '}', '0', '9', '-', '#', '\n', '.', ' ', ',', '\'', 'x', 'é',
    ];
    let original: Vec<char> = SIGLIP.chars().collect();
    let mut random = XorShift(0x9e37_79b9_7f4a_7c15);
    let mut outcomes = (0usize, 0usize);
    for _ in 0..200 {
        let mut text = original.clone();
        for _ in 0..1 + random.below(4) {
            let at = random.below(text.len());
            match random.below(3) {
                0 if !text.is_empty() => {
                    text.remove(at);
                }
                1 if !text.is_empty() => {
                    let character = text[at];
                    text.insert(at, character);
                }
                _ => {
                    let replacement = INTERESTING[random.below(INTERESTING.len())];
                    if at < text.len() {
                        text[at] = replacement;
                    } else {
                        text.push(replacement);
                    }
                }
            }
        }
        let text: String = text.into_iter().collect();
        let result = std::panic::catch_unwind(|| {
            let outcome = parse_query("mutant.toml", &text, None, &[]);
            if let Err(error) = &outcome {
                assert_eq!(error.exit_code(), 2);
                render(error);
            }
            outcome.is_ok()
        });
        match result {
            Ok(true) => outcomes.0 += 1,
            Ok(false) => outcomes.1 += 1,
            Err(_) => panic!("parse_query panicked on:\n{text}"),
        }
    }
    assert!(outcomes.0 > 0 && outcomes.1 > 0, "{outcomes:?}");
}

#[test]
fn integer_beyond_64_bits_names_the_field() {
    let text = edit(SIGLIP, "batch = 1", "batch = 99999999999999999999");
    expect_file_error(&text, "workload.batch", "99999999999999999999");
}

// --- layout overrides -----------------------------------------------------------

/// The SigLIP build file without the layout overrides it ships.
fn siglip_without_layouts() -> &'static str {
    SIGLIP
        .split("# Per-operator layouts found")
        .next()
        .unwrap_or(SIGLIP)
}

#[test]
fn layout_overrides_come_from_the_file_and_from_set_sorted_by_op() {
    let text = format!(
        "{}\n[[layout.override]]\nop = \"layer.mlp.up\"\npartition = \"8x46x4\"\norder = \"rkc\"\n",
        siglip_without_layouts()
    );
    let query = parse(
        &text,
        &[
            "layout.override.layer.mlp.down=8x8x23",
            "layout.override.layer.attn.core=23x4/kq",
            // A later --set replaces the file's entry for the same op.
            "layout.override.layer.mlp.up=7x42x5",
        ],
    )
    .expect("overrides apply");
    let written: Vec<(String, String)> = query
        .planning
        .layout_overrides
        .iter()
        .map(|entry| (entry.op.clone(), entry.partition.to_string()))
        .collect();
    assert_eq!(
        written,
        [
            ("layer.attn.core", "23x4/kq"),
            ("layer.mlp.down", "8x8x23"),
            ("layer.mlp.up", "7x42x5"),
        ]
        .map(|(op, partition)| (op.to_string(), partition.to_string()))
    );
    // `auto` drops the file's entry; the whole table's `auto` drops an
    // earlier --set's too.
    let dropped = parse(
        &text,
        &[
            "layout.override.layer.mlp.down=auto",
            "layout.override.layer.mlp.up=auto",
        ],
    )
    .expect("auto applies");
    assert!(dropped.planning.layout_overrides.is_empty());
    let cleared = parse(
        &text,
        &[
            "layout.override.layer.mlp.down=8x8x23",
            "layout.override=auto",
        ],
    )
    .expect("auto clears");
    assert!(cleared.planning.layout_overrides.is_empty());
    // The package depends on the overrides: the build key moves.
    let plain = parse(siglip_without_layouts(), &[]).expect("plain");
    assert_ne!(
        crate::build_file::package_build_key(&plain),
        crate::build_file::package_build_key(&query)
    );
}

#[test]
fn layout_override_entries_are_checked_with_spans() {
    for (fragment, expected) in [
        (
            "[[layout.override]]\npartition = \"8x8x23\"\n",
            "has no `op`",
        ),
        (
            "[[layout.override]]\nop = \"layer.mlp.down\"\n",
            "has no `partition`",
        ),
        (
            "[[layout.override]]\nop = \"layer.mlp.down#0\"\npartition = \"8x8x23\"\n",
            "is not an op name",
        ),
        (
            "[[layout.override]]\nop = \"layer.mlp.down\"\npartition = \"8x8\"\norder = \"rck\"\n",
            "unknown tile order `rck` for attention",
        ),
        (
            "[[layout.override]]\nop = \"layer.mlp.down\"\npartition = \"8x8x23\"\nwidth = 3\n",
            "width",
        ),
        ("[[layout]]\n", "layout"),
    ] {
        let text = format!("{}\n{fragment}", siglip_without_layouts());
        let error = parse(&text, &[]).expect_err(fragment);
        let rendered = format!("{error:?} {error}");
        assert!(rendered.contains(expected), "{fragment}: {rendered}");
    }
    let error = parse(SIGLIP, &["layout.override.=8x8x23"]).expect_err("empty op");
    assert!(format!("{error}").contains("empty"), "{error}");
    let error = parse(SIGLIP, &["layout.override=8x8x23"]).expect_err("whole table");
    assert!(format!("{error}").contains("one op at a time"), "{error}");
}

/// A choice field's error lists the table of fields' choices, in the
/// table's order (the reference in docs/build-file.md says the same).
#[test]
fn choice_errors_list_the_table_of_fields_choices() {
    let message = expect_set_error(
        VIT_TINY,
        &["planning.fusion=same-operators"],
        "planning.fusion=same-operators",
        Some("planning.fusion"),
    );
    let listed = crate::build_file::fields::field_of("planning.fusion")
        .expect("planning.fusion is in the table")
        .choices
        .join(" | ");
    assert!(message.contains(&listed), "{message}");
    let rendered = render(&expect_error(VIT_TINY, &["planning.fusion=same-operators"]));
    assert!(
        rendered.contains("did you mean \"same-operator\"?"),
        "{rendered}"
    );
}

/// An array entry's choice (`schedule.override[0].width`) is checked
/// against its field in the table (`schedule.override.width`).
#[test]
fn choice_of_an_array_entry_is_looked_up_without_its_index() {
    use crate::build_file::fields::field_of;
    use crate::build_file::validate::table_key;
    assert_eq!(
        table_key("schedule.override[12].width"),
        "schedule.override.width"
    );
    assert_eq!(table_key("workload.gelu"), "workload.gelu");
    assert!(field_of(&table_key("schedule.override[0].width")).is_some());
    let text = format!(
        "{VIT_TINY}\n[[schedule.override]]\nphase = \"layer.mlp.up#0\"\npolicy = \"S64\"\nwidth = \"paired63\"\n"
    );
    let rendered = expect_file_error(&text, "schedule.override[0].width", "\"paired63\"");
    assert!(rendered.contains("auto | word32 | paired64"), "{rendered}");
    assert!(
        rendered.contains("did you mean \"paired64\"?"),
        "{rendered}"
    );
}

/// Every value key of the table of fields can be set from the command line
/// (written into the document, it lands in the deserialised file), except the members of arrays of
/// tables, which have their own `--set` forms. A field added to the table
/// without an assignment fails here; an assignment without a field is
/// unreachable, because `--set` finds keys through the table.
#[test]
fn every_value_field_of_the_table_can_be_set() {
    use crate::build_file::fields::{FIELDS, KeyKind, field_of, table_and_name};
    let mut checked = 0;
    for field in FIELDS {
        // A member of an array of tables, or of a table inside one
        // (`layout.override.when.batch`).
        let mut in_array = false;
        let (mut table, _) = table_and_name(field.key);
        while let Some(parent) = field_of(table) {
            in_array |= parent.kind == KeyKind::TableArray;
            table = table_and_name(table).0;
        }
        let example = match field.kind {
            // Set per entry (`planning.matrix_inputs.OP`), tested on their own.
            KeyKind::Table | KeyKind::TableArray | KeyKind::StringTable | KeyKind::StringArray => {
                continue;
            }
            _ if in_array => continue,
            KeyKind::Integer | KeyKind::Scale => "1",
            KeyKind::Float => "0.5",
            KeyKind::Boolean => "true",
            KeyKind::String => field.choices.first().copied().unwrap_or("text"),
        };
        let (before, _) =
            crate::build_file::query_file("vit-tiny.toml", VIT_TINY, &[]).expect("vit-tiny parses");
        let argument = format!("{}={example}", field.key);
        match crate::build_file::query_file(
            "vit-tiny.toml",
            VIT_TINY,
            std::slice::from_ref(&argument),
        ) {
            Ok((after, origins)) => {
                assert_eq!(
                    origins.get(field.key),
                    Some(&argument),
                    "--set {argument} did not record its origin"
                );
                // The value landed: the file differs (a value from the
                // command line has no span in the file, so even an equal
                // value shows).
                assert_ne!(
                    format!("{before:?}"),
                    format!("{after:?}"),
                    "--set {argument} changed nothing in the deserialised file"
                );
            }
            Err(error) => panic!("--set {argument}: {error}"),
        }
        checked += 1;
    }
    assert!(checked >= 40, "only {checked} fields checked");
}

/// A key given twice is refused, naming both arguments (the first would
/// otherwise be dropped without a word); distinct keys, and one key once,
/// apply.
#[test]
fn a_key_set_twice_is_an_error_naming_both() {
    let twice = [
        String::from("workload.batch=1"),
        String::from("workload.layers=1"),
        String::from(" workload.batch =2"),
    ];
    let error =
        crate::build_file::query_file("vit-tiny.toml", VIT_TINY, &twice).expect_err("set twice");
    let message = error.to_string();
    assert!(
        message.contains("`workload.batch` is set twice"),
        "{message}"
    );
    assert!(message.contains("--set workload.batch=1"), "{message}");
    assert_eq!(error.field(), Some("workload.batch"));
    let once = [
        String::from("workload.batch=2"),
        String::from("workload.layers=1"),
    ];
    assert!(crate::build_file::query_file("vit-tiny.toml", VIT_TINY, &once).is_ok());
    // Two arguments without a key: the missing key is the error, not a
    // key "set twice".
    let keyless = [String::from("=1"), String::from(" =2")];
    let message = crate::build_file::query_file("vit-tiny.toml", VIT_TINY, &keyless)
        .expect_err("no key")
        .to_string();
    assert!(message.contains("the key before `=` is empty"), "{message}");
    assert!(!message.contains("set twice"), "{message}");
}
