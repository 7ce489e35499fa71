//! Reads a scenario file exactly as the shared format defines it: unknown keys are errors, and
//! every error names the file, the turn and the key.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;
use serde_json::{Map, Value};

use crate::domain::decision::ModelFailure;
use crate::domain::locale::Locale;
use crate::domain::turn::{ChannelAction, Identity};
use crate::model::{ModelScript, Scripted};
use crate::tool::scripted::{ExecutionScript, PreValidationScript, PRE_VALIDATION_SUFFIX};
use crate::tool::ToolScript;

/// The keys `expect` may hold (scenarios.md).
pub const EXPECT_KEYS: &[&str] = &[
    "transaction_status",
    "active_transaction",
    "last_transaction",
    "missing_parameters",
    "next_state",
    "active_agent",
    "human_handoff_requested",
    "session_ended",
    "route",
    "reply_contains",
    "events",
    "tool_calls",
    "model_calls",
];

/// A malformed scenario: names the file, the turn (1-based) and the key.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{file}: {location}: {problem}")]
pub struct ScenarioError {
    pub file: String,
    pub location: String,
    pub problem: String,
}

/// One turn, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct ScenarioTurn {
    pub input: TurnInputSpec,
    pub locale: Locale,
    /// Milliseconds to advance the clock before this turn (default 1 s).
    pub after_ms: i64,
    pub model: ModelScript,
    pub tools: BTreeMap<String, ToolScript>,
    pub restart: bool,
    pub redeliver: bool,
    pub expect: Map<String, Value>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum TurnInputSpec {
    Text(String),
    Action(ChannelAction),
}

/// A whole scenario, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub file: String,
    pub name: String,
    pub config: Option<String>,
    pub settings: Map<String, Value>,
    pub identity: Identity,
    pub turns: Vec<ScenarioTurn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    config: Option<String>,
    #[serde(default)]
    settings: Option<Map<String, Value>>,
    #[serde(default)]
    identity: Option<RawIdentity>,
    turns: Vec<RawTurn>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawIdentity {
    #[serde(default)]
    tenant_id: Option<Value>,
    #[serde(default)]
    agent_id: Option<Value>,
    #[serde(default)]
    session_id: Option<Value>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTurn {
    #[serde(default)]
    user: Option<Value>,
    #[serde(default)]
    action: Option<RawAction>,
    #[serde(default)]
    locale: Option<String>,
    #[serde(default)]
    after: Option<Value>,
    #[serde(default)]
    model: Option<RawModel>,
    #[serde(default)]
    tools: Option<Map<String, Value>>,
    #[serde(default)]
    restart: Option<bool>,
    #[serde(default)]
    redeliver: Option<bool>,
    #[serde(default)]
    expect: Option<Map<String, Value>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAction {
    #[serde(rename = "type")]
    kind: ChannelAction,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawModel {
    #[serde(default)]
    classifier: Option<Value>,
    #[serde(default)]
    router: Option<Value>,
    #[serde(default)]
    interpreter: Option<Value>,
}

/// Reads and validates one scenario file.
pub fn load_scenario(path: &Path) -> Result<Scenario, ScenarioError> {
    let file = path.display().to_string();
    let text = std::fs::read_to_string(path).map_err(|e| ScenarioError {
        file: file.clone(),
        location: "file".into(),
        problem: format!("cannot read: {e}"),
    })?;
    parse_scenario(&text, &file)
}

/// Parses scenario text; `file` labels errors.
pub fn parse_scenario(text: &str, file: &str) -> Result<Scenario, ScenarioError> {
    let err = |location: String, problem: String| ScenarioError {
        file: file.to_owned(),
        location,
        problem,
    };
    let de = serde_yaml_ng::Deserializer::from_str(text);
    let raw: RawScenario = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        err(describe_path(&path), e.into_inner().to_string())
    })?;
    if raw.turns.is_empty() {
        return Err(err(
            "turns".into(),
            "a scenario needs at least one turn".into(),
        ));
    }
    let identity = identity_of(raw.identity, &err)?;
    let mut turns = Vec::with_capacity(raw.turns.len());
    for (i, t) in raw.turns.into_iter().enumerate() {
        turns.push(turn_of(t, i, &err)?);
    }
    Ok(Scenario {
        file: file.to_owned(),
        name: raw.name,
        config: raw.config,
        settings: raw.settings.unwrap_or_default(),
        identity,
        turns,
    })
}

/// `turns[2].expect.foo` → `turn 3, key expect.foo`.
fn describe_path(path: &str) -> String {
    if let Some(rest) = path.strip_prefix("turns[") {
        if let Some((index, key)) = rest.split_once(']') {
            if let Ok(i) = index.parse::<usize>() {
                let key = key.trim_start_matches('.');
                return if key.is_empty() {
                    format!("turn {}", i + 1)
                } else {
                    format!("turn {}, key {key}", i + 1)
                };
            }
        }
    }
    if path.is_empty() || path == "." {
        "top level".into()
    } else {
        format!("key {path}")
    }
}

type ErrFn<'a> = dyn Fn(String, String) -> ScenarioError + 'a;

fn identity_of(raw: Option<RawIdentity>, err: &ErrFn<'_>) -> Result<Identity, ScenarioError> {
    let mut id = Identity::new("t1", "retail-bot", "s1");
    let Some(raw) = raw else {
        return Ok(id);
    };
    for (key, value, slot) in [
        ("tenant_id", raw.tenant_id, &mut id.tenant_id),
        ("agent_id", raw.agent_id, &mut id.agent_id),
        ("session_id", raw.session_id, &mut id.session_id),
    ] {
        match value {
            None => {}
            Some(Value::String(s)) if !s.is_empty() => *slot = s,
            Some(Value::Number(n)) => *slot = n.to_string(),
            Some(other) => {
                return Err(err(
                    format!("key identity.{key}"),
                    format!("must be a non-empty string, got {other}"),
                ))
            }
        }
    }
    Ok(id)
}

fn turn_of(raw: RawTurn, index: usize, err: &ErrFn<'_>) -> Result<ScenarioTurn, ScenarioError> {
    let at = |key: &str| format!("turn {}, key {key}", index + 1);
    let input = match (raw.user, raw.action) {
        (Some(_), Some(_)) => {
            return Err(err(
                at("user"),
                "a turn has either `user` text or an `action`, not both".into(),
            ))
        }
        (None, None) => {
            return Err(err(
                at("user"),
                "a turn needs `user` text or an `action`".into(),
            ))
        }
        (Some(Value::String(s)), None) => TurnInputSpec::Text(s),
        (Some(other), None) => {
            return Err(err(
                at("user"),
                format!(
                    "`user` must be text but YAML read {other} ({}); quote it, e.g. user: \"{}\"",
                    type_word(&other),
                    yaml_words(&other)
                ),
            ))
        }
        (None, Some(a)) => TurnInputSpec::Action(a.kind),
    };
    let locale = match raw.locale {
        None => Locale::En,
        Some(tag) => Locale::parse(&tag).ok_or_else(|| {
            err(
                at("locale"),
                format!("unknown locale `{tag}`; use en or pt-BR"),
            )
        })?,
    };
    let after_ms = match raw.after {
        None => 1000,
        Some(v) => parse_duration_ms(&v).ok_or_else(|| {
            err(
                at("after"),
                format!("`{v}` is not a duration; use a number with s, m, h or d (e.g. 45m)"),
            )
        })?,
    };
    let model = match raw.model {
        None => ModelScript::default(),
        Some(m) => ModelScript {
            classifier: scripted_of(m.classifier, &at("model.classifier"), err)?,
            router: scripted_of(m.router, &at("model.router"), err)?,
            interpreter: scripted_of(m.interpreter, &at("model.interpreter"), err)?,
        },
    };
    let mut tools = BTreeMap::new();
    for (name, value) in raw.tools.unwrap_or_default() {
        let key = at(&format!("tools.{name}"));
        let script = if name.ends_with(PRE_VALIDATION_SUFFIX) {
            serde_json::from_value::<PreValidationScript>(value)
                .map(ToolScript::PreValidation)
                .map_err(|e| {
                    err(
                        key.clone(),
                        format!("{e} (expected {{eligible, reason, data}})"),
                    )
                })?
        } else {
            serde_json::from_value::<ExecutionScript>(value)
                .map(ToolScript::Execution)
                .map_err(|e| {
                    err(
                        key.clone(),
                        format!("{e} (expected {{ok, data, retryable, error}})"),
                    )
                })?
        };
        tools.insert(name, script);
    }
    let expect = raw.expect.unwrap_or_default();
    for (key, value) in &expect {
        if !EXPECT_KEYS.contains(&key.as_str()) {
            return Err(err(
                at(&format!("expect.{key}")),
                format!(
                    "unknown expectation; valid keys: {}",
                    EXPECT_KEYS.join(", ")
                ),
            ));
        }
        check_expect_value(key, value).map_err(|p| err(at(&format!("expect.{key}")), p))?;
    }
    Ok(ScenarioTurn {
        input,
        locale,
        after_ms,
        model,
        tools,
        restart: raw.restart.unwrap_or(false),
        redeliver: raw.redeliver.unwrap_or(false),
        expect,
    })
}

fn check_expect_value(key: &str, value: &Value) -> Result<(), String> {
    let list_of_strings = |v: &Value| v.as_array().is_some_and(|a| a.iter().all(Value::is_string));
    match key {
        "missing_parameters" | "events" if !list_of_strings(value) => {
            Err("must be a list of strings".into())
        }
        "model_calls" => {
            if !list_of_strings(value) {
                return Err("must be a list of component names".into());
            }
            for v in value.as_array().into_iter().flatten() {
                let name = v.as_str().unwrap_or_default();
                if !["classifier", "router", "interpreter"].contains(&name) {
                    return Err(format!(
                        "unknown model component `{name}`; use classifier, router, interpreter"
                    ));
                }
            }
            Ok(())
        }
        "tool_calls" => {
            let Some(items) = value.as_array() else {
                return Err("must be a list of {tool, arguments}".into());
            };
            for item in items {
                let ok = item.as_object().is_some_and(|o| {
                    o.get("tool").is_some_and(Value::is_string)
                        && o.keys().all(|k| k == "tool" || k == "arguments")
                });
                if !ok {
                    return Err(format!("entry {item} must be {{tool, arguments}}"));
                }
            }
            Ok(())
        }
        "human_handoff_requested" | "session_ended" if !value.is_boolean() => {
            Err("must be true or false".into())
        }
        "reply_contains" if !value.is_string() => Err("must be text".into()),
        _ => Ok(()),
    }
}

fn scripted_of(
    value: Option<Value>,
    key: &str,
    err: &ErrFn<'_>,
) -> Result<Option<Scripted>, ScenarioError> {
    match value {
        None => Ok(None),
        Some(Value::String(word)) => match word.as_str() {
            "invalid_json" => Ok(Some(Scripted::Fault(ModelFailure::InvalidJson))),
            "timeout" => Ok(Some(Scripted::Fault(ModelFailure::Timeout))),
            "error" => Ok(Some(Scripted::Fault(ModelFailure::Error))),
            other => Err(err(
                key.to_owned(),
                format!(
                    "unknown fault `{other}`; use invalid_json, timeout or error, or an object"
                ),
            )),
        },
        Some(Value::Object(map)) => Ok(Some(Scripted::Answer(map))),
        Some(other) => Err(err(
            key.to_owned(),
            format!("must be an object or one of invalid_json, timeout, error; got {other}"),
        )),
    }
}

fn type_word(v: &Value) -> &'static str {
    match v {
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::Null => "null",
        Value::Array(_) => "a list",
        Value::Object(_) => "a mapping",
        Value::String(_) => "text",
    }
}

fn yaml_words(v: &Value) -> String {
    match v {
        Value::Bool(true) => "yes".into(),
        Value::Bool(false) => "no".into(),
        other => other.to_string(),
    }
}

/// `45m`, `30s`, `2h`, `1d`, or a bare number of seconds.
pub fn parse_duration_ms(v: &Value) -> Option<i64> {
    let text = match v {
        Value::Number(n) => {
            return n
                .as_f64()
                .filter(|s| *s >= 0.0)
                .map(|s| (s * 1000.0) as i64)
        }
        Value::String(s) => s.trim(),
        _ => return None,
    };
    let (number, unit) =
        text.split_at(text.find(|c: char| c.is_alphabetic()).unwrap_or(text.len()));
    let n: f64 = number
        .trim()
        .parse()
        .ok()
        .filter(|n: &f64| *n >= 0.0 && n.is_finite())?;
    let factor = match unit.trim() {
        "" | "s" => 1_000.0,
        "ms" => 1.0,
        "m" => 60_000.0,
        "h" => 3_600_000.0,
        "d" => 86_400_000.0,
        _ => return None,
    };
    Some((n * factor) as i64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_keys_name_file_turn_and_key() {
        let text = "name: x\nturns:\n  - user: hi\n  - user: there\n    expectt: {}\n";
        let e = parse_scenario(text, "f.yaml").unwrap_err();
        assert_eq!(e.file, "f.yaml");
        assert!(e.location.starts_with("turn 2"), "{e}");
        assert!(e.problem.contains("expectt"), "{e}");

        let text = "name: x\nturns:\n  - user: hi\n    expect: {transaction_stat: null}\n";
        let e = parse_scenario(text, "f.yaml").unwrap_err();
        assert_eq!(e.location, "turn 1, key expect.transaction_stat");
    }

    #[test]
    fn boolean_user_text_is_reported() {
        let e = parse_scenario("name: x\nturns:\n  - user: true\n", "f.yaml").unwrap_err();
        assert!(e.problem.contains("quote it"), "{e}");
    }

    #[test]
    fn parses_the_spec_example_shape() {
        let text = r#"
name: n
settings: {ENABLE_ROUTE_STICKINESS: true}
identity: {tenant_id: t9}
turns:
  - user: cancel my order
    locale: pt-BR
    after: 45m
    model:
      classifier: {decision: ROUTE, confidence: 0.97}
      router: timeout
    tools:
      retail_order_cancel: {ok: false, retryable: false, error: already shipped}
      retail_order_cancel.pre_validation: {eligible: false, reason: already shipped}
    expect: {transaction_status: null, events: [], tool_calls: [{tool: a, arguments: {}}]}
  - action: {type: confirm}
    restart: true
    redeliver: true
"#;
        let s = parse_scenario(text, "f.yaml").unwrap();
        assert_eq!(s.identity.tenant_id, "t9");
        assert_eq!(s.identity.agent_id, "retail-bot");
        assert_eq!(s.turns[0].after_ms, 45 * 60_000);
        assert_eq!(s.turns[0].locale, Locale::PtBr);
        assert_eq!(
            s.turns[0].model.router,
            Some(Scripted::Fault(ModelFailure::Timeout))
        );
        assert_eq!(
            s.turns[1].input,
            TurnInputSpec::Action(ChannelAction::Confirm)
        );
        assert!(s.turns[1].restart && s.turns[1].redeliver);
    }
}
