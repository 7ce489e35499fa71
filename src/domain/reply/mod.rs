//! What the customer reads (RP-1..RP-4, SC-6, PR-3a): every reply sentence the engine sends is
//! built here, from the assistant's message templates (`template`), the phrases its tools and
//! parameters configure (`domain::wording`), values in the locale's format (`format`), tool
//! results (`result`) and the expected form of an invalid value (`expected`). Pure functions
//! of the catalog and their arguments, so the engine and the reviewed snapshot of every reply
//! (`tests/replies.rs`) render the same text.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::domain::catalog::{Assistant, MessageSet, ParameterSpec, Tool};
use crate::domain::locale::Locale;
use crate::domain::parameter::{InvalidReason, ParameterKind};
use crate::domain::wording::Gender;

mod expected;
pub mod format;
mod result;
pub mod template;

pub use result::ResultRendering;
use template::{render, Resolve};

/// A value the customer typed is quoted in a reply up to this many characters.
const QUOTED_VALUE_MAX_CHARS: usize = 60;

/// The placeholders each message key may use; any other is a configuration error.
/// `{Tool}`, `{Param}`: the phrase with a capital first letter (to start a sentence).
pub fn placeholders(key: &str) -> &'static [&'static str] {
    const TOOL: &[&str] = &["tool", "Tool", "tool_title"];
    match key {
        "ask_parameters" => &["tool", "Tool", "tool_title", "labels", "params"],
        "invalid_value" | "attempts_exhausted" => {
            &["label", "param", "Param", "value", "example", "expected"]
        }
        "confirm" => &["tool", "Tool", "tool_title", "arguments"],
        "result_fields" => &["tool", "Tool", "tool_title", "fields"],
        "failed" | "not_eligible" => &["tool", "Tool", "tool_title", "reason"],
        "completed"
        | "cancelled"
        | "declined"
        | "interrupted"
        | "expired"
        | "not_done"
        | "not_offered"
        | "pre_validation_unavailable" => TOOL,
        "routed" => &["agent", "Agent"],
        _ => &[],
    }
}

/// Placeholders that stand for a phrase carrying its own article (`the address change`, `o
/// número do pedido`): the configuration refuses an article right before them.
pub const PHRASE_PLACEHOLDERS: &[&str] = &["tool", "Tool", "param", "Param", "params"];

/// Placeholders that may have no value (a reason in another language is not shown, RP-2; a
/// free-text parameter has no example): they must stand inside an optional `[...]` segment.
pub const MAY_BE_ABSENT: &[&str] = &["reason", "example"];

/// The sentences about a tool that need nothing but its phrase.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum About {
    Completed,
    Cancelled,
    Declined,
    Interrupted,
    Expired,
    NotDone,
    NotOffered,
    PreValidationUnavailable,
}

/// Renders the replies of one assistant in one locale.
#[derive(Debug, Clone, Copy)]
pub struct Replies<'a> {
    assistant: &'a Assistant,
    locale: Locale,
    msgs: &'a MessageSet,
}

impl<'a> Replies<'a> {
    pub fn new(assistant: &'a Assistant, locale: Locale) -> Replies<'a> {
        Replies {
            assistant,
            locale,
            msgs: assistant.messages(locale),
        }
    }

    pub fn locale(&self) -> Locale {
        self.locale
    }

    pub fn messages(&self) -> &'a MessageSet {
        self.msgs
    }

    /// A sentence about `tool` that names it (SC-6, PR-3a: cancel, interruption, end).
    pub fn about(&self, which: About, tool: &Tool) -> String {
        let m = self.msgs;
        let template = match which {
            About::Completed => &m.completed,
            About::Cancelled => &m.cancelled,
            About::Declined => &m.declined,
            About::Interrupted => &m.interrupted,
            About::Expired => &m.expired,
            About::NotDone => &m.not_done,
            About::NotOffered => &m.not_offered,
            About::PreValidationUnavailable => &m.pre_validation_unavailable,
        };
        render(template, &self.tool_vars(tool)).text
    }

    /// Asks for the missing parameters of `tool`, named by their phrases (RP-3).
    pub fn ask_parameters(&self, tool: &Tool, missing: &[String]) -> String {
        let specs: Vec<Option<&ParameterSpec>> =
            missing.iter().map(|m| tool.parameter(m)).collect();
        let labels: Vec<String> = specs
            .iter()
            .zip(missing)
            .map(|(p, m)| p.map_or(m.clone(), |p| p.label.get(self.locale).to_owned()))
            .collect();
        let phrases: Vec<String> = specs
            .iter()
            .zip(missing)
            .map(|(p, m)| p.map_or(m.clone(), |p| p.wording.phrase.get(self.locale).to_owned()))
            .collect();
        let mut vars = self.tool_vars(tool);
        vars.set("labels", format::join_and(&labels, self.locale));
        vars.set("params", format::join_and(&phrases, self.locale));
        render(&self.msgs.ask_parameters, &vars).text
    }

    /// The confirmation question with the collected values in the locale's format (RP-3).
    pub fn confirm(&self, tool: &Tool, arguments: &BTreeMap<String, Value>) -> String {
        let shown: Vec<String> = tool
            .parameters
            .iter()
            .filter_map(|p| {
                arguments
                    .get(&p.name)
                    .map(|v| format!("{}: {}", p.label.get(self.locale), self.argument(p, v)))
            })
            .collect();
        let mut vars = self.tool_vars(tool);
        if !shown.is_empty() {
            vars.set("arguments", shown.join(", "));
        }
        render(&self.msgs.confirm, &vars).text
    }

    /// RP-1: the completed tool's result, and how it was rendered (for the metric).
    pub fn completed(
        &self,
        tool: &Tool,
        arguments: &BTreeMap<String, Value>,
        data: &Value,
    ) -> (String, ResultRendering) {
        result::completed(self, tool, arguments, data)
    }

    /// RP-2: a failed execution; the service's words only in the reply's locale.
    pub fn failed(&self, tool: &Tool, data: &Value) -> String {
        let text = |k: &str| data.get(k).and_then(Value::as_str);
        let code = text("code");
        let said = text("error").or_else(|| text("message"));
        self.with_reason(&self.msgs.failed, tool, code, said)
    }

    /// RP-2: a pre-validation refusal; its reason only in the reply's locale.
    pub fn not_eligible(&self, tool: &Tool, reason: Option<&str>, code: Option<&str>) -> String {
        self.with_reason(&self.msgs.not_eligible, tool, code, reason)
    }

    /// RP-4: what is wrong with `raw` and the parameter's expected form.
    pub fn invalid_value(&self, tool: &Tool, name: &str, raw: &str, why: InvalidReason) -> String {
        self.about_value(&self.msgs.invalid_value, tool, name, raw, why)
    }

    /// MG-4 after `max_attempts`: the expected form again.
    pub fn attempts_exhausted(&self, tool: &Tool, name: &str, why: InvalidReason) -> String {
        self.about_value(&self.msgs.attempts_exhausted, tool, name, "", why)
    }

    /// The router picked an agent but no tool: what that agent helps with.
    pub fn routed(&self, agent: &str) -> String {
        let phrase = self
            .assistant
            .agents
            .get(agent)
            .map_or(agent, |a| a.phrase.get(self.locale));
        let mut vars = Vars::default();
        vars.set("agent", phrase.to_owned());
        render(&self.msgs.routed, &vars).text
    }

    /// A collected value as the customer reads it: money and dates in the locale's format,
    /// free text quoted.
    pub fn argument(&self, p: &ParameterSpec, v: &Value) -> String {
        let Some(raw) = format::scalar(v, self.locale) else {
            return v.to_string();
        };
        match &p.kind {
            ParameterKind::Money => {
                format::money(&raw, self.locale, self.currency()).unwrap_or(raw)
            }
            ParameterKind::Date => format::date(&raw, self.locale).unwrap_or(raw),
            ParameterKind::Number => format::number(&raw, self.locale),
            ParameterKind::Text { .. } => format::quoted(&raw, QUOTED_VALUE_MAX_CHARS),
            _ => raw,
        }
    }

    fn currency(&self) -> &'a str {
        &self.assistant.currency_symbol
    }

    fn tool_vars(&self, tool: &Tool) -> Vars {
        let mut vars = Vars::default();
        vars.set("tool", tool.wording.phrase.get(self.locale).to_owned());
        vars.set("tool_title", tool.title.get(self.locale).to_owned());
        vars.set_gender("tool", tool.wording.phrase.gender);
        vars
    }

    fn with_reason(
        &self,
        template: &str,
        tool: &Tool,
        code: Option<&str>,
        said: Option<&str>,
    ) -> String {
        let mut vars = self.tool_vars(tool);
        if let Some(reason) = result::reason_in_locale(tool, self.locale, code, said) {
            vars.set("reason", reason);
        }
        render(template, &vars).text
    }

    fn about_value(
        &self,
        template: &str,
        tool: &Tool,
        name: &str,
        raw: &str,
        why: InvalidReason,
    ) -> String {
        let mut vars = Vars::default();
        vars.set("value", format::cut(raw, QUOTED_VALUE_MAX_CHARS));
        match tool.parameter(name) {
            Some(p) => {
                vars.set("label", p.label.get(self.locale).to_owned());
                vars.set("param", p.wording.phrase.get(self.locale).to_owned());
                vars.set_gender("param", p.wording.phrase.gender);
                if let Some(example) = expected::example(p, self.locale, self.currency()) {
                    vars.set("example", example);
                }
                vars.set(
                    "expected",
                    expected::clause(p, why, self.locale, self.currency()),
                );
            }
            None => {
                vars.set("label", name.replace('_', " "));
                vars.set("param", name.replace('_', " "));
                vars.set("expected", String::new());
            }
        }
        render(template, &vars).text
    }
}

/// Named values and genders of one message; `{Name}` is `{name}` with a capital letter.
#[derive(Debug, Default)]
struct Vars {
    values: Vec<(&'static str, String)>,
    genders: Vec<(&'static str, Gender)>,
}

impl Vars {
    fn set(&mut self, name: &'static str, value: String) {
        self.values.push((name, value));
    }

    fn set_gender(&mut self, name: &'static str, gender: Gender) {
        self.genders.push((name, gender));
    }

    fn get(&self, name: &str) -> Option<&str> {
        self.values
            .iter()
            .rev()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| v.as_str())
    }
}

impl Resolve for Vars {
    fn value(&self, name: &str, _format: Option<&str>) -> Option<String> {
        if let Some(v) = self.get(name) {
            return Some(v.to_owned());
        }
        let lower = lower_first(name)?;
        self.get(&lower).map(format::capitalised)
    }

    fn gender(&self, name: &str) -> Option<Gender> {
        let lower = lower_first(name).unwrap_or_else(|| name.to_owned());
        self.genders
            .iter()
            .find(|(k, _)| *k == name || *k == lower)
            .map(|(_, g)| *g)
    }
}

/// `Tool` → `tool`; `None` when the name does not start with a capital letter.
fn lower_first(name: &str) -> Option<String> {
    let mut chars = name.chars();
    let first = chars.next()?;
    first
        .is_uppercase()
        .then(|| first.to_lowercase().chain(chars).collect())
}
