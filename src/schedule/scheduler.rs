//! The event-time scheduler: places pieces one at a time, in the policy's
//! order, each at the earliest event that satisfies every rule of the IPU21
//! fabric model (IPU21.md, "Exchange fabric timing"):
//!
//! - a sender's outgoing stream carries one piece at a time (`[t, t+events)`);
//!   a paired piece also blocks the sender partner's stream;
//! - receiver `d` selects the sender at `x = t + time_to_mux + c` and owns its
//!   incoming source for `[x, x+events)`; payloads land from `x + 52 + 2 row`;
//! - every receive control (select, PIC write, return to neutral) lands on an
//!   event of its own, never on the first two events of the tile's own sends;
//! - a receive that continues where the tile's previous one ended needs no
//!   PIC write; otherwise one lands between the previous payload's end and
//!   this payload's start;
//! - a dependent piece starts after its predecessors are ready (sent and
//!   landed) plus [`DEPENDENCY_SLACK`];
//! - no two sends of a tile of equal length and width start exactly two
//!   events apart (the `c = 0`/`c = 2` select offsets would make them
//!   indistinguishable to a receiver's row);
//! - no event is negative.
//!
//! Receivers and senders are appended to per-tile frontiers (no gap
//! filling), which keeps placement O(receives log controls) per try. This
//! module must not encode rows or re-check its own output (see `validate`).

use super::dependencies::{Dependencies, dependencies};
use super::policy::order;
use super::problem::{ExchangeProblem, WORD_BYTES};
use super::timing::{
    DEPENDENCY_SLACK, paired_eligible, piece_events, receive_payload_start, select_offset,
};
use super::{NO_EVENT, Schedule, ScheduleError};
use crate::query::{SchedulePolicy, TransferWidth};
use crate::target::mapping::{partner, physical_tile};
use crate::target::timing::{
    RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS, RECEIVE_GUARD_EVENTS, time_to_mux,
};

/// Schedules `problem` under `policy`. With `TransferWidth::Auto` both widths
/// are tried when some piece is paired-eligible: latency keeps the shorter
/// horizon; compact policies keep the smaller maximum row, then total row,
/// then horizon (rows estimated by [`row_words_estimate`]).
pub fn schedule(
    problem: &ExchangeProblem,
    policy: SchedulePolicy,
    width: TransferWidth,
) -> Result<Schedule, ScheduleError> {
    let dependencies = dependencies(problem);
    let order = order(problem, &dependencies, policy);
    let eligible: Vec<bool> = (0..problem.pieces())
        .map(|piece| paired_eligible(problem, piece))
        .collect();
    let none = vec![false; problem.pieces()];
    match width {
        TransferWidth::Word32 => place_all(problem, &dependencies, &order, &none, policy, width),
        TransferWidth::Paired64 => {
            place_all(problem, &dependencies, &order, &eligible, policy, width)
        }
        TransferWidth::Auto => {
            let ordinary = place_all(
                problem,
                &dependencies,
                &order,
                &none,
                policy,
                TransferWidth::Word32,
            )?;
            if !eligible.contains(&true) {
                return Ok(ordinary);
            }
            let paired = place_all(
                problem,
                &dependencies,
                &order,
                &eligible,
                policy,
                TransferWidth::Paired64,
            )?;
            let better = match policy {
                SchedulePolicy::Latency => paired.horizon < ordinary.horizon,
                _ => {
                    let cost = |schedule: &Schedule| {
                        let (maximum, total) = row_words_estimate(problem, schedule);
                        (maximum, total, schedule.horizon)
                    };
                    cost(&paired) < cost(&ordinary)
                }
            };
            Ok(if better { paired } else { ordinary })
        }
    }
}

/// Estimated row words per tile (maximum, total): two words per send and one
/// per receive control. A cheap proxy for width choice, not the encoded size.
pub fn row_words_estimate(problem: &ExchangeProblem, schedule: &Schedule) -> (u64, u64) {
    let mut words = vec![0u64; problem.tiles as usize];
    for piece in 0..problem.pieces() {
        if let Some(count) = words.get_mut(problem.source_tile[piece] as usize) {
            *count += 2;
        }
        for receive in problem.receives_of(piece) {
            let controls = 1
                + u64::from(schedule.pointer_write[receive] != NO_EVENT)
                + u64::from(schedule.deselect[receive] != NO_EVENT);
            if let Some(count) = words.get_mut(problem.destination_tile[receive] as usize) {
                *count += controls;
            }
        }
    }
    (words.iter().copied().max().unwrap_or(0), words.iter().sum())
}

/// Events the placer tries past a piece's earliest start before giving up
/// (model: far beyond any real phase's horizon; a guard against a rule set
/// that can never be met).
const MAXIMUM_SEARCH_EVENTS: i64 = 1 << 24;

#[derive(Clone, Default)]
struct Tile {
    send_frontier: i64,
    /// (start, events, paired) of own sends, ascending.
    sends: Vec<(i64, u32, bool)>,
    receive_source_end: i64,
    receive_payload_end: i64,
    /// Where the last receive's payload ended: (allocation, byte offset).
    receive_end_address: Option<(u32, u64)>,
    last_receive: Option<usize>,
    /// The last receive's return-to-neutral event, if still pending.
    pending_deselect: Option<i64>,
    /// Every receive control event, ascending and distinct.
    controls: Vec<i64>,
    end: i64,
}

impl Tile {
    fn has_control(&self, event: i64) -> bool {
        self.controls.binary_search(&event).is_ok()
    }

    fn add_control(&mut self, event: i64) {
        if let Err(position) = self.controls.binary_search(&event) {
            self.controls.insert(position, event);
        }
    }

    /// Whether `event` is one of the first two events of an own send
    /// (including a tentative send starting at `tentative`).
    fn forbidden(&self, event: i64, tentative: Option<i64>) -> bool {
        let near =
            |start: i64| (0..RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS).contains(&(event - start));
        if tentative.is_some_and(near) {
            return true;
        }
        let position = self.sends.partition_point(|&(start, _, _)| start <= event);
        position > 0 && near(self.sends[position - 1].0)
    }

    fn control_free(&self, event: i64, tentative: Option<i64>) -> bool {
        event >= 0 && !self.has_control(event) && !self.forbidden(event, tentative)
    }
}

/// Per receive of the piece being placed: fixed timing offsets.
#[derive(Clone, Copy)]
struct ReceivePlan {
    receive: usize,
    tile: usize,
    /// `time_to_mux + c`.
    select_delay: i64,
    /// Payload start minus select.
    payload_delay: i64,
    needs_pointer: bool,
}

struct Placer<'a> {
    problem: &'a ExchangeProblem,
    tiles: Vec<Tile>,
    ready: Vec<i64>,
    schedule: Schedule,
    plans: Vec<ReceivePlan>,
    pointers: Vec<i64>,
}

fn place_all(
    problem: &ExchangeProblem,
    dependencies: &Dependencies,
    order: &[u32],
    paired: &[bool],
    policy: SchedulePolicy,
    width: TransferWidth,
) -> Result<Schedule, ScheduleError> {
    let receives = problem.receives();
    let pieces = problem.pieces();
    let mut placer = Placer {
        problem,
        tiles: vec![Tile::default(); problem.tiles as usize],
        ready: vec![0; pieces],
        schedule: Schedule {
            policy,
            width,
            send_start: vec![0; pieces],
            paired: paired.to_vec(),
            select: vec![0; receives],
            payload_start: vec![0; receives],
            pointer_write: vec![NO_EVENT; receives],
            deselect: vec![NO_EVENT; receives],
            tile_end: vec![0; problem.tiles as usize],
            horizon: 0,
            lower_bound: 0,
            send_words: vec![0; problem.tiles as usize],
            receive_words: vec![0; problem.tiles as usize],
        },
        plans: Vec::new(),
        pointers: Vec::new(),
    };
    for &piece in order {
        placer.place(piece as usize, dependencies)?;
    }
    placer.finish()
}

fn event(piece: usize, value: i64) -> Result<u32, ScheduleError> {
    u32::try_from(value)
        .ok()
        .filter(|&value| value != NO_EVENT)
        .ok_or(ScheduleError::EventOverflow {
            piece,
            event: value,
        })
}

impl Placer<'_> {
    fn place(&mut self, piece: usize, dependencies: &Dependencies) -> Result<(), ScheduleError> {
        let problem = self.problem;
        let tiles = problem.tiles;
        let sender = problem.source_tile[piece];
        if sender >= tiles {
            return Err(ScheduleError::TileOutOfRange {
                piece,
                tile: sender,
                tiles,
            });
        }
        let paired = self.schedule.paired[piece];
        let events = i64::from(piece_events(problem.words[piece], paired));
        let receives = problem.receives_of(piece);
        let offset = select_offset(receives.len());
        let sender_physical = physical_tile(sender);
        let mut start = self.tiles[sender as usize].send_frontier;
        let sender_partner = partner(sender) as usize;
        if paired {
            start = start.max(self.tiles[sender_partner].send_frontier);
        }
        for &before in dependencies.of(piece) {
            start = start.max(self.ready[before as usize] + DEPENDENCY_SLACK);
        }
        self.plans.clear();
        let mut seen: Vec<u32> = problem.destination_tile[receives.clone()].to_vec();
        seen.sort_unstable();
        if let Some(pair) = seen.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(ScheduleError::DuplicateReceiver {
                piece,
                tile: pair[0],
            });
        }
        for receive in receives {
            let tile = problem.destination_tile[receive];
            if tile >= tiles {
                return Err(ScheduleError::TileOutOfRange { piece, tile, tiles });
            }
            let select_delay =
                i64::from(time_to_mux(sender_physical, physical_tile(tile))) + offset;
            let payload_delay = receive_payload_start(0, tile, paired);
            let state = &self.tiles[tile as usize];
            let destination = problem.destination[receive];
            let needs_pointer = state.receive_end_address
                != Some((destination.allocation, u64::from(destination.offset)));
            start = start
                .max(-select_delay)
                .max(state.receive_source_end - select_delay)
                .max(state.receive_payload_end - select_delay - payload_delay);
            self.plans.push(ReceivePlan {
                receive,
                tile: tile as usize,
                select_delay,
                payload_delay,
                needs_pointer,
            });
        }
        start = start.max(0);
        for plan in &self.plans {
            let own_send = 0..RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS;
            if plan.tile == sender as usize
                && (own_send.contains(&plan.select_delay)
                    || own_send.contains(&(plan.select_delay + events)))
            {
                return Err(ScheduleError::SelfReceiveOnOwnSend {
                    piece,
                    tile: sender,
                });
            }
        }
        let first = start;
        while !self.feasible(sender as usize, start, events, paired) {
            start += 1;
            if start - first > MAXIMUM_SEARCH_EVENTS {
                return Err(ScheduleError::NoFeasibleEvent { piece, from: first });
            }
        }
        self.commit(piece, sender as usize, start, events, paired)
    }

    /// Whether the piece can start at `start`; on success `pointers` holds
    /// each plan's PIC write event (or -1).
    fn feasible(&mut self, sender: usize, start: i64, events: i64, paired: bool) -> bool {
        let own = &self.tiles[sender];
        if own.has_control(start) || own.has_control(start + 1) {
            return false;
        }
        let ambiguous =
            own.sends
                .iter()
                .rev()
                .take(2)
                .any(|&(other, other_events, other_paired)| {
                    (other - start).abs() == 2
                        && i64::from(other_events) == events
                        && other_paired == paired
                });
        if ambiguous {
            return false;
        }
        self.pointers.clear();
        for plan in &self.plans {
            let state = &self.tiles[plan.tile];
            let tentative = (plan.tile == sender).then_some(start);
            let select = start + plan.select_delay;
            let reuses_deselect = state.pending_deselect == Some(select);
            if !reuses_deselect && !state.control_free(select, tentative) {
                return false;
            }
            if select < 0 || state.forbidden(select, tentative) {
                return false;
            }
            let deselect = select + events;
            if !state.control_free(deselect, tentative) {
                return false;
            }
            let mut pointer = -1;
            if plan.needs_pointer {
                let payload = select + plan.payload_delay;
                let lowest = state.receive_payload_end.max(0);
                let mut candidate = payload;
                while candidate >= lowest {
                    if candidate != select
                        && candidate != deselect
                        && state.control_free(candidate, tentative)
                    {
                        pointer = candidate;
                        break;
                    }
                    candidate -= 1;
                }
                if pointer < 0 {
                    return false;
                }
            }
            self.pointers.push(pointer);
        }
        true
    }

    fn commit(
        &mut self,
        piece: usize,
        sender: usize,
        start: i64,
        events: i64,
        paired: bool,
    ) -> Result<(), ScheduleError> {
        let problem = self.problem;
        self.schedule.send_start[piece] = event(piece, start)?;
        let end = start + events;
        {
            let own = &mut self.tiles[sender];
            own.sends.push((start, events as u32, paired));
            own.send_frontier = end;
            own.end = own.end.max(end);
        }
        if paired {
            let other = &mut self.tiles[partner(sender as u32) as usize];
            other.send_frontier = other.send_frontier.max(end);
        }
        let mut ready = end;
        let words = problem.words[piece];
        for (index, plan) in self.plans.iter().enumerate() {
            let select = start + plan.select_delay;
            let payload = select + plan.payload_delay;
            let pointer = self.pointers[index];
            let state = &mut self.tiles[plan.tile];
            if state.pending_deselect == Some(select)
                && let Some(previous) = state.last_receive
            {
                self.schedule.deselect[previous] = NO_EVENT;
            }
            state.add_control(select);
            state.add_control(select + events);
            if pointer >= 0 {
                state.add_control(pointer);
                self.schedule.pointer_write[plan.receive] = event(piece, pointer)?;
            }
            state.pending_deselect = Some(select + events);
            state.receive_source_end = select + events;
            state.receive_payload_end = payload + events;
            let destination = problem.destination[plan.receive];
            state.receive_end_address = Some((
                destination.allocation,
                u64::from(destination.offset) + u64::from(words) * u64::from(WORD_BYTES),
            ));
            state.last_receive = Some(plan.receive);
            state.end = state
                .end
                .max((select + events).max(payload + events) + RECEIVE_GUARD_EVENTS);
            ready = ready.max(payload + events);
            self.schedule.select[plan.receive] = event(piece, select)?;
            self.schedule.payload_start[plan.receive] = event(piece, payload)?;
            self.schedule.deselect[plan.receive] = event(piece, select + events)?;
        }
        self.ready[piece] = ready;
        Ok(())
    }

    fn finish(mut self) -> Result<Schedule, ScheduleError> {
        let problem = self.problem;
        for piece in 0..problem.pieces() {
            let words = problem.words[piece];
            let sent = &mut self.schedule.send_words[problem.source_tile[piece] as usize];
            *sent = sent.saturating_add(words);
            for receive in problem.receives_of(piece) {
                let received =
                    &mut self.schedule.receive_words[problem.destination_tile[receive] as usize];
                *received = received.saturating_add(words);
            }
        }
        for (tile, state) in self.tiles.iter().enumerate() {
            self.schedule.tile_end[tile] = event(0, state.end)?;
        }
        self.schedule.horizon = self.schedule.tile_end.iter().copied().max().unwrap_or(0);
        self.schedule.lower_bound = self
            .schedule
            .send_words
            .iter()
            .zip(&self.schedule.receive_words)
            .map(|(&sent, &received)| sent.max(received))
            .max()
            .unwrap_or(0);
        Ok(self.schedule)
    }
}
