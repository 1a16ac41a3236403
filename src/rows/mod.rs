//! IPU21 exchange rows: each tile's instruction words for one phase.
//!
//! `encode` turns a validated (problem, schedule) into rows of real
//! `crate::target::encoding::Instruction` words whose addresses sit in
//! relocation slots (a row is sized before placement and finalized after it,
//! without rescheduling); `serial` is their compact byte form for the
//! persistent cache; `decode` turns words back into timed events under
//! the same execution model; `check` proves the decoded events equal the
//! schedule; `table` shares rows across phases; `placement` is a simple
//! consecutive placement for checks and replay. This module must not
//! schedule or place for real.
//!
//! # Execution model
//!
//! A row runs from event 0. Each instruction starts at the current event `E`
//! and occupies `N` events (then `E += N`). A control merged into a send
//! (`sendpic`, `sendpicp`) takes effect at `E`, the send's first event; a
//! `delaypic`/`delayxpic` takes effect at its *terminal* event `E + N - 1`,
//! the last event it advances (IPU21.md, "Exchange rules confirmed on
//! hardware"):
//!
//! | instruction | `N` | effect |
//! |---|---|---|
//! | `delay(e)` | `e` | none |
//! | `delaypic(e, s, v)` | `e` | at `E + e - 1`: `s` 0: PIC := word address `v`; `s` 1: the 64-bit receive format on (`v` = 1) or off |
//! | `delayxpic(e, s, v)` | `e` | at `E + e - 1`: XPIC := source `v` (physical tile, `0x640` neutral); `s` = 0 word / 1 paired format |
//! | `send(w, a, c)` | `w` | at `E`: a new send of `w` words from word address `a` (`w` 64-bit items from 8-byte unit `a` when `c & 4`) |
//! | `sendoff(w, d, c)` | `w` | at `E`: continues the outgoing stream `d` words after its end (`d = 0`: same send) |
//! | `sendpic(w, s, v)` | `w` | at `E`: continues the stream (delta 0, previous control); `s` 0/1: XPIC := `v` word/paired, 2: PIC := `v`, 3: format on (`v` = 1) or off |
//! | `sendpicp(w, s, a, c); x, p` | `w` | at `E`: XPIC := `x` (format `s`), PIC := `p`; with `c != 0` a new send from `a`; must start at an even word |
//!
//! The encoder therefore puts a control that falls between sends at the end
//! of its `delaypic`/`delayxpic`, which absorbs the idle events before it
//! (up to 128 or 4,096). A paired receive is the sequence of IPU21.md's
//! paired receive protocol: on the selecting member a select of
//! `sender XOR (receiver AND 2)` and its return to neutral, on both members
//! a format-on, a PIC write two events later and a format-off (the
//! encoder never emits the XPIC paired-format selector).
//!
//! A row lasts until its tile's end event (`Schedule::tile_end`); the last
//! event of the row is the end of its last instruction. The encoder emits
//! `delay`, `delaypic`, `delayxpic`, `send`, `sendoff` and `sendpic`;
//! `sendpicp` is decoded but not emitted, because the schedule never puts two
//! controls on one event and never puts a control on a send's first event
//! (IPU21.md forbids the first two), which is what `sendpicp` is for.

pub mod check;
pub mod consecutive;
pub mod decode;
pub mod elements;
pub mod encode;
pub mod error;
pub mod fabric;
pub mod serial;
pub mod table;

#[cfg(test)]
mod hardware_rules;
#[cfg(test)]
mod tests;

pub use check::check_phase;
pub use consecutive::ConsecutivePlacement;
pub use decode::{RowEvent, decode_row};
pub use encode::encode_phase;
pub use error::RowError;
pub use table::{RowTable, SharingPatch};

use crate::schedule::SymbolicAddress;
use crate::target::encoding::layout::{Field, INLINE_PIC, SEND_ADDRESS, SEND_PIC_VALUE};

/// Bytes per word address unit.
pub const ADDRESS_UNIT_BYTES: u32 = 4;

/// Bytes per address unit of a paired (64-bit) send (IPU21.md, "Exchange
/// rules confirmed on hardware": addresses in paired sends are in 8-byte
/// units).
pub const PAIRED_ADDRESS_UNIT_BYTES: u32 = 8;

/// The instruction field a relocation slot fills.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum SlotField {
    /// The word address of `send`/`sendpicp`.
    SendAddress,
    /// The 8-byte-unit address of a paired (64-bit) `send`/`sendpicp`.
    PairedSendAddress,
    /// The 18-bit value of `sendpic` (PIC forms) or `delaypic`.
    PicValue,
    /// The PIC half of `sendpicp`'s inline word.
    InlinePic,
}

impl SlotField {
    pub fn field(self) -> Field {
        match self {
            SlotField::SendAddress | SlotField::PairedSendAddress => SEND_ADDRESS,
            SlotField::PicValue => SEND_PIC_VALUE,
            SlotField::InlinePic => INLINE_PIC,
        }
    }

    /// Bytes per unit of the address the field holds.
    pub fn unit_bytes(self) -> u32 {
        match self {
            SlotField::PairedSendAddress => PAIRED_ADDRESS_UNIT_BYTES,
            _ => ADDRESS_UNIT_BYTES,
        }
    }
}

/// A word of a row whose `field` receives the word address of `address`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct RelocationSlot {
    pub word: u32,
    pub field: SlotField,
    pub address: SymbolicAddress,
}

/// One tile's row: words with zeroed address fields, plus their slots.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct Row {
    pub words: Vec<u32>,
    pub slots: Vec<RelocationSlot>,
}

impl Row {
    pub fn bytes(&self) -> u64 {
        self.words.len() as u64 * 4
    }

    /// Fills every slot with `resolve(local allocation, byte offset)` (a byte
    /// address) in its field's units (words, or 8 bytes for a paired send),
    /// range-checked against its field.
    pub fn finalize(&self, resolve: impl Fn(u32, u32) -> u32) -> Result<Vec<u32>, RowError> {
        let mut words = self.words.clone();
        for slot in &self.slots {
            let byte_address = resolve(slot.address.allocation, slot.address.offset);
            let field = slot.field.field();
            let unit = slot.field.unit_bytes();
            let value = byte_address / unit;
            if !byte_address.is_multiple_of(unit) || value > field.maximum() {
                return Err(RowError::Unrepresentable {
                    word: slot.word as usize,
                    address: byte_address,
                });
            }
            let word = words
                .get_mut(slot.word as usize)
                .ok_or(RowError::SlotOutOfRange {
                    word: slot.word as usize,
                })?;
            *word = (*word & !field.mask) | field.place(value);
        }
        Ok(words)
    }
}

/// Every tile's row for one phase (empty rows for idle tiles). Slots name
/// the problem's local allocations; the phase's origin maps them to global
/// ones (`RowTable::build` takes both).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default, serde::Serialize, serde::Deserialize)]
pub struct PhaseRows {
    pub rows: Vec<Row>,
}

impl PhaseRows {
    /// Finalizes every tile's row with one resolver.
    pub fn finalize(&self, resolve: impl Fn(u32, u32) -> u32) -> Result<Vec<Vec<u32>>, RowError> {
        self.rows.iter().map(|row| row.finalize(&resolve)).collect()
    }

    pub fn max_bytes(&self) -> u64 {
        self.rows.iter().map(Row::bytes).max().unwrap_or(0)
    }

    /// `Err` unless the rows fit the shapes their users index by for
    /// `problem` (a cached entry's check): one row per tile, every slot on a
    /// word of its row, naming an allocation of the problem at an offset
    /// inside it.
    pub fn fits(
        &self,
        problem: &crate::schedule::ExchangeProblem,
    ) -> Result<(), crate::cache::Refusal> {
        if self.rows.len() != problem.tiles as usize {
            return Err(crate::cache::Refusal::Shape(format!(
                "{} rows for a problem of {} tiles",
                self.rows.len(),
                problem.tiles
            )));
        }
        for (tile, row) in self.rows.iter().enumerate() {
            for slot in &row.slots {
                let allocation = problem.allocations.get(slot.address.allocation as usize);
                let span = allocation.map(|allocation| {
                    u64::from(allocation.bytes) * u64::from(allocation.iterations.max(1))
                });
                if slot.word as usize >= row.words.len()
                    || span.is_none_or(|span| u64::from(slot.address.offset) > span)
                {
                    return Err(crate::cache::Refusal::Shape(format!(
                        "tile {tile}: a relocation slot (word {}, allocation {}, offset {}) \
                         outside its row or the problem's allocations",
                        slot.word, slot.address.allocation, slot.address.offset
                    )));
                }
            }
        }
        Ok(())
    }

    pub fn total_bytes(&self) -> u64 {
        self.rows.iter().map(Row::bytes).sum()
    }
}
