//! Standalone numeric literals in a message: shapes, grouping spaces, currency markers.

use std::ops::Range;
use std::sync::LazyLock;

use regex::Regex;

use super::money::{PREFIX_MARKERS, SUFFIX_MARKERS};
use super::text::{fold, is_inline_space, overlaps};

/// A run of digits, `.` and `,` standing alone in the message, or a space-grouped number read
/// as one literal (`1 234,56`, `R$ 1 234`).
#[derive(Debug, Clone)]
pub(super) struct Literal {
    /// The digits and separators, without sign.
    pub(super) digits: Range<usize>,
    /// The text of `digits` without grouping spaces (`1234,56`).
    pub(super) plain: String,
    /// Whether a `-` sign stands right before it.
    pub(super) negative: bool,
    /// Span including the currency marker(s), if any.
    pub(super) money_span: Option<Range<usize>>,
}

impl Literal {
    pub(super) fn span(&self) -> Range<usize> {
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
pub(super) fn ungroup(t: &str) -> std::borrow::Cow<'_, str> {
    if SPACED_NUMBER_WHOLE.is_match(t) {
        std::borrow::Cow::Owned(t.chars().filter(|c| !is_inline_space(*c)).collect())
    } else {
        std::borrow::Cow::Borrowed(t)
    }
}
pub(super) static CEP_SHAPE: LazyLock<Regex> =
    LazyLock::new(|| static_regex(r"[0-9]{2}\.[0-9]{3}-[0-9]{3}|[0-9]{5}-?[0-9]{3}"));
/// A CEP typed with a space for its dash (`01310 100`, `01.310 100`): read like the undashed
/// form, so only with its label or alone.
pub(super) static CEP_SPACED: LazyLock<Regex> =
    LazyLock::new(|| static_regex(r"(?:[0-9]{5}|[0-9]{2}\.[0-9]{3}) [0-9]{3}"));
/// A Brazilian address's "no number" (`s/n`, `s/nº`, `sem número`): said where a house number
/// goes, it is an invalid number to explain, not a message to misread.
pub(super) static NO_NUMBER: LazyLock<Regex> =
    LazyLock::new(|| static_regex(r"(?i)\bs/ ?n(?:º|°|o\b|\b)|\bsem n[úu]mero\b"));
pub(super) static DASHED_DIGITS: LazyLock<Regex> = LazyLock::new(|| static_regex(r"[0-9]+-[0-9]+"));
pub(super) static DATE_SHAPE: LazyLock<Regex> = LazyLock::new(|| {
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
pub(super) fn standalone(text: &str, span: &Range<usize>) -> bool {
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
pub(super) fn literals(text: &str) -> (Vec<Literal>, Vec<Range<usize>>) {
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
