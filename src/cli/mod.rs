//! Subcommands of the `turnstile` binary that are more than a line of wiring.

pub mod chaos;
pub mod classify;
pub mod eval;
pub mod inspect;
pub mod migrate;
pub mod run;
