//! `turnstile eval recogniser` through the binary (PR-6): the report's figures on real yes / no /
//! maybe answers — CLINC150's crowd-sourced English ones and the project's own en / pt-BR sets
//! (`tests/data/yes_no_maybe.*.json`, CLINC150's format) — and clear errors for bad input.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// CLINC150 `train` / `val` (CC BY 3.0; `tests/data/clinc150/README.md`).
const CLINC150: &str = "tests/data/clinc150/data_train_val.json";

fn eval(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_turnstile"))
        .args(["eval", "recogniser"])
        .args(args)
        .output()
        .expect("run turnstile");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn report(args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let (code, stdout, stderr) = eval(&all);
    assert_eq!(code, 0, "{stderr}");
    serde_json::from_str(&stdout).expect("one JSON object")
}

/// PR-6's target on real answers: no utterance read against its meaning, and each of yes / no
/// recalled at 75 % or more.
fn assert_target(report: &Value, what: &str) {
    assert_eq!(
        report["polarity_errors"], 0,
        "{what}: polarity errors {}",
        report["errors"]
    );
    for key in ["yes_recall", "no_recall"] {
        let recall = report[key].as_f64().expect("recall");
        assert!(recall >= 0.75, "{what}: {key} {recall}");
    }
    assert_eq!(report["maybe"]["affirm"], 0, "{what}");
    assert_eq!(report["maybe"]["deny"], 0, "{what}");
}

#[test]
fn clinc150_train_and_val_have_no_polarity_error() {
    // PR-6.
    assert!(Path::new(CLINC150).exists(), "{CLINC150} is missing");
    for split in ["train", "val"] {
        let r = report(&[CLINC150, "--split", split]);
        assert_eq!(r["split"], split);
        assert_eq!(r["locale"], "en");
        let count = r["yes"]["count"].as_u64().unwrap_or(0);
        assert!(count >= 20, "{split}: {count} yes utterances");
        assert_target(&r, split);
    }
}

#[test]
fn own_english_and_portuguese_sets_have_no_polarity_error() {
    // PR-6, en and pt-BR.
    let en = report(&["tests/data/yes_no_maybe.en.json"]);
    assert_target(&en, "en");
    let pt = report(&["tests/data/yes_no_maybe.pt-br.json", "--locale", "pt-BR"]);
    assert_eq!(pt["locale"], "pt-BR");
    assert_target(&pt, "pt-BR");
}

#[test]
fn text_report_lists_every_polarity_error_with_its_utterance() {
    // PR-6: an operator sees which sentence was misread.
    let dir = std::env::temp_dir().join(format!("turnstile-eval-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let file = dir.join("misread.json");
    std::fs::write(
        &file,
        r#"{"train": [["yes", "no"], ["nope", "maybe"], ["yes", "yes"], ["i would love that", "yes"]], "val": []}"#,
    )
    .expect("write");
    let path = file.to_str().expect("utf-8");
    let (code, stdout, stderr) = eval(&[path, "--show-undecided"]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stdout.contains("polarity errors: 2"), "{stdout}");
    assert!(stdout.contains("no read as affirm: \"yes\""), "{stdout}");
    assert!(stdout.contains("maybe read as deny: \"nope\""), "{stdout}");
    assert!(stdout.contains("yes: \"i would love that\""), "{stdout}");
    let r = report(&[path]);
    assert_eq!(r["polarity_errors"], 2);
    assert_eq!(r["yes_recall"], 0.5);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn bad_input_names_the_problem_and_exits_64() {
    // Bad input: a clear error, never a panic.
    let dir = std::env::temp_dir().join(format!("turnstile-eval-bad-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("tmp");
    let broken = dir.join("broken.json");
    std::fs::write(&broken, r#"{"train": [["text only"]]}"#).expect("write");
    let broken = broken.to_str().expect("utf-8");

    let cases: [(&[&str], &str); 4] = [
        (
            &["/nonexistent/clinc.json"],
            "cannot read /nonexistent/clinc.json",
        ),
        (&[broken], "not CLINC150's JSON format at `train[0]`"),
        (
            &["tests/data/yes_no_maybe.en.json", "--split", "test"],
            "no split `test`",
        ),
        (
            &["tests/data/yes_no_maybe.en.json", "--locale", "fr"],
            "unknown locale `fr`",
        ),
    ];
    for (args, message) in cases {
        let (code, _, stderr) = eval(args);
        assert_eq!(code, 64, "{args:?}: {stderr}");
        assert!(stderr.contains(message), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
