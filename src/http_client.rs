//! What the HTTP adapters (the chat model, embeddings, tools) share, so they cannot drift apart:
//! the client's policy, the bounded body read, a transport error as one line, and the turn-id
//! header value.

use std::time::Duration;

use reqwest::header::HeaderValue;

/// A client builder with the adapters' common policy; each adds its own pool and time limits.
pub fn builder(pool_idle_timeout: Duration) -> reqwest::ClientBuilder {
    reqwest::Client::builder()
        // No adapter's endpoint redirects legitimately, and a redirected POST would re-send (or,
        // turned into a GET, drop) the body.
        .redirect(reqwest::redirect::Policy::none())
        // Every attempt is the adapter's own, counted and logged: no hidden replays below (and
        // reqwest's retry layer would also clone every request in case it replayed it).
        .retry(reqwest::retry::never().max_retries_per_request(0))
        .pool_idle_timeout(pool_idle_timeout)
}

/// A response body read up to a limit.
#[derive(Debug)]
pub struct Body {
    /// At most the limit's bytes.
    pub bytes: Vec<u8>,
    /// The response had more than the limit; the rest was not read.
    pub cut: bool,
}

impl Body {
    /// The bytes as text, invalid UTF-8 replaced (a cut may split a character).
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.bytes).into_owned()
    }
}

/// Reads at most `limit` bytes of the body, so a runaway endpoint cannot exhaust memory.
pub async fn read_bounded(
    mut response: reqwest::Response,
    limit: usize,
) -> Result<Body, reqwest::Error> {
    let mut bytes = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        let room = limit - bytes.len();
        if chunk.len() > room {
            bytes.extend_from_slice(&chunk[..room]);
            return Ok(Body { bytes, cut: true });
        }
        bytes.extend_from_slice(&chunk);
    }
    Ok(Body { bytes, cut: false })
}

/// A transport failure as one line: what kind it is, then each cause in turn
/// (`connection failed: client error (Connect): tcp connect error: Connection refused`). Never
/// the URL, which may carry credentials: callers that want it add the configured one.
pub fn describe(e: &reqwest::Error) -> String {
    let kind = if e.is_connect() {
        "connection failed"
    } else if e.is_timeout() {
        "timed out"
    } else if e.is_body() || e.is_decode() {
        "response interrupted"
    } else if e.is_builder() {
        "invalid request"
    } else {
        "request failed"
    };
    let causes = causes(e);
    if causes.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}: {causes}")
    }
}

/// Why a client could not be built, as one line: reqwest's kind (`builder error`), then each
/// cause (the TLS library's own message).
pub fn build_failure(e: &reqwest::Error) -> String {
    let causes = causes(e);
    if causes.is_empty() {
        e.to_string()
    } else {
        format!("{e}: {causes}")
    }
}

/// The fix to name with [`build_failure`]: the adapters' client settings are fixed or checked
/// before the build, so what fails there is the system TLS library starting.
pub const BUILD_FAILURE_FIX: &str =
    "check that the system TLS library (OpenSSL) is installed and its configuration loads";

/// The messages of `e`'s causes, outermost first, joined by `: ` (empty when it has none).
pub fn causes(e: &dyn std::error::Error) -> String {
    let mut text = String::new();
    let mut source = e.source();
    while let Some(s) = source {
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}

/// A header value from outside text (a turn id, an idempotency key): anything but visible ASCII
/// and spaces is percent-encoded, so the request is always buildable, the endpoint never sees raw
/// control bytes, and the correlation survives (`docs/decisions.md`, "Turn-id header").
pub fn header_value(text: &str) -> HeaderValue {
    let plain = |c: char| c == ' ' || c.is_ascii_graphic();
    if text.chars().all(plain) {
        if let Ok(v) = HeaderValue::from_str(text) {
            return v;
        }
    }
    let mut encoded = String::with_capacity(text.len());
    for c in text.chars() {
        if plain(c) {
            encoded.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                encoded.push_str(&format!("%{b:02X}"));
            }
        }
    }
    HeaderValue::from_str(&encoded).unwrap_or_else(|_| HeaderValue::from_static("invalid"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The model's and the tools' config errors carry the client's error as their source and
    /// name the fix in their message.
    #[test]
    fn a_client_that_cannot_be_built_is_a_typed_error_naming_the_fix() {
        let failed = || {
            reqwest::Client::builder()
                .user_agent("two\nlines")
                .build()
                .expect_err("a header value cannot hold a newline")
        };
        let model = crate::model::ModelConfigError::Client(failed());
        let tool = crate::tool::ToolConfigError::Client(failed());
        let errors: [&dyn std::error::Error; 2] = [&model, &tool];
        for e in errors {
            let message = e.to_string();
            assert!(
                message.starts_with("cannot build the HTTP client: builder error: "),
                "{message}"
            );
            assert!(
                message.ends_with(&format!("(fix: {BUILD_FAILURE_FIX})")),
                "{message}"
            );
            let source = e.source().expect("the reqwest error");
            assert!(source.downcast_ref::<reqwest::Error>().is_some());
        }
    }

    #[test]
    fn bad_header_characters_are_encoded_not_fatal() {
        assert_eq!(header_value("turn-1").to_str().unwrap(), "turn-1");
        assert_eq!(header_value("a\nb").to_str().unwrap(), "a%0Ab");
        assert_eq!(header_value("ü").to_str().unwrap(), "%C3%BC");
    }
}
