//! YAML configuration: assistants and tools ([`agents`]), session-control settings by the seed's
//! environment names ([`settings`], SC-7), model profiles ([`profiles`]), the profile and API of each skill, resolved once
//! ([`skills`]), and the tool webhooks'
//! transport ([`tool_http`]). Every error names the file, the key path, the problem and the fix;
//! a file's semantic errors are all reported at once.

pub mod agents;
pub mod profiles;
pub mod settings;
pub mod skills;
pub mod tool_http;

use std::fmt;

use serde::de::DeserializeOwned;

/// One configuration problem: where (file + key path), what, and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{file}: {key}: {problem} (fix: {fix})")]
pub struct ConfigError {
    pub file: String,
    /// Dotted key path, e.g. `assistants.retail-bot.tools.retail_order_cancel.parameters[0]`.
    pub key: String,
    pub problem: String,
    pub fix: String,
}

impl ConfigError {
    pub fn new(
        file: impl Into<String>,
        key: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: file.into(),
            key: key.into(),
            problem: one_line(&problem.into()),
            fix: one_line(&fix.into()),
        }
    }
}

/// Joins a multi-line text (a regex error draws a caret under the pattern) into one line, so that
/// [`ConfigErrors`] prints one error per line.
fn one_line(text: &str) -> String {
    if !text.contains('\n') {
        return text.to_owned();
    }
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.chars().all(|c| c == '^' || c == '~'))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Every problem found in one file (or the environment), in the order found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigErrors(pub Vec<ConfigError>);

impl ConfigErrors {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, ConfigError> {
        self.0.iter()
    }

    /// `Ok(value)` when nothing was collected, else every collected error.
    pub(crate) fn into_result<T>(self, value: T) -> Result<T, ConfigErrors> {
        if self.0.is_empty() {
            Ok(value)
        } else {
            Err(self)
        }
    }
}

impl fmt::Display for ConfigErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigErrors {}

impl From<ConfigError> for ConfigErrors {
    fn from(e: ConfigError) -> Self {
        ConfigErrors(vec![e])
    }
}

impl IntoIterator for ConfigErrors {
    type Item = ConfigError;
    type IntoIter = std::vec::IntoIter<ConfigError>;
    fn into_iter(self) -> Self::IntoIter {
        self.0.into_iter()
    }
}

/// Reads a configuration file; an unreadable file is a [`ConfigError`] naming it.
pub(crate) fn read_file(path: &std::path::Path) -> Result<String, ConfigErrors> {
    std::fs::read_to_string(path).map_err(|e| {
        ConfigError::new(
            path.display().to_string(),
            ".",
            format!("cannot read the file: {e}"),
            "check the path and the file's permissions",
        )
        .into()
    })
}

/// Deserializes YAML into the raw (structural) shape `T`. The one structural error serde reports
/// names the key path (via `serde_path_to_error`) and, when known, the line and column.
pub(crate) fn parse_yaml<T: DeserializeOwned>(
    yaml: &str,
    file_label: &str,
) -> Result<T, ConfigErrors> {
    let de = serde_yaml_ng::Deserializer::from_str(yaml);
    serde_path_to_error::deserialize(de).map_err(|err| {
        let path = err.path().to_string();
        let inner = err.into_inner();
        let mut message = inner.to_string();
        // serde_yaml_ng prefixes messages with its own notion of the path; ours is in `key`.
        if let Some((head, rest)) = message.split_once(": ") {
            if !head.is_empty() && !head.contains(' ') && path.starts_with(head) {
                message = rest.to_owned();
            }
        }
        if let Some(loc) = inner.location() {
            let suffix = format!(" at line {} column {}", loc.line(), loc.column());
            if !message.ends_with(&suffix) {
                message.push_str(&suffix);
            }
        }
        // `?` is serde_path_to_error's unknown segment (a YAML syntax error before any key).
        let key = if path.is_empty() || path == "?" {
            ".".to_owned()
        } else {
            path
        };
        let fix = structural_fix(&message);
        ConfigError::new(file_label, key, message, fix).into()
    })
}

fn structural_fix(message: &str) -> String {
    if message.contains("unknown field") {
        "remove or rename the key; the valid keys are listed in the message".into()
    } else if message.contains("missing field") {
        "add the missing key".into()
    } else if message.contains("unknown variant") {
        "use one of the values listed in the message".into()
    } else if message.contains("expected a string") || message.contains("expected a text") {
        "give the key a text value; quote words YAML reads as booleans or numbers, e.g. \"yes\""
            .into()
    } else if message.contains("invalid type") || message.contains("invalid value") {
        "give the key a value of the expected type, as the message says".into()
    } else if message.contains("duplicate") {
        "keep only one entry with that key".into()
    } else {
        "correct the YAML at the position shown".into()
    }
}

/// Placeholders a message template may use (each key allows a subset:
/// [`crate::domain::reply::placeholders`]).
pub const PLACEHOLDERS: &[&str] = &[
    "label",
    "labels",
    "value",
    "example",
    "expected",
    "tool",
    "Tool",
    "tool_title",
    "param",
    "Param",
    "params",
    "arguments",
    "fields",
    "reason",
    "agent",
    "Agent",
];

/// The placeholders (`{name}`) used in `template` that are not in [`PLACEHOLDERS`] (a template
/// that does not parse gives its error text).
#[cfg(test)]
pub(crate) fn unknown_placeholders(template: &str) -> Vec<String> {
    match crate::domain::reply::template::Template::parse(template) {
        Ok(t) => t
            .slots()
            .into_iter()
            .map(|(slot, _)| slot.name.clone())
            .filter(|name| !PLACEHOLDERS.contains(&name.as_str()))
            .collect(),
        Err(e) => vec![e],
    }
}
