//! `turnstile scenarios --e2e` on a small subset, through the real worker: the conformance
//! examples (`tests/conformance/examples/`) plus project scenarios covering a restart (SIGKILL), a
//! redelivery, both together, and a `settings` block (a second worker). Needs Kafka and the CQL store
//! (`bash scripts/services.sh up`); without them this test fails, it never skips.

// Needs the test harness (src/testkit, the fault hook, `chaos`, `scenarios --e2e`):
// `cargo test --features harness`; without the feature this file compiles to no tests.
#![cfg(feature = "harness")]

use std::path::{Path, PathBuf};
use std::process::Command;

/// Project scenarios: restart + redelivery, redelivery only, restart only, SESSION_TTL (its own
/// worker, and the turn clock carried by `received_at`), and the `handback` action (SC-11) after
/// an expiry, through the inbound topic.
const PROJECT_SCENARIOS: &[&str] = &[
    "tests/scenarios/lc4-ev4-one-execution-per-idempotency-key.yaml",
    "tests/scenarios/ev1-redelivery-changes-nothing.yaml",
    "tests/scenarios/pr7-st3-seed10-resume-same-identity-after-restart.yaml",
    "tests/scenarios/st6-sc7-session-ttl-setting.yaml",
    "tests/scenarios/sc11-st6-handback-after-session-expired-cancels-expired-en-pt-br.yaml",
];

fn yaml_files(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .filter(|e| {
            matches!(
                e.path().extension().and_then(|x| x.to_str()),
                Some("yaml" | "yml")
            )
        })
        .count()
}

#[test]
fn e2e_subset_passes_through_kafka_and_the_store() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let examples = root.join("tests/conformance/examples");
    let expected = yaml_files(&examples) + PROJECT_SCENARIOS.len();
    let output = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        // `config:` paths and the worker's default files resolve from the project root.
        .current_dir(&root)
        .arg("scenarios")
        .arg("--e2e")
        .arg(&examples)
        .args(PROJECT_SCENARIOS)
        .output()
        .expect("run the turnstile binary");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(64) {
        panic!(
            "the e2e runner could not set up: are Kafka (127.0.0.1:9092) and the CQL store \
             (127.0.0.1:9042) running? Start them with `bash scripts/services.sh up`.\n\
             stderr:\n{stderr}\nstdout:\n{stdout}"
        );
    }
    let last = stdout.lines().last().unwrap_or_default();
    assert_eq!(
        last,
        format!("{expected} passed, 0 failed"),
        "e2e scenarios failed.\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(
        output.status.success(),
        "exit {:?}\n{stdout}",
        output.status
    );
}
