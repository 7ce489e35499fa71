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

impl TurnInputSpec {
    /// The turn's input as the engine receives it.
    pub fn to_input(&self) -> crate::domain::turn::TurnInput {
        use crate::domain::turn::TurnInput;
        match self {
            TurnInputSpec::Text(t) => TurnInput::Text(t.clone()),
            TurnInputSpec::Action(a) => TurnInput::Action(*a),
        }
    }
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
    expect: Option<RawExpect>,
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

/// `expect`, read like any YAML mapping except that every value under `arguments` (in
/// `active_transaction`, `last_transaction` and each `tool_calls` entry) is kept as its scalar's
/// source text: YAML would read `71.990` as the float 71.99 and `01310100` as an integer, and
/// the matcher compares arguments by text with the stored canonical value (MG-4).
struct RawExpect(Map<String, Value>);

impl<'de> Deserialize<'de> for RawExpect {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = RawExpect;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping of expectations")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<RawExpect, A::Error> {
                let mut out = Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = match key.as_str() {
                        "active_transaction" | "last_transaction" => {
                            map.next_value::<WithArgumentText>()?.0
                        }
                        "tool_calls" => match map.next_value::<Option<Vec<WithArgumentText>>>()? {
                            Some(items) => Value::Array(items.into_iter().map(|i| i.0).collect()),
                            None => Value::Null,
                        },
                        _ => map.next_value::<Value>()?,
                    };
                    out.insert(key, value);
                }
                Ok(RawExpect(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// A transaction or tool call expectation (or `null`): a mapping whose `arguments` values are
/// source text and whose other keys are plain YAML.
struct WithArgumentText(Value);

impl<'de> Deserialize<'de> for WithArgumentText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = WithArgumentText;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a mapping or null")
            }
            fn visit_none<E: serde::de::Error>(self) -> Result<WithArgumentText, E> {
                Ok(WithArgumentText(Value::Null))
            }
            fn visit_unit<E: serde::de::Error>(self) -> Result<WithArgumentText, E> {
                Ok(WithArgumentText(Value::Null))
            }
            fn visit_some<D: serde::Deserializer<'de>>(
                self,
                d: D,
            ) -> Result<WithArgumentText, D::Error> {
                d.deserialize_map(self)
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<WithArgumentText, A::Error> {
                let mut out = Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    let value = if key == "arguments" {
                        match map.next_value::<Option<BTreeMap<String, ArgumentText>>>()? {
                            Some(args) => Value::Object(
                                args.into_iter()
                                    .map(|(k, v)| (k, Value::String(v.0)))
                                    .collect(),
                            ),
                            None => Value::Null,
                        }
                    } else {
                        map.next_value::<Value>()?
                    };
                    out.insert(key, value);
                }
                Ok(WithArgumentText(Value::Object(out)))
            }
        }
        d.deserialize_option(Visit)
    }
}

/// One expected argument value: the scalar exactly as written (`71.990`, `"45"` → `45`).
struct ArgumentText(String);

impl<'de> Deserialize<'de> for ArgumentText {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl serde::de::Visitor<'_> for Visit {
            type Value = ArgumentText;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str(
                    "a scalar written as the stored canonical value (MG-4), e.g. 71.99 or \"01310-100\"",
                )
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ArgumentText, E> {
                Ok(ArgumentText(v.to_owned()))
            }
        }
        // The YAML deserializer hands a scalar's text to `deserialize_str` whatever it looks like.
        d.deserialize_str(Visit)
    }
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
    let tools = tool_scripts(raw.tools.unwrap_or_default(), &at, err)?;
    let expect = raw.expect.map(|e| e.0).unwrap_or_default();
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

/// A turn's `tools:` scripts: a pre-validation script for a `<tool>` + pre-validation suffix
/// key, an execution script for any other.
fn tool_scripts(
    raw_tools: Map<String, Value>,
    at: &dyn Fn(&str) -> String,
    err: &ErrFn<'_>,
) -> Result<BTreeMap<String, ToolScript>, ScenarioError> {
    let mut tools = BTreeMap::new();
    for (name, value) in raw_tools {
        let key = at(&format!("tools.{name}"));
        let script = if name.ends_with(PRE_VALIDATION_SUFFIX) {
            serde_json::from_value::<PreValidationScript>(value)
                .map(ToolScript::PreValidation)
                .map_err(|e| {
                    err(
                        key.clone(),
                        format!("{e} (expected {{eligible, reason, code, data}})"),
                    )
                })?
        } else {
            serde_json::from_value::<ExecutionScript>(value)
                .map(ToolScript::Execution)
                .map_err(|e| {
                    err(
                        key.clone(),
                        format!("{e} (expected {{ok, data, retryable, error, code}})"),
                    )
                })?
        };
        tools.insert(name, script);
    }
    Ok(tools)
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
    use crate::scenario::matcher;

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

    /// Whether `written` (YAML source under `arguments`) matches the stored value `stored`, under
    /// each of the three keys that hold arguments.
    fn argument_matches(written: &str, stored: Value) -> [bool; 3] {
        let text = format!(
            "name: x\nturns:\n  - user: hi\n    expect:\n      active_transaction: {{tool: t, arguments: {{v: {written}}}}}\n      last_transaction: {{arguments: {{v: {written}}}}}\n      tool_calls: [{{tool: t, arguments: {{v: {written}}}}}]\n"
        );
        let s = parse_scenario(&text, "f.yaml").unwrap();
        let expect = &s.turns[0].expect;
        let txn = serde_json::json!({"tool": "t", "arguments": {"v": stored}});
        [
            matcher::check(&expect["active_transaction"], &txn).is_ok(),
            matcher::check(&expect["last_transaction"], &txn).is_ok(),
            matcher::check(&expect["tool_calls"], &serde_json::json!([txn])).is_ok(),
        ]
    }

    // MG-4: expected arguments compare by their YAML source text with the stored canonical text.
    #[test]
    fn arguments_compare_by_source_text() {
        use serde_json::json;
        assert_eq!(argument_matches("71.99", json!("71.99")), [true; 3]);
        assert_eq!(argument_matches("\"71.99\"", json!("71.99")), [true; 3]);
        assert_eq!(argument_matches("71.990", json!("71.99")), [false; 3]);
        assert_eq!(argument_matches("71.9", json!("71.90")), [false; 3]);
        assert_eq!(argument_matches("45", json!(45)), [true; 3]);
        assert_eq!(argument_matches("\"45\"", json!(45)), [true; 3]);
        assert_eq!(argument_matches("'45'", json!(45)), [true; 3]);
        assert_eq!(argument_matches("045", json!(45)), [false; 3]);
        assert_eq!(
            argument_matches("\"01310-100\"", json!("01310-100")),
            [true; 3]
        );
        assert_eq!(argument_matches("01310-100", json!("01310-100")), [true; 3]);
        assert_eq!(argument_matches("01310100", json!("01310-100")), [false; 3]);
        assert_eq!(argument_matches("PED-1001", json!("PED-1001")), [true; 3]);
        assert_eq!(argument_matches("ped-1001", json!("PED-1001")), [false; 3]);
    }

    #[test]
    fn arguments_keep_their_text_and_other_expectations_stay_yaml() {
        let text = "name: x\nturns:\n  - user: hi\n    expect:\n      session_ended: true\n      active_transaction: {tool: t, status: 71.990, arguments: {a: 71.990, b: 01310100, c: true}}\n      last_transaction: null\n      tool_calls: []\n";
        let s = parse_scenario(text, "f.yaml").unwrap();
        let e = &s.turns[0].expect;
        assert_eq!(
            e["active_transaction"],
            serde_json::json!({"tool": "t", "status": 71.99, "arguments": {"a": "71.990", "b": "01310100", "c": "true"}})
        );
        assert_eq!(e["session_ended"], Value::Bool(true));
        assert_eq!(e["last_transaction"], Value::Null);
        assert_eq!(e["tool_calls"], serde_json::json!([]));
        // Outside `arguments`, scalars still compare by value (71.990 = "71.99").
        assert!(matcher::check(
            &serde_json::json!({"status": e["active_transaction"]["status"]}),
            &serde_json::json!({"status": "71.99"})
        )
        .is_ok());
    }

    #[test]
    fn a_non_scalar_argument_is_reported_with_its_key() {
        let text = "name: x\nturns:\n  - user: hi\n    expect:\n      active_transaction: {arguments: {a: [1]}}\n";
        let e = parse_scenario(text, "f.yaml").unwrap_err();
        assert_eq!(
            e.location, "turn 1, key expect.active_transaction.arguments.a",
            "{e}"
        );
        assert!(e.problem.contains("canonical"), "{e}");
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
