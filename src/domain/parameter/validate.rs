//! Validation of one value given directly (a model's JSON arguments or a structured action).

use serde_json::Value;

use crate::domain::locale::Locale;

use super::cep::cep_canonical;
use super::date::parse_date;
use super::money::{money_canonical, parse_money_text};
use super::number::{canonical_number, parse_integer_text, parse_number_text};
use super::text::phrase;
use super::{EnumValue, Invalid, InvalidReason, ParameterKind};

impl ParameterKind {
    /// Validates a value given directly (by a model's JSON arguments or a structured action):
    /// strings, numbers (JSON numbers accepted for integer/number/money), returns the canonical
    /// JSON value (strings for id/money/date/enum/cep/text, JSON numbers for integer/number).
    /// Wrong JSON types (bool, object, array, null) → WrongType.
    pub fn validate(&self, raw: &Value, locale: Locale) -> Result<Value, Invalid> {
        let result = match raw {
            Value::String(s) => self.validate_str(s, locale),
            Value::Number(n) => self.validate_json_number(n),
            _ => Err(InvalidReason::WrongType),
        };
        result.map_err(|reason| Invalid {
            reason,
            raw: match raw {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
        })
    }

    fn validate_str(&self, s: &str, locale: Locale) -> Result<Value, InvalidReason> {
        let t = s.trim();
        if t.is_empty() {
            return Err(InvalidReason::Empty);
        }
        match self {
            ParameterKind::Id { pattern } => pattern
                .canonical(t)
                .map(Value::String)
                .ok_or(InvalidReason::Format),
            ParameterKind::Integer { min, max } => {
                let v = parse_integer_text(t)?;
                check_range(v, *min, *max).map(Value::from)
            }
            ParameterKind::Number => parse_number_text(t, locale),
            ParameterKind::Money => parse_money_text(t).map(Value::String),
            ParameterKind::Date => match parse_date(t, locale) {
                Some(result) => result.map(Value::String),
                None => Err(InvalidReason::Format),
            },
            ParameterKind::Enum { values } => match_enum_value(values, t)
                .map(|v| Value::String(v.to_string()))
                .ok_or(InvalidReason::UnknownOption),
            ParameterKind::Cep => cep_canonical(t)
                .map(Value::String)
                .ok_or(InvalidReason::Format),
            ParameterKind::Text { max_len } => {
                if t.chars().count() > *max_len {
                    Err(InvalidReason::TooLong)
                } else {
                    Ok(Value::String(t.to_string()))
                }
            }
        }
    }

    fn validate_json_number(&self, n: &serde_json::Number) -> Result<Value, InvalidReason> {
        match self {
            ParameterKind::Integer { min, max } => {
                let v = if let Some(i) = n.as_i64() {
                    i
                } else if n.is_u64() {
                    return Err(InvalidReason::OutOfRange);
                } else {
                    let f = n.as_f64().ok_or(InvalidReason::Format)?;
                    if f.fract() != 0.0 {
                        return Err(InvalidReason::Format);
                    }
                    if f.abs() >= 9_223_372_036_854_775_807.0 {
                        return Err(InvalidReason::OutOfRange);
                    }
                    f as i64
                };
                check_range(v, *min, *max).map(Value::from)
            }
            ParameterKind::Number => {
                if let Some(i) = n.as_i64() {
                    Ok(Value::from(i))
                } else if let Some(u) = n.as_u64() {
                    Ok(Value::from(u))
                } else {
                    let f = n.as_f64().ok_or(InvalidReason::Format)?;
                    canonical_number(f)
                }
            }
            ParameterKind::Money => {
                let text = if let Some(u) = n.as_u64() {
                    u.to_string()
                } else if n.is_i64() {
                    return Err(InvalidReason::OutOfRange);
                } else {
                    let f = n.as_f64().ok_or(InvalidReason::Format)?;
                    if f < 0.0 {
                        return Err(InvalidReason::OutOfRange);
                    }
                    // Rust prints the shortest decimal that round-trips, never in exponent form.
                    format!("{}", f.abs())
                };
                let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
                if frac.len() > 2 {
                    return Err(InvalidReason::Format);
                }
                money_canonical(int, frac)
                    .map(Value::String)
                    .ok_or(InvalidReason::OutOfRange)
            }
            ParameterKind::Id { pattern } => {
                let text = if let Some(i) = n.as_i64() {
                    i.to_string()
                } else if let Some(u) = n.as_u64() {
                    u.to_string()
                } else {
                    return Err(InvalidReason::WrongType);
                };
                pattern
                    .canonical(&text)
                    .map(Value::String)
                    .ok_or(InvalidReason::Format)
            }
            ParameterKind::Date
            | ParameterKind::Enum { .. }
            | ParameterKind::Cep
            | ParameterKind::Text { .. } => Err(InvalidReason::WrongType),
        }
    }
}

pub(super) fn check_range(
    v: i64,
    min: Option<i64>,
    max: Option<i64>,
) -> Result<i64, InvalidReason> {
    if min.is_some_and(|m| v < m) || max.is_some_and(|m| v > m) {
        Err(InvalidReason::OutOfRange)
    } else {
        Ok(v)
    }
}

/// The canonical value of an enum option named by the whole of `t`.
fn match_enum_value<'a>(values: &'a [EnumValue], t: &str) -> Option<&'a str> {
    let given = phrase(t);
    if given.is_empty() {
        return None;
    }
    values
        .iter()
        .find(|v| {
            std::iter::once(&v.value)
                .chain(v.synonyms.iter())
                .any(|s| phrase(s) == given)
        })
        .map(|v| v.value.as_str())
}
