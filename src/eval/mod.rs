//! Offline evaluations an operator runs before shipping a configuration (`turnstile eval`):
//! real utterances in, figures out. Nothing here talks to Kafka or the store.

pub mod clinc150;
pub mod decisions;
pub mod intent_benchmark;
pub mod recogniser;
