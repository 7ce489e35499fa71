//! The agents file: assistants (by `agent_id`), their domain agents, typed parameters, tools,
//! tenant access and reply messages. See `config/agents.example.yaml` for the documented shape.
//!
//! Loading has two stages. The structural stage deserializes the YAML into raw structs that deny
//! unknown keys; its one error names the key path and the line/column. The semantic stage then
//! checks references, patterns, ranges, locales and message placeholders, collects every problem
//! of the file, and builds the domain [`Catalog`].
//!
//! Besides the catalog, the file holds the transport settings of the tool webhooks (`tool_http:`,
//! [`ToolHttpSettings`]): the domain catalog has no place for them, so [`parse_agents_file`]
//! returns both.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::Deserialize;
use serde_json::Value;

use crate::config::tool_http::ToolHttpSettings;
use crate::config::PLACEHOLDERS;
use crate::config::{parse_yaml, read_file, unknown_placeholders, ConfigError, ConfigErrors};
use crate::domain::catalog::{
    Assistant, Catalog, DomainAgent, Examples, Localized, MessageSet, OnAttemptsExhausted,
    ParameterSpec, SessionExamples, TenantRule, Tool, ToolAccess, DEFAULT_END_SESSION_MESSAGE,
    DEFAULT_HUMAN_HANDOFF_MESSAGE,
};
use crate::domain::locale::Locale;
use crate::domain::parameter::{EnumValue, IdPattern, ParameterKind};

/// Failed attempts before a tool's `on_attempts_exhausted` applies, when not configured (MG-4).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// `max_length` of a `text` parameter when not configured, in characters.
pub const DEFAULT_TEXT_MAX_LENGTH: usize = 500;
/// Model profile names an assistant uses when its `profiles:` key is absent.
pub const DEFAULT_ROUTER_PROFILE: &str = "router";
pub const DEFAULT_INTERPRETER_PROFILE: &str = "interpreter";
/// Appended to a tool's `endpoint` when `pre_validation_endpoint` is not given.
pub const PRE_VALIDATION_PATH_SUFFIX: &str = "/pre-validate";
/// Upper bound of `tool_http.max_attempts`: more would hold a conversation's partition for long.
pub const MAX_TOOL_HTTP_ATTEMPTS: u32 = 10;

/// Route names the engine reserves for session control (SC-5, SC-6); no domain agent may use them.
const RESERVED_AGENT_NAMES: &[&str] = &["human_handoff", "end_session"];

// ---------------------------------------------------------------------------------------------
// Raw (structural) shape
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    assistants: BTreeMap<String, RawAssistant>,
    #[serde(default)]
    tool_http: Option<RawToolHttp>,
}

/// `tool_http:`; every key optional (see [`ToolHttpSettings::default`]).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawToolHttp {
    #[serde(default)]
    timeout_ms: Option<u64>,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    initial_backoff_ms: Option<u64>,
    #[serde(default)]
    max_backoff_ms: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAssistant {
    /// Free text for operators; not used by the engine.
    #[serde(default)]
    #[allow(dead_code)]
    description: Option<String>,
    #[serde(default)]
    default_locale: Option<String>,
    #[serde(default)]
    tenants: Vec<RawTenantRule>,
    #[serde(default)]
    profiles: Option<RawProfileRefs>,
    #[serde(default)]
    agents: BTreeMap<String, RawAgent>,
    #[serde(default)]
    parameters: BTreeMap<String, RawParameter>,
    #[serde(default)]
    tools: BTreeMap<String, RawTool>,
    #[serde(default)]
    messages: BTreeMap<String, RawMessages>,
    #[serde(default)]
    session_examples: Option<RawSessionExamples>,
}

/// `examples: {en: [...], pt-BR: [...]}`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawExamples {
    #[serde(default)]
    en: Vec<String>,
    #[serde(default, rename = "pt-BR")]
    pt_br: Vec<String>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawSessionExamples {
    #[serde(default)]
    human_handoff: Option<RawExamples>,
    #[serde(default)]
    end_session: Option<RawExamples>,
    #[serde(default)]
    cancel: Option<RawExamples>,
    #[serde(default)]
    out_of_scope: Option<RawExamples>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTenantRule {
    tenant: String,
    tools: RawToolAccess,
}

/// `"*"` or a list of tool names.
#[derive(Debug)]
enum RawToolAccess {
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
struct RawProfileRefs {
    #[serde(default)]
    router: Option<String>,
    #[serde(default)]
    interpreter: Option<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawAgent {
    #[serde(default)]
    description: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawKind {
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
struct RawParameter {
    #[serde(rename = "type")]
    kind: RawKind,
    #[serde(default)]
    pattern: Option<String>,
    #[serde(default)]
    min: Option<i64>,
    #[serde(default)]
    max: Option<i64>,
    #[serde(default)]
    max_length: Option<u64>,
    #[serde(default)]
    values: Option<Vec<RawEnumValue>>,
    #[serde(default)]
    label: Option<RawLocalized>,
    /// Other names a customer uses for it (`zip`, `número`): with the label they introduce a
    /// plain value in a sentence (PR-1: `the number is 45`).
    #[serde(default)]
    synonyms: Vec<ScalarString>,
    #[serde(default)]
    example: Option<ScalarString>,
}

/// A parameter definition after validation, before tools take it.
#[derive(Debug, Clone)]
struct ParameterDef {
    kind: ParameterKind,
    label: Localized,
    synonyms: Vec<String>,
    example: Option<String>,
}

/// An enum option: `express` or `{value: express, synonyms: [fast, rápido]}`.
#[derive(Debug)]
struct RawEnumValue {
    value: String,
    synonyms: Vec<String>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawEnumValueFull {
    value: ScalarString,
    #[serde(default)]
    synonyms: Vec<ScalarString>,
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
struct ScalarString(String);

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
struct RawLocalized {
    #[serde(default)]
    en: Option<String>,
    #[serde(default, rename = "pt-BR")]
    pt_br: Option<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "lowercase")]
enum RawExhausted {
    #[default]
    Clarify,
    Handoff,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTool {
    agent: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    title: Option<RawLocalized>,
    #[serde(default)]
    parameters: Vec<String>,
    #[serde(default)]
    optional_parameters: Vec<String>,
    #[serde(default)]
    confirmation: bool,
    #[serde(default)]
    pre_validation: bool,
    #[serde(default)]
    max_attempts: Option<u32>,
    #[serde(default)]
    on_attempts_exhausted: RawExhausted,
    #[serde(default)]
    endpoint: Option<String>,
    #[serde(default)]
    pre_validation_endpoint: Option<String>,
    #[serde(default)]
    examples: Option<RawExamples>,
}

/// Per-locale overrides of the built-in reply templates; a key not given keeps the default.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawMessages {
    ask_parameters: Option<String>,
    invalid_value: Option<String>,
    attempts_exhausted: Option<String>,
    confirm: Option<String>,
    completed: Option<String>,
    failed: Option<String>,
    cancelled: Option<String>,
    declined: Option<String>,
    interrupted: Option<String>,
    expired: Option<String>,
    not_eligible: Option<String>,
    not_offered: Option<String>,
    out_of_scope: Option<String>,
    clarify: Option<String>,
    routed: Option<String>,
    nothing_to_confirm: Option<String>,
    nothing_to_cancel: Option<String>,
    human_handoff: Option<String>,
    handoff_pending: Option<String>,
    end_session: Option<String>,
    pre_validation_unavailable: Option<String>,
}

impl RawMessages {
    /// `(key, override)` pairs, in [`MessageSet`] field order.
    fn entries(self) -> [(&'static str, Option<String>); 21] {
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
            ("end_session", self.end_session),
            (
                "pre_validation_unavailable",
                self.pre_validation_unavailable,
            ),
        ]
    }
}

fn message_slot<'a>(set: &'a mut MessageSet, key: &str) -> &'a mut String {
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
        "end_session" => &mut set.end_session,
        "pre_validation_unavailable" => &mut set.pre_validation_unavailable,
        other => unreachable!("unknown message key {other}"),
    }
}

/// Every template of a message set, as `(key, template)`.
pub fn message_entries(set: &MessageSet) -> [(&'static str, &str); 21] {
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
        ("end_session", &set.end_session),
        (
            "pre_validation_unavailable",
            &set.pre_validation_unavailable,
        ),
    ]
}

// ---------------------------------------------------------------------------------------------
// Built-in messages
// ---------------------------------------------------------------------------------------------

/// The built-in reply templates of `locale` (the seed's texts for handoff and end of session).
pub fn default_messages(locale: Locale) -> MessageSet {
    match locale {
        Locale::En => MessageSet {
            ask_parameters: "To continue with the {tool}, please send your {labels}.".into(),
            invalid_value: "\"{value}\" is not a valid {label}. Please send it again, for \
                            example: {example}."
                .into(),
            attempts_exhausted: "I still could not get a valid {label}. It should look like \
                                 this: {example}. Please check it and send it again, or ask to \
                                 talk to a person."
                .into(),
            confirm: "Please confirm the {tool}: {arguments}. Reply yes or no.".into(),
            completed: "Done! Your {tool} is complete.".into(),
            failed: "Sorry, the {tool} could not be completed: {reason}.".into(),
            cancelled: "OK, the {tool} has been cancelled.".into(),
            declined: "OK, I did not go ahead with it. Is there anything else I can help \
                       you with?"
                .into(),
            interrupted: "I stopped the previous request so we can take care of this one.".into(),
            expired: "Your previous request expired after a period of inactivity, so I \
                      cancelled it."
                .into(),
            not_eligible: "Sorry, this request cannot be done: {reason}.".into(),
            not_offered: "Sorry, this service is not available for your account.".into(),
            out_of_scope: "Sorry, I can't help with that here.".into(),
            clarify: "Sorry, I didn't understand that.".into(),
            routed: "Sure, I can help with {agent}. What would you like to do?".into(),
            nothing_to_confirm: "There is nothing waiting for your confirmation right now.".into(),
            nothing_to_cancel: "There is nothing to cancel right now.".into(),
            human_handoff: DEFAULT_HUMAN_HANDOFF_MESSAGE.into(),
            handoff_pending: "Your request is with our team. A person will answer you shortly."
                .into(),
            end_session: DEFAULT_END_SESSION_MESSAGE.into(),
            pre_validation_unavailable: "Sorry, I could not check your {tool} right now. \
                                         Nothing was changed; please try again later."
                .into(),
        },
        Locale::PtBr => MessageSet {
            ask_parameters: "Para continuar com o {tool}, por favor envie {labels}.".into(),
            invalid_value: "\"{value}\" não é um valor válido para {label}. Por favor, envie \
                            novamente, por exemplo: {example}."
                .into(),
            attempts_exhausted: "Ainda não consegui um valor válido para {label}. O formato \
                                 esperado é este: {example}. Confira e envie novamente, ou peça \
                                 para falar com um atendente."
                .into(),
            confirm: "Por favor, confirme o {tool}: {arguments}. Responda sim ou não.".into(),
            completed: "Pronto! O {tool} foi concluído.".into(),
            failed: "Desculpe, não foi possível concluir o {tool}: {reason}.".into(),
            cancelled: "Tudo bem, o {tool} foi cancelado.".into(),
            declined: "Tudo bem, não vou prosseguir. Posso ajudar em mais alguma coisa?".into(),
            interrupted: "Interrompi a solicitação anterior para cuidarmos desta.".into(),
            expired: "Sua solicitação anterior expirou por inatividade e foi cancelada.".into(),
            not_eligible: "Desculpe, não é possível atender a esta solicitação: {reason}.".into(),
            not_offered: "Desculpe, este serviço não está disponível para a sua conta.".into(),
            out_of_scope: "Desculpe, não consigo ajudar com isso por aqui.".into(),
            clarify: "Desculpe, não entendi.".into(),
            routed: "Claro, posso ajudar com {agent}. O que você gostaria de fazer?".into(),
            nothing_to_confirm: "Não há nada aguardando a sua confirmação no momento.".into(),
            nothing_to_cancel: "Não há nada para cancelar no momento.".into(),
            human_handoff: "Vou transferir sua solicitação para um atendente.".into(),
            handoff_pending: "Sua solicitação está com a nossa equipe. Um atendente vai \
                              responder em breve."
                .into(),
            end_session: "O atendimento foi encerrado. Obrigado pelo contato.".into(),
            pre_validation_unavailable: "Desculpe, não consegui verificar o {tool} agora. \
                                         Nada foi alterado; tente novamente mais tarde."
                .into(),
        },
    }
}

// ---------------------------------------------------------------------------------------------
// Loading and semantic validation
// ---------------------------------------------------------------------------------------------

/// Everything an agents file configures.
#[derive(Debug, Clone)]
pub struct AgentsFile {
    pub catalog: Catalog,
    /// Transport of the tool webhooks (`tool_http:`), for `tool::HttpToolGateway`.
    pub tool_http: ToolHttpSettings,
}

/// Loads and validates an agents file.
pub fn load_catalog(path: &Path) -> Result<Catalog, ConfigErrors> {
    load_agents_file(path).map(|f| f.catalog)
}

/// Loads and validates an agents file: the catalog and the tool transport settings.
pub fn load_agents_file(path: &Path) -> Result<AgentsFile, ConfigErrors> {
    let text = read_file(path)?;
    parse_agents_file(&text, &path.display().to_string())
}

/// Parses and validates agents YAML; `file_label` names the source in errors. Semantic errors are
/// all collected.
pub fn parse_catalog(yaml: &str, file_label: &str) -> Result<Catalog, ConfigErrors> {
    parse_agents_file(yaml, file_label).map(|f| f.catalog)
}

/// [`parse_catalog`], also returning the `tool_http:` settings.
pub fn parse_agents_file(yaml: &str, file_label: &str) -> Result<AgentsFile, ConfigErrors> {
    let raw: RawFile = parse_yaml(yaml, file_label)?;
    let mut v = Validator {
        file: file_label,
        errors: Vec::new(),
    };
    let tool_http = v.tool_http(raw.tool_http.unwrap_or_default());
    if raw.assistants.is_empty() {
        v.err(
            "assistants",
            "no assistant is defined",
            "define at least one assistant under `assistants:` (its key is the agent_id)",
        );
    }
    let mut catalog = Catalog::default();
    for (id, a) in raw.assistants {
        if let Some(assistant) = v.assistant(&id, a) {
            catalog.assistants.insert(id, assistant);
        }
    }
    ConfigErrors(v.errors).into_result(AgentsFile { catalog, tool_http })
}

/// The pre-validation endpoint of a tool that configures none: `<endpoint>/pre-validate`.
pub fn default_pre_validation_endpoint(endpoint: &str) -> String {
    format!(
        "{}{PRE_VALIDATION_PATH_SUFFIX}",
        endpoint.trim_end_matches('/')
    )
}

/// Why `endpoint` is not an absolute http(s) URL or a `/path`, if it is not.
pub fn endpoint_problem(endpoint: &str) -> Option<String> {
    if endpoint.is_empty() {
        return Some("the endpoint is empty".into());
    }
    if endpoint
        .chars()
        .any(|c| c.is_whitespace() || c.is_control())
    {
        return Some(format!("`{endpoint}` contains whitespace"));
    }
    let (url, relative) = if endpoint.starts_with("//") {
        return Some(format!(
            "`{endpoint}` has no scheme (a `//host` URL is ambiguous)"
        ));
    } else if endpoint.starts_with('/') {
        // Parsed against a placeholder host only to check the path.
        (format!("http://base.invalid{endpoint}"), true)
    } else {
        (endpoint.to_owned(), false)
    };
    let parsed = match reqwest::Url::parse(&url) {
        Ok(u) => u,
        Err(e) if relative => return Some(format!("`{endpoint}` is not a valid path: {e}")),
        Err(_) => {
            return Some(format!(
                "`{endpoint}` is neither an absolute http(s) URL nor a path starting with `/`"
            ))
        }
    };
    if !matches!(parsed.scheme(), "http" | "https") {
        return Some(format!(
            "`{endpoint}` uses scheme `{}`; only http and https are supported",
            parsed.scheme()
        ));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Some(format!("`{endpoint}` has no host"));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        // The pre-validation default appends to the path; ids travel in headers and the body.
        return Some(format!("`{endpoint}` has a query or fragment"));
    }
    None
}

struct Validator<'f> {
    file: &'f str,
    errors: Vec<ConfigError>,
}

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

impl Validator<'_> {
    fn err(&mut self, key: impl Into<String>, problem: impl Into<String>, fix: impl Into<String>) {
        self.errors
            .push(ConfigError::new(self.file, key, problem, fix));
    }

    fn check_name(&mut self, key: &str, what: &str, name: &str) {
        if !is_name(name) {
            self.err(
                key,
                format!("`{name}` is not a valid {what} name"),
                "use letters, digits, `_`, `-` and `.` only, starting with a letter or digit",
            );
        }
    }

    fn locale(&mut self, key: &str, tag: &str) -> Option<Locale> {
        match tag {
            "en" => Some(Locale::En),
            "pt-BR" => Some(Locale::PtBr),
            other => {
                self.err(
                    key,
                    format!("unknown locale `{other}`"),
                    "use `en` or `pt-BR`",
                );
                None
            }
        }
    }

    fn assistant(&mut self, id: &str, a: RawAssistant) -> Option<Assistant> {
        let base = format!("assistants.{id}");
        let errors_before = self.errors.len();
        if id.trim().is_empty() {
            self.err(
                "assistants",
                "an assistant has an empty agent_id",
                "give the assistant a non-empty key, e.g. retail-bot",
            );
        } else if id.contains('/') {
            self.err(
                &base,
                format!("agent_id `{id}` contains `/`"),
                "remove `/` from the agent_id (it is part of the conversation key)",
            );
        }

        let default_locale = match &a.default_locale {
            None => Locale::En,
            Some(tag) => self
                .locale(&format!("{base}.default_locale"), tag)
                .unwrap_or_default(),
        };

        // Domain agents.
        let mut agents = BTreeMap::new();
        if a.agents.is_empty() {
            self.err(
                format!("{base}.agents"),
                "no domain agent is defined",
                "define at least one agent the router can pick, e.g. `retail: {description: ...}`",
            );
        }
        for (name, raw) in a.agents {
            let key = format!("{base}.agents.{name}");
            self.check_name(&key, "agent", &name);
            if RESERVED_AGENT_NAMES.contains(&name.as_str()) {
                self.err(
                    &key,
                    format!("`{name}` is reserved for session control"),
                    "rename the agent",
                );
            }
            agents.insert(
                name.clone(),
                DomainAgent {
                    name,
                    description: raw.description.trim().to_owned(),
                },
            );
        }

        // Parameter definitions (shared by the tools).
        let mut params: BTreeMap<String, ParameterDef> = BTreeMap::new();
        for (name, raw) in a.parameters {
            let key = format!("{base}.parameters.{name}");
            self.check_name(&key, "parameter", &name);
            if let Some(def) = self.parameter(&key, &name, raw) {
                params.insert(name, def);
            }
        }

        // Tools.
        if a.tools.is_empty() {
            self.err(
                format!("{base}.tools"),
                "no tool is defined",
                "define at least one tool under `tools:`",
            );
        }
        let mut tools = BTreeMap::new();
        for (name, raw) in a.tools {
            let key = format!("{base}.tools.{name}");
            self.check_name(&key, "tool", &name);
            if let Some(tool) = self.tool(&key, &name, raw, &agents, &params) {
                tools.insert(name, tool);
            }
        }

        // Tenants.
        let mut tenants = Vec::new();
        if a.tenants.is_empty() {
            self.err(
                format!("{base}.tenants"),
                "no tenant may use this assistant",
                "add a rule, e.g. `tenants: [{tenant: \"*\", tools: \"*\"}]` to open it to every \
                 tenant",
            );
        }
        let mut seen_tenants = BTreeSet::new();
        for (i, rule) in a.tenants.into_iter().enumerate() {
            let key = format!("{base}.tenants[{i}]");
            let tenant = rule.tenant.trim().to_owned();
            if tenant.is_empty() {
                self.err(
                    format!("{key}.tenant"),
                    "the tenant is empty",
                    "give a tenant_id, or \"*\" for every tenant",
                );
            } else if !seen_tenants.insert(tenant.clone()) {
                self.err(
                    format!("{key}.tenant"),
                    format!("tenant `{tenant}` has more than one rule"),
                    "merge the rules into one",
                );
            }
            let access = match rule.tools {
                RawToolAccess::All => ToolAccess::All,
                RawToolAccess::Only(list) => {
                    for (j, t) in list.iter().enumerate() {
                        if !tools.contains_key(t) && !self.tool_was_defined(&base, t) {
                            self.err(
                                format!("{key}.tools[{j}]"),
                                format!("tool `{t}` is not defined in this assistant"),
                                format!("use one of: {}", names(tools.keys())),
                            );
                        }
                    }
                    ToolAccess::Only(list)
                }
            };
            tenants.push(TenantRule {
                tenant,
                tools: access,
            });
        }

        // Profiles.
        let refs = a.profiles.unwrap_or(RawProfileRefs {
            router: None,
            interpreter: None,
        });
        let mut profile = |role: &str, value: Option<String>, default: &str| match value {
            None => default.to_owned(),
            Some(p) if p.trim().is_empty() => {
                self.err(
                    format!("{base}.profiles.{role}"),
                    "the profile name is empty",
                    format!(
                        "name a profile of the profiles file, or remove the key for `{default}`"
                    ),
                );
                default.to_owned()
            }
            Some(p) => p.trim().to_owned(),
        };
        let router_profile = profile("router", refs.router, DEFAULT_ROUTER_PROFILE);
        let interpreter_profile =
            profile("interpreter", refs.interpreter, DEFAULT_INTERPRETER_PROFILE);

        // Messages: defaults for every locale, then the file's overrides.
        let mut messages: BTreeMap<Locale, MessageSet> = Locale::ALL
            .iter()
            .map(|&l| (l, default_messages(l)))
            .collect();
        for (tag, raw) in a.messages {
            let key = format!("{base}.messages.{tag}");
            let Some(locale) = self.locale(&key, &tag) else {
                continue;
            };
            let set = messages
                .get_mut(&locale)
                .expect("every locale has defaults");
            for (name, value) in raw.entries() {
                let Some(text) = value else { continue };
                let mkey = format!("{key}.{name}");
                for p in unknown_placeholders(&text) {
                    self.err(
                        &mkey,
                        format!("unknown placeholder `{{{p}}}`"),
                        format!(
                            "use only {}",
                            PLACEHOLDERS
                                .iter()
                                .map(|p| format!("{{{p}}}"))
                                .collect::<Vec<_>>()
                                .join(" ")
                        ),
                    );
                }
                if text.trim().is_empty() {
                    self.err(
                        &mkey,
                        "the message is empty",
                        "write the reply text, or remove the key to keep the default",
                    );
                }
                *message_slot(set, name) = text;
            }
        }

        let raw_session = a.session_examples.unwrap_or_default();
        let session_examples = SessionExamples {
            human_handoff: self.examples(
                &format!("{base}.session_examples.human_handoff"),
                raw_session.human_handoff,
            ),
            end_session: self.examples(
                &format!("{base}.session_examples.end_session"),
                raw_session.end_session,
            ),
            cancel: self.examples(
                &format!("{base}.session_examples.cancel"),
                raw_session.cancel,
            ),
            out_of_scope: self.examples(
                &format!("{base}.session_examples.out_of_scope"),
                raw_session.out_of_scope,
            ),
        };

        if self.errors.len() > errors_before {
            return None;
        }
        Some(Assistant {
            agent_id: id.to_owned(),
            tenants,
            agents,
            tools,
            messages,
            default_locale,
            router_profile,
            interpreter_profile,
            session_examples,
        })
    }

    /// Example utterances, trimmed; an empty one is an error (it would match everything alike).
    fn examples(&mut self, key: &str, raw: Option<RawExamples>) -> Examples {
        let raw = raw.unwrap_or_default();
        let mut out = Examples::new();
        for (locale, list) in [(Locale::En, raw.en), (Locale::PtBr, raw.pt_br)] {
            let mut texts = Vec::new();
            for (i, text) in list.into_iter().enumerate() {
                let text = text.trim().to_owned();
                if text.is_empty() {
                    self.err(
                        format!("{key}.{}[{i}]", locale.tag()),
                        "the example is empty",
                        "write what a customer would say, or remove the entry",
                    );
                } else if !texts.contains(&text) {
                    texts.push(text);
                }
            }
            if !texts.is_empty() {
                out.insert(locale, texts);
            }
        }
        out
    }

    /// A tenant rule may name a tool that exists but failed validation; that is not a second error.
    fn tool_was_defined(&self, base: &str, tool: &str) -> bool {
        let prefix = format!("{base}.tools.{tool}");
        self.errors
            .iter()
            .any(|e| e.key == prefix || e.key.starts_with(&format!("{prefix}.")))
    }

    fn localized(&mut self, raw: Option<RawLocalized>, fallback: &str) -> Localized {
        let raw = raw.unwrap_or_default();
        let clean = |s: Option<String>| s.map(|s| s.trim().to_owned()).filter(|s| !s.is_empty());
        let en = clean(raw.en);
        let pt = clean(raw.pt_br);
        let en_text = en
            .clone()
            .or_else(|| pt.clone())
            .unwrap_or_else(|| fallback.to_owned());
        let pt_text = pt.or(en).unwrap_or_else(|| fallback.to_owned());
        Localized {
            en: en_text,
            pt_br: pt_text,
        }
    }

    fn parameter(&mut self, key: &str, name: &str, raw: RawParameter) -> Option<ParameterDef> {
        let before = self.errors.len();
        let type_name = format!("{:?}", raw.kind).to_lowercase();
        let misplaced = |field: &str, allowed: &str| {
            (
                format!("{key}.{field}"),
                format!("`{field}` does not apply to a `{type_name}` parameter"),
                format!("remove `{field}` (it is only for `{allowed}` parameters)"),
            )
        };
        let mut problems = Vec::new();
        if raw.kind != RawKind::Id && raw.pattern.is_some() {
            problems.push(misplaced("pattern", "id"));
        }
        if raw.kind != RawKind::Integer {
            if raw.min.is_some() {
                problems.push(misplaced("min", "integer"));
            }
            if raw.max.is_some() {
                problems.push(misplaced("max", "integer"));
            }
        }
        if raw.kind != RawKind::Text && raw.max_length.is_some() {
            problems.push(misplaced("max_length", "text"));
        }
        if raw.kind != RawKind::Enum && raw.values.is_some() {
            problems.push(misplaced("values", "enum"));
        }
        for (k, p, f) in problems {
            self.err(k, p, f);
        }

        let kind = match raw.kind {
            RawKind::Id => match raw.pattern.as_deref().map(str::trim) {
                None | Some("") => {
                    self.err(
                        format!("{key}.pattern"),
                        "an id parameter needs a non-empty pattern",
                        "add a regular expression for the id, e.g. `pattern: \"PED-[0-9]{4,}\"`",
                    );
                    None
                }
                Some(p) => match IdPattern::new(p) {
                    Ok(pattern) => Some(ParameterKind::Id { pattern }),
                    Err(e) => {
                        self.err(
                            format!("{key}.pattern"),
                            e,
                            "write a valid regular expression that matches the whole id \
                             (Rust regex syntax), e.g. \"PED-[0-9]{4,}\"",
                        );
                        None
                    }
                },
            },
            RawKind::Integer => {
                if let (Some(min), Some(max)) = (raw.min, raw.max) {
                    if min > max {
                        self.err(
                            format!("{key}.min"),
                            format!("min {min} is greater than max {max}"),
                            "make min less than or equal to max",
                        );
                    }
                }
                Some(ParameterKind::Integer {
                    min: raw.min,
                    max: raw.max,
                })
            }
            RawKind::Number => Some(ParameterKind::Number),
            RawKind::Money => Some(ParameterKind::Money),
            RawKind::Date => Some(ParameterKind::Date),
            RawKind::Cep => Some(ParameterKind::Cep),
            RawKind::Text => match raw.max_length {
                Some(0) => {
                    self.err(
                        format!("{key}.max_length"),
                        "max_length must be at least 1",
                        format!(
                            "use a positive number of characters, or remove it for \
                             {DEFAULT_TEXT_MAX_LENGTH}"
                        ),
                    );
                    None
                }
                Some(n) => Some(ParameterKind::Text {
                    max_len: usize::try_from(n).unwrap_or(usize::MAX),
                }),
                None => Some(ParameterKind::Text {
                    max_len: DEFAULT_TEXT_MAX_LENGTH,
                }),
            },
            RawKind::Enum => {
                let values = raw.values.unwrap_or_default();
                if values.is_empty() {
                    self.err(
                        format!("{key}.values"),
                        "an enum parameter needs at least one value",
                        "list the accepted values, e.g. `values: [{value: express, synonyms: \
                         [fast]}]`",
                    );
                    None
                } else {
                    let mut seen = BTreeMap::new();
                    for (i, v) in values.iter().enumerate() {
                        for (j, word) in std::iter::once(&v.value)
                            .chain(v.synonyms.iter())
                            .enumerate()
                        {
                            let wkey = if j == 0 {
                                format!("{key}.values[{i}].value")
                            } else {
                                format!("{key}.values[{i}].synonyms[{}]", j - 1)
                            };
                            let norm = word.trim().to_lowercase();
                            if norm.is_empty() {
                                self.err(wkey, "the value is empty", "remove it or give a text");
                            } else if let Some(prev) = seen.insert(norm, i) {
                                if prev != i {
                                    self.err(
                                        wkey,
                                        format!("`{word}` already means values[{prev}]"),
                                        "give each word to one value only",
                                    );
                                }
                            }
                        }
                    }
                    Some(ParameterKind::Enum {
                        values: values
                            .into_iter()
                            .map(|v| EnumValue {
                                value: v.value.trim().to_owned(),
                                synonyms: v
                                    .synonyms
                                    .into_iter()
                                    .map(|s| s.trim().to_owned())
                                    .collect(),
                            })
                            .collect(),
                    })
                }
            }
        };

        let label = self.localized(raw.label, name);
        let synonyms: Vec<String> = raw
            .synonyms
            .into_iter()
            .map(|s| s.0.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let example = raw.example.map(|s| s.0.trim().to_owned());
        let kind = kind?;
        let example = match example {
            Some(e) => {
                if !valid_in_some_locale(&kind, &e) {
                    self.err(
                        format!("{key}.example"),
                        format!("example `{e}` is not a valid {type_name} value"),
                        "give an example the parameter accepts (replies show it after an \
                         invalid value)",
                    );
                }
                Some(e)
            }
            None => {
                if matches!(kind, ParameterKind::Id { .. }) {
                    self.err(
                        format!("{key}.example"),
                        "an id parameter needs an example",
                        "add a valid id, e.g. `example: PED-1001` (replies show it after an \
                         invalid value)",
                    );
                }
                default_example(&kind)
            }
        };
        if self.errors.len() > before {
            return None;
        }
        Some(ParameterDef {
            kind,
            label,
            synonyms,
            example,
        })
    }

    fn tool(
        &mut self,
        key: &str,
        name: &str,
        raw: RawTool,
        agents: &BTreeMap<String, DomainAgent>,
        params: &BTreeMap<String, ParameterDef>,
    ) -> Option<Tool> {
        let before = self.errors.len();
        if !agents.contains_key(&raw.agent) {
            self.err(
                format!("{key}.agent"),
                format!("agent `{}` is not defined in this assistant", raw.agent),
                if agents.is_empty() {
                    "define the agent under the assistant's `agents:`".to_owned()
                } else {
                    format!(
                        "use one of: {}; or define it under the assistant's `agents:`",
                        names(agents.keys())
                    )
                },
            );
        }
        let max_attempts = raw.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        if max_attempts == 0 {
            self.err(
                format!("{key}.max_attempts"),
                "max_attempts must be at least 1",
                format!("use 1 or more, or remove it for the default {DEFAULT_MAX_ATTEMPTS}"),
            );
        }

        let mut seen = BTreeSet::new();
        let mut parameters = Vec::new();
        for (list, required, entries) in [
            ("parameters", true, &raw.parameters),
            ("optional_parameters", false, &raw.optional_parameters),
        ] {
            for (i, p) in entries.iter().enumerate() {
                let pkey = format!("{key}.{list}[{i}]");
                if !seen.insert(p.clone()) {
                    self.err(
                        pkey,
                        format!("parameter `{p}` is listed more than once"),
                        "list each parameter once, in `parameters` or `optional_parameters`",
                    );
                    continue;
                }
                match params.get(p) {
                    Some(def) => parameters.push(ParameterSpec {
                        name: p.clone(),
                        kind: def.kind.clone(),
                        required,
                        label: def.label.clone(),
                        synonyms: def.synonyms.clone(),
                        example: def.example.clone(),
                    }),
                    None if self.parameter_was_defined(key, p) => {}
                    None => self.err(
                        pkey,
                        format!("parameter `{p}` is not defined"),
                        format!(
                            "define it under the assistant's `parameters:`{}",
                            if params.is_empty() {
                                String::new()
                            } else {
                                format!(", or use one of: {}", names(params.keys()))
                            }
                        ),
                    ),
                }
            }
        }

        let endpoint = self.endpoint(&format!("{key}.endpoint"), raw.endpoint);
        let explicit_pre = self.endpoint(
            &format!("{key}.pre_validation_endpoint"),
            raw.pre_validation_endpoint,
        );
        if explicit_pre.is_some() && !raw.pre_validation {
            self.err(
                format!("{key}.pre_validation_endpoint"),
                "pre_validation_endpoint is set but pre_validation is false, so it is never called",
                "set `pre_validation: true`, or remove `pre_validation_endpoint`",
            );
        }
        let pre_validation_endpoint = if raw.pre_validation {
            explicit_pre.or_else(|| endpoint.as_deref().map(default_pre_validation_endpoint))
        } else {
            None
        };

        let title = self.localized(raw.title, &name.replace('_', " "));
        let examples = self.examples(&format!("{key}.examples"), raw.examples);
        if self.errors.len() > before {
            return None;
        }
        Some(Tool {
            name: name.to_owned(),
            agent: raw.agent,
            description: raw.description.trim().to_owned(),
            title,
            parameters,
            confirmation: raw.confirmation,
            pre_validation: raw.pre_validation,
            max_attempts,
            on_attempts_exhausted: match raw.on_attempts_exhausted {
                RawExhausted::Clarify => OnAttemptsExhausted::Clarify,
                RawExhausted::Handoff => OnAttemptsExhausted::Handoff,
            },
            endpoint,
            pre_validation_endpoint,
            examples,
        })
    }

    /// A validated endpoint (trimmed), or `None` when absent or invalid (then an error is kept).
    fn endpoint(&mut self, key: &str, raw: Option<String>) -> Option<String> {
        let value = raw?.trim().to_owned();
        match endpoint_problem(&value) {
            None => Some(value),
            Some(problem) => {
                self.err(
                    key,
                    problem,
                    "give an absolute URL such as https://tools.example.com/tools/order_cancel, \
                     or a path such as /tools/order_cancel (joined to TURNSTILE_TOOLS_BASE_URL), \
                     without query or fragment",
                );
                None
            }
        }
    }

    /// `tool_http:`; an invalid value is reported and replaced by its default.
    fn tool_http(&mut self, raw: RawToolHttp) -> ToolHttpSettings {
        let defaults = ToolHttpSettings::default();
        let mut s = ToolHttpSettings {
            timeout_ms: raw.timeout_ms.unwrap_or(defaults.timeout_ms),
            max_attempts: raw.max_attempts.unwrap_or(defaults.max_attempts),
            initial_backoff_ms: raw
                .initial_backoff_ms
                .unwrap_or(defaults.initial_backoff_ms),
            max_backoff_ms: raw.max_backoff_ms.unwrap_or(defaults.max_backoff_ms),
        };
        if s.timeout_ms == 0 {
            self.err(
                "tool_http.timeout_ms",
                "timeout_ms must be at least 1",
                format!(
                    "give the per-attempt timeout in milliseconds, or remove it for {}",
                    defaults.timeout_ms
                ),
            );
            s.timeout_ms = defaults.timeout_ms;
        }
        if !(1..=MAX_TOOL_HTTP_ATTEMPTS).contains(&s.max_attempts) {
            self.err(
                "tool_http.max_attempts",
                format!(
                    "max_attempts {} is outside 1..={MAX_TOOL_HTTP_ATTEMPTS}",
                    s.max_attempts
                ),
                format!(
                    "use 1 (no retry) to {MAX_TOOL_HTTP_ATTEMPTS}, or remove it for {}",
                    defaults.max_attempts
                ),
            );
            s.max_attempts = defaults.max_attempts;
        }
        if s.initial_backoff_ms > s.max_backoff_ms {
            self.err(
                "tool_http.initial_backoff_ms",
                format!(
                    "initial_backoff_ms {} is greater than max_backoff_ms {}",
                    s.initial_backoff_ms, s.max_backoff_ms
                ),
                "make initial_backoff_ms less than or equal to max_backoff_ms",
            );
            s.initial_backoff_ms = defaults.initial_backoff_ms;
            s.max_backoff_ms = defaults.max_backoff_ms;
        }
        s
    }

    /// A parameter that exists but failed its own validation is not reported again per tool.
    fn parameter_was_defined(&self, tool_key: &str, param: &str) -> bool {
        let base = tool_key.split(".tools.").next().unwrap_or(tool_key);
        let prefix = format!("{base}.parameters.{param}");
        self.errors
            .iter()
            .any(|e| e.key == prefix || e.key.starts_with(&format!("{prefix}.")))
    }
}

fn names<'a>(it: impl Iterator<Item = &'a String>) -> String {
    it.map(String::as_str).collect::<Vec<_>>().join(", ")
}

fn valid_in_some_locale(kind: &ParameterKind, example: &str) -> bool {
    Locale::ALL
        .iter()
        .any(|&l| kind.validate(&Value::String(example.to_owned()), l).is_ok())
}

/// An example for replies when the file gives none (ids must give one; free text has none).
fn default_example(kind: &ParameterKind) -> Option<String> {
    let candidate = match kind {
        ParameterKind::Id { .. } | ParameterKind::Text { .. } => return None,
        ParameterKind::Integer { min, max } => {
            let v = match (min, max) {
                (Some(lo), _) if *lo > 0 => *lo,
                (_, Some(hi)) if *hi < 1 => *hi,
                _ => 1,
            };
            v.to_string()
        }
        ParameterKind::Number => "2.5".to_owned(),
        ParameterKind::Money => "71.99".to_owned(),
        ParameterKind::Date => "2025-12-31".to_owned(),
        ParameterKind::Enum { values } => values.first()?.value.clone(),
        ParameterKind::Cep => "01310-100".to_owned(),
    };
    valid_in_some_locale(kind, &candidate).then_some(candidate)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_messages_use_only_known_placeholders() {
        for l in Locale::ALL {
            for (key, text) in message_entries(&default_messages(l)) {
                assert!(unknown_placeholders(text).is_empty(), "{l} {key}: {text}");
                assert!(!text.trim().is_empty(), "{l} {key}");
            }
        }
        assert_eq!(
            default_messages(Locale::En).human_handoff,
            DEFAULT_HUMAN_HANDOFF_MESSAGE
        );
        assert_eq!(
            default_messages(Locale::En).end_session,
            DEFAULT_END_SESSION_MESSAGE
        );
    }

    #[test]
    fn default_examples_are_valid() {
        for kind in [
            ParameterKind::Integer {
                min: Some(1),
                max: Some(99999),
            },
            ParameterKind::Number,
            ParameterKind::Money,
            ParameterKind::Date,
            ParameterKind::Cep,
        ] {
            assert!(default_example(&kind).is_some(), "{kind:?}");
        }
    }
}
