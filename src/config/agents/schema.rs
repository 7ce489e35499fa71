//! The YAML schema of the agents file: raw structs that deny unknown keys, as deserialized.

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;

use crate::domain::catalog::MessageSet;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) assistants: BTreeMap<String, RawAssistant>,
    #[serde(default)]
    pub(super) tool_http: Option<RawToolHttp>,
}

/// `tool_http:`; every key optional (see
/// [`ToolHttpSettings::default`](crate::config::tool_http::ToolHttpSettings::default)).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawToolHttp {
    #[serde(default)]
    pub(super) timeout_ms: Option<u64>,
    #[serde(default)]
    pub(super) max_attempts: Option<u32>,
    #[serde(default)]
    pub(super) initial_backoff_ms: Option<u64>,
    #[serde(default)]
    pub(super) max_backoff_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAssistant {
    /// Free text for operators; not used by the engine.
    #[serde(default)]
    #[allow(dead_code)]
    pub(super) description: Option<String>,
    #[serde(default)]
    pub(super) default_locale: Option<String>,
    #[serde(default)]
    pub(super) tenants: Vec<RawTenantRule>,
    #[serde(default)]
    pub(super) profiles: Option<RawProfileRefs>,
    #[serde(default)]
    pub(super) agents: BTreeMap<String, RawAgent>,
    #[serde(default)]
    pub(super) parameters: BTreeMap<String, RawParameter>,
    #[serde(default)]
    pub(super) tools: BTreeMap<String, RawTool>,
    #[serde(default)]
    pub(super) messages: BTreeMap<String, RawMessages>,
    #[serde(default)]
    pub(super) session_examples: Option<RawSessionExamples>,
    #[serde(default)]
    pub(super) conversation: BTreeMap<String, RawTopic>,
    /// RP-3: the currency symbol money values are shown with (default `R$`).
    #[serde(default)]
    pub(super) currency_symbol: Option<String>,
}

/// A question about a tool (`answer`) or a conversational intent (`reply`): what customers say
/// and the fixed per-locale text they get (PR-3a, SC-9).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTopic {
    #[serde(default)]
    pub(super) examples: Option<RawExamples>,
    #[serde(default)]
    pub(super) reply: Option<RawLocalized>,
    #[serde(default)]
    pub(super) answer: Option<RawLocalized>,
    /// The topic answers a request no tool does (`can I pay here?`): the reply starts with the
    /// assistant's out-of-scope message.
    #[serde(default)]
    pub(super) out_of_scope: bool,
    /// A conversational intent that takes leave (`have a good day`): answered, then the session
    /// ends as on `END_SESSION`.
    #[serde(default)]
    pub(super) ends_session: bool,
}

/// `examples: {en: [...], pt-BR: [...]}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawExamples {
    #[serde(default)]
    pub(super) en: Vec<String>,
    #[serde(default, rename = "pt-BR")]
    pub(super) pt_br: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawSessionExamples {
    #[serde(default)]
    pub(super) human_handoff: Option<RawExamples>,
    #[serde(default)]
    pub(super) end_session: Option<RawExamples>,
    #[serde(default)]
    pub(super) cancel: Option<RawExamples>,
    #[serde(default)]
    pub(super) out_of_scope: Option<RawExamples>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTenantRule {
    pub(super) tenant: String,
    pub(super) tools: RawToolAccess,
}

/// `"*"` or a list of tool names.
#[derive(Debug)]
pub(super) enum RawToolAccess {
    All,
    Only(Vec<String>),
}

impl<'de> Deserialize<'de> for RawToolAccess {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawToolAccess;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("\"*\" (every tool) or a list of tool names")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawToolAccess, E> {
                if v.trim() == "*" {
                    Ok(RawToolAccess::All)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(v), &self))
                }
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<RawToolAccess, A::Error> {
                let mut names = Vec::new();
                while let Some(name) = seq.next_element::<String>()? {
                    names.push(name);
                }
                Ok(RawToolAccess::Only(names))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawProfileRefs {
    #[serde(default)]
    pub(super) router: Option<String>,
    #[serde(default)]
    pub(super) interpreter: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawAgent {
    #[serde(default)]
    pub(super) description: String,
    /// RP-3: how replies name what the agent helps with (`{agent}`).
    #[serde(default)]
    pub(super) phrase: Option<RawLocalized>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawKind {
    Id,
    Integer,
    Number,
    Money,
    Date,
    Enum,
    Cep,
    Text,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawParameter {
    #[serde(rename = "type")]
    pub(super) kind: RawKind,
    #[serde(default)]
    pub(super) pattern: Option<String>,
    #[serde(default)]
    pub(super) min: Option<i64>,
    #[serde(default)]
    pub(super) max: Option<i64>,
    #[serde(default)]
    pub(super) max_length: Option<u64>,
    #[serde(default)]
    pub(super) values: Option<Vec<RawEnumValue>>,
    #[serde(default)]
    pub(super) label: Option<RawLocalized>,
    /// Other names a customer uses for it (`zip`, `número`): with the label they introduce a
    /// plain value in a sentence (PR-1: `the number is 45`).
    #[serde(default)]
    pub(super) synonyms: Vec<ScalarString>,
    #[serde(default)]
    pub(super) example: Option<ScalarString>,
    /// RP-3: how sentences name it, with its article (`{param}`).
    #[serde(default)]
    pub(super) phrase: Option<RawLocalized>,
    /// RP-3: its pt-BR grammatical gender.
    #[serde(default)]
    pub(super) gender: Option<RawGender>,
    /// RP-4: its expected form in words, shown after an invalid value.
    #[serde(default)]
    pub(super) description: Option<RawLocalized>,
    /// Personal data (an address, a document number): `turnstile export` masks its values.
    #[serde(default)]
    pub(super) sensitive: bool,
}

/// An enum option: `express` or `{value: express, synonyms: [fast, rápido]}`.
#[derive(Debug)]
pub(super) struct RawEnumValue {
    pub(super) value: String,
    pub(super) synonyms: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawEnumValueFull {
    pub(super) value: ScalarString,
    #[serde(default)]
    pub(super) synonyms: Vec<ScalarString>,
}

impl<'de> Deserialize<'de> for RawEnumValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = RawEnumValue;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a value, or a map {value, synonyms}")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<RawEnumValue, E> {
                Ok(RawEnumValue {
                    value: v.to_owned(),
                    synonyms: Vec::new(),
                })
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<RawEnumValue, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<RawEnumValue, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<RawEnumValue, A::Error> {
                let full =
                    RawEnumValueFull::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(RawEnumValue {
                    value: full.value.0,
                    synonyms: full.synonyms.into_iter().map(|s| s.0).collect(),
                })
            }
        }
        d.deserialize_any(V)
    }
}

/// A scalar read as text: YAML gives `123` or `1.5` as numbers, but examples and enum values are
/// text.
#[derive(Debug, Clone)]
pub(super) struct ScalarString(pub(super) String);

impl<'de> Deserialize<'de> for ScalarString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = ScalarString;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a text or a number")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ScalarString, E> {
                Ok(ScalarString(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ScalarString, E> {
                Ok(ScalarString(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ScalarString, E> {
                Ok(ScalarString(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ScalarString, E> {
                Ok(ScalarString(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `{en: ..., pt-BR: ...}`; either may be missing (the other is used).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLocalized {
    #[serde(default)]
    pub(super) en: Option<String>,
    #[serde(default, rename = "pt-BR")]
    pub(super) pt_br: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawExhausted {
    #[default]
    Clarify,
    Handoff,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawTool {
    pub(super) agent: String,
    #[serde(default)]
    pub(super) description: String,
    #[serde(default)]
    pub(super) title: Option<RawLocalized>,
    #[serde(default)]
    pub(super) parameters: Vec<String>,
    #[serde(default)]
    pub(super) optional_parameters: Vec<String>,
    #[serde(default)]
    pub(super) confirmation: bool,
    #[serde(default)]
    pub(super) pre_validation: bool,
    #[serde(default)]
    pub(super) max_attempts: Option<u32>,
    #[serde(default)]
    pub(super) on_attempts_exhausted: RawExhausted,
    #[serde(default)]
    pub(super) endpoint: Option<String>,
    #[serde(default)]
    pub(super) pre_validation_endpoint: Option<String>,
    #[serde(default)]
    pub(super) examples: Option<RawExamples>,
    #[serde(default)]
    pub(super) action_verbs: Option<RawExamples>,
    #[serde(default)]
    pub(super) questions: BTreeMap<String, RawTopic>,
    /// RP-3: how sentences name it, with its article (`{tool}`).
    #[serde(default)]
    pub(super) phrase: Option<RawLocalized>,
    /// RP-3: its pt-BR grammatical gender.
    #[serde(default)]
    pub(super) gender: Option<RawGender>,
    /// RP-1: per-locale result templates naming fields of the response.
    #[serde(default)]
    pub(super) result: Option<RawLocalized>,
    /// RP-1: labels, formats and value maps of response fields, by dotted path.
    #[serde(default)]
    pub(super) result_fields: BTreeMap<String, RawResultField>,
    /// RP-2: the language the service writes its reasons and errors in.
    #[serde(default)]
    pub(super) service_locale: Option<String>,
    /// RP-2: per-locale texts by the `code` of a refusal or error.
    #[serde(default)]
    pub(super) reasons: BTreeMap<String, RawLocalized>,
}

/// `masculine` | `feminine` (pt-BR agreement, RP-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub(super) enum RawGender {
    Masculine,
    Feminine,
}

/// `result_fields.<path>: {label, format, values}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawResultField {
    #[serde(default)]
    pub(super) label: Option<RawLocalized>,
    #[serde(default)]
    pub(super) format: Option<String>,
    #[serde(default)]
    pub(super) values: BTreeMap<String, RawLocalized>,
}

/// Per-locale overrides of the built-in reply templates; a key not given keeps the default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawMessages {
    pub(super) ask_parameters: Option<String>,
    pub(super) invalid_value: Option<String>,
    pub(super) attempts_exhausted: Option<String>,
    pub(super) confirm: Option<String>,
    pub(super) completed: Option<String>,
    pub(super) failed: Option<String>,
    pub(super) cancelled: Option<String>,
    pub(super) declined: Option<String>,
    pub(super) interrupted: Option<String>,
    pub(super) expired: Option<String>,
    pub(super) not_eligible: Option<String>,
    pub(super) not_offered: Option<String>,
    pub(super) out_of_scope: Option<String>,
    pub(super) clarify: Option<String>,
    pub(super) routed: Option<String>,
    pub(super) nothing_to_confirm: Option<String>,
    pub(super) nothing_to_cancel: Option<String>,
    pub(super) human_handoff: Option<String>,
    pub(super) handoff_pending: Option<String>,
    pub(super) handback: Option<String>,
    pub(super) hold_on: Option<String>,
    pub(super) keeps_helping: Option<String>,
    pub(super) end_session: Option<String>,
    pub(super) pre_validation_unavailable: Option<String>,
    pub(super) not_done: Option<String>,
    pub(super) result_fields: Option<String>,
}

impl RawMessages {
    /// `(key, override)` pairs, in [`MessageSet`] field order.
    pub(super) fn entries(self) -> [(&'static str, Option<String>); 26] {
        [
            ("ask_parameters", self.ask_parameters),
            ("invalid_value", self.invalid_value),
            ("attempts_exhausted", self.attempts_exhausted),
            ("confirm", self.confirm),
            ("completed", self.completed),
            ("failed", self.failed),
            ("cancelled", self.cancelled),
            ("declined", self.declined),
            ("interrupted", self.interrupted),
            ("expired", self.expired),
            ("not_eligible", self.not_eligible),
            ("not_offered", self.not_offered),
            ("out_of_scope", self.out_of_scope),
            ("clarify", self.clarify),
            ("routed", self.routed),
            ("nothing_to_confirm", self.nothing_to_confirm),
            ("nothing_to_cancel", self.nothing_to_cancel),
            ("human_handoff", self.human_handoff),
            ("handoff_pending", self.handoff_pending),
            ("handback", self.handback),
            ("hold_on", self.hold_on),
            ("keeps_helping", self.keeps_helping),
            ("end_session", self.end_session),
            (
                "pre_validation_unavailable",
                self.pre_validation_unavailable,
            ),
            ("not_done", self.not_done),
            ("result_fields", self.result_fields),
        ]
    }
}

pub(super) fn message_slot<'a>(set: &'a mut MessageSet, key: &str) -> &'a mut String {
    match key {
        "ask_parameters" => &mut set.ask_parameters,
        "invalid_value" => &mut set.invalid_value,
        "attempts_exhausted" => &mut set.attempts_exhausted,
        "confirm" => &mut set.confirm,
        "completed" => &mut set.completed,
        "failed" => &mut set.failed,
        "cancelled" => &mut set.cancelled,
        "declined" => &mut set.declined,
        "interrupted" => &mut set.interrupted,
        "expired" => &mut set.expired,
        "not_eligible" => &mut set.not_eligible,
        "not_offered" => &mut set.not_offered,
        "out_of_scope" => &mut set.out_of_scope,
        "clarify" => &mut set.clarify,
        "routed" => &mut set.routed,
        "nothing_to_confirm" => &mut set.nothing_to_confirm,
        "nothing_to_cancel" => &mut set.nothing_to_cancel,
        "human_handoff" => &mut set.human_handoff,
        "handoff_pending" => &mut set.handoff_pending,
        "handback" => &mut set.handback,
        "hold_on" => &mut set.hold_on,
        "keeps_helping" => &mut set.keeps_helping,
        "end_session" => &mut set.end_session,
        "pre_validation_unavailable" => &mut set.pre_validation_unavailable,
        "not_done" => &mut set.not_done,
        "result_fields" => &mut set.result_fields,
        other => unreachable!("unknown message key {other}"),
    }
}

/// Every template of a message set, as `(key, template)`.
pub fn message_entries(set: &MessageSet) -> [(&'static str, &str); 26] {
    [
        ("ask_parameters", &set.ask_parameters),
        ("invalid_value", &set.invalid_value),
        ("attempts_exhausted", &set.attempts_exhausted),
        ("confirm", &set.confirm),
        ("completed", &set.completed),
        ("failed", &set.failed),
        ("cancelled", &set.cancelled),
        ("declined", &set.declined),
        ("interrupted", &set.interrupted),
        ("expired", &set.expired),
        ("not_eligible", &set.not_eligible),
        ("not_offered", &set.not_offered),
        ("out_of_scope", &set.out_of_scope),
        ("clarify", &set.clarify),
        ("routed", &set.routed),
        ("nothing_to_confirm", &set.nothing_to_confirm),
        ("nothing_to_cancel", &set.nothing_to_cancel),
        ("human_handoff", &set.human_handoff),
        ("handoff_pending", &set.handoff_pending),
        ("handback", &set.handback),
        ("hold_on", &set.hold_on),
        ("keeps_helping", &set.keeps_helping),
        ("end_session", &set.end_session),
        (
            "pre_validation_unavailable",
            &set.pre_validation_unavailable,
        ),
        ("not_done", &set.not_done),
        ("result_fields", &set.result_fields),
    ]
}
