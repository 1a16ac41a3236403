//! Host input and output at placed addresses: weights and the input are
//! written into every block-replica allocation of their planned values (the
//! low program's `values` bindings) at the package's placed address, per
//! layer instance; the output is read back from the first replica of every
//! block. The host writes whole block images (padding zero, and marked
//! written). Element placement follows the interpreter's `store_value` /
//! `load_value` (`TensorFormat::locate`).

use crate::expand::program::{AllocationId, LowProgram};
use crate::layout::format::TensorFormat;
use crate::layout::plan::Layouts;
use crate::model::graph::Precision;
use crate::model::weights::Weights;
use crate::numerics::fp8;
use crate::numerics::half_float::{from_f16_bits, to_f16_bits};
use crate::package::Package;
use crate::sim::host::host_writes;
use crate::sim::memory::SimError;

use super::image::TileImage;
use super::ownership::Owners;

/// Calls `visit(allocation, byte offset in the block, logical index)` for
/// every valid element of the blocks whose replica `slot` passes `take`.
fn for_each_element(
    format: &TensorFormat,
    allocations: &[AllocationId],
    take: impl Fn(u32) -> bool,
    mut visit: impl FnMut(AllocationId, usize, usize),
) {
    for (slot, &allocation) in allocations.iter().enumerate() {
        if !take(slot as u32) {
            continue;
        }
        format.for_each_element(slot as u32 / format.replicas, |offset, index| {
            visit(allocation, offset, index)
        });
    }
}

#[allow(clippy::too_many_arguments)]
fn store(
    images: &mut [TileImage],
    package: &Package,
    allocations: &[AllocationId],
    format: &TensorFormat,
    values: &[f32],
    codes: &[u8],
    instance: u32,
    owners: Owners<'_>,
) -> Result<(), SimError> {
    let size = format.element_bytes() as usize;
    // The host writes whole block images: padding is defined (zero).
    for &allocation in allocations {
        let placed = &package.allocations[allocation.0 as usize];
        let address = u64::from(placed.address) + u64::from(instance) * u64::from(placed.bytes);
        let start = TileImage::index(address, placed.bytes as usize).ok_or_else(|| {
            SimError::Weights(format!(
                "host write at {address:#x} outside the tile's memory"
            ))
        })?;
        let image = &mut images[placed.tile as usize];
        image.bytes[start..start + placed.bytes as usize].fill(0);
        image.mark_written(start, placed.bytes as usize);
        owners.claim(
            &mut image.ownership,
            start,
            placed.bytes as usize,
            allocation.0,
        );
    }
    let mut failure = None;
    for_each_element(
        format,
        allocations,
        |_| true,
        |allocation, offset, index| {
            let placed = &package.allocations[allocation.0 as usize];
            let address = u64::from(placed.address)
                + u64::from(instance) * u64::from(placed.bytes)
                + offset as u64;
            let Some(start) = TileImage::index(address, size) else {
                failure.get_or_insert(address);
                return;
            };
            let image = &mut images[placed.tile as usize];
            match format.precision {
                Precision::F8 => image.write(start, &[codes[index]]),
                Precision::F8Activation { scale } => {
                    image.write(start, &[fp8::encode(values[index], i32::from(scale))])
                }
                Precision::F16 => image.write(start, &to_f16_bits(values[index]).to_le_bytes()),
                Precision::F32 => image.write(start, &values[index].to_le_bytes()),
            }
        },
    );
    match failure {
        Some(address) => Err(SimError::Weights(format!(
            "host write at {address:#x} outside the tile's memory"
        ))),
        None => Ok(()),
    }
}

/// Loads every weight (all layer instances) and the input.
pub fn load_inputs(
    images: &mut [TileImage],
    package: &Package,
    program: &LowProgram,
    layouts: &Layouts,
    weights: &Weights,
    owners: Owners<'_>,
) -> Result<(), SimError> {
    for write in host_writes(program, layouts, weights)? {
        store(
            images,
            package,
            write.allocations,
            write.format,
            write.values,
            write.codes,
            write.instance,
            owners,
        )?;
    }
    Ok(())
}

/// Reads the output value (logical row-major) from the first replica of every block.
pub fn read_output(
    images: &[TileImage],
    package: &Package,
    program: &LowProgram,
    layouts: &Layouts,
    owners: Owners<'_>,
) -> Result<Vec<f32>, SimError> {
    let output = layouts.value(layouts.output);
    let format = &output.format;
    let allocations = &program.values[layouts.output.0 as usize].allocations;
    let size = format.element_bytes() as usize;
    let mut values = vec![0.0f32; format.shape.elements() as usize];
    let mut failure = None;
    for_each_element(
        format,
        allocations,
        |slot| slot.is_multiple_of(format.replicas),
        |allocation, offset, index| {
            let placed = &package.allocations[allocation.0 as usize];
            let address = u64::from(placed.address) + offset as u64;
            let image = &images[placed.tile as usize];
            let Some(start) = TileImage::index(address, size) else {
                failure.get_or_insert(format!("output at {address:#x} outside the tile's memory"));
                return;
            };
            if let Err(clobber) = owners.check(&image.ownership, start, size, allocation.0) {
                failure.get_or_insert(format!("tile {}: output {clobber}", placed.tile));
            }
            if image.first_unwritten(start, size).is_some() {
                failure.get_or_insert(format!(
                    "tile {}: output read of never-written memory at {address:#x}",
                    placed.tile
                ));
            }
            let bytes = &image.bytes[start..start + size];
            values[index] = match format.precision {
                Precision::F32 => f32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
                Precision::F16 => from_f16_bits(u16::from_le_bytes([bytes[0], bytes[1]])),
                Precision::F8 => bytes[0] as f32,
                Precision::F8Activation { scale } => fp8::decode(bytes[0], i32::from(scale)),
            };
        },
    );
    match failure {
        Some(message) => Err(SimError::Weights(message)),
        None => Ok(values),
    }
}
