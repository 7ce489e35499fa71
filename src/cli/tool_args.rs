//! The tool arguments `turnstile run` and `turnstile eval conversations` share, and the tool
//! gateway both build from them: the same flag, the same environment variable, the same default.

use std::sync::Arc;

use crate::domain::catalog::Catalog;
use crate::tool::http::{HttpToolGateway, ToolConfigError, ToolHttpSettings};

/// Where the tool webhooks are.
#[derive(Debug, Clone, clap::Args)]
pub struct ToolArgs {
    /// Base URL for tool endpoints given as paths in the agents configuration
    /// [default: http://127.0.0.1:8081].
    #[arg(long, env = crate::tool::http::TOOLS_BASE_URL_ENV)]
    pub tools_base_url: Option<String>,
}

impl ToolArgs {
    /// The HTTP tool gateway of the worker: every tool's endpoints resolved against the base URL
    /// (unset: `DEFAULT_TOOLS_BASE_URL`), with the agents file's `tool_http:` transport settings.
    pub fn build_gateway(
        &self,
        catalog: &Arc<Catalog>,
        tool_http: ToolHttpSettings,
    ) -> Result<HttpToolGateway, ToolConfigError> {
        HttpToolGateway::new(catalog.clone(), self.tools_base_url.clone(), tool_http)
    }
}
