//! PR-1 labels: the words before a value that name its parameter.

use std::ops::Range;

use super::extraction::LabelledParameter;
use super::filler::{all_filler, is_filler, phrase_ending, CORRECTION_MARKERS, MAX_PHRASE_WORDS};
use super::reader::Reader;
use super::text::{is_inline_space, overlaps, phrase};

/// Prepositions between an amount's label and the amount (folded). Only for money: `número de
/// 3 dígitos` or `a house of 2 floors` name no house number.
const MONEY_LINKERS: &[&str] = &["of", "de"];

/// Words that qualify a label without changing what it names (folded): `o cep novo é
/// 04538133`, `the new zip is 01310100`, `o número correto é 1502`.
/// Skipped like filler between a label and its value.
const LABEL_QUALIFIERS: &[&str] = &[
    "new", "novo", "nova", "correct", "right", "real", "actual", "correto", "correta", "certo",
    "certa",
];

/// The words just before a value that may be its label: indices `start..=end` into the
/// message's words, a run of non-filler words joined by spaces or `-`/`_` only (at most as many
/// as asked: one more than the longest label is enough to see what precedes a label), with only
/// filler words (and punctuation) between its end and the value — and, with `linked`, one
/// [`MONEY_LINKERS`] word right before the value.
pub(super) struct LabelRun {
    start: usize,
    end: usize,
}

impl Reader<'_> {
    pub(super) fn label_run(
        &self,
        value_start: usize,
        max_words: usize,
        linked: bool,
    ) -> Option<LabelRun> {
        let mut p = self.words.partition_point(|(r, _)| r.end <= value_start);
        // An amount hangs off its label by `of` / `de` (`a charge of 20`, `cobrança de 20`).
        if linked
            && p.checked_sub(1)
                .and_then(|q| self.words.get(q))
                .is_some_and(|(_, w)| MONEY_LINKERS.contains(&w.as_str()))
        {
            p -= 1;
        }
        loop {
            let tail: Vec<&str> = self
                .words
                .get(p.saturating_sub(MAX_PHRASE_WORDS)..p)
                .unwrap_or(&[])
                .iter()
                .map(|(_, w)| w.as_str())
                .collect();
            if tail
                .last()
                .is_some_and(|w| is_filler(w) || LABEL_QUALIFIERS.contains(w))
            {
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
    /// Whether every word inside `clause` and outside `removed` is filler or a correction marker.
    pub(super) fn only_filler_within(
        &self,
        clause: &Range<usize>,
        removed: &[Range<usize>],
    ) -> bool {
        let rest: Vec<&str> = self
            .words
            .iter()
            .filter(|(r, _)| clause.start <= r.start && r.end <= clause.end)
            .filter(|(r, _)| !overlaps(removed, r))
            .map(|(_, w)| w.as_str())
            .filter(|w| !CORRECTION_MARKERS.contains(w))
            .collect();
        all_filler(&rest)
    }

    /// With `correction`, MG-6's correction markers count as filler too.
    pub(super) fn only_filler_outside(&self, removed: &[Range<usize>], correction: bool) -> bool {
        let rest: Vec<&str> = self
            .words
            .iter()
            .filter(|(r, _)| !overlaps(removed, r))
            .map(|(_, w)| w.as_str())
            .filter(|w| !(correction && CORRECTION_MARKERS.contains(w)))
            .collect();
        all_filler(&rest)
    }
}

/// The parameters' labels as folded phrases.
pub(super) struct Labels {
    /// Per parameter: its labels, each a list of folded words; the name (`_` as space) first.
    pub(super) phrases: Vec<Vec<Vec<String>>>,
    /// The number of words of the longest label.
    pub(super) longest: usize,
}

impl Labels {
    pub(super) fn new(params: &[LabelledParameter<'_>]) -> Labels {
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
    pub(super) fn hit(
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
                    .any(|w| w.iter().zip(tail).all(|(a, b)| typed_as(a, b)))
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

/// Whether `typed` is the label word `word`, or it with one letter dropped when five letters or
/// more are left (`pedio` for `pedido`, `numro` for `numero`): a label typed fast still names.
fn typed_as(word: &str, typed: &str) -> bool {
    if word == typed {
        return true;
    }
    // Counted, not collected: every label word meets every word before a value.
    let letters = typed.chars().count();
    if letters < 5 || letters + 1 != word.chars().count() || !typed.chars().all(char::is_alphabetic)
    {
        return false;
    }
    let same = word
        .chars()
        .zip(typed.chars())
        .take_while(|(a, b)| a == b)
        .count();
    word.chars().skip(same + 1).eq(typed.chars().skip(same))
}
