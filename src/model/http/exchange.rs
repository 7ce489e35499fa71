//! One call of a skill: waiting for a slot, the HTTP exchange under the profile's time limit,
//! the answer parsed defensively, and the metrics and log line every call leaves.

use std::time::{Duration, Instant};

use metrics::{counter, histogram};
use reqwest::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE};
use serde_json::Value;

use super::endpoint::{Endpoint, Target};
use super::{
    OpenAiCompatibleModel, RawAnswer, MAX_RESPONSE_BYTES, SKILL_HEADER, SPECULATIVE_HEADER,
    TURN_ID_HEADER,
};
use crate::domain::decision::{ModelAnswer, ModelFailure, Skill};
use crate::http_client::{self, describe};
use crate::model::output::extract_json_object;
use crate::model::prompt::{self, ChatMessage};
use crate::ports::CallContext;
use crate::telemetry::{MODEL_REQUESTS_TOTAL, MODEL_REQUEST_DURATION_SECONDS};

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

impl OpenAiCompatibleModel {
    pub(super) async fn call<T>(
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
            .header(SKILL_HEADER, skill.as_str())
            .header(TURN_ID_HEADER, http_client::header_value(ctx.turn_id));
        if ctx.speculative {
            // A gateway can tell a call whose answer may be discarded from a needed one.
            request = request.header(SPECULATIVE_HEADER, "true");
        }
        if let Some(auth) = &endpoint.auth {
            request = request.header(AUTHORIZATION, auth.clone());
        }
        let response = request.body(payload).send().await.map_err(|e| {
            let what = if e.is_connect() {
                "cannot connect to"
            } else {
                "request failed to"
            };
            Failed::error(format!("{what} {url}: {}", http_client::causes(&e)))
        })?;
        read_completion(response, url, endpoint).await
    }
}

/// The response's status and message content, or why it holds none: a non-2xx status, a body
/// that is not JSON (or over [`MAX_RESPONSE_BYTES`], or cut short), no message content.
async fn read_completion(
    response: reqwest::Response,
    url: &str,
    endpoint: &Endpoint,
) -> Result<(u16, String), Failed> {
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
    let body = match http_client::read_bounded(response, MAX_RESPONSE_BYTES).await {
        Ok(body) if body.cut => {
            return Err(Failed::error(format!(
                "the response from {url} exceeds {MAX_RESPONSE_BYTES} bytes"
            )))
        }
        Ok(body) => body.bytes,
        Err(e) => {
            return Err(Failed {
                failure: ModelFailure::Error,
                cause: format!("the response from {url} was cut short: {}", describe(&e)),
                status: Some(code),
                content: None,
            })
        }
    };
    let completion: Value = serde_json::from_slice(&body)
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

pub(super) fn unavailable<T>(skill: Skill, profile: &str, cause: String) -> RawAnswer<T> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
