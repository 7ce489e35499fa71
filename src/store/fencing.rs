//! The fencing timestamp every checkpoint write carries (IO-4), shared by the store adapters:
//! `(epoch << 40) | (offset << 2) | phase`. A zombie that lost its partition holds a lower epoch,
//! so its writes lose last-write-wins against the new owner's, whatever order they arrive in;
//! within one owner the offset orders turns and the phase orders the writes of one turn.

use crate::ports::{Fence, StoreError};

/// Epochs must stay below 2^23 so that `epoch << 40` fits a positive i64 timestamp.
pub const EPOCH_LIMIT: i64 = 1 << 23;
/// Offsets must stay below 2^38 so that `offset << 2` stays below the epoch bits.
pub const OFFSET_LIMIT: i64 = 1 << 38;

/// Phase of the LC-4 write-ahead: state + in-flight record before a tool executes.
pub const PHASE_WRITE_AHEAD: u8 = 0;
/// Phase of the end of a turn: state, applied offset, outbox.
pub const PHASE_TURN_END: u8 = 1;
/// Phase of the outbox prune after the Kafka commit became known: it beats the turn end of the
/// same offset and loses to every write of the next offset.
pub const PHASE_OUTBOX_PRUNE: u8 = 2;

/// The fencing timestamp `(epoch << 40) | (offset << 2) | phase` (IO-4).
///
/// Refuses values outside the bit budget instead of wrapping: a wrapped timestamp would let an old
/// owner beat a new one, the exact failure the scheme exists to prevent.
pub fn write_timestamp(epoch: i64, offset: i64, phase: u8) -> Result<i64, StoreError> {
    if !(0..EPOCH_LIMIT).contains(&epoch) {
        return Err(StoreError::rejected(format!(
            "lease epoch {epoch} outside 0..2^23: fencing timestamps would overflow"
        )));
    }
    if !(0..OFFSET_LIMIT).contains(&offset) {
        return Err(StoreError::rejected(format!(
            "offset {offset} outside 0..2^38: fencing timestamps would overflow"
        )));
    }
    if phase > PHASE_OUTBOX_PRUNE {
        return Err(StoreError::rejected(format!(
            "write phase {phase} is not 0 (write-ahead), 1 (turn end) or 2 (outbox prune)"
        )));
    }
    Ok((epoch << 40) | (offset << 2) | i64::from(phase))
}

/// The timestamp of `fence`'s write in `phase`.
pub fn fence_timestamp(fence: Fence, phase: u8) -> Result<i64, StoreError> {
    write_timestamp(fence.epoch, fence.offset, phase)
}
