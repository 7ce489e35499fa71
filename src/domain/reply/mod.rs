//! What the customer reads (RP-1..RP-4): the reply template language (`template`) and values in
//! the locale's format (`format`).

pub mod format;
pub mod template;
