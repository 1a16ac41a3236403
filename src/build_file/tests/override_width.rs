//! The optional `width` of a `[[schedule.override]]` entry (and the
//! `POLICY/WIDTH` form of `--set schedule.override.PHASE=...`): parsed,
//! validated with an error that points at it, absent by default.

use super::*;

fn override_entry(width_line: &str) -> String {
    format!(
        "{SIGLIP}\n[[schedule.override]]\nphase = \"layer.mlp.up#0\"\npolicy = \"S64\"\n{width_line}\n"
    )
}

#[test]
fn an_override_without_a_width_keeps_the_build_width() {
    let query = parse(&override_entry(""), &[]).expect("parses");
    assert_eq!(query.overrides[0].width, None);
}

#[test]
fn an_override_width_is_parsed_from_the_file() {
    for (text, width) in [
        ("auto", TransferWidth::Auto),
        ("word32", TransferWidth::Word32),
        ("paired64", TransferWidth::Paired64),
    ] {
        let query =
            parse(&override_entry(&format!("width = \"{text}\"")), &[]).expect("width parses");
        assert_eq!(
            query.overrides,
            vec![PhaseOverride {
                phase: "layer.mlp.up#0".into(),
                policy: SchedulePolicy::Stream { words: 64 },
                width: Some(width),
            }]
        );
    }
}

#[test]
fn a_bad_override_width_in_the_file_points_at_it() {
    let message = expect_file_error(
        &override_entry("width = \"paired46\""),
        "schedule.override[0].width",
        "\"paired46\"",
    );
    assert!(message.contains("paired64"), "{message}");
}

#[test]
fn an_override_width_of_the_wrong_type_is_an_error() {
    let error = expect_error(&override_entry("width = 64"), &[]);
    assert!(
        error.to_string().contains("schedule.override[0].width"),
        "{error}"
    );
}

#[test]
fn set_takes_policy_slash_width() {
    let query =
        parse(SIGLIP, &["schedule.override.layer.mlp.up#0=B256/paired64"]).expect("sets apply");
    assert_eq!(
        query.overrides[0].policy,
        SchedulePolicy::Balanced { words: 256 }
    );
    assert_eq!(query.overrides[0].width, Some(TransferWidth::Paired64));
    let query = parse(SIGLIP, &["schedule.override.layer.mlp.up#0=latency"]).expect("applies");
    assert_eq!(query.overrides[0].width, None);
}

#[test]
fn a_bad_set_width_names_the_argument() {
    let message = expect_set_error(
        SIGLIP,
        &["schedule.override.layer.mlp.up#0=S64/word16"],
        "schedule.override.layer.mlp.up#0=S64/word16",
        Some("schedule.override.layer.mlp.up#0"),
    );
    assert!(message.contains("not a transfer width"), "{message}");
    assert!(message.contains("word32"), "{message}");
}
