//! The independent checkers pass on every shipped build and fail on
//! corrupted ones.

use crate::common;

use common::query;
use superstep::direct::compile;
use superstep::expand::program::Step;
use superstep::expand::validate::{ProgramCheckError, check_program};
use superstep::layout::validate::check_layouts;

#[test]
fn every_shipped_build_passes_the_checkers() {
    for (file, sets) in [
        ("queries/vit-tiny.toml", &[][..]),
        (
            "queries/vit-tiny.toml",
            &["workload.batch=3", "machine.tiles=5"][..],
        ),
        ("queries/vit-b16.toml", &[][..]),
        ("queries/pe-core-l14.toml", &[][..]),
        ("queries/siglip-so400m.toml", &[][..]),
    ] {
        let query = query(file, sets);
        let (_, layouts, program) = compile(&query).expect("compile");
        check_layouts(&layouts, query.machine.tiles)
            .unwrap_or_else(|error| panic!("{file}: {error}"));
        let check = check_program(&program).unwrap_or_else(|error| panic!("{file}: {error}"));
        assert!(check.locations > 0 && check.written_ranges > 0);
    }
}

fn first_exchange(steps: &mut [Step]) -> Option<&mut superstep::expand::program::TransferList> {
    for step in steps {
        match step {
            Step::Exchange { transfers, .. } if transfers.len() > 1 => return Some(transfers),
            Step::Repeat { body, .. } => {
                if let Some(found) = first_exchange(body) {
                    return Some(found);
                }
            }
            _ => {}
        }
    }
    None
}

#[test]
fn a_transfer_past_its_allocation_is_caught() {
    let (_, _, mut program) = compile(&query("queries/vit-tiny.toml", &[])).expect("compile");
    let transfers = first_exchange(&mut program.steps).expect("exchange");
    transfers.words[0] += 100_000;
    assert!(matches!(
        check_program(&program),
        Err(ProgramCheckError::OutOfBounds { .. })
    ));
}

#[test]
fn overlapping_receives_are_caught() {
    let (_, _, mut program) = compile(&query("queries/vit-tiny.toml", &[])).expect("compile");
    let transfers = first_exchange(&mut program.steps).expect("exchange");
    let first = transfers.destinations_of(0)[0];
    let second_start = transfers.destination_start[1] as usize;
    transfers.destinations[second_start] = first;
    transfers.words[1] = transfers.words[1].min(transfers.words[0]);
    assert!(
        matches!(
            check_program(&program),
            Err(ProgramCheckError::OverlappingWrites { .. })
        ),
        "{:?}",
        check_program(&program)
    );
}

#[test]
fn a_transfer_from_the_wrong_tile_is_caught() {
    let (_, _, mut program) = compile(&query("queries/vit-tiny.toml", &[])).expect("compile");
    let transfers = first_exchange(&mut program.steps).expect("exchange");
    transfers.source_tile[0] = (transfers.source_tile[0] + 1) % 16;
    assert!(matches!(
        check_program(&program),
        Err(ProgramCheckError::WrongTile { .. })
    ));
}

/// The schedule validator and the row checker read IPU21.md's fabric
/// formulas themselves; their readings and the scheduler's agree on every
/// sender/receiver pair of the C600.
#[test]
fn the_checkers_fabric_formulas_agree_with_the_scheduler_on_every_pair() {
    use superstep::rows::fabric as rows_fabric;
    use superstep::schedule::validate::fabric as validator_fabric;
    use superstep::target::mapping::{C600_TILES, physical_row, physical_tile};
    use superstep::target::timing;
    let physical: Vec<u32> = (0..C600_TILES).map(physical_tile).collect();
    let mut pairs = 0u64;
    for &receiver in &physical {
        let row = i64::from(physical_row(receiver));
        assert_eq!(
            validator_fabric::row_of(receiver),
            row,
            "receiver {receiver}"
        );
        assert_eq!(
            rows_fabric::physical_row(receiver),
            row,
            "receiver {receiver}"
        );
        assert_eq!(
            validator_fabric::ordinary_payload(0, receiver),
            timing::payload_start(0, receiver)
        );
        assert_eq!(
            validator_fabric::format_on(0, receiver),
            timing::paired_format_select(0, receiver)
        );
        for &sender in &physical {
            let scheduler = i64::from(timing::time_to_mux(sender, receiver));
            let way = timing::direction(sender, receiver);
            if validator_fabric::route_time(sender, receiver) != scheduler
                || rows_fabric::time_to_mux(sender, receiver) != scheduler
                || validator_fabric::direction_bit(sender, receiver) != way
                || rows_fabric::direction(sender, receiver) != way
            {
                panic!(
                    "physical {sender} -> {receiver}: scheduler {scheduler}/{way}, validator {}/{}, \
                     row checker {}/{}",
                    validator_fabric::route_time(sender, receiver),
                    validator_fabric::direction_bit(sender, receiver),
                    rows_fabric::time_to_mux(sender, receiver),
                    rows_fabric::direction(sender, receiver)
                );
            }
            pairs += 1;
        }
    }
    assert_eq!(pairs, u64::from(C600_TILES) * u64::from(C600_TILES));
}
