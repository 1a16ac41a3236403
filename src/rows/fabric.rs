//! The row checker's own reading of IPU21.md's fabric formulas and
//! instruction fields ("Exchange fabric timing", "Exchange rules confirmed
//! on hardware", "Exchange instructions (rows)"). The decoder and the
//! checker use it instead of `crate::target::timing` (the scheduler's and
//! encoder's model), so that a formula both would otherwise share is checked
//! against a second reading; a test compares them over every C600 pair. It
//! owns numbers about physical tile ids and instruction fields only.

/// Bit 2 of a send control: 64-bit items.
pub const ITEMS_64_BIT: u8 = 4;
/// Both fabric directions (bits 0 and 1 of a send control).
pub const BOTH_DIRECTIONS: u8 = 3;
/// The neutral incoming source a receiver returns to.
pub const NEUTRAL_SOURCE: u32 = 0x640;
/// `delaypic` selector that switches the 64-bit receive format.
pub const FORMAT_SELECTOR: u8 = 1;
/// `delayxpic`/`sendpic` selector of an XPIC select in paired format.
pub const XPIC_FORMAT_SELECTOR: u8 = 1;
/// `sendpic` selector of a PIC write.
pub const POINTER_SELECTOR: u8 = 2;
/// `delaypic` value that switches the 64-bit format on (any other: off).
pub const FORMAT_ON_VALUE: u32 = 1;
/// Events from an ordinary select to its first payload word, before the row term.
pub const ORDINARY_PAYLOAD_DELAY: i64 = 52;
/// Events from the pair's select to the format-on, before the row term.
pub const FORMAT_ON_DELAY: i64 = 51;
/// Events from the format-on to the paired pointer write.
pub const FORMAT_TO_POINTER: i64 = 2;
/// Extra events per physical receiver row.
pub const EVENTS_PER_ROW: i64 = 2;

/// Column group of a physical id, folded at the middle of the chip:
/// (raw group `(p >> 2) & 15`, folded group, edge distance).
fn column(physical: u32) -> (i32, i32, i32) {
    let raw = ((physical >> 2) & 0xf) as i32;
    if raw > 7 {
        (raw, raw ^ 0xf, (raw << 2) ^ 0x3c)
    } else {
        (raw, raw, raw << 2)
    }
}

fn route_displacement(sender: u32, receiver: u32) -> i32 {
    let (sender_raw, sender_folded, _) = column(sender);
    let (receiver_raw, receiver_folded, _) = column(receiver);
    let mux = sender_folded + ((sender_raw >> 3) ^ (sender & 1) as i32);
    let side = receiver_raw >> 3;
    let lane = match (
        receiver & 3 > 1,
        receiver & 3 > 1 && side == (receiver & 1) as i32,
    ) {
        (true, true) => 2,
        (true, false) => 4,
        (false, _) if side == (receiver & 3) as i32 => 1,
        (false, _) => 5,
    };
    (receiver_folded - mux) * 6 + lane
}

/// Direction bit of a point-to-point send (`disp < 1 ? 2 : 1`).
pub fn direction(sender: u32, receiver: u32) -> u8 {
    match route_displacement(sender, receiver) {
        displacement if displacement < 1 => 2,
        _ => 1,
    }
}

/// `time_to_mux(s, d)`.
pub fn time_to_mux(sender: u32, receiver: u32) -> i64 {
    let (sender_raw, _, sender_edge) = column(sender);
    let (receiver_raw, _, receiver_edge) = column(receiver);
    let sender_low = sender_raw & 7;
    let local = (sender_raw & 8) | ((sender >> 3) & 3) as i32;
    let crossing = local - receiver_raw + ((sender_low >> 1) ^ 3);
    let turn = if (sender ^ receiver) & 0x20 == 0 {
        sender_low + 1
    } else {
        16 - sender_low
    };
    let rows = ((sender >> 6) & 31) as i32 - ((receiver >> 6) & 31) as i32;
    i64::from(
        crossing + sender_edge + turn - receiver_edge
            + rows * 2
            + route_displacement(sender, receiver).abs()
            - 34,
    )
}

/// Physical row of a physical id.
pub fn physical_row(physical: u32) -> i64 {
    i64::from(physical >> 6)
}
