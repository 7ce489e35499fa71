//! Generated conversations and their independent checker (see `tests/generated_conversations.rs`).

pub mod check;
pub mod grammar;
pub mod run;
pub mod shrink;
pub mod trace;
pub mod yaml;
