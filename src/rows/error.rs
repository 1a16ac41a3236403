//! The errors of row encoding, decoding, finalizing and checking
//! (`RowError`), in a file of their own so that the encoder, the decoder,
//! the checkers and the consecutive placement fail with them without
//! importing `rows`, which declares and re-exports them.

/// Errors of row encoding, decoding, finalizing and checking.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RowError {
    #[error(transparent)]
    Encode(#[from] crate::target::EncodeError),
    #[error(transparent)]
    Decode(#[from] crate::target::DecodeError),
    #[error("word {word}: byte address {address:#x} does not fit its field")]
    Unrepresentable { word: usize, address: u32 },
    #[error("relocation slot names word {word}, past the row's end")]
    SlotOutOfRange { word: usize },
    #[error("word {word}: {reason}")]
    Malformed { word: usize, reason: &'static str },
    #[error("tile {tile}: at event {event} the row {found} but the schedule {expected}")]
    Mismatch {
        tile: u32,
        event: u64,
        found: String,
        expected: String,
    },
    #[error("tile {tile}: the row breaks a receive rule at event {event}: {rule}")]
    ReceiveRule {
        tile: u32,
        event: u64,
        rule: &'static str,
    },
    #[error(
        "tile {tile}: at event {event} the row sends from and receives into one memory element \
         (one allocation, less than an element apart)"
    )]
    ElementConflict { tile: u32, event: u64 },
    #[error(
        "tile {tile}: schedule needs a control inside the first events of a send at event {event}"
    )]
    ControlOnSendStart { tile: u32, event: u64 },
    #[error("the schedule does not match the problem: {what}")]
    Shape { what: &'static str },
    #[error("tile {tile}: allocations need {bytes} bytes, more than the tile's memory")]
    PlacementOverflow { tile: u32, bytes: u64 },
    #[error(
        "tile {tile}: word {word} addresses allocation {allocation} at offset {offset}, \
         which is not inside an allocation of this tile"
    )]
    ForeignSlot {
        tile: u32,
        word: u32,
        allocation: u32,
        offset: u32,
    },
}
