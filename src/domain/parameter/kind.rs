//! The parameter types and values: kinds, enum options, and why a value was refused.

use std::fmt;

use super::IdPattern;

/// One option of an enum parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumValue {
    /// The canonical value stored.
    pub value: String,
    /// Other words or phrases meaning the same value.
    pub synonyms: Vec<String>,
}

/// The type of a parameter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParameterKind {
    Id { pattern: IdPattern },
    Integer { min: Option<i64>, max: Option<i64> },
    Number,
    Money,
    Date,
    Enum { values: Vec<EnumValue> },
    Cep,
    Text { max_len: usize },
}

/// Why a value was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum InvalidReason {
    Empty,
    Format,
    OutOfRange,
    UnknownOption,
    TooLong,
    WrongType,
}

impl InvalidReason {
    /// The snake_case name, as serialised.
    pub fn as_str(self) -> &'static str {
        match self {
            InvalidReason::Empty => "empty",
            InvalidReason::Format => "format",
            InvalidReason::OutOfRange => "out_of_range",
            InvalidReason::UnknownOption => "unknown_option",
            InvalidReason::TooLong => "too_long",
            InvalidReason::WrongType => "wrong_type",
        }
    }
}

impl fmt::Display for InvalidReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A refused value: why, and the text as given (a JSON value's serialisation if not a string).
#[derive(Debug, Clone, PartialEq)]
pub struct Invalid {
    pub reason: InvalidReason,
    pub raw: String,
}

impl fmt::Display for Invalid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({:?})", self.reason, self.raw)
    }
}

impl std::error::Error for Invalid {}

impl ParameterKind {
    /// `id`, `integer`, `number`, `money`, `date`, `enum`, `cep`, `text`
    pub fn type_name(&self) -> &'static str {
        match self {
            ParameterKind::Id { .. } => "id",
            ParameterKind::Integer { .. } => "integer",
            ParameterKind::Number => "number",
            ParameterKind::Money => "money",
            ParameterKind::Date => "date",
            ParameterKind::Enum { .. } => "enum",
            ParameterKind::Cep => "cep",
            ParameterKind::Text { .. } => "text",
        }
    }

    /// false only for Text: free text never counts as a clear fill (PR-1).
    pub fn is_typed(&self) -> bool {
        !matches!(self, ParameterKind::Text { .. })
    }

    /// Reading order when extracting; `None` for free text, which is never extracted.
    pub(super) fn specificity(&self) -> Option<u8> {
        match self {
            ParameterKind::Id { .. } => Some(0),
            ParameterKind::Cep => Some(1),
            ParameterKind::Money => Some(2),
            ParameterKind::Date => Some(3),
            ParameterKind::Enum { .. } => Some(4),
            ParameterKind::Number => Some(5),
            ParameterKind::Integer { .. } => Some(6),
            ParameterKind::Text { .. } => None,
        }
    }
}
