//! The frontier placer: puts one piece at a time at the earliest event that
//! satisfies every rule of the IPU21 fabric model (IPU21.md, "Exchange
//! fabric timing"), given everything placed before it:
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
//! - a paired piece follows the paired receive protocol (IPU21.md, "Exchange
//!   rules confirmed on hardware"): both members of a receiving pair select
//!   at the pair's route time (the later of their two `time_to_mux`), only
//!   the member with the smaller one issues the select and its return to
//!   neutral, and each member switches the 64-bit format on at
//!   `x + 51 + 2 row`, writes its pointer two events later (always) and
//!   switches the format off `events` later, each on an event of its own,
//!   the format-on only after the tile's last ordinary payload has drained;
//! - a dependent piece starts after its predecessors are ready (sent and
//!   landed) plus [`DEPENDENCY_SLACK`];
//! - no two sends of a tile of equal length and width start exactly two
//!   events apart (the `c = 0`/`c = 2` select offsets would make them
//!   indistinguishable to a receiver's row);
//! - on one tile, a send and a receive payload that may touch one memory
//!   element of one allocation root never share an event (`elements`);
//! - no event is negative.
//!
//! Senders and receivers are appended to per-tile frontiers (no gap
//! filling): the receive frontier is pipelined (a receiver may select its
//! next source as soon as the previous source window closes), so a tile
//! receiving many one-word pieces pays about one event each. Which piece is
//! placed next is the caller's decision (`order`, `list`); this module owns
//! only the placement of one piece and must not re-check its own output
//! (see `validate`).
//!
//! A placement may carry a cutoff ([`Placer::set_cutoff`]): it then keeps a
//! running lower bound of its final horizon and gives up
//! ([`ScheduleError::AboveCutoff`]) as soon as that bound reaches the
//! cutoff. Frontiers only grow and nothing fills gaps, so every future send
//! of a tile starts at or after its send frontier and every future receive
//! selects at or after its receive frontier: the frontier plus the events
//! the tile has still to send (or to receive, plus the guard) bounds the
//! tile's end from below, and it never decreases as pieces are placed.

use super::dependencies::Dependencies;
use super::elements::{ElementWindows, Reach};
use super::event_set::EventSet;
use super::problem::{ExchangeProblem, WORD_BYTES};
use super::timing::{
    DEPENDENCY_SLACK, issues_pair_select, pair_route_time, piece_events, receive_payload_start,
    select_offset,
};
use super::vocabulary::{SchedulePolicy, TransferWidth};
use super::{NO_EVENT, Schedule, ScheduleError};
use crate::target::mapping::{partner, physical_tile};
use crate::target::timing::{
    PAIRED_PAYLOAD_AFTER_FORMAT, RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS, RECEIVE_GUARD_EVENTS,
    time_to_mux,
};

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
    /// Where the last ordinary (32-bit) payload ended: a paired receive's
    /// format-on may not come earlier (IPU21.md: the drain rule).
    ordinary_payload_end: i64,
    /// Where the last receive's payload ended: (allocation, byte offset).
    receive_end_address: Option<(u32, u64)>,
    last_receive: Option<usize>,
    /// The last receive's return-to-neutral event, if still pending.
    pending_deselect: Option<i64>,
    /// Every receive control event.
    controls: EventSet,
    /// The first [`RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS`] events of every
    /// own send: no receive control lands on them.
    send_openings: EventSet,
    end: i64,
}

impl Tile {
    fn has_control(&self, event: i64) -> bool {
        self.controls.contains(event)
    }

    fn add_control(&mut self, event: i64) {
        self.controls.insert(event);
    }

    /// Records an own send starting at `start` (the placer appends sends
    /// in time order).
    fn add_send(&mut self, start: i64, events: u32, paired: bool) {
        self.sends.push((start, events, paired));
        for opening in start..start + RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS {
            self.send_openings.insert(opening);
        }
    }

    /// Whether `event` is one of the first two events of an own send
    /// (including a tentative send starting at `tentative`).
    fn forbidden(&self, event: i64, tentative: Option<i64>) -> bool {
        let near =
            |start: i64| (0..RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS).contains(&(event - start));
        tentative.is_some_and(near) || self.send_openings.contains(event)
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
    role: PairRole,
}

/// A receive's part in the paired receive protocol.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PairRole {
    /// An ordinary 32-bit receive.
    Ordinary,
    /// The pair member that issues the select and its return to neutral.
    Selecting,
    /// The other member: format and pointer controls only.
    Following,
}

impl PairRole {
    fn paired(self) -> bool {
        self != PairRole::Ordinary
    }

    fn selects(self) -> bool {
        self != PairRole::Following
    }
}

/// Placement state of one schedule under construction.
pub struct Placer<'a> {
    problem: &'a ExchangeProblem,
    dependencies: &'a Dependencies,
    /// Per piece: whether it may be paired (for the endpoint bound, which
    /// counts such pieces at their paired events whatever this schedule
    /// chose).
    eligible: &'a [bool],
    tiles: Vec<Tile>,
    ready: Vec<i64>,
    schedule: Schedule,
    plans: Vec<ReceivePlan>,
    pointers: Vec<i64>,
    /// Per receive: (`time_to_mux + c`, payload start minus select), fixed
    /// for the whole placement (computed once, read on every evaluation).
    delays: Vec<(i32, i32)>,
    /// Per receive: its part in the paired protocol under this placement's widths.
    roles: Vec<PairRole>,
    /// The cutoff and its running bound, when the caller set one.
    cutoff: Option<Cutoff>,
    /// Every tile's sends and receive payloads, for the memory element rule.
    elements: ElementWindows,
    /// The piece being placed: its receives as (tile, payload delay, reach).
    reaches: Vec<(usize, i64, Reach)>,
}

/// A placement's cutoff: the events each tile has still to send and to
/// receive, and the lower bound of the horizon so far.
struct Cutoff {
    limit: i64,
    bound: i64,
    remaining_send: Vec<i64>,
    remaining_receive: Vec<i64>,
}

impl Cutoff {
    fn raise(&mut self, bound: i64) {
        self.bound = self.bound.max(bound);
    }

    fn reached(&self) -> Result<(), ScheduleError> {
        if self.bound >= self.limit {
            Err(ScheduleError::AboveCutoff {
                bound: self.bound,
                cutoff: self.limit,
            })
        } else {
            Ok(())
        }
    }
}

/// Checks what the placer assumes of every piece once, before anything is
/// placed: tiles in range, no tile twice among a piece's receivers, and no
/// self-receive whose controls would land on its own send's first events.
pub fn check_pieces(problem: &ExchangeProblem, paired: &[bool]) -> Result<(), ScheduleError> {
    let tiles = problem.tiles;
    let mut seen: Vec<u32> = Vec::new();
    for (piece, &is_paired) in paired.iter().enumerate() {
        let sender = problem.source_tile[piece];
        if sender >= tiles {
            return Err(ScheduleError::TileOutOfRange {
                piece,
                tile: sender,
                tiles,
            });
        }
        let receives = problem.receives_of(piece);
        seen.clear();
        seen.extend_from_slice(&problem.destination_tile[receives.clone()]);
        seen.sort_unstable();
        if let Some(pair) = seen.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(ScheduleError::DuplicateReceiver {
                piece,
                tile: pair[0],
            });
        }
        if let Some(&tile) = seen.iter().find(|&&tile| tile >= tiles) {
            return Err(ScheduleError::TileOutOfRange { piece, tile, tiles });
        }
        if seen.binary_search(&sender).is_ok() {
            let events = i64::from(piece_events(problem.words[piece], is_paired));
            let delay = i64::from(time_to_mux(physical_tile(sender), physical_tile(sender)))
                + select_offset(receives.len());
            let own_send = 0..RECEIVE_CONTROL_FORBIDDEN_SEND_EVENTS;
            if own_send.contains(&delay) || own_send.contains(&(delay + events)) {
                return Err(ScheduleError::SelfReceiveOnOwnSend {
                    piece,
                    tile: sender,
                });
            }
        }
    }
    Ok(())
}

/// Per receive: the select delay (`time_to_mux + c`, or the pair's route
/// time for a paired piece) and the payload delay (payload start minus
/// select) under the piece's width, and its part in the paired protocol.
fn receive_delays(problem: &ExchangeProblem, paired: &[bool]) -> (Vec<(i32, i32)>, Vec<PairRole>) {
    let mut delays = Vec::with_capacity(problem.receives());
    let mut roles = Vec::with_capacity(problem.receives());
    for (piece, &is_paired) in paired.iter().enumerate() {
        let receives = problem.receives_of(piece);
        let offset = select_offset(receives.len());
        let sender = physical_tile(problem.source_tile[piece]);
        for receive in receives {
            let tile = problem.destination_tile[receive];
            let receiver = physical_tile(tile);
            let (route, role) = if is_paired {
                let role = if issues_pair_select(sender, receiver) {
                    PairRole::Selecting
                } else {
                    PairRole::Following
                };
                (pair_route_time(sender, receiver), role)
            } else {
                (time_to_mux(sender, receiver), PairRole::Ordinary)
            };
            let select = i64::from(route) + offset;
            let payload = receive_payload_start(0, tile, is_paired);
            // Both are a few hundred events at most (IPU21.md).
            delays.push((select as i32, payload as i32));
            roles.push(role);
        }
    }
    (delays, roles)
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

impl<'a> Placer<'a> {
    /// A placer with nothing placed. `paired[p]` says whether piece `p`
    /// moves as paired 64-bit items and `eligible[p]` whether it may; the
    /// caller has run [`check_pieces`].
    pub fn new(
        problem: &'a ExchangeProblem,
        dependencies: &'a Dependencies,
        eligible: &'a [bool],
        paired: &[bool],
        policy: SchedulePolicy,
        width: TransferWidth,
    ) -> Self {
        let receives = problem.receives();
        let pieces = problem.pieces();
        let tiles = problem.tiles as usize;
        let (delays, roles) = receive_delays(problem, paired);
        Placer {
            problem,
            dependencies,
            eligible,
            tiles: vec![Tile::default(); tiles],
            ready: vec![0; pieces],
            schedule: Schedule {
                policy,
                chosen: policy,
                candidates: Vec::new(),
                width,
                send_start: vec![0; pieces],
                paired: paired.to_vec(),
                select: vec![0; receives],
                payload_start: vec![0; receives],
                pointer_write: vec![NO_EVENT; receives],
                deselect: vec![NO_EVENT; receives],
                tile_end: vec![0; tiles],
                horizon: 0,
                endpoint_bound: 0,
                latency_bound: 0,
                send_words: vec![0; tiles],
                receive_words: vec![0; tiles],
            },
            plans: Vec::new(),
            pointers: Vec::new(),
            delays,
            roles,
            cutoff: None,
            elements: ElementWindows::new(tiles),
            reaches: Vec::new(),
        }
    }

    /// Gives up (with [`ScheduleError::AboveCutoff`]) once the horizon is
    /// bound to reach `limit`: call before placing anything. Fails at once
    /// when the endpoint work alone reaches it.
    pub fn set_cutoff(&mut self, limit: u32) -> Result<(), ScheduleError> {
        let problem = self.problem;
        let tiles = problem.tiles as usize;
        let mut cutoff = Cutoff {
            limit: i64::from(limit),
            bound: 0,
            remaining_send: vec![0; tiles],
            remaining_receive: vec![0; tiles],
        };
        for piece in 0..problem.pieces() {
            let events = i64::from(piece_events(
                problem.words[piece],
                self.schedule.paired[piece],
            ));
            cutoff.remaining_send[problem.source_tile[piece] as usize] += events;
            for receive in problem.receives_of(piece) {
                cutoff.remaining_receive[problem.destination_tile[receive] as usize] += events;
            }
        }
        for tile in 0..tiles {
            cutoff.raise(cutoff.remaining_send[tile]);
            if cutoff.remaining_receive[tile] > 0 {
                cutoff.raise(cutoff.remaining_receive[tile] + RECEIVE_GUARD_EVENTS);
            }
        }
        let reached = cutoff.reached();
        self.cutoff = Some(cutoff);
        reached
    }

    /// The earliest start the frontiers allow for `piece` (its sender's
    /// stream, its receivers' pipelined frontiers, its predecessors), before
    /// the per-event control rules are applied. Never earlier than the event
    /// [`Placer::place`] would choose.
    pub fn earliest(&mut self, piece: usize) -> i64 {
        self.earliest_with_bottleneck(piece).0
    }

    /// [`Placer::earliest`], and the frontier that set it (`None` when a
    /// predecessor or the start of the phase did): `2 tile` for a tile's
    /// send stream, `2 tile + 1` for its receive port (see
    /// [`Placer::frontier`]).
    pub fn earliest_with_bottleneck(&mut self, piece: usize) -> (i64, Option<usize>) {
        let problem = self.problem;
        let sender = problem.source_tile[piece];
        let paired = self.schedule.paired[piece];
        let receives = problem.receives_of(piece);
        let mut start = self.tiles[sender as usize].send_frontier;
        let mut bottleneck = Some(2 * sender as usize);
        if paired {
            let other = partner(sender) as usize;
            if self.tiles[other].send_frontier > start {
                start = self.tiles[other].send_frontier;
                bottleneck = Some(2 * other);
            }
        }
        for &before in self.dependencies.of(piece) {
            let ready = self.ready[before as usize] + DEPENDENCY_SLACK;
            if ready > start {
                start = ready;
                bottleneck = None;
            }
        }
        self.plans.clear();
        for receive in receives {
            let tile = problem.destination_tile[receive];
            let (select_delay, payload_delay) = self.delays[receive];
            let (select_delay, payload_delay) = (i64::from(select_delay), i64::from(payload_delay));
            let state = &self.tiles[tile as usize];
            let destination = problem.destination[receive];
            let role = self.roles[receive];
            // A paired receive always writes its pointer (IPU21.md).
            let needs_pointer = role.paired()
                || state.receive_end_address
                    != Some((destination.allocation, u64::from(destination.offset)));
            let mut receiver_start = (state.receive_source_end - select_delay)
                .max(state.receive_payload_end - select_delay - payload_delay);
            if role.paired() {
                // The format-on (two events before the payload) waits for
                // the last ordinary payload to drain.
                receiver_start = receiver_start.max(
                    state.ordinary_payload_end + PAIRED_PAYLOAD_AFTER_FORMAT
                        - select_delay
                        - payload_delay,
                );
            }
            if receiver_start > start {
                start = receiver_start;
                bottleneck = Some(2 * tile as usize + 1);
            }
            start = start.max(-select_delay);
            self.plans.push(ReceivePlan {
                receive,
                tile: tile as usize,
                select_delay,
                payload_delay,
                needs_pointer,
                role,
            });
        }
        (start.max(0), bottleneck)
    }

    /// How many receives of the piece last passed to
    /// [`Placer::earliest_with_bottleneck`] need a PIC write (their
    /// destination does not continue where the receiver's last one ended).
    pub fn pointer_writes(&self) -> u32 {
        self.plans.iter().filter(|plan| plan.needs_pointer).count() as u32
    }

    /// The frontier of a resource: `2 tile` is the tile's send stream,
    /// `2 tile + 1` its receive port. It only grows; pieces waiting for a
    /// resource are keyed relative to it.
    pub fn frontier(&self, resource: usize) -> i64 {
        let state = &self.tiles[resource / 2];
        if resource.is_multiple_of(2) {
            state.send_frontier
        } else {
            state.receive_source_end
        }
    }

    /// Places `piece` at its earliest feasible event and returns that event.
    pub fn place(&mut self, piece: usize) -> Result<i64, ScheduleError> {
        let first = self.earliest(piece);
        self.place_evaluated(piece, first)
    }

    /// Places `piece`, whose [`Placer::earliest`] was the last evaluation
    /// and returned `first` (nothing was placed since).
    pub fn place_evaluated(&mut self, piece: usize, first: i64) -> Result<i64, ScheduleError> {
        let sender = self.problem.source_tile[piece] as usize;
        let paired = self.schedule.paired[piece];
        let events = i64::from(piece_events(self.problem.words[piece], paired));
        // Each endpoint in turn pushes the start past its own conflicts;
        // a pass that moves nothing leaves a start every endpoint accepts,
        // with every receive's PIC write collected on the way.
        let mut start = first;
        let mut pointers = std::mem::take(&mut self.pointers);
        let problem = self.problem;
        let words = problem.words[piece];
        let source = Reach::of(problem, problem.source[piece], words);
        self.reaches.clear();
        for plan in &self.plans {
            self.reaches.push((
                plan.tile,
                plan.select_delay + plan.payload_delay,
                Reach::of(problem, problem.destination[plan.receive], words),
            ));
        }
        loop {
            let before = start;
            start = self
                .elements
                .earliest(sender, source, &self.reaches, start, events);
            while !self.sender_free(sender, start, events, paired) {
                start += 1;
            }
            pointers.clear();
            for plan in &self.plans {
                loop {
                    if let Some(pointer) = self.receive_controls(plan, sender, start, events) {
                        pointers.push(pointer);
                        break;
                    }
                    start += 1;
                    if start - first > MAXIMUM_SEARCH_EVENTS {
                        return Err(ScheduleError::NoFeasibleEvent { piece, from: first });
                    }
                }
            }
            if start == before {
                break;
            }
        }
        self.pointers = pointers;
        self.elements
            .commit(sender, source, &self.reaches, start, events);
        self.commit(piece, sender, start, events, paired)?;
        Ok(start)
    }

    /// When `piece` (placed) is sent and has landed on every receiver.
    pub fn ready(&self, piece: usize) -> i64 {
        self.ready[piece]
    }

    /// Whether the sender's own rules allow a send at `start`: no receive
    /// control of its own on the send's first two events, and no send of
    /// equal shape two events before or after.
    fn sender_free(&self, sender: usize, start: i64, events: i64, paired: bool) -> bool {
        let own = &self.tiles[sender];
        if own.has_control(start) || own.has_control(start + 1) {
            return false;
        }
        !own.sends
            .iter()
            .rev()
            .take(2)
            .any(|&(other, other_events, other_paired)| {
                (other - start).abs() == 2
                    && i64::from(other_events) == events
                    && other_paired == paired
            })
    }

    /// Whether `plan`'s receive controls fit when the piece starts at
    /// `start`: `Some` of its PIC write event (or -1 when none is needed).
    fn receive_controls(
        &self,
        plan: &ReceivePlan,
        sender: usize,
        start: i64,
        events: i64,
    ) -> Option<i64> {
        let state = &self.tiles[plan.tile];
        let tentative = (plan.tile == sender).then_some(start);
        let select = start + plan.select_delay;
        if select < 0 {
            return None;
        }
        let deselect = select + events;
        if plan.role.selects() {
            let reuses_deselect = state.pending_deselect == Some(select);
            if !reuses_deselect && !state.control_free(select, tentative) {
                return None;
            }
            if state.forbidden(select, tentative) || !state.control_free(deselect, tentative) {
                return None;
            }
        }
        let payload = select + plan.payload_delay;
        if plan.role.paired() {
            // Format on, pointer, format off: each on an event of its own.
            let format = payload - PAIRED_PAYLOAD_AFTER_FORMAT;
            let controls = [format, payload, format + events];
            let selects = plan.role.selects();
            let clear = controls.iter().all(|&event| {
                state.control_free(event, tentative)
                    && !(selects && (event == select || event == deselect))
            });
            return (clear && format >= state.ordinary_payload_end).then_some(payload);
        }
        if !plan.needs_pointer {
            return Some(-1);
        }
        let lowest = state.receive_payload_end.max(0);
        let mut candidate = payload;
        while candidate >= lowest {
            if candidate != select
                && candidate != deselect
                && state.control_free(candidate, tentative)
            {
                return Some(candidate);
            }
            candidate -= 1;
        }
        None
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
            own.add_send(start, events as u32, paired);
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
            if plan.role.selects() {
                if state.pending_deselect == Some(select)
                    && let Some(previous) = state.last_receive
                {
                    self.schedule.deselect[previous] = NO_EVENT;
                }
                state.add_control(select);
                state.add_control(select + events);
                state.pending_deselect = Some(select + events);
                self.schedule.deselect[plan.receive] = event(piece, select + events)?;
            } else {
                state.pending_deselect = None;
            }
            if plan.role.paired() {
                let format = payload - PAIRED_PAYLOAD_AFTER_FORMAT;
                state.add_control(format);
                state.add_control(format + events);
            } else {
                state.ordinary_payload_end = payload + events;
            }
            if pointer >= 0 {
                state.add_control(pointer);
                self.schedule.pointer_write[plan.receive] = event(piece, pointer)?;
            }
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
        }
        self.ready[piece] = ready;
        if let Some(cutoff) = &mut self.cutoff {
            let own = &self.tiles[sender];
            cutoff.remaining_send[sender] -= events;
            cutoff.raise(
                own.end
                    .max(own.send_frontier + cutoff.remaining_send[sender]),
            );
            for plan in &self.plans {
                let state = &self.tiles[plan.tile];
                let remaining = &mut cutoff.remaining_receive[plan.tile];
                *remaining -= events;
                let receiving = if *remaining > 0 {
                    state.receive_source_end + *remaining + RECEIVE_GUARD_EVENTS
                } else {
                    0
                };
                let bound = state.end.max(receiving);
                cutoff.raise(bound);
            }
            cutoff.reached()?;
        }
        Ok(())
    }

    /// The finished schedule, with per-tile ends, horizon and totals.
    pub fn finish(mut self) -> Result<Schedule, ScheduleError> {
        let problem = self.problem;
        let tiles = problem.tiles as usize;
        let mut send_events = vec![0u64; tiles];
        let mut receive_events = vec![0u64; tiles];
        for piece in 0..problem.pieces() {
            let words = problem.words[piece];
            let events = u64::from(piece_events(words, self.eligible[piece]));
            let sender = problem.source_tile[piece] as usize;
            let sent = &mut self.schedule.send_words[sender];
            *sent = sent.saturating_add(words);
            send_events[sender] += events;
            for receive in problem.receives_of(piece) {
                let receiver = problem.destination_tile[receive] as usize;
                let received = &mut self.schedule.receive_words[receiver];
                *received = received.saturating_add(words);
                receive_events[receiver] += events;
            }
        }
        for (tile, state) in self.tiles.iter().enumerate() {
            self.schedule.tile_end[tile] = event(0, state.end)?;
        }
        self.schedule.horizon = self.schedule.tile_end.iter().copied().max().unwrap_or(0);
        let bound = send_events
            .iter()
            .zip(&receive_events)
            .map(|(&sent, &received)| sent.max(received))
            .max()
            .unwrap_or(0);
        self.schedule.endpoint_bound = u32::try_from(bound).unwrap_or(u32::MAX);
        Ok(self.schedule)
    }
}
