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
