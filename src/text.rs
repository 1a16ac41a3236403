//! Text shared by every message and report: digit grouping, edit distance
//! and the nearest names of a closed vocabulary (did-you-mean). It owns
//! text only; it must not know what the numbers or names mean.

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

/// `count` and the noun for it, singular for one: `1 layer`, `27 layers`,
/// `1,472 tiles` (the count grouped as [`thousands`] groups it).
pub fn counted(count: impl Into<u128>, singular: &str, plural: &str) -> String {
    let count = count.into();
    format!(
        "{} {}",
        thousands(count),
        if count == 1 { singular } else { plural }
    )
}

/// The first `limit` of `values`, comma-separated, and how many more there
/// are: `0, 3, 7 and 10 more`.
pub fn first_of<T: ToString>(values: &[T], limit: usize) -> String {
    let listed: Vec<String> = values.iter().take(limit).map(ToString::to_string).collect();
    let more = values.len().saturating_sub(limit);
    if more > 0 {
        format!("{} and {more} more", listed.join(", "))
    } else {
        listed.join(", ")
    }
}

/// Edit distance over characters (optimal string alignment: insertions,
/// deletions, substitutions and transpositions of neighbours each cost 1, so
/// `widht` is one edit from `width`).
pub fn edit_distance(first: &str, second: &str) -> usize {
    let first: Vec<char> = first.chars().collect();
    let second: Vec<char> = second.chars().collect();
    let mut before_previous: Vec<usize> = Vec::new();
    let mut previous: Vec<usize> = (0..=second.len()).collect();
    for (row, &first_char) in first.iter().enumerate() {
        let mut current = Vec::with_capacity(second.len() + 1);
        current.push(row + 1);
        for (column, &second_char) in second.iter().enumerate() {
            let substitution = previous[column] + usize::from(first_char != second_char);
            let deletion = previous[column + 1] + 1;
            let insertion = current[column] + 1;
            let mut best = substitution.min(deletion).min(insertion);
            if row > 0
                && column > 0
                && first_char == second[column - 1]
                && first[row - 1] == second_char
            {
                best = best.min(before_previous[column - 1] + 1);
            }
            current.push(best);
        }
        before_previous = std::mem::replace(&mut previous, current);
    }
    previous.last().copied().unwrap_or(0)
}

/// The keys (phase keys, op names) of `known` nearest to `wanted`, at most `count`: keys
/// that contain its operator part (before `#`) first, then by edit
/// distance, ties in key order.
pub fn nearest_keys<'a>(wanted: &str, known: &[&'a str], count: usize) -> Vec<&'a str> {
    let stem = wanted.split('#').next().unwrap_or(wanted);
    let mut scored: Vec<(bool, usize, &str)> = known
        .iter()
        .map(|key| {
            (
                stem.is_empty() || !key.contains(stem),
                edit_distance(wanted, key),
                *key,
            )
        })
        .collect();
    scored.sort_unstable();
    scored
        .into_iter()
        .take(count)
        .map(|(_, _, key)| key)
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn first_of_lists_a_few_and_counts_the_rest() {
        assert_eq!(super::first_of(&[0, 3, 7], 16), "0, 3, 7");
        assert_eq!(super::first_of(&[0, 3, 7, 9], 2), "0, 3 and 2 more");
        assert_eq!(super::first_of::<u32>(&[], 2), "");
    }

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
