//! The clocks, read only at the edges (worker, tool adapter, harnesses): the domain gets the
//! time as a value and never reads a clock.

/// Milliseconds since the Unix epoch; 0 for a clock set before 1970.
pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

/// The monotonic clock the worker's coordinator passes to its partition state machine
/// (`worker::partitions`): tokio's, so a test with paused time (`start_paused`) moves it.
pub fn monotonic() -> std::time::Instant {
    tokio::time::Instant::now().into_std()
}
