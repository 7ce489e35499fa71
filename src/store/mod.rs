//! Checkpoint stores behind `ports::CheckpointStore`.

pub mod memory;

pub use memory::InMemoryCheckpointStore;
