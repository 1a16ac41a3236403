//! Exchange fabric timing and exchange limits. The exchange is statically
//! timed: a sent word carries no destination, so every receiver must select
//! the sender at an event computed from physical positions. This module owns
//! those formulas (`time_to_mux`, `direction`, select and payload events,
//! guards) and the per-instruction and per-transfer limits. It must not
//! schedule transfers or encode instructions; it only answers timing questions
//! about physical tile ids.

use super::mapping::physical_row;

/// Point-to-point select offset `c` added to `time_to_mux` (IPU21.md, "Exchange fabric timing").
pub const POINT_TO_POINT_SELECT_OFFSET: i64 = 2;

/// Events from the XPIC select to the first payload word (IPU21.md: `p = x + 52 + 2 * row(d)`).
pub const PAYLOAD_DELAY_BASE: i64 = 52;

/// Extra payload delay per physical receiver row (IPU21.md: `p = x + 52 + 2 * row(d)`).
pub const PAYLOAD_DELAY_PER_ROW: i64 = 2;

/// Guard events after the later of source and payload windows (IPU21.md: "about 56 events").
pub const RECEIVE_GUARD_EVENTS: i64 = 56;

/// Events from the select to the paired 64-bit format select (IPU21.md: "about `x + 51 + 2 * row`").
pub const PAIRED_FORMAT_SELECT_OFFSET: i64 = 51;

/// Events from the paired format select to the paired payload (IPU21.md: "two events later").
pub const PAIRED_PAYLOAD_AFTER_FORMAT: i64 = 2;

/// Fewest items a paired 64-bit transfer may carry (IPU21.md: "at least 64 items").
pub const PAIRED_MINIMUM_ITEMS: u32 = 64;

/// Alignment of paired 64-bit transfers in bytes (IPU21.md: "8-byte alignment").
pub const PAIRED_ALIGNMENT_BYTES: u32 = 8;

/// Largest logical transfer in words; longer ones are split (IPU21.md, "Exchange instructions").
pub const MAX_LOGICAL_TRANSFER_WORDS: u32 = 4148;

/// Most words one `send` moves (IPU21.md, "Exchange instructions": limits).
pub const SEND_MAX_WORDS: u32 = 64;

/// Most words one `sendpic` moves (IPU21.md, "Exchange instructions": limits).
pub const SEND_PIC_MAX_WORDS: u32 = 64;

/// Most words one `sendpicp` moves (IPU21.md encoding: the 6-bit `w-1` field at bit 21).
pub const SEND_PIC_PAIR_MAX_WORDS: u32 = 64;

/// Most words one `sendoff` moves (IPU21.md, "Exchange instructions": limits).
pub const SEND_OFFSET_MAX_WORDS: u32 = 4096;

/// Most events one `delay` advances (IPU21.md, "Exchange instructions": limits).
pub const DELAY_MAX_EVENTS: u32 = 524_288;

/// Most events one `delaypic` advances (IPU21.md, "Exchange instructions": limits).
pub const DELAY_PIC_MAX_EVENTS: u32 = 128;

/// Most events one `delayxpic` advances (IPU21.md, "Exchange instructions": limits).
pub const DELAY_XPIC_MAX_EVENTS: u32 = 4096;

/// Incoming source a receiver returns to after a receive (IPU21.md, "Exchange instructions").
pub const NEUTRAL_INCOMING_SOURCE: u32 = 0x640;

/// Receive controls may not land on this many first events of an own send (IPU21.md: "first or second event").
pub const RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS: i64 = 2;

/// Words per event per direction per tile (IPU21.md, "Chip": exchange).
pub const WORDS_PER_EVENT: u32 = 1;

/// Least `time_to_mux` over all C600 physical pairs (derived exhaustively; IPU21.md: "roughly from -78").
pub const TIME_TO_MUX_MINIMUM: i32 = -78;

/// Greatest `time_to_mux` over all C600 physical pairs (derived exhaustively: 112; IPU21.md says "to 108").
pub const TIME_TO_MUX_MAXIMUM: i32 = 112;

/// Send-control direction bit for a fabric route going one way (IPU21.md: `direction`).
pub const DIRECTION_ONE: u8 = 1;

/// Send-control direction bit for a fabric route going the other way (IPU21.md: `direction`).
pub const DIRECTION_TWO: u8 = 2;

/// Signed route displacement between physical tiles (IPU21.md: `disp`).
pub fn displacement(sender_physical: u32, receiver_physical: u32) -> i32 {
    let s = sender_physical;
    let d = receiver_physical;
    let sender_raw = ((s >> 2) & 15) as i32;
    let receiver_raw = ((d >> 2) & 15) as i32;
    let sender_column = if sender_raw > 7 {
        sender_raw ^ 15
    } else {
        sender_raw
    };
    let receiver_column = if receiver_raw > 7 {
        receiver_raw ^ 15
    } else {
        receiver_raw
    };
    let sender_mux = sender_column + ((sender_raw >> 3) ^ (s & 1) as i32);
    // `d & 3 > 1` reads as `(d & 3) > 1`: the receiver's lane bit (bit 1) is set.
    let lane_term = if (d & 3) > 1 {
        if (receiver_raw >> 3) == (d & 1) as i32 {
            2
        } else {
            4
        }
    } else if (receiver_raw >> 3) == (d & 3) as i32 {
        1
    } else {
        5
    };
    (receiver_column - sender_mux) * 6 + lane_term
}

/// Send-control direction bit, 1 or 2 (IPU21.md: `direction(s, d) = disp < 1 ? 2 : 1`).
pub fn direction(sender_physical: u32, receiver_physical: u32) -> u8 {
    if displacement(sender_physical, receiver_physical) < 1 {
        DIRECTION_TWO
    } else {
        DIRECTION_ONE
    }
}

/// Events from a send to the receiver's mux, before the select offset (IPU21.md: `time_to_mux`).
pub fn time_to_mux(sender_physical: u32, receiver_physical: u32) -> i32 {
    let s = sender_physical;
    let d = receiver_physical;
    let sender_raw = ((s >> 2) & 15) as i32;
    let receiver_raw = ((d >> 2) & 15) as i32;
    let sender_low = ((s >> 2) & 7) as i32;
    let sender_edge = if sender_raw > 7 {
        (sender_raw * 4) ^ 60
    } else {
        sender_raw * 4
    };
    let receiver_edge = if receiver_raw > 7 {
        (receiver_raw * 4) ^ 60
    } else {
        receiver_raw * 4
    };
    let local = ((s >> 2) & 8) as i32 | ((s >> 3) & 3) as i32;
    let crossing = local - receiver_raw + ((sender_low >> 1) ^ 3);
    let turn = if ((s ^ d) & 0x20) == 0 {
        sender_low + 1
    } else {
        16 - sender_low
    };
    let group = (((s >> 6) & 31) as i32 - ((d >> 6) & 31) as i32) * 2;
    let route = displacement(s, d).abs();
    crossing + sender_edge + turn - receiver_edge + group + route - 34
}

/// Event at which a point-to-point receiver selects the sender (IPU21.md: `x = t + time_to_mux + c`).
pub fn point_to_point_select(send_event: i64, sender_physical: u32, receiver_physical: u32) -> i64 {
    send_event
        + i64::from(time_to_mux(sender_physical, receiver_physical))
        + POINT_TO_POINT_SELECT_OFFSET
}

/// Earliest start of a multicast so no select is negative (IPU21.md: `max(0, -min time_to_mux)`).
pub fn multicast_start(minimum_time_to_mux: i32) -> i64 {
    i64::from(minimum_time_to_mux).saturating_neg().max(0)
}

/// First payload event at the receiver (IPU21.md: `p = x + 52 + 2 * row(d)`).
pub fn payload_start(select_event: i64, receiver_physical: u32) -> i64 {
    select_event
        + PAYLOAD_DELAY_BASE
        + PAYLOAD_DELAY_PER_ROW * i64::from(physical_row(receiver_physical))
}

/// Event of the paired 64-bit format select (IPU21.md: "about `x + 51 + 2 * row`").
pub fn paired_format_select(select_event: i64, receiver_physical: u32) -> i64 {
    select_event
        + PAIRED_FORMAT_SELECT_OFFSET
        + PAYLOAD_DELAY_PER_ROW * i64::from(physical_row(receiver_physical))
}

/// First payload event of a paired 64-bit transfer (IPU21.md: "the payload follows two events later").
pub fn paired_payload_start(select_event: i64, receiver_physical: u32) -> i64 {
    paired_format_select(select_event, receiver_physical) + PAIRED_PAYLOAD_AFTER_FORMAT
}

/// Earliest event the receiver's row may end after a receive (IPU21.md: guard of about 56 events).
pub fn guard_end(source_window_end: i64, payload_window_end: i64) -> i64 {
    source_window_end.max(payload_window_end) + RECEIVE_GUARD_EVENTS
}

/// Whether a receive control may land at `control_event` given an own send starting at `send_event`
/// (IPU21.md: not on the first or second event of one of the tile's own sends).
pub fn receive_control_allowed(control_event: i64, send_event: i64) -> bool {
    let offset = control_event - send_event;
    !(0..RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS).contains(&offset)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::target::mapping::C600_TILES;

    #[test]
    fn time_to_mux_range_over_the_chip() {
        let mut minimum = i32::MAX;
        let mut maximum = i32::MIN;
        for sender in 0..C600_TILES {
            for receiver in 0..C600_TILES {
                let time = time_to_mux(sender, receiver);
                minimum = minimum.min(time);
                maximum = maximum.max(time);
                let way = direction(sender, receiver);
                assert!(way == DIRECTION_ONE || way == DIRECTION_TWO);
            }
        }
        println!("time_to_mux over all physical pairs: min {minimum}, max {maximum}");
        assert!(minimum >= -90, "minimum {minimum}");
        assert!(maximum <= 120, "maximum {maximum}");
        assert_eq!(minimum, TIME_TO_MUX_MINIMUM);
        assert_eq!(maximum, TIME_TO_MUX_MAXIMUM);
    }

    #[test]
    fn payload_and_paired_events() {
        // Receiver in physical row 3 (physical 3 * 64 + 5).
        let receiver = 3 * 64 + 5;
        assert_eq!(payload_start(100, receiver), 100 + 52 + 6);
        assert_eq!(paired_format_select(100, receiver), 100 + 51 + 6);
        assert_eq!(paired_payload_start(100, receiver), 100 + 51 + 6 + 2);
        assert_eq!(payload_start(0, 0), 52);
        assert_eq!(guard_end(10, 20), 76);
    }

    #[test]
    fn select_events_and_multicast_start() {
        let time = i64::from(time_to_mux(0, 700));
        assert_eq!(point_to_point_select(10, 0, 700), 10 + time + 2);
        assert_eq!(multicast_start(-78), 78);
        assert_eq!(multicast_start(5), 0);
    }

    #[test]
    fn receive_controls_avoid_first_two_send_events() {
        assert!(receive_control_allowed(9, 10));
        assert!(!receive_control_allowed(10, 10));
        assert!(!receive_control_allowed(11, 10));
        assert!(receive_control_allowed(12, 10));
    }
}
