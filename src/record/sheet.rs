//! The text of one record file: a header line, the file's title, sections
//! of `label: value` facts (one fact per line, so that a change of one
//! figure is a one-line diff) and an end line carrying the digest of
//! everything above it (so that a truncated or hand-damaged file is told
//! apart from a changed build). It owns the text form and its parsing; it
//! must not know what the facts mean.

use std::fmt::Display;

use crate::text::thousands;

/// What every record file starts with (then ` · ` separated fields).
pub const HEADER_PREFIX: &str = "superstep snapshot";
/// The record format's version: bump it when the text changes meaning.
pub const FORMAT_VERSION: u32 = 1;
/// The start of every file's last line (then the digest in hex).
pub const END_PREFIX: &str = "end · digest ";

/// A record file being written: its lines so far.
#[derive(Clone, Debug, Default)]
pub struct Sheet {
    lines: Vec<String>,
}

impl Sheet {
    /// A new sheet whose first line (after the header) is `title`.
    pub fn titled(title: String) -> Sheet {
        Sheet { lines: vec![title] }
    }

    /// Starts section `name` (`[name]`, after a blank line).
    pub fn section(&mut self, name: &str) {
        self.lines.push(String::new());
        self.lines.push(format!("[{name}]"));
    }

    /// One fact: `label: value`.
    pub fn fact(&mut self, label: &str, value: impl Display) {
        self.lines.push(format!("{label}: {value}"));
    }

    /// One count, grouped by thousands.
    pub fn count(&mut self, label: &str, value: u64) {
        self.fact(label, thousands(value));
    }

    /// The finished file: `header`, the lines, and the end line.
    pub fn finish(self, header: &str) -> String {
        let mut text = String::with_capacity(
            header.len() + self.lines.iter().map(|line| line.len() + 1).sum::<usize>() + 64,
        );
        text.push_str(header);
        text.push('\n');
        for line in &self.lines {
            text.push_str(line);
            text.push('\n');
        }
        let digest = text_digest(text.as_bytes());
        text.push_str(END_PREFIX);
        text.push_str(&digest);
        text.push('\n');
        text
    }
}

/// The 64-bit digest (16 hex digits) of a file's text above its end line.
pub fn text_digest(bytes: &[u8]) -> String {
    let digest = blake3::hash(bytes);
    hex16(digest.as_bytes())
}

/// The first 8 bytes of a digest, in hex.
pub fn hex16(bytes: &[u8]) -> String {
    bytes
        .iter()
        .take(8)
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

/// Why a stored file is not a record file this code can read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SheetError {
    #[error("its first line is not a `{HEADER_PREFIX}` header")]
    NoHeader,
    #[error("it has no end line (`{END_PREFIX}...`): it was cut short or edited")]
    NoEnd,
    #[error(
        "its end line's digest {stored} does not match its content ({computed}): it was edited or damaged"
    )]
    Digest { stored: String, computed: String },
    #[error("it is not UTF-8 text")]
    NotText,
}

/// A stored record file, checked: its header line, its title and its facts
/// (section, label, value) in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedSheet {
    pub header: String,
    pub title: String,
    pub facts: Vec<(String, String, String)>,
}

/// Reads a record file's text: header, end line and digest checked.
pub fn parse(bytes: &[u8]) -> Result<ParsedSheet, SheetError> {
    let text = std::str::from_utf8(bytes).map_err(|_| SheetError::NotText)?;
    let header = text.lines().next().unwrap_or("");
    if !header.starts_with(HEADER_PREFIX) {
        return Err(SheetError::NoHeader);
    }
    let body = text.strip_suffix('\n').ok_or(SheetError::NoEnd)?;
    let end_start = body.rfind('\n').map_or(0, |position| position + 1);
    let stored = body[end_start..]
        .strip_prefix(END_PREFIX)
        .ok_or(SheetError::NoEnd)?;
    let computed = text_digest(&bytes[..end_start]);
    if stored != computed {
        return Err(SheetError::Digest {
            stored: stored.to_string(),
            computed,
        });
    }
    let mut lines = body[..end_start].lines().skip(1);
    let title = lines.next().unwrap_or("").to_string();
    let mut section = String::new();
    let mut facts = Vec::new();
    for line in lines {
        if let Some(name) = line
            .strip_prefix('[')
            .and_then(|rest| rest.strip_suffix(']'))
        {
            section = name.to_string();
        } else if let Some((label, value)) = line.split_once(": ") {
            facts.push((section.clone(), label.to_string(), value.to_string()));
        } else if !line.is_empty() {
            facts.push((section.clone(), line.to_string(), String::new()));
        }
    }
    Ok(ParsedSheet {
        header: header.to_string(),
        title,
        facts,
    })
}

/// A compact histogram of per-tile figures: tiles with 0, then tiles per
/// power-of-two bucket (`1`, `2`, `3..4`, `5..8`, ...), as one line such as
/// `0: 1,200 · 3..4: 12 · 65..128: 260`.
pub fn histogram(values: impl IntoIterator<Item = u64>) -> String {
    let mut buckets: std::collections::BTreeMap<u32, u64> = std::collections::BTreeMap::new();
    for value in values {
        let bucket = if value == 0 {
            0
        } else {
            64 - (value - 1).leading_zeros() + 1
        };
        *buckets.entry(bucket).or_insert(0) += 1;
    }
    if buckets.is_empty() {
        return "none".to_string();
    }
    buckets
        .iter()
        .map(|(&bucket, &count)| {
            let label = match bucket {
                0 => "0".to_string(),
                1 => "1".to_string(),
                2 => "2".to_string(),
                _ => {
                    let upper = 1u128 << (bucket - 1);
                    format!("{}..{}", thousands(upper / 2 + 1), thousands(upper))
                }
            };
            format!("{label}: {}", thousands(count))
        })
        .collect::<Vec<_>>()
        .join(" · ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_finished_sheet_parses_back_to_its_facts() {
        let mut sheet = Sheet::titled("exchange a#0".to_string());
        sheet.section("schedule");
        sheet.count("horizon", 1052);
        sheet.fact("policy", "auto (default)");
        let text = sheet.finish("superstep snapshot · x");
        let parsed = parse(text.as_bytes()).expect("parses");
        assert_eq!(parsed.title, "exchange a#0");
        assert_eq!(
            parsed.facts,
            vec![
                ("schedule".into(), "horizon".into(), "1,052".into()),
                ("schedule".into(), "policy".into(), "auto (default)".into()),
            ]
        );
    }

    #[test]
    fn an_edited_or_truncated_sheet_is_refused() {
        let mut sheet = Sheet::titled("exchange a#0".to_string());
        sheet.section("schedule");
        sheet.count("horizon", 1052);
        let text = sheet.finish("superstep snapshot · x");
        let edited = text.replace("1,052", "1,053");
        assert!(matches!(
            parse(edited.as_bytes()),
            Err(SheetError::Digest { .. })
        ));
        let truncated = &text[..text.len() - 10];
        assert!(parse(truncated.as_bytes()).is_err());
        assert_eq!(parse(b"hello\n"), Err(SheetError::NoHeader));
        assert_eq!(parse(&[0xff, 0xfe]), Err(SheetError::NotText));
    }

    #[test]
    fn histograms_bucket_by_powers_of_two() {
        assert_eq!(
            histogram([0, 0, 1, 2, 3, 4, 5, 128, 129]),
            "0: 2 · 1: 1 · 2: 1 · 3..4: 2 · 5..8: 1 · 65..128: 1 · 129..256: 1"
        );
        assert_eq!(histogram([]), "none");
    }
}
