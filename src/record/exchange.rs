//! The record file of one exchange phase: its provenance, transfers,
//! schedule, rows, patches, the placement of what it touches and its share
//! of the estimate, all figures of this phase alone (its cycles, never its
//! share of the total, which moves with every other phase).

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::identity::{Detail, RecordError};
use super::sheet::{Sheet, hex16, histogram};
use crate::cache::key::StableHasher;
use crate::estimate::profile::ProfileEntry;
use crate::expand::program::LowProgram;
use crate::patch::BaseChoice;
use crate::place::Placement;
use crate::rows::RowTable;
use crate::schedule::timing::pairing_refusal;
use crate::session::{Phase, Session};
use crate::target::memory::{REGION_ONE_START, REGION_ZERO_START};
use crate::text::thousands;

/// What every phase's record reads of the whole build.
pub struct Shared {
    pub program: Arc<LowProgram>,
    pub placement: Arc<Placement>,
    pub table: Arc<RowTable>,
    /// Per phase: (rows first stored by this phase, rows it reuses from an
    /// earlier phase on the same tile, sharing patch words).
    pub sharing: Vec<(u64, u64, u64)>,
}

impl Shared {
    pub fn of(session: &Session) -> Result<Shared, RecordError> {
        let table = session.row_table()?;
        let tiles = table.bytes_per_tile.len();
        let mut stored_so_far = vec![0u32; tiles];
        let mut sharing: Vec<(u64, u64, u64)> = table
            .stored
            .iter()
            .map(|per_tile| {
                let (mut new, mut reused) = (0, 0);
                for (tile, &index) in per_tile.iter().enumerate() {
                    if index == u32::MAX {
                        continue;
                    }
                    let Some(next) = stored_so_far.get_mut(tile) else {
                        continue;
                    };
                    if index >= *next {
                        *next = index + 1;
                        new += 1;
                    } else {
                        reused += 1;
                    }
                }
                (new, reused, 0)
            })
            .collect();
        for patch in &table.sharing_patches {
            if let Some(entry) = sharing.get_mut(patch.phase as usize) {
                entry.2 += 1;
            }
        }
        Ok(Shared {
            program: session
                .low_program()
                .map_err(crate::session::BackendError::from)?,
            placement: session.placement()?,
            table,
            sharing,
        })
    }
}

/// The 16-hex-digit digest of what `feed` writes (no compiler version in
/// it: equal content gives equal digests across compiler builds).
pub fn digest(feed: impl FnOnce(&mut StableHasher)) -> String {
    let mut hasher = StableHasher::default();
    feed(&mut hasher);
    hex16(&hasher.digest().0)
}

fn inconsistent(phase: &Phase<'_>, error: impl std::fmt::Display) -> RecordError {
    RecordError::Inconsistent(format!("phase {}: {error}", phase.key()))
}

/// The record of `phase`; `entry` is its line of the program's profile.
pub fn text(
    phase: &Phase<'_>,
    entry: Option<&ProfileEntry>,
    shared: &Shared,
    detail: Detail,
) -> Result<Sheet, RecordError> {
    let record = phase.record().map_err(|error| inconsistent(phase, error))?;
    let problem = phase
        .problem()
        .map_err(|error| inconsistent(phase, error))?;
    let schedule = phase
        .schedule()
        .map_err(|error| inconsistent(phase, error))?;
    let rows = phase.rows().map_err(|error| inconsistent(phase, error))?;
    let patches = phase
        .patches()
        .map_err(|error| inconsistent(phase, error))?;
    let policy = phase.policy();
    let mut sheet = Sheet::titled(format!("exchange {}", phase.key()));

    sheet.section("phase");
    sheet.fact("provenance", record.merged_from.join(" + "));
    sheet.count("executions", u64::from(record.executions));
    sheet.fact(
        "in the layer repeat",
        if record.in_repeat { "yes" } else { "no" },
    );

    sheet.section("transfers");
    let tiles = problem.tiles as usize;
    let mut sent = vec![0u64; tiles];
    let mut received = vec![0u64; tiles];
    let mut pairable = (0u64, 0u64);
    for piece in 0..problem.pieces() {
        let words = u64::from(problem.words[piece]);
        sent[problem.source_tile[piece] as usize] += words;
        for receive in problem.receives_of(piece) {
            received[problem.destination_tile[receive] as usize] += words;
        }
        if pairing_refusal(problem, piece).is_none() {
            pairable.0 += 1;
            pairable.1 += words;
        }
    }
    sheet.count("pieces", problem.pieces() as u64);
    sheet.count("destinations", problem.receives() as u64);
    sheet.count(
        "words",
        problem.words.iter().map(|&words| u64::from(words)).sum(),
    );
    sheet.count(
        "largest piece words",
        u64::from(problem.words.iter().copied().max().unwrap_or(0)),
    );
    sheet.fact(
        "pairable pieces",
        format!(
            "{} ({} words)",
            thousands(pairable.0),
            thousands(pairable.1)
        ),
    );
    sheet.fact("tiles by words sent", histogram(sent.iter().copied()));
    sheet.fact(
        "tiles by words received",
        histogram(received.iter().copied()),
    );
    sheet.fact(
        "content digest",
        digest(|hasher| problem.write_content(hasher)),
    );

    sheet.section("schedule");
    sheet.fact(
        "policy",
        format!("{} ({})", policy.policy, policy.source.name()),
    );
    sheet.fact("chosen", schedule.chosen);
    sheet.fact(
        "width",
        format!("{} (asked {})", schedule.width, policy.width),
    );
    sheet.count("horizon", u64::from(schedule.horizon));
    sheet.count("endpoint bound", u64::from(schedule.endpoint_bound));
    sheet.count("latency bound", u64::from(schedule.latency_bound));
    sheet.count(
        "paired pieces",
        schedule.paired.iter().filter(|&&paired| paired).count() as u64,
    );
    for candidate in &schedule.candidates {
        let verdict = if candidate.pruned {
            "pruned"
        } else if candidate.chosen {
            "chosen"
        } else if !candidate.admitted {
            "over the row allowance"
        } else {
            "admitted"
        };
        sheet.fact(
            &format!(
                "candidate {} {}",
                candidate.policy,
                format!("{:?}", candidate.pairing).to_lowercase()
            ),
            format!(
                "horizon {} · max row {} words · total {} words · {verdict}",
                thousands(candidate.horizon),
                thousands(candidate.max_row_words),
                thousands(candidate.total_row_words)
            ),
        );
    }
    sheet.fact(
        "tiles by last event",
        histogram(schedule.tile_end.iter().map(|&end| u64::from(end))),
    );
    sheet.fact(
        "event digest",
        digest(|hasher| {
            schedule.send_start.hash(hasher);
            schedule.paired.hash(hasher);
            schedule.select.hash(hasher);
            schedule.payload_start.hash(hasher);
            schedule.pointer_write.hash(hasher);
            schedule.deselect.hash(hasher);
            schedule.tile_end.hash(hasher);
        }),
    );

    sheet.section("rows");
    sheet.fact("largest tile", format!("{} B", thousands(rows.max_bytes())));
    sheet.fact("total", format!("{} B", thousands(rows.total_bytes())));
    sheet.fact(
        "tiles by row bytes",
        histogram(rows.rows.iter().map(|row| row.bytes())),
    );
    sheet.count(
        "relocation slots",
        rows.rows.iter().map(|row| row.slots.len() as u64).sum(),
    );
    let (new, reused, sharing_words) = shared.sharing.get(phase.index).copied().unwrap_or_default();
    sheet.fact(
        "sharing",
        format!(
            "{} rows stored · {} rows reuse an earlier phase's row · {} sharing patch words",
            thousands(new),
            thousands(reused),
            thousands(sharing_words)
        ),
    );
    sheet.fact("row digest", digest(|hasher| rows.rows.hash(hasher)));

    sheet.section("patches");
    let moving: BTreeMap<u32, u64> =
        patches
            .tiles
            .iter()
            .fold(BTreeMap::new(), |mut strides, tile| {
                if let BaseChoice::Moving { stride_words } = tile.base {
                    *strides.entry(stride_words).or_insert(0) += 1;
                }
                strides
            });
    sheet.count("repeat patch words", patches.words());
    sheet.count("tiles patched", patches.calls());
    sheet.count("largest tile words", patches.max_words());
    sheet.count("cycles", patches.cycles());
    sheet.fact(
        "moving base",
        if moving.is_empty() {
            "none".to_string()
        } else {
            moving
                .iter()
                .map(|(stride, tiles)| {
                    format!(
                        "stride {} words on {} tiles",
                        thousands(*stride),
                        thousands(*tiles)
                    )
                })
                .collect::<Vec<_>>()
                .join(" · ")
        },
    );
    sheet.count(
        "zero-base words",
        patches
            .tiles
            .iter()
            .map(|tile| u64::from(tile.zero_base_words))
            .sum(),
    );
    sheet.fact(
        "tiles by patch words",
        histogram(patches.tiles.iter().map(|tile| tile.words.len() as u64)),
    );
    sheet.fact("patch digest", digest(|hasher| patches.tiles.hash(hasher)));

    placement_section(&mut sheet, &record.allocations, shared);

    sheet.section("estimate");
    match entry {
        Some(entry) => {
            sheet.count("cycles per execution", entry.cycles);
            sheet.count("horizon cycles", entry.horizon);
            sheet.count("patch cycles", entry.patch_cycles);
            sheet.count("total cycles", entry.total_cycles);
        }
        None => sheet.fact("cycles per execution", "not in the profile"),
    }

    if detail == Detail::Full {
        sheet.section("events");
        for piece in 0..problem.pieces() {
            let receives: Vec<String> = problem
                .receives_of(piece)
                .map(|receive| {
                    format!(
                        "tile {} select {} payload {} pointer {} deselect {}",
                        problem.destination_tile[receive],
                        schedule.select[receive],
                        schedule.payload_start[receive],
                        event_text(schedule.pointer_write[receive]),
                        event_text(schedule.deselect[receive])
                    )
                })
                .collect();
            sheet.fact(
                &format!("piece {piece}"),
                format!(
                    "tile {} words {} send {}{} -> {}",
                    problem.source_tile[piece],
                    problem.words[piece],
                    schedule.send_start[piece],
                    if schedule.paired[piece] {
                        " paired"
                    } else {
                        ""
                    },
                    receives.join("; ")
                ),
            );
        }
        sheet.section("row words");
        for (tile, row) in rows.rows.iter().enumerate() {
            if row.words.is_empty() {
                continue;
            }
            let words: Vec<String> = row.words.iter().map(|word| format!("{word:08x}")).collect();
            let slots: Vec<String> = row
                .slots
                .iter()
                .map(|slot| {
                    format!(
                        "w{} {:?} a{}+{}",
                        slot.word, slot.field, slot.address.allocation, slot.address.offset
                    )
                })
                .collect();
            sheet.fact(
                &format!("tile {tile}"),
                format!("{} | slots {}", words.join(" "), slots.join(", ")),
            );
        }
    }
    Ok(sheet)
}

fn event_text(event: u32) -> String {
    if event == crate::schedule::NO_EVENT {
        "-".to_string()
    } else {
        event.to_string()
    }
}

/// Where the allocations the phase reads and writes are placed: region 0
/// addresses from the tile's data start (the end of its exchange table and
/// patch list reservations, which grow with other phases' rows), region 1
/// addresses from the region's start, so that another phase's rows moving
/// every tile's data start by the same reservation growth leave this file
/// as it is.
fn placement_section(
    sheet: &mut Sheet,
    allocations: &[crate::expand::program::AllocationId],
    shared: &Shared,
) {
    sheet.section("placement");
    let mut bytes_by_class: BTreeMap<String, u64> = BTreeMap::new();
    let mut ranges: [(u64, u64); 2] = [(u64::MAX, 0); 2];
    let mut tiles = std::collections::BTreeSet::new();
    let mut hasher = StableHasher::default();
    for &id in allocations {
        let Some(allocation) = shared.program.allocations.get(id.0 as usize) else {
            continue;
        };
        let base = shared
            .placement
            .base
            .get(id.0 as usize)
            .copied()
            .unwrap_or(0);
        let bytes = u64::from(allocation.bytes) * u64::from(allocation.iterations.max(1));
        *bytes_by_class
            .entry(format!("{:?}", allocation.class).to_lowercase())
            .or_insert(0) += bytes;
        let (region, offset) = if base >= REGION_ONE_START {
            (1, u64::from(base - REGION_ONE_START))
        } else {
            let data_start = shared
                .placement
                .reserved_end
                .get(allocation.tile as usize)
                .copied()
                .unwrap_or(REGION_ZERO_START);
            (0, u64::from(base - data_start.min(base)))
        };
        let range = &mut ranges[region];
        range.0 = range.0.min(offset);
        range.1 = range.1.max(offset + bytes);
        tiles.insert(allocation.tile);
        (allocation.tile, region, offset, bytes).hash(&mut hasher);
    }
    sheet.count("allocations", allocations.len() as u64);
    sheet.count("tiles", tiles.len() as u64);
    sheet.fact(
        "bytes by class",
        bytes_by_class
            .iter()
            .map(|(class, bytes)| format!("{class} {} B", thousands(*bytes)))
            .collect::<Vec<_>>()
            .join(" · "),
    );
    for (region, (low, high), from) in [
        (0, ranges[0], "from the data start"),
        (1, ranges[1], "from the region start"),
    ] {
        if low <= high {
            sheet.fact(
                &format!("region {region} range"),
                format!("{}..{} B {from}", thousands(low), thousands(high)),
            );
        }
    }
    sheet.fact("address digest", {
        hasher.write_u8(0);
        hex16(&hasher.digest().0)
    });
}
