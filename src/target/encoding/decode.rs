//! The decoder: identifies a form from its fixed opcode bits (see the module
//! header of `encoding` for why the forms never overlap) and reads its fields
//! back. It is written independently of the encoder so it can check emitted
//! rows; it must not accept a word that matches no form or a truncated form.

use super::layout::{
    DELAY, DELAY_EVENTS, DELAY_PIC, DELAY_PIC_EVENTS, DELAY_PIC_SELECTOR, DELAY_PIC_VALUE,
    DELAY_XPIC, DELAY_XPIC_EVENTS, DELAY_XPIC_SELECTOR, DELAY_XPIC_VALUE, INLINE_PIC, INLINE_XPIC,
    SEND, SEND_ADDRESS, SEND_CONTROL, SEND_OFFSET, SEND_OFFSET_DELTA, SEND_OFFSET_LOW_WORD_BITS,
    SEND_OFFSET_WORDS_HIGH, SEND_PIC, SEND_PIC_PAIR, SEND_PIC_PAIR_SELECTOR, SEND_PIC_SELECTOR,
    SEND_PIC_VALUE, SEND_WORDS,
};
use super::{DecodeError, Instruction};

/// Narrows a field that is at most 3 bits wide to `u8` (all selectors and controls are).
fn small(value: u32) -> u8 {
    u8::try_from(value).unwrap_or(u8::MAX)
}

/// Decodes the instruction starting at `words[0]`; returns it and the words consumed.
pub fn decode(words: &[u32]) -> Result<(Instruction, usize), DecodeError> {
    decode_at(words, 0)
}

/// Decodes a whole row into its instructions.
pub fn decode_sequence(words: &[u32]) -> Result<Vec<Instruction>, DecodeError> {
    let mut instructions = Vec::new();
    let mut position = 0;
    while position < words.len() {
        let (instruction, consumed) = decode_at(words.get(position..).unwrap_or(&[]), position)?;
        instructions.push(instruction);
        position += consumed;
    }
    Ok(instructions)
}

/// Decodes the instruction at the start of `words`, reporting errors at `position`.
fn decode_at(words: &[u32], position: usize) -> Result<(Instruction, usize), DecodeError> {
    let Some(&word) = words.first() else {
        return Err(DecodeError::Empty { position });
    };
    let instruction = if DELAY.matches(word) {
        Instruction::Delay {
            events: DELAY_EVENTS.extract(word) + 1,
        }
    } else if DELAY_PIC.matches(word) {
        Instruction::DelayPic {
            events: DELAY_PIC_EVENTS.extract(word) + 1,
            selector: small(DELAY_PIC_SELECTOR.extract(word)),
            value: DELAY_PIC_VALUE.extract(word),
        }
    } else if DELAY_XPIC.matches(word) {
        Instruction::DelayXpic {
            events: DELAY_XPIC_EVENTS.extract(word) + 1,
            selector: small(DELAY_XPIC_SELECTOR.extract(word)),
            value: DELAY_XPIC_VALUE.extract(word),
        }
    } else if SEND.matches(word) {
        Instruction::Send {
            words: SEND_WORDS.extract(word) + 1,
            address: SEND_ADDRESS.extract(word),
            control: small(SEND_CONTROL.extract(word)),
        }
    } else if SEND_OFFSET.matches(word) {
        let high = SEND_OFFSET_WORDS_HIGH.extract(word) << SEND_OFFSET_LOW_WORD_BITS;
        Instruction::SendOff {
            words: (high | SEND_WORDS.extract(word)) + 1,
            delta: SEND_OFFSET_DELTA.extract(word),
            control: small(SEND_CONTROL.extract(word)),
        }
    } else if SEND_PIC.matches(word) {
        Instruction::SendPic {
            words: SEND_WORDS.extract(word) + 1,
            selector: small(SEND_PIC_SELECTOR.extract(word)),
            value: SEND_PIC_VALUE.extract(word),
        }
    } else if SEND_PIC_PAIR.matches(word) {
        let Some(&inline) = words.get(1) else {
            return Err(DecodeError::Truncated {
                position,
                instruction: SEND_PIC_PAIR.mnemonic,
                needed: 2,
                available: words.len(),
            });
        };
        Instruction::SendPicP {
            words: SEND_WORDS.extract(word) + 1,
            pair_selector: small(SEND_PIC_PAIR_SELECTOR.extract(word)),
            address: SEND_ADDRESS.extract(word),
            control: small(SEND_CONTROL.extract(word)),
            xpic: INLINE_XPIC.extract(inline),
            pic: INLINE_PIC.extract(inline),
        }
    } else {
        return Err(DecodeError::UnknownOpcode { position, word });
    };
    let consumed = instruction.word_count();
    Ok((instruction, consumed))
}
