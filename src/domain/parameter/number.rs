//! Numbers and integers: numeric literals, grouping and decimal separators, JSON numbers.

use serde_json::Value;

use crate::domain::locale::Locale;

use super::scan::ungroup;
use super::InvalidReason;

/// A JSON number; integral values (exactly representable) become JSON integers.
pub(super) fn canonical_number(f: f64) -> Result<Value, InvalidReason> {
    if !f.is_finite() {
        return Err(InvalidReason::OutOfRange);
    }
    if f.fract() == 0.0 && f.abs() < 9_007_199_254_740_992.0 {
        return Ok(Value::from(f as i64));
    }
    serde_json::Number::from_f64(f)
        .map(Value::Number)
        .ok_or(InvalidReason::OutOfRange)
}

pub(super) fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `45`, `+45`, `-3`.
pub(super) fn parse_integer_text(t: &str) -> Result<i64, InvalidReason> {
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if !is_digits(digits) {
        return Err(InvalidReason::Format);
    }
    let signed = t.strip_prefix('+').unwrap_or(t);
    signed.parse::<i64>().map_err(|_| InvalidReason::OutOfRange)
}

pub(super) fn decimal_separator(locale: Locale) -> char {
    match locale {
        Locale::En => '.',
        Locale::PtBr => ',',
    }
}

/// `3,5` (pt-BR), `3.5`, `-2`, `1.234,5`.
pub(super) fn parse_number_text(t: &str, locale: Locale) -> Result<Value, InvalidReason> {
    let (negative, rest) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let shape = numeric_shape(
        &ungroup(rest),
        Ambiguity::DecimalSeparator(decimal_separator(locale)),
    )
    .ok_or(InvalidReason::Format)?;
    number_value(negative, &shape)
}

pub(super) fn number_value(negative: bool, shape: &Shape) -> Result<Value, InvalidReason> {
    let mut text = String::new();
    if negative {
        text.push('-');
    }
    text.push_str(&shape.int);
    if let Some(frac) = &shape.frac {
        text.push('.');
        text.push_str(frac);
    }
    let f: f64 = text.parse().map_err(|_| InvalidReason::Format)?;
    canonical_number(f)
}

/// A numeric literal split into integer digits (grouping removed) and decimal digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Shape {
    pub(super) int: String,
    pub(super) frac: Option<String>,
}

/// How to read one separator followed by exactly three digits (`1.234`).
#[derive(Debug, Clone, Copy)]
pub(super) enum Ambiguity {
    /// Always thousands (money: `R$ 1.234` is 1234.00).
    Thousands,
    /// Decimal if it is this character, thousands otherwise (numbers, by locale).
    DecimalSeparator(char),
}

/// Reads a literal made of ASCII digits, `.` and `,` (starting and ending with a digit).
pub(super) fn numeric_shape(lit: &str, ambiguity: Ambiguity) -> Option<Shape> {
    let groups: Vec<&str> = lit.split(['.', ',']).collect();
    if !groups.iter().all(|g| is_digits(g)) {
        return None;
    }
    let seps: Vec<char> = lit.chars().filter(|c| matches!(c, '.' | ',')).collect();
    let Some((&last_sep, earlier_seps)) = seps.split_last() else {
        return Some(Shape {
            int: lit.to_string(),
            frac: None,
        });
    };
    if earlier_seps.is_empty() {
        let (left, right) = lit.split_once(last_sep)?;
        let thousands = right.len() == 3
            && left.len() <= 3
            && !left.starts_with('0')
            && match ambiguity {
                Ambiguity::Thousands => true,
                Ambiguity::DecimalSeparator(d) => last_sep != d,
            };
        return Some(if thousands {
            Shape {
                int: format!("{left}{right}"),
                frac: None,
            }
        } else {
            Shape {
                int: left.to_string(),
                frac: Some(right.to_string()),
            }
        });
    }
    let all_same = earlier_seps.iter().all(|c| *c == last_sep);
    let (int_groups, frac) = if all_same {
        (&groups[..], None)
    } else {
        if earlier_seps.contains(&last_sep) {
            return None;
        }
        let (frac, int_groups) = groups.split_last()?;
        (int_groups, Some(frac.to_string()))
    };
    let (first, rest) = int_groups.split_first()?;
    if first.len() > 3 || first.starts_with('0') || rest.iter().any(|g| g.len() != 3) {
        return None;
    }
    Some(Shape {
        int: int_groups.concat(),
        frac,
    })
}
