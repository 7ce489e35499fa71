//! Offline evaluations an operator runs before shipping a configuration (`turnstile eval`):
//! real utterances in, figures out. Nothing here talks to Kafka or the store.

pub mod clinc150;
pub mod conversations;
pub mod decisions;
pub mod intent_benchmark;
pub mod recogniser;

/// The 95th percentile of `ms` (the value at rank ⌈0.95 n⌉, the largest when that is past the end).
pub fn p95(ms: &[f64]) -> f64 {
    let mut sorted = ms.to_vec();
    sorted.sort_by(f64::total_cmp);
    sorted
        .get(((sorted.len() as f64) * 0.95).ceil() as usize)
        .or(sorted.last())
        .copied()
        .unwrap_or(0.0)
}
