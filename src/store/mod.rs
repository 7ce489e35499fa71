//! Checkpoint stores behind `ports::CheckpointStore`: one adapter per technology, the fencing
//! timestamp they share, and the one retry layer in front of them.

pub mod cache;
pub mod cql;
pub mod fencing;
pub mod memory;
pub mod retrying;

pub use cache::CheckpointCache;
pub use memory::InMemoryCheckpointStore;
pub use retrying::RetryingStore;
