//! Every project path the README and `docs/` name in backticks (`src/…`, `tests/…`, `benches/…`,
//! `config/…`) exists: module splits moved files before, and the docs kept the old paths until a
//! reader (or CI's deploy check) tripped over them.

use std::path::Path;

/// Top-level folders whose files the docs point readers at.
const CHECKED: [&str; 4] = ["src/", "tests/", "benches/", "config/"];

/// The backticked spans of `text` that name a path under one of [`CHECKED`], without glob or
/// brace patterns (`src/model/{http,scripted}.rs`, `tests/*.rs`), which name no single file.
fn named_paths(text: &str) -> Vec<&str> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|span| CHECKED.iter().any(|dir| span.starts_with(dir)))
        .filter(|span| {
            span.chars()
                .all(|c| c.is_ascii_alphanumeric() || "_./-".contains(c))
        })
        .collect()
}

#[test]
fn paths_named_in_the_docs_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut files = vec![root.join("README.md")];
    for entry in std::fs::read_dir(root.join("docs")).expect("docs/") {
        let path = entry.expect("docs entry").path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    let mut checked = 0;
    let mut missing = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("readable doc");
        for path in named_paths(&text) {
            checked += 1;
            if !root.join(path).exists() {
                missing.push(format!("{}: `{path}`", file.display()));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "the docs name paths that do not exist (update the doc to the file's new place):\n{}",
        missing.join("\n")
    );
    // The scan itself works: the docs do name project files (a broken split would find none).
    assert!(checked > 50, "only {checked} paths found in the docs");
}

#[test]
fn the_scan_finds_paths_and_skips_patterns() {
    let text = "see `src/lib.rs` and `src/model/{http,scripted}.rs`, `tests/*.rs`, `cargo test`, \
                `config/agents.example.yaml`";
    assert_eq!(
        named_paths(text),
        vec!["src/lib.rs", "config/agents.example.yaml"]
    );
}
