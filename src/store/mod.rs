//! Checkpoint stores behind `ports::CheckpointStore`: one adapter per technology, the fencing
//! timestamp they share, the one retry layer in front of them, and the checkpoint cache in front
//! of that.
//!
//! | module | what it is |
//! |---|---|
//! | [`cql`] | `ScyllaCheckpointStore`: checkpoints and partition leases over CQL (ScyllaDB or Apache Cassandra) |
//! | [`memory`] | `InMemoryCheckpointStore`: the same write semantics in a map |
//! | [`fencing`] | the IO-4 write timestamp every write carries |
//! | [`retrying`] | `RetryingStore`: the one retry layer |
//! | [`cache`] | `CheckpointCache` (the rows this worker saved) and `CachingCheckpointStore` (a store that reads them instead of the store under the same lease) |

pub mod cache;
pub mod cql;
pub mod fencing;
pub mod memory;
pub mod retrying;

pub use cache::{CachingCheckpointStore, CheckpointCache};
pub use memory::InMemoryCheckpointStore;
pub use retrying::RetryingStore;
