//! The compact byte form of a phase's rows, for the persistent cache: flat
//! little-endian arrays, decoded in bulk (a generic serializer visits every
//! word and slot one by one, which dominates a warm build's loading).
//!
//! ```text
//! u32 rows
//! per row: u32 words, u32 slots
//! every row's words (u32), then every row's slots (u32 word, u8 field,
//! u32 allocation, u32 offset)
//! ```

use super::{PhaseRows, RelocationSlot, Row, SlotField};
use crate::schedule::SymbolicAddress;

const SLOT_BYTES: usize = 13;

/// Why bytes are not the compact form of any rows.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RowsDecodeError {
    /// The bytes end before what their counts declare.
    #[error("the rows end before byte {needed} ({length} bytes)")]
    Truncated { needed: usize, length: usize },
    /// Bytes are left after every row.
    #[error("{0} bytes left after the rows")]
    Trailing(usize),
    /// A slot names a field no row has.
    #[error("unknown slot field {0}")]
    UnknownSlotField(u8),
}

fn field_code(field: SlotField) -> u8 {
    match field {
        SlotField::SendAddress => 0,
        SlotField::PicValue => 1,
        SlotField::InlinePic => 2,
        SlotField::PairedSendAddress => 3,
    }
}

/// Encodes `rows` in the compact form.
pub fn encode_rows(rows: &PhaseRows) -> Vec<u8> {
    let words: usize = rows.rows.iter().map(|row| row.words.len()).sum();
    let slots: usize = rows.rows.iter().map(|row| row.slots.len()).sum();
    let mut bytes = Vec::with_capacity(4 + 8 * rows.rows.len() + 4 * words + SLOT_BYTES * slots);
    let put = |value: u32, bytes: &mut Vec<u8>| bytes.extend_from_slice(&value.to_le_bytes());
    put(rows.rows.len() as u32, &mut bytes);
    for row in &rows.rows {
        put(row.words.len() as u32, &mut bytes);
        put(row.slots.len() as u32, &mut bytes);
    }
    for row in &rows.rows {
        for &word in &row.words {
            put(word, &mut bytes);
        }
    }
    for row in &rows.rows {
        for slot in &row.slots {
            put(slot.word, &mut bytes);
            bytes.push(field_code(slot.field));
            put(slot.address.allocation, &mut bytes);
            put(slot.address.offset, &mut bytes);
        }
    }
    bytes
}

/// A cursor that fails instead of reading past the end.
struct Reader<'bytes> {
    bytes: &'bytes [u8],
    position: usize,
}

impl<'bytes> Reader<'bytes> {
    fn take(&mut self, count: usize) -> Result<&'bytes [u8], RowsDecodeError> {
        let end = self
            .position
            .checked_add(count)
            .filter(|&end| end <= self.bytes.len())
            .ok_or(RowsDecodeError::Truncated {
                needed: self.position.saturating_add(count),
                length: self.bytes.len(),
            })?;
        let slice = &self.bytes[self.position..end];
        self.position = end;
        Ok(slice)
    }

    fn word(&mut self) -> Result<u32, RowsDecodeError> {
        let bytes = self.take(4)?;
        Ok(u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]))
    }
}

fn words_of(bytes: &[u8]) -> Vec<u32> {
    bytes
        .chunks_exact(4)
        .map(|chunk| u32::from_le_bytes([chunk[0], chunk[1], chunk[2], chunk[3]]))
        .collect()
}

/// Decodes the compact form; any inconsistency is an error, never a panic.
pub fn decode_rows(bytes: &[u8]) -> Result<PhaseRows, RowsDecodeError> {
    let mut reader = Reader { bytes, position: 0 };
    let row_count = reader.word()? as usize;
    let shapes = words_of(reader.take(row_count.saturating_mul(8))?);
    let mut rows = Vec::with_capacity(row_count);
    let mut word_total = 0usize;
    let mut slot_total = 0usize;
    for shape in shapes.chunks_exact(2) {
        word_total = word_total.saturating_add(shape[0] as usize);
        slot_total = slot_total.saturating_add(shape[1] as usize);
    }
    let mut words = reader.take(word_total.saturating_mul(4))?;
    let mut slots = reader.take(slot_total.saturating_mul(SLOT_BYTES))?;
    if reader.position != bytes.len() {
        return Err(RowsDecodeError::Trailing(bytes.len() - reader.position));
    }
    for shape in shapes.chunks_exact(2) {
        let (row_words, rest) = words.split_at(shape[0] as usize * 4);
        words = rest;
        let (row_slots, rest) = slots.split_at(shape[1] as usize * SLOT_BYTES);
        slots = rest;
        let slots = row_slots
            .chunks_exact(SLOT_BYTES)
            .map(|slot| {
                let field = match slot[4] {
                    0 => SlotField::SendAddress,
                    1 => SlotField::PicValue,
                    2 => SlotField::InlinePic,
                    3 => SlotField::PairedSendAddress,
                    other => return Err(RowsDecodeError::UnknownSlotField(other)),
                };
                let word = |at: usize| {
                    u32::from_le_bytes([slot[at], slot[at + 1], slot[at + 2], slot[at + 3]])
                };
                Ok(RelocationSlot {
                    word: word(0),
                    field,
                    address: SymbolicAddress {
                        allocation: word(5),
                        offset: word(9),
                    },
                })
            })
            .collect::<Result<Vec<_>, RowsDecodeError>>()?;
        rows.push(Row {
            words: words_of(row_words),
            slots,
        });
    }
    Ok(PhaseRows { rows })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> PhaseRows {
        PhaseRows {
            rows: vec![
                Row {
                    words: vec![1, 2, 0xdead_beef],
                    slots: vec![RelocationSlot {
                        word: 2,
                        field: SlotField::PicValue,
                        address: SymbolicAddress {
                            allocation: 7,
                            offset: 64,
                        },
                    }],
                },
                Row::default(),
                Row {
                    words: vec![9],
                    slots: vec![RelocationSlot {
                        word: 0,
                        field: SlotField::InlinePic,
                        address: SymbolicAddress {
                            allocation: 1,
                            offset: 0,
                        },
                    }],
                },
            ],
        }
    }

    #[test]
    fn round_trips() {
        let rows = sample();
        assert_eq!(decode_rows(&encode_rows(&rows)), Ok(rows));
    }

    #[test]
    fn rejects_truncation_trailing_bytes_and_bad_fields() {
        let bytes = encode_rows(&sample());
        for cut in 0..bytes.len() {
            assert!(decode_rows(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode_rows(&longer).is_err());
        let mut bad_field = bytes.clone();
        let field_at = bytes.len() - 2 * SLOT_BYTES + 4;
        bad_field[field_at] = 9;
        assert!(decode_rows(&bad_field).is_err());
    }
}
