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

/// `TURNSTILE_FAULT_HOLD_TRANSACTION_FILE=path`: once `path` exists, the committer's next
/// transaction with outputs is held open for good after its outputs were delivered to the
/// broker (begun, records written, never committed nor aborted). The scale-down measurement
/// then SIGKILLs the process: a kill mid-transaction, whose records block read_committed readers
/// of their partitions until the broker aborts it (`transaction.timeout.ms`).
pub(super) struct HoldTransaction {
    file: Option<std::path::PathBuf>,
}

impl HoldTransaction {
    pub(super) fn new(file: Option<std::path::PathBuf>) -> Self {
        HoldTransaction { file }
    }

    /// Called inside a transaction, after its outputs were sent: never returns once armed.
    pub(super) fn hold_if_armed(&self, producer: &rdkafka::producer::BaseProducer) {
        use rdkafka::producer::Producer;
        let Some(file) = &self.file else { return };
        if !file.exists() {
            return;
        }
        let _ = producer.flush(std::time::Duration::from_secs(10));
        tracing::error!(
            "Fault injection: holding a Kafka transaction open (outputs delivered, never committed)."
        );
        loop {
            std::thread::sleep(std::time::Duration::from_secs(1));
        }
    }
}
