//! Reads conversation sets (`docs/conversations.md`): one JSON object per line. Every
//! problem names the file, the line and the field as a JSON path (`turns[2].expect.outcome`,
//! 0-based like any JSON path), so a set that cannot be played says where to fix it. Names the
//! configuration cannot produce (an assistant, a tool, a parameter) are problems too: an
//! expectation no run could meet would only lower the figures silently.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{Map, Value};

use crate::domain::catalog::{Assistant, Catalog};
use crate::domain::locale::Locale;
use crate::domain::turn::{ChannelAction, TurnInput};

/// The tenant of a conversation that names none.
pub const DEFAULT_TENANT: &str = "t1";

/// What happened in a turn, as conversations.md's table names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OutcomeClass {
    Handoff,
    End,
    Executed,
    Cancelled,
    AsksConfirmation,
    AsksParameter,
    OutOfScopeOrClarify,
    AnsweredOther,
}

impl OutcomeClass {
    pub const ALL: [OutcomeClass; 8] = [
        OutcomeClass::Handoff,
        OutcomeClass::End,
        OutcomeClass::Executed,
        OutcomeClass::Cancelled,
        OutcomeClass::AsksConfirmation,
        OutcomeClass::AsksParameter,
        OutcomeClass::OutOfScopeOrClarify,
        OutcomeClass::AnsweredOther,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            OutcomeClass::Handoff => "handoff",
            OutcomeClass::End => "end",
            OutcomeClass::Executed => "executed",
            OutcomeClass::Cancelled => "cancelled",
            OutcomeClass::AsksConfirmation => "asks_confirmation",
            OutcomeClass::AsksParameter => "asks_parameter",
            OutcomeClass::OutOfScopeOrClarify => "out_of_scope_or_clarify",
            OutcomeClass::AnsweredOther => "answered_other",
        }
    }

    pub fn parse(name: &str) -> Option<OutcomeClass> {
        OutcomeClass::ALL.into_iter().find(|c| c.as_str() == name)
    }
}

impl std::fmt::Display for OutcomeClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One expectation of a turn: the main one or an `accept` alternative.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Expectation {
    pub outcome: OutcomeClass,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    /// A partial map of canonical values (compared as text, [`super::judge::canonical_text`]).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, Value>,
    /// Substrings of the turn's whole reply text, compared case-insensitively.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub reply_contains: Vec<String>,
}

impl Expectation {
    /// A bare expectation of `outcome` (tests and alternatives built in code).
    pub fn of(outcome: OutcomeClass) -> Expectation {
        Expectation {
            outcome,
            tool: None,
            param: None,
            args: BTreeMap::new(),
            reply_contains: Vec::new(),
        }
    }
}

/// One turn to play and what it should do.
#[derive(Debug, Clone, PartialEq)]
pub struct ConversationTurn {
    pub input: TurnInput,
    pub expect: Expectation,
    /// Alternatives a reviewer also finds right (lenient figures).
    pub accept: Vec<Expectation>,
}

impl ConversationTurn {
    /// The main expectation, then the alternatives.
    pub fn expectations(&self) -> impl Iterator<Item = &Expectation> {
        std::iter::once(&self.expect).chain(&self.accept)
    }

    /// What the user sent, as a transcript shows it.
    pub fn user_text(&self) -> String {
        match &self.input {
            TurnInput::Text(t) => t.clone(),
            TurnInput::Action(a) => format!("[action: {}]", a.as_str()),
        }
    }
}

/// One conversation of a set, validated against the configuration.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub id: String,
    /// Where it came from: the file as given and the 1-based line.
    pub file: String,
    pub line: usize,
    pub locale: Locale,
    pub agent: String,
    pub tenant: String,
    pub turns: Vec<ConversationTurn>,
}

/// A set that cannot be played: `FILE line N: FIELD: PROBLEM`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}{}{}: {problem}", line.map(|l| format!(" line {l}")).unwrap_or_default(), field_part(field))]
pub struct DataError {
    pub file: String,
    /// 1-based; `None` for a problem of the whole file (it holds no conversation).
    pub line: Option<usize>,
    /// The JSON path of the field; empty for the line as a whole.
    pub field: String,
    pub problem: String,
}

fn field_part(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!(": {field}")
    }
}

/// A problem at `field` of the line being read (the caller adds file and line).
struct FieldError {
    field: String,
    problem: String,
}

type Read<T> = Result<T, FieldError>;

fn problem(field: &str, problem: impl Into<String>) -> FieldError {
    FieldError {
        field: field.to_owned(),
        problem: problem.into(),
    }
}

/// Parses one file of a set. Blank lines are skipped; a file with no conversation is an error.
pub fn parse_conversations(
    text: &str,
    file: &str,
    catalog: &Catalog,
) -> Result<Vec<Conversation>, DataError> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let at = |e: FieldError| DataError {
            file: file.to_owned(),
            line: Some(i + 1),
            field: e.field,
            problem: e.problem,
        };
        let value: Value = serde_json::from_str(line)
            .map_err(|e| at(problem("", format!("not valid JSON: {e}"))))?;
        let conversation = read_conversation(&value, catalog).map_err(at)?;
        out.push(Conversation {
            file: file.to_owned(),
            line: i + 1,
            ..conversation
        });
    }
    if out.is_empty() {
        return Err(DataError {
            file: file.to_owned(),
            line: None,
            field: String::new(),
            problem: "the file holds no conversation (fix: one JSON object per line, \
                      {\"id\", \"locale\", \"turns\": [{\"text\", \"expect\": {\"outcome\"}}]})"
                .into(),
        });
    }
    Ok(out)
}

/// Conversation ids must be unique over every file of a run: the report names conversations by id.
pub fn check_unique_ids(conversations: &[Conversation]) -> Result<(), DataError> {
    let mut seen: BTreeMap<&str, &Conversation> = BTreeMap::new();
    for c in conversations {
        if let Some(first) = seen.insert(&c.id, c) {
            return Err(DataError {
                file: c.file.clone(),
                line: Some(c.line),
                field: "id".into(),
                problem: format!(
                    "id {:?} is already used by {} line {} (fix: give every conversation its own id)",
                    c.id, first.file, first.line
                ),
            });
        }
    }
    Ok(())
}

fn read_conversation(value: &Value, catalog: &Catalog) -> Read<Conversation> {
    let obj = value
        .as_object()
        .ok_or_else(|| problem("", "not a JSON object"))?;
    let id = required_string(obj, "id", "")?;
    if id.trim().is_empty() {
        return Err(problem("id", "empty (fix: a non-empty id)"));
    }
    let agent = match optional_string(obj, "agent", "")? {
        Some(a) => a,
        None => catalog
            .assistants
            .keys()
            .next()
            .cloned()
            .ok_or_else(|| problem("agent", "the configuration has no assistant"))?,
    };
    let assistant = catalog.assistant(&agent).ok_or_else(|| {
        let known: Vec<&str> = catalog.assistants.keys().map(String::as_str).collect();
        problem(
            "agent",
            format!(
                "assistant {agent:?} is not configured (configured: {})",
                known.join(", ")
            ),
        )
    })?;
    let tenant = optional_string(obj, "tenant", "")?.unwrap_or_else(|| DEFAULT_TENANT.into());
    if !assistant.serves(&tenant) {
        return Err(problem(
            "tenant",
            format!("assistant {agent:?} serves no tenant {tenant:?}"),
        ));
    }
    let locale = match optional_string(obj, "locale", "")? {
        None => assistant.default_locale,
        Some(tag) => Locale::parse(&tag)
            .ok_or_else(|| problem("locale", format!("unknown locale {tag:?} (en or pt-BR)")))?,
    };
    let turns = match obj.get("turns") {
        Some(Value::Array(items)) if !items.is_empty() => items
            .iter()
            .enumerate()
            .map(|(i, t)| read_turn(t, &format!("turns[{i}]"), assistant))
            .collect::<Read<Vec<_>>>()?,
        Some(Value::Array(_)) => return Err(problem("turns", "empty (fix: at least one turn)")),
        Some(_) => return Err(problem("turns", "not an array of turns")),
        None => return Err(problem("turns", "missing")),
    };
    Ok(Conversation {
        id,
        file: String::new(),
        line: 0,
        locale,
        agent,
        tenant,
        turns,
    })
}

fn read_turn(value: &Value, path: &str, assistant: &Assistant) -> Read<ConversationTurn> {
    let obj = value
        .as_object()
        .ok_or_else(|| problem(path, "not a JSON object"))?;
    let input = match (obj.get("text"), obj.get("action")) {
        (Some(Value::String(t)), None) => TurnInput::Text(t.clone()),
        (Some(_), None) => return Err(problem(&format!("{path}.text"), "not a string")),
        (None, Some(a)) => TurnInput::Action(read_action(a, &format!("{path}.action"))?),
        (Some(_), Some(_)) => {
            return Err(problem(
                path,
                "both `text` and `action` (fix: exactly one of them)",
            ))
        }
        (None, None) => return Err(problem(path, "neither `text` nor `action`")),
    };
    let expect_path = format!("{path}.expect");
    let expect_obj = match obj.get("expect") {
        Some(Value::Object(o)) => o,
        Some(_) => return Err(problem(&expect_path, "not a JSON object")),
        None => return Err(problem(&expect_path, "missing")),
    };
    let expect = read_expectation(expect_obj, &expect_path, assistant)?;
    // `accept` beside `expect` (as conversations.md shows it) or, read the same, inside it.
    let mut accept = read_accept(obj.get("accept"), &format!("{path}.accept"), assistant)?;
    accept.extend(read_accept(
        expect_obj.get("accept"),
        &format!("{expect_path}.accept"),
        assistant,
    )?);
    Ok(ConversationTurn {
        input,
        expect,
        accept,
    })
}

/// `{"type": "confirm"}` as in the inbound schema, or the bare name `"confirm"`.
fn read_action(value: &Value, path: &str) -> Read<ChannelAction> {
    let (kind, at) = match value {
        Value::String(kind) => (kind.as_str(), path.to_owned()),
        Value::Object(o) => match o.get("type") {
            Some(Value::String(kind)) => (kind.as_str(), format!("{path}.type")),
            _ => return Err(problem(path, "not {\"type\": ACTION}")),
        },
        _ => return Err(problem(path, "not {\"type\": ACTION} nor an action name")),
    };
    serde_json::from_value(Value::String(kind.to_owned())).map_err(|_| {
        problem(
            &at,
            format!(
                "unknown action {kind:?} (expected one of {})",
                ChannelAction::names()
            ),
        )
    })
}

fn read_accept(value: Option<&Value>, path: &str, assistant: &Assistant) -> Read<Vec<Expectation>> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| {
                let at = format!("{path}[{i}]");
                let obj = item
                    .as_object()
                    .ok_or_else(|| problem(&at, "not a JSON object"))?;
                read_expectation(obj, &at, assistant)
            })
            .collect(),
        Some(_) => Err(problem(path, "not an array of expectations")),
    }
}

fn read_expectation(
    obj: &Map<String, Value>,
    path: &str,
    assistant: &Assistant,
) -> Read<Expectation> {
    let outcome_path = format!("{path}.outcome");
    let name = required_string(obj, "outcome", path)?;
    let outcome = OutcomeClass::parse(&name).ok_or_else(|| {
        let known: Vec<&str> = OutcomeClass::ALL.iter().map(|c| c.as_str()).collect();
        problem(
            &outcome_path,
            format!(
                "unknown outcome class {name:?} (expected one of {})",
                known.join(", ")
            ),
        )
    })?;
    let tool = optional_string(obj, "tool", path)?;
    if let Some(t) = &tool {
        if !assistant.tools.contains_key(t) {
            let known: Vec<&str> = assistant.tools.keys().map(String::as_str).collect();
            return Err(problem(
                &format!("{path}.tool"),
                format!(
                    "unknown tool {t:?} of assistant {:?} (tools: {})",
                    assistant.agent_id,
                    known.join(", ")
                ),
            ));
        }
    }
    let param = optional_string(obj, "param", path)?;
    if let Some(p) = &param {
        check_parameter(p, tool.as_deref(), assistant, &format!("{path}.param"))?;
    }
    let args = read_args(
        obj.get("args"),
        &format!("{path}.args"),
        tool.as_deref(),
        assistant,
    )?;
    let reply_contains =
        read_strings(obj.get("reply_contains"), &format!("{path}.reply_contains"))?;
    Ok(Expectation {
        outcome,
        tool,
        param,
        args,
        reply_contains,
    })
}

fn read_args(
    value: Option<&Value>,
    path: &str,
    tool: Option<&str>,
    assistant: &Assistant,
) -> Read<BTreeMap<String, Value>> {
    let obj = match value {
        None => return Ok(BTreeMap::new()),
        Some(Value::Object(o)) => o,
        Some(_) => return Err(problem(path, "not a JSON object of parameter → value")),
    };
    let mut out = BTreeMap::new();
    for (name, v) in obj {
        let at = format!("{path}.{name}");
        check_parameter(name, tool, assistant, &at)?;
        if !matches!(v, Value::String(_) | Value::Number(_) | Value::Bool(_)) {
            return Err(problem(&at, "not a string, number or boolean"));
        }
        out.insert(name.clone(), v.clone());
    }
    Ok(out)
}

/// `name` must be a parameter of `tool`, or of some tool of the assistant when no tool is named.
fn check_parameter(name: &str, tool: Option<&str>, assistant: &Assistant, path: &str) -> Read<()> {
    let known: Vec<&str> = match tool.and_then(|t| assistant.tools.get(t)) {
        Some(t) => t.parameters.iter().map(|p| p.name.as_str()).collect(),
        None => {
            let mut all: Vec<&str> = assistant
                .tools
                .values()
                .flat_map(|t| t.parameters.iter().map(|p| p.name.as_str()))
                .collect();
            all.sort_unstable();
            all.dedup();
            all
        }
    };
    if known.contains(&name) {
        return Ok(());
    }
    let of = tool.map_or_else(
        || format!("any tool of assistant {:?}", assistant.agent_id),
        |t| format!("tool {t:?}"),
    );
    Err(problem(
        path,
        format!(
            "unknown parameter {name:?} of {of} (parameters: {})",
            known.join(", ")
        ),
    ))
}

fn read_strings(value: Option<&Value>, path: &str) -> Read<Vec<String>> {
    match value {
        None => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, s)| {
                s.as_str()
                    .map(str::to_owned)
                    .ok_or_else(|| problem(&format!("{path}[{i}]"), "not a string"))
            })
            .collect(),
        Some(_) => Err(problem(path, "not an array of strings")),
    }
}

fn join_path(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn optional_string(obj: &Map<String, Value>, key: &str, path: &str) -> Read<Option<String>> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(problem(&join_path(path, key), "not a string")),
    }
}

fn required_string(obj: &Map<String, Value>, key: &str, path: &str) -> Read<String> {
    optional_string(obj, key, path)?.ok_or_else(|| problem(&join_path(path, key), "missing"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::agents::parse_catalog;

    fn catalog() -> Catalog {
        parse_catalog(
            include_str!("../../../config/agents.example.yaml"),
            "agents.example.yaml",
        )
        .expect("the example configuration parses")
    }

    fn parse(text: &str) -> Result<Vec<Conversation>, String> {
        parse_conversations(text, "dev.jsonl", &catalog()).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"{"id": "en07", "locale": "en", "note": "ignored", "turns": [{"text": "change the address of PED-1001", "expect": {"outcome": "asks_parameter", "tool": "retail_address_change", "param": "zip_code"}}, {"action": {"type": "confirm"}, "expect": {"outcome": "executed", "args": {"house_number": 210}, "reply_contains": ["210"]}, "accept": [{"outcome": "asks_confirmation"}]}]}"#;

    #[test]
    fn reads_a_conversation_with_defaults_actions_and_alternatives() {
        let set = parse(&format!("\n{GOOD}\n\n")).expect("parses");
        assert_eq!(set.len(), 1);
        let c = &set[0];
        assert_eq!(
            (c.id.as_str(), c.line, c.file.as_str()),
            ("en07", 2, "dev.jsonl")
        );
        assert_eq!(
            (c.agent.as_str(), c.tenant.as_str()),
            ("retail-bot", DEFAULT_TENANT)
        );
        assert_eq!(c.locale, Locale::En);
        assert_eq!(c.turns[0].expect.param.as_deref(), Some("zip_code"));
        assert_eq!(c.turns[1].input, TurnInput::Action(ChannelAction::Confirm));
        let bare = GOOD.replace(r#"{"type": "confirm"}"#, r#""confirm""#);
        assert_eq!(
            parse(&bare).expect("parses")[0].turns,
            c.turns,
            "a bare action name reads the same"
        );
        assert_eq!(c.turns[1].expect.args["house_number"], Value::from(210));
        assert_eq!(
            c.turns[1].accept,
            vec![Expectation::of(OutcomeClass::AsksConfirmation)]
        );
        // `accept` inside `expect` reads the same.
        let inside = r#"{"id": "a", "locale": "pt-BR", "turns": [{"text": "oi", "expect": {"outcome": "answered_other", "accept": [{"outcome": "out_of_scope_or_clarify"}]}}]}"#;
        let set = parse(inside).expect("parses");
        assert_eq!(set[0].locale, Locale::PtBr);
        assert_eq!(set[0].turns[0].accept.len(), 1);
    }

    #[test]
    fn a_malformed_line_names_file_line_and_field() {
        let bad = GOOD.replace("\"asks_parameter\"", "\"exec\"");
        let e = parse(&format!("{GOOD}\n{bad}")).expect_err("unknown outcome");
        assert!(
            e.starts_with("dev.jsonl line 2: turns[0].expect.outcome: unknown outcome class \"exec\" (expected one of handoff, end, executed,"),
            "{e}"
        );
        let cases = [
            (
                "{\"id\": \"a\", \"turns\": [",
                "dev.jsonl line 1: not valid JSON",
            ),
            ("[1]", "dev.jsonl line 1: not a JSON object"),
            (r#"{"turns": []}"#, "dev.jsonl line 1: id: missing"),
            (r#"{"id": "a", "turns": []}"#, "line 1: turns: empty"),
            (
                r#"{"id": "a", "turns": [{"text": "x"}]}"#,
                "turns[0].expect: missing",
            ),
            (
                r#"{"id": "a", "turns": [{"text": "x", "expect": {}}]}"#,
                "turns[0].expect.outcome: missing",
            ),
            (
                r#"{"id": "a", "turns": [{"expect": {"outcome": "end"}}]}"#,
                "turns[0]: neither `text` nor `action`",
            ),
            (
                r#"{"id": "a", "turns": [{"text": 3, "expect": {"outcome": "end"}}]}"#,
                "turns[0].text: not a string",
            ),
            (
                r#"{"id": "a", "turns": [{"action": {"type": "yes"}, "expect": {"outcome": "end"}}]}"#,
                "turns[0].action.type: unknown action \"yes\"",
            ),
            (
                r#"{"id": "a", "locale": "fr", "turns": [{"text": "x", "expect": {"outcome": "end"}}]}"#,
                "locale: unknown locale \"fr\"",
            ),
            (
                r#"{"id": "a", "agent": "nobody", "turns": [{"text": "x", "expect": {"outcome": "end"}}]}"#,
                "agent: assistant \"nobody\" is not configured",
            ),
            (
                r#"{"id": "a", "turns": [{"text": "x", "expect": {"outcome": "end", "reply_contains": "bye"}}]}"#,
                "turns[0].expect.reply_contains: not an array of strings",
            ),
            (
                r#"{"id": "a", "turns": [{"text": "x", "expect": {"outcome": "end"}, "accept": [{"outcome": "nope"}]}]}"#,
                "turns[0].accept[0].outcome: unknown outcome class \"nope\"",
            ),
        ];
        for (line, expected) in cases {
            let e = parse(line).expect_err(line);
            assert!(e.contains(expected), "{line}\n→ {e}\n(expected {expected})");
        }
    }

    #[test]
    fn names_the_configuration_lacks_are_errors() {
        let cases = [
            (r#"{"outcome": "executed", "tool": "weather"}"#, "turns[0].expect.tool: unknown tool \"weather\""),
            (r#"{"outcome": "asks_parameter", "param": "zip"}"#, "turns[0].expect.param: unknown parameter \"zip\" of any tool"),
            (r#"{"outcome": "executed", "tool": "retail_order_cancel", "args": {"zip_code": "01310-100"}}"#, "turns[0].expect.args.zip_code: unknown parameter \"zip_code\" of tool \"retail_order_cancel\""),
            (r#"{"outcome": "executed", "args": {"order_id": ["PED-1001"]}}"#, "turns[0].expect.args.order_id: not a string, number or boolean"),
        ];
        for (expect, expected) in cases {
            let line = format!(r#"{{"id": "a", "turns": [{{"text": "x", "expect": {expect}}}]}}"#);
            let e = parse(&line).expect_err(&line);
            assert!(e.contains(expected), "{line}\n→ {e}");
        }
    }

    #[test]
    fn an_empty_file_and_repeated_ids_are_errors() {
        let e = parse("\n  \n").expect_err("empty");
        assert!(
            e.starts_with("dev.jsonl: the file holds no conversation"),
            "{e}"
        );
        let mut set = parse(GOOD).expect("parses");
        set.extend(parse(&format!("\n{GOOD}")).expect("parses"));
        let e = check_unique_ids(&set).expect_err("repeated").to_string();
        assert!(
            e.starts_with("dev.jsonl line 2: id: id \"en07\" is already used by dev.jsonl line 1"),
            "{e}"
        );
    }
}
