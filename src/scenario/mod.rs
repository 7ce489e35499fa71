//! The conversation-scenario format (`docs/scenarios.md`), its in-process runner and
//! (feature `harness` only) its end-to-end runner (`--e2e`: through the real worker, Kafka and
//! the CQL store, built on `testkit`).

#[cfg(feature = "harness")]
pub mod e2e;
pub mod format;
pub mod matcher;
pub mod runner;

pub use format::{load_scenario, Scenario, ScenarioError, ScenarioTurn};
pub use runner::{run_paths, RunReport, ScenarioResult};
