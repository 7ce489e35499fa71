//! Domain tool endpoints behind `ports::ToolGateway`: scripted (in process) and HTTP webhooks.

pub mod http;
pub mod scripted;

pub use http::{HttpToolGateway, ToolConfigError, ToolHttpSettings};
pub use scripted::{ScriptedTools, ToolScript};
