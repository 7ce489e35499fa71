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
//! **Filler words** are the `FILLER_*` lists (in `filler`, re-exported here: articles, pronouns
//! and possessives, *to be* / *ser* / *estar*, politeness, `and`/`e`, discourse markers and
//! acknowledgements; laughter — `lol`, `kkkk` — too), compared on folded words (case and accents ignored), both locales' lists
//! for every message. Not filler:
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

mod cep;
mod date;
mod extraction;
mod filler;
mod id;
mod kind;
mod labels;
mod money;
mod number;
mod reader;
mod reference;
mod restated;
mod scan;
pub mod spelled;
mod text;
mod validate;

pub use self::extraction::{
    extract, extract_clear, extract_clear_with, extract_labelled, ClearOptions, Extracted,
    Extraction, LabelledParameter, Rejected,
};
pub(crate) use self::filler::is_laughter;
pub use self::filler::{
    CORRECTION_MARKERS, FILLER_ARTICLES, FILLER_CONJUNCTIONS, FILLER_DISCOURSE, FILLER_PHRASES,
    FILLER_POLITENESS, FILLER_PRONOUNS, FILLER_TO_BE, QUESTION_WORDS, REQUEST_FRAME,
};
pub use self::id::{IdPattern, DIGIT_GROUPS};
pub use self::reference::{points_back, POINTING_WORDS};

/// The folded words of `text` (lower case, accents and combining marks folded away), split on
/// everything that is not a letter or a digit: how every reader here compares words.
pub fn folded_words(text: &str) -> Vec<String> {
    self::text::phrase(text)
}

/// The folded words of `text` with their byte spans (`don't` is `don` and `t`).
pub fn word_spans(text: &str) -> Vec<(std::ops::Range<usize>, String)> {
    self::text::words(text)
}

/// The parts of `text` between any of `marks` followed by a space or the end (the marks left
/// out), trimmed, empty ones dropped: a mark inside a token (`25,40`, `1.234,56`) splits nothing.
pub fn parts<'t>(text: &'t str, marks: &[char]) -> Vec<&'t str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut chars = text.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let ends = marks.contains(&c) && chars.peek().is_none_or(|(_, n)| n.is_whitespace());
        if ends || chars.peek().is_none() {
            let end = if ends { i } else { i + c.len_utf8() };
            let part = text[start..end].trim();
            if !part.is_empty() {
                out.push(part);
            }
            start = i + c.len_utf8();
        }
    }
    out
}

/// The folded words of `text` (lower case, no accents) that are not filler and lie outside
/// `spans`: what a message says beyond its typed values (for free-text parameters, MG-5).
pub fn content_words(text: &str, spans: &[std::ops::Range<usize>]) -> Vec<String> {
    self::text::words(text)
        .into_iter()
        .filter(|(r, w)| !self::text::overlaps(spans, r) && !self::filler::is_filler(w))
        .map(|(_, w)| w)
        .collect()
}
pub use self::kind::{EnumValue, Invalid, InvalidReason, ParameterKind};

#[cfg(test)]
mod clear_tests;
#[cfg(test)]
mod correction_tests;
#[cfg(test)]
mod tests;
