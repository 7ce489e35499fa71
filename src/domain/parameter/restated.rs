//! MG-6 inside one message: a value restated after a correction marker replaces the reading
//! before it (`cancel PED-72644 please, er, I mean PED-72646`, `onde tá o PED-75630? quer dizer,
//! PED-75603`, `number 15, no sorry, 51`).

use std::ops::Range;

use super::extraction::LabelledParameter;
use super::labels::Labels;
use super::reader::{Candidate, Reader};

/// Words that take back what was just typed (folded): `I mean`, `sorry`, `wait`, `actually`,
/// `quer dizer`, `digo`, `ou melhor`, `na verdade`, `errei`. `no`/`não` count only followed by
/// punctuation (`PED-1, no, PED-2`): `PED-1 not PED-2` negates PED-2, and `no` is also the
/// Portuguese `in the` (`pedido PED-1001 no CEP 01310-100`).
const TAKE_BACK: &[&str] = &[
    "mean",
    "meant",
    "sorry",
    "wait",
    "actually",
    "rather",
    "correction",
    "oops",
    "typo",
    "dizer",
    "digo",
    "melhor",
    "verdade",
    "errei",
    "ops",
    "pera",
    "espera",
    "desculpa",
    "desculpe",
];

/// Negations that take back the value before them when not right before the next one.
const TAKE_BACK_NEGATORS: &[&str] = &["no", "nao", "nope"];

/// Words that add a second value instead of replacing the first (`PED-1 and also PED-2`).
const ADDITIVE: &[&str] = &[
    "also", "too", "plus", "and", "tambem", "e", "mais", "outro", "other",
];

/// The most words between two values for the second to restate the first.
const MAX_GAP_WORDS: usize = 6;

/// The spans taken back: for each pair of a parameter's readings where the later one is restated
/// after a [`TAKE_BACK`] word, from the earlier reading (with its label) to the later one's start.
/// The caller drops every reading inside them and treats them as filler.
pub(super) fn taken_back_spans(
    reader: &Reader<'_>,
    params: &[LabelledParameter<'_>],
    labels: &Labels,
    candidates: &[Vec<Candidate>],
) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    for (i, cands) in candidates.iter().enumerate() {
        let mut spans: Vec<&Range<usize>> = cands.iter().map(|c| &c.span).collect();
        spans.sort_by_key(|s| s.start);
        spans.dedup();
        let money = params
            .get(i)
            .is_some_and(|p| matches!(p.kind, super::ParameterKind::Money));
        // Every restatement counts: `PED-1, sorry, PED-2, no wait, PED-3` keeps PED-3.
        for pair in spans.windows(2) {
            let (Some(old), Some(new)) = (pair.first(), pair.get(1)) else {
                continue;
            };
            if !restates(reader, old, new) {
                continue;
            }
            let start = reader
                .label_run(old.start, labels.longest + 1, money)
                .and_then(|run| labels.hit(i, &run, &reader.words))
                .map_or(old.start, |(start, _)| start);
            out.push(start..new.start);
        }
    }
    out
}

/// Whether the words between `old` and `new` take `old` back.
fn restates(reader: &Reader<'_>, old: &Range<usize>, new: &Range<usize>) -> bool {
    if old.end > new.start {
        return false;
    }
    let gap: Vec<&(Range<usize>, String)> = reader
        .words
        .iter()
        .filter(|(r, _)| r.start >= old.end && r.end <= new.start)
        .collect();
    if gap.len() > MAX_GAP_WORDS || gap.iter().any(|(_, w)| ADDITIVE.contains(&w.as_str())) {
        return false;
    }
    gap.iter().any(|(r, w)| {
        TAKE_BACK.contains(&w.as_str())
            || (TAKE_BACK_NEGATORS.contains(&w.as_str())
                && reader
                    .text
                    .get(r.end..)
                    .is_some_and(|after| after.trim_start().starts_with([',', '.', ';', '!', ':'])))
    })
}
