//! Bit layouts of the exchange instruction forms, transcribed from IPU21.md
//! ("Exchange instructions (rows)"): per form, the fixed opcode bits and each
//! field's shift and in-place mask. This file owns the numbers only; it must
//! not range-check or build instructions (the encoder and decoder do).

/// One instruction form: its mnemonic and the opcode bits it fixes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Form {
    /// Assembler mnemonic.
    pub mnemonic: &'static str,
    /// Value of the fixed bits.
    pub opcode: u32,
    /// Bits no field of this form touches (the complement of all field masks).
    pub fixed_mask: u32,
}

impl Form {
    /// Whether `word` carries this form's opcode.
    pub const fn matches(self, word: u32) -> bool {
        word & self.fixed_mask == self.opcode
    }
}

/// A field: a value shifted left by `shift` and kept to the in-place `mask`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Field {
    /// Left shift applied to the value.
    pub shift: u32,
    /// In-place mask of the field's bits.
    pub mask: u32,
}

impl Field {
    /// Largest value the field holds.
    pub const fn maximum(self) -> u32 {
        self.mask >> self.shift
    }

    /// The value placed into the field's bits (callers range-check first).
    pub const fn place(self, value: u32) -> u32 {
        (value << self.shift) & self.mask
    }

    /// The field's value in `word`.
    pub const fn extract(self, word: u32) -> u32 {
        (word & self.mask) >> self.shift
    }
}

const fn field(shift: u32, mask: u32) -> Field {
    Field { shift, mask }
}

/// `delay(e)`: `0x40a00000 | ((e-1) & 0x7ffff)` (IPU21.md).
pub const DELAY: Form = Form {
    mnemonic: "delay",
    opcode: 0x40a0_0000,
    fixed_mask: 0xfff8_0000,
};
/// `delay` events-1 (IPU21.md).
pub const DELAY_EVENTS: Field = field(0, 0x0007_ffff);

/// `delaypic(e, sel, v)`: `0x60000000 | ...` (IPU21.md).
pub const DELAY_PIC: Form = Form {
    mnemonic: "delaypic",
    opcode: 0x6000_0000,
    fixed_mask: 0xfc00_0000,
};
/// `delaypic` events-1 (IPU21.md).
pub const DELAY_PIC_EVENTS: Field = field(19, 0x03f8_0000);
/// `delaypic` selector (IPU21.md).
pub const DELAY_PIC_SELECTOR: Field = field(18, 0x0004_0000);
/// `delaypic` value (IPU21.md).
pub const DELAY_PIC_VALUE: Field = field(0, 0x0003_ffff);

/// `delayxpic(e, sel, v)`: `0x64000000 | ...` (IPU21.md).
pub const DELAY_XPIC: Form = Form {
    mnemonic: "delayxpic",
    opcode: 0x6400_0000,
    fixed_mask: 0xfc00_0000,
};
/// `delayxpic` events-1 (IPU21.md).
pub const DELAY_XPIC_EVENTS: Field = field(14, 0x03ff_c000);
/// `delayxpic` selector (IPU21.md).
pub const DELAY_XPIC_SELECTOR: Field = field(13, 0x0000_2000);
/// `delayxpic` value (IPU21.md).
pub const DELAY_XPIC_VALUE: Field = field(0, 0x0000_1fff);

/// `send(w, addr, sctl)`: `0x78000000 | ...` (IPU21.md).
pub const SEND: Form = Form {
    mnemonic: "send",
    opcode: 0x7800_0000,
    fixed_mask: 0xf800_0000,
};
/// Words-1 field shared by `send`, `sendoff` (low bits), `sendpic` and `sendpicp` (IPU21.md).
pub const SEND_WORDS: Field = field(21, 0x07e0_0000);
/// Word address field of `send` and `sendpicp` (IPU21.md: `(addr << 3) & 0x001ffff8`).
pub const SEND_ADDRESS: Field = field(3, 0x001f_fff8);
/// Send-control field (IPU21.md: `sctl`, three bits).
pub const SEND_CONTROL: Field = field(0, 0x0000_0007);

/// `sendoff(w, delta, sctl)`: `0x70000000 | ...`, bit 20 clear (IPU21.md).
pub const SEND_OFFSET: Form = Form {
    mnemonic: "sendoff",
    opcode: 0x7000_0000,
    fixed_mask: 0xf810_0000,
};
/// Bits of words-1 held by the low field at bit 21 (IPU21.md: `((w-1) >> 6)` goes high).
pub const SEND_OFFSET_LOW_WORD_BITS: u32 = 6;
/// `sendoff` high bits of words-1 (IPU21.md: `(((w-1) >> 6) << 14) & 0x000fc000`).
pub const SEND_OFFSET_WORDS_HIGH: Field = field(14, 0x000f_c000);
/// `sendoff` source delta (IPU21.md: `(delta << 3) & 0x00003ff8`).
pub const SEND_OFFSET_DELTA: Field = field(3, 0x0000_3ff8);
/// Largest words-1 the split `sendoff` fields hold: 12 bits (derived from the masks).
pub const SEND_OFFSET_WORDS_FIELD_MAXIMUM: u32 =
    (SEND_OFFSET_WORDS_HIGH.maximum() << SEND_OFFSET_LOW_WORD_BITS) | SEND_WORDS.maximum();

/// `sendpic(w, sel, v)`: `0x70100000 | ...` (IPU21.md).
pub const SEND_PIC: Form = Form {
    mnemonic: "sendpic",
    opcode: 0x7010_0000,
    fixed_mask: 0xf810_0000,
};
/// `sendpic` selector (IPU21.md: `(sel << 18) & 0x000c0000`).
pub const SEND_PIC_SELECTOR: Field = field(18, 0x000c_0000);
/// `sendpic` value (IPU21.md: `v & 0x3ffff`).
pub const SEND_PIC_VALUE: Field = field(0, 0x0003_ffff);

/// `sendpicp(w, psel, addr, sctl) ; inline`: `0xf0000000 | ...` (IPU21.md).
pub const SEND_PIC_PAIR: Form = Form {
    mnemonic: "sendpicp",
    opcode: 0xf000_0000,
    fixed_mask: 0xf000_0000,
};
/// `sendpicp` pair selector (IPU21.md: `(psel << 27) & 0x08000000`).
pub const SEND_PIC_PAIR_SELECTOR: Field = field(27, 0x0800_0000);
/// `sendpicp` inline word's XPIC (IPU21.md: `xpic_14_bits << 18`).
pub const INLINE_XPIC: Field = field(18, 0xfffc_0000);
/// `sendpicp` inline word's PIC (IPU21.md: `pic_18_bits`).
pub const INLINE_PIC: Field = field(0, 0x0003_ffff);

/// Every form, for the decoder and for layout tests.
pub const FORMS: [Form; 7] = [
    DELAY,
    DELAY_PIC,
    DELAY_XPIC,
    SEND,
    SEND_OFFSET,
    SEND_PIC,
    SEND_PIC_PAIR,
];

/// Field masks of each form of [`FORMS`], same order (for layout tests).
pub const FORM_FIELDS: [&[Field]; 7] = [
    &[DELAY_EVENTS],
    &[DELAY_PIC_EVENTS, DELAY_PIC_SELECTOR, DELAY_PIC_VALUE],
    &[DELAY_XPIC_EVENTS, DELAY_XPIC_SELECTOR, DELAY_XPIC_VALUE],
    &[SEND_WORDS, SEND_ADDRESS, SEND_CONTROL],
    &[
        SEND_WORDS,
        SEND_OFFSET_WORDS_HIGH,
        SEND_OFFSET_DELTA,
        SEND_CONTROL,
    ],
    &[SEND_WORDS, SEND_PIC_SELECTOR, SEND_PIC_VALUE],
    &[
        SEND_PIC_PAIR_SELECTOR,
        SEND_WORDS,
        SEND_ADDRESS,
        SEND_CONTROL,
    ],
];
