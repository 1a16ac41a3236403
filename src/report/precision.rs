//! The precision recipe a build's matrix work runs at, as one line: what
//! share of its multiply-accumulates take FP8 inputs (the FP8 rate) and
//! which ops take FP16 ones (the FP16 rate), read from the estimate's
//! per-op compute (`OpCompute::fp8_macs` and `fp16_macs`), so the line
//! says what the estimate priced.

use super::OpComputeLine;

/// `matrix products: 93.2% of 1,234,567 multiply-accumulates at the FP8
/// rate (...); FP16 rate: ...`, or `None` for a program without matrix
/// work.
pub fn precision_line(compute_by_op: &[OpComputeLine]) -> Option<String> {
    let fp8: u64 = compute_by_op.iter().map(|line| line.op.fp8_macs).sum();
    let fp16: u64 = compute_by_op.iter().map(|line| line.op.fp16_macs).sum();
    let total = fp8 + fp16;
    if total == 0 {
        return None;
    }
    let names = |of: fn(&OpComputeLine) -> u64| -> String {
        let mut ops: Vec<&str> = compute_by_op
            .iter()
            .filter(|line| of(line) > 0)
            .map(|line| line.op.op.as_str())
            .collect();
        ops.sort_unstable();
        ops.join(", ")
    };
    let share = |macs: u64| 100.0 * macs as f64 / total as f64;
    let mut parts = Vec::new();
    if fp8 > 0 {
        parts.push(format!(
            "{:.1}% at the FP8 rate, FP8 x FP8 ({})",
            share(fp8),
            names(|line| line.op.fp8_macs)
        ));
    }
    if fp16 > 0 {
        parts.push(format!(
            "{:.1}% at the FP16 rate, FP16 x FP16 ({})",
            share(fp16),
            names(|line| line.op.fp16_macs)
        ));
    }
    Some(format!(
        "matrix products: {} multiply-accumulates, {}",
        crate::text::thousands(total),
        parts.join("; ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::breakdown::OpCompute;

    fn line(op: &str, fp8_macs: u64, fp16_macs: u64) -> OpComputeLine {
        OpComputeLine::of(
            &OpCompute {
                op: op.to_string(),
                fp8_macs,
                fp16_macs,
                ..OpCompute::default()
            },
            1,
        )
    }

    #[test]
    fn shares_and_ops_follow_the_macs() {
        let lines = [
            line("layer.mlp.up", 300, 0),
            line("layer.attn.core", 50, 50),
            line("layer.ln1", 0, 0),
        ];
        assert_eq!(
            precision_line(&lines).expect("matrix work"),
            "matrix products: 400 multiply-accumulates, 87.5% at the FP8 rate, FP8 x FP8 \
             (layer.attn.core, layer.mlp.up); 12.5% at the FP16 rate, FP16 x FP16 \
             (layer.attn.core)"
        );
        assert_eq!(precision_line(&[line("layer.ln1", 0, 0)]), None);
    }
}
