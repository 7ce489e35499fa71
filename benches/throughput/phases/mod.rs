//! The phases, each on its own topics, consumer group and session ids.

mod raw;
mod worker;

pub use raw::raw_phase;
pub use worker::{backlog_phase, worker_phase};
