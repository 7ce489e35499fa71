//! Typed parameters: validation and normalisation of one value, and extraction of values from a
//! sentence.
//!
//! Entry points:
//! - [`ParameterKind::validate`] checks one value given directly (a model's JSON arguments or a
//!   structured action) and returns its canonical JSON form (MG-4).
//! - [`extract_clear`] answers PR-1: which pending parameters does this message *clearly fill*,
//!   and which clear attempts are invalid? No model call; an empty answer sends the turn on to
//!   the classifier.
//! - [`extract`] / [`extract_labelled`] are the liberal readers (MG-4, MG-5): any standalone
//!   value anywhere in the message is read. Every value [`extract_clear`] gives is also given by
//!   [`extract_labelled`] for the same input (and by [`extract`] when no labels are passed).
//!
//! All of them read the most specific type first (id, CEP, money, date, enum, number, integer),
//! never read a span of the message taken by one parameter again, never extract a text parameter,
//! and let several parameters of one kind take matches in message order. Within that order, a
//! parameter takes a distinctive-form value first, then a labelled one, then any other.
//!
//! Canonical forms: money `"1234.56"` (dot, two decimals, no grouping), CEP `"NNNNN-NNN"`, date
//! `"YYYY-MM-DD"`, integers as JSON integers, numbers as JSON numbers (integral values as JSON
//! integers), ids trimmed and in the pattern's case, free text trimmed, enums as their configured
//! canonical value.
//!
//! # PR-1: what "clearly fills" means here
//!
//! - **Distinctive forms fill anywhere**: an id matching its pattern, a CEP written `NNNNN-NNN` or
//!   `NN.NNN-NNN`, money with a currency marker (`R$ 71,99`, `$71.99`, `71,99 reais`).
//! - **Plain forms** (a bare integer or number, money without a marker, a date, a CEP without
//!   dash, an enum value) fill when (b) introduced by a label of their parameter with only filler
//!   words and punctuation between (`number 45`, `the number is 45`, `o número é 45`,
//!   `number: 45`), wherever that pair stands in the message; or (a) when, after removing every
//!   reading taken in the message together with the label introducing it, what is left is filler
//!   (`45`, `it's 45`, `01310-100, 45`). (a) is all or nothing: one non-filler word left
//!   (`I called 3 times`, or a second number nobody took: `45 and 10` for one integer) and no
//!   unlabelled plain value of the message fills.
//! - **Near-misses** (`PED-12`, `01310-10`, `0131-10`, `31/02/2026`, house number `0`) are
//!   reported under the same two conditions as a plain value, never inside an unrelated sentence
//!   (`esquece, me liga no 98765-4321`).
//!
//! **Filler words** are the `FILLER_*` lists below (articles, pronouns and possessives, *to be* /
//! *ser* / *estar*, politeness, `and`/`e`, discourse markers and acknowledgements), compared on
//! folded words (case and accents ignored), both locales' lists for every message. Not filler:
//! verbs and nouns (`call`, `times`, `liguei`, `vezes`, `human`), prepositions (`to`, `no`, `de`:
//! `me liga no …`), negations (`no`, `not`, `não`: `não é 45` is not 45), and `ok`/`sim`/`yes` are
//! filler (see [`FILLER_DISCOURSE`]).
//!
//! **The label rule.** A parameter's labels are its name with `_` as space (always added) and the
//! phrases the caller passes (localized labels, synonyms), folded into words. Before a value, the
//! reader skips filler words back to the nearest other word and takes the run of non-filler words
//! ending there (joined by spaces, `-` or `_`; at most one word longer than the longest label).
//! The run names a parameter when its longest tail appears word for word inside one of the
//! parameter's labels (`number` and `house number` in `house number`; `numero` and `casa` in
//! `número da casa`; `zip` in `zip code`), unless the word before that tail belongs to another
//! parameter's labels only (`order number is 45` does not name the house number). When the same
//! words name two parameters that both read the value equally well (`the number is 45` with a
//! house number and a floor number), the label is not clear for either.
//!
//! Decisions where the contract is silent:
//! - A numeric token only counts when it stands alone: digits glued to letters or joined to a
//!   word by `-`, `/`, `_`, `@` (`PED-1001`, `100km`, `5-7`) or to digits by `.`, `,`, `:`
//!   (`10:30`) are not read as numbers.
//! - One separator followed by exactly three digits (`1.234`, `1,234`) is a thousands separator
//!   for money; for numbers it is one unless it is the locale's decimal separator
//!   (pt-BR `,`, en `.`). Any other single separator is a decimal separator.
//! - A space (also U+00A0, U+202F) groups thousands (MG-4): a space-grouped number
//!   (`1 234,56`: groups of three after the first, then a decimal part; or any grouping with a
//!   currency marker: `R$ 1 234`) is one literal, read whole or not at all; no reader takes a
//!   part of it (`1`, `234`, `234,56`). Without a decimal part or marker (`1 234`) the digits are
//!   separate numbers, as a space usually separates them in a sentence.
//! - Without a currency marker (`R$`, `US$`, `$`, or a trailing `reais`/`dollars`/...) money in a
//!   sentence needs exactly two decimals; with a marker one decimal is accepted (`R$ 7,5`).
//!   A whole number without marker is money when no integer or number parameter is being read,
//!   and otherwise only after the money parameter's label (`the amount is 50`).
//!   Negative amounts are never money. Amounts have at most 15 integer digits.
//! - Numbers with a currency marker are never read as integers or numbers.
//! - An impossible date (`31/02/2026`) and a number outside `min`/`max` are `OutOfRange`.
//! - CEP near-misses: 4 to 6 digits, a dash, 2 to 4 digits that are not a CEP (`01310-10`,
//!   `0131-10`), or 7 or 9 digits in a row.
//! - [`ParameterKind::validate`] accepts JSON numbers for integer, number and money, and integer
//!   JSON numbers for ids (validated against the pattern as their decimal text); for date, enum,
//!   CEP and text a JSON number is `WrongType`.
//! - `Text { max_len }` counts characters (not bytes) of the trimmed value.
//! - Id patterns match in any case (`ped-1001`); the value is stored in the pattern's case (see
//!   [`IdPattern::canonical`]). `^`/`$` around a pattern are ignored when searching inside a
//!   sentence.

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
        if n == 0 || head.to_lowercase() != self.prefix.to_lowercase() {
            return value.to_string();
        }
        let tail: String = value.chars().skip(n).collect();
        format!("{}{tail}", self.prefix)
    }

    /// Whether `token` starts with the pattern's literal prefix, in any case.
    fn has_prefix(&self, token: &str) -> bool {
        let n = self.prefix.chars().count();
        let head: String = token.chars().take(n).collect();
        n > 0 && head.to_lowercase() == self.prefix.to_lowercase()
    }
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
    /// Byte range of the message the invalid value was read from (without its label).
    pub span: Range<usize>,
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
    /// Read only when introduced by the parameter's label (a bare integer as money while an
    /// integer or number parameter is also read: `the amount is 50`).
    label_only: bool,
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
                    label_only: false,
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
                    label_only: false,
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
                    label_only: false,
                })
            })
            .collect();
        // Near-misses: 4 to 6 digits, a dash, 2 to 4 digits (`01310-10`, `0131-10`); or 7 or 9
        // digits in a row.
        for m in DASHED_DIGITS.find_iter(text) {
            let Some((left, right)) = m.as_str().split_once('-') else {
                continue;
            };
            if (4..=6).contains(&left.len())
                && (2..=4).contains(&right.len())
                && cep_canonical(m.as_str()).is_none()
                && standalone(text, &m.range())
            {
                out.push(Candidate {
                    span: m.range(),
                    value: Err(InvalidReason::Format),
                    label_only: false,
                });
            }
        }
        for lit in &self.literals {
            let digits = lit.plain.as_str();
            if !lit.negative && is_digits(digits) && matches!(digits.len(), 7 | 9) {
                out.push(Candidate {
                    span: lit.digits.clone(),
                    value: Err(InvalidReason::Format),
                    label_only: false,
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
            let mut label_only = false;
            let value = match money_read(&lit.plain, marked) {
                MoneyRead::Amount(v) => Ok(Value::String(v)),
                MoneyRead::Bare(v) => {
                    label_only = !(marked || self.bare_money);
                    Ok(Value::String(v))
                }
                MoneyRead::Bad(reason) if marked => Err(reason),
                MoneyRead::Bad(_) => continue,
            };
            out.push(Candidate {
                span,
                value,
                label_only,
            });
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
                    label_only: false,
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
                    label_only: false,
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
                    label_only: false,
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
                    label_only: false,
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

/// One parameter as the PR-1 reader sees it: `labels` are phrases that name it (its name with
/// `_` as space, its localized labels, configured synonyms), in any case/accents.
#[derive(Debug, Clone, Copy)]
pub struct LabelledParameter<'a> {
    pub name: &'a str,
    pub kind: &'a ParameterKind,
    pub labels: &'a [String],
}

/// Reads typed values out of free text for the given parameters (name, kind), most specific
/// type first, each span used once. Text parameters are never extracted. `rejected` lists
/// near-misses that clearly were an attempt at a parameter but are invalid (e.g. `PED-12` for
/// pattern `PED-[0-9]{4,}` — a token sharing the pattern's literal prefix; a CEP-looking token
/// like `01310-10` when a CEP is asked; an impossible date like `31/02/2026`; an integer out of
/// range), only for parameters that got no valid value in this message.
///
/// This is the liberal reader: a standalone number anywhere in the message is read. For the
/// PR-1 question "does this message clearly fill a pending parameter?" use [`extract_clear`].
///
/// Several parameters of the same kind take matches in message order, in the order given.
/// `values` and `rejected` follow the order of `params`.
pub fn extract(params: &[(&str, &ParameterKind)], text: &str, locale: Locale) -> Extraction {
    let labelled: Vec<LabelledParameter<'_>> = params
        .iter()
        .map(|&(name, kind)| LabelledParameter {
            name,
            kind,
            labels: &[],
        })
        .collect();
    read(&labelled, text, locale, Mode::Liberal)
}

/// [`extract`] with labels: a value introduced by its parameter's label is preferred to an
/// earlier unlabelled one (`I called 3 times, the number is 45` reads the house number 45).
/// Every value [`extract_clear`] gives for the same input is also given here.
pub fn extract_labelled(
    params: &[LabelledParameter<'_>],
    text: &str,
    locale: Locale,
) -> Extraction {
    read(params, text, locale, Mode::Liberal)
}

/// PR-1: only values that *clearly fill* a parameter, and only clear invalid attempts.
///
/// A value of a distinctive form (an id matching its pattern, a CEP written `NNNNN-NNN` or
/// `NN.NNN-NNN`, money with a currency marker) fills anywhere in the message. A value of a plain
/// form (a bare integer or number, money without a marker, a date, a CEP without dash, an enum
/// value) fills only when introduced by one of its parameter's labels with only filler words
/// between (`the number is 45`), or when the message is made of such values and filler words
/// once the clear spans above (with their labels) are removed (`45`, `it's 45`,
/// `01310-100, 45`). Near-misses are reported under the same conditions as a plain value. See the
/// module documentation for the filler words and the label rule.
pub fn extract_clear(params: &[LabelledParameter<'_>], text: &str, locale: Locale) -> Extraction {
    read(params, text, locale, Mode::Clear)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every reading counts ([`extract`]).
    Liberal,
    /// Only clear fills and clear attempts count ([`extract_clear`], PR-1).
    Clear,
}

/// Why a chosen reading is clear.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Clarity {
    /// A distinctive form: clear anywhere.
    Distinctive,
    /// Introduced by the parameter's label, which starts at this byte.
    Labelled(usize),
    /// Neither: clear only when the rest of the message is filler.
    Bare,
}

/// A reading chosen for one parameter.
struct Pick {
    param: usize,
    span: Range<usize>,
    value: Result<Value, InvalidReason>,
    clarity: Clarity,
    /// Where the label introducing it starts, if one does (for removing it from the rest).
    label_start: Option<usize>,
}

impl Pick {
    /// The value and the label introducing it.
    fn whole_span(&self) -> Range<usize> {
        self.label_start.unwrap_or(self.span.start)..self.span.end
    }
}

/// Whether a valid reading has a distinctive form (PR-1): a pattern id, a dashed CEP, money with
/// a currency marker (its span then starts or ends with the marker, not a digit).
fn distinctive(kind: &ParameterKind, text: &str, candidate: &Candidate) -> bool {
    if candidate.value.is_err() {
        return false;
    }
    let raw = text.get(candidate.span.clone()).unwrap_or("");
    match kind {
        ParameterKind::Id { .. } => true,
        ParameterKind::Cep => raw.contains('-'),
        ParameterKind::Money => {
            !raw.starts_with(|c: char| c.is_ascii_digit())
                || !raw.ends_with(|c: char| c.is_ascii_digit())
        }
        _ => false,
    }
}

fn read(params: &[LabelledParameter<'_>], text: &str, locale: Locale, mode: Mode) -> Extraction {
    let (literals, grouped) = literals(text);
    let reader = Reader {
        text,
        locale,
        literals,
        grouped,
        bare_money: !params.iter().any(|p| {
            matches!(
                p.kind,
                ParameterKind::Integer { .. } | ParameterKind::Number
            )
        }),
        words: words(text),
    };
    let labels = Labels::new(params);
    let mut order: Vec<(u8, usize)> = params
        .iter()
        .enumerate()
        .filter_map(|(i, p)| p.kind.specificity().map(|rank| (rank, i)))
        .collect();
    order.sort_unstable();
    let candidates: Vec<Vec<Candidate>> =
        params.iter().map(|p| reader.candidates(p.kind)).collect();
    // The label introducing a candidate of parameter `i`, unless another parameter reading the
    // same span is named at least as well by the same words.
    let label_of = |i: usize, c: &Candidate| -> Option<usize> {
        let run = reader.label_run(c.span.start, labels.longest + 1)?;
        let (start, score) = labels.hit(i, &run, &reader.words)?;
        let contested = candidates.iter().enumerate().any(|(j, other)| {
            j != i
                && other.iter().any(|o| o.span == c.span)
                && labels
                    .hit(j, &run, &reader.words)
                    .is_some_and(|(_, s)| s >= score)
        });
        (!contested).then_some(start)
    };

    let mut taken: Vec<Range<usize>> = Vec::new();
    let mut picks: Vec<Pick> = Vec::new();
    let mut filled = vec![false; params.len()];
    // Valid readings: distinctive forms first, then labelled ones, then any.
    for pass in [Clarity::Distinctive, Clarity::Labelled(0), Clarity::Bare] {
        for &(_, i) in &order {
            if filled.get(i).copied().unwrap_or(true) {
                continue;
            }
            let (Some(p), Some(cands)) = (params.get(i), candidates.get(i)) else {
                continue;
            };
            let hit = cands.iter().find_map(|c| {
                if c.value.is_err() || overlaps(&taken, &c.span) {
                    return None;
                }
                if pass == Clarity::Distinctive && !distinctive(p.kind, text, c) {
                    return None;
                }
                if c.label_only && !matches!(pass, Clarity::Labelled(_)) {
                    return None;
                }
                let label = label_of(i, c);
                let clarity = match pass {
                    Clarity::Labelled(_) => Clarity::Labelled(label?),
                    other => other,
                };
                Some(Pick {
                    param: i,
                    span: c.span.clone(),
                    value: c.value.clone(),
                    clarity,
                    label_start: label,
                })
            });
            if let Some(pick) = hit {
                taken.push(pick.span.clone());
                picks.push(pick);
                if let Some(f) = filled.get_mut(i) {
                    *f = true;
                }
            }
        }
    }
    // Near-misses, for parameters without a value: a labelled one first.
    let mut misses: Vec<Pick> = Vec::new();
    for &(_, i) in &order {
        if filled.get(i).copied().unwrap_or(true) {
            continue;
        }
        let Some(cands) = candidates.get(i) else {
            continue;
        };
        let open: Vec<&Candidate> = cands
            .iter()
            .filter(|c| c.value.is_err() && !overlaps(&taken, &c.span))
            .collect();
        let labelled = open
            .iter()
            .find_map(|c| label_of(i, c).map(|start| (*c, Some(start))));
        let miss = labelled.or_else(|| open.first().map(|c| (*c, None)));
        if let Some((c, label_start)) = miss {
            taken.push(c.span.clone());
            misses.push(Pick {
                param: i,
                span: c.span.clone(),
                value: c.value.clone(),
                clarity: label_start.map_or(Clarity::Bare, Clarity::Labelled),
                label_start,
            });
        }
    }

    if mode == Mode::Clear {
        // PR-1 (a): unlabelled plain readings count only when everything else is filler.
        let removed: Vec<Range<usize>> =
            picks.iter().chain(&misses).map(Pick::whole_span).collect();
        if !reader.only_filler_outside(&removed) {
            picks.retain(|p| p.clarity != Clarity::Bare);
            misses.retain(|p| p.clarity != Clarity::Bare);
        }
    }

    picks.sort_by_key(|p| p.param);
    misses.sort_by_key(|p| p.param);
    let name = |i: usize| {
        params
            .get(i)
            .map_or_else(String::new, |p| p.name.to_string())
    };
    Extraction {
        values: picks
            .into_iter()
            .filter_map(|p| match p.value {
                Ok(value) => Some(Extracted {
                    name: name(p.param),
                    value,
                    span: p.span,
                }),
                Err(_) => None,
            })
            .collect(),
        rejected: misses
            .into_iter()
            .filter_map(|p| match p.value {
                Err(reason) => Some(Rejected {
                    name: name(p.param),
                    invalid: Invalid {
                        reason,
                        raw: slice(text, &p.span),
                    },
                    span: p.span,
                }),
                Ok(_) => None,
            })
            .collect(),
    }
}

// --- PR-1: filler words and labels ------------------------------------------------------------
//
// Every list holds folded words (lower case, no accents); both locales' lists apply to every
// message, as customers mix languages.

/// Articles: `the number is 45`, `o número é 45`.
pub const FILLER_ARTICLES: &[&str] = &[
    "a", "an", "the", "o", "os", "as", "um", "uma", "uns", "umas",
];

/// Personal, demonstrative and possessive pronouns: `it's 45`, `my zip is …`, `é esse`.
pub const FILLER_PRONOUNS: &[&str] = &[
    "i", "me", "my", "mine", "you", "your", "yours", "it", "its", "this", "that", "these", "those",
    "we", "us", "our", "ours", "he", "him", "his", "she", "her", "they", "them", "their", "eu",
    "mim", "meu", "minha", "meus", "minhas", "voce", "vc", "seu", "sua", "seus", "suas", "ele",
    "ela", "eles", "elas", "nos", "nosso", "nossa", "nossos", "nossas", "dele", "dela", "isso",
    "isto", "este", "esta", "esse", "essa", "aquele", "aquela",
];

/// Forms of *to be* / *ser* / *estar*, and the tails English contractions split into
/// (`it's` → `it` `s`, `I'm`, `you're`).
pub const FILLER_TO_BE: &[&str] = &[
    "be", "is", "are", "am", "was", "were", "been", "s", "m", "re", "ser", "e", "eh", "sou", "es",
    "somos", "sao", "era", "eram", "foi", "estar", "esta", "ta", "estou", "estamos", "estao",
    "estava",
];

/// Politeness: `45, please`, `é 45, obrigado`. (`por favor` is in [`FILLER_PHRASES`].)
pub const FILLER_POLITENESS: &[&str] = &[
    "please", "pls", "plz", "thanks", "thank", "thx", "ty", "cheers", "obrigado", "obrigada",
    "brigado", "brigada", "valeu", "grato", "grata", "pf", "pfv", "pfvr",
];

/// Conjunctions joining several answers: `01310-100 and 45`, `01310-100 e 45`.
pub const FILLER_CONJUNCTIONS: &[&str] = &["and", "e"];

/// Discourse markers and acknowledgements: `sorry, 45`, `ok, 45`, `sim, é 45`. `ok`, `yes` and
/// `sim` are here on purpose: while parameters are being collected they acknowledge the question
/// (`ok, 45` answers it); they decide nothing on their own, as a message without a value fills
/// nothing. Negations (`no`, `not`, `não`) are not filler: `não é 45` must not fill 45.
pub const FILLER_DISCOURSE: &[&str] = &[
    "actually", "sorry", "oops", "well", "so", "ah", "oh", "uh", "um", "hmm", "hm", "just", "ok",
    "okay", "yes", "yeah", "yep", "sure", "right", "here", "desculpa", "desculpe", "ops", "opa",
    "bom", "entao", "certo", "claro", "sim", "pronto", "aqui", "olha",
];

/// Filler phrases whose words are not filler alone (`por` is a preposition).
pub const FILLER_PHRASES: &[&[&str]] = &[&["por", "favor"], &["na", "verdade"]];

/// The longest filler phrase.
const MAX_PHRASE_WORDS: usize = 2;

const FILLER_LISTS: [&[&str]; 6] = [
    FILLER_ARTICLES,
    FILLER_PRONOUNS,
    FILLER_TO_BE,
    FILLER_POLITENESS,
    FILLER_CONJUNCTIONS,
    FILLER_DISCOURSE,
];

/// Whether a folded word is filler on its own.
fn is_filler(word: &str) -> bool {
    FILLER_LISTS.iter().any(|list| list.contains(&word))
}

/// The length of a filler phrase starting at `words[0]`, if one does.
fn phrase_at<S: AsRef<str>>(words: &[S]) -> Option<usize> {
    FILLER_PHRASES
        .iter()
        .find(|p| p.len() <= words.len() && p.iter().zip(words).all(|(a, b)| *a == b.as_ref()))
        .map(|p| p.len())
}

/// The length of a filler phrase ending at the last of `words`, if one does.
fn phrase_ending<S: AsRef<str>>(words: &[S]) -> Option<usize> {
    FILLER_PHRASES
        .iter()
        .find(|p| {
            p.len() <= words.len()
                && p.iter()
                    .rev()
                    .zip(words.iter().rev())
                    .all(|(a, b)| *a == b.as_ref())
        })
        .map(|p| p.len())
}

/// Whether `words` are all filler words or filler phrases.
fn all_filler<S: AsRef<str>>(words: &[S]) -> bool {
    let mut rest = words;
    while let Some((first, tail)) = rest.split_first() {
        if let Some(n) = phrase_at(rest) {
            rest = rest.get(n..).unwrap_or(&[]);
        } else if is_filler(first.as_ref()) {
            rest = tail;
        } else {
            return false;
        }
    }
    true
}

/// The words just before a value that may be its label: indices `start..=end` into the
/// message's words, a run of non-filler words joined by spaces or `-`/`_` only (at most as many
/// as asked: one more than the longest label is enough to see what precedes a label), with only
/// filler words (and punctuation) between its end and the value.
struct LabelRun {
    start: usize,
    end: usize,
}

impl Reader<'_> {
    fn label_run(&self, value_start: usize, max_words: usize) -> Option<LabelRun> {
        let mut p = self.words.partition_point(|(r, _)| r.end <= value_start);
        loop {
            let tail: Vec<&str> = self
                .words
                .get(p.saturating_sub(MAX_PHRASE_WORDS)..p)
                .unwrap_or(&[])
                .iter()
                .map(|(_, w)| w.as_str())
                .collect();
            if tail.last().is_some_and(|w| is_filler(w)) {
                p -= 1;
            } else if let Some(n) = phrase_ending(&tail) {
                p -= n;
            } else {
                break;
            }
        }
        let end = p.checked_sub(1)?;
        let mut start = end;
        while start > 0 && end - start + 1 < max_words {
            let (Some((prev, prev_word)), Some((cur, _))) =
                (self.words.get(start - 1), self.words.get(start))
            else {
                break;
            };
            let gap = self.text.get(prev.end..cur.start).unwrap_or("");
            let joined = gap
                .chars()
                .all(|c| is_inline_space(c) || matches!(c, '-' | '_'));
            if !joined || is_filler(prev_word) {
                break;
            }
            start -= 1;
        }
        Some(LabelRun { start, end })
    }

    /// Whether every word outside `removed` is filler (PR-1 (a)).
    fn only_filler_outside(&self, removed: &[Range<usize>]) -> bool {
        let rest: Vec<&str> = self
            .words
            .iter()
            .filter(|(r, _)| !overlaps(removed, r))
            .map(|(_, w)| w.as_str())
            .collect();
        all_filler(&rest)
    }
}

/// The parameters' labels as folded phrases.
struct Labels {
    /// Per parameter: its labels, each a list of folded words; the name (`_` as space) first.
    phrases: Vec<Vec<Vec<String>>>,
    /// The number of words of the longest label.
    longest: usize,
}

impl Labels {
    fn new(params: &[LabelledParameter<'_>]) -> Labels {
        let phrases = params
            .iter()
            .map(|p| {
                std::iter::once(p.name.replace('_', " "))
                    .chain(p.labels.iter().cloned())
                    .map(|l| phrase(&l))
                    .filter(|l| !l.is_empty())
                    .collect()
            })
            .collect::<Vec<Vec<Vec<String>>>>();
        let longest = phrases.iter().flatten().map(Vec::len).max().unwrap_or(0);
        Labels { phrases, longest }
    }

    fn names_word(&self, param: usize, word: &str) -> bool {
        self.phrases
            .get(param)
            .is_some_and(|ls| ls.iter().any(|l| l.iter().any(|w| w == word)))
    }

    /// Whether `run` names parameter `param`: the longest tail of the run that appears, word for
    /// word, inside one of its labels (`number` in `house number`, `número da casa`), unless the
    /// word before that tail belongs to another parameter's labels only (`order number` does not
    /// name the house number). Returns where the label starts and how many words matched.
    fn hit(
        &self,
        param: usize,
        run: &LabelRun,
        words: &[(Range<usize>, String)],
    ) -> Option<(usize, usize)> {
        let own = self.phrases.get(param)?;
        let run_words: Vec<&str> = words
            .get(run.start..=run.end)?
            .iter()
            .map(|(_, w)| w.as_str())
            .collect();
        let len = (1..=run_words.len()).rev().find(|&n| {
            let tail = run_words.get(run_words.len() - n..).unwrap_or(&[]);
            own.iter().any(|label| {
                label
                    .windows(n)
                    .any(|w| w.iter().zip(tail).all(|(a, b)| a == b))
            })
        })?;
        if let Some(before) = run_words
            .len()
            .checked_sub(len + 1)
            .and_then(|k| run_words.get(k))
        {
            let elsewhere = (0..self.phrases.len())
                .any(|other| other != param && self.names_word(other, before));
            if elsewhere && !self.names_word(param, before) {
                return None;
            }
        }
        let (start, _) = words.get(run.end + 1 - len)?;
        Some((start.start, len))
    }
}

#[cfg(test)]
mod clear_tests;
#[cfg(test)]
mod tests;
