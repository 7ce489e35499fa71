//! What an assistant offers: domain agents, tools, typed parameters, messages, tenant access.
//! Pure data the engine reads; `crate::config` builds it from YAML and validates it.

use std::collections::BTreeMap;

use crate::domain::locale::Locale;
use crate::domain::parameter::ParameterKind;
use crate::domain::wording::{ParameterWording, ToolWording};

/// A text in every supported locale.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Localized {
    pub en: String,
    pub pt_br: String,
}

impl Localized {
    pub fn get(&self, locale: Locale) -> &str {
        match locale {
            Locale::En => &self.en,
            Locale::PtBr => &self.pt_br,
        }
    }
}

/// One typed parameter of a tool.
#[derive(Debug, Clone)]
pub struct ParameterSpec {
    pub name: String,
    pub kind: ParameterKind,
    pub required: bool,
    pub label: Localized,
    /// Other names customers use for it; with the name and label they introduce a plain value
    /// (PR-1: `the number is 45`).
    pub synonyms: Vec<String>,
    /// A short example of a valid value, used when asking again after an invalid one.
    pub example: Option<String>,
    /// How replies name it and describe its expected form (RP-3, RP-4).
    pub wording: ParameterWording,
    /// Personal data: `turnstile export` masks its values (issue 26).
    pub sensitive: bool,
}

impl ParameterSpec {
    /// Every phrase that names it: its name (`_` as space), its labels in each locale, its
    /// synonyms — what introduces a plain value (PR-1).
    pub fn names(&self) -> impl Iterator<Item = String> + '_ {
        [
            self.name.replace('_', " "),
            self.label.en.clone(),
            self.label.pt_br.clone(),
        ]
        .into_iter()
        .chain(self.synonyms.iter().cloned())
    }
}

/// What happens after `max_attempts` invalid values (MG-4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnAttemptsExhausted {
    Clarify,
    Handoff,
}

/// Example utterances per locale, as configured (trimmed, none empty).
pub type Examples = BTreeMap<Locale, Vec<String>>;

/// Example utterances of the labels that are not tools, for an embeddings decision model
/// (SC-1): session control, the in-transaction cancel, and requests the assistant does not serve.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SessionExamples {
    pub human_handoff: Examples,
    pub end_session: Examples,
    pub cancel: Examples,
    pub out_of_scope: Examples,
}

/// One domain tool (a transaction runs exactly one).
#[derive(Debug, Clone)]
pub struct Tool {
    pub name: String,
    pub agent: String,
    pub description: String,
    pub title: Localized,
    pub parameters: Vec<ParameterSpec>,
    pub confirmation: bool,
    pub pre_validation: bool,
    pub max_attempts: u32,
    pub on_attempts_exhausted: OnAttemptsExhausted,
    /// Where the tool executes: an absolute http(s) URL, or a path joined to the runtime base URL.
    pub endpoint: Option<String>,
    /// Where the tool pre-validates (same forms as `endpoint`); set only when `pre_validation` is.
    pub pre_validation_endpoint: Option<String>,
    /// What customers say to ask for it, for an embeddings decision model.
    pub examples: Examples,
    /// PR-6: verbs of this tool's action (`cancel`, `trocar`) that count as affirmation words
    /// together with an affirmation while its confirmation is pending (`sure, change it`).
    pub action_verbs: Examples,
    /// PR-3a: questions customers ask about this tool, each answered without touching the
    /// transaction in progress.
    pub questions: Vec<Topic>,
    /// How replies name it, show its results and word its refusals (RP-1..RP-3).
    pub wording: ToolWording,
}

impl Tool {
    pub fn parameter(&self, name: &str) -> Option<&ParameterSpec> {
        self.parameters.iter().find(|p| p.name == name)
    }

    /// Whether `words` (a message's content words, `parameter::content_words`) hold every
    /// content word of one of this tool's action verbs (`track my order`, `contesta 79,80`).
    pub fn named_in(&self, words: &[String]) -> bool {
        self.action_verbs.values().flatten().any(|verb| {
            let verb = super::parameter::content_words(verb, &[]);
            !verb.is_empty() && verb.iter().all(|v| words.contains(v))
        })
    }

    /// PR-1: the typed parsers' clear reading of `text` for this tool's parameters, each
    /// introduced by its names as labels.
    pub fn read_clear_values(
        &self,
        text: &str,
        locale: Locale,
        options: super::parameter::ClearOptions<'_>,
    ) -> super::parameter::Extraction {
        let labels: Vec<Vec<String>> = self
            .parameters
            .iter()
            .map(|p| p.names().collect())
            .collect();
        let params: Vec<super::parameter::LabelledParameter<'_>> = self
            .parameters
            .iter()
            .zip(&labels)
            .map(|(p, labels)| super::parameter::LabelledParameter {
                name: &p.name,
                kind: &p.kind,
                labels,
            })
            .collect();
        super::parameter::extract_clear_with(&params, text, locale, options)
    }
}

/// Something the router recognises that is not a request (PR-3a, SC-9): a question about a
/// tool, or a conversational intent (a greeting, thanks, "what can you do?"). It is answered
/// with a fixed per-locale text and never touches a transaction.
#[derive(Debug, Clone, PartialEq)]
pub struct Topic {
    pub name: String,
    /// What customers say, per locale, for an embeddings decision model.
    pub examples: Examples,
    /// The reply, per locale.
    pub reply: Localized,
    /// A request no tool does, answered with guidance (`can I pay here?` → how to pay): the
    /// reply is the assistant's out-of-scope message, then `reply`.
    pub out_of_scope: bool,
    /// SC-9: a conversational intent that takes leave (`have a good day`, `tenha uma boa tarde`):
    /// its reply, then the session ends as on `END_SESSION` (SC-6). It counts only from the
    /// session-control threshold, not the lower topic one: an end must be meant.
    pub ends_session: bool,
}

/// A domain agent the router can pick.
#[derive(Debug, Clone)]
pub struct DomainAgent {
    pub name: String,
    pub description: String,
    /// How replies name what it helps with (`your orders` / `seus pedidos`); default: the name.
    pub phrase: Localized,
}

/// Which tools a tenant may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolAccess {
    All,
    Only(Vec<String>),
}

/// A tenant rule: `tenant` is an id or `*` (every tenant). An exact id wins over `*`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TenantRule {
    pub tenant: String,
    pub tools: ToolAccess,
}

/// Reply templates of one locale, in the language of `domain::reply::template`; which
/// placeholders each may use is `domain::reply::placeholders`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MessageSet {
    pub ask_parameters: String,
    pub invalid_value: String,
    pub attempts_exhausted: String,
    pub confirm: String,
    pub completed: String,
    pub failed: String,
    pub cancelled: String,
    pub declined: String,
    pub interrupted: String,
    pub expired: String,
    pub not_eligible: String,
    pub not_offered: String,
    pub out_of_scope: String,
    pub clarify: String,
    pub routed: String,
    pub nothing_to_confirm: String,
    pub nothing_to_cancel: String,
    pub human_handoff: String,
    pub handoff_pending: String,
    /// SC-11: the conversation is back with the assistant after a person had it.
    pub handback: String,
    /// A hold-on (`one sec, let me find the amount`): before the pending step asked again.
    pub hold_on: String,
    /// A refused person (`I don't want a human, just fix it`): the assistant carries on, before
    /// the pending step asked again.
    pub keeps_helping: String,
    pub end_session: String,
    /// LC-1: pre-validation could not be obtained (FAILED, `pre_validation_unavailable`).
    pub pre_validation_unavailable: String,
    /// SC-6, PR-3a: before the end-of-session text, the transaction that was not done.
    pub not_done: String,
    /// RP-1: after `completed` when the tool has no result template: the response's fields.
    pub result_fields: String,
}

/// A deployed assistant (`agent_id` of the conversation identity).
#[derive(Debug, Clone)]
pub struct Assistant {
    pub agent_id: String,
    pub tenants: Vec<TenantRule>,
    pub agents: BTreeMap<String, DomainAgent>,
    pub tools: BTreeMap<String, Tool>,
    pub messages: BTreeMap<Locale, MessageSet>,
    pub default_locale: Locale,
    /// Model profile names the router and the interpreter use.
    pub router_profile: String,
    pub interpreter_profile: String,
    pub session_examples: SessionExamples,
    /// SC-9: conversational intents with fixed replies (greeting, thanks, capabilities).
    pub conversation: Vec<Topic>,
    /// RP-3: the currency symbol of money values (`R$`).
    pub currency_symbol: String,
}

impl Assistant {
    /// The rule that applies to `tenant_id`, if this assistant serves it at all.
    pub fn tenant_rule(&self, tenant_id: &str) -> Option<&TenantRule> {
        self.tenants
            .iter()
            .find(|r| r.tenant == tenant_id)
            .or_else(|| self.tenants.iter().find(|r| r.tenant == "*"))
    }

    pub fn serves(&self, tenant_id: &str) -> bool {
        self.tenant_rule(tenant_id).is_some()
    }

    /// Whether `tool` is offered to `tenant_id` (LC-1: otherwise OUT_OF_SCOPE).
    pub fn offers(&self, tenant_id: &str, tool: &str) -> bool {
        match self.tenant_rule(tenant_id).map(|r| &r.tools) {
            Some(ToolAccess::All) => true,
            Some(ToolAccess::Only(list)) => list.iter().any(|t| t == tool),
            None => false,
        }
    }

    pub fn messages(&self, locale: Locale) -> &MessageSet {
        self.messages
            .get(&locale)
            .or_else(|| self.messages.get(&self.default_locale))
            .or_else(|| self.messages.values().next())
            .expect("config validation guarantees at least one message set")
    }
}

/// Every assistant this worker serves, by `agent_id`.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    pub assistants: BTreeMap<String, Assistant>,
}

impl Catalog {
    pub fn assistant(&self, agent_id: &str) -> Option<&Assistant> {
        self.assistants.get(agent_id)
    }
}

/// Session-control and engine settings, by the seed's environment names (SC-7, ST-6).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    pub enable_route_stickiness: bool,
    pub route_stickiness_llm_profile: String,
    pub route_stickiness_confidence_threshold: f64,
    pub route_stickiness_history_turns: usize,
    pub route_stickiness_max_tokens: u32,
    /// Overrides the English handoff text when set (`HUMAN_HANDOFF_MESSAGE`).
    pub human_handoff_message: Option<String>,
    /// Overrides the English end-of-session text when set (`END_SESSION_MESSAGE`).
    pub end_session_message: Option<String>,
    pub router_confidence_threshold: f64,
    pub interpreter_confidence_threshold: f64,
    /// A router answer that is a configured question or conversational intent (PR-3a, SC-9)
    /// counts from this confidence: it only answers, never touches a transaction, so it needs
    /// less certainty than a route (`TOPIC_CONFIDENCE_THRESHOLD`, default 0.60).
    pub topic_confidence_threshold: f64,
    pub session_ttl_ms: i64,
    /// Start the router while the classifier runs (latency over cost); off by default.
    pub router_speculative: bool,
    /// The configuration version decision records carry (issue 26): a content hash of the
    /// agents and profiles files, set where they are read; empty when unknown.
    pub config_version: String,
}

pub const DEFAULT_HUMAN_HANDOFF_MESSAGE: &str = "I will transfer your request to a person.";
pub const DEFAULT_END_SESSION_MESSAGE: &str = "The session has ended. Thank you for contacting us.";

impl Default for Settings {
    fn default() -> Self {
        Settings {
            enable_route_stickiness: true,
            route_stickiness_llm_profile: "route_continuity".into(),
            route_stickiness_confidence_threshold: 0.90,
            route_stickiness_history_turns: 2,
            route_stickiness_max_tokens: 80,
            human_handoff_message: None,
            end_session_message: None,
            router_confidence_threshold: 0.90,
            interpreter_confidence_threshold: 0.80,
            topic_confidence_threshold: 0.60,
            session_ttl_ms: 30 * 60 * 1000,
            router_speculative: false,
            config_version: String::new(),
        }
    }
}
