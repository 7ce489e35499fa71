//! Validation rules of the agents file: names, locales, examples, endpoints, `tool_http:`.

use serde_json::Value;

use crate::config::tool_http::ToolHttpSettings;
use std::collections::BTreeMap;

use crate::domain::catalog::{Examples, Localized, Topic};
use crate::domain::locale::Locale;
use crate::domain::parameter::ParameterKind;

use super::defaults::MAX_TOOL_HTTP_ATTEMPTS;
use super::load::Validator;
use super::schema::{RawExamples, RawLocalized, RawToolHttp, RawTopic};

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

fn is_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphanumeric())
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-' || c == '.')
}

impl Validator<'_> {
    pub(super) fn check_name(&mut self, key: &str, what: &str, name: &str) {
        if !is_name(name) {
            self.err(
                key,
                format!("`{name}` is not a valid {what} name"),
                "use letters, digits, `_`, `-` and `.` only, starting with a letter or digit",
            );
        }
    }

    pub(super) fn locale(&mut self, key: &str, tag: &str) -> Option<Locale> {
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

    /// Example utterances, trimmed; an empty one is an error (it would match everything alike).
    pub(super) fn examples(&mut self, key: &str, raw: Option<RawExamples>) -> Examples {
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

    /// PR-3a questions (`text` = `answer`) or SC-9 conversational intents (`text` = `reply`):
    /// each needs examples and its text; the other text key is an error naming the right one.
    pub(super) fn topics(
        &mut self,
        key: &str,
        raw: BTreeMap<String, RawTopic>,
        text: &str,
    ) -> Vec<Topic> {
        let mut out = Vec::new();
        for (name, topic) in raw {
            let tkey = format!("{key}.{name}");
            let examples = self.examples(&format!("{tkey}.examples"), topic.examples);
            if examples.is_empty() {
                self.err(
                    format!("{tkey}.examples"),
                    "no example utterance: nothing could ever be recognised as this",
                    "add `examples: {en: [...], pt-BR: [...]}` with what customers say",
                );
            }
            let out_of_scope = topic.out_of_scope;
            let ends_session = topic.ends_session;
            if ends_session && (text == "answer" || out_of_scope) {
                let why = if out_of_scope {
                    "a topic cannot both decline a request and end the session"
                } else {
                    "only a conversational intent can end the session; a question about a tool keeps it"
                };
                self.err(
                    format!("{tkey}.ends_session"),
                    why,
                    "remove `ends_session`, or move the farewell under the assistant's `conversation`",
                );
            }
            let (given, other) = if text == "answer" {
                (topic.answer, topic.reply)
            } else {
                (topic.reply, topic.answer)
            };
            if other.is_some() {
                let wrong = if text == "answer" { "reply" } else { "answer" };
                self.err(
                    format!("{tkey}.{wrong}"),
                    format!("`{wrong}` is not a key here"),
                    format!("rename it to `{text}`"),
                );
            }
            if given.is_none() {
                self.err(
                    format!("{tkey}.{text}"),
                    "no text to reply with",
                    format!("add `{text}: {{en: ..., pt-BR: ...}}`"),
                );
            }
            let reply = self.localized(given, "");
            out.push(Topic {
                name,
                examples,
                reply,
                out_of_scope,
                ends_session,
            });
        }
        out
    }

    /// A tenant rule may name a tool that exists but failed validation; that is not a second error.
    pub(super) fn tool_was_defined(&self, base: &str, tool: &str) -> bool {
        let prefix = format!("{base}.tools.{tool}");
        self.errors
            .iter()
            .any(|e| e.key == prefix || e.key.starts_with(&format!("{prefix}.")))
    }

    pub(super) fn localized(&mut self, raw: Option<RawLocalized>, fallback: &str) -> Localized {
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

    /// A validated endpoint (trimmed), or `None` when absent or invalid (then an error is kept).
    pub(super) fn endpoint(&mut self, key: &str, raw: Option<String>) -> Option<String> {
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
    pub(super) fn tool_http(&mut self, raw: RawToolHttp) -> ToolHttpSettings {
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
    pub(super) fn parameter_was_defined(&self, tool_key: &str, param: &str) -> bool {
        let base = tool_key.split(".tools.").next().unwrap_or(tool_key);
        let prefix = format!("{base}.parameters.{param}");
        self.errors
            .iter()
            .any(|e| e.key == prefix || e.key.starts_with(&format!("{prefix}.")))
    }
}

pub(super) fn names<'a>(it: impl Iterator<Item = &'a String>) -> String {
    it.map(String::as_str).collect::<Vec<_>>().join(", ")
}

pub(super) fn valid_in_some_locale(kind: &ParameterKind, example: &str) -> bool {
    Locale::ALL
        .iter()
        .any(|&l| kind.validate(&Value::String(example.to_owned()), l).is_ok())
}
