//! Domain tool endpoints behind `ports::ToolGateway`.

pub mod scripted;

pub use scripted::{ScriptedTools, ToolScript};
