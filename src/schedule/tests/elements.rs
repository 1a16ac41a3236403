//! The memory element rule (IPU21.md, "Exchange rules confirmed on
//! hardware"): on one tile a send and a receive payload that may touch one
//! element of one allocation never share an event. The scheduler serialises
//! them, the validator refuses a schedule that overlaps them, and sends and
//! receives an element apart (or in different allocations) stay concurrent.

use super::*;

/// Tile 0 sends 256 words from offset 0 of its block to tile 1 while tile 1
/// sends 256 words into tile 0's block at `offset` (a block of `bytes`);
/// with `separate`, tile 0 receives into a second block instead. Tile 1
/// sends and receives in different blocks.
pub(crate) fn crossing(offset: u32, bytes: u32, separate: bool) -> ExchangeProblem {
    let mut allocations = vec![allocation(0, bytes, 1, 0), allocation(1, 4096, 1, 1)];
    allocations.push(allocation(0, bytes, 1, if separate { 2 } else { 0 }));
    allocations.push(allocation(1, 4096, 1, 3));
    let at = |allocation: u32, offset| Location {
        allocation: AllocationId(allocation),
        offset,
    };
    let mut list = TransferList::default();
    list.push(
        0,
        at(0, 0),
        256,
        &[Destination {
            tile: 1,
            location: at(3, 0),
        }],
    );
    list.push(
        1,
        at(1, 0),
        256,
        &[Destination {
            tile: 0,
            location: at(2, offset),
        }],
    );
    ExchangeProblem::from_transfers(&list, &allocations, 1, 4).expect("well formed")
}

fn overlaps(problem: &ExchangeProblem, schedule: &Schedule) -> bool {
    let send = i64::from(schedule.send_start[0]);
    let receive = i64::from(schedule.payload_start[problem.receives_of(1).start]);
    receive < send + 256 && send < receive + 256
}

#[test]
fn a_send_and_a_receive_in_one_element_are_serialised_and_refused_when_overlapping() {
    // 8 KiB apart in one 64 KiB allocation: possibly one element.
    let problem = crossing(8192, 65536, false);
    let good = schedule(&problem, SchedulePolicy::Latency, TransferWidth::Word32).unwrap();
    validate(&problem, &good).expect("the scheduler keeps the element rule");
    assert!(!overlaps(&problem, &good), "{good:?}");
    // Both pieces at one event (what the scheduler made before the rule).
    let mut both = good.clone();
    for piece in 0..2 {
        retime(&problem, &mut both, piece, 100);
        let receive = problem.receives_of(piece).start;
        both.pointer_write[receive] = both.payload_start[receive];
    }
    assert!(overlaps(&problem, &both));
    let error = validate(&problem, &both).expect_err("the validator refuses it");
    assert!(
        matches!(
            error,
            ValidationError::ElementConflict {
                piece: 1,
                send: 0,
                tile: 0,
                ..
            }
        ),
        "{error}"
    );
}

#[test]
fn accesses_an_element_apart_or_in_other_allocations_stay_concurrent() {
    // 48 KiB apart (more than any element): no element in common.
    let far = crossing(49152, 65536, false);
    // Different allocations: the placer keeps them in different elements.
    let other = crossing(0, 65536, true);
    for problem in [far, other] {
        let found = schedule(&problem, SchedulePolicy::Latency, TransferWidth::Word32).unwrap();
        validate(&problem, &found).expect("valid");
        assert!(overlaps(&problem, &found), "{found:?}");
    }
}
