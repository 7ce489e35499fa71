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
//!
//! The parts: [`endpoint`] (a resolved profile: URL, headers, redacted key; the shared HTTP
//! client) and [`exchange`] (one call: slot, HTTP exchange under the time limit, parsing, metrics).

mod endpoint;
mod exchange;

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use self::endpoint::{http_client, resolve_target, Endpoint};
use self::exchange::unavailable;
use crate::config::profiles::Profiles;
use crate::config::skills::{SkillProfile, SkillProfiles, UnknownProfile};
use crate::domain::catalog::{Assistant, Catalog, Settings};
use crate::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, RouterDecision, Skill,
};
use crate::domain::effect::{ClassifierRequest, InterpreterRequest, RouterRequest};
use crate::model::output::{parse_classifier, parse_interpreter, parse_router};
use crate::model::prompt;
use crate::ports::{CallContext, DecisionModel};

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

/// Why the adapter cannot be built; every message names the profile (or the client) and the
/// fix, never a key.
#[derive(Debug, thiserror::Error)]
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
    #[error(
        "cannot build the HTTP client: {} (fix: {})",
        crate::http_client::build_failure(.0),
        crate::http_client::BUILD_FAILURE_FIX
    )]
    Client(#[source] reqwest::Error),
}

impl From<UnknownProfile> for ModelConfigError {
    fn from(e: UnknownProfile) -> Self {
        ModelConfigError::UnknownProfile {
            profile: e.profile,
            used_by: e.used_by,
            known: e.known,
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
    /// router and interpreter profiles ([`SkillProfiles::resolve`]), then
    /// [`Self::from_skills`].
    pub fn new(
        catalog: Arc<Catalog>,
        settings: Arc<Settings>,
        profiles: Arc<Profiles>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ModelConfigError> {
        let skills = SkillProfiles::resolve(&catalog, &settings, &profiles)?;
        Self::from_skills(catalog, settings, &skills, env)
    }

    /// The chat-completions endpoint of every skill whose profile is a chat one, reading each
    /// API key once through `env`. The embeddings ones are `ConfiguredModel`'s.
    pub fn from_skills(
        catalog: Arc<Catalog>,
        settings: Arc<Settings>,
        skills: &SkillProfiles,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ModelConfigError> {
        let classifier = match &skills.classifier {
            Some(SkillProfile::Chat(p)) => Some(Endpoint::new(p, &env)?),
            // Embeddings: served by `ConfiguredModel`; none: stickiness is off (SC-7).
            Some(SkillProfile::Embeddings { .. }) | None => None,
        };
        let mut endpoints = BTreeMap::new();
        for (name, skill) in &skills.assistants {
            if let SkillProfile::Chat(p) = skill {
                endpoints.insert(name.clone(), Endpoint::new(p, &env)?);
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
