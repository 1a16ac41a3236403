//! The validator's own reading of IPU21.md's fabric timing ("Exchange fabric
//! timing", "Exchange rules confirmed on hardware"). Written from the
//! document, not from `crate::target::timing` or the scheduler's
//! `crate::schedule::timing`, so that a wrong formula in the scheduler shows
//! up as a refused schedule (a test compares the two over every C600 pair).
//! It owns only numbers about physical tile ids; it must not check anything.

/// Point-to-point rows select at `t + time_to_mux + 2`; multicasts at `+ 0`.
pub const POINT_TO_POINT_OFFSET: i64 = 2;
/// Events from the select to the first ordinary payload word, before the row term.
const ORDINARY_PAYLOAD_BASE: i64 = 52;
/// Events from the pair's select to its 64-bit format-on, before the row term.
const FORMAT_ON_BASE: i64 = 51;
/// Events from the format-on to the paired pointer and payload.
pub const FORMAT_TO_PAYLOAD: i64 = 2;
/// Extra events per physical row of the receiver.
const PER_ROW: i64 = 2;
/// Guard after the later of the source and payload windows.
pub const GUARD: i64 = 56;
/// Receive controls may not land on this many first events of an own send.
pub const SEND_START_EVENTS: i64 = 2;
/// A paired transfer carries at least this many 64-bit items.
pub const PAIRED_ITEMS_AT_LEAST: u32 = 64;
/// Paired transfers are 8-byte aligned.
pub const PAIRED_ALIGNMENT: u32 = 8;

/// The fields of a physical tile id the formulas read.
#[derive(Clone, Copy)]
struct Position {
    /// Bits 2..6: the raw column group (`(p >> 2) & 15`).
    raw: i32,
    /// The folded column (`raw`, or `raw ^ 15` past 7).
    column: i32,
    /// Distance of the column from the chip edge (`raw * 4`, folded).
    edge: i32,
    /// Physical row (`p >> 6`, at most 31 used).
    row: i32,
    /// Bit 0 and the low two bits of the id.
    bit0: i32,
    low2: i32,
    /// Bit 5 of the id (the half of the column group).
    half: u32,
}

fn position(physical: u32) -> Position {
    let raw = ((physical >> 2) & 15) as i32;
    let upper = raw >= 8;
    Position {
        raw,
        column: if upper { 15 - raw } else { raw },
        edge: if upper { (raw * 4) ^ 60 } else { raw * 4 },
        row: ((physical >> 6) & 31) as i32,
        bit0: (physical & 1) as i32,
        low2: (physical & 3) as i32,
        half: (physical >> 5) & 1,
    }
}

/// The signed route displacement `disp` of IPU21.md.
fn displacement(sender: u32, receiver: u32) -> i32 {
    let from = position(sender);
    let to = position(receiver);
    let sender_mux = from.column + ((from.raw >> 3) ^ from.bit0);
    let upper_half = to.raw >> 3;
    let lane_term = if to.low2 >= 2 {
        if upper_half == to.bit0 { 2 } else { 4 }
    } else if upper_half == to.low2 {
        1
    } else {
        5
    };
    6 * (to.column - sender_mux) + lane_term
}

/// The send-control direction bit for a point-to-point route (1 or 2).
pub fn direction_bit(sender: u32, receiver: u32) -> u8 {
    if displacement(sender, receiver) >= 1 {
        1
    } else {
        2
    }
}

/// `time_to_mux(s, d)` of IPU21.md, in events.
pub fn route_time(sender: u32, receiver: u32) -> i64 {
    let from = position(sender);
    let to = position(receiver);
    let sender_low = from.raw & 7;
    let local = (from.raw & 8) | (((sender >> 3) & 3) as i32);
    let crossing = local - to.raw + ((sender_low >> 1) ^ 3);
    let turn = if from.half == to.half {
        sender_low + 1
    } else {
        16 - sender_low
    };
    let group = 2 * (from.row - to.row);
    let total =
        crossing + from.edge + turn - to.edge + group + displacement(sender, receiver).abs() - 34;
    i64::from(total)
}

/// Physical row of a physical tile id (`p >> 6`).
pub fn row_of(receiver: u32) -> i64 {
    i64::from(receiver >> 6)
}

/// First ordinary payload event of a receive selected at `select`.
pub fn ordinary_payload(select: i64, receiver: u32) -> i64 {
    select + ORDINARY_PAYLOAD_BASE + PER_ROW * row_of(receiver)
}

/// The 64-bit format-on event of a paired receive whose pair selects at `select`.
pub fn format_on(select: i64, receiver: u32) -> i64 {
    select + FORMAT_ON_BASE + PER_ROW * row_of(receiver)
}

/// The physical partner (the pair member) of a physical tile id.
pub fn pair_member(physical: u32) -> u32 {
    physical ^ 2
}
