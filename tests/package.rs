//! The package: written, read back identical, and its finalized rows decode
//! to placed addresses inside the allocations they name.

use crate::common;

use common::query;
use superstep::package::Package;
use superstep::rows::{RowEvent, decode_row};
use superstep::session::Session;

#[test]
fn package_round_trips_and_rows_point_into_placed_memory() {
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    session.build().expect("build");
    let package = session.package().expect("package");
    let path = std::env::temp_dir().join(format!("superstep-package-{}.bin", std::process::id()));
    let key = superstep::build_file::package_build_key(&query("queries/vit-tiny.toml", &[]));
    let bytes = package.write(&path, &key).expect("write");
    assert!(bytes > 0);
    let read = Package::read(&path).expect("read");
    assert_eq!(read, package);
    std::fs::remove_file(&path).ok();
    assert_eq!(package.phases.len(), session_phase_count(&session));
    let mut sends = 0;
    for phase in &package.phases {
        for (tile, row) in phase.rows.iter().enumerate() {
            for event in decode_row(row).expect("finalized rows decode") {
                if let RowEvent::Send { address, .. } = event {
                    sends += 1;
                    let address = address * 4;
                    let inside = package.allocations.iter().any(|allocation| {
                        allocation.tile == tile as u32
                            && address >= allocation.address
                            && address
                                < allocation.address + allocation.bytes * allocation.iterations
                    });
                    assert!(
                        inside,
                        "phase {} tile {tile}: send from {address:#x} outside every allocation",
                        phase.key
                    );
                }
            }
        }
    }
    assert!(sends > 0);
}

#[test]
fn a_foreign_file_is_not_a_package() {
    let path = std::env::temp_dir().join(format!(
        "superstep-not-a-package-{}.bin",
        std::process::id()
    ));
    std::fs::write(&path, b"hello, world").expect("write");
    assert!(Package::read(&path).is_err());
    std::fs::remove_file(&path).ok();
}

fn session_phase_count(session: &Session) -> usize {
    session.phases().len()
}

/// `verify` checks what the file says, not only that it decodes: a placed
/// address outside the tile, a row word that does not decode, a patch of a
/// word past its row and a short per-tile table are each found and named.
#[test]
fn verification_finds_faults_in_a_decodable_package() {
    use superstep::package::verify::verify_package;

    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    session.build().expect("build");
    let package = session.package().expect("package");
    let clean = verify_package(&package);
    assert!(clean.passed(), "{clean}");
    assert!(clean.sends > 0 && clean.row_words > 0 && clean.step_locations > 0);

    let mut outside = package.clone();
    outside.allocations[0].address = 0x10;
    let found = verify_package(&outside);
    assert!(!found.passed());
    assert!(
        found
            .failures
            .iter()
            .any(|failure| failure.starts_with("allocation 0 ")),
        "{found}"
    );

    let mut garbled = package.clone();
    let (phase, tile) = garbled
        .phases
        .iter()
        .enumerate()
        .find_map(|(index, phase)| {
            phase
                .rows
                .iter()
                .position(|row| !row.is_empty())
                .map(|tile| (index, tile))
        })
        .expect("a non-empty row");
    garbled.phases[phase].rows[tile][0] = u32::MAX;
    let key = garbled.phases[phase].key.clone();
    let found = verify_package(&garbled);
    assert!(
        found
            .failures
            .iter()
            .any(|failure| failure.contains(&format!("phase {key}, tile {tile}"))),
        "{found}"
    );

    let mut patched = package.clone();
    let rows = patched.phases[phase].rows[tile].len() as u32;
    patched.sharing_patches.push(superstep::rows::SharingPatch {
        tile: tile as u32,
        phase: phase as u32,
        word: rows,
    });
    assert!(!verify_package(&patched).passed());

    let mut short = package;
    short.exchange_table_base.pop();
    let found = verify_package(&short);
    assert!(
        found
            .failures
            .iter()
            .any(|failure| failure.contains("exchange_table_base has")),
        "{found}"
    );
}
