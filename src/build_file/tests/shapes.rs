//! Values that used to get past validation or got a misleading message:
//! shapes the expansion cannot move as whole 32-bit words (two FP16 values)
//! are refused naming the field and the nearest values that work, instead of
//! failing in expansion with exit code 1; a misspelled policy names the
//! nearest one; an integer beyond 64 bits is too large, not a string.

use super::*;

#[test]
fn an_odd_mlp_width_names_the_field_and_its_even_neighbours() {
    let text = edit(VIT_TINY, "mlp = 256", "mlp = 3");
    let rendered = expect_file_error(&text, "workload.mlp", "3");
    assert!(rendered.contains("workload.mlp = 3 is odd"), "{rendered}");
    assert!(rendered.contains("choose 2 or 4"), "{rendered}");
    let error = expect_error(SIGLIP, &["workload.mlp=4305"]);
    assert_eq!(error.field(), Some("workload.mlp"));
    assert!(
        error
            .help()
            .is_some_and(|help| help.to_string().contains("4304 or 4306")),
        "{error}"
    );
}

#[test]
fn an_odd_patch_side_names_the_field_and_its_even_neighbours() {
    for (side, advice) in [
        ("1", "choose 2"),
        ("3", "choose 2 or 4"),
        ("5", "choose 4 or 6"),
    ] {
        let text = edit(VIT_TINY, "patch = 4 ", &format!("patch = {side} "));
        let rendered = expect_file_error(&text, "workload.patch", side);
        assert!(rendered.contains("an odd count"), "{rendered}");
        assert!(rendered.contains(advice), "{side}: {rendered}");
    }
}

#[test]
fn an_odd_pooling_head_dimension_names_pooling_heads_and_a_divisor() {
    // width 64 over 64 pooling heads: one channel per head.
    let text = edit(
        VIT_TINY,
        "pooling = \"class-token\"",
        "pooling = \"map\"\npooling_heads = 64",
    );
    let rendered = expect_file_error(&text, "workload.pooling_heads", "64");
    assert!(
        rendered.contains("64 / 64 = 1 is not a usable pooling head dimension"),
        "{rendered}"
    );
    assert!(
        rendered.contains("workload.pooling_heads = 32"),
        "{rendered}"
    );
}

#[test]
fn a_misspelled_policy_names_the_nearest_policy() {
    let text = edit(SIGLIP, "policy = \"auto\"", "policy = \"matchng\"");
    let rendered = expect_file_error(&text, "schedule.policy", "\"matchng\"");
    assert!(
        rendered.contains("did you mean \"matching\"?"),
        "{rendered}"
    );
    assert!(
        rendered.contains("`list`, `matching`, `latency`"),
        "{rendered}"
    );
    let text = edit(SIGLIP, "policy = \"auto\"", "policy = \"greedy\"");
    let rendered = expect_file_error(&text, "schedule.policy", "\"greedy\"");
    assert!(rendered.contains("expected `auto`, `list`"), "{rendered}");
}

#[test]
fn an_integer_beyond_64_bits_is_too_large_not_the_wrong_type() {
    let message = expect_set_error(
        SIGLIP,
        &["machine.tiles=99999999999999999999"],
        "machine.tiles=99999999999999999999",
        Some("machine.tiles"),
    );
    assert!(message.contains("is too large"), "{message}");
    assert!(
        !message.contains("but the value is the string"),
        "{message}"
    );
    let message = expect_set_error(
        SIGLIP,
        &["workload.fp8_scale=-99999999999999999999"],
        "workload.fp8_scale=-99999999999999999999",
        Some("workload.fp8_scale"),
    );
    assert!(message.contains("is too small"), "{message}");
}
