//! Where in a snapshot a JSON error is: the path (`phases[3].transfers[17].words`)
//! of the value at a byte offset, found by one scan of the text before it.
//!
//! serde reports a bad value by line and column only ("expected u32 at line 1
//! column 88123"), which means nothing in a one-line file of a hundred
//! megabytes. This module owns turning that offset into the phase, the
//! transfer and the field. It tracks only the nesting (objects with their
//! current key, arrays with their current index); it never builds values, so
//! it is linear in the offset and needs memory proportional to the depth.

/// One step of a path into a JSON document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PathStep {
    Key(String),
    Index(usize),
}

/// The path of the innermost value that contains byte `offset` of `text`
/// (the scan stops there).
pub fn path_at(text: &[u8], offset: usize) -> Vec<PathStep> {
    // Per open container: `Some(key)` or `None` for objects (key not read
    // yet), an index for arrays.
    enum Open {
        Object {
            key: Option<String>,
            expecting_key: bool,
        },
        Array {
            index: usize,
        },
    }
    let mut stack: Vec<Open> = Vec::new();
    let end = offset.min(text.len());
    let mut position = 0;
    while position < end {
        match text[position] {
            b'{' => stack.push(Open::Object {
                key: None,
                expecting_key: true,
            }),
            b'[' => stack.push(Open::Array { index: 0 }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => match stack.last_mut() {
                Some(Open::Array { index }) => *index += 1,
                Some(Open::Object { expecting_key, .. }) => *expecting_key = true,
                None => {}
            },
            b'"' => {
                let start = position + 1;
                let mut cursor = start;
                while cursor < text.len() && text[cursor] != b'"' {
                    cursor += if text[cursor] == b'\\' { 2 } else { 1 };
                }
                if let Some(Open::Object { key, expecting_key }) = stack.last_mut()
                    && *expecting_key
                {
                    let stop = cursor.min(text.len());
                    *key = Some(String::from_utf8_lossy(&text[start..stop]).into_owned());
                    *expecting_key = false;
                }
                position = cursor;
            }
            _ => {}
        }
        position += 1;
    }
    stack
        .into_iter()
        .filter_map(|open| match open {
            Open::Object { key, .. } => key.map(PathStep::Key),
            Open::Array { index } => Some(PathStep::Index(index)),
        })
        .collect()
}

/// Byte offset of 1-based `line` and `column` in `text` (serde_json's
/// location of an error).
pub fn offset_of(text: &[u8], line: usize, column: usize) -> usize {
    let mut current_line = 1;
    let mut line_start = 0;
    if line > 1 {
        for (index, &byte) in text.iter().enumerate() {
            if byte == b'\n' {
                current_line += 1;
                line_start = index + 1;
                if current_line == line {
                    break;
                }
            }
        }
    }
    (line_start + column.saturating_sub(1)).min(text.len())
}

/// A path for people: `phase index 3 (phases[3]), transfer 17, field \`words\``.
pub fn describe(path: &[PathStep]) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut steps = path.iter().peekable();
    while let Some(step) = steps.next() {
        match step {
            PathStep::Key(key) => match (key.as_str(), steps.peek()) {
                ("phases", Some(PathStep::Index(index))) => {
                    parts.push(format!("phases[{index}]"));
                    steps.next();
                }
                ("transfers", Some(PathStep::Index(index))) => {
                    parts.push(format!("transfer {index}"));
                    steps.next();
                }
                ("allocations", Some(PathStep::Index(index))) => {
                    parts.push(format!("allocation {index}"));
                    steps.next();
                }
                (_, Some(PathStep::Index(index))) => {
                    parts.push(format!("field `{key}` element {index}"));
                    steps.next();
                }
                _ => parts.push(format!("field `{key}`")),
            },
            PathStep::Index(index) => parts.push(format!("element {index}")),
        }
    }
    if parts.is_empty() {
        String::from("the top level")
    } else {
        parts.join(", ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_transfer_field_of_an_offset() {
        let text = br#"{"schema_version":4,"tile_count":2,"phases":[{"phase":0,"transfers":[]},{"phase":1,"transfers":[{"source":0},{"source":1,"words":-4}]}]}"#;
        let offset = text
            .windows(2)
            .position(|window| window == b"-4")
            .expect("present");
        let path = path_at(text, offset);
        assert_eq!(
            path,
            vec![
                PathStep::Key("phases".into()),
                PathStep::Index(1),
                PathStep::Key("transfers".into()),
                PathStep::Index(1),
                PathStep::Key("words".into()),
            ]
        );
        assert_eq!(describe(&path), "phases[1], transfer 1, field `words`");
    }

    #[test]
    fn strings_with_brackets_and_escapes_do_not_confuse_the_scan() {
        let text = br#"{"a":"x[\"{,","b":[1,2,3]}"#;
        let offset = text.len() - 3;
        assert_eq!(
            path_at(text, offset),
            vec![PathStep::Key("b".into()), PathStep::Index(2)]
        );
        assert_eq!(offset_of(b"ab\ncd", 2, 2), 4);
    }
}
