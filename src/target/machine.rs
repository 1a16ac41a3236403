//! The machine a compilation targets: a named C600 or its first `n` logical
//! tiles. This module owns validating a machine request (preset name and tile
//! count, as written in configuration) into a [`Machine`], and per-machine
//! derived figures. It must not hold any per-program state; errors name the
//! configuration field they come from so callers can report them as-is.

use thiserror::Error;

use super::mapping::{C600_TILES, physical_tile};
use super::memory::SRAM_BYTES_PER_TILE;

/// Name of the full C600 preset (IPU21.md, "Chip").
pub const C600_PRESET: &str = "c600";

/// Presets [`Machine::from_preset`] accepts (model: only the C600 is described by IPU21.md).
pub const KNOWN_PRESETS: &[&str] = &[C600_PRESET];

/// Configuration field that names the preset (model: configuration schema).
pub const PRESET_FIELD: &str = "machine.preset";

/// Configuration field that names the tile count (model: configuration schema).
pub const TILES_FIELD: &str = "machine.tiles";

/// Fewest tiles a machine may have (model: any non-empty prefix of the C600).
pub const MINIMUM_TILES: u32 = 1;

/// Why a machine request was rejected.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum MachineError {
    /// The preset name is not one of [`KNOWN_PRESETS`].
    #[error("{field}: unknown preset `{name}`; known presets: {known}")]
    UnknownPreset {
        field: &'static str,
        name: String,
        known: String,
    },
    /// The tile count is outside `minimum..=maximum`.
    #[error("{field}: {tiles} tiles is out of range; allowed {minimum}..={maximum}")]
    TilesOutOfRange {
        field: &'static str,
        tiles: u32,
        minimum: u32,
        maximum: u32,
    },
    /// A logical tile id is not on this machine.
    #[error("logical tile {tile} is not on machine `{machine}` with {tiles} tiles")]
    TileNotOnMachine {
        tile: u32,
        machine: String,
        tiles: u32,
    },
}

/// A target machine: the first `tiles` logical tiles of a named chip.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Machine {
    /// Human-readable name, `c600` or `c600-first-N`.
    pub name: String,
    /// Number of logical tiles, `0..tiles` are usable.
    pub tiles: u32,
}

impl Machine {
    /// The whole C600 (IPU21.md, "Chip": 1,472 tiles).
    pub fn c600() -> Machine {
        Machine {
            name: C600_PRESET.to_owned(),
            tiles: C600_TILES,
        }
    }

    /// The first `tiles` logical tiles of a C600; `tiles` must be in `1..=1472`.
    pub fn first_tiles(tiles: u32) -> Result<Machine, MachineError> {
        if !(MINIMUM_TILES..=C600_TILES).contains(&tiles) {
            return Err(MachineError::TilesOutOfRange {
                field: TILES_FIELD,
                tiles,
                minimum: MINIMUM_TILES,
                maximum: C600_TILES,
            });
        }
        if tiles == C600_TILES {
            return Ok(Machine::c600());
        }
        Ok(Machine {
            name: format!("{C600_PRESET}-first-{tiles}"),
            tiles,
        })
    }

    /// A machine from configuration: a preset name and an optional tile count
    /// (defaulting to the whole chip).
    pub fn from_preset(name: &str, tiles: Option<u32>) -> Result<Machine, MachineError> {
        match name {
            C600_PRESET => Machine::first_tiles(tiles.unwrap_or(C600_TILES)),
            _ => Err(MachineError::UnknownPreset {
                field: PRESET_FIELD,
                name: name.to_owned(),
                known: KNOWN_PRESETS.join(", "),
            }),
        }
    }

    /// SRAM bytes on each tile (IPU21.md, "Chip": 624 KiB).
    pub fn sram_bytes_per_tile(&self) -> u32 {
        SRAM_BYTES_PER_TILE
    }

    /// SRAM bytes over all tiles of this machine (derived).
    pub fn total_sram_bytes(&self) -> u64 {
        u64::from(SRAM_BYTES_PER_TILE) * u64::from(self.tiles)
    }

    /// Physical id of a logical tile of this machine (IPU21.md, "Logical and physical tiles").
    pub fn physical(&self, logical: u32) -> Result<u32, MachineError> {
        if logical < self.tiles {
            Ok(physical_tile(logical))
        } else {
            Err(MachineError::TileNotOnMachine {
                tile: logical,
                machine: self.name.clone(),
                tiles: self.tiles,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets() {
        assert_eq!(Machine::from_preset("c600", None), Ok(Machine::c600()));
        assert_eq!(Machine::c600().tiles, 1472);
        let small = Machine::from_preset("c600", Some(16)).unwrap();
        assert_eq!(small.tiles, 16);
        assert_eq!(small.name, "c600-first-16");
        assert_eq!(Machine::first_tiles(1472), Ok(Machine::c600()));
        assert_eq!(Machine::first_tiles(1).unwrap().tiles, 1);
    }

    #[test]
    fn errors_name_their_field() {
        let unknown = Machine::from_preset("gc200", None).unwrap_err();
        let message = unknown.to_string();
        assert!(message.contains("machine.preset"), "{message}");
        assert!(
            message.contains("gc200") && message.contains("c600"),
            "{message}"
        );
        for tiles in [0, 1473, u32::MAX] {
            let error = Machine::from_preset("c600", Some(tiles)).unwrap_err();
            let message = error.to_string();
            assert!(message.contains("machine.tiles"), "{message}");
            assert!(message.contains("1..=1472"), "{message}");
            assert_eq!(Machine::first_tiles(tiles).unwrap_err(), error);
        }
    }

    #[test]
    fn sizes_and_physical_ids() {
        let machine = Machine::first_tiles(4).unwrap();
        assert_eq!(machine.sram_bytes_per_tile(), 624 * 1024);
        assert_eq!(machine.total_sram_bytes(), 4 * 624 * 1024);
        assert_eq!(Machine::c600().total_sram_bytes(), 1472 * 624 * 1024);
        assert_eq!(machine.physical(1), Ok(2));
        assert!(machine.physical(4).is_err());
    }
}
