//! The pure core: state, transactions, typed parameters, precedence and session control.
//! Nothing here performs I/O, reads a clock or draws a random number.

pub mod catalog;
pub mod confirmation;
pub mod decision;
pub mod effect;
pub mod engine;
pub mod hold_on;
pub mod locale;
pub mod needs_question;
pub mod parameter;
pub mod person_refusal;
pub mod reply;
pub mod state;
pub mod status_question;
pub mod transaction;
pub mod turn;
pub mod withdrawal;
pub mod wording;
