//! Loading an agents file: read, deserialize, validate, and report every problem with its file,
//! key and fix.

use std::path::Path;

use crate::config::tool_http::ToolHttpSettings;
use crate::config::{parse_yaml, read_file, ConfigError, ConfigErrors};
use crate::domain::catalog::Catalog;

use super::schema::RawFile;

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

pub(super) struct Validator<'f> {
    pub(super) file: &'f str,
    pub(super) errors: Vec<ConfigError>,
}

impl Validator<'_> {
    pub(super) fn err(
        &mut self,
        key: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) {
        self.errors
            .push(ConfigError::new(self.file, key, problem, fix));
    }
}
