//! The engine is a pure core (state + turn + decisions → new state + effects): nothing under
//! `src/domain/` may perform I/O, read a clock, draw a random number, log, or reach an adapter.
//! This test reads the sources, so a new `use` of any of those fails here with its file and line.

use std::path::Path;

/// What a pure core has no business naming (paths and crates; comments are skipped).
const FORBIDDEN: &[&str] = &[
    "std::fs",
    "std::net",
    "std::env",
    "std::process",
    "std::io",
    "std::thread",
    "SystemTime",
    "Instant::now",
    "tokio",
    "reqwest",
    "rdkafka",
    "scylla",
    "rand::",
    "uuid::Uuid::new_v4",
    "tracing::",
    "metrics::",
    "crate::store",
    "crate::worker",
    "crate::tool",
    "crate::model",
    "crate::clock",
    "crate::telemetry",
];

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("src/domain is readable") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn domain_performs_no_io_reads_no_clock_and_draws_no_randomness() {
    let mut files = Vec::new();
    rust_files(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("src/domain"),
        &mut files,
    );
    assert!(
        files.len() >= 5,
        "the domain's sources were found: {files:?}"
    );
    let mut found = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("source");
        for (i, line) in text.lines().enumerate() {
            let code = line.split("//").next().unwrap_or("");
            for word in FORBIDDEN {
                if code.contains(word) {
                    found.push(format!(
                        "{}:{}: `{word}` in `{}`",
                        file.display(),
                        i + 1,
                        line.trim()
                    ));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "the pure core reaches outside:\n{}",
        found.join("\n")
    );
}
