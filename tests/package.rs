//! The package: written, read back identical, and its finalized rows decode
//! to placed addresses inside the allocations they name.

mod common;

use common::query;
use superstep::driver::Session;
use superstep::package::{Package, assemble_package};
use superstep::rows::{RowEvent, decode_row};

#[test]
fn package_round_trips_and_rows_point_into_placed_memory() {
    let mut session = Session::new(&query("queries/vit-tiny.toml", &[]));
    session.build().expect("build");
    let package = assemble_package(&session).expect("package");
    let path = std::env::temp_dir().join(format!("superstep-package-{}.bin", std::process::id()));
    let key = superstep::package::build_key(&query("queries/vit-tiny.toml", &[]));
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
    superstep::queries::phases::phase_keys(&session.db, session.inputs).len()
}
