//! `HttpToolGateway`: tool execution and pre-validation as JSON webhooks over HTTP.
//!
//! Every call is a `POST` of `{"action", "tool", "arguments", "identity", "transaction_id"}` with
//! the headers `Idempotency-Key` (the request's key: identical on every retry, redelivery and
//! restart, EV-4) and `X-Turnstile-Turn-Id`. Each attempt has its own timeout; timeouts, connection
//! errors, 408, 429 and 5xx are retried with jittered exponential backoff (backon), any other
//! status is final. Every execution attempt becomes an [`EvidenceRecord`] (EV-3).
//!
//! Pre-validation fails closed: when no well-formed answer comes back, the result is *not eligible*
//! with reason `pre_validation_unavailable: <cause>`, so nothing is executed that could not be
//! validated (EV-2, LC-1).
//!
//! Unlike the pure core, this adapter reads the wall clock: attempt times are facts of the call.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use backon::{ExponentialBuilder, Retryable};
use metrics::{counter, histogram};
use reqwest::header::CONTENT_TYPE;
use reqwest::{StatusCode, Url};
use serde::Deserialize;
use serde_json::{json, Value};

use crate::config::agents::{default_pre_validation_endpoint, endpoint_problem};
pub use crate::config::tool_http::ToolHttpSettings;
use crate::domain::catalog::Catalog;
use crate::domain::decision::{PreValidationResult, ToolResult};
use crate::domain::effect::ToolRequest;
use crate::domain::transaction::{AttemptOutcome, EvidenceRecord, EVIDENCE_SUMMARY_MAX_CHARS};
use crate::http_client::{self, describe, header_value};
use crate::ports::{CallContext, ToolGateway};
use crate::telemetry::{TOOL_CALLS_TOTAL, TOOL_CALL_DURATION_SECONDS, TOOL_RETRIES_TOTAL};

/// Environment variable holding the base URL that relative tool endpoints are joined to.
pub const TOOLS_BASE_URL_ENV: &str = "TURNSTILE_TOOLS_BASE_URL";
/// The base URL when [`TOOLS_BASE_URL_ENV`] is unset: a sidecar on the worker's host.
pub const DEFAULT_TOOLS_BASE_URL: &str = "http://127.0.0.1:8081";
pub const IDEMPOTENCY_KEY_HEADER: &str = "Idempotency-Key";
pub const TURN_ID_HEADER: &str = "X-Turnstile-Turn-Id";
/// The reason prefix of a pre-validation that got no usable answer (fail closed, EV-2).
pub use crate::domain::engine::PRE_VALIDATION_UNAVAILABLE;
/// Bytes of a response body read at most: a runaway endpoint cannot exhaust memory, and the body
/// ends up in the in-flight checkpoint record.
pub const MAX_RESPONSE_BYTES: usize = 256 * 1024;

/// The base URL from the environment (through `lookup`), or [`DEFAULT_TOOLS_BASE_URL`].
pub fn tools_base_url(lookup: impl Fn(&str) -> Option<String>) -> String {
    lookup(TOOLS_BASE_URL_ENV)
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| DEFAULT_TOOLS_BASE_URL.to_owned())
}

/// Why the gateway cannot be built; every message says what to change.
#[derive(Debug, thiserror::Error)]
pub enum ToolConfigError {
    #[error(
        "invalid tools base URL `{url}`: {problem}; set {TOOLS_BASE_URL_ENV} to an absolute \
         http(s) URL such as {DEFAULT_TOOLS_BASE_URL}"
    )]
    BaseUrl { url: String, problem: String },
    #[error("tool endpoints: {}", .0.join("; "))]
    Endpoints(Vec<String>),
    #[error(
        "cannot build the HTTP client: {} (fix: {})",
        http_client::build_failure(.0),
        http_client::BUILD_FAILURE_FIX
    )]
    Client(#[source] reqwest::Error),
}

/// The resolved URLs of one tool.
#[derive(Debug, Clone)]
struct Endpoints {
    execute: Url,
    pre_validate: Url,
}

/// `ToolGateway` over HTTP. Cheap to share: one connection pool for every tool.
#[derive(Debug, Clone)]
pub struct HttpToolGateway {
    client: reqwest::Client,
    /// agent_id → tool → URLs, resolved once so a bad endpoint fails at start, not mid-turn.
    endpoints: Arc<BTreeMap<String, BTreeMap<String, Endpoints>>>,
    settings: ToolHttpSettings,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Execute,
    PreValidation,
}

impl Kind {
    /// The `kind` metric label.
    fn label(self) -> &'static str {
        match self {
            Kind::Execute => "execute",
            Kind::PreValidation => "pre_validation",
        }
    }

    /// The body's `action`.
    fn action(self) -> &'static str {
        match self {
            Kind::Execute => "execute",
            Kind::PreValidation => "pre_validate",
        }
    }
}

/// One finished attempt.
#[derive(Debug, Clone)]
struct Attempt {
    outcome: AttemptOutcome,
    status: Option<u16>,
    /// The response body (lossy UTF-8, at most [`MAX_RESPONSE_BYTES`]); empty without a response.
    body: String,
    /// For failures: what went wrong, as reported to the engine (`HTTP 400: already shipped`).
    cause: String,
    /// Monotonic, for the latency histogram (the record's wall-clock times may jump).
    latency: Duration,
    record: EvidenceRecord,
}

/// A pre-validation answer as the endpoint sends it.
#[derive(Debug, Deserialize)]
struct PreValidationAnswer {
    eligible: bool,
    #[serde(default)]
    reason: Option<String>,
    /// RP-2: a code the tool configures per-locale texts for (`already_shipped`).
    #[serde(default)]
    code: Option<String>,
    #[serde(default)]
    data: Value,
}

impl HttpToolGateway {
    /// Resolves every tool's endpoints against `base_url` (relative endpoints only; `None` is
    /// [`DEFAULT_TOOLS_BASE_URL`]) and builds the shared client. Every problem is reported at once.
    pub fn new(
        catalog: Arc<Catalog>,
        base_url: Option<String>,
        settings: ToolHttpSettings,
    ) -> Result<Self, ToolConfigError> {
        let url = base_url
            .as_deref()
            .map_or(DEFAULT_TOOLS_BASE_URL, str::trim);
        let problem = if url.starts_with('/') {
            Some("a path is not a base URL".to_owned())
        } else {
            endpoint_problem(url)
        };
        if let Some(problem) = problem {
            return Err(ToolConfigError::BaseUrl {
                url: url.to_owned(),
                problem,
            });
        }
        let base = url.trim_end_matches('/');
        let mut problems = Vec::new();
        let mut endpoints = BTreeMap::new();
        for (agent_id, assistant) in &catalog.assistants {
            let mut tools = BTreeMap::new();
            for (name, tool) in &assistant.tools {
                let at = format!("assistant `{agent_id}` tool `{name}`");
                let Some(endpoint) = tool.endpoint.as_deref() else {
                    problems.push(format!("{at} has no `endpoint`; set it in the agents file"));
                    continue;
                };
                let pre = tool
                    .pre_validation_endpoint
                    .clone()
                    .unwrap_or_else(|| default_pre_validation_endpoint(endpoint));
                match (resolve(endpoint, base), resolve(&pre, base)) {
                    (Ok(execute), Ok(pre_validate)) => {
                        tools.insert(
                            name.clone(),
                            Endpoints {
                                execute,
                                pre_validate,
                            },
                        );
                    }
                    (Err(e), _) | (_, Err(e)) => problems.push(format!("{at}: {e}")),
                }
            }
            endpoints.insert(agent_id.clone(), tools);
        }
        if !problems.is_empty() {
            return Err(ToolConfigError::Endpoints(problems));
        }
        let timeout = Duration::from_millis(settings.timeout_ms.max(1));
        let client = http_client::builder(Duration::from_secs(30))
            .user_agent(concat!("turnstile/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(timeout)
            .build()
            .map_err(ToolConfigError::Client)?;
        Ok(HttpToolGateway {
            client,
            endpoints: Arc::new(endpoints),
            settings,
        })
    }

    pub fn settings(&self) -> ToolHttpSettings {
        self.settings
    }

    fn endpoints(&self, request: &ToolRequest) -> Option<&Endpoints> {
        self.endpoints
            .get(&request.identity.agent_id)?
            .get(&request.tool)
    }

    fn backoff(&self) -> ExponentialBuilder {
        let s = self.settings;
        ExponentialBuilder::default()
            .with_jitter()
            .with_factor(2.0)
            .with_min_delay(Duration::from_millis(s.initial_backoff_ms))
            .with_max_delay(Duration::from_millis(
                s.max_backoff_ms.max(s.initial_backoff_ms),
            ))
            .with_max_times(s.max_attempts.max(1) as usize - 1)
    }

    /// Runs one call with its retries. Returns the attempts in order (the last decided) and the
    /// last response body. `accept` may turn a 2xx into a failure (a malformed answer).
    async fn call(
        &self,
        kind: Kind,
        url: &Url,
        request: &ToolRequest,
        ctx: CallContext<'_>,
        accept: fn(&str) -> Result<(), String>,
    ) -> Vec<Attempt> {
        let body = json!({
            "action": kind.action(),
            "tool": request.tool,
            "arguments": request.arguments,
            "identity": {
                "tenant_id": request.identity.tenant_id,
                "agent_id": request.identity.agent_id,
                "session_id": request.identity.session_id,
            },
            "transaction_id": request.transaction_id,
        })
        .to_string();
        let attempts: Mutex<Vec<Attempt>> = Mutex::new(Vec::new());
        let attempts_ref = &attempts;
        let body_ref = body.as_str();
        let one = || async move {
            let number = lock(attempts_ref).len() as u32 + 1;
            let mut attempt = self.attempt(url, body_ref, request, ctx, number).await;
            if attempt.outcome == AttemptOutcome::Ok {
                if let Err(problem) = accept(&attempt.body) {
                    attempt.outcome = AttemptOutcome::Failure;
                    attempt.cause = problem;
                    attempt.record.outcome = AttemptOutcome::Failure;
                }
            }
            observe(kind, request, ctx, &attempt);
            let retry = attempt.outcome == AttemptOutcome::RetryableFailure;
            lock(attempts_ref).push(attempt);
            if retry {
                Err(())
            } else {
                Ok(())
            }
        };
        // Attempts are collected as they happen, so the final Ok/Err carries nothing more.
        let _ = one
            .retry(self.backoff())
            .sleep(tokio::time::sleep)
            .notify(|_: &(), delay: Duration| {
                counter!(TOOL_RETRIES_TOTAL, "tool" => request.tool.clone(), "kind" => kind.label())
                    .increment(1);
                tracing::debug!(
                    tool = %request.tool,
                    kind = kind.label(),
                    delay_ms = delay.as_millis() as u64,
                    "Retrying tool call."
                );
            })
            .await;
        attempts.into_inner().unwrap_or_else(|p| p.into_inner())
    }

    /// One HTTP exchange within the per-attempt timeout, classified.
    async fn attempt(
        &self,
        url: &Url,
        body: &str,
        request: &ToolRequest,
        ctx: CallContext<'_>,
        number: u32,
    ) -> Attempt {
        let timeout = Duration::from_millis(self.settings.timeout_ms.max(1));
        let started_at_ms = now_ms();
        let clock = Instant::now();
        let exchange = async {
            let response = self
                .client
                .post(url.clone())
                .header(CONTENT_TYPE, "application/json")
                .header(
                    IDEMPOTENCY_KEY_HEADER,
                    header_value(&request.idempotency_key),
                )
                .header(TURN_ID_HEADER, header_value(ctx.turn_id))
                .body(body.to_owned())
                .send()
                .await?;
            let status = response.status();
            let body = http_client::read_bounded(response, MAX_RESPONSE_BYTES).await?;
            Ok::<_, reqwest::Error>((status, body.text()))
        };
        let result = tokio::time::timeout(timeout, exchange).await;
        let ended_at_ms = now_ms();
        let latency = clock.elapsed();
        let (outcome, status, body, cause) = match result {
            Err(_) => (
                AttemptOutcome::RetryableFailure,
                None,
                String::new(),
                format!("timed out after {} ms", timeout.as_millis()),
            ),
            Ok(Err(e)) => {
                // A request that cannot even be built will not get better on retry.
                let outcome = if e.is_builder() {
                    AttemptOutcome::Failure
                } else {
                    AttemptOutcome::RetryableFailure
                };
                (outcome, None, String::new(), bounded(&describe(&e)))
            }
            Ok(Ok((status, body))) => {
                let outcome = if status.is_success() {
                    AttemptOutcome::Ok
                } else if is_retryable_status(status) {
                    AttemptOutcome::RetryableFailure
                } else {
                    AttemptOutcome::Failure
                };
                let cause = if status.is_success() {
                    String::new()
                } else {
                    format!("HTTP {}: {}", status.as_u16(), error_detail(status, &body))
                };
                (outcome, Some(status.as_u16()), body, cause)
            }
        };
        let summary = match outcome {
            AttemptOutcome::Ok => bounded(&body),
            _ => bounded(&cause),
        };
        Attempt {
            outcome,
            status,
            record: EvidenceRecord {
                idempotency_key: request.idempotency_key.clone(),
                attempt: number,
                started_at_ms,
                ended_at_ms,
                outcome,
                status_code: status,
                summary,
            },
            body,
            cause,
            latency,
        }
    }
}

impl ToolGateway for HttpToolGateway {
    async fn pre_validate(
        &self,
        request: &ToolRequest,
        ctx: CallContext<'_>,
    ) -> PreValidationResult {
        let Some(url) = self.endpoints(request).map(|e| e.pre_validate.clone()) else {
            return unavailable("the tool has no configured endpoint", 0, None);
        };
        let attempts = self
            .call(Kind::PreValidation, &url, request, ctx, |body| {
                parse_pre_validation(body).map(|_| ())
            })
            .await;
        let Some(last) = attempts.last() else {
            return unavailable("no attempt was made", 0, None);
        };
        let count = attempts.len();
        match last.outcome {
            AttemptOutcome::Ok => match parse_pre_validation(&last.body) {
                Ok(answer) => PreValidationResult {
                    eligible: answer.eligible,
                    reason: answer.reason,
                    code: answer.code,
                    data: answer.data,
                    at_ms: last.record.ended_at_ms,
                },
                Err(problem) => unavailable(&problem, count, last.status),
            },
            _ => PreValidationResult {
                at_ms: last.record.ended_at_ms,
                ..unavailable(&last.cause, count, last.status)
            },
        }
    }

    async fn execute(&self, request: &ToolRequest, ctx: CallContext<'_>) -> ToolResult {
        let Some(url) = self.endpoints(request).map(|e| e.execute.clone()) else {
            let cause = "the tool has no configured endpoint".to_owned();
            let at = now_ms();
            return ToolResult {
                outcome: AttemptOutcome::Failure,
                data: Value::Null,
                error: Some(cause.clone()),
                attempts: vec![EvidenceRecord {
                    idempotency_key: request.idempotency_key.clone(),
                    attempt: 1,
                    started_at_ms: at,
                    ended_at_ms: at,
                    outcome: AttemptOutcome::Failure,
                    status_code: None,
                    summary: cause,
                }],
            };
        };
        let attempts = self
            .call(Kind::Execute, &url, request, ctx, |_| Ok(()))
            .await;
        let (outcome, data, error) = match attempts.last() {
            None => (
                AttemptOutcome::Failure,
                Value::Null,
                Some("no attempt was made".to_owned()),
            ),
            Some(last) if last.outcome == AttemptOutcome::Ok => {
                (AttemptOutcome::Ok, success_data(&last.body), None)
            }
            Some(last) => {
                // RP-2: a failure's JSON object body (its `error`, `code`) is the result data.
                let body = serde_json::from_str(&last.body)
                    .ok()
                    .filter(Value::is_object);
                let data = body.unwrap_or(Value::Null);
                (last.outcome, data, Some(bounded(&last.cause)))
            }
        };
        ToolResult {
            outcome,
            data,
            error,
            attempts: attempts.into_iter().map(|a| a.record).collect(),
        }
    }
}

/// Joins a `/path` endpoint to the base URL (keeping the base's own path as a prefix), or checks
/// an absolute one.
fn resolve(endpoint: &str, base: &str) -> Result<Url, String> {
    if let Some(problem) = endpoint_problem(endpoint) {
        return Err(problem);
    }
    let full = if endpoint.starts_with('/') {
        format!("{base}{endpoint}")
    } else {
        endpoint.to_owned()
    };
    Url::parse(&full).map_err(|e| format!("`{full}` is not a valid URL: {e}"))
}

fn parse_pre_validation(body: &str) -> Result<PreValidationAnswer, String> {
    serde_json::from_str::<PreValidationAnswer>(body).map_err(|e| {
        bounded(&format!(
            "malformed pre-validation answer (expected {{\"eligible\": bool, \"reason\": \
             text, \"data\": any}}): {e}"
        ))
    })
}

/// Fail closed (EV-2): a pre-validation without a usable answer is not eligible.
fn unavailable(cause: &str, attempts: usize, status: Option<u16>) -> PreValidationResult {
    PreValidationResult {
        eligible: false,
        reason: Some(bounded(&format!("{PRE_VALIDATION_UNAVAILABLE}: {cause}"))),
        code: None,
        data: json!({"attempts": attempts, "status_code": status}),
        at_ms: now_ms(),
    }
}

/// A 2xx body as result data: its JSON, or its text when it is not JSON, or null when empty.
fn success_data(body: &str) -> Value {
    if body.trim().is_empty() {
        return Value::Null;
    }
    serde_json::from_str(body).unwrap_or_else(|_| Value::String(bounded(body)))
}

/// 408 and 429 say "not processed, come back"; 5xx is the server's trouble. The rest is final.
fn is_retryable_status(status: StatusCode) -> bool {
    status.is_server_error()
        || status == StatusCode::REQUEST_TIMEOUT
        || status == StatusCode::TOO_MANY_REQUESTS
}

/// The reason an error response gives: its JSON `error` (or `message`) text, else the body, else
/// the status's reason phrase.
fn error_detail(status: StatusCode, body: &str) -> String {
    let from_json = serde_json::from_str::<Value>(body).ok().and_then(|v| {
        ["error", "message"]
            .iter()
            .find_map(|k| v.get(k).and_then(Value::as_str).map(str::to_owned))
    });
    let text = from_json.unwrap_or_else(|| body.trim().to_owned());
    if text.is_empty() {
        status.canonical_reason().unwrap_or("error").to_owned()
    } else {
        bounded(&text)
    }
}

/// Metrics and a log line per attempt. Argument values are never logged.
fn observe(kind: Kind, request: &ToolRequest, ctx: CallContext<'_>, attempt: &Attempt) {
    let latency_ms = u64::try_from(attempt.latency.as_millis()).unwrap_or(u64::MAX);
    counter!(
        TOOL_CALLS_TOTAL,
        "tool" => request.tool.clone(),
        "kind" => kind.label(),
        "outcome" => attempt.outcome.as_str()
    )
    .increment(1);
    histogram!(TOOL_CALL_DURATION_SECONDS, "tool" => request.tool.clone(), "kind" => kind.label())
        .record(attempt.latency.as_secs_f64());
    let status = attempt.status.unwrap_or(0);
    if attempt.outcome == AttemptOutcome::Ok {
        tracing::info!(
            tool = %request.tool,
            kind = kind.label(),
            attempt = attempt.record.attempt,
            status,
            outcome = attempt.outcome.as_str(),
            latency_ms,
            turn_id = ctx.turn_id,
            transaction_id = %request.transaction_id,
            "Tool call attempt finished."
        );
    } else {
        tracing::warn!(
            tool = %request.tool,
            kind = kind.label(),
            attempt = attempt.record.attempt,
            status,
            outcome = attempt.outcome.as_str(),
            latency_ms,
            turn_id = ctx.turn_id,
            transaction_id = %request.transaction_id,
            error = %attempt.cause,
            "Tool call attempt failed."
        );
    }
}

/// At most [`EVIDENCE_SUMMARY_MAX_CHARS`] characters, an ellipsis marking a cut.
fn bounded(text: &str) -> String {
    if text.chars().count() <= EVIDENCE_SUMMARY_MAX_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text
        .chars()
        .take(EVIDENCE_SUMMARY_MAX_CHARS.saturating_sub(1))
        .collect();
    cut.push('…');
    cut
}

use crate::clock::now_ms;

/// A poisoned lock only means another attempt panicked; the list itself is still sound.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summaries_are_bounded_on_char_boundaries() {
        let long = "é".repeat(EVIDENCE_SUMMARY_MAX_CHARS * 2);
        let cut = bounded(&long);
        assert_eq!(cut.chars().count(), EVIDENCE_SUMMARY_MAX_CHARS);
        assert!(cut.ends_with('…'));
        assert_eq!(bounded("short"), "short");
    }

    #[test]
    fn error_detail_prefers_the_json_error_text() {
        let s = StatusCode::BAD_REQUEST;
        assert_eq!(
            error_detail(s, r#"{"error":"already shipped"}"#),
            "already shipped"
        );
        assert_eq!(error_detail(s, r#"{"message":"nope"}"#), "nope");
        assert_eq!(error_detail(s, "plain text"), "plain text");
        assert_eq!(error_detail(s, ""), "Bad Request");
    }

    #[test]
    fn retryable_statuses() {
        for code in [408, 429, 500, 502, 503, 504] {
            assert!(
                is_retryable_status(StatusCode::from_u16(code).unwrap()),
                "{code}"
            );
        }
        for code in [400, 401, 404, 409, 422, 301] {
            assert!(
                !is_retryable_status(StatusCode::from_u16(code).unwrap()),
                "{code}"
            );
        }
    }

    #[test]
    fn relative_endpoints_join_the_base_and_keep_its_path() {
        let url = resolve("/tools/a", "http://h:1/api").unwrap();
        assert_eq!(url.as_str(), "http://h:1/api/tools/a");
        let abs = resolve("https://x.example/t", "http://h:1").unwrap();
        assert_eq!(abs.as_str(), "https://x.example/t");
    }

    #[test]
    fn base_url_defaults_when_unset_or_empty() {
        assert_eq!(tools_base_url(|_| None), DEFAULT_TOOLS_BASE_URL);
        assert_eq!(
            tools_base_url(|_| Some("  ".into())),
            DEFAULT_TOOLS_BASE_URL
        );
        assert_eq!(tools_base_url(|_| Some("http://x:9".into())), "http://x:9");
    }
}
