//! Docs that stay true: every project path the README and `docs/` name in backticks (`src/…`,
//! `tests/…`, `benches/…`, `config/…`) exists (module splits moved files before, and the docs kept
//! the old paths until a reader tripped over them), and every requirement ID the repository cites
//! is defined in `docs/requirements.md`.

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

/// The requirement IDs that `docs/requirements.md` defines (`- **PR-1** …`), and the families
/// (`## PR — …`) whose citations the scan below checks.
fn defined_requirements(doc: &str) -> (Vec<String>, Vec<String>) {
    let id = regex::Regex::new(r"(?m)^- \*\*([A-Z]{2}-[0-9]+[a-z]?)\*\*").expect("regex");
    let family = regex::Regex::new(r"(?m)^## ([A-Z]{2}) — ").expect("regex");
    (
        id.captures_iter(doc).map(|c| c[1].to_string()).collect(),
        family
            .captures_iter(doc)
            .map(|c| c[1].to_string())
            .collect(),
    )
}

/// Every `FAMILY-N[a]` citation in `text`.
fn cited_requirements(text: &str, families: &[String]) -> Vec<String> {
    let cited =
        regex::Regex::new(&format!(r"\b(?:{})-[0-9]+[a-z]?\b", families.join("|"))).expect("regex");
    cited
        .find_iter(text)
        .map(|m| m.as_str().to_string())
        .collect()
}

/// The repository's own text files, outside build output and caches.
fn project_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    const TEXT: [&str; 9] = [
        "rs", "md", "yaml", "yml", "sh", "py", "toml", "json", "jsonl",
    ];
    for entry in std::fs::read_dir(dir).expect("readable folder") {
        let path = entry.expect("folder entry").path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if path.is_dir() {
            if !name.starts_with('.') && name != "target" {
                project_files(&path, out);
            }
        } else if path
            .extension()
            .and_then(|e| e.to_str())
            .is_some_and(|e| TEXT.contains(&e))
        {
            out.push(path);
        }
    }
}

#[test]
fn every_cited_requirement_is_defined_in_docs_requirements() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let doc = std::fs::read_to_string(root.join("docs/requirements.md")).expect("requirements");
    let (defined, families) = defined_requirements(&doc);
    assert!(defined.len() > 40, "only {} IDs defined", defined.len());
    let mut seen = std::collections::BTreeSet::new();
    let twice: Vec<_> = defined.iter().filter(|id| !seen.insert(*id)).collect();
    assert!(
        twice.is_empty(),
        "defined twice in docs/requirements.md: {twice:?}"
    );

    let mut files = Vec::new();
    project_files(root, &mut files);
    let mut cited = 0;
    let mut undefined = std::collections::BTreeMap::<String, String>::new();
    for file in &files {
        let Ok(text) = std::fs::read_to_string(file) else {
            continue;
        };
        for id in cited_requirements(&text, &families) {
            cited += 1;
            if !seen.contains(&id) {
                let at = file
                    .strip_prefix(root)
                    .unwrap_or(file)
                    .display()
                    .to_string();
                undefined.entry(id).or_insert(at);
            }
        }
    }
    assert!(
        undefined.is_empty(),
        "requirement IDs cited but not defined in docs/requirements.md (define them there, or \
         fix the citation):\n{}",
        undefined
            .iter()
            .map(|(id, at)| format!("{id} (first in {at})"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The scan itself works: the code cites hundreds of IDs.
    assert!(cited > 300, "only {cited} citations found");
}

#[test]
fn the_requirement_scan_reads_definitions_and_citations() {
    // A made-up family, so that this test's own text cites nothing undefined.
    let doc =
        "## ZZ — test\n\n- **ZZ-1** first\n- **ZZ-3a** a question\n  **ZZ-9** not a definition\n";
    let (defined, families) = defined_requirements(doc);
    assert_eq!(defined, vec!["ZZ-1", "ZZ-3a"]);
    assert_eq!(families, vec!["ZZ"]);
    assert_eq!(
        cited_requirements("// ZZ-1, ZZ-3a and ZZ-12; not PED-1001 or XZZ-2", &families),
        vec!["ZZ-1", "ZZ-3a", "ZZ-12"]
    );
}

/// Conformance with the steering side's numbered restatement, which sits beside the repository
/// on the project's machines and in CI but not in a plain clone: every ID it numbers is defined
/// here too.
#[test]
fn requirements_cover_the_steering_restatement_when_present() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let contract = root.join("../shared/spec/contract.md");
    let Ok(text) = std::fs::read_to_string(&contract) else {
        println!(
            "skipped: {} not found (a clone with nothing beside it)",
            contract.display()
        );
        return;
    };
    let doc = std::fs::read_to_string(root.join("docs/requirements.md")).expect("requirements");
    let (defined, _) = defined_requirements(&doc);
    let numbered = regex::Regex::new(r"\*\*([A-Z]{2}-[0-9]+[a-z]?)\*\*").expect("regex");
    let missing: Vec<_> = numbered
        .captures_iter(&text)
        .map(|c| c[1].to_string())
        .filter(|id| !defined.contains(id))
        .collect();
    assert!(
        missing.is_empty(),
        "{} numbers requirements that docs/requirements.md does not define: {missing:?}",
        contract.display()
    );
}
