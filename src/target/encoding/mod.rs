//! Exchange instruction encodings (IPU21.md, "Exchange instructions (rows)"):
//! the typed [`Instruction`] forms a tile's row is made of, their exact bit
//! layouts, an encoder that range-checks every field against its bit width and
//! documented limit, and an independent decoder. This module owns the word
//! format only; it must not decide which instructions a row contains, and it
//! must never truncate a field silently: an unrepresentable field is an error.
//!
//! Form discrimination (see `layout`): each form has fixed opcode bits that no
//! field touches, and the fixed bits of every two forms disagree somewhere both
//! fix. `delay` fixes `0xfff80000`; `delaypic`/`delayxpic` fix `0xfc000000` and
//! differ in bit 26; `send` fixes `0xf8000000`; `sendoff` and `sendpic` share
//! `0x70000000` in the top five bits and differ only in bit 20 (`0x00100000`),
//! which `sendpic` sets and `sendoff` never uses (its high word-count bits are
//! `0x000fc000`, bits 14-19); `sendpicp` fixes the top nibble `0xf`.

mod decode;
mod encode;
mod error;
pub mod layout;

#[cfg(test)]
mod tests;

pub use decode::{decode, decode_sequence};
pub use error::{DecodeError, EncodeError};

/// One exchange instruction of a row, with fields as the assembler writes them
/// (counts are real counts, not `count - 1`; addresses are word addresses).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Instruction {
    /// Advance the event stream by `events` (1..=524,288).
    Delay { events: u32 },
    /// Advance by `events` (1..=128) while applying a PIC change: `selector` 0..=1, `value` 18 bits.
    DelayPic {
        events: u32,
        selector: u8,
        value: u32,
    },
    /// Advance by `events` (1..=4,096) while applying an XPIC change: `selector` 0..=1, `value` 13 bits.
    DelayXpic {
        events: u32,
        selector: u8,
        value: u32,
    },
    /// Send `words` (1..=64) from the absolute word `address` (18 bits) with send `control` (0..=7).
    Send {
        words: u32,
        address: u32,
        control: u8,
    },
    /// Continue the outgoing stream for `words` (1..=4,096) after skipping `delta` words (11 bits).
    SendOff { words: u32, delta: u32, control: u8 },
    /// Continue the outgoing stream for `words` (1..=64) while applying one incoming
    /// control: `selector` 0-1 are XPIC forms, 2-3 PIC forms; `value` 18 bits.
    SendPic {
        words: u32,
        selector: u8,
        value: u32,
    },
    /// Restart the outgoing stream at word `address` for `words` (1..=64) and set both
    /// incoming controls: `xpic` (14 bits) and `pic` (18 bits). Two words, 8-byte aligned.
    SendPicP {
        words: u32,
        pair_selector: u8,
        address: u32,
        control: u8,
        xpic: u32,
        pic: u32,
    },
}

impl Instruction {
    /// Assembler mnemonic of this form (IPU21.md, "Exchange instructions (rows)").
    pub fn mnemonic(&self) -> &'static str {
        match self {
            Instruction::Delay { .. } => layout::DELAY.mnemonic,
            Instruction::DelayPic { .. } => layout::DELAY_PIC.mnemonic,
            Instruction::DelayXpic { .. } => layout::DELAY_XPIC.mnemonic,
            Instruction::Send { .. } => layout::SEND.mnemonic,
            Instruction::SendOff { .. } => layout::SEND_OFFSET.mnemonic,
            Instruction::SendPic { .. } => layout::SEND_PIC.mnemonic,
            Instruction::SendPicP { .. } => layout::SEND_PIC_PAIR.mnemonic,
        }
    }

    /// Number of 32-bit words the encoding occupies (IPU21.md: `sendpicp` is two words).
    pub fn word_count(&self) -> usize {
        match self {
            Instruction::SendPicP { .. } => 2,
            _ => 1,
        }
    }
}

/// The one or two 32-bit words of an encoded instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EncodedWords {
    words: [u32; 2],
    second_present: bool,
}

impl EncodedWords {
    /// A one-word encoding.
    pub fn one(word: u32) -> EncodedWords {
        EncodedWords {
            words: [word, 0],
            second_present: false,
        }
    }

    /// A two-word encoding.
    pub fn two(first: u32, second: u32) -> EncodedWords {
        EncodedWords {
            words: [first, second],
            second_present: true,
        }
    }

    /// The encoded words in order.
    pub fn as_slice(&self) -> &[u32] {
        if self.second_present {
            &self.words
        } else {
            &self.words[..1]
        }
    }

    /// Number of words, 1 or 2.
    pub fn len(&self) -> usize {
        if self.second_present { 2 } else { 1 }
    }

    /// Always false: an encoding has at least one word.
    pub fn is_empty(&self) -> bool {
        false
    }
}
