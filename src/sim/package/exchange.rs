//! Exchange phases from the package's decoded rows.
//!
//! Per Repeat iteration `i`, each tile's finalized row is patched as the
//! supervisor would before the phase runs:
//! - with `BaseChoice::Moving { stride_words }`, the outgoing base register
//!   is 0 in iteration 0 (the finalized rows hold iteration 0's absolute
//!   addresses) and advances `stride_words` per iteration, so every
//!   send-address field (`send`, `sendpicp`) of that row reads `i * stride`
//!   further; receive pointers are not based;
//! - every listed patch word adds `i * step_words` to its address field
//!   (the supervisor adds `step_words` before every iteration after the
//!   first), the field being the one its instruction carries there.
//!
//! Rows come from the tile's stored rows after the sharing patches ran
//! (`super::sharing`), which must equal the phase's finalized rows.
//!
//! Receives are matched to sends as `crate::sim::replay` does (one model),
//! then checked against the transfer list of the phase's step: every
//! received byte must land on a destination of that iteration and come from
//! the source the list names, and every tile must receive exactly the bytes
//! the list sends it. Data moves in event order: sources read at send start,
//! destinations written at payload start. Sources are checked against the
//! ownership map (`super::ownership`) before the phase and the received
//! bytes are claimed for their destination allocations after it.

use rayon::prelude::*;

use crate::expand::program::TransferList;
use crate::package::{Package, PackagePhase};
use crate::patch::BaseChoice;
use crate::rows::{RowEvent, decode_row};
use crate::sim::replay::{Delivery, deliveries, paired_splits};
use crate::target::encoding::layout::{Field, INLINE_PIC, SEND_ADDRESS, SEND_PIC_VALUE};
use crate::target::encoding::{DecodeError, Instruction, decode};
use crate::target::memory::{TILE_BASE_ADDRESS, TILE_END_ADDRESS};

use super::access::bind;
use super::image::{PlacedIntervals, TileImage};
use super::ownership::Owners;

/// A check that failed, before the step context is attached.
#[derive(Debug)]
pub struct TileFault {
    pub tile: Option<u32>,
    pub message: String,
}

fn fault(tile: u32, message: String) -> TileFault {
    TileFault {
        tile: Some(tile),
        message,
    }
}

/// An address field of a row word: the field, whether it is a send
/// address, and the bytes per unit it counts (8 for a paired send).
type AddressField = (Field, bool, u32);

/// Why a row's address fields could not be found or patched.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
enum FieldError {
    #[error("word {position}: {error}")]
    Undecodable { position: usize, error: DecodeError },
    #[error("patched word {word} addresses {address:#x}, outside the tile's memory")]
    OutsideMemory { word: usize, address: i64 },
}

/// The address field of every address-bearing word of `row`.
fn address_fields(row: &[u32]) -> Result<Vec<Option<AddressField>>, FieldError> {
    let mut fields = vec![None; row.len()];
    let mut position = 0;
    while position < row.len() {
        let (instruction, consumed) = decode(&row[position..])
            .map_err(|error| FieldError::Undecodable { position, error })?;
        match instruction {
            Instruction::Send { control, .. } => {
                fields[position] = Some((SEND_ADDRESS, true, send_unit(control)))
            }
            Instruction::SendPicP { control, .. } => {
                if control != 0 {
                    fields[position] = Some((SEND_ADDRESS, true, send_unit(control)));
                }
                if position + 1 < row.len() {
                    fields[position + 1] = Some((INLINE_PIC, false, 4));
                }
            }
            Instruction::DelayPic { selector: 0, .. }
            | Instruction::SendPic { selector: 2, .. } => {
                fields[position] = Some((SEND_PIC_VALUE, false, 4))
            }
            _ => {}
        }
        position += consumed;
    }
    Ok(fields)
}

/// Bytes per unit of a send's address field: paired (64-bit) sends count
/// 8-byte units (IPU21.md, "Exchange rules confirmed on hardware").
fn send_unit(control: u8) -> u32 {
    if control & 4 != 0 { 8 } else { 4 }
}

/// Adds `delta` units (of `unit` bytes) to the address field of
/// `row[word]`, range-checked against the field and the tile's memory.
fn add_to_field(
    row: &mut [u32],
    word: usize,
    field: Field,
    unit: u32,
    delta: i64,
) -> Result<(), FieldError> {
    let value = i64::from(field.extract(row[word])) + delta;
    let lowest = i64::from(TILE_BASE_ADDRESS / unit);
    let highest = i64::from(TILE_END_ADDRESS / unit);
    if value < lowest || value >= highest || value > i64::from(field.maximum()) {
        return Err(FieldError::OutsideMemory {
            word,
            address: value * i64::from(unit),
        });
    }
    row[word] = (row[word] & !field.mask) | field.place(value as u32);
    Ok(())
}

/// Tile `tile`'s row of `phase` as it runs in Repeat iteration `iteration`.
pub fn patched_row(
    phase: &PackagePhase,
    stored: &[u32],
    tile: u32,
    iteration: u32,
) -> Result<(Vec<u32>, u64), TileFault> {
    let mut row = stored.to_vec();
    let Some(patches) = phase
        .repeat_patches
        .iter()
        .find(|patches| patches.tile == tile)
    else {
        return Ok((row, 0));
    };
    if iteration == 0 {
        return Ok((row, 0));
    }
    let fields = address_fields(&row).map_err(|error| fault(tile, error.to_string()))?;
    let mut patched = 0;
    if let BaseChoice::Moving { stride_words } = patches.base {
        for (word, field) in fields.iter().enumerate() {
            match field {
                Some((field, true, 4)) => add_to_field(
                    &mut row,
                    word,
                    *field,
                    4,
                    i64::from(stride_words) * i64::from(iteration),
                )
                .map_err(|error| fault(tile, format!("base register: {error}")))?,
                Some((_, true, _)) => {
                    return Err(fault(
                        tile,
                        format!(
                            "word {word} is a paired send under a moving base register \
                             (unvalidated; the patcher keeps such rows on a zero base)"
                        ),
                    ));
                }
                _ => {}
            }
        }
    }
    for patch in &patches.words {
        let word = patch.word as usize;
        let Some(Some((field, _, unit))) = fields.get(word) else {
            return Err(fault(
                tile,
                if word >= row.len() {
                    format!(
                        "patch names word {word}, outside the row table's row of {} words",
                        row.len()
                    )
                } else {
                    format!("patch names word {word}, which holds no address field")
                },
            ));
        };
        add_to_field(
            &mut row,
            word,
            *field,
            *unit,
            patch.step_words * i64::from(iteration),
        )
        .map_err(|error| fault(tile, error.to_string()))?;
        patched += 1;
    }
    Ok((row, patched))
}

/// What one phase execution did.
#[derive(Clone, Copy, Debug, Default)]
pub struct PhaseRun {
    pub deliveries: u64,
    pub words_received: u64,
    pub events: u64,
    pub patched_words: u64,
    /// Paired receives whose two members' pointers differ.
    pub paired_split_addresses: u64,
}

/// Expected receives of one tile: `(start, end, source tile, source
/// start, destination allocation)`.
type Expected = Vec<(u64, u64, u32, u64, u32)>;

/// Every transfer source must still hold what its allocation wrote there.
fn check_sources(
    package: &Package,
    transfers: &TransferList,
    iteration: u32,
    images: &[TileImage],
    owners: Owners<'_>,
) -> Result<(), TileFault> {
    (0..transfers.words.len())
        .into_par_iter()
        .try_for_each(|index| {
            let bytes = transfers.words[index] as usize * 4;
            let tile = transfers.source_tile[index];
            let location = transfers.source_location[index];
            let address = bind(package, tile, location, bytes, iteration)
                .map_err(|message| fault(tile, format!("transfer source {message}")))?;
            let start = TileImage::index(address, bytes)
                .ok_or_else(|| fault(tile, format!("send from {address:#x} outside memory")))?;
            owners
                .check(
                    &images[tile as usize].ownership,
                    start,
                    bytes,
                    location.allocation.0,
                )
                .map_err(|message| fault(tile, format!("send: {message}")))
        })
}

/// The received bytes now belong to their destination allocations.
fn claim_destinations(images: &mut [TileImage], expected: &[Expected], owners: Owners<'_>) {
    images
        .par_iter_mut()
        .zip(expected.par_iter())
        .for_each(|(image, list)| {
            for &(start, end, _, _, allocation) in list {
                if let Some(index) = TileImage::index(start, (end - start) as usize) {
                    owners.claim(
                        &mut image.ownership,
                        index,
                        (end - start) as usize,
                        allocation,
                    );
                }
            }
        });
}

fn expected_receives(
    package: &Package,
    transfers: &TransferList,
    iteration: u32,
) -> Result<Vec<Expected>, TileFault> {
    let mut expected: Vec<Expected> = vec![Vec::new(); package.tiles as usize];
    for index in 0..transfers.words.len() {
        let bytes = u64::from(transfers.words[index]) * 4;
        let source_tile = transfers.source_tile[index];
        let source = bind(
            package,
            source_tile,
            transfers.source_location[index],
            bytes as usize,
            iteration,
        )
        .map_err(|message| fault(source_tile, format!("transfer source {message}")))?;
        for destination in transfers.destinations_of(index) {
            let start = bind(
                package,
                destination.tile,
                destination.location,
                bytes as usize,
                iteration,
            )
            .map_err(|message| {
                fault(destination.tile, format!("transfer destination {message}"))
            })?;
            expected[destination.tile as usize].push((
                start,
                start + bytes,
                source_tile,
                source,
                destination.location.allocation.0,
            ));
        }
    }
    for list in &mut expected {
        list.sort_unstable();
    }
    Ok(expected)
}

/// Checks one delivery against the transfer list and the placed allocations.
fn check_delivery(
    delivery: &Delivery,
    expected: &[Expected],
    placed: &PlacedIntervals,
) -> Result<(), TileFault> {
    let tile = delivery.tile;
    let wrong = |what: String| {
        fault(
            tile,
            format!(
                "receive of {} bytes from tile {} at {:#x} (payload event {}) {what}",
                delivery.bytes, delivery.source_tile, delivery.address, delivery.write_event
            ),
        )
    };
    if !placed.contains(tile, delivery.address, delivery.bytes) {
        return Err(wrong("writes outside the tile's placed allocations".into()));
    }
    let list = &expected[tile as usize];
    let mut address = delivery.address;
    let end = delivery.address + delivery.bytes;
    while address < end {
        let position = list.partition_point(|entry| entry.0 <= address);
        let entry = position
            .checked_sub(1)
            .map(|index| list[index])
            .filter(|entry| address < entry.1)
            .ok_or_else(|| {
                wrong(format!(
                    "lands at {address:#x}, where the transfer list receives nothing"
                ))
            })?;
        let source = delivery.source_address + (address - delivery.address);
        let expected_source = entry.3 + (address - entry.0);
        if entry.2 != delivery.source_tile || expected_source != source {
            return Err(wrong(format!(
                "writes {address:#x} from tile {} {source:#x}; the transfer list sends it from tile {} {expected_source:#x}",
                delivery.source_tile, entry.2
            )));
        }
        address = entry.1.min(end);
    }
    Ok(())
}

/// One execution of a phase: the phase, its step's transfer list, the
/// Repeat iteration and every tile's row as its storage holds it.
pub struct PhaseExecution<'a> {
    pub phase: &'a PackagePhase,
    pub transfers: &'a TransferList,
    pub iteration: u32,
    pub rows: &'a [Vec<u32>],
}

/// One execution of a phase with its rows matched: every receive paired
/// with its send and checked against the transfer list, no byte moved.
pub struct MatchedPhase {
    deliveries: Vec<Delivery>,
    expected: Vec<Expected>,
    pub run: PhaseRun,
}

/// Decodes and Repeat-patches every tile's row of one phase execution,
/// matches receives to sends (`crate::sim::replay`) and checks that they
/// deliver exactly the phase's transfer list: every received byte lands
/// where the list sends it, from the source it names, inside the tile's
/// placed allocations, and every tile receives the bytes the list sends it.
/// Reads no tile memory: `superstep verify` runs it on every exchange phase
/// (`super::rows_check`), the simulator before it moves the bytes.
pub fn match_phase(
    package: &Package,
    execution: PhaseExecution<'_>,
    placed: &PlacedIntervals,
) -> Result<MatchedPhase, TileFault> {
    let PhaseExecution {
        phase,
        transfers,
        iteration,
        rows,
    } = execution;
    let tiles = package.tiles;
    if phase.rows.len() != tiles as usize || rows.len() != tiles as usize {
        return Err(TileFault {
            tile: None,
            message: format!("{} rows for {tiles} tiles", phase.rows.len()),
        });
    }
    let decoded: Vec<(Vec<RowEvent>, u64)> = (0..tiles)
        .into_par_iter()
        .map(|tile| {
            let (row, patched) = patched_row(phase, &rows[tile as usize], tile, iteration)?;
            let events = decode_row(&row)
                .map_err(|error| fault(tile, format!("row does not decode: {error}")))?;
            Ok((events, patched))
        })
        .collect::<Result<_, TileFault>>()?;
    let mut run = PhaseRun::default();
    for (events, patched) in &decoded {
        run.patched_words += patched;
        run.events = run.events.max(events.last().map_or(0, RowEvent::event));
    }
    let rows: Vec<Vec<RowEvent>> = decoded.into_iter().map(|(events, _)| events).collect();
    // IPU21.md: both members of a receiving pair receive at one address;
    // the package must not split a pair (the placer keeps them together).
    let (split, first) = paired_splits(&rows);
    if let Some((tile, event, own, theirs)) = first {
        return Err(fault(
            tile,
            format!(
                "{split} paired receives have their two members at different addresses; the \
                 first at event {event}: word {own:#x} here, {theirs:#x} on the partner \
                 (IPU21.md: both members receive at the same address)"
            ),
        ));
    }
    run.paired_split_addresses = split;
    let deliveries = deliveries(&rows).map_err(|error| TileFault {
        tile: None,
        message: format!("rows do not match: {error}"),
    })?;
    let expected = expected_receives(package, transfers, iteration)?;
    deliveries
        .par_iter()
        .try_for_each(|delivery| check_delivery(delivery, &expected, placed))?;
    let mut received = vec![0u64; tiles as usize];
    for delivery in &deliveries {
        received[delivery.tile as usize] += delivery.bytes;
    }
    for (tile, list) in expected.iter().enumerate() {
        let bytes: u64 = list.iter().map(|entry| entry.1 - entry.0).sum();
        if bytes != received[tile] {
            return Err(fault(
                tile as u32,
                format!(
                    "receives {} bytes, the transfer list sends it {bytes}",
                    received[tile]
                ),
            ));
        }
    }
    run.deliveries = deliveries.len() as u64;
    run.words_received = received.iter().sum::<u64>() / 4;
    Ok(MatchedPhase {
        deliveries,
        expected,
        run,
    })
}

/// Runs one execution of a phase on the images: [`match_phase`], the
/// sources checked against the ownership map, then the bytes moved.
pub fn run_phase(
    package: &Package,
    execution: PhaseExecution<'_>,
    images: &mut [TileImage],
    placed: &PlacedIntervals,
    owners: Owners<'_>,
) -> Result<PhaseRun, TileFault> {
    let (transfers, iteration) = (execution.transfers, execution.iteration);
    let MatchedPhase {
        deliveries,
        expected,
        run,
    } = match_phase(package, execution, placed)?;
    check_sources(package, transfers, iteration, images, owners)?;
    let mut actions: Vec<(u64, u8, usize)> = Vec::with_capacity(deliveries.len() * 2);
    for (index, delivery) in deliveries.iter().enumerate() {
        actions.push((delivery.read_event, 1, index));
        actions.push((delivery.write_event, 0, index));
    }
    actions.sort_unstable();
    let mut buffers: Vec<(Vec<u8>, Option<Vec<bool>>)> = vec![Default::default(); deliveries.len()];
    for (_, kind, index) in actions {
        let delivery = &deliveries[index];
        let length = delivery.bytes as usize;
        if kind == 1 {
            let image = &images[delivery.source_tile as usize];
            let start = TileImage::index(delivery.source_address, length).ok_or_else(|| {
                fault(
                    delivery.source_tile,
                    format!(
                        "send from {:#x} outside the tile's memory",
                        delivery.source_address
                    ),
                )
            })?;
            // Sends move padding too: written-ness moves with the bytes.
            buffers[index] = (
                image.bytes[start..start + length].to_vec(),
                image.written_mask_if_partial(start, length),
            );
        } else {
            let start = TileImage::index(delivery.address, length)
                .ok_or_else(|| fault(delivery.tile, "receive outside memory".into()))?;
            let (data, mask) = std::mem::take(&mut buffers[index]);
            images[delivery.tile as usize].write_with(start, &data, mask.as_deref());
        }
    }
    claim_destinations(images, &expected, owners);
    Ok(run)
}
