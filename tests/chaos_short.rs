//! The CI form of the fault harness (docs/reliability.md): `turnstile chaos --short` for SIGKILL
//! (5 kills, half of them right after a checkpoint save and before its commit), hostile input
//! (500 records interleaved with valid traffic) and a rebalance (1 → 2 → 1 workers). Each run is
//! judged by the independent checker; any lost or duplicated effect, state mismatch, or a run
//! that did no real work fails the test.
//!
//! Needs Kafka at 127.0.0.1:9092 and Cassandra at 127.0.0.1:9042 (`bash scripts/services.sh up`);
//! an unreachable service fails the test with that hint, it never skips. A few minutes.

// Needs the test harness (src/testkit, the fault hook, `chaos`, `scenarios --e2e`):
// `cargo test --features harness`; without the feature this file compiles to no tests.
#![cfg(feature = "harness")]

use std::process::Command;

fn chaos(fault: &str, extra: &[&str]) {
    let out = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["chaos", "--short", "--fault", fault])
        .args(extra)
        .output()
        .expect("run turnstile chaos");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    assert!(
        out.status.success(),
        "turnstile chaos --short --fault {fault} failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("| PASS |"), "no passing row:\n{stdout}");
}

#[test]
fn short_chaos_sigkill_hostile_rebalance_lose_and_duplicate_nothing() {
    chaos("sigkill", &["--cycles", "5"]);
    chaos("hostile", &["--hostile", "500"]);
    chaos("rebalance", &["--peak-workers", "2"]);
}
