//! The fault hook of the chaos harness (feature `harness` only, never in a release build):
//! `TURNSTILE_FAULT_ABORT_AFTER_SAVES=n` aborts the process right after its n-th end-of-turn
//! save, before that turn's Kafka commit — the narrowest crash window (docs/reliability.md).

use std::sync::atomic::{AtomicU64, Ordering};

pub(super) struct AbortAfterSaves {
    after: Option<u64>,
    saves: AtomicU64,
}

impl AbortAfterSaves {
    pub(super) fn new(after: Option<u64>) -> Self {
        AbortAfterSaves {
            after,
            saves: AtomicU64::new(0),
        }
    }

    pub(super) fn after_save(&self) {
        if let Some(n) = self.after {
            if self.saves.fetch_add(1, Ordering::SeqCst) + 1 >= n {
                tracing::error!(
                    "Fault injection: aborting after a checkpoint save, before its commit."
                );
                std::process::abort();
            }
        }
    }
}
