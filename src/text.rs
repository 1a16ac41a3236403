//! Number formatting shared by every message and report: digit grouping.
//! It owns text only; it must not know what the numbers mean.

/// `1234567` as `1,234,567`.
pub fn thousands(value: impl Into<u128>) -> String {
    let digits = value.into().to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, character) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(character);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_groups_digits() {
        assert_eq!(thousands(0u64), "0");
        assert_eq!(thousands(999u32), "999");
        assert_eq!(thousands(1_000u64), "1,000");
        assert_eq!(thousands(1_234_567u64), "1,234,567");
        assert_eq!(thousands(u128::MAX).matches(',').count(), 12);
    }
}
