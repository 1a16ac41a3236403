//! SRAM geometry of one tile: its address range, the 16 KiB memory elements
//! that instruction fetch and exchange traffic contend on, the code-fetchable
//! region 0 and the interleaved region 1, and the loadable limit. This module
//! owns address arithmetic only; it must not allocate, place or decide where
//! anything goes (it answers "which element / region is this address in").

/// First byte address of a tile's SRAM (IPU21.md, "Chip": tile addresses).
pub const TILE_BASE_ADDRESS: u32 = 0x4c000;

/// SRAM bytes per tile (IPU21.md, "Chip": 624 KiB).
pub const SRAM_BYTES_PER_TILE: u32 = 624 * 1024;

/// One past the last byte address of a tile's SRAM (IPU21.md, "Chip"; end taken as exclusive).
pub const TILE_END_ADDRESS: u32 = TILE_BASE_ADDRESS + SRAM_BYTES_PER_TILE;

/// Bytes per memory element (IPU21.md, "Chip": 16 KiB elements).
pub const MEMORY_ELEMENT_BYTES: u32 = 16 * 1024;

/// Memory elements that form one interleaved element in region 1 (IPU21.md, "Chip": region 1).
pub const ELEMENTS_PER_INTERLEAVED_ELEMENT: u32 = 2;

/// Bytes per interleaved element in region 1 (IPU21.md, "Chip": one 32 KiB interleaved element).
pub const INTERLEAVED_ELEMENT_BYTES: u32 = MEMORY_ELEMENT_BYTES * ELEMENTS_PER_INTERLEAVED_ELEMENT;

/// First byte address of region 0, the only code-fetchable memory (IPU21.md, "Chip": region 0).
pub const REGION_ZERO_START: u32 = 0x4c000;

/// One past the last byte of region 0 and first byte of region 1 (IPU21.md, "Chip": regions).
pub const REGION_ONE_START: u32 = 0x80000;

/// Data must end below this byte address, the loader's last frame (IPU21.md, "Chip": loadable limit).
pub const LOADABLE_LIMIT: u32 = 0xe7bb0;

// The loadable limit lies inside the tile (checked at compile time).
const _: () = assert!(LOADABLE_LIMIT < TILE_END_ADDRESS);

/// Memory elements in region 0 (derived: `(0x80000 - 0x4c000) / 16 KiB` = 13).
pub const REGION_ZERO_ELEMENTS: u32 = (REGION_ONE_START - REGION_ZERO_START) / MEMORY_ELEMENT_BYTES;

/// Interleaved elements in region 1 (derived: `(0xe8000 - 0x80000) / 32 KiB` = 13).
pub const REGION_ONE_INTERLEAVED_ELEMENTS: u32 =
    (TILE_END_ADDRESS - REGION_ONE_START) / INTERLEAVED_ELEMENT_BYTES;

/// Contention domains per tile: region 0 elements plus region 1 interleaved elements (derived).
pub const CONTENTION_ELEMENTS: u32 = REGION_ZERO_ELEMENTS + REGION_ONE_INTERLEAVED_ELEMENTS;

/// Which part of a tile's address space an address lies in (IPU21.md, "Chip").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Region {
    /// Region 0, `0x4c000..0x80000`: the only memory code can be fetched from;
    /// its 16 KiB elements contend one by one.
    Zero,
    /// Region 1, `0x80000..` up to the tile end: interleaved, two 16 KiB
    /// elements form one 32 KiB interleaved element; preferred for matrix-unit operands.
    One,
    /// Below the tile base or at or past the tile end: not tile memory.
    Outside,
}

/// What a piece of data needs from the memory it is placed in (model: placement classes).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum MemoryClass {
    /// Ordinary data: may live in either region.
    Standard,
    /// Data that wants interleaved memory (matrix-unit operands): region 1 only.
    Interleaved,
    /// Code (and anything fetched as instructions): region 0 only.
    Code,
}

impl MemoryClass {
    /// Whether data of this class may be placed in `region` (model, from IPU21.md's region facts).
    pub fn permits(self, region: Region) -> bool {
        match self {
            MemoryClass::Standard => matches!(region, Region::Zero | Region::One),
            MemoryClass::Interleaved => region == Region::One,
            MemoryClass::Code => region == Region::Zero,
        }
    }

    /// Byte range of the tile this class may occupy (model, from IPU21.md's region facts and loadable limit).
    pub fn address_range(self) -> std::ops::Range<u32> {
        match self {
            MemoryClass::Standard => TILE_BASE_ADDRESS..LOADABLE_LIMIT,
            MemoryClass::Interleaved => REGION_ONE_START..LOADABLE_LIMIT,
            MemoryClass::Code => REGION_ZERO_START..REGION_ONE_START,
        }
    }
}

/// Region of a byte address (IPU21.md, "Chip": regions 0 and 1).
pub fn region_of(address: u32) -> Region {
    if (REGION_ZERO_START..REGION_ONE_START).contains(&address) {
        Region::Zero
    } else if (REGION_ONE_START..TILE_END_ADDRESS).contains(&address) {
        Region::One
    } else {
        Region::Outside
    }
}

/// Contention element of a byte address, or `None` outside the tile (IPU21.md, "Chip").
///
/// Ids `0..13` are region 0's 16 KiB elements counted from the tile base;
/// ids `13..26` are region 1's 32 KiB interleaved elements, so two addresses
/// conflict exactly when their ids are equal.
pub fn checked_element_of(address: u32) -> Option<u32> {
    match region_of(address) {
        Region::Zero => Some((address - REGION_ZERO_START) / MEMORY_ELEMENT_BYTES),
        Region::One => {
            Some(REGION_ZERO_ELEMENTS + (address - REGION_ONE_START) / INTERLEAVED_ELEMENT_BYTES)
        }
        Region::Outside => None,
    }
}

/// Contention element of a byte address (see [`checked_element_of`] for the numbering).
///
/// Addresses outside the tile are clamped to its nearest element; use
/// [`checked_element_of`] where addresses come from users.
pub fn element_of(address: u32) -> u32 {
    let clamped = address.clamp(TILE_BASE_ADDRESS, TILE_END_ADDRESS - 1);
    checked_element_of(clamped).unwrap_or(0)
}

/// Byte range `start..end` of contention element `element` (the numbering of
/// [`checked_element_of`]); ids past the last element give an empty range at the tile end.
pub fn element_bounds(element: u32) -> std::ops::Range<u32> {
    if element < REGION_ZERO_ELEMENTS {
        let start = REGION_ZERO_START + element * MEMORY_ELEMENT_BYTES;
        start..start + MEMORY_ELEMENT_BYTES
    } else if element < CONTENTION_ELEMENTS {
        let start = REGION_ONE_START + (element - REGION_ZERO_ELEMENTS) * INTERLEAVED_ELEMENT_BYTES;
        start..start + INTERLEAVED_ELEMENT_BYTES
    } else {
        TILE_END_ADDRESS..TILE_END_ADDRESS
    }
}

/// The largest contention element (bytes): two byte ranges of one
/// allocation whose gap is at least this share no element wherever the
/// allocation is placed.
pub const LARGEST_ELEMENT_BYTES: u32 = INTERLEAVED_ELEMENT_BYTES;

/// Whether two byte addresses contend on the same element (IPU21.md, "Chip": memory elements).
pub fn same_element(first: u32, second: u32) -> bool {
    match (checked_element_of(first), checked_element_of(second)) {
        (Some(left), Some(right)) => left == right,
        _ => false,
    }
}

/// Whether `[start, start + bytes)` ends at or below the loadable limit (IPU21.md, "Chip").
pub fn loadable(start: u32, bytes: u32) -> bool {
    start >= TILE_BASE_ADDRESS
        && start
            .checked_add(bytes)
            .is_some_and(|end| end <= LOADABLE_LIMIT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn geometry_adds_up() {
        assert_eq!(SRAM_BYTES_PER_TILE, 638_976);
        assert_eq!(TILE_END_ADDRESS, 0xe8000);
        assert_eq!(REGION_ZERO_ELEMENTS, 13);
        assert_eq!(REGION_ONE_INTERLEAVED_ELEMENTS, 13);
        assert_eq!(CONTENTION_ELEMENTS, 26);
        assert_eq!(TILE_BASE_ADDRESS % MEMORY_ELEMENT_BYTES, 0);
        assert_eq!(REGION_ONE_START % INTERLEAVED_ELEMENT_BYTES, 0);
    }

    #[test]
    fn regions() {
        assert_eq!(region_of(0x4bfff), Region::Outside);
        assert_eq!(region_of(0x4c000), Region::Zero);
        assert_eq!(region_of(0x7ffff), Region::Zero);
        assert_eq!(region_of(0x80000), Region::One);
        assert_eq!(region_of(0xe7fff), Region::One);
        assert_eq!(region_of(0xe8000), Region::Outside);
    }

    #[test]
    fn elements() {
        assert_eq!(element_of(0x4c000), 0);
        assert_eq!(element_of(0x4ffff), 0);
        assert_eq!(element_of(0x50000), 1);
        assert_eq!(element_of(0x7ffff), 12);
        // Region 1: a 32 KiB interleaved element is one contention domain.
        assert_eq!(element_of(0x80000), 13);
        assert_eq!(element_of(0x84000), 13);
        assert_eq!(element_of(0x87fff), 13);
        assert_eq!(element_of(0x88000), 14);
        assert_eq!(element_of(0xe7fff), 25);
        assert!(same_element(0x80000, 0x87ffc));
        assert!(!same_element(0x4c000, 0x50000));
        assert!(!same_element(0x7fffc, 0x80000));
        assert_eq!(checked_element_of(0xe8000), None);
        assert_eq!(checked_element_of(0), None);
        assert_eq!(element_of(0), 0);
        assert_eq!(element_of(u32::MAX), 25);
        for element in 0..CONTENTION_ELEMENTS {
            let bounds = element_bounds(element);
            assert_eq!(element_of(bounds.start), element);
            assert_eq!(element_of(bounds.end - 1), element);
        }
        assert_eq!(element_bounds(12), 0x7c000..0x80000);
        assert_eq!(element_bounds(13), 0x80000..0x88000);
        assert!(element_bounds(CONTENTION_ELEMENTS).is_empty());
    }

    #[test]
    fn classes_and_loadable_limit() {
        assert!(MemoryClass::Code.permits(Region::Zero));
        assert!(!MemoryClass::Code.permits(Region::One));
        assert!(MemoryClass::Interleaved.permits(Region::One));
        assert!(!MemoryClass::Interleaved.permits(Region::Zero));
        assert!(MemoryClass::Standard.permits(Region::Zero));
        assert!(!MemoryClass::Standard.permits(Region::Outside));
        assert_eq!(MemoryClass::Code.address_range(), 0x4c000..0x80000);
        assert!(loadable(0xe7000, 0xbb0));
        assert!(!loadable(0xe7000, 0xbb1));
        assert!(!loadable(0x1000, 4));
        assert!(!loadable(0xe7000, u32::MAX));
    }
}
