//! The row encoder: one tile's sends and receive controls, in event order,
//! as IPU21 instruction words under the execution model of `crate::rows`.
//! Sends become `send` (at most 64 words, absolute address in a relocation
//! slot) followed by `sendoff` continuations; a control that lands inside a
//! send becomes a `sendpic` there; controls between sends are `delayxpic` /
//! `delaypic`; gaps are `delay`. Owns instruction selection only: it must not
//! move any event; a schedule it cannot express is an error.

use super::error::RowError;
use super::{PhaseRows, RelocationSlot, Row, SlotField};
use crate::schedule::timing::{issues_pair_select, pair_select_value};
use crate::schedule::{ExchangeProblem, NO_EVENT, Schedule, SymbolicAddress};
use crate::target::encoding::Instruction;
use crate::target::mapping::physical_tile;
use crate::target::timing::{
    DELAY_MAX_EVENTS, DELAY_PIC_MAX_EVENTS, DELAY_XPIC_MAX_EVENTS, NEUTRAL_INCOMING_SOURCE,
    RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS, SEND_MAX_WORDS, SEND_OFFSET_MAX_WORDS,
    SEND_PIC_MAX_WORDS, direction,
};
use crate::target::timing::{DIRECTION_ONE, DIRECTION_TWO, PAIRED_PAYLOAD_AFTER_FORMAT};

/// Send-control bit selecting 64-bit items (IPU21.md: `sctl` bit 2).
pub const PAIRED_CONTROL_BIT: u8 = 4;
/// `delaypic` selector that switches the 64-bit receive format.
pub const FORMAT_SELECTOR: u8 = 1;
/// `sendpic` selector for a PIC write.
pub const SEND_PIC_POINTER_SELECTOR: u8 = 2;
/// `sendpic` selector for a format change (the PIC form of selector 1).
pub const SEND_PIC_FORMAT_SELECTOR: u8 = 3;
/// Format value that switches the 64-bit format on (0 switches it off).
pub const FORMAT_ON: u32 = 1;

/// A receive control of a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Control {
    /// XPIC := physical source tile (or, for a paired receive, the pair's
    /// select value `sender XOR (receiver AND 2)`).
    Select { source: u32 },
    /// PIC := the destination's word address.
    Pointer(SymbolicAddress),
    /// The 64-bit receive format on or off (paired receives).
    Format { on: bool },
}

/// One own send of a tile.
#[derive(Clone, Copy, Debug)]
pub(crate) struct OwnSend {
    pub start: u64,
    pub events: u64,
    pub source: SymbolicAddress,
    pub control: u8,
}

/// Per tile: own sends, and receive controls with their events.
pub(crate) type Activity = (Vec<Vec<OwnSend>>, Vec<Vec<(u64, Control)>>);

/// Per tile: own sends and receive controls, each sorted by event.
pub(crate) fn tile_activity(problem: &ExchangeProblem, schedule: &Schedule) -> Activity {
    let tiles = problem.tiles as usize;
    let mut sends: Vec<Vec<OwnSend>> = vec![Vec::new(); tiles];
    let mut controls: Vec<Vec<(u64, Control)>> = vec![Vec::new(); tiles];
    for piece in 0..problem.pieces() {
        let sender = problem.source_tile[piece];
        let sender_physical = physical_tile(sender);
        let paired = schedule.paired[piece];
        let receives = problem.receives_of(piece);
        let mut control = if paired { PAIRED_CONTROL_BIT } else { 0 };
        if receives.len() > 1 {
            // Multicasts set both direction bits, the form validated on the
            // chip (IPU21.md: `sctl` 3, or 7 for 64-bit items).
            control |= DIRECTION_ONE | DIRECTION_TWO;
        }
        for receive in receives {
            let tile = problem.destination_tile[receive];
            let receiver = physical_tile(tile);
            control |= direction(sender_physical, receiver);
            let list = &mut controls[tile as usize];
            let selects = !paired || issues_pair_select(sender_physical, receiver);
            if selects {
                let source = if paired {
                    pair_select_value(sender_physical, receiver)
                } else {
                    sender_physical
                };
                list.push((
                    u64::from(schedule.select[receive]),
                    Control::Select { source },
                ));
            }
            if paired {
                // Format on two events before the payload (and its pointer
                // write), format off `events` after the format on.
                let format =
                    u64::from(schedule.payload_start[receive]) - PAIRED_PAYLOAD_AFTER_FORMAT as u64;
                let events = u64::from(problem.words[piece] / 2);
                list.push((format, Control::Format { on: true }));
                list.push((format + events, Control::Format { on: false }));
            }
            if schedule.pointer_write[receive] != NO_EVENT {
                list.push((
                    u64::from(schedule.pointer_write[receive]),
                    Control::Pointer(problem.destination[receive]),
                ));
            }
            if schedule.deselect[receive] != NO_EVENT {
                list.push((
                    u64::from(schedule.deselect[receive]),
                    Control::Select {
                        source: NEUTRAL_INCOMING_SOURCE,
                    },
                ));
            }
        }
        let words = problem.words[piece];
        sends[sender as usize].push(OwnSend {
            start: u64::from(schedule.send_start[piece]),
            events: u64::from(if paired { words / 2 } else { words }),
            source: problem.source[piece],
            control,
        });
    }
    for list in &mut sends {
        list.sort_unstable_by_key(|send| send.start);
    }
    for list in &mut controls {
        list.sort_unstable_by_key(|&(event, _)| event);
    }
    (sends, controls)
}

/// Encodes every tile's row of a validated schedule.
pub fn encode_phase(problem: &ExchangeProblem, schedule: &Schedule) -> Result<PhaseRows, RowError> {
    if schedule.tile_end.len() != problem.tiles as usize
        || schedule.send_start.len() != problem.pieces()
    {
        return Err(RowError::Shape {
            what: "schedule and problem sizes differ",
        });
    }
    let (sends, controls) = tile_activity(problem, schedule);
    let mut rows = Vec::with_capacity(problem.tiles as usize);
    for tile in 0..problem.tiles as usize {
        rows.push(encode_tile(
            tile as u32,
            &sends[tile],
            &controls[tile],
            u64::from(schedule.tile_end[tile]),
        )?);
    }
    Ok(PhaseRows { rows })
}

struct Builder {
    row: Row,
    cursor: u64,
}

impl Builder {
    fn push(
        &mut self,
        instruction: Instruction,
        slot: Option<(SlotField, SymbolicAddress)>,
    ) -> Result<(), RowError> {
        let encoded = instruction.encode()?;
        if let Some((field, address)) = slot {
            self.row.slots.push(RelocationSlot {
                word: self.row.words.len() as u32,
                field,
                address,
            });
        }
        self.row.words.extend_from_slice(encoded.as_slice());
        Ok(())
    }

    fn delay_to(&mut self, event: u64) -> Result<(), RowError> {
        while self.cursor < event {
            let events = (event - self.cursor).min(u64::from(DELAY_MAX_EVENTS));
            self.push(
                Instruction::Delay {
                    events: events as u32,
                },
                None,
            )?;
            self.cursor += events;
        }
        Ok(())
    }

    /// A control at `event` while the outgoing stream is idle. A
    /// `delaypic`/`delayxpic` applies at its terminal event (IPU21.md,
    /// "Exchange rules confirmed on hardware"), so the instruction absorbs as
    /// much of the idle gap before `event` as its count field allows and
    /// ends exactly on `event`; the cursor moves past it.
    fn idle_control(&mut self, control: Control, event: u64) -> Result<(), RowError> {
        let limit = match control {
            Control::Select { .. } => u64::from(DELAY_XPIC_MAX_EVENTS),
            Control::Pointer(_) | Control::Format { .. } => u64::from(DELAY_PIC_MAX_EVENTS),
        };
        let first = self.cursor.max((event + 1).saturating_sub(limit));
        self.delay_to(first)?;
        let events = (event + 1 - first) as u32;
        match control {
            Control::Select { source } => {
                self.push(
                    Instruction::DelayXpic {
                        events,
                        selector: 0,
                        value: source,
                    },
                    None,
                )?;
            }
            Control::Format { on } => {
                self.push(
                    Instruction::DelayPic {
                        events,
                        selector: FORMAT_SELECTOR,
                        value: if on { FORMAT_ON } else { 0 },
                    },
                    None,
                )?;
            }
            Control::Pointer(address) => {
                self.push(
                    Instruction::DelayPic {
                        events,
                        selector: 0,
                        value: 0,
                    },
                    Some((SlotField::PicValue, address)),
                )?;
            }
        }
        self.cursor = event + 1;
        Ok(())
    }

    /// Continuation words of the stream after a segment's first instruction.
    fn continue_stream(&mut self, mut remaining: u64, control: u8) -> Result<(), RowError> {
        while remaining > 0 {
            let words = remaining.min(u64::from(SEND_OFFSET_MAX_WORDS));
            self.push(
                Instruction::SendOff {
                    words: words as u32,
                    delta: 0,
                    control,
                },
                None,
            )?;
            self.cursor += words;
            remaining -= words;
        }
        Ok(())
    }

    fn send(&mut self, tile: u32, send: OwnSend, inner: &[(u64, Control)]) -> Result<(), RowError> {
        let end = send.start + send.events;
        for (index, segment_start) in std::iter::once(send.start)
            .chain(inner.iter().map(|&(event, _)| event))
            .enumerate()
        {
            if index > 0
                && segment_start < send.start + RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS as u64
            {
                return Err(RowError::ControlOnSendStart {
                    tile,
                    event: segment_start,
                });
            }
            let segment_end = inner.get(index).map_or(end, |&(event, _)| event);
            let length = segment_end - segment_start;
            if index == 0 {
                let words = length.min(u64::from(SEND_MAX_WORDS));
                self.push(
                    Instruction::Send {
                        words: words as u32,
                        address: 0,
                        control: send.control,
                    },
                    Some((
                        if send.control & PAIRED_CONTROL_BIT != 0 {
                            SlotField::PairedSendAddress
                        } else {
                            SlotField::SendAddress
                        },
                        send.source,
                    )),
                )?;
                self.cursor += words;
                self.continue_stream(length - words, send.control)?;
            } else {
                let words = length.min(u64::from(SEND_PIC_MAX_WORDS));
                let (selector, value, slot) = match inner[index - 1].1 {
                    Control::Select { source } => (0, source, None),
                    Control::Format { on } => (
                        SEND_PIC_FORMAT_SELECTOR,
                        if on { FORMAT_ON } else { 0 },
                        None,
                    ),
                    Control::Pointer(address) => (
                        SEND_PIC_POINTER_SELECTOR,
                        0,
                        Some((SlotField::PicValue, address)),
                    ),
                };
                self.push(
                    Instruction::SendPic {
                        words: words as u32,
                        selector,
                        value,
                    },
                    slot,
                )?;
                self.cursor += words;
                self.continue_stream(length - words, send.control)?;
            }
        }
        Ok(())
    }
}

fn encode_tile(
    tile: u32,
    sends: &[OwnSend],
    controls: &[(u64, Control)],
    end: u64,
) -> Result<Row, RowError> {
    let mut builder = Builder {
        row: Row::default(),
        cursor: 0,
    };
    let mut next_send = 0;
    let mut next_control = 0;
    loop {
        let send = sends.get(next_send).copied();
        let control = controls.get(next_control).copied();
        match (send, control) {
            (None, None) => break,
            (Some(send), control) if control.is_none_or(|(event, _)| event >= send.start) => {
                builder.delay_to(send.start)?;
                let send_end = send.start + send.events;
                let inner_end = controls[next_control..]
                    .partition_point(|&(event, _)| event < send_end)
                    + next_control;
                if controls
                    .get(next_control)
                    .is_some_and(|&(event, _)| event == send.start)
                {
                    return Err(RowError::ControlOnSendStart {
                        tile,
                        event: send.start,
                    });
                }
                builder.send(tile, send, &controls[next_control..inner_end])?;
                next_control = inner_end;
                next_send += 1;
            }
            (Some(_), None) => break,
            (_, Some((event, control))) => {
                builder.idle_control(control, event)?;
                next_control += 1;
            }
        }
    }
    builder.delay_to(end)?;
    // Rows live as long as their memo: no spare capacity from the pushes.
    builder.row.words.shrink_to_fit();
    builder.row.slots.shrink_to_fit();
    Ok(builder.row)
}
