//! The encoder: turns a typed [`Instruction`] into its one or two words. It
//! owns range checks (every field against both its bit width and the limit
//! IPU21.md documents) and must never truncate: an out-of-range field is an
//! [`EncodeError`] naming the instruction, the field and the value.

use super::layout::{
    DELAY, DELAY_EVENTS, DELAY_PIC, DELAY_PIC_EVENTS, DELAY_PIC_SELECTOR, DELAY_PIC_VALUE,
    DELAY_XPIC, DELAY_XPIC_EVENTS, DELAY_XPIC_SELECTOR, DELAY_XPIC_VALUE, Field, INLINE_PIC,
    INLINE_XPIC, SEND, SEND_ADDRESS, SEND_CONTROL, SEND_OFFSET, SEND_OFFSET_DELTA,
    SEND_OFFSET_LOW_WORD_BITS, SEND_OFFSET_WORDS_FIELD_MAXIMUM, SEND_OFFSET_WORDS_HIGH, SEND_PIC,
    SEND_PIC_PAIR, SEND_PIC_PAIR_SELECTOR, SEND_PIC_SELECTOR, SEND_PIC_VALUE, SEND_WORDS,
};
use super::{EncodeError, EncodedWords, Instruction};
use crate::target::timing::{
    DELAY_MAX_EVENTS, DELAY_PIC_MAX_EVENTS, DELAY_XPIC_MAX_EVENTS, SEND_MAX_WORDS,
    SEND_OFFSET_MAX_WORDS, SEND_PIC_MAX_WORDS, SEND_PIC_PAIR_MAX_WORDS,
};

/// Checks `value` lies in `minimum..=maximum`.
fn check(
    instruction: &'static str,
    field: &'static str,
    value: u32,
    minimum: u32,
    maximum: u32,
) -> Result<u32, EncodeError> {
    if (minimum..=maximum).contains(&value) {
        Ok(value)
    } else {
        Err(EncodeError::FieldOutOfRange {
            instruction,
            field,
            value,
            minimum,
            maximum,
        })
    }
}

/// Checks a count held as `count - 1`: `1..=min(limit, field capacity)`; returns `count - 1`.
fn count(
    instruction: &'static str,
    name: &'static str,
    value: u32,
    limit: u32,
    field_maximum: u32,
) -> Result<u32, EncodeError> {
    let maximum = limit.min(field_maximum.saturating_add(1));
    check(instruction, name, value, 1, maximum).map(|value| value - 1)
}

/// Checks a plain value against the field's width and places it.
fn plain(
    instruction: &'static str,
    name: &'static str,
    value: u32,
    field: Field,
) -> Result<u32, EncodeError> {
    check(instruction, name, value, 0, field.maximum()).map(|value| field.place(value))
}

impl Instruction {
    /// Encodes this instruction (IPU21.md, "Exchange instructions (rows)").
    pub fn encode(&self) -> Result<EncodedWords, EncodeError> {
        let name = self.mnemonic();
        match *self {
            Instruction::Delay { events } => {
                let events = count(
                    name,
                    "events",
                    events,
                    DELAY_MAX_EVENTS,
                    DELAY_EVENTS.maximum(),
                )?;
                Ok(EncodedWords::one(DELAY.opcode | DELAY_EVENTS.place(events)))
            }
            Instruction::DelayPic {
                events,
                selector,
                value,
            } => {
                let events = count(
                    name,
                    "events",
                    events,
                    DELAY_PIC_MAX_EVENTS,
                    DELAY_PIC_EVENTS.maximum(),
                )?;
                Ok(EncodedWords::one(
                    DELAY_PIC.opcode
                        | DELAY_PIC_EVENTS.place(events)
                        | plain(name, "selector", selector.into(), DELAY_PIC_SELECTOR)?
                        | plain(name, "value", value, DELAY_PIC_VALUE)?,
                ))
            }
            Instruction::DelayXpic {
                events,
                selector,
                value,
            } => {
                let events = count(
                    name,
                    "events",
                    events,
                    DELAY_XPIC_MAX_EVENTS,
                    DELAY_XPIC_EVENTS.maximum(),
                )?;
                Ok(EncodedWords::one(
                    DELAY_XPIC.opcode
                        | DELAY_XPIC_EVENTS.place(events)
                        | plain(name, "selector", selector.into(), DELAY_XPIC_SELECTOR)?
                        | plain(name, "value", value, DELAY_XPIC_VALUE)?,
                ))
            }
            Instruction::Send {
                words,
                address,
                control,
            } => {
                let words = count(name, "words", words, SEND_MAX_WORDS, SEND_WORDS.maximum())?;
                Ok(EncodedWords::one(
                    SEND.opcode
                        | SEND_WORDS.place(words)
                        | plain(name, "address", address, SEND_ADDRESS)?
                        | plain(name, "control", control.into(), SEND_CONTROL)?,
                ))
            }
            Instruction::SendOff {
                words,
                delta,
                control,
            } => {
                let words = count(
                    name,
                    "words",
                    words,
                    SEND_OFFSET_MAX_WORDS,
                    SEND_OFFSET_WORDS_FIELD_MAXIMUM,
                )?;
                Ok(EncodedWords::one(
                    SEND_OFFSET.opcode
                        | SEND_WORDS.place(words)
                        | SEND_OFFSET_WORDS_HIGH.place(words >> SEND_OFFSET_LOW_WORD_BITS)
                        | plain(name, "delta", delta, SEND_OFFSET_DELTA)?
                        | plain(name, "control", control.into(), SEND_CONTROL)?,
                ))
            }
            Instruction::SendPic {
                words,
                selector,
                value,
            } => {
                let words = count(
                    name,
                    "words",
                    words,
                    SEND_PIC_MAX_WORDS,
                    SEND_WORDS.maximum(),
                )?;
                Ok(EncodedWords::one(
                    SEND_PIC.opcode
                        | SEND_WORDS.place(words)
                        | plain(name, "selector", selector.into(), SEND_PIC_SELECTOR)?
                        | plain(name, "value", value, SEND_PIC_VALUE)?,
                ))
            }
            Instruction::SendPicP {
                words,
                pair_selector,
                address,
                control,
                xpic,
                pic,
            } => {
                let words = count(
                    name,
                    "words",
                    words,
                    SEND_PIC_PAIR_MAX_WORDS,
                    SEND_WORDS.maximum(),
                )?;
                let first = SEND_PIC_PAIR.opcode
                    | plain(
                        name,
                        "pair_selector",
                        pair_selector.into(),
                        SEND_PIC_PAIR_SELECTOR,
                    )?
                    | SEND_WORDS.place(words)
                    | plain(name, "address", address, SEND_ADDRESS)?
                    | plain(name, "control", control.into(), SEND_CONTROL)?;
                let inline =
                    plain(name, "xpic", xpic, INLINE_XPIC)? | plain(name, "pic", pic, INLINE_PIC)?;
                Ok(EncodedWords::two(first, inline))
            }
        }
    }
}
