//! The row decoder: finalized row words back to timed events, under the
//! execution model documented in `crate::rows` (the same one the encoder
//! assumes). Written independently of the encoder: it walks the instruction
//! stream with its own event cursor and outgoing-stream state. It must not
//! accept selectors the model leaves undefined or continuations without a
//! stream.

use super::error::RowError;
use super::fabric::{
    FORMAT_ON_VALUE, FORMAT_SELECTOR, ITEMS_64_BIT, POINTER_SELECTOR, XPIC_FORMAT_SELECTOR,
};
use crate::target::encoding::{Instruction, decode};

/// A timed event of a decoded row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RowEvent {
    /// An outgoing send of `events` events (words, or 64-bit items when the
    /// control's bit 2 is set) from word `address` (the instruction's
    /// 8-byte-unit field doubled for a paired send).
    Send {
        event: u64,
        events: u64,
        address: u32,
        control: u8,
    },
    /// XPIC := `source` (physical tile, or the neutral source) in word or paired format.
    Select {
        event: u64,
        source: u32,
        paired: bool,
    },
    /// The 64-bit receive format switched on or off (paired receives).
    Format { event: u64, on: bool },
    /// PIC := word `address`.
    Pointer { event: u64, address: u32 },
    /// The row's last event.
    End { event: u64 },
}

impl RowEvent {
    pub fn event(&self) -> u64 {
        match *self {
            RowEvent::Send { event, .. }
            | RowEvent::Select { event, .. }
            | RowEvent::Format { event, .. }
            | RowEvent::Pointer { event, .. }
            | RowEvent::End { event } => event,
        }
    }
}

/// The outgoing stream: where it continues and when its last instruction ended.
#[derive(Clone, Copy)]
struct Stream {
    next_address: u32,
    control: u8,
    ended_at: u64,
    /// Index of the send event it extends.
    send: usize,
}

fn unit(control: u8) -> u32 {
    if control & ITEMS_64_BIT != 0 { 2 } else { 1 }
}

/// The word address of a send's address field: paired (64-bit) sends
/// address 8-byte units (IPU21.md, "Exchange rules confirmed on hardware").
fn word_address(field: u32, control: u8) -> u32 {
    field.saturating_mul(unit(control))
}

/// Decodes one row into its events (empty row: no events).
pub fn decode_row(words: &[u32]) -> Result<Vec<RowEvent>, RowError> {
    let mut events = Vec::new();
    if words.is_empty() {
        return Ok(events);
    }
    let mut cursor: u64 = 0;
    let mut position = 0;
    let mut stream: Option<Stream> = None;
    while position < words.len() {
        let (instruction, consumed) = decode(&words[position..])?;
        let malformed = |reason| RowError::Malformed {
            word: position,
            reason,
        };
        let occupied = match instruction {
            Instruction::Delay { events } => events,
            Instruction::DelayPic {
                events: count,
                selector,
                value,
            } => {
                // A delayed control applies at its terminal event.
                let event = cursor + u64::from(count) - 1;
                events.push(if selector == FORMAT_SELECTOR {
                    RowEvent::Format {
                        event,
                        on: value == FORMAT_ON_VALUE,
                    }
                } else {
                    RowEvent::Pointer {
                        event,
                        address: value,
                    }
                });
                count
            }
            Instruction::DelayXpic {
                events: count,
                selector,
                value,
            } => {
                events.push(RowEvent::Select {
                    event: cursor + u64::from(count) - 1,
                    source: value,
                    paired: selector == XPIC_FORMAT_SELECTOR,
                });
                count
            }
            Instruction::Send {
                words: count,
                address,
                control,
            } => {
                let address = word_address(address, control);
                stream = Some(start_send(&mut events, cursor, count, address, control));
                count
            }
            Instruction::SendOff {
                words: count,
                delta,
                control,
            } => {
                let current = stream.ok_or(malformed("sendoff without an outgoing stream"))?;
                let address = current
                    .next_address
                    .saturating_add(delta.saturating_mul(unit(current.control)));
                if delta == 0 && current.ended_at == cursor && control == current.control {
                    stream = Some(extend(&mut events, current, cursor, count));
                } else {
                    stream = Some(start_send(&mut events, cursor, count, address, control));
                }
                count
            }
            Instruction::SendPic {
                words: count,
                selector,
                value,
            } => {
                let current = stream.ok_or(malformed("sendpic without an outgoing stream"))?;
                match selector {
                    0 | 1 => events.push(RowEvent::Select {
                        event: cursor,
                        source: value,
                        paired: selector == XPIC_FORMAT_SELECTOR,
                    }),
                    POINTER_SELECTOR => events.push(RowEvent::Pointer {
                        event: cursor,
                        address: value,
                    }),
                    _ => events.push(RowEvent::Format {
                        event: cursor,
                        on: value == FORMAT_ON_VALUE,
                    }),
                }
                if current.ended_at == cursor {
                    stream = Some(extend(&mut events, current, cursor, count));
                } else {
                    stream = Some(start_send(
                        &mut events,
                        cursor,
                        count,
                        current.next_address,
                        current.control,
                    ));
                }
                count
            }
            Instruction::SendPicP {
                words: count,
                pair_selector,
                address,
                control,
                xpic,
                pic,
            } => {
                if position % 2 != 0 {
                    return Err(malformed("sendpicp must start at an even word"));
                }
                events.push(RowEvent::Select {
                    event: cursor,
                    source: xpic,
                    paired: pair_selector == XPIC_FORMAT_SELECTOR,
                });
                events.push(RowEvent::Pointer {
                    event: cursor,
                    address: pic,
                });
                stream = if control != 0 {
                    let address = word_address(address, control);
                    Some(start_send(&mut events, cursor, count, address, control))
                } else {
                    None
                };
                count
            }
        };
        cursor += u64::from(occupied);
        position += consumed;
    }
    events.push(RowEvent::End { event: cursor });
    events.sort_unstable_by_key(|event| (event.event(), rank(event)));
    Ok(events)
}

/// Order of event kinds at one event (sends, selects, formats, pointers, end).
pub(crate) fn rank(event: &RowEvent) -> u8 {
    match event {
        RowEvent::Send { .. } => 0,
        RowEvent::Select { .. } => 1,
        RowEvent::Format { .. } => 2,
        RowEvent::Pointer { .. } => 3,
        RowEvent::End { .. } => 4,
    }
}

fn start_send(
    events: &mut Vec<RowEvent>,
    cursor: u64,
    count: u32,
    address: u32,
    control: u8,
) -> Stream {
    events.push(RowEvent::Send {
        event: cursor,
        events: u64::from(count),
        address,
        control,
    });
    Stream {
        next_address: address.saturating_add(count.saturating_mul(unit(control))),
        control,
        ended_at: cursor + u64::from(count),
        send: events.len() - 1,
    }
}

fn extend(events: &mut [RowEvent], mut stream: Stream, cursor: u64, count: u32) -> Stream {
    if let Some(RowEvent::Send { events: length, .. }) = events.get_mut(stream.send) {
        *length += u64::from(count);
    }
    stream.next_address = stream
        .next_address
        .saturating_add(count.saturating_mul(unit(stream.control)));
    stream.ended_at = cursor + u64::from(count);
    stream
}
