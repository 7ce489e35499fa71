//! Typed parameters: validation and normalisation of one value, and extraction of values from a
//! sentence.
//!
//! Two entry points:
//! - [`ParameterKind::validate`] checks one value given directly (a model's JSON arguments or a
//!   structured action) and returns its canonical JSON form (MG-4).
//! - [`extract`] reads typed values out of a free-text message without any model call (MG-4,
//!   MG-5, PR-1): the most specific type reads first (id, CEP, money, date, enum, number,
//!   integer) and a span of the message taken by one parameter is never read again.
//!
//! Canonical forms: money `"1234.56"` (dot, two decimals, no grouping), CEP `"NNNNN-NNN"`, date
//! `"YYYY-MM-DD"`, integers as JSON integers, numbers as JSON numbers (integral values as JSON
//! integers), ids and free text trimmed, enums as their configured canonical value.
//!
//! Decisions where the contract is silent:
//! - A numeric token only counts when it stands alone: digits glued to letters or joined to a
//!   word by `-`, `/`, `_`, `@` (`PED-1001`, `100km`, `5-7`) or to digits by `.`, `,`, `:`
//!   (`10:30`) are not read as numbers.
//! - One separator followed by exactly three digits (`1.234`, `1,234`) is a thousands separator
//!   for money; for numbers it is one unless it is the locale's decimal separator
//!   (pt-BR `,`, en `.`). Any other single separator is a decimal separator.
//! - Without a currency marker (`R$`, `US$`, `$`, or a trailing `reais`/`dollars`/...) money in a
//!   sentence needs exactly two decimals; with a marker one decimal is accepted (`R$ 7,5`).
//!   Negative amounts are never money. Amounts have at most 15 integer digits.
//! - Numbers with a currency marker are never read as integers or numbers.
//! - An impossible date (`31/02/2026`) and a number outside `min`/`max` are `OutOfRange`.
//! - [`ParameterKind::validate`] accepts JSON numbers for integer, number and money, and integer
//!   JSON numbers for ids (validated against the pattern as their decimal text); for date, enum,
//!   CEP and text a JSON number is `WrongType`.
//! - `Text { max_len }` counts characters (not bytes) of the trimmed value.
//! - Id patterns are matched case-sensitively as configured; `^`/`$` around a pattern are
//!   ignored when searching inside a sentence.

use std::fmt;
use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::domain::locale::Locale;

/// A configured id pattern (e.g. `PED-[0-9]{4,}`).
///
/// Matching ignores case (`ped-1001` is an attempt at `PED-1001`); the stored value is put in
/// the pattern's case by [`IdPattern::canonical`] (MG-4).
#[derive(Debug, Clone)]
pub struct IdPattern {
    source: String,
    /// `^(?i:pattern)$`: whether a value given directly is a whole id, in any case.
    anchored: Regex,
    /// `^(?:pattern)$`: whether a value is already in the pattern's case.
    exact: Regex,
    /// `(?i:pattern)`: finds the id inside a sentence.
    search: Regex,
    /// The pattern's literal prefix as configured (`PED-`), empty when there is none usable.
    prefix: String,
}

impl IdPattern {
    /// Compiles a pattern. Fails on an invalid regex or one that matches the empty string.
    pub fn new(pattern: &str) -> Result<IdPattern, String> {
        if pattern.trim().is_empty() {
            return Err("id pattern is empty".to_string());
        }
        Regex::new(pattern).map_err(|e| format!("invalid id pattern `{pattern}`: {e}"))?;
        let core = strip_anchors(pattern);
        let compile = |wrapped: String| {
            Regex::new(&wrapped).map_err(|e| format!("invalid id pattern `{pattern}`: {e}"))
        };
        let anchored = compile(format!("^(?i:{core})$"))?;
        let exact = compile(format!("^(?:{core})$"))?;
        let search = compile(format!("(?i:{core})"))?;
        if anchored.is_match("") {
            return Err(format!("id pattern `{pattern}` matches the empty string"));
        }
        Ok(IdPattern {
            source: pattern.to_string(),
            anchored,
            exact,
            search,
            prefix: literal_prefix(core),
        })
    }

    /// The pattern as configured.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `value` (already trimmed) is a whole id, in any case (`ped-1001`).
    pub fn is_match(&self, value: &str) -> bool {
        self.anchored.is_match(value)
    }

    /// The id as stored (MG-4): `None` when `value` (already trimmed) is not a whole id in any
    /// case; otherwise the first of these that the pattern matches as configured: the value as
    /// typed, the value with its prefix in the pattern's case (`ped-1001` → `PED-1001`), all
    /// upper case, all lower case. When none does (a mixed-case pattern), the prefix-cased form.
    pub fn canonical(&self, value: &str) -> Option<String> {
        if !self.anchored.is_match(value) {
            return None;
        }
        let prefixed = self.with_prefix_case(value);
        [
            value.to_string(),
            prefixed.clone(),
            value.to_uppercase(),
            value.to_lowercase(),
        ]
        .into_iter()
        .find(|v| self.exact.is_match(v))
        .or(Some(prefixed))
    }

    /// `value` with its first characters replaced by the configured prefix when they are that
    /// prefix in another case.
    fn with_prefix_case(&self, value: &str) -> String {
        let n = self.prefix.chars().count();
        let head: String = value.chars().take(n).collect();
        if n == 0 || fold_case(&head) != fold_case(&self.prefix) {
            return value.to_string();
        }
        let tail: String = value.chars().skip(n).collect();
        format!("{}{tail}", self.prefix)
    }

    /// Whether `token` starts with the pattern's literal prefix, in any case.
    fn has_prefix(&self, token: &str) -> bool {
        let n = self.prefix.chars().count();
        n > 0 && fold_case(&token.chars().take(n).collect::<String>()) == fold_case(&self.prefix)
    }
}

fn fold_case(s: &str) -> String {
    s.to_lowercase()
}

impl PartialEq for IdPattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for IdPattern {}

impl fmt::Display for IdPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Removes one leading `^`/`\A` and one trailing unescaped `$`/`\z`.
fn strip_anchors(pattern: &str) -> &str {
    let mut core = pattern;
    if let Some(rest) = core.strip_prefix('^') {
        core = rest;
    } else if let Some(rest) = core.strip_prefix("\\A") {
        core = rest;
    }
    for suffix in ["$", "\\z"] {
        if let Some(rest) = core.strip_suffix(suffix) {
            let backslashes = rest.chars().rev().take_while(|c| *c == '\\').count();
            if backslashes % 2 == 0 {
                core = rest;
                break;
            }
        }
    }
    core
}

/// The literal text every match starts with, as configured; empty when there is none usable.
fn literal_prefix(core: &str) -> String {
    if core.contains('|') {
        return String::new();
    }
    let mut prefix: Vec<char> = Vec::new();
    let mut chars = core.chars();
    let mut stop = None;
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '/' | '#' | '@') {
            prefix.push(c);
        } else if c == '\\' {
            match chars.next() {
                Some(n) if n.is_ascii_punctuation() => prefix.push(n),
                _ => break,
            }
        } else {
            stop = Some(c);
            break;
        }
    }
    if matches!(stop, Some('?' | '*' | '{')) {
        prefix.pop();
    }
    if prefix.len() < 2 {
        return String::new();
    }
    prefix.into_iter().collect::<String>()
}

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

    /// Reading order when extracting; `None` for free text, which is never extracted.
    fn specificity(&self) -> Option<u8> {
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

fn check_range(v: i64, min: Option<i64>, max: Option<i64>) -> Result<i64, InvalidReason> {
    if min.is_some_and(|m| v < m) || max.is_some_and(|m| v > m) {
        Err(InvalidReason::OutOfRange)
    } else {
        Ok(v)
    }
}

/// A JSON number; integral values (exactly representable) become JSON integers.
fn canonical_number(f: f64) -> Result<Value, InvalidReason> {
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

fn is_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// `45`, `+45`, `-3`.
fn parse_integer_text(t: &str) -> Result<i64, InvalidReason> {
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    if !is_digits(digits) {
        return Err(InvalidReason::Format);
    }
    let signed = t.strip_prefix('+').unwrap_or(t);
    signed.parse::<i64>().map_err(|_| InvalidReason::OutOfRange)
}

fn decimal_separator(locale: Locale) -> char {
    match locale {
        Locale::En => '.',
        Locale::PtBr => ',',
    }
}

/// `3,5` (pt-BR), `3.5`, `-2`, `1.234,5`.
fn parse_number_text(t: &str, locale: Locale) -> Result<Value, InvalidReason> {
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

fn number_value(negative: bool, shape: &Shape) -> Result<Value, InvalidReason> {
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
struct Shape {
    int: String,
    frac: Option<String>,
}

/// How to read one separator followed by exactly three digits (`1.234`).
#[derive(Debug, Clone, Copy)]
enum Ambiguity {
    /// Always thousands (money: `R$ 1.234` is 1234.00).
    Thousands,
    /// Decimal if it is this character, thousands otherwise (numbers, by locale).
    DecimalSeparator(char),
}

/// Reads a literal made of ASCII digits, `.` and `,` (starting and ending with a digit).
fn numeric_shape(lit: &str, ambiguity: Ambiguity) -> Option<Shape> {
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

/// Largest number of integer digits in an amount.
const MONEY_MAX_INT_DIGITS: usize = 15;

/// `int` digits and up to two `frac` digits → `1234.50`; `None` when too large.
fn money_canonical(int: &str, frac: &str) -> Option<String> {
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
enum MoneyRead {
    /// Has a decimal part.
    Amount(String),
    /// A whole number without a decimal part (`50`, `1.234`).
    Bare(String),
    Bad(InvalidReason),
}

fn money_read(lit: &str, one_decimal_ok: bool) -> MoneyRead {
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

const PREFIX_MARKERS: [&str; 5] = ["R$", "r$", "US$", "us$", "$"];
const SUFFIX_MARKERS: [&str; 7] = [
    "reais", "dolares", "dollars", "dollar", "bucks", "brl", "usd",
];

/// `R$ 71,99`, `$71.99`, `71.99 reais`, `R$ 1 234,56`.
fn parse_money_text(t: &str) -> Result<String, InvalidReason> {
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

/// Reads a date-shaped string: `None` if it is not date-shaped, otherwise the canonical date or
/// `OutOfRange` for an impossible one.
fn parse_date(s: &str, locale: Locale) -> Option<Result<String, InvalidReason>> {
    let parts: Vec<&str> = s.split('-').collect();
    let (year, month, day) = match parts.as_slice() {
        [y, m, d] if y.len() == 4 && (1..=2).contains(&m.len()) && (1..=2).contains(&d.len()) => {
            (*y, *m, *d)
        }
        _ => {
            let parts: Vec<&str> = s.split('/').collect();
            match parts.as_slice() {
                [a, b, y]
                    if y.len() == 4 && (1..=2).contains(&a.len()) && (1..=2).contains(&b.len()) =>
                {
                    match locale {
                        Locale::PtBr => (*y, *b, *a),
                        Locale::En => (*y, *a, *b),
                    }
                }
                _ => return None,
            }
        }
    };
    if !(is_digits(year) && is_digits(month) && is_digits(day)) {
        return None;
    }
    let (Ok(y), Ok(m), Ok(d)) = (
        year.parse::<u32>(),
        month.parse::<u32>(),
        day.parse::<u32>(),
    ) else {
        return None;
    };
    if y == 0 || !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return Some(Err(InvalidReason::OutOfRange));
    }
    Some(Ok(format!("{y:04}-{m:02}-{d:02}")))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if divisible(year, 4) && (!divisible(year, 100) || divisible(year, 400)) => 29,
        2 => 28,
        _ => 0,
    }
}

fn divisible(n: u32, by: u32) -> bool {
    n.checked_rem(by) == Some(0)
}

/// `01310-100`, `01310100`, `01.310-100` → `01310-100`.
fn cep_canonical(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let shaped = match b.len() {
        8 => b.iter().all(u8::is_ascii_digit),
        9 => b.iter().enumerate().all(|(i, c)| match i {
            5 => *c == b'-',
            _ => c.is_ascii_digit(),
        }),
        10 => b.iter().enumerate().all(|(i, c)| match i {
            2 => *c == b'.',
            6 => *c == b'-',
            _ => c.is_ascii_digit(),
        }),
        _ => false,
    };
    if !shaped {
        return None;
    }
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    let (head, tail) = digits.split_at_checked(5)?;
    Some(format!("{head}-{tail}"))
}

/// Lowercases and removes accents (`Cartão` → `cartao`).
fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        fold_into(c, &mut out);
    }
    out
}

fn fold_into(c: char, out: &mut String) {
    for lc in c.to_lowercase() {
        if is_combining(lc) {
            continue;
        }
        out.push(strip_accent(lc));
    }
}

fn is_combining(c: char) -> bool {
    ('\u{300}'..='\u{36f}').contains(&c)
}

fn strip_accent(c: char) -> char {
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => 'a',
        'ç' | 'ć' | 'č' => 'c',
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ė' | 'ę' | 'ě' => 'e',
        'ì' | 'í' | 'î' | 'ï' | 'ī' | 'į' => 'i',
        'ñ' | 'ń' | 'ň' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ő' => 'o',
        'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' | 'ű' => 'u',
        'ý' | 'ÿ' => 'y',
        other => other,
    }
}

/// Words of a text (runs of letters and digits), folded, with their byte ranges.
fn words(text: &str) -> Vec<(Range<usize>, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() || is_combining(c) {
            let (_, word) = current.get_or_insert_with(|| (i, String::new()));
            fold_into(c, word);
        } else if let Some((start, word)) = current.take() {
            out.push((start..i, word));
        }
    }
    if let Some((start, word)) = current {
        out.push((start..text.len(), word));
    }
    out.retain(|(_, w)| !w.is_empty());
    out
}

fn phrase(text: &str) -> Vec<String> {
    words(text).into_iter().map(|(_, w)| w).collect()
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

/// A typed value read from a message.
#[derive(Debug, Clone, PartialEq)]
pub struct Extracted {
    pub name: String,
    pub value: Value,
    /// Byte range of the message the value was read from.
    pub span: Range<usize>,
}

/// A clear attempt at a parameter that is invalid.
#[derive(Debug, Clone, PartialEq)]
pub struct Rejected {
    pub name: String,
    pub invalid: Invalid,
}

/// What [`extract`] read from one message.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Extraction {
    pub values: Vec<Extracted>,
    pub rejected: Vec<Rejected>,
}

impl Extraction {
    /// The value read for a parameter, if any.
    pub fn value(&self, name: &str) -> Option<&Value> {
        self.values
            .iter()
            .find(|e| e.name == name)
            .map(|e| &e.value)
    }

    /// The rejection recorded for a parameter, if any.
    pub fn rejection(&self, name: &str) -> Option<&Invalid> {
        self.rejected
            .iter()
            .find(|r| r.name == name)
            .map(|r| &r.invalid)
    }

    pub fn is_empty(&self) -> bool {
        self.values.is_empty() && self.rejected.is_empty()
    }
}

/// A possible reading of part of the message for one parameter.
#[derive(Debug, Clone)]
struct Candidate {
    span: Range<usize>,
    value: Result<Value, InvalidReason>,
}

/// A run of digits, `.` and `,` standing alone in the message, or a space-grouped number read
/// as one literal (`1 234,56`, `R$ 1 234`).
#[derive(Debug, Clone)]
struct Literal {
    /// The digits and separators, without sign.
    digits: Range<usize>,
    /// The text of `digits` without grouping spaces (`1234,56`).
    plain: String,
    /// Whether a `-` sign stands right before it.
    negative: bool,
    /// Span including the currency marker(s), if any.
    money_span: Option<Range<usize>>,
}

impl Literal {
    fn span(&self) -> Range<usize> {
        if self.negative {
            self.digits.start.saturating_sub(1)..self.digits.end
        } else {
            self.digits.clone()
        }
    }
}

#[allow(clippy::expect_used)]
fn static_regex(pattern: &str) -> Regex {
    Regex::new(pattern).expect("static regex is valid")
}

static NUMERIC_LITERAL: LazyLock<Regex> =
    LazyLock::new(|| static_regex(r"[0-9](?:[0-9.,]*[0-9])?"));
/// Groups of three digits split by a space (also U+00A0, U+202F), with an optional decimal part.
static SPACED_NUMBER: LazyLock<Regex> =
    LazyLock::new(|| static_regex("[0-9]{1,3}(?:[ \u{a0}\u{202f}][0-9]{3})+(?:[.,][0-9]+)?"));
static SPACED_NUMBER_WHOLE: LazyLock<Regex> =
    LazyLock::new(|| static_regex("^[0-9]{1,3}(?:[ \u{a0}\u{202f}][0-9]{3})+(?:[.,][0-9]+)?$"));

/// `1 234,56` → `1234,56`; any other text unchanged (so that a stray space still fails).
fn ungroup(t: &str) -> std::borrow::Cow<'_, str> {
    if SPACED_NUMBER_WHOLE.is_match(t) {
        std::borrow::Cow::Owned(t.chars().filter(|c| !is_inline_space(*c)).collect())
    } else {
        std::borrow::Cow::Borrowed(t)
    }
}
static CEP_SHAPE: LazyLock<Regex> =
    LazyLock::new(|| static_regex(r"[0-9]{2}\.[0-9]{3}-[0-9]{3}|[0-9]{5}-?[0-9]{3}"));
static DASHED_DIGITS: LazyLock<Regex> = LazyLock::new(|| static_regex(r"[0-9]+-[0-9]+"));
static DATE_SHAPE: LazyLock<Regex> = LazyLock::new(|| {
    static_regex(r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}|[0-9]{1,2}/[0-9]{1,2}/[0-9]{4}")
});

/// Whether `c`, next to a token, glues it to `beyond` (the character on the other side of `c`).
fn joins(c: char, beyond: Option<char>) -> bool {
    match c {
        '-' | '–' | '/' | '\\' | '_' | '@' => beyond.is_some_and(char::is_alphanumeric),
        '.' | ',' | ':' => beyond.is_some_and(|d| d.is_ascii_digit()),
        _ => false,
    }
}

/// Whether `span` is a whole token: not glued to letters, digits or a joined word on either side.
fn standalone(text: &str, span: &Range<usize>) -> bool {
    let side_ok = |near: Option<char>, beyond: Option<char>| match near {
        None => true,
        Some(c) => !c.is_alphanumeric() && !joins(c, beyond),
    };
    let mut before = text.get(..span.start).unwrap_or("").chars().rev();
    let mut after = text.get(span.end..).unwrap_or("").chars();
    let (b1, b2) = (before.next(), before.next());
    let (a1, a2) = (after.next(), after.next());
    side_ok(b1, b2) && side_ok(a1, a2)
}

fn is_inline_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{a0}' | '\u{202f}')
}

/// The span of `digits` extended over a currency marker before and/or after it.
fn currency_span(text: &str, digits: &Range<usize>) -> Option<Range<usize>> {
    let before = text.get(..digits.start).unwrap_or("");
    let trimmed = before.trim_end_matches(is_inline_space);
    let mut start = None;
    for marker in PREFIX_MARKERS {
        if let Some(rest) = trimmed.strip_suffix(marker) {
            let glued =
                marker != "$" && rest.chars().next_back().is_some_and(char::is_alphanumeric);
            if !glued {
                start = Some(rest.len());
                break;
            }
        }
    }
    let after = text.get(digits.end..).unwrap_or("");
    let spaced = after.trim_start_matches(is_inline_space);
    let word_len: usize = spaced
        .chars()
        .take_while(|c| c.is_alphabetic())
        .map(char::len_utf8)
        .sum();
    let mut end = None;
    if word_len > 0 {
        let word = fold(spaced.get(..word_len).unwrap_or(""));
        let next = spaced.get(word_len..).and_then(|s| s.chars().next());
        if SUFFIX_MARKERS.contains(&word.as_str()) && !next.is_some_and(char::is_alphanumeric) {
            end = Some(digits.end + (after.len() - spaced.len()) + word_len);
        }
    }
    if start.is_none() && end.is_none() {
        return None;
    }
    Some(start.unwrap_or(digits.start)..end.unwrap_or(digits.end))
}

/// Every standalone numeric literal of the message, in order, and the spans of the
/// space-grouped ones (MG-4: a space-grouped number with a decimal part or a currency marker is
/// one literal; nothing is read from a part of it).
fn literals(text: &str) -> (Vec<Literal>, Vec<Range<usize>>) {
    let mut out = Vec::new();
    let mut grouped: Vec<Range<usize>> = Vec::new();
    for m in SPACED_NUMBER.find_iter(text) {
        let digits = m.range();
        let decimal = m.as_str().contains(['.', ',']);
        if standalone(text, &digits) && (decimal || currency_span(text, &digits).is_some()) {
            grouped.push(digits);
        }
    }
    let mut found: Vec<Range<usize>> = grouped.clone();
    found.extend(
        NUMERIC_LITERAL
            .find_iter(text)
            .map(|m| m.range())
            .filter(|r| !overlaps(&grouped, r)),
    );
    found.sort_by_key(|r| r.start);
    for digits in found {
        let mut before = text.get(..digits.start).unwrap_or("").chars().rev();
        let negative = before.next() == Some('-')
            && before
                .next()
                .is_none_or(|c| c.is_whitespace() || matches!(c, '(' | '[' | ':' | '='));
        let literal = Literal {
            money_span: currency_span(text, &digits),
            plain: ungroup(text.get(digits.clone()).unwrap_or("")).into_owned(),
            negative,
            digits,
        };
        if standalone(text, &literal.span()) {
            out.push(literal);
        }
    }
    (out, grouped)
}

fn slice(text: &str, span: &Range<usize>) -> String {
    text.get(span.clone()).unwrap_or("").to_string()
}

/// What one call knows while reading a message.
struct Reader<'t> {
    text: &'t str,
    locale: Locale,
    literals: Vec<Literal>,
    /// Space-grouped literals: no reading may take a part of one.
    grouped: Vec<Range<usize>>,
    /// A bare integer is money only when no integer/number parameter is being read.
    bare_money: bool,
    words: Vec<(Range<usize>, String)>,
}

impl Reader<'_> {
    fn candidates(&self, kind: &ParameterKind) -> Vec<Candidate> {
        let mut out = self.kind_candidates(kind);
        out.retain(|c| {
            !self.grouped.iter().any(|g| {
                g.start < c.span.end
                    && c.span.start < g.end
                    && !(c.span.start <= g.start && g.end <= c.span.end)
            })
        });
        out
    }

    fn kind_candidates(&self, kind: &ParameterKind) -> Vec<Candidate> {
        match kind {
            ParameterKind::Id { pattern } => self.id_candidates(pattern),
            ParameterKind::Cep => self.cep_candidates(),
            ParameterKind::Money => self.money_candidates(),
            ParameterKind::Date => self.date_candidates(),
            ParameterKind::Enum { values } => self.enum_candidates(values),
            ParameterKind::Number => self.number_candidates(),
            ParameterKind::Integer { min, max } => self.integer_candidates(*min, *max),
            ParameterKind::Text { .. } => Vec::new(),
        }
    }

    fn id_candidates(&self, pattern: &IdPattern) -> Vec<Candidate> {
        let text = self.text;
        let mut out: Vec<Candidate> = pattern
            .search
            .find_iter(text)
            .filter(|m| !m.as_str().trim().is_empty() && standalone(text, &m.range()))
            .filter_map(|m| {
                pattern.canonical(m.as_str().trim()).map(|v| Candidate {
                    span: m.range(),
                    value: Ok(Value::String(v)),
                })
            })
            .collect();
        for span in tokens(text) {
            let token = text.get(span.clone()).unwrap_or("");
            if pattern.has_prefix(token)
                && token.bytes().any(|b| b.is_ascii_digit())
                && !pattern.is_match(token)
            {
                out.push(Candidate {
                    span,
                    value: Err(InvalidReason::Format),
                });
            }
        }
        out.sort_by_key(|c| c.span.start);
        out
    }

    fn cep_candidates(&self) -> Vec<Candidate> {
        let text = self.text;
        let mut out: Vec<Candidate> = CEP_SHAPE
            .find_iter(text)
            .filter(|m| standalone(text, &m.range()))
            .filter_map(|m| {
                cep_canonical(m.as_str()).map(|v| Candidate {
                    span: m.range(),
                    value: Ok(Value::String(v)),
                })
            })
            .collect();
        // Near-misses: 7 to 9 digits split by a dash, or 7 or 9 digits in a row.
        for m in DASHED_DIGITS.find_iter(text) {
            let Some((left, right)) = m.as_str().split_once('-') else {
                continue;
            };
            let total = left.len() + right.len();
            if (4..=6).contains(&left.len())
                && (2..=4).contains(&right.len())
                && (7..=9).contains(&total)
                && cep_canonical(m.as_str()).is_none()
                && standalone(text, &m.range())
            {
                out.push(Candidate {
                    span: m.range(),
                    value: Err(InvalidReason::Format),
                });
            }
        }
        for lit in &self.literals {
            let digits = lit.plain.as_str();
            if !lit.negative && is_digits(digits) && matches!(digits.len(), 7 | 9) {
                out.push(Candidate {
                    span: lit.digits.clone(),
                    value: Err(InvalidReason::Format),
                });
            }
        }
        out.sort_by_key(|c| c.span.start);
        out
    }

    fn money_candidates(&self) -> Vec<Candidate> {
        let text = self.text;
        let mut out = Vec::new();
        for lit in &self.literals {
            let span = lit.money_span.clone().unwrap_or_else(|| lit.digits.clone());
            let minus_before = text
                .get(..span.start)
                .unwrap_or("")
                .trim_end_matches(is_inline_space)
                .ends_with('-');
            if lit.negative || minus_before {
                continue;
            }
            let marked = lit.money_span.is_some();
            let value = match money_read(&lit.plain, marked) {
                MoneyRead::Amount(v) => Ok(Value::String(v)),
                MoneyRead::Bare(v) if marked || self.bare_money => Ok(Value::String(v)),
                MoneyRead::Bare(_) => continue,
                MoneyRead::Bad(reason) if marked => Err(reason),
                MoneyRead::Bad(_) => continue,
            };
            out.push(Candidate { span, value });
        }
        out
    }

    fn date_candidates(&self) -> Vec<Candidate> {
        let text = self.text;
        DATE_SHAPE
            .find_iter(text)
            .filter(|m| standalone(text, &m.range()))
            .filter_map(|m| {
                parse_date(m.as_str(), self.locale).map(|value| Candidate {
                    span: m.range(),
                    value: value.map(Value::String),
                })
            })
            .collect()
    }

    fn enum_candidates(&self, values: &[EnumValue]) -> Vec<Candidate> {
        let phrases: Vec<(Vec<String>, &str)> = values
            .iter()
            .flat_map(|v| {
                std::iter::once(&v.value)
                    .chain(v.synonyms.iter())
                    .map(move |s| (phrase(s), v.value.as_str()))
            })
            .filter(|(p, _)| !p.is_empty())
            .collect();
        let mut out = Vec::new();
        for i in 0..self.words.len() {
            let rest = self.words.get(i..).unwrap_or(&[]);
            let best = phrases
                .iter()
                .filter(|(p, _)| {
                    p.len() <= rest.len() && p.iter().zip(rest).all(|(pw, (_, w))| pw == w)
                })
                .max_by_key(|(p, _)| p.len());
            if let Some((p, canonical)) = best {
                let start = rest.first().map_or(0, |(r, _)| r.start);
                let end = rest
                    .get(p.len().saturating_sub(1))
                    .map_or(start, |(r, _)| r.end);
                out.push(Candidate {
                    span: start..end,
                    value: Ok(Value::String((*canonical).to_string())),
                });
            }
        }
        out
    }

    fn number_candidates(&self) -> Vec<Candidate> {
        let separator = decimal_separator(self.locale);
        self.literals
            .iter()
            .filter(|lit| lit.money_span.is_none())
            .filter_map(|lit| {
                let shape = numeric_shape(&lit.plain, Ambiguity::DecimalSeparator(separator))?;
                Some(Candidate {
                    span: lit.span(),
                    value: number_value(lit.negative, &shape),
                })
            })
            .collect()
    }

    fn integer_candidates(&self, min: Option<i64>, max: Option<i64>) -> Vec<Candidate> {
        self.literals
            .iter()
            .filter(|lit| lit.money_span.is_none())
            .filter_map(|lit| {
                if !is_digits(&lit.plain) {
                    return None;
                }
                let sign = if lit.negative { "-" } else { "" };
                let value = format!("{sign}{}", lit.plain)
                    .parse::<i64>()
                    .map_err(|_| InvalidReason::OutOfRange)
                    .and_then(|v| check_range(v, min, max))
                    .map(Value::from);
                Some(Candidate {
                    span: lit.span(),
                    value,
                })
            })
            .collect()
    }
}

/// Whitespace-separated tokens with punctuation trimmed from both ends.
fn tokens(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    let push = |s: usize, e: usize, out: &mut Vec<Range<usize>>| {
        let raw = text.get(s..e).unwrap_or("");
        let front = raw.trim_start_matches(|c: char| !c.is_alphanumeric());
        let both = front.trim_end_matches(|c: char| !c.is_alphanumeric());
        if !both.is_empty() {
            let ts = s + (raw.len() - front.len());
            out.push(ts..ts + both.len());
        }
    };
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                push(s, i, &mut out);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        push(s, text.len(), &mut out);
    }
    out
}

fn overlaps(taken: &[Range<usize>], span: &Range<usize>) -> bool {
    taken
        .iter()
        .any(|t| t.start < span.end && span.start < t.end)
}

/// Reads typed values out of free text for the given parameters (name, kind), most specific
/// type first, each span used once. Text parameters are never extracted. `rejected` lists
/// near-misses that clearly were an attempt at a parameter but are invalid (e.g. `PED-12` for
/// pattern `PED-[0-9]{4,}` — a token sharing the pattern's literal prefix; a 7- or 9-digit
/// CEP-looking token like `01310-10` when a CEP is asked; an impossible date like `31/02/2026`;
/// an integer out of range), only for parameters that got no valid value in this message.
///
/// Several parameters of the same kind take matches in message order, in the order given.
/// `values` and `rejected` follow the order of `params`.
pub fn extract(params: &[(&str, &ParameterKind)], text: &str, locale: Locale) -> Extraction {
    let (literals, grouped) = literals(text);
    let reader = Reader {
        text,
        locale,
        literals,
        grouped,
        bare_money: !params
            .iter()
            .any(|(_, kind)| matches!(kind, ParameterKind::Integer { .. } | ParameterKind::Number)),
        words: words(text),
    };
    let mut order: Vec<(u8, usize)> = params
        .iter()
        .enumerate()
        .filter_map(|(i, (_, kind))| kind.specificity().map(|rank| (rank, i)))
        .collect();
    order.sort_unstable();

    let mut taken: Vec<Range<usize>> = Vec::new();
    let mut found: Vec<(usize, Extracted)> = Vec::new();
    let mut unfilled: Vec<(usize, Vec<Candidate>)> = Vec::new();
    for &(_, i) in &order {
        let Some(&(name, kind)) = params.get(i) else {
            continue;
        };
        let candidates = reader.candidates(kind);
        let hit = candidates
            .iter()
            .find(|c| c.value.is_ok() && !overlaps(&taken, &c.span));
        match hit {
            Some(Candidate {
                span,
                value: Ok(value),
            }) => {
                taken.push(span.clone());
                found.push((
                    i,
                    Extracted {
                        name: name.to_string(),
                        value: value.clone(),
                        span: span.clone(),
                    },
                ));
            }
            _ => unfilled.push((i, candidates)),
        }
    }

    let mut rejected: Vec<(usize, Rejected)> = Vec::new();
    for (i, candidates) in unfilled {
        let Some(&(name, _)) = params.get(i) else {
            continue;
        };
        let miss = candidates
            .iter()
            .find(|c| c.value.is_err() && !overlaps(&taken, &c.span));
        if let Some(Candidate {
            span,
            value: Err(reason),
        }) = miss
        {
            taken.push(span.clone());
            rejected.push((
                i,
                Rejected {
                    name: name.to_string(),
                    invalid: Invalid {
                        reason: *reason,
                        raw: slice(text, span),
                    },
                },
            ));
        }
    }

    found.sort_by_key(|(i, _)| *i);
    rejected.sort_by_key(|(i, _)| *i);
    Extraction {
        values: found.into_iter().map(|(_, e)| e).collect(),
        rejected: rejected.into_iter().map(|(_, r)| r).collect(),
    }
}

#[cfg(test)]
mod tests;
