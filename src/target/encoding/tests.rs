//! Tests of the exchange encodings: the documented example, hand-computed
//! words, layout sanity, seeded random round trips and range errors.

use super::layout::{FORM_FIELDS, FORMS, SEND_OFFSET_WORDS_FIELD_MAXIMUM};
use super::*;
use crate::target::timing::{
    DELAY_MAX_EVENTS, DELAY_PIC_MAX_EVENTS, DELAY_XPIC_MAX_EVENTS, NEUTRAL_INCOMING_SOURCE,
    SEND_MAX_WORDS, SEND_OFFSET_MAX_WORDS, SEND_PIC_MAX_WORDS, SEND_PIC_PAIR_MAX_WORDS,
};

/// Deterministic xorshift64 generator for seeded tests.
struct Xorshift(u64);

impl Xorshift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform-ish value in `minimum..=maximum`.
    fn between(&mut self, minimum: u32, maximum: u32) -> u32 {
        let span = u64::from(maximum - minimum) + 1;
        minimum + (self.next() % span) as u32
    }

    fn small(&mut self, maximum: u8) -> u8 {
        self.between(0, maximum.into()) as u8
    }
}

fn words(instruction: Instruction) -> Vec<u32> {
    instruction.encode().unwrap().as_slice().to_vec()
}

#[test]
fn documented_sendpicp_example() {
    // Send 43 words from word address 0x14021, direction 1, setting both controls:
    // the inline word 0x19015000 is XPIC 0x640 (the neutral source) and PIC 0x15000.
    let instruction = Instruction::SendPicP {
        words: 43,
        pair_selector: 0,
        address: 0x14021,
        control: 1,
        xpic: NEUTRAL_INCOMING_SOURCE,
        pic: 0x15000,
    };
    assert_eq!(words(instruction), vec![0xf54a_0109, 0x1901_5000]);
    assert_eq!(decode(&[0xf54a_0109, 0x1901_5000]), Ok((instruction, 2)));
}

#[test]
fn hand_computed_words() {
    let cases = [
        (Instruction::Delay { events: 1 }, 0x40a0_0000),
        (Instruction::Delay { events: 100 }, 0x40a0_0063),
        (Instruction::Delay { events: 524_288 }, 0x40a7_ffff),
        (
            Instruction::DelayPic {
                events: 3,
                selector: 1,
                value: 0x15000,
            },
            0x6015_5000,
        ),
        (
            Instruction::DelayPic {
                events: 128,
                selector: 0,
                value: 0x3ffff,
            },
            0x63fb_ffff,
        ),
        (
            Instruction::DelayXpic {
                events: 5,
                selector: 1,
                value: 0x640,
            },
            0x6401_2640,
        ),
        (
            Instruction::DelayXpic {
                events: 4096,
                selector: 0,
                value: 0x1fff,
            },
            0x67ff_dfff,
        ),
        (
            Instruction::Send {
                words: 43,
                address: 0x14021,
                control: 1,
            },
            0x7d4a_0109,
        ),
        (
            Instruction::Send {
                words: 64,
                address: 0x3ffff,
                control: 7,
            },
            0x7fff_ffff,
        ),
        (
            Instruction::SendOff {
                words: 1,
                delta: 0,
                control: 0,
            },
            0x7000_0000,
        ),
        // w-1 = 99: low six bits 35 at bit 21, high bits 1 at bit 14.
        (
            Instruction::SendOff {
                words: 100,
                delta: 5,
                control: 2,
            },
            0x7460_402a,
        ),
        (
            Instruction::SendOff {
                words: 4096,
                delta: 0x7ff,
                control: 7,
            },
            0x77ef_ffff,
        ),
        (
            Instruction::SendPic {
                words: 2,
                selector: 3,
                value: 0x12345,
            },
            0x703d_2345,
        ),
    ];
    for (instruction, word) in cases {
        assert_eq!(words(instruction), vec![word], "{instruction:?}");
        assert_eq!(decode(&[word]), Ok((instruction, 1)), "{word:#010x}");
    }
}

#[test]
fn layouts_partition_every_word_and_forms_never_overlap() {
    for (form, fields) in FORMS.iter().zip(FORM_FIELDS) {
        let mut covered = form.fixed_mask;
        for field in fields {
            assert_eq!(covered & field.mask, 0, "{} field overlaps", form.mnemonic);
            covered |= field.mask;
        }
        assert_eq!(
            covered,
            u32::MAX,
            "{} leaves bits unassigned",
            form.mnemonic
        );
        assert_eq!(form.opcode & !form.fixed_mask, 0, "{}", form.mnemonic);
    }
    for (index, first) in FORMS.iter().enumerate() {
        for second in FORMS.iter().skip(index + 1) {
            let common = first.fixed_mask & second.fixed_mask;
            assert_ne!(
                first.opcode & common,
                second.opcode & common,
                "{} and {} are ambiguous",
                first.mnemonic,
                second.mnemonic
            );
        }
    }
}

#[test]
fn documented_limits_fit_the_field_masks() {
    assert_eq!(SEND_OFFSET_WORDS_FIELD_MAXIMUM + 1, SEND_OFFSET_MAX_WORDS);
    assert_eq!(layout::DELAY_EVENTS.maximum() + 1, DELAY_MAX_EVENTS);
    assert_eq!(layout::DELAY_PIC_EVENTS.maximum() + 1, DELAY_PIC_MAX_EVENTS);
    assert_eq!(
        layout::DELAY_XPIC_EVENTS.maximum() + 1,
        DELAY_XPIC_MAX_EVENTS
    );
    assert_eq!(layout::SEND_WORDS.maximum() + 1, SEND_MAX_WORDS);
}

fn random_instruction(generator: &mut Xorshift, form: usize) -> Instruction {
    match form {
        0 => Instruction::Delay {
            events: generator.between(1, DELAY_MAX_EVENTS),
        },
        1 => Instruction::DelayPic {
            events: generator.between(1, DELAY_PIC_MAX_EVENTS),
            selector: generator.small(1),
            value: generator.between(0, 0x3ffff),
        },
        2 => Instruction::DelayXpic {
            events: generator.between(1, DELAY_XPIC_MAX_EVENTS),
            selector: generator.small(1),
            value: generator.between(0, 0x1fff),
        },
        3 => Instruction::Send {
            words: generator.between(1, SEND_MAX_WORDS),
            address: generator.between(0, 0x3ffff),
            control: generator.small(7),
        },
        4 => Instruction::SendOff {
            words: generator.between(1, SEND_OFFSET_MAX_WORDS),
            delta: generator.between(0, 0x7ff),
            control: generator.small(7),
        },
        5 => Instruction::SendPic {
            words: generator.between(1, SEND_PIC_MAX_WORDS),
            selector: generator.small(3),
            value: generator.between(0, 0x3ffff),
        },
        _ => Instruction::SendPicP {
            words: generator.between(1, SEND_PIC_PAIR_MAX_WORDS),
            pair_selector: generator.small(1),
            address: generator.between(0, 0x3ffff),
            control: generator.small(7),
            xpic: generator.between(0, 0x3fff),
            pic: generator.between(0, 0x3ffff),
        },
    }
}

#[test]
fn random_instructions_round_trip() {
    let mut generator = Xorshift(0x5eed_1234_abcd_0001);
    for form in 0..7 {
        let mut row = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..10_000 {
            let instruction = random_instruction(&mut generator, form);
            let encoded = instruction.encode().unwrap();
            assert_eq!(encoded.len(), instruction.word_count());
            assert_eq!(
                decode(encoded.as_slice()),
                Ok((instruction, encoded.len())),
                "{instruction:?}"
            );
            row.extend_from_slice(encoded.as_slice());
            expected.push(instruction);
        }
        assert_eq!(decode_sequence(&row), Ok(expected));
    }
}

#[test]
fn every_decodable_word_re_encodes_to_itself() {
    let mut generator = Xorshift(0x0dec_0de5_0000_0077);
    let mut decoded = 0;
    for _ in 0..100_000 {
        let first = generator.next() as u32;
        let second = generator.next() as u32;
        if let Ok((instruction, consumed)) = decode(&[first, second]) {
            decoded += 1;
            let expected = [first, second];
            assert_eq!(words(instruction), expected[..consumed].to_vec());
        }
    }
    assert!(decoded > 10_000, "only {decoded} random words decoded");
}

#[test]
fn decode_errors() {
    assert_eq!(decode(&[]), Err(DecodeError::Empty { position: 0 }));
    assert_eq!(
        decode(&[0x0000_0000]),
        Err(DecodeError::UnknownOpcode {
            position: 0,
            word: 0
        })
    );
    assert_eq!(
        decode(&[0xf54a_0109]),
        Err(DecodeError::Truncated {
            position: 0,
            instruction: "sendpicp",
            needed: 2,
            available: 1
        })
    );
    assert!(matches!(
        decode_sequence(&[0x40a0_0000, 0xf54a_0109]),
        Err(DecodeError::Truncated { position: 1, .. })
    ));
}

fn expect_out_of_range(instruction: Instruction, field: &str, value: u32) {
    match instruction.encode() {
        Err(EncodeError::FieldOutOfRange {
            instruction: name,
            field: got,
            value: got_value,
            ..
        }) => {
            assert_eq!(name, instruction.mnemonic());
            assert_eq!(got, field, "{instruction:?}");
            assert_eq!(got_value, value, "{instruction:?}");
        }
        other => panic!("{instruction:?} gave {other:?}, expected `{field}` out of range"),
    }
}

#[test]
fn out_of_range_fields_are_errors() {
    use Instruction::*;
    expect_out_of_range(Delay { events: 0 }, "events", 0);
    expect_out_of_range(Delay { events: 524_289 }, "events", 524_289);
    let pic = |events, selector, value| DelayPic {
        events,
        selector,
        value,
    };
    expect_out_of_range(pic(0, 0, 0), "events", 0);
    expect_out_of_range(pic(129, 0, 0), "events", 129);
    expect_out_of_range(pic(1, 2, 0), "selector", 2);
    expect_out_of_range(pic(1, 0, 0x40000), "value", 0x40000);
    let xpic = |events, selector, value| DelayXpic {
        events,
        selector,
        value,
    };
    expect_out_of_range(xpic(0, 0, 0), "events", 0);
    expect_out_of_range(xpic(4097, 0, 0), "events", 4097);
    expect_out_of_range(xpic(1, 2, 0), "selector", 2);
    expect_out_of_range(xpic(1, 0, 0x2000), "value", 0x2000);
    let send = |words, address, control| Send {
        words,
        address,
        control,
    };
    expect_out_of_range(send(0, 0, 0), "words", 0);
    expect_out_of_range(send(65, 0, 0), "words", 65);
    expect_out_of_range(send(1, 0x40000, 0), "address", 0x40000);
    expect_out_of_range(send(1, 0, 8), "control", 8);
    let offset = |words, delta, control| SendOff {
        words,
        delta,
        control,
    };
    expect_out_of_range(offset(0, 0, 0), "words", 0);
    expect_out_of_range(offset(4097, 0, 0), "words", 4097);
    expect_out_of_range(offset(1, 0x800, 0), "delta", 0x800);
    expect_out_of_range(offset(1, 0, 8), "control", 8);
    let send_pic = |words, selector, value| SendPic {
        words,
        selector,
        value,
    };
    expect_out_of_range(send_pic(0, 0, 0), "words", 0);
    expect_out_of_range(send_pic(65, 0, 0), "words", 65);
    expect_out_of_range(send_pic(1, 4, 0), "selector", 4);
    expect_out_of_range(send_pic(1, 0, 0x40000), "value", 0x40000);
    let pair = SendPicP {
        words: 1,
        pair_selector: 0,
        address: 0,
        control: 0,
        xpic: 0,
        pic: 0,
    };
    let with = |change: fn(&mut Instruction)| {
        let mut instruction = pair;
        change(&mut instruction);
        instruction
    };
    expect_out_of_range(
        with(|i| {
            if let SendPicP { words, .. } = i {
                *words = 0;
            }
        }),
        "words",
        0,
    );
    expect_out_of_range(
        with(|i| {
            if let SendPicP { words, .. } = i {
                *words = 65;
            }
        }),
        "words",
        65,
    );
    expect_out_of_range(
        with(|i| {
            if let SendPicP { pair_selector, .. } = i {
                *pair_selector = 2;
            }
        }),
        "pair_selector",
        2,
    );
    expect_out_of_range(
        with(|i| {
            if let SendPicP { address, .. } = i {
                *address = 0x40000;
            }
        }),
        "address",
        0x40000,
    );
    expect_out_of_range(
        with(|i| {
            if let SendPicP { control, .. } = i {
                *control = 8;
            }
        }),
        "control",
        8,
    );
    expect_out_of_range(
        with(|i| {
            if let SendPicP { xpic, .. } = i {
                *xpic = 0x4000;
            }
        }),
        "xpic",
        0x4000,
    );
    expect_out_of_range(
        with(|i| {
            if let SendPicP { pic, .. } = i {
                *pic = 0x40000;
            }
        }),
        "pic",
        0x40000,
    );
    let message = Send {
        words: 65,
        address: 0,
        control: 0,
    }
    .encode()
    .unwrap_err()
    .to_string();
    assert_eq!(message, "send: field `words` = 65 is out of range 1..=64");
}
