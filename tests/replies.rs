//! RP-1..RP-4, SC-6, PR-3a: every reply template of `config/agents.example.yaml`, rendered for
//! every tool, parameter, agent and locale with sample arguments and sample tool responses (those
//! of `examples/tool_service/tool_service.py`), is compared with the reviewed snapshot
//! `tests/golden/replies.example.txt`. A change in wording, a phrase, a format or a template
//! shows up here as a diff to read as a customer would. Regenerate after a deliberate change:
//! `UPDATE_SNAPSHOTS=1 cargo test --features harness --test replies`, then read the diff.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};
use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::{Assistant, ParameterSpec, Tool};
use turnstile::domain::locale::Locale;
use turnstile::domain::parameter::{InvalidReason, ParameterKind};
use turnstile::domain::reply::{About, Replies};

const AGENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/agents.example.yaml");
const SNAPSHOT: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/tests/golden/replies.example.txt"
);

/// What the example tool service answers, per tool: (what the sample shows, response).
fn samples(tool: &str, locale: Locale) -> Vec<(&'static str, Value)> {
    let subject = match locale {
        Locale::En => "I don't recognise this charge",
        Locale::PtBr => "não reconheço esta cobrança",
    };
    match tool {
        "retail_order_cancel" => vec![(
            "cancelled",
            json!({"order_id": "PED-1001", "status": "cancelled",
                   "cancellation_id": "CAN-1A2B3C4D", "refund": "full, within 5 business days"}),
        )],
        "retail_order_tracking" => vec![
            (
                "processing",
                json!({"order_id": "PED-1001", "status": "processing",
                       "estimated_shipping": "1 business day"}),
            ),
            (
                "shipped",
                json!({"order_id": "PED-9999", "status": "shipped", "carrier": "Correios",
                       "tracking_code": "BR9999XX", "estimated_delivery": "2 business days"}),
            ),
            (
                "a status the value map lacks",
                json!({"order_id": "PED-1001", "status": "returned"}),
            ),
            ("no status", json!({"order_id": "PED-1001"})),
            ("an empty response", json!({})),
        ],
        "retail_address_change" => vec![(
            "updated",
            json!({"order_id": "PED-1001", "status": "address_updated",
                   "address": {"zip_code": "01310-100", "house_number": 120}}),
        )],
        "billing_contestation" => vec![(
            "opened",
            json!({"contestation_id": "CT-9F8E7D6C", "status": "opened",
                   "subject": subject, "amount": "71.99",
                   "answer_within": "10 business days"}),
        )],
        "billing_show_bill" => vec![
            (
                "open",
                json!({"account": "t1", "amount": "R$ 120.00", "due_date": "2026-01-10",
                       "status": "open"}),
            ),
            ("an empty response", json!({})),
        ],
        _ => vec![("an empty response", json!({}))],
    }
}

/// A valid value for each parameter: its example, read as the parser reads it; free text a
/// customer's sentence.
fn sample_arguments(tool: &Tool, locale: Locale) -> BTreeMap<String, Value> {
    tool.parameters
        .iter()
        .filter_map(|p| {
            let value = match (&p.kind, locale) {
                (ParameterKind::Text { .. }, Locale::En) => json!("I don't recognise this charge"),
                (ParameterKind::Text { .. }, Locale::PtBr) => json!("não reconheço esta cobrança"),
                (kind, _) => kind
                    .validate(&Value::String(p.example.clone()?), locale)
                    .ok()?,
            };
            Some((p.name.clone(), value))
        })
        .collect()
}

/// Invalid values a customer could send for `p`, with the reason its type gives.
fn invalid_samples(p: &ParameterSpec, locale: Locale) -> Vec<(String, InvalidReason)> {
    let mut raws: Vec<String> = match &p.kind {
        ParameterKind::Id { .. } => {
            let example = p.example.clone().unwrap_or_default();
            vec![example[..example.len().saturating_sub(2)].to_owned()]
        }
        ParameterKind::Integer { min, max } => {
            let mut v = vec!["12a".to_owned()];
            v.extend(min.map(|m| (m - 1).to_string()));
            v.extend(max.map(|m| (m + 1).to_string()));
            v
        }
        ParameterKind::Cep => vec!["0131-10".into()],
        ParameterKind::Money => vec!["R$ 7,1,9".into()],
        ParameterKind::Date => vec!["31/02/2026".into()],
        ParameterKind::Number => vec!["1,2,3".into()],
        ParameterKind::Enum { .. } => vec!["zzz".into()],
        ParameterKind::Text { max_len } => vec!["x".repeat(max_len + 1), String::new()],
    };
    raws.dedup();
    raws.into_iter()
        .filter_map(|raw| {
            let why = p.kind.validate(&Value::String(raw.clone()), locale).err()?;
            Some((raw, why.reason))
        })
        .collect()
}

fn render_locale(a: &Assistant, locale: Locale, out: &mut String) {
    let r = Replies::new(a, locale);
    let m = r.messages();
    let _ = writeln!(
        out,
        "=================== {} ===================",
        locale.tag()
    );
    let _ = writeln!(out, "\n## replies that name nothing");
    for (key, text) in [
        ("out_of_scope", &m.out_of_scope),
        ("clarify", &m.clarify),
        ("nothing_to_confirm", &m.nothing_to_confirm),
        ("nothing_to_cancel", &m.nothing_to_cancel),
        ("human_handoff", &m.human_handoff),
        ("handoff_pending", &m.handoff_pending),
        ("handback", &m.handback),
        ("hold_on", &m.hold_on),
        ("end_session", &m.end_session),
    ] {
        let _ = writeln!(out, "{key}: {text}");
    }
    for agent in a.agents.keys() {
        let _ = writeln!(out, "\n## agent {agent}");
        let _ = writeln!(out, "routed: {}", r.routed(agent));
    }
    for tool in a.tools.values() {
        render_tool(&r, tool, out);
    }
}

fn render_tool(r: &Replies<'_>, tool: &Tool, out: &mut String) {
    let locale = r.locale();
    let _ = writeln!(out, "\n## tool {}", tool.name);
    let required: Vec<String> = tool
        .parameters
        .iter()
        .filter(|p| p.required)
        .map(|p| p.name.clone())
        .collect();
    for n in 1..=required.len() {
        let missing = &required[required.len() - n..];
        let _ = writeln!(
            out,
            "ask_parameters ({}): {}",
            missing.join(", "),
            r.ask_parameters(tool, missing)
        );
    }
    let arguments = sample_arguments(tool, locale);
    let _ = writeln!(out, "confirm: {}", r.confirm(tool, &arguments));
    let mut bare = tool.clone();
    bare.wording.result.clear();
    for (what, data) in samples(&tool.name, locale) {
        let (text, how) = r.completed(tool, &arguments, &data);
        let _ = writeln!(out, "completed ({what}) [{}]: {text}", how.as_str());
        let (text, how) = r.completed(&bare, &arguments, &data);
        let _ = writeln!(
            out,
            "completed without a template ({what}) [{}]: {text}",
            how.as_str()
        );
    }
    render_refusals(r, tool, out);
    render_endings(r, tool, out);
    render_invalid_values(r, tool, out);
}

/// RP-2: failures and refusals with each configured code, with the service's own text only,
/// and with nothing.
fn render_refusals(r: &Replies<'_>, tool: &Tool, out: &mut String) {
    let service_text = "the service refused it";
    let mut codes: Vec<Option<&str>> = tool
        .wording
        .reasons
        .keys()
        .map(|c| Some(c.as_str()))
        .collect();
    codes.push(None);
    for code in codes {
        let body = match code {
            Some(c) => json!({"error": service_text, "code": c}),
            None => json!({"error": service_text}),
        };
        let label = code.map_or(
            format!(
                "no code, the service's {} text",
                tool.wording.service_locale
            ),
            |c| format!("code {c}"),
        );
        let _ = writeln!(out, "failed ({label}): {}", r.failed(tool, &body));
        let _ = writeln!(
            out,
            "not_eligible ({label}): {}",
            r.not_eligible(tool, Some(service_text), code)
        );
    }
    let _ = writeln!(
        out,
        "failed (no answer: a timeout): {}",
        r.failed(tool, &Value::Null)
    );
    let _ = writeln!(
        out,
        "not_eligible (no reason): {}",
        r.not_eligible(tool, None, None)
    );
}

/// SC-6, PR-3a: the sentences that name a transaction as it ends.
fn render_endings(r: &Replies<'_>, tool: &Tool, out: &mut String) {
    for (key, which) in [
        ("cancelled", About::Cancelled),
        ("declined", About::Declined),
        ("interrupted", About::Interrupted),
        ("expired", About::Expired),
        ("not_offered", About::NotOffered),
        (
            "pre_validation_unavailable",
            About::PreValidationUnavailable,
        ),
    ] {
        let _ = writeln!(out, "{key}: {}", r.about(which, tool));
    }
    let _ = writeln!(
        out,
        "end with this transaction active: {} {}",
        r.about(About::NotDone, tool),
        r.messages().end_session
    );
}

/// RP-4: each parameter's invalid values.
fn render_invalid_values(r: &Replies<'_>, tool: &Tool, out: &mut String) {
    let locale = r.locale();
    for p in &tool.parameters {
        for (raw, why) in invalid_samples(p, locale) {
            let _ = writeln!(
                out,
                "invalid_value ({}, {}): {}",
                p.name,
                why.as_str(),
                r.invalid_value(tool, &p.name, &raw, why)
            );
        }
        if let Some((_, why)) = invalid_samples(p, locale).first() {
            let _ = writeln!(
                out,
                "attempts_exhausted ({}): {}",
                p.name,
                r.attempts_exhausted(tool, &p.name, *why)
            );
        }
    }
}

fn render_all() -> String {
    let catalog = load_catalog(Path::new(AGENTS)).unwrap_or_else(|e| panic!("{e}"));
    let mut out = String::from(
        "# Every reply of config/agents.example.yaml, rendered by tests/replies.rs (RP-1..RP-4,\n\
         # SC-6, PR-3a). Read it as an English and a Brazilian customer would; regenerate with\n\
         # UPDATE_SNAPSHOTS=1 cargo test --features harness --test replies\n",
    );
    for a in catalog.assistants.values() {
        let _ = writeln!(out, "\n# assistant {}\n", a.agent_id);
        for locale in Locale::ALL {
            render_locale(a, locale, &mut out);
            out.push('\n');
        }
    }
    out
}

/// A line diff (longest common subsequence), `-` the snapshot, `+` the rendering.
fn diff(old: &str, new: &str) -> String {
    let a: Vec<&str> = old.lines().collect();
    let b: Vec<&str> = new.lines().collect();
    let mut lcs = vec![vec![0usize; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let (mut i, mut j, mut out) = (0, 0, String::new());
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            i += 1;
            j += 1;
        } else if i < a.len() && (j == b.len() || lcs[i + 1][j] >= lcs[i][j + 1]) {
            let _ = writeln!(out, "- {}", a[i]);
            i += 1;
        } else {
            let _ = writeln!(out, "+ {}", b[j]);
            j += 1;
        }
    }
    out
}

// RP-1, RP-2, RP-3, RP-4, SC-6, PR-3a: the reviewed rendering of every reply.
#[test]
fn every_reply_of_the_example_domain_matches_the_reviewed_snapshot() {
    let rendered = render_all();
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::write(SNAPSHOT, &rendered).expect("write the snapshot");
        return;
    }
    let stored = std::fs::read_to_string(SNAPSHOT).unwrap_or_default();
    assert!(
        stored == rendered,
        "the replies differ from {SNAPSHOT} (- snapshot, + now):\n{}\nIf the change is \
         deliberate, regenerate with `UPDATE_SNAPSHOTS=1 cargo test --features harness --test \
         replies` and read the new snapshot as a customer would before committing it.",
        diff(&stored, &rendered)
    );
}

// RP-2: no reply of a pt-BR customer carries the example service's English words, and no
// reply anywhere shows a raw placeholder or optional-segment bracket.
#[test]
fn rp2_rp1_no_foreign_text_and_no_raw_placeholder() {
    let rendered = render_all();
    let pt = rendered
        .split("=================== pt-BR ===================")
        .nth(1)
        .expect("a pt-BR section");
    for line in pt.lines() {
        let Some((what, text)) = line.split_once(": ") else {
            continue;
        };
        for english in [
            "the service refused it",
            "business day",
            "being prepared",
            "shipped",
        ] {
            assert!(
                !text.contains(english) || what.contains("[unmapped_value]"),
                "a pt-BR reply carries `{english}`: {line}"
            );
        }
    }
    for line in rendered
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("==="))
    {
        let text = line.split_once(": ").map_or(line, |(_, t)| t);
        assert!(
            !text.contains('{') && !text.contains('}') && !text.contains('['),
            "raw template syntax in `{line}`"
        );
    }
}
