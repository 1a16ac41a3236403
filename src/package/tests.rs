//! Tests of the package on a hand-built two-tile package: the file round
//! trip (payload equal to bincode's encoding of the package, written and
//! read back equal with its header), every damaged byte stream (each
//! truncation, trailing bytes, a flipped payload byte, another format
//! version, a foreign file, a digest-valid payload that is not a package)
//! rejected with its typed error and no panic, and `verify_package`
//! counting what it checks and naming each hand-made fault.

use super::file::{HEADER_BYTES, PackageHeader, decode, split};
use super::verify::verify_package;
use super::*;
use crate::expand::program::{
    AllocationId, Destination, LocalCopy, Location, Provenance, Reason, TransferList,
};
use crate::patch::{BaseChoice, PatchWord};
use crate::target::encoding::Instruction;

fn at(allocation: u32, address: u32) -> Location {
    Location {
        allocation: AllocationId(allocation),
        offset: address,
    }
}

fn words(instructions: &[Instruction]) -> Vec<u32> {
    instructions
        .iter()
        .flat_map(|instruction| instruction.encode().expect("encodable").as_slice().to_vec())
        .collect()
}

fn provenance(reason: Reason) -> Provenance {
    Provenance {
        op: 0,
        value: None,
        reason,
    }
}

/// Two tiles. Allocations: 0 on tile 0 at `0x4c000` (64 bytes), 1 on
/// tile 1 at `0x4c000` (64 bytes), 2 on tile 0 at `0x4c040` (32 bytes, 3
/// instances). Steps: a copy on tile 0 from allocation 0 into allocation
/// 2, then an exchange of 4 words from `0x4c010` on tile 0 to allocation 1.
/// The phase's rows: tile 0 sends 4 words from word address `0x4c010 / 4`;
/// tile 1 points its PIC at `0x4c000 / 4` and waits. One Repeat patch
/// (tile 0, word 0) and one sharing patch (tile 1, word 1).
fn package() -> Package {
    let placed = |tile: u32, address: u32, bytes: u32, iterations: u32| PlacedAllocation {
        tile,
        address,
        bytes,
        iterations,
        class: MemoryClass::Standard,
    };
    let mut transfers = TransferList::default();
    transfers.push(
        0,
        at(0, 0x4c010),
        4,
        &[Destination {
            tile: 1,
            location: at(1, 0x4c000),
        }],
    );
    Package {
        name: String::from("hand"),
        tiles: 2,
        fp8_scale: crate::model::quantisation::Fp8Scale::Fixed(-3),
        names: vec![String::from("op")],
        allocations: vec![
            placed(0, 0x4c000, 64, 1),
            placed(1, 0x4c000, 64, 1),
            placed(0, 0x4c040, 32, 3),
        ],
        steps: vec![
            Step::Copies {
                provenance: provenance(Reason::Rearrange),
                copies: vec![LocalCopy {
                    tile: 0,
                    source: at(0, 0x4c000),
                    destination: at(2, 0x4c040),
                    row_bytes: 16,
                    rows: 1,
                    source_stride: 16,
                    destination_stride: 16,
                }],
            },
            Step::Exchange {
                provenance: provenance(Reason::Rearrange),
                transfers,
            },
        ],
        phases: vec![PackagePhase {
            key: String::from("phase-a"),
            executions: 1,
            step_path: vec![1],
            rows: vec![
                words(&[Instruction::Send {
                    words: 4,
                    address: 0x4c010 / 4,
                    control: 1,
                }]),
                words(&[
                    Instruction::DelayPic {
                        events: 1,
                        selector: 0,
                        value: 0x4c000 / 4,
                    },
                    Instruction::Delay { events: 80 },
                ]),
            ],
            repeat_patches: vec![TilePatches {
                tile: 0,
                base: BaseChoice::Zero,
                zero_base_words: 1,
                words: vec![PatchWord {
                    word: 0,
                    step_words: 8,
                }],
            }],
            stored_rows: vec![0, 0],
        }],
        sharing_patches: vec![SharingPatch {
            tile: 1,
            phase: 0,
            word: 1,
        }],
        exchange_table_base: vec![0x4c100, 0x4c100],
        patch_lists_base: vec![0x4c200, 0x4c200],
    }
}

fn build_key() -> CacheKey {
    CacheKey([7; 32])
}

/// The whole file's bytes: header then payload.
fn file_bytes(package: &Package) -> Vec<u8> {
    let payload = package.encode().expect("encodes");
    let mut bytes = PackageHeader::of(&payload, &build_key())
        .to_bytes()
        .to_vec();
    bytes.extend_from_slice(&payload);
    bytes
}

fn temporary(name: &str) -> std::path::PathBuf {
    std::env::temp_dir().join(format!(
        "superstep-package-unit-{}-{name}.bin",
        std::process::id()
    ))
}

#[test]
fn the_payload_is_bincode_and_decodes_to_the_same_package() {
    let package = package();
    let payload = package.encode().expect("encodes");
    assert_eq!(payload, bincode::serialize(&package).expect("serializes"));
    assert_eq!(decode(&payload, "memory").expect("decodes"), package);
}

/// The file is written from the payload's parts, never joined: the header
/// over the parts is the header over their concatenation.
#[test]
fn the_header_over_the_parts_is_the_header_over_the_payload() {
    let parts = package().encode_parts().expect("encodes");
    let slices: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
    let joined = slices.concat();
    assert!(slices.iter().filter(|part| !part.is_empty()).count() >= 3);
    assert_eq!(
        PackageHeader::of_parts(&slices, &build_key()).to_bytes(),
        PackageHeader::of(&joined, &build_key()).to_bytes()
    );
}

#[test]
fn a_written_package_reads_back_equal_with_its_header() {
    let package = package();
    let path = temporary("round-trip");
    let length = package.write(&path, &build_key()).expect("writes");
    let on_disk = std::fs::metadata(&path).expect("written").len();
    assert_eq!(length, on_disk);
    let (read, header) = Package::read_with_header(&path).expect("reads");
    let header_only = PackageHeader::read(&path).expect("reads the header");
    std::fs::remove_file(&path).ok();
    assert_eq!(read, package);
    assert_eq!(header.build, build_key());
    assert_eq!(header.payload_bytes, on_disk - HEADER_BYTES as u64);
    assert_eq!(header_only, header);
    // No temporary file is left beside it.
    let leftovers = std::fs::read_dir(std::env::temp_dir())
        .expect("temporary folder")
        .filter_map(Result::ok)
        .filter(|entry| {
            entry.file_name().to_string_lossy().starts_with(&format!(
                "superstep-package-unit-{}-round-trip.bin.tmp",
                std::process::id()
            ))
        })
        .count();
    assert_eq!(leftovers, 0);
}

#[test]
fn every_truncation_is_a_typed_error() {
    let bytes = file_bytes(&package());
    let total = bytes.len() as u64;
    for length in 0..bytes.len() {
        let error = split(&bytes[..length], "cut").expect_err("truncated");
        match length {
            // Not even the six bytes of `SSTPKG`: not a package at all.
            0..6 => assert!(
                matches!(error, PackageError::Foreign { .. }),
                "{length}: {error}"
            ),
            // The magic but not the whole header.
            6..80 => assert!(
                matches!(
                    error,
                    PackageError::Truncated {
                        expected: 80,
                        found,
                        ..
                    } if found == length as u64
                ),
                "{length}: {error}"
            ),
            // The header promises the whole payload.
            _ => assert!(
                matches!(
                    error,
                    PackageError::Truncated { expected, found, .. }
                        if expected == total && found == length as u64
                ),
                "{length}: {error}"
            ),
        }
    }
    assert!(split(&bytes, "whole").is_ok());
}

#[test]
fn trailing_bytes_a_flipped_byte_and_another_version_are_named() {
    let bytes = file_bytes(&package());
    let mut longer = bytes.clone();
    longer.extend_from_slice(b"tail");
    assert!(matches!(
        split(&longer, "longer"),
        Err(PackageError::TrailingBytes { extra: 4, .. })
    ));
    // Any payload byte flipped: the digest no longer matches.
    for position in [
        HEADER_BYTES,
        (HEADER_BYTES + bytes.len()) / 2,
        bytes.len() - 1,
    ] {
        let mut flipped = bytes.clone();
        flipped[position] ^= 0x40;
        assert!(
            matches!(
                split(&flipped, "flipped"),
                Err(PackageError::Corrupt { .. })
            ),
            "{position}"
        );
    }
    let mut old = bytes.clone();
    old[..8].copy_from_slice(b"SSTPKG02");
    match split(&old, "old") {
        Err(PackageError::Version {
            found, expected, ..
        }) => assert_eq!((found.as_str(), expected.as_str()), ("02", "07")),
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        split(b"PK\x03\x04 a zip file", "zip"),
        Err(PackageError::Foreign { .. })
    ));
    // The error names the file.
    let error = split(&bytes[..40], "artifacts/hand/package.bin").expect_err("truncated");
    assert!(
        error
            .to_string()
            .starts_with("artifacts/hand/package.bin is truncated"),
        "{error}"
    );
}

#[test]
fn a_payload_with_a_valid_digest_that_is_not_a_package_is_an_encoding_error() {
    // The name's length prefix claims 2^64 - 1 bytes: the size limit (the
    // payload's length) refuses it before anything is allocated.
    let payload = [0xff_u8; 16];
    let mut bytes = PackageHeader::of(&payload, &build_key())
        .to_bytes()
        .to_vec();
    bytes.extend_from_slice(&payload);
    let (_, checked) = split(&bytes, "forged").expect("header, length and digest agree");
    assert!(matches!(
        decode(checked, "forged"),
        Err(PackageError::Encoding { .. })
    ));
    // Every prefix of a real payload is refused the same way.
    let real = package().encode().expect("encodes");
    for length in 0..real.len() {
        assert!(
            matches!(
                decode(&real[..length], "prefix"),
                Err(PackageError::Encoding { .. })
            ),
            "{length}"
        );
    }
}

#[test]
fn verification_counts_what_it_checks_on_a_clean_package() {
    let verification = verify_package(&package());
    assert!(verification.passed(), "{verification}");
    assert_eq!(verification.tiles, 2);
    assert_eq!(verification.allocations, 3);
    // The copy's source and destination, the transfer's source and
    // destination.
    assert_eq!(verification.step_locations, 4);
    assert_eq!(verification.phases, 1);
    // One word on tile 0, two on tile 1.
    assert_eq!(verification.row_words, 3);
    assert_eq!(verification.sends, 1);
    assert_eq!(verification.repeat_patch_words, 1);
    assert_eq!(verification.sharing_patches, 1);
    assert!(verification.to_string().ends_with("all checks pass"));
}

fn failures(package: &Package) -> Vec<String> {
    let verification = verify_package(package);
    assert_eq!(
        verification.failure_count,
        verification.failures.len() as u64
    );
    verification.failures
}

#[test]
fn an_allocation_moved_away_from_what_uses_it_is_found_everywhere_it_is_used() {
    // Allocation 0 moves to 0x4c100: the copy reads 0x4c000 and the
    // exchange sends from 0x4c010, both now before its start, and the
    // row's send starts where tile 0 has no allocation at all (allocation
    // 2 covers 0x4c040..0x4c0a0, allocation 0 now 0x4c100..0x4c140).
    let mut moved = package();
    moved.allocations[0].address = 0x4c100;
    assert_eq!(
        failures(&moved),
        vec![
            String::from(
                "step 0: location 0x4c000 is outside allocation 0 (0x4c100..0x4c140 on tile 0)"
            ),
            String::from(
                "step 1: location 0x4c010 is outside allocation 0 (0x4c100..0x4c140 on tile 0)"
            ),
            String::from(
                "step 1: the transfer list transfer 0: its source accesses 16 bytes at 0x4c010, \
                 outside allocation 0 (0x4c100..0x4c140 on tile 0)"
            ),
            String::from(
                "phase phase-a, tile 0: a send starts at 0x4c010, outside every allocation of the tile"
            ),
        ]
    );
    // An allocation past the end of the tile's 624 KiB (0x4c000 + 0x9c000).
    let mut beyond = package();
    beyond.allocations[2].address = 0xe7ff0;
    let found = failures(&beyond);
    assert_eq!(
        found[0],
        "allocation 2 on tile 0: bytes 0xe7ff0..0xe8050 are outside the tile's memory"
    );
    let mut foreign_tile = package();
    foreign_tile.allocations[1].tile = 5;
    assert!(
        failures(&foreign_tile).contains(&String::from(
            "allocation 1 is on tile 5, outside the 2 tiles"
        )),
        "{:?}",
        failures(&foreign_tile)
    );
}

#[test]
fn rows_patches_and_tables_that_do_not_match_the_package_are_named() {
    // A Repeat patch of word 1 of tile 0's one-word row.
    let mut patch = package();
    patch.phases[0].repeat_patches[0].words[0].word = 1;
    assert_eq!(
        failures(&patch),
        vec![String::from(
            "phase phase-a, tile 0: a Repeat patch rewrites word 1 of a 1-word row"
        )]
    );
    // A sharing patch of a phase that does not exist, and of a word past
    // tile 1's two-word row.
    let mut sharing = package();
    sharing.sharing_patches.push(SharingPatch {
        tile: 1,
        phase: 5,
        word: 0,
    });
    sharing.sharing_patches.push(SharingPatch {
        tile: 1,
        phase: 0,
        word: 2,
    });
    assert_eq!(
        failures(&sharing),
        vec![
            String::from("a sharing patch names phase 5 tile 1, which do not exist"),
            String::from("a sharing patch rewrites word 2 of phase 0 tile 1's 2-word row"),
        ]
    );
    // A receive pointer at word 0x10 (byte 0x40), below the tile's memory.
    let mut pointer = package();
    pointer.phases[0].rows[1] = words(&[Instruction::DelayPic {
        events: 1,
        selector: 0,
        value: 0x10,
    }]);
    pointer.sharing_patches.clear();
    assert_eq!(
        failures(&pointer),
        vec![String::from(
            "phase phase-a, tile 1: a receive pointer 0x40 is outside the tile's memory"
        )]
    );
    // A row word that decodes to no instruction.
    let mut garbled = package();
    garbled.phases[0].rows[0] = vec![u32::MAX];
    let found = failures(&garbled);
    assert_eq!(found.len(), 1);
    assert!(
        found[0].starts_with("phase phase-a, tile 0: the row does not decode: "),
        "{found:?}"
    );
    // One row and one stored-row index for two tiles.
    let mut short = package();
    short.phases[0].rows.pop();
    short.phases[0].stored_rows.pop();
    short.sharing_patches.clear();
    assert_eq!(
        failures(&short),
        vec![
            String::from("phase phase-a: 1 rows for 2 tiles"),
            String::from("phase phase-a: 1 stored-row indices for 2 tiles"),
        ]
    );
    // A per-tile table that is short, and one whose base is outside memory.
    let mut tables = package();
    tables.exchange_table_base.pop();
    tables.patch_lists_base[1] = 0x100;
    assert_eq!(
        failures(&tables),
        vec![
            String::from("exchange_table_base has 1 entries for 2 tiles"),
            String::from("patch_lists_base of tile 1 is 0x100, outside the tile's memory"),
        ]
    );
}

#[test]
fn failures_beyond_twenty_are_counted_not_listed() {
    let mut many = package();
    // 25 Repeat patches past the end of tile 0's one-word row.
    many.phases[0].repeat_patches[0].words = (1..=25)
        .map(|word| PatchWord {
            word,
            step_words: 8,
        })
        .collect();
    let verification = verify_package(&many);
    assert_eq!(verification.failure_count, 25);
    assert_eq!(verification.failures.len(), 20);
    assert!(
        verification.to_string().ends_with("... and 5 more"),
        "{verification}"
    );
}
