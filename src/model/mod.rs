//! Model-backed decisions behind `ports::DecisionModel`: output parsing shared by every adapter,
//! the chat prompts, and the adapters (scripted for scenarios and tests, OpenAI-compatible HTTP).

pub mod configured;
pub mod embedding;
pub mod http;
pub mod output;
pub mod prompt;
pub mod scripted;

pub use http::{ModelConfigError, OpenAiCompatibleModel, RawAnswer};
pub use scripted::{ModelScript, Scripted, ScriptedModel};
