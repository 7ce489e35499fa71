//! `OpenAiCompatibleModel`: the classifier, router and interpreter over an OpenAI-compatible
//! `POST {base_url}/chat/completions`.
//!
//! Both providers speak the same wire protocol:
//!
//! - `oci_openai` — OCI Generative AI's OpenAI-compatible endpoint. Base URL
//!   `https://inference.generativeai.<region>.oci.oraclecloud.com/openai/v1` (older
//!   deployments: `.../20231130/actions/v1`); the key is an OCI Generative AI API key (not an
//!   IAM signing key), sent as `Authorization: Bearer <key>` and valid only in its own region.
//!   IAM request signing is not implemented: put a signing gateway in front and point `base_url`
//!   (or `--model-base-url`) at it. Headers OCI may need (e.g. `opc-compartment-id`) go in the
//!   profile's `headers`.
//! - `openai_compatible` — any other endpoint (vLLM, a gateway, OpenAI itself).
//!
//! Each call is one attempt bounded by the profile's `timeout_seconds` for the whole exchange
//! (connect, send, read). No retries: the classifier is on every turn's hot path and a failure
//! already has a safe answer (SC-2: fall back to the router); the router and interpreter fail to a
//! clarification (PR-5), which beats making the customer wait for a second attempt.
//!
//! Failures map to [`ModelFailure`]: the time limit → `Timeout`; no connection, a non-2xx status
//! or a cut-off body → `Error`; a body that is not a chat completion, no
//! `choices[0].message.content`, or content holding no valid JSON object → `InvalidJson`.
//!
//! The API key is read once, at construction, from the variable the profile names
//! (`api_key_env`). It is kept only inside a sensitive header value: no `Debug`, error, log line
//! or metric label shows it.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use metrics::{counter, histogram};
use reqwest::header::{HeaderMap, HeaderName, HeaderValue, ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;

use crate::config::profiles::{ModelProfile, Profiles, Provider};
use crate::domain::catalog::{Assistant, Catalog, Settings};
use crate::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, ModelFailure, RouterDecision, Skill,
};
use crate::domain::effect::{ClassifierRequest, InterpreterRequest, RouterRequest};
use crate::model::output::{
    extract_json_object, parse_classifier, parse_interpreter, parse_router,
};
use crate::model::prompt::{self, ChatMessage};
use crate::ports::{CallContext, DecisionModel};
use crate::telemetry::{MODEL_REQUESTS_TOTAL, MODEL_REQUEST_DURATION_SECONDS};

/// Which component is calling (`classifier` | `router` | `interpreter`).
pub const SKILL_HEADER: &str = "X-Turnstile-Skill";
/// The turn the call belongs to, for correlating the model's logs with ours.
pub const TURN_ID_HEADER: &str = "X-Turnstile-Turn-Id";
/// Marks a router call started speculatively while the classifier runs (`ROUTER_SPECULATIVE`).
pub const SPECULATIVE_HEADER: &str = "X-Turnstile-Speculative";
/// Path appended to a profile's base URL.
pub const CHAT_COMPLETIONS_PATH: &str = "/chat/completions";
/// Bytes of a response read at most: a runaway endpoint cannot exhaust memory.
pub const MAX_RESPONSE_BYTES: usize = 1024 * 1024;

/// Why the adapter cannot be built; every message names the profile and the fix, never a key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelConfigError {
    #[error("profile `{profile}` (named by {used_by}) is not defined in the profiles file (fix: define it, or name one of: {known})")]
    UnknownProfile {
        profile: String,
        used_by: String,
        known: String,
    },
    #[error("profile `{profile}`: the API key variable {var} is not set (fix: export {var} with the key)")]
    MissingApiKey { profile: String, var: String },
    #[error("profile `{profile}`: the value of {var} cannot be sent in an HTTP header (fix: check it holds only the key, on one line)")]
    InvalidApiKey { profile: String, var: String },
    #[error("profile `{profile}`: header `{header}` is not a valid HTTP header (fix: use a token name and a one-line value)")]
    InvalidHeader { profile: String, header: String },
    #[error("profile `{profile}` has no base_url (fix: set base_url in the profiles file, or pass a base URL override)")]
    MissingBaseUrl { profile: String },
    #[error("profile `{profile}`: base URL `{url}` is invalid: {reason} (fix: use an http(s) URL such as https://inference.generativeai.<region>.oci.oraclecloud.com/openai/v1)")]
    InvalidBaseUrl {
        profile: String,
        url: String,
        reason: String,
    },
    #[error("cannot build the HTTP client: {0}")]
    Client(String),
}

/// Where a profile's calls go, or why they cannot go anywhere.
#[derive(Clone)]
enum Target {
    /// Parsed once, when the profile is read, not on every call (it is on every turn's path).
    Url(reqwest::Url),
    Missing,
    Invalid {
        url: String,
        reason: String,
    },
}

fn resolve_target(base: Option<&str>) -> Target {
    let Some(base) = base.map(str::trim).filter(|b| !b.is_empty()) else {
        return Target::Missing;
    };
    let invalid = |reason: String| Target::Invalid {
        url: base.to_owned(),
        reason,
    };
    match reqwest::Url::parse(base) {
        Ok(u) if !matches!(u.scheme(), "http" | "https") => {
            invalid(format!("scheme `{}` is not http or https", u.scheme()))
        }
        Ok(u) if u.host_str().is_none_or(str::is_empty) => invalid("it has no host".into()),
        Ok(_) => {
            let full = format!("{}{CHAT_COMPLETIONS_PATH}", base.trim_end_matches('/'));
            match reqwest::Url::parse(&full) {
                Ok(u) => Target::Url(u),
                Err(e) => invalid(e.to_string()),
            }
        }
        Err(e) => invalid(e.to_string()),
    }
}

/// One resolved profile: its settings, target URL, headers and (redacted) credentials.
#[derive(Clone)]
struct Endpoint {
    profile: ModelProfile,
    target: Target,
    /// `Bearer <key>`, marked sensitive.
    auth: Option<HeaderValue>,
    headers: HeaderMap,
    timeout: Duration,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let target = match &self.target {
            Target::Url(u) => u.to_string(),
            Target::Missing => "<no base_url>".into(),
            Target::Invalid { url, .. } => format!("<invalid: {url}>"),
        };
        f.debug_struct("Endpoint")
            .field("profile", &self.profile.name)
            .field("provider", &self.profile.provider.as_str())
            .field("model", &self.profile.model)
            .field("url", &target)
            .field("api_key_env", &self.profile.api_key_env)
            .field("api_key", &self.auth.as_ref().map(|_| "<redacted>"))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("timeout", &self.timeout)
            .finish()
    }
}

impl Endpoint {
    fn new(
        profile: &ModelProfile,
        env: &impl Fn(&str) -> Option<String>,
    ) -> Result<Endpoint, ModelConfigError> {
        let auth = match &profile.api_key_env {
            None => None,
            Some(var) => {
                let key = env(var)
                    .map(|k| k.trim().to_owned())
                    .filter(|k| !k.is_empty())
                    .ok_or_else(|| ModelConfigError::MissingApiKey {
                        profile: profile.name.clone(),
                        var: var.clone(),
                    })?;
                let mut value = HeaderValue::from_str(&format!("Bearer {key}")).map_err(|_| {
                    ModelConfigError::InvalidApiKey {
                        profile: profile.name.clone(),
                        var: var.clone(),
                    }
                })?;
                value.set_sensitive(true);
                Some(value)
            }
        };
        let mut headers = HeaderMap::new();
        for (name, value) in &profile.headers {
            let invalid = || ModelConfigError::InvalidHeader {
                profile: profile.name.clone(),
                header: name.clone(),
            };
            let name = HeaderName::from_bytes(name.trim().as_bytes()).map_err(|_| invalid())?;
            let value = HeaderValue::from_str(value).map_err(|_| invalid())?;
            headers.insert(name, value);
        }
        // Profiles validation guarantees a positive finite number; clamp the rest.
        let timeout = Duration::try_from_secs_f64(profile.timeout_seconds)
            .unwrap_or(Duration::from_secs(3600))
            .max(Duration::from_millis(1));
        Ok(Endpoint {
            profile: profile.clone(),
            target: resolve_target(profile.base_url.as_deref()),
            auth,
            headers,
            timeout,
        })
    }

    fn check(&self) -> Result<(), ModelConfigError> {
        match &self.target {
            Target::Url(_) => Ok(()),
            Target::Missing => Err(ModelConfigError::MissingBaseUrl {
                profile: self.profile.name.clone(),
            }),
            Target::Invalid { url, reason } => Err(ModelConfigError::InvalidBaseUrl {
                profile: self.profile.name.clone(),
                url: url.clone(),
                reason: reason.clone(),
            }),
        }
    }
}

/// One model call as it happened: for the `classify` command and diagnostics.
#[derive(Debug, Clone, PartialEq)]
pub struct RawAnswer<T> {
    pub skill: Skill,
    pub profile: String,
    /// The model's `choices[0].message.content`, when one came back.
    pub content: Option<String>,
    pub answer: ModelAnswer<T>,
    pub latency: Duration,
    /// The HTTP status, when a response came back.
    pub status: Option<u16>,
    /// Why the call failed, in one line (never the key); `None` when a decision was parsed.
    pub cause: Option<String>,
}

/// A failed exchange: the failure class and a one-line cause.
struct Failed {
    failure: ModelFailure,
    cause: String,
    status: Option<u16>,
    content: Option<String>,
}

impl Failed {
    fn error(cause: String) -> Failed {
        Failed {
            failure: ModelFailure::Error,
            cause,
            status: None,
            content: None,
        }
    }

    fn invalid(cause: String, status: u16) -> Failed {
        Failed {
            failure: ModelFailure::InvalidJson,
            cause,
            status: Some(status),
            content: None,
        }
    }
}

fn http_client(max_idle: usize) -> Result<reqwest::Client, ModelConfigError> {
    reqwest::Client::builder()
        // A model endpoint never redirects legitimately; following one would re-send the body.
        .redirect(reqwest::redirect::Policy::none())
        // One attempt per call (see the module doc): reqwest's own retry layer would also
        // clone every request in case it might replay it.
        .retry(reqwest::retry::never().max_retries_per_request(0))
        .pool_idle_timeout(Duration::from_secs(60))
        .pool_max_idle_per_host(max_idle)
        .build()
        .map_err(|e| ModelConfigError::Client(e.to_string()))
}

#[derive(Clone)]
struct Inner {
    client: reqwest::Client,
    catalog: Arc<Catalog>,
    settings: Arc<Settings>,
    /// `ROUTE_STICKINESS_LLM_PROFILE`; `None` only when stickiness is off and it is undefined.
    classifier: Option<Endpoint>,
    /// Router and interpreter profiles of every assistant, by profile name.
    endpoints: BTreeMap<String, Endpoint>,
    /// Calls allowed at once (`with_max_concurrency`); `None` = unbounded.
    slots: Option<Arc<tokio::sync::Semaphore>>,
}

/// The model adapter over an OpenAI-compatible chat-completions API. Cheap to clone; one pooled
/// HTTP client is shared by every clone and skill.
#[derive(Clone)]
pub struct OpenAiCompatibleModel {
    inner: Arc<Inner>,
}

impl fmt::Debug for OpenAiCompatibleModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiCompatibleModel")
            .field("classifier", &self.inner.classifier)
            .field("endpoints", &self.inner.endpoints)
            .finish_non_exhaustive()
    }
}

impl OpenAiCompatibleModel {
    /// Resolves the classifier profile (`ROUTE_STICKINESS_LLM_PROFILE`) and every assistant's
    /// router and interpreter profiles, reading each API key once through `env`.
    pub fn new(
        catalog: Arc<Catalog>,
        settings: Arc<Settings>,
        profiles: Arc<Profiles>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ModelConfigError> {
        let known = || {
            profiles
                .profiles
                .keys()
                .cloned()
                .collect::<Vec<_>>()
                .join(", ")
        };
        let classifier_name = &settings.route_stickiness_llm_profile;
        let classifier = match profiles.get(classifier_name) {
            // Served by `ConfiguredModel`'s embeddings model, not over chat completions.
            Some(p) if p.provider == Provider::Embeddings => None,
            Some(p) => Some(Endpoint::new(p, &env)?),
            // With stickiness off the classifier is never called (SC-7).
            None if !settings.enable_route_stickiness => None,
            None => {
                return Err(ModelConfigError::UnknownProfile {
                    profile: classifier_name.clone(),
                    used_by: crate::config::settings::ROUTE_STICKINESS_LLM_PROFILE.into(),
                    known: known(),
                })
            }
        };
        let mut endpoints = BTreeMap::new();
        for (id, assistant) in &catalog.assistants {
            for (role, name) in [
                ("router", &assistant.router_profile),
                ("interpreter", &assistant.interpreter_profile),
            ] {
                if endpoints.contains_key(name) {
                    continue;
                }
                let profile =
                    profiles
                        .get(name)
                        .ok_or_else(|| ModelConfigError::UnknownProfile {
                            profile: name.clone(),
                            used_by: format!("assistants.{id}.profiles.{role}"),
                            known: known(),
                        })?;
                if profile.provider == Provider::Embeddings {
                    continue;
                }
                endpoints.insert(name.clone(), Endpoint::new(profile, &env)?);
            }
        }
        let client = http_client(usize::MAX)?;
        Ok(OpenAiCompatibleModel {
            inner: Arc::new(Inner {
                client,
                catalog,
                settings,
                classifier,
                endpoints,
                slots: None,
            }),
        })
    }

    /// At most `n` calls at once; the others wait for a slot (`turnstile_model_requests_waiting`)
    /// before their timeout starts. Over HTTP/1.1 every call in progress holds a connection and
    /// its buffers, so without a cap 10,000 turns waiting on a slow model meant 10,000 sockets.
    pub fn with_max_concurrency(self, n: usize) -> Result<Self, ModelConfigError> {
        let n = n.max(1);
        let mut inner = Arc::unwrap_or_clone(self.inner);
        inner.client = http_client(n)?;
        inner.slots = Some(Arc::new(tokio::sync::Semaphore::new(n)));
        Ok(OpenAiCompatibleModel {
            inner: Arc::new(inner),
        })
    }

    /// Sends every profile's calls to `url` instead of its `base_url` (a gateway, a test server).
    /// An invalid URL is reported by [`Self::check_endpoints`] and fails each call.
    pub fn with_base_url_override(self, url: impl Into<String>) -> Self {
        let url = url.into();
        let mut inner = Arc::unwrap_or_clone(self.inner);
        let target = resolve_target(Some(&url));
        if let Some(c) = inner.classifier.as_mut() {
            c.target = target.clone();
        }
        for e in inner.endpoints.values_mut() {
            e.target = target.clone();
        }
        OpenAiCompatibleModel {
            inner: Arc::new(inner),
        }
    }

    /// Fails when a profile has no usable base URL: call it at start-up to fail fast instead of
    /// falling back on every turn.
    pub fn check_endpoints(&self) -> Result<(), ModelConfigError> {
        self.inner
            .classifier
            .iter()
            .chain(self.inner.endpoints.values())
            .try_for_each(Endpoint::check)
    }

    /// The classifier call with everything the `classify` command shows.
    pub async fn classify_raw(
        &self,
        request: &ClassifierRequest,
        ctx: CallContext<'_>,
    ) -> RawAnswer<ClassifierDecision> {
        let Some(endpoint) = self.inner.classifier.as_ref() else {
            return unavailable(
                Skill::Classifier,
                &self.inner.settings.route_stickiness_llm_profile,
                "no classifier profile is configured".into(),
            );
        };
        // SC-8: the classifier is capped at ROUTE_STICKINESS_MAX_TOKENS, whatever the profile says.
        let max_tokens = self.inner.settings.route_stickiness_max_tokens;
        let messages = || prompt::classifier_messages(request);
        self.call(
            Skill::Classifier,
            endpoint,
            max_tokens,
            messages,
            ctx,
            parse_classifier,
        )
        .await
    }

    /// The router call; the assistant's configured tools go into the prompt.
    pub async fn route_raw(
        &self,
        request: &RouterRequest,
        ctx: CallContext<'_>,
    ) -> RawAnswer<RouterDecision> {
        let Some(assistant) = self.inner.catalog.assistant(&request.assistant) else {
            return unavailable(
                Skill::Router,
                "none",
                format!("no assistant `{}` is configured", request.assistant),
            );
        };
        let Some(endpoint) = self.inner.endpoints.get(&assistant.router_profile) else {
            return unavailable(
                Skill::Router,
                &assistant.router_profile,
                "the router profile is not resolved".into(),
            );
        };
        let messages = || prompt::router_messages(request, assistant);
        self.call(
            Skill::Router,
            endpoint,
            endpoint.profile.max_tokens,
            messages,
            ctx,
            parse_router,
        )
        .await
    }

    /// The interpreter call.
    pub async fn interpret_raw(
        &self,
        request: &InterpreterRequest,
        ctx: CallContext<'_>,
    ) -> RawAnswer<InterpreterDecision> {
        let Some(assistant) = self.interpreter_assistant(request) else {
            return unavailable(
                Skill::Interpreter,
                "none",
                format!(
                    "no assistant configures tool `{}` of agent `{}`",
                    request.transaction.tool, request.transaction.agent
                ),
            );
        };
        let Some(endpoint) = self.inner.endpoints.get(&assistant.interpreter_profile) else {
            return unavailable(
                Skill::Interpreter,
                &assistant.interpreter_profile,
                "the interpreter profile is not resolved".into(),
            );
        };
        let messages = || prompt::interpreter_messages(request);
        self.call(
            Skill::Interpreter,
            endpoint,
            endpoint.profile.max_tokens,
            messages,
            ctx,
            parse_interpreter,
        )
        .await
    }

    /// The request's assistant, when it owns the transaction's tool under the same agent.
    fn interpreter_assistant(&self, request: &InterpreterRequest) -> Option<&Assistant> {
        let tx = &request.transaction;
        self.inner
            .catalog
            .assistant(&request.assistant)
            .filter(|a| a.tools.get(&tx.tool).is_some_and(|t| t.agent == tx.agent))
    }

    async fn call<T>(
        &self,
        skill: Skill,
        endpoint: &Endpoint,
        max_tokens: u32,
        // Built once a slot is free: a call waiting for one holds no prompt.
        messages: impl FnOnce() -> Vec<ChatMessage>,
        ctx: CallContext<'_>,
        parse: fn(&Value) -> ModelAnswer<T>,
    ) -> RawAnswer<T> {
        let _slot = crate::model::acquire_slot(&self.inner.slots).await;
        let started = Instant::now();
        let body = prompt::chat_request(&endpoint.profile, max_tokens, messages());
        // Boxed: the HTTP exchange's future is most of this call's size, and every turn waiting
        // for a slot (thousands at a time under a slow model) would otherwise hold one unstarted.
        let exchanged = match tokio::time::timeout(
            endpoint.timeout,
            Box::pin(self.exchange(skill, endpoint, ctx, &body)),
        )
        .await
        {
            Ok(result) => result,
            Err(_) => Err(Failed {
                failure: ModelFailure::Timeout,
                cause: format!(
                    "no complete answer within {:?} (profile `{}` timeout_seconds)",
                    endpoint.timeout, endpoint.profile.name
                ),
                status: None,
                content: None,
            }),
        };
        let (content, status, answer, cause) = match exchanged {
            Ok((status, content)) => match extract_json_object(&content) {
                None => (
                    Some(content),
                    Some(status),
                    Err(ModelFailure::InvalidJson),
                    Some("the model's answer holds no JSON object".to_owned()),
                ),
                Some(v) => {
                    let answer = parse(&v);
                    let cause = answer.is_err().then(|| {
                        format!(
                            "the model's JSON does not match the {} schema",
                            skill.as_str()
                        )
                    });
                    (Some(content), Some(status), answer, cause)
                }
            },
            Err(f) => (f.content, f.status, Err(f.failure), Some(f.cause)),
        };
        let latency = started.elapsed();
        let profile = endpoint.profile.name.clone();
        record(skill, &profile, &answer, latency, cause.as_deref());
        RawAnswer {
            skill,
            profile,
            content,
            answer,
            latency,
            status,
            cause,
        }
    }

    /// One HTTP exchange: the status and the message content, or why not.
    async fn exchange(
        &self,
        skill: Skill,
        endpoint: &Endpoint,
        ctx: CallContext<'_>,
        body: &prompt::ChatRequest,
    ) -> Result<(u16, String), Failed> {
        let target = match &endpoint.target {
            Target::Url(u) => u,
            Target::Missing => {
                return Err(Failed::error(format!(
                    "profile `{}` has no base_url",
                    endpoint.profile.name
                )))
            }
            Target::Invalid { url, reason } => {
                return Err(Failed::error(format!("invalid base URL `{url}`: {reason}")))
            }
        };
        let url = target.as_str();
        let payload = serde_json::to_vec(body)
            .map_err(|e| Failed::error(format!("cannot encode the request: {e}")))?;
        let mut request = self
            .inner
            .client
            .post(target.clone())
            .headers(endpoint.headers.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "application/json")
            .header(SKILL_HEADER, skill.as_str());
        // A turn id that cannot be a header value only loses the correlation header.
        if let Ok(v) = HeaderValue::from_str(ctx.turn_id) {
            request = request.header(TURN_ID_HEADER, v);
        }
        if ctx.speculative {
            // A gateway can tell a call whose answer may be discarded from a needed one.
            request = request.header(SPECULATIVE_HEADER, "true");
        }
        if let Some(auth) = &endpoint.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let mut response = request.body(payload).send().await.map_err(|e| {
            let what = if e.is_connect() {
                "cannot connect to"
            } else {
                "request failed to"
            };
            Failed::error(format!("{what} {url}: {}", root_cause(&e)))
        })?;
        let status = response.status();
        if !status.is_success() {
            // The body is not shown: some providers echo (part of) the key in auth errors.
            let hint = match status.as_u16() {
                401 | 403 => match &endpoint.profile.api_key_env {
                    Some(var) => format!(" (check the API key in {var})"),
                    None => " (the profile sets no api_key_env)".to_owned(),
                },
                _ => String::new(),
            };
            return Err(Failed {
                failure: ModelFailure::Error,
                cause: format!("HTTP {status} from {url}{hint}"),
                status: Some(status.as_u16()),
                content: None,
            });
        }
        let code = status.as_u16();
        if let Some(ct) = response.headers().get(CONTENT_TYPE) {
            let ct = ct.to_str().unwrap_or("").to_ascii_lowercase();
            if !ct.contains("json") {
                return Err(Failed::invalid(
                    format!("expected a JSON chat completion from {url}, got content type `{ct}`"),
                    code,
                ));
            }
        }
        let mut bytes = Vec::new();
        loop {
            match response.chunk().await {
                Ok(Some(chunk)) => {
                    if bytes.len() + chunk.len() > MAX_RESPONSE_BYTES {
                        return Err(Failed::error(format!(
                            "the response from {url} exceeds {MAX_RESPONSE_BYTES} bytes"
                        )));
                    }
                    bytes.extend_from_slice(&chunk);
                }
                Ok(None) => break,
                Err(e) => {
                    return Err(Failed {
                        failure: ModelFailure::Error,
                        cause: format!("the response from {url} was cut short: {}", root_cause(&e)),
                        status: Some(code),
                        content: None,
                    })
                }
            }
        }
        let completion: Value = serde_json::from_slice(&bytes)
            .map_err(|_| Failed::invalid(format!("the response from {url} is not JSON"), code))?;
        message_content(&completion)
            .map(|c| (code, c))
            .ok_or_else(|| {
                Failed::invalid(
                    format!("the response from {url} has no choices[0].message.content"),
                    code,
                )
            })
    }
}

/// `choices[0].message.content`: a string, or an array of text parts (some gateways).
fn message_content(completion: &Value) -> Option<String> {
    match completion.pointer("/choices/0/message/content")? {
        Value::String(s) => Some(s.clone()),
        Value::Array(parts) => {
            let text: String = parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect();
            (!text.is_empty()).then_some(text)
        }
        _ => None,
    }
}

/// The innermost error message (e.g. "Connection refused (os error 111)").
fn root_cause(e: &(dyn std::error::Error + 'static)) -> String {
    let mut current = e;
    while let Some(next) = current.source() {
        current = next;
    }
    current.to_string()
}

fn unavailable<T>(skill: Skill, profile: &str, cause: String) -> RawAnswer<T> {
    let answer = Err(ModelFailure::Error);
    record(skill, profile, &answer, Duration::ZERO, Some(&cause));
    RawAnswer {
        skill,
        profile: profile.to_owned(),
        content: None,
        answer,
        latency: Duration::ZERO,
        status: None,
        cause: Some(cause),
    }
}

/// Metrics and one log line per call: skill, profile, outcome, latency. Never the key or text.
fn record<T>(
    skill: Skill,
    profile: &str,
    answer: &ModelAnswer<T>,
    latency: Duration,
    cause: Option<&str>,
) {
    let outcome = match answer {
        Ok(_) => "ok",
        Err(f) => f.as_str(),
    };
    counter!(MODEL_REQUESTS_TOTAL, "skill" => skill.as_str(), "profile" => profile.to_owned(),
        "outcome" => outcome)
    .increment(1);
    histogram!(MODEL_REQUEST_DURATION_SECONDS, "skill" => skill.as_str(),
        "profile" => profile.to_owned())
    .record(latency.as_secs_f64());
    let latency_ms = u64::try_from(latency.as_millis()).unwrap_or(u64::MAX);
    match cause {
        None => tracing::debug!(
            skill = skill.as_str(),
            profile,
            outcome,
            latency_ms,
            "Model call answered."
        ),
        Some(cause) => tracing::warn!(
            skill = skill.as_str(),
            profile,
            outcome,
            latency_ms,
            cause,
            "Model call failed; the engine falls back."
        ),
    }
}

impl DecisionModel for OpenAiCompatibleModel {
    async fn classify(
        &self,
        request: &ClassifierRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<ClassifierDecision> {
        self.classify_raw(request, ctx).await.answer
    }

    async fn route(
        &self,
        request: &RouterRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<RouterDecision> {
        self.route_raw(request, ctx).await.answer
    }

    async fn interpret(
        &self,
        request: &InterpreterRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<InterpreterDecision> {
        self.interpret_raw(request, ctx).await.answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn base_urls_resolve_or_say_why() {
        assert!(matches!(
            resolve_target(Some("https://inference.generativeai.sa-saopaulo-1.oci.oraclecloud.com/openai/v1/")),
            Target::Url(u) if u.as_str() == "https://inference.generativeai.sa-saopaulo-1.oci.oraclecloud.com/openai/v1/chat/completions"
        ));
        assert!(matches!(resolve_target(None), Target::Missing));
        assert!(matches!(resolve_target(Some("  ")), Target::Missing));
        assert!(matches!(
            resolve_target(Some("ftp://x")),
            Target::Invalid { .. }
        ));
        assert!(matches!(
            resolve_target(Some("not a url")),
            Target::Invalid { .. }
        ));
    }

    #[test]
    fn content_as_string_or_text_parts() {
        let s = json!({"choices": [{"message": {"content": "{\"a\":1}"}}]});
        assert_eq!(message_content(&s).as_deref(), Some("{\"a\":1}"));
        let parts = json!({"choices": [{"message": {"content": [
            {"type": "text", "text": "{\"a\":"}, {"type": "text", "text": "1}"}]}}]});
        assert_eq!(message_content(&parts).as_deref(), Some("{\"a\":1}"));
        assert_eq!(message_content(&json!({"choices": []})), None);
        assert_eq!(
            message_content(&json!({"choices": [{"message": {"content": null}}]})),
            None
        );
    }
}
