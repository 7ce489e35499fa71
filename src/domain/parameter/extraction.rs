//! Extraction: the values a message fills ([`Extraction`]), read liberally or PR-1 clear only.

use std::collections::BTreeMap;
use std::ops::Range;

use serde_json::Value;

use crate::domain::locale::Locale;

use super::filler::is_filler;
use super::labels::Labels;
use super::reader::{Candidate, Reader};
use super::restated::taken_back_spans;
use super::scan::literals;
use super::text::{overlaps, slice, words};
use super::{Invalid, InvalidReason, ParameterKind};

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
    /// Whether the message is nothing but its values, their labels and filler (and, read as a
    /// correction, correction markers and negated old values): `I meant PED-1002`, not `I want
    /// to track PED-1002`. Only a whole reading corrects a collected value (MG-6).
    pub whole: bool,
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
    read(
        &labelled,
        text,
        locale,
        Mode::Liberal,
        ClearOptions::default(),
    )
}

/// [`extract`] with labels: a value introduced by its parameter's label is preferred to an
/// earlier unlabelled one (`I called 3 times, the number is 45` reads the house number 45).
/// Every value [`extract_clear`] gives for the same input is also given here.
pub fn extract_labelled(
    params: &[LabelledParameter<'_>],
    text: &str,
    locale: Locale,
) -> Extraction {
    read(params, text, locale, Mode::Liberal, ClearOptions::default())
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
    read(params, text, locale, Mode::Clear, ClearOptions::default())
}

/// What [`extract_clear_with`] knows beyond PR-1's message.
#[derive(Debug, Clone, Copy, Default)]
pub struct ClearOptions<'a> {
    /// MG-4a: the parameter the last reply asked for. An id's plain form alone (`1001` for
    /// `PED-[0-9]{4,}`) fills it; a plain value several parameters accept goes to it.
    pub asked: Option<&'a str>,
    /// MG-6: read correction forms too. Correction markers (`I meant`, `make that`, `instead`,
    /// `quis dizer`, `but`…) count as filler, and a value after a negation (`not 150`, `não é
    /// 20`) is set aside as the old value, so `make that 15, not 150` and `não é 20, é 22`
    /// read 15 and 22. An id's plain form alone fills the id when no other parameter reads it.
    pub correction: bool,
    /// MG-6: the values held now. A negated value the customer does not hold (`wait no
    /// PED-1178` while PED-1187 is shown) is no old value: typed without a comma, `no` answers
    /// and the value is the new one.
    pub held: Option<&'a BTreeMap<String, Value>>,
}

/// [`extract_clear`] with what the conversation knows: the parameter asked for (MG-4a) and
/// correction forms (MG-6).
pub fn extract_clear_with(
    params: &[LabelledParameter<'_>],
    text: &str,
    locale: Locale,
    options: ClearOptions<'_>,
) -> Extraction {
    read(params, text, locale, Mode::Clear, options)
}

/// MG-6: the spans of values that follow a negation (`not 150`, `não é 20`, `isn't 45`), each
/// from its negation to the value's end, skipping filler words in between.
fn negated_spans(
    reader: &Reader<'_>,
    params: &[LabelledParameter<'_>],
    candidates: &[Vec<Candidate>],
    held: Option<&BTreeMap<String, Value>>,
) -> Vec<Range<usize>> {
    let mut out: Vec<Range<usize>> = Vec::new();
    // Old: the value held, or one of several for its parameter (`não é PED-1001, é PED-2002`
    // names an older value beside the new one). Not knowing what is held, any negated value.
    let old = |i: usize, c: &Candidate| {
        let Some(held) = held else {
            return true;
        };
        let others = || {
            candidates
                .get(i)
                .into_iter()
                .flatten()
                .filter(|o| o.span != c.span)
        };
        match (params.get(i).and_then(|p| held.get(p.name)), &c.value) {
            // Beside the held value (`no it's 47,50 not 74,50` while 74,50 is shown), another
            // value is the new one, whatever negation stands before it.
            (Some(h), Ok(v)) => {
                h == v
                    || (others().next().is_some() && !others().any(|o| o.value.as_ref() == Ok(h)))
            }
            (None, Ok(_)) => true,
            // An invalid reading (`22` as an order id) says nothing about what is held.
            (_, Err(_)) => false,
        }
    };
    let read = candidates
        .iter()
        .enumerate()
        .flat_map(|(i, cs)| cs.iter().map(move |c| (i, c)));
    for (_, c) in read.clone() {
        // A value no parameter holds as it is read here is the new one, negation or not.
        if !read.clone().any(|(i, o)| o.span == c.span && old(i, o)) {
            continue;
        }
        let mut p = reader.words.partition_point(|(r, _)| r.end <= c.span.start);
        while p > 0 && reader.words.get(p - 1).is_some_and(|(_, w)| is_filler(w)) {
            p -= 1;
        }
        let Some((r, word)) = p.checked_sub(1).and_then(|q| reader.words.get(q)) else {
            continue;
        };
        let contracted = word == "t"
            && p >= 2
            && reader
                .words
                .get(p - 2)
                .is_some_and(|(_, w)| NEGATED_AUXILIARIES.contains(&w.as_str()));
        // `no, 45` answers; `no 45` / `not 45` negates: no punctuation between negation and value.
        let next_start = reader.words.get(p).map_or(c.span.start, |(n, _)| n.start);
        let gap = reader.text.get(r.end..next_start).unwrap_or("");
        let punctuated = gap.contains([',', '.', ';', '!', ':']);
        // pt-BR texting writes `não` as `n` (`n é 22, é 220`), but `n 350` / `n° 9` is `número`:
        // only `n é` negates. In English `n` is `and`.
        let texted = reader.locale == Locale::PtBr
            && word == "n"
            && reader
                .words
                .get(p)
                .is_some_and(|(n, w)| matches!(w.as_str(), "e" | "eh") && n.start == r.end + 1);
        if (NEGATORS.contains(&word.as_str()) || contracted || texted) && !punctuated {
            let start = if contracted {
                reader.words.get(p - 2).map_or(r.start, |(r2, _)| r2.start)
            } else {
                r.start
            };
            if !overlaps(&out, &(start..c.span.end)) {
                out.push(start..c.span.end);
            }
        }
    }
    out
}

/// The clause (between `,` `;` `.` `!` `?` outside `removed`) that holds every span in `spans`;
/// none when they span several clauses or the clause is a question (ends with `?`).
fn clause_of(text: &str, removed: &[Range<usize>], spans: &[Range<usize>]) -> Option<Range<usize>> {
    let first = spans.iter().map(|s| s.start).min()?;
    let last = spans.iter().map(|s| s.end).max()?;
    let breaks: Vec<usize> = text
        .char_indices()
        .filter(|(i, c)| {
            // A dash between spaces parts clauses as a comma does (`I misread it - it's 44,90`).
            let spaced_dash = matches!(c, '-' | '–' | '—')
                && text.get(..*i).is_some_and(|b| b.ends_with(' '))
                && text
                    .get(*i + c.len_utf8()..)
                    .is_some_and(|a| a.starts_with(' '));
            (matches!(c, ',' | ';' | '.' | '!' | '?') || spaced_dash)
                && !overlaps(removed, &(*i..*i + c.len_utf8()))
        })
        .map(|(i, _)| i)
        .collect();
    let start = breaks
        .iter()
        .rev()
        .find(|b| **b < first)
        .map_or(0, |b| b + 1);
    let end = breaks
        .iter()
        .find(|b| **b >= last)
        .copied()
        .unwrap_or(text.len());
    let inside = breaks.iter().all(|b| *b < first || *b >= last);
    // `is it 120??` questions a value; it does not give one.
    let questioned = text.get(end..).is_some_and(|rest| rest.starts_with('?'));
    (inside && !questioned).then_some(start..end)
}

/// Words that negate the value after them in a correction (folded).
const NEGATORS: &[&str] = &["not", "no", "nao", "nem", "never"];

/// English auxiliaries whose `n't` negates (`isn't 45`: the words `isn` `t`).
const NEGATED_AUXILIARIES: &[&str] = &["isn", "wasn", "aren", "don", "doesn", "didn"];

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

/// Whether a valid reading has a distinctive form (PR-1): a pattern id, a dashed CEP (or a spaced one
/// ending its clause), money with
/// a currency marker (its span then starts or ends with the marker, not a digit) — or, when
/// `cents` (the tool reads no other decimal or date), an amount written with its cents
/// (`39,90`, `1.050,00`): no other parameter could read it, and customers leave the currency
/// out (`contest 49,90 pls`).
fn distinctive(kind: &ParameterKind, text: &str, candidate: &Candidate, cents: bool) -> bool {
    if candidate.value.is_err() {
        return false;
    }
    let raw = text.get(candidate.span.clone()).unwrap_or("");
    match kind {
        ParameterKind::Id { .. } => !candidate.plain_id,
        // The spaced form (`70040 010`) when it ends a clause: `12310 100 vezes` counts times.
        ParameterKind::Cep => {
            raw.contains('-')
                || (raw.contains(' ')
                    && text.get(candidate.span.end..).is_some_and(|after| {
                        let after = after.trim_start();
                        after.is_empty() || after.starts_with([',', ';', '.', '!'])
                    }))
        }
        ParameterKind::Money => {
            !raw.starts_with(|c: char| c.is_ascii_digit())
                || !raw.ends_with(|c: char| c.is_ascii_digit())
                || (cents && written_with_cents(raw))
        }
        _ => false,
    }
}

/// `39,90`, `1.050,00`, `12.5` is not: a decimal separator followed by exactly two digits.
pub(super) fn written_with_cents(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    bytes.len() >= 4
        && matches!(bytes[bytes.len() - 3], b'.' | b',')
        && bytes[bytes.len() - 2..].iter().all(u8::is_ascii_digit)
        && bytes[bytes.len() - 4].is_ascii_digit()
}

/// One read of a message: every parameter's candidates, the old values a correction sets aside
/// (MG-6), then [`Selection`] picks the clear values and near-misses and decides whether the
/// message is nothing but them (PR-1 (a)).
fn read(
    params: &[LabelledParameter<'_>],
    text: &str,
    locale: Locale,
    mode: Mode,
    options: ClearOptions<'_>,
) -> Extraction {
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
    let mut candidates: Vec<Vec<Candidate>> =
        params.iter().map(|p| reader.candidates(p.kind)).collect();
    // MG-6: a value after a negation is the old one (`not 150`): set aside with its negation.
    let negated: Vec<Range<usize>> = if options.correction {
        negated_spans(&reader, params, &candidates, options.held)
    } else {
        Vec::new()
    };
    let negated_held = negated_held(params, &candidates, &negated, options);
    // MG-6 inside one message: a value restated after `I mean`, `sorry`, `quer dizer`…
    // replaces the reading before it, which is set aside like a negated one.
    let taken_back = taken_back_spans(&reader, params, &labels, &candidates);
    for cands in &mut candidates {
        cands.retain(|c| !overlaps(&negated, &c.span) && !overlaps(&taken_back, &c.span));
    }
    let selection = Selection {
        params,
        reader: &reader,
        labels: &labels,
        candidates,
        mode,
        options,
        order,
        cents: !params
            .iter()
            .any(|p| matches!(p.kind, ParameterKind::Number | ParameterKind::Date)),
    };
    let (mut picks, mut taken, filled) = selection.values();
    let mut misses = selection.near_misses(&filled, &mut taken);
    let mut set_aside = negated;
    set_aside.extend(taken_back);
    let whole = mode == Mode::Clear && selection.whole(&picks, &misses, &set_aside, &negated_held);
    if mode == Mode::Clear && !whole {
        // PR-1 (a): unlabelled plain readings count only when everything else is filler.
        picks.retain(|p| p.clarity != Clarity::Bare);
        misses.retain(|p| p.clarity != Clarity::Bare);
    }
    extraction(params, text, whole, picks, misses)
}

/// MG-6: parameters whose held value the message negates (`it was 105, not 150` while 150 is
/// held): another reading of them is the correction, whatever else the message says.
fn negated_held(
    params: &[LabelledParameter<'_>],
    candidates: &[Vec<Candidate>],
    negated: &[Range<usize>],
    options: ClearOptions<'_>,
) -> Vec<usize> {
    params
        .iter()
        .enumerate()
        .filter(|(i, p)| {
            let held = options.held.and_then(|h| h.get(p.name));
            candidates.get(*i).is_some_and(|cs| {
                cs.iter().any(|c| {
                    overlaps(negated, &c.span) && held.is_some_and(|h| c.value.as_ref() == Ok(h))
                })
            })
        })
        .map(|(i, _)| i)
        .collect()
}

/// The picks as an [`Extraction`], in parameter order.
fn extraction(
    params: &[LabelledParameter<'_>],
    text: &str,
    whole: bool,
    mut picks: Vec<Pick>,
    mut misses: Vec<Pick>,
) -> Extraction {
    picks.sort_by_key(|p| p.param);
    misses.sort_by_key(|p| p.param);
    let name = |i: usize| {
        params
            .get(i)
            .map_or_else(String::new, |p| p.name.to_string())
    };
    Extraction {
        whole,
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

/// What [`read`] knows once every candidate is read: it picks the values and near-misses.
struct Selection<'s, 't, 'p> {
    params: &'s [LabelledParameter<'p>],
    reader: &'s Reader<'t>,
    labels: &'s Labels,
    candidates: Vec<Vec<Candidate>>,
    mode: Mode,
    options: ClearOptions<'s>,
    /// Parameters, most specific type first.
    order: Vec<(u8, usize)>,
    /// An amount written with its cents is distinctive ([`distinctive`]).
    cents: bool,
}

impl Selection<'_, '_, '_> {
    /// MG-4a: whether a plain id form may fill parameter `i` without its label.
    fn plain_id_ok(&self, i: usize, c: &Candidate) -> bool {
        let asked = self
            .params
            .get(i)
            .is_some_and(|p| self.options.asked == Some(p.name));
        let alone = self.candidates.iter().enumerate().all(|(j, other)| {
            j == i
                || !other
                    .iter()
                    .any(|o| overlaps(std::slice::from_ref(&o.span), &c.span))
        });
        self.mode == Mode::Clear && (asked || (self.options.correction && alone))
    }

    /// The label introducing a candidate of parameter `i`, unless another parameter reading the
    /// same span is named at least as well by the same words.
    fn label_of(&self, i: usize, c: &Candidate) -> Option<usize> {
        let money = self
            .params
            .get(i)
            .is_some_and(|p| matches!(p.kind, ParameterKind::Money));
        let run = self
            .reader
            .label_run(c.span.start, self.labels.longest + 1, money)?;
        let (start, score) = self.labels.hit(i, &run, &self.reader.words)?;
        let contested = self.candidates.iter().enumerate().any(|(j, other)| {
            j != i
                // An id's plain form never contests another parameter's label (MG-4a).
                && other.iter().any(|o| o.span == c.span && !o.plain_id)
                && self
                    .labels
                    .hit(j, &run, &self.reader.words)
                    .is_some_and(|(_, s)| s >= score)
        });
        (!contested).then_some(start)
    }

    /// Valid readings: distinctive forms first, then labelled ones, then any; with the spans
    /// they took and which parameters they filled.
    fn values(&self) -> (Vec<Pick>, Vec<Range<usize>>, Vec<bool>) {
        let mut taken: Vec<Range<usize>> = Vec::new();
        let mut picks: Vec<Pick> = Vec::new();
        let mut filled = vec![false; self.params.len()];
        for pass in [Clarity::Distinctive, Clarity::Labelled(0), Clarity::Bare] {
            for &(_, i) in &self.order {
                if filled.get(i).copied().unwrap_or(true) {
                    continue;
                }
                if let Some(pick) = self.pick(pass, i, &taken) {
                    taken.push(pick.span.clone());
                    picks.push(pick);
                    if let Some(f) = filled.get_mut(i) {
                        *f = true;
                    }
                }
            }
        }
        (picks, taken, filled)
    }

    /// Parameter `i`'s first valid candidate that is clear in `pass` and free of `taken`; one a
    /// question mark follows (`120 reais?? … contestar 59,90`) only when no other is: a value
    /// put in question is not the one given.
    fn pick(&self, pass: Clarity, i: usize, taken: &[Range<usize>]) -> Option<Pick> {
        let (p, cands) = (self.params.get(i)?, self.candidates.get(i)?);
        let questioned = |c: &&Candidate| {
            let text = self.reader.text;
            text.get(c.span.end..)
                .is_some_and(|after| after.trim_start().starts_with('?'))
        };
        let given = cands.iter().filter(|c| !questioned(c));
        given.chain(cands.iter().filter(questioned)).find_map(|c| {
            if c.value.is_err() || overlaps(taken, &c.span) {
                return None;
            }
            if pass == Clarity::Distinctive && !distinctive(p.kind, self.reader.text, c, self.cents)
            {
                return None;
            }
            if c.label_only && !matches!(pass, Clarity::Labelled(_)) {
                return None;
            }
            if c.plain_id && pass == Clarity::Bare && !self.plain_id_ok(i, c) {
                return None;
            }
            let label = self.label_of(i, c);
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
        })
    }

    /// Near-misses, for parameters without a value: a labelled one first.
    fn near_misses(&self, filled: &[bool], taken: &mut Vec<Range<usize>>) -> Vec<Pick> {
        let mut misses: Vec<Pick> = Vec::new();
        for &(_, i) in &self.order {
            if filled.get(i).copied().unwrap_or(true) {
                continue;
            }
            let Some(cands) = self.candidates.get(i) else {
                continue;
            };
            let open: Vec<&Candidate> = cands
                .iter()
                .filter(|c| c.value.is_err() && !overlaps(taken, &c.span))
                .filter(|c| !c.plain_id || self.plain_id_ok(i, c))
                .collect();
            let labelled = open
                .iter()
                .find_map(|c| self.label_of(i, c).map(|start| (*c, Some(start))));
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
        misses
    }

    /// PR-1 (a): whether the message is nothing but its readings, their labels, the values set
    /// aside (negated or taken back) and filler — or, read as a correction, a clause of them
    /// followed by why, or bare readings that correct a negated held value.
    fn whole(
        &self,
        picks: &[Pick],
        misses: &[Pick],
        set_aside: &[Range<usize>],
        negated_held: &[usize],
    ) -> bool {
        let correction = self.options.correction;
        let spans: Vec<Range<usize>> = picks.iter().chain(misses).map(Pick::whole_span).collect();
        let mut removed = spans.clone();
        removed.extend(set_aside.iter().cloned());
        if self.reader.only_filler_outside(&removed, correction) {
            return true;
        }
        // MG-6: a correction may be followed by why (`yes but it's 310, forgot the tax`): the
        // clause holding every value is nothing but the correction.
        if correction
            && clause_of(self.reader.text, &removed, &spans)
                .is_some_and(|clause| self.reader.only_filler_within(&clause, &removed))
        {
            return true;
        }
        correction
            && !negated_held.is_empty()
            && picks
                .iter()
                .filter(|p| p.clarity == Clarity::Bare)
                .all(|p| negated_held.contains(&p.param))
            && !self.reader.text.trim_end().ends_with('?')
    }
}
