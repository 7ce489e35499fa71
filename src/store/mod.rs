//! Checkpoint stores behind `ports::CheckpointStore`.

pub mod cql;
pub mod memory;

pub use memory::InMemoryCheckpointStore;
