//! Money: amounts with or without a currency marker, canonical `"1234.56"`.

use super::number::{numeric_shape, Ambiguity};
use super::scan::ungroup;
use super::text::fold;
use super::InvalidReason;

/// Largest number of integer digits in an amount.
const MONEY_MAX_INT_DIGITS: usize = 15;

/// `int` digits and up to two `frac` digits → `1234.50`; `None` when too large.
pub(super) fn money_canonical(int: &str, frac: &str) -> Option<String> {
    let trimmed = int.trim_start_matches('0');
    let int = if trimmed.is_empty() { "0" } else { trimmed };
    if int.len() > MONEY_MAX_INT_DIGITS {
        return None;
    }
    let mut out = format!("{int}.{frac}");
    for _ in frac.len()..2 {
        out.push('0');
    }
    Some(out)
}

/// How a literal reads as money.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum MoneyRead {
    /// Has a decimal part.
    Amount(String),
    /// A whole number without a decimal part (`50`, `1.234`).
    Bare(String),
    Bad(InvalidReason),
}

pub(super) fn money_read(lit: &str, one_decimal_ok: bool) -> MoneyRead {
    let Some(shape) = numeric_shape(lit, Ambiguity::Thousands) else {
        return MoneyRead::Bad(InvalidReason::Format);
    };
    let frac = shape.frac.as_deref().unwrap_or("");
    let ok_decimals = match frac.len() {
        0 | 2 => true,
        1 => one_decimal_ok,
        _ => false,
    };
    if !ok_decimals {
        return MoneyRead::Bad(InvalidReason::Format);
    }
    match money_canonical(&shape.int, frac) {
        None => MoneyRead::Bad(InvalidReason::OutOfRange),
        Some(v) if shape.frac.is_none() => MoneyRead::Bare(v),
        Some(v) => MoneyRead::Amount(v),
    }
}

pub(super) const PREFIX_MARKERS: [&str; 5] = ["R$", "r$", "US$", "us$", "$"];
pub(super) const SUFFIX_MARKERS: [&str; 7] = [
    "reais", "dolares", "dollars", "dollar", "bucks", "brl", "usd",
];

/// `R$ 71,99`, `$71.99`, `71.99 reais`, `R$ 1 234,56`.
pub(super) fn parse_money_text(t: &str) -> Result<String, InvalidReason> {
    let mut rest = t;
    for marker in PREFIX_MARKERS {
        if let Some(r) = rest.strip_prefix(marker) {
            rest = r.trim_start();
            break;
        }
    }
    let end = rest
        .trim_end_matches(|c: char| c.is_alphabetic())
        .trim_end();
    if end.len() < rest.len() {
        let word = fold(rest.get(end.len()..).unwrap_or("").trim());
        if SUFFIX_MARKERS.contains(&word.as_str()) {
            rest = end;
        }
    }
    let (negative, rest) = match rest.strip_prefix('-') {
        Some(r) => (true, r.trim_start()),
        None => (false, rest),
    };
    match money_read(&ungroup(rest), true) {
        MoneyRead::Amount(v) | MoneyRead::Bare(v) if !negative => Ok(v),
        MoneyRead::Amount(_) | MoneyRead::Bare(_) => Err(InvalidReason::OutOfRange),
        MoneyRead::Bad(reason) => Err(reason),
    }
}
