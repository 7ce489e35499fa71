//! A stored conversation as a test (`turnstile export`): a scenario (`docs/scenarios.md`) whose
//! model answers and tool results are scripted from the records and whose expectations are what
//! happened, or a conversation-set line (`docs/conversations.md`) whose expectations are the
//! outcome classes the turns fell in. Either is a starting point: edit it into the expected
//! behaviour and commit it.
//!
//! Customers' messages are personal data. The values of parameters marked `sensitive` in the
//! configuration are masked everywhere in the export (the message, the scripted answers, the
//! expectations): digits become `5`, and the letters of free text `x`, so the masked value
//! still parses as its type and the scenario still passes. Dates and options cannot be masked
//! and stay valid; they are left and the export says so.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;
use serde_json::{json, Map, Value};

use super::replay::{trace_all, Exchange};
use super::DecisionRecord;
use crate::domain::catalog::Assistant;
use crate::domain::decision::{ModelAnswer, RouterDecision};
use crate::domain::effect::{Answer, Request, TurnOutcome};
use crate::domain::engine::Engine;
use crate::domain::locale::Locale;
use crate::domain::parameter::ParameterKind;
use crate::domain::state::AgentState;
use crate::domain::transaction::AttemptOutcome;
use crate::domain::turn::TurnInput;
use crate::eval::conversations::judge::{judge, TurnFacts};

/// What an export produced: the text to write and what the operator must know about it.
#[derive(Debug, Clone, PartialEq)]
pub struct Exported {
    pub text: String,
    /// Masked parameters, values that could not be masked, answers the format cannot hold.
    pub notes: Vec<String>,
}

/// Why a conversation cannot be exported.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ExportError {
    #[error("no decision records are kept for this conversation")]
    NoRecords,
    #[error("the conversation does not replay from its records: {0}")]
    NotReplayable(String),
    #[error("no assistant `{0}` in the configuration given")]
    UnknownAssistant(String),
}

/// One replayed turn, as export reads it.
struct Played<'a> {
    record: &'a DecisionRecord,
    before: AgentState,
    exchanges: Vec<Exchange>,
    outcome: TurnOutcome,
}

fn play<'a>(
    engine: &Engine<'_>,
    records: &'a [DecisionRecord],
) -> Result<Vec<Played<'a>>, ExportError> {
    if records.is_empty() {
        return Err(ExportError::NoRecords);
    }
    let traced = trace_all(engine, records).map_err(ExportError::NotReplayable)?;
    Ok(records
        .iter()
        .zip(traced)
        .map(|(record, (before, exchanges, outcome))| Played {
            record,
            before,
            exchanges,
            outcome,
        })
        .collect())
}

/// The records as a scenario file; `config` is the agents file the scenario names.
pub fn scenario(
    engine: &Engine<'_>,
    assistant: &Assistant,
    records: &[DecisionRecord],
    config: &str,
) -> Result<Exported, ExportError> {
    let played = play(engine, records)?;
    let mask = Masking::of(assistant, &played);
    let mut notes = mask.notes.clone();
    let mut previous_at = None;
    let mut turns = Vec::new();
    for (i, p) in played.iter().enumerate() {
        turns.push(scenario_turn(p, previous_at, i + 1, &mut notes));
        previous_at = Some(p.record.turn.at_ms);
    }
    let id = &played[0].record.turn.identity;
    let file = ScenarioFile {
        name: format!("exported {}", id.key()),
        config: config.to_owned(),
        settings: played[0].record.settings.clone(),
        identity: json!({"tenant_id": id.tenant_id, "agent_id": id.agent_id, "session_id": id.session_id}),
        turns,
    };
    let mut value = serde_json::to_value(&file).unwrap_or(Value::Null);
    mask.apply(&mut value);
    let body = quote_yaml11_booleans(&serde_yaml_ng::to_string(&value).unwrap_or_default());
    let header = header(&played, &notes);
    Ok(Exported {
        text: format!("{header}{body}"),
        notes,
    })
}

/// The records as one conversation-set line (JSONL).
pub fn conversation(
    engine: &Engine<'_>,
    assistant: &Assistant,
    records: &[DecisionRecord],
) -> Result<Exported, ExportError> {
    let played = play(engine, records)?;
    let mask = Masking::of(assistant, &played);
    let first = &played[0].record.turn;
    let turns: Vec<Value> = played
        .iter()
        .map(|p| conversation_turn(assistant, p))
        .collect();
    let mut line = json!({
        "id": first.identity.session_id,
        "locale": first.locale.tag(),
        "agent": first.identity.agent_id,
        "tenant": first.identity.tenant_id,
        "turns": turns,
    });
    mask.apply(&mut line);
    Ok(Exported {
        text: format!("{line}\n"),
        notes: mask.notes,
    })
}

/// `user: yes` quoted: YAML 1.1 readers take `yes`, `no`, `on`, `off` for booleans
/// (docs/scenarios.md asks scenario files to quote them).
fn quote_yaml11_booleans(yaml: &str) -> String {
    const WORDS: [&str; 8] = ["yes", "no", "on", "off", "y", "n", "true", "false"];
    let mut out = String::with_capacity(yaml.len() + 16);
    for line in yaml.lines() {
        let quoted = line.split_once("user: ").and_then(|(head, word)| {
            let plain = head.trim_start_matches([' ', '-']).is_empty();
            (plain && WORDS.contains(&word.to_ascii_lowercase().as_str()))
                .then(|| format!("{head}user: \"{word}\""))
        });
        out.push_str(quoted.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

fn conversation_turn(assistant: &Assistant, p: &Played<'_>) -> Value {
    let reply = p.outcome.reply_text();
    let facts = TurnFacts {
        before: p.before.active_transaction.as_ref(),
        after: p.outcome.state.active_transaction.as_ref(),
        events: &p.outcome.events,
        reply: &reply,
        handoff_route: p.outcome.route.as_ref().is_some_and(|r| r.handoff),
        executed: &p.outcome.executed,
    };
    let observed = judge(&facts, assistant.messages(p.record.turn.locale));
    let mut turn = input_json(&p.record.turn.input);
    turn["expect"] = serde_json::to_value(&observed).unwrap_or(Value::Null);
    turn
}

fn input_json(input: &TurnInput) -> Value {
    match input {
        TurnInput::Text(t) => json!({ "text": t }),
        TurnInput::Action(a) => json!({ "action": {"type": a.as_str()} }),
    }
}

/// The comment a scenario starts with: where it came from, and the notes.
fn header(played: &[Played<'_>], notes: &[String]) -> String {
    let first = played[0].record;
    let mut out = format!(
        "# Exported by `turnstile export` from {} ({} turns, configuration version {}).\n\
         # Model answers and tool results are scripted from the decision records; the \
         expectations are what happened.\n\
         # Edit them into the expected behaviour before committing this as a test.\n",
        first.turn.identity.key(),
        played.len(),
        first.config
    );
    for note in notes {
        out.push_str(&format!("# {note}\n"));
    }
    out
}

#[derive(Serialize)]
struct ScenarioFile {
    name: String,
    config: String,
    #[serde(skip_serializing_if = "Map::is_empty")]
    settings: Map<String, Value>,
    identity: Value,
    turns: Vec<ScenarioTurn>,
}

#[derive(Serialize)]
struct ScenarioTurn {
    #[serde(skip_serializing_if = "Option::is_none")]
    user: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    action: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    locale: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    after: Option<String>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    model: Map<String, Value>,
    #[serde(skip_serializing_if = "Map::is_empty")]
    tools: Map<String, Value>,
    expect: Map<String, Value>,
}

fn scenario_turn(
    p: &Played<'_>,
    previous_at: Option<i64>,
    index: usize,
    notes: &mut Vec<String>,
) -> ScenarioTurn {
    let turn = &p.record.turn;
    let (user, action) = match &turn.input {
        TurnInput::Text(t) => (Some(t.clone()), None),
        TurnInput::Action(a) => (None, Some(json!({"type": a.as_str()}))),
    };
    // The runner spaces turns 1 s apart unless told otherwise; time matters for expiry.
    let after = previous_at
        .map(|at| (turn.at_ms - at).max(0))
        .filter(|gap| *gap != 1000)
        .map(|gap| format!("{}s", (gap + 500) / 1000));
    let (model, tools) = scripts(&p.exchanges, index, notes);
    ScenarioTurn {
        user,
        action,
        locale: (turn.locale != Locale::En).then(|| turn.locale.tag().to_owned()),
        after,
        model,
        tools,
        expect: expectations(p),
    }
}

/// The turn's model and tool scripts from its exchanges. The format scripts one answer per
/// component and tool per turn: a second, different one is noted.
fn scripts(
    exchanges: &[Exchange],
    index: usize,
    notes: &mut Vec<String>,
) -> (Map<String, Value>, Map<String, Value>) {
    let mut model = Map::new();
    let mut tools = Map::new();
    for (request, answer) in exchanges {
        let (target, key, value) = match (request, answer) {
            (_, Answer::Classifier(a)) => (&mut model, "classifier".to_owned(), model_json(a)),
            (_, Answer::Router(a)) => (&mut model, "router".to_owned(), router_json(a)),
            (_, Answer::Interpreter(a)) => (&mut model, "interpreter".to_owned(), model_json(a)),
            (Request::PreValidate(r), Answer::PreValidation(a)) => {
                let key = format!("{}.pre_validation", r.tool);
                let value = json!({"eligible": a.eligible, "reason": a.reason, "code": a.code, "data": a.data});
                (&mut tools, key, value)
            }
            (Request::Execute(r), Answer::Tool(t)) => (&mut tools, r.tool.clone(), tool_json(t)),
            _ => continue,
        };
        match target.get(&key) {
            Some(existing) if *existing != value => notes.push(format!(
                "turn {index}: `{key}` answered twice differently; the scenario scripts the \
                 first answer (one per component and tool per turn)"
            )),
            Some(_) => {}
            None => {
                target.insert(key, value);
            }
        }
    }
    (model, tools)
}

/// A classifier or interpreter answer as a script: the decision's own fields, or a fault word.
fn model_json<T: Serialize>(answer: &ModelAnswer<T>) -> Value {
    match answer {
        Ok(decision) => serde_json::to_value(decision).unwrap_or(Value::Null),
        Err(failure) => Value::String(failure.as_str().to_owned()),
    }
}

fn router_json(answer: &ModelAnswer<RouterDecision>) -> Value {
    match answer {
        Err(failure) => Value::String(failure.as_str().to_owned()),
        Ok(RouterDecision::Route {
            agent,
            intent,
            confidence,
            arguments,
        }) => {
            json!({"agent": agent, "intent": intent, "confidence": confidence, "arguments": arguments})
        }
        Ok(RouterDecision::OutOfScope { confidence }) => {
            json!({"out_of_scope": true, "confidence": confidence})
        }
        Ok(RouterDecision::Topic {
            tool,
            topic,
            confidence,
        }) => json!({"topic": topic, "tool": tool, "confidence": confidence}),
    }
}

fn tool_json(result: &crate::domain::decision::ToolResult) -> Value {
    if result.is_ok() {
        return json!({"ok": true, "data": result.data});
    }
    let mut script = json!({
        "ok": false,
        "retryable": result.outcome == AttemptOutcome::RetryableFailure,
        "error": result.error,
    });
    if let Some(code) = result.data.get("code").and_then(Value::as_str) {
        script["code"] = Value::String(code.to_owned());
    }
    script
}

/// What happened in the turn, as scenario expectations.
fn expectations(p: &Played<'_>) -> Map<String, Value> {
    let state = &p.outcome.state;
    let mut expect = Map::new();
    let status = state.transaction_status.map(|s| s.as_str().to_owned());
    expect.insert("transaction_status".into(), json!(status));
    let active = state
        .active_transaction
        .as_ref()
        .map(|t| json!({"tool": t.tool, "arguments": t.arguments}));
    expect.insert("active_transaction".into(), active.unwrap_or(Value::Null));
    expect.insert("missing_parameters".into(), json!(state.missing_parameters));
    let route = p.outcome.route.as_ref().map(|r| r.route.clone());
    expect.insert("route".into(), json!(route));
    let events: Vec<&str> = p.outcome.events.iter().map(|e| e.kind.as_str()).collect();
    expect.insert("events".into(), json!(events));
    let calls: Vec<Value> = p
        .outcome
        .executed
        .iter()
        .map(|e| json!({"tool": e.tool, "arguments": e.arguments}))
        .collect();
    expect.insert("tool_calls".into(), Value::Array(calls));
    expect.insert("model_calls".into(), json!(model_calls(&p.exchanges)));
    expect.insert(
        "human_handoff_requested".into(),
        json!(state.human_handoff_requested),
    );
    expect.insert("session_ended".into(), json!(state.session_ended));
    if let Some(line) = p.outcome.replies.first().and_then(|r| r.lines().next()) {
        let snippet: String = line.chars().take(60).collect();
        if !snippet.trim().is_empty() {
            expect.insert("reply_contains".into(), Value::String(snippet));
        }
    }
    expect
}

fn model_calls(exchanges: &[Exchange]) -> Vec<&'static str> {
    let skills: BTreeSet<&'static str> = exchanges
        .iter()
        .filter_map(|(request, _)| request.skill().map(|s| s.as_str()))
        .collect();
    skills.into_iter().collect()
}

/// The values of sensitive parameters seen in the conversation and their masks.
struct Masking {
    /// Original text → mask, longest first (a value inside another is replaced after it).
    pairs: Vec<(String, String)>,
    /// The sensitive parameters that were masked.
    names: BTreeSet<String>,
    notes: Vec<String>,
}

impl Masking {
    fn of(assistant: &Assistant, played: &[Played<'_>]) -> Masking {
        let kinds: BTreeMap<&str, &ParameterKind> = assistant
            .tools
            .values()
            .flat_map(|t| t.parameters.iter())
            .filter(|p| p.sensitive)
            .map(|p| (p.name.as_str(), &p.kind))
            .collect();
        let mut pairs: BTreeMap<String, String> = BTreeMap::new();
        let mut masked = BTreeSet::new();
        let mut kept = BTreeSet::new();
        // The k-th distinct value gets mask k: distinct values stay distinct (a correction from
        // one number to another is still a correction), and nothing else of them is kept.
        let mut distinct = 0;
        for (name, value) in played.iter().flat_map(seen_arguments) {
            let Some(kind) = kinds.get(name.as_str()) else {
                continue;
            };
            let text = crate::eval::conversations::judge::canonical_text(&value);
            if pairs.contains_key(&text) {
                continue;
            }
            distinct += 1;
            if mask(&text, kind, distinct).is_none() {
                kept.insert(name);
                continue;
            }
            masked.insert(name);
            for form in forms(&text) {
                if let Some(m) = mask(&form, kind, distinct) {
                    pairs.entry(form).or_insert(m);
                }
            }
        }
        let mut notes = Vec::new();
        let names = masked.clone();
        if !masked.is_empty() {
            let names: Vec<String> = masked.into_iter().collect();
            notes.push(format!(
                "personal data masked: the values of {} (sensitive parameters) were replaced \
                 (digits by 5s ending in the value's number, letters of free text by x) in \
                 messages, scripts and expectations",
                names.join(", ")
            ));
        }
        if !kept.is_empty() {
            let names: Vec<String> = kept.into_iter().collect();
            notes.push(format!(
                "NOT masked: {} (sensitive, but a masked date or option would not parse); \
                 remove them by hand before sharing",
                names.join(", ")
            ));
        }
        let mut pairs: Vec<(String, String)> = pairs.into_iter().filter(|(a, b)| a != b).collect();
        pairs.sort_by_key(|(original, _)| std::cmp::Reverse(original.len()));
        Masking {
            pairs,
            names,
            notes,
        }
    }

    /// Replaces every original value in every string of `value`.
    fn apply(&self, value: &mut Value) {
        match value {
            Value::String(s) => {
                // A value written in words (`two hundred ten`) is masked as its digits: the
                // words would keep the personal data, and the digits replay the same reading.
                let digits = crate::domain::parameter::spelled::as_digits(s);
                if let std::borrow::Cow::Owned(digits) = digits {
                    if self.pairs.iter().any(|(original, _)| {
                        replace_whole(&digits, original, "") != digits
                            && replace_whole(s, original, "") == *s
                    }) {
                        *s = digits;
                    }
                }
                for (original, masked) in &self.pairs {
                    if s.contains(original.as_str()) {
                        *s = replace_whole(s, original, masked);
                    }
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|v| self.apply(v)),
            Value::Object(map) => {
                for (key, v) in map.iter_mut() {
                    match v {
                        // A number is masked as an argument of a sensitive parameter only.
                        Value::Number(_) if self.names.contains(key) => self.apply_number(v),
                        _ => self.apply(v),
                    }
                }
            }
            _ => {}
        }
    }

    fn apply_number(&self, value: &mut Value) {
        let text = value.to_string();
        if let Some((_, masked)) = self.pairs.iter().find(|(original, _)| *original == text) {
            if let Ok(number) = serde_json::from_str::<Value>(masked) {
                *value = number;
            }
        }
    }
}

/// `text` with every occurrence of `original` that is not part of a longer word or number
/// replaced (the house number `200` is not the `200` of `PED-2002`).
fn replace_whole(text: &str, original: &str, masked: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(original) {
        let end = at + original.len();
        let before = rest[..at].chars().next_back();
        let after = rest[end..].chars().next();
        let inside = |c: Option<char>| c.is_some_and(char::is_alphanumeric);
        out.push_str(&rest[..at]);
        out.push_str(if inside(before) || inside(after) {
            original
        } else {
            masked
        });
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

/// Every parameter value the turn saw: the transactions' arguments before and after it, and
/// the arguments the model answers carried.
fn seen_arguments(p: &Played<'_>) -> Vec<(String, Value)> {
    let state = &p.outcome.state;
    let transactions = [
        p.before.active_transaction.as_ref(),
        state.active_transaction.as_ref(),
        state.last_transaction.as_ref(),
    ];
    let mut seen: Vec<(String, Value)> = transactions
        .into_iter()
        .flatten()
        .flat_map(|t| t.arguments.clone())
        .collect();
    for (_, answer) in &p.exchanges {
        let arguments = match answer {
            Answer::Router(Ok(RouterDecision::Route { arguments, .. })) => arguments,
            Answer::Interpreter(Ok(d)) => &d.arguments,
            _ => continue,
        };
        seen.extend(arguments.clone());
    }
    seen
}

/// The written forms of a value a message may hold: as stored, and without its separators
/// (`01310-100`, `01310100`).
fn forms(text: &str) -> Vec<String> {
    let bare: String = text.chars().filter(|c| c.is_alphanumeric()).collect();
    let mut forms = vec![text.to_owned()];
    if bare != text && bare.len() >= 3 {
        forms.push(bare);
    }
    forms
}

/// The masked form of `text` as the `k`-th distinct value, or `None` when a masked value of
/// this kind would not parse. Its digits become 5s ending in `k` (`01310-100` → `55555-551`),
/// the letters of free text `x`; separators stay, so it parses as its type.
fn mask(text: &str, kind: &ParameterKind, k: usize) -> Option<String> {
    if matches!(kind, ParameterKind::Date | ParameterKind::Enum { .. }) {
        return None;
    }
    let letters = matches!(kind, ParameterKind::Text { .. });
    let count = text.chars().filter(char::is_ascii_digit).count();
    let tail = k.to_string();
    let digits: Vec<char> = if count > tail.len() {
        "5".repeat(count - tail.len())
            .chars()
            .chain(tail.chars())
            .collect()
    } else {
        tail.chars().skip(tail.len() - count).collect()
    };
    let mut next = digits.into_iter();
    Some(
        text.chars()
            .map(|c| match c {
                '0'..='9' => next.next().unwrap_or('5'),
                c if letters && c.is_alphabetic() => 'x',
                c => c,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_11_booleans_are_quoted_as_user_text() {
        let yaml = "turns:\n- user: yes\n  expect: {}\n- user: Não\n- user: No\n  x: no\n";
        assert_eq!(
            quote_yaml11_booleans(yaml),
            "turns:\n- user: \"yes\"\n  expect: {}\n- user: Não\n- user: \"No\"\n  x: no\n"
        );
    }

    #[test]
    fn masks_keep_the_shape_of_the_value() {
        let cep = ParameterKind::Cep;
        assert_eq!(mask("01310-100", &cep, 1).as_deref(), Some("55555-551"));
        assert_eq!(mask("01310-100", &cep, 12).as_deref(), Some("55555-512"));
        let integer = ParameterKind::Integer {
            min: None,
            max: None,
        };
        assert_eq!(mask("7", &integer, 3).as_deref(), Some("3"));
        assert_eq!(mask("7", &integer, 13).as_deref(), Some("3"));
        let text = ParameterKind::Text { max_len: 200 };
        assert_eq!(mask("Rua 7", &text, 2).as_deref(), Some("xxx 2"));
        assert_eq!(mask("2026-01-01", &ParameterKind::Date, 1), None);
        assert_eq!(forms("01310-100"), vec!["01310-100", "01310100"]);
    }

    #[test]
    fn masking_replaces_longest_values_first_in_every_string() {
        let m = Masking {
            pairs: vec![
                ("01310-100".into(), "55555-555".into()),
                ("200".into(), "555".into()),
            ],
            names: ["house_number".to_owned()].into(),
            notes: Vec::new(),
        };
        let mut v = json!({"user": "zip 01310-100, number 200", "n": [{"a": "200"}], "k": 200,
            "arguments": {"house_number": 200}});
        m.apply(&mut v);
        assert_eq!(
            v,
            json!({"user": "zip 55555-555, number 555", "n": [{"a": "555"}], "k": 200,
                "arguments": {"house_number": 555}})
        );
        let mut id = json!("order PED-2002, 2002 or 200.");
        m.apply(&mut id);
        assert_eq!(id, json!("order PED-2002, 2002 or 555."));
        // A value written in words is masked as its digits; other numbers in words stay words.
        let mut words = json!(["the number is two hundred", "twenty five of them"]);
        m.apply(&mut words);
        assert_eq!(words, json!(["the number is 555", "twenty five of them"]));
    }
}
