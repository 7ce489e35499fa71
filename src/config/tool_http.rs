//! [`ToolHttpSettings`]: the transport of the tool webhooks, read from the agents file's
//! `tool_http:` and used by `tool::HttpToolGateway`. It lives in `config` so the configuration
//! does not depend on the adapter that uses it.

/// The transport settings of every tool webhook (`tool_http:` in the agents file).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ToolHttpSettings {
    /// Per attempt: connecting, sending and reading the whole response.
    pub timeout_ms: u64,
    /// Attempts per call, the first included (1 = no retry).
    pub max_attempts: u32,
    /// Delay before the first retry; it doubles per retry up to `max_backoff_ms`, then random
    /// jitter of up to as much again is added (so retries of many workers spread out).
    pub initial_backoff_ms: u64,
    pub max_backoff_ms: u64,
}

impl Default for ToolHttpSettings {
    fn default() -> Self {
        ToolHttpSettings {
            timeout_ms: 5_000,
            max_attempts: 3,
            initial_backoff_ms: 200,
            max_backoff_ms: 2_000,
        }
    }
}
