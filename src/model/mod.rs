//! Model-backed decisions behind `ports::DecisionModel`: output parsing shared by every adapter,
//! and the adapters (scripted for scenarios and tests).

pub mod output;
pub mod scripted;

pub use scripted::{ModelScript, Scripted, ScriptedModel};
