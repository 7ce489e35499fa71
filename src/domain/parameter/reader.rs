//! The candidate readings of a message for each kind of parameter.

use std::ops::Range;

use serde_json::Value;

use crate::domain::locale::Locale;

use super::cep::cep_canonical;
use super::date::parse_date;
use super::money::{money_read, MoneyRead};
use super::number::{decimal_separator, is_digits, number_value, numeric_shape, Ambiguity};
use super::scan::{
    standalone, Literal, CEP_SHAPE, CEP_SPACED, DASHED_DIGITS, DATE_SHAPE, NO_NUMBER,
};
use super::text::{is_inline_space, phrase, tokens};
use super::validate::check_range;
use super::{EnumValue, IdPattern, InvalidReason, ParameterKind};

fn overlaps_range(a: &Range<usize>, b: &Range<usize>) -> bool {
    a.start < b.end && b.start < a.end
}

/// A possible reading of part of the message for one parameter.
#[derive(Debug, Clone)]
pub(super) struct Candidate {
    pub(super) span: Range<usize>,
    pub(super) value: Result<Value, InvalidReason>,
    /// Read only when introduced by the parameter's label (a bare integer as money while an
    /// integer or number parameter is also read: `the amount is 50`).
    pub(super) label_only: bool,
    /// MG-4a: an id's plain form (`1001` for `PED-[0-9]{4,}`): never distinctive; it fills the
    /// parameter the last reply asked for, after its label, or in a correction.
    pub(super) plain_id: bool,
}

/// What one call knows while reading a message.
pub(super) struct Reader<'t> {
    pub(super) text: &'t str,
    pub(super) locale: Locale,
    pub(super) literals: Vec<Literal>,
    /// Space-grouped literals: no reading may take a part of one.
    pub(super) grouped: Vec<Range<usize>>,
    /// A bare integer is money only when no integer/number parameter is being read.
    pub(super) bare_money: bool,
    pub(super) words: Vec<(Range<usize>, String)>,
}

impl Reader<'_> {
    pub(super) fn candidates(&self, kind: &ParameterKind) -> Vec<Candidate> {
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
                    plain_id: false,
                })
            })
            .collect();
        if let Some(loose) = &pattern.loose {
            for m in loose.find_iter(text) {
                let taken = out.iter().any(|c| c.span == m.range());
                if taken || !standalone(text, &m.range()) {
                    continue;
                }
                if let Some(v) = pattern.canonical_loose(m.as_str()) {
                    out.push(Candidate {
                        span: m.range(),
                        value: Ok(Value::String(v)),
                        label_only: false,
                        plain_id: false,
                    });
                }
            }
        }
        self.grouped_ids(pattern, &mut out);
        self.grouped_plain_ids(pattern, &mut out);
        self.loose_near_misses(pattern, &mut out);
        for span in tokens(text) {
            let token = text.get(span.clone()).unwrap_or("");
            // A token inside a near-miss or a grouped id (`ped 35 92 47`) is read with it.
            if out.iter().any(|c| {
                overlaps_range(&c.span, &span) && (c.value.is_err() || c.span.len() > span.len())
            }) {
                continue;
            }
            // MG-4a, RP-4: digits alone that are not the id's rest (`12` for `[0-9]{4,}`) are a
            // near-miss of its plain form, explained when the id was asked for.
            let digits = !token.is_empty() && token.bytes().all(|b| b.is_ascii_digit());
            if digits && pattern.plain.is_some() && pattern.canonical_plain(token).is_none() {
                if standalone(text, &span) {
                    out.push(Candidate {
                        span: span.clone(),
                        value: Err(InvalidReason::Format),
                        label_only: false,
                        plain_id: true,
                    });
                }
                continue;
            }
            if let Some(v) = pattern.canonical_plain(token) {
                if standalone(text, &span) && !out.iter().any(|c| overlaps_range(&c.span, &span)) {
                    out.push(Candidate {
                        span: span.clone(),
                        value: Ok(Value::String(v)),
                        label_only: false,
                        plain_id: true,
                    });
                }
                continue;
            }
            if pattern.has_prefix(token)
                && token.bytes().any(|b| b.is_ascii_digit())
                && !pattern.is_match(token)
            {
                out.push(Candidate {
                    span,
                    value: Err(InvalidReason::Format),
                    label_only: false,
                    plain_id: false,
                });
            }
        }
        out.sort_by_key(|c| c.span.start);
        out
    }

    /// MG-4a: the prefix before digits dictated in groups (`ped 35 92 47`), one id.
    fn grouped_ids(&self, pattern: &IdPattern, out: &mut Vec<Candidate>) {
        for m in pattern.grouped.iter().flat_map(|g| g.find_iter(self.text)) {
            let taken = out.iter().any(|c| overlaps_range(&c.span, &m.range()));
            if let Some(v) = pattern.canonical_grouped(m.as_str()) {
                if !taken && standalone(self.text, &m.range()) {
                    out.push(Candidate {
                        span: m.range(),
                        value: Ok(Value::String(v)),
                        label_only: false,
                        plain_id: false,
                    });
                }
            }
        }
    }

    /// MG-4a: the plain form dictated in groups (`pedido 382 406`, `11 427`): one plain id
    /// over the groups, so no group is read apart as a near-miss. Not inside a space-grouped
    /// literal of another kind (`R$ 1 500`).
    fn grouped_plain_ids(&self, pattern: &IdPattern, out: &mut Vec<Candidate>) {
        for m in super::id::DIGIT_GROUPS.find_iter(self.text) {
            let taken = out.iter().any(|c| overlaps_range(&c.span, &m.range()))
                || self.grouped.iter().any(|g| overlaps_range(g, &m.range()));
            if taken || !standalone(self.text, &m.range()) {
                continue;
            }
            if let Some(v) = pattern.canonical_plain_grouped(m.as_str()) {
                out.push(Candidate {
                    span: m.range(),
                    value: Ok(Value::String(v)),
                    label_only: false,
                    plain_id: true,
                });
            }
        }
    }

    /// RP-4: the prefix typed loosely before digits that are not the rest (`ped 211`): one
    /// near-miss over both words, so the digits are not read apart from it.
    fn loose_near_misses(&self, pattern: &IdPattern, out: &mut Vec<Candidate>) {
        let Some(loose_digits) = &pattern.loose_digits else {
            return;
        };
        for m in loose_digits.find_iter(self.text) {
            let taken = out.iter().any(|c| overlaps_range(&c.span, &m.range()));
            if !taken
                && standalone(self.text, &m.range())
                && pattern.canonical_loose(m.as_str()).is_none()
            {
                out.push(Candidate {
                    span: m.range(),
                    value: Err(InvalidReason::Format),
                    label_only: false,
                    plain_id: false,
                });
            }
        }
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
                    plain_id: false,
                })
            })
            .collect();
        for m in CEP_SPACED.find_iter(text) {
            if !standalone(text, &m.range())
                || out
                    .iter()
                    .any(|c| c.span.start < m.end() && m.start() < c.span.end)
            {
                continue;
            }
            if let Some(v) = cep_canonical(&m.as_str().replace(' ', "-")) {
                out.push(Candidate {
                    span: m.range(),
                    value: Ok(Value::String(v)),
                    label_only: false,
                    plain_id: false,
                });
            }
        }
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
                    plain_id: false,
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
                    plain_id: false,
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
                plain_id: false,
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
                    plain_id: false,
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
                    plain_id: false,
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
                    plain_id: false,
                })
            })
            .collect()
    }

    fn integer_candidates(&self, min: Option<i64>, max: Option<i64>) -> Vec<Candidate> {
        let no_number = NO_NUMBER.find_iter(self.text).map(|m| Candidate {
            span: m.range(),
            value: Err(InvalidReason::Format),
            label_only: false,
            plain_id: false,
        });
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
                    plain_id: false,
                })
            })
            .chain(no_number)
            .collect()
    }
}
