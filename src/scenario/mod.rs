//! The conversation-scenario format (`../shared/spec/scenarios.md`) and its in-process runner.

pub mod format;
pub mod matcher;
pub mod runner;

pub use format::{load_scenario, Scenario, ScenarioError, ScenarioTurn};
pub use runner::{run_paths, RunReport, ScenarioResult};
