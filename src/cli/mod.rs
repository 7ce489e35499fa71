//! Subcommands of the `turnstile` binary that are more than a line of wiring.

#[cfg(feature = "harness")]
pub mod chaos;
pub mod classify;
pub mod eval;
pub mod eval_conversations;
pub mod eval_conversations_kafka;
pub mod export;
pub mod inspect;
pub mod migrate;
pub mod model_args;
pub mod replay;
pub mod run;
mod run_config;
pub mod tool_args;

/// Exit code of every command given a configuration, file or argument it cannot use
/// (sysexits' EX_CONFIG).
pub const EXIT_CONFIG: u8 = 64;
