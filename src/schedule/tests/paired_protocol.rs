//! The validator against the exchange rules confirmed on hardware for
//! paired (64-bit) transfers (IPU21.md): the scheduler's schedules keep
//! them, and a schedule breaking one rule (the form the scheduler used to
//! make, or a hand-made shift) is refused with that rule named.

use super::*;
use crate::schedule::timing::{issues_pair_select, pair_route_time};
use crate::target::mapping::partner;

const TILES: u32 = 16;

/// A transfer: sender, words, and (receiver, destination offset) pairs.
type Transfer<'a> = (u32, u32, &'a [(u32, u32)]);

/// A phase of the given transfers, each tile holding one 8 KiB block.
fn phase(transfers: &[Transfer]) -> ExchangeProblem {
    let allocations: Vec<_> = (0..TILES)
        .map(|tile| allocation(tile, 8192, 1, tile))
        .collect();
    let at = |tile: u32, offset| Location {
        allocation: AllocationId(tile),
        offset,
    };
    let mut list = TransferList::default();
    for &(sender, words, receivers) in transfers {
        let destinations: Vec<Destination> = receivers
            .iter()
            .map(|&(tile, offset)| Destination {
                tile,
                location: at(tile, offset),
            })
            .collect();
        list.push(sender, at(sender, 0), words, &destinations);
    }
    ExchangeProblem::from_transfers(&list, &allocations, 1, TILES).expect("well formed")
}

/// A receiving pair whose two members' `time_to_mux` from `sender` differ.
fn uneven_pair(sender: u32) -> u32 {
    (2..TILES)
        .step_by(2)
        .filter(|&tile| tile != sender && partner(tile) != sender)
        .find(|&tile| {
            time_to_mux(physical_tile(sender), physical_tile(tile))
                != time_to_mux(physical_tile(sender), physical_tile(tile + 1))
        })
        .expect("some pair is uneven")
}

fn paired_schedule(problem: &ExchangeProblem) -> Schedule {
    let schedule = schedule(problem, SchedulePolicy::Latency, TransferWidth::Paired64).unwrap();
    validate(problem, &schedule).expect("the scheduler keeps the paired protocol");
    schedule
}

/// Moves paired `piece` to start at `start` under the paired protocol.
fn retime_paired(problem: &ExchangeProblem, schedule: &mut Schedule, piece: usize, start: u32) {
    schedule.send_start[piece] = start;
    let sender = physical_tile(problem.source_tile[piece]);
    let events = problem.words[piece] / 2;
    for receive in problem.receives_of(piece) {
        let receiver = physical_tile(problem.destination_tile[receive]);
        let select = i64::from(start) + i64::from(pair_route_time(sender, receiver));
        let payload = paired_payload_start(select, receiver) as u32;
        schedule.select[receive] = select as u32;
        schedule.payload_start[receive] = payload;
        schedule.pointer_write[receive] = payload;
        schedule.deselect[receive] = if issues_pair_select(sender, receiver) {
            select as u32 + events
        } else {
            NO_EVENT
        };
    }
}

fn refused(problem: &ExchangeProblem, schedule: &Schedule) -> ValidationError {
    validate(problem, schedule).expect_err("the validator refuses it")
}

/// Both members select at the pair's route time, the later of their two
/// `time_to_mux`: each member at its own (the old form) is refused.
#[test]
fn paired_members_select_at_the_later_route_time() {
    let pair = uneven_pair(0);
    let problem = phase(&[(0, 256, &[(pair, 0), (pair + 1, 0)])]);
    let good = paired_schedule(&problem);
    assert_eq!(good.select[0], good.select[1]);
    let mut own_times = good.clone();
    for receive in 0..2 {
        let receiver = physical_tile(problem.destination_tile[receive]);
        let select =
            i64::from(good.send_start[0]) + i64::from(time_to_mux(physical_tile(0), receiver));
        own_times.select[receive] = select as u32;
        own_times.payload_start[receive] = paired_payload_start(select, receiver) as u32;
    }
    assert!(matches!(
        refused(&problem, &own_times),
        ValidationError::SelectEvent { .. }
    ));
}

/// Only the member with the smaller `time_to_mux` selects and returns to
/// neutral: a return to neutral on the other member is refused.
#[test]
fn only_the_early_member_selects() {
    let pair = uneven_pair(0);
    let problem = phase(&[(0, 256, &[(pair, 0), (pair + 1, 0)])]);
    let good = paired_schedule(&problem);
    let follower = (0..2)
        .find(|&receive| good.deselect[receive] == NO_EVENT)
        .expect("one member does not select");
    let leader = 1 - follower;
    assert!(good.deselect[leader] != NO_EVENT);
    let mut both = good.clone();
    both.deselect[follower] = good.select[follower] + 128;
    let error = refused(&problem, &both);
    assert!(
        matches!(error, ValidationError::Deselect { tile, .. } if tile == problem.destination_tile[follower]),
        "{error}"
    );
}

/// Each member writes its pointer two events after its format-on, always.
#[test]
fn paired_pointers_follow_the_format_on() {
    let pair = uneven_pair(0);
    let problem = phase(&[(0, 256, &[(pair, 0), (pair + 1, 0)])]);
    let good = paired_schedule(&problem);
    assert_eq!(good.pointer_write[..2], good.payload_start[..2]);
    for pointer in [good.payload_start[0] - 1, NO_EVENT] {
        let mut moved = good.clone();
        moved.pointer_write[0] = pointer;
        let error = refused(&problem, &moved);
        assert!(
            matches!(error, ValidationError::PairedProtocol { piece: 0, .. }),
            "{error}"
        );
    }
}

/// A format change never shares an event with a source select: an
/// ordinary receive selecting on the event a pair member switches its
/// format off is refused.
#[test]
fn format_changes_keep_clear_of_selects() {
    let pair = uneven_pair(0);
    let problem = phase(&[
        (0, 256, &[(pair, 0), (pair + 1, 0)]),
        (12, 10, &[(pair, 4096)]),
    ]);
    let good = paired_schedule(&problem);
    let format_off = i64::from(good.payload_start[0]) - 2 + 128;
    let mut clash = good.clone();
    let route = i64::from(time_to_mux(physical_tile(12), physical_tile(pair))) + 2;
    retime(&problem, &mut clash, 1, (format_off - route) as u32);
    clash.pointer_write[2] = clash.payload_start[2];
    assert_eq!(i64::from(clash.select[2]), format_off);
    let error = refused(&problem, &clash);
    assert!(
        matches!(error, ValidationError::ControlCollision { event, .. } if event == format_off),
        "{error}"
    );
}

/// A phase where tile 12 sends 200 words to the following member of a
/// pair and tile 0 then sends 256 words paired to that pair, scheduled,
/// with the paired piece moved so that its format-on lands one event before
/// the ordinary payload into the following member has drained (its select
/// right at the end of the ordinary source window, so nothing else
/// overlaps). Also used by the row checker's tests.
pub(crate) fn undrained() -> (ExchangeProblem, Schedule) {
    let pair = uneven_pair(0);
    let follower = [pair, pair + 1]
        .into_iter()
        .find(|&tile| !issues_pair_select(physical_tile(0), physical_tile(tile)))
        .expect("one member follows");
    let problem = phase(&[
        (12, 200, &[(follower, 4096)]),
        (0, 256, &[(pair, 0), (pair + 1, 0)]),
    ]);
    let mut schedule =
        schedule(&problem, SchedulePolicy::Latency, TransferWidth::Paired64).unwrap();
    assert!(!schedule.paired[0] && schedule.paired[1]);
    validate(&problem, &schedule).unwrap();
    let receiver = physical_tile(follower);
    let drained = i64::from(schedule.payload_start[0]) + 200;
    let format = drained - 1;
    let select = format - (paired_payload_start(0, receiver) - 2);
    assert_eq!(select, i64::from(schedule.deselect[0]));
    let start = select - i64::from(pair_route_time(physical_tile(0), receiver));
    retime_paired(&problem, &mut schedule, 1, start as u32);
    (problem, schedule)
}

/// A paired format-on may only come after every ordinary payload into that
/// receiver has drained: one event early (the source and payload windows
/// themselves do not overlap) is refused.
#[test]
fn a_format_on_waits_for_ordinary_payloads_to_drain() {
    let (problem, schedule) = undrained();
    let error = refused(&problem, &schedule);
    assert!(
        matches!(error, ValidationError::PairedProtocol { piece: 1, .. }),
        "{error}"
    );
}

/// Neither the sender nor its partner receives its own paired send, and
/// both members of a receiving pair receive at the same address: pieces
/// breaking either are not paired by the scheduler and refused when paired.
#[test]
fn own_pair_delivery_and_split_addresses_are_never_paired() {
    for receivers in [
        &[(0, 4096), (1, 4096), (4, 4096), (5, 4096)][..],
        &[(4, 0), (5, 64)][..],
    ] {
        let problem = phase(&[(0, 256, receivers)]);
        let mut schedule =
            schedule(&problem, SchedulePolicy::Latency, TransferWidth::Paired64).unwrap();
        assert!(!schedule.paired[0], "{receivers:?}");
        validate(&problem, &schedule).unwrap();
        schedule.paired[0] = true;
        let error = refused(&problem, &schedule);
        assert!(
            matches!(error, ValidationError::PairedIneligible { piece: 0, .. }),
            "{receivers:?}: {error}"
        );
    }
}
