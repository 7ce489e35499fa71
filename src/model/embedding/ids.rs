//! Ids as the embeddings model reads them: each replaced by its parameter's configured example
//! inside a sentence that says something besides it, so unfamiliar digits do not pull the
//! reading away from the request (docs/decisions.md, "An id inside a sentence is embedded as its
//! parameter's example").

use crate::domain::catalog::Assistant;
use crate::domain::parameter;

/// Digits standing alone as a word (`76123` in `order 76123`, not in `PED-76123` or `R$120`).
static DIGIT_RUN: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    regex::Regex::new(r"\b[0-9]+\b").expect("static regex is valid")
});

/// What an assistant's ids are read as when embedded (see [`IdStandIns::apply`]), worked out
/// once at start-up: each id pattern with its parameter's configured example, and the words
/// that name those parameters.
#[derive(Debug, Clone, Default)]
pub(super) struct IdStandIns {
    ids: Vec<(parameter::IdPattern, String)>,
    naming: Vec<String>,
    /// The words that name an id parameter and no other parameter (`order`, `pedido`): digits
    /// right after one are that id in its plain form (`where's my order 76123`).
    id_nouns: Vec<String>,
}

impl IdStandIns {
    pub(super) fn of(a: &Assistant) -> IdStandIns {
        let mut out = IdStandIns::default();
        for p in a.tools.values().flat_map(|t| &t.parameters) {
            let (parameter::ParameterKind::Id { pattern }, Some(example)) = (&p.kind, &p.example)
            else {
                continue;
            };
            if !out
                .ids
                .iter()
                .any(|(known, _)| known.as_str() == pattern.as_str())
            {
                out.ids.push((pattern.clone(), example.clone()));
            }
            for phrase in p.names() {
                out.naming.extend(parameter::folded_words(&phrase));
            }
        }
        let others: Vec<String> = a
            .tools
            .values()
            .flat_map(|t| &t.parameters)
            .filter(|p| !matches!(p.kind, parameter::ParameterKind::Id { .. }))
            .flat_map(|p| p.names())
            .flat_map(|phrase| parameter::folded_words(&phrase))
            .collect();
        out.id_nouns = out
            .naming
            .iter()
            .filter(|w| !others.contains(w) && w.chars().count() >= 2)
            .cloned()
            .collect();
        out
    }

    /// The spans of every id in `message`: its distinctive forms (`PED-48842`, `ped 86811`),
    /// and digits in an id's plain form right after a word that names only an id parameter
    /// (`my order 76123`, `pedido 310233`, `order #76123`).
    fn spans(&self, message: &str) -> Vec<(usize, std::ops::Range<usize>)> {
        let mut out: Vec<(usize, std::ops::Range<usize>)> = Vec::new();
        let free = |out: &[(usize, std::ops::Range<usize>)], r: &std::ops::Range<usize>| {
            !out.iter().any(|(_, o)| o.start < r.end && r.start < o.end)
        };
        for (i, (pattern, _)) in self.ids.iter().enumerate() {
            // Grouped first: `ped 11 427` is one id, not `ped 11` and `427`.
            for (r, _) in pattern.find_grouped_in(message) {
                if free(&out, &r) {
                    out.push((i, r));
                }
            }
            for r in pattern.find_in(message) {
                if free(&out, &r) {
                    out.push((i, r));
                }
            }
        }
        for m in parameter::DIGIT_GROUPS
            .find_iter(message)
            .chain(DIGIT_RUN.find_iter(message))
        {
            if !free(&out, &m.range()) {
                continue;
            }
            let Some(i) = self.ids.iter().position(|(p, _)| {
                p.canonical_plain(m.as_str()).is_some()
                    || p.canonical_plain_grouped(m.as_str()).is_some()
            }) else {
                continue;
            };
            let before = message.get(..m.start()).unwrap_or("");
            let named = parameter::folded_words(before)
                .last()
                .is_some_and(|w| self.id_nouns.contains(w));
            let joined = before
                .trim_end_matches([' ', '#', ':'])
                .ends_with(|c: char| c.is_alphabetic());
            if named && joined {
                out.push((i, m.range()));
            }
        }
        out
    }

    /// `message` with every id (PR-1's distinctive forms) replaced by its parameter's
    /// configured example (`PED-48842` → `PED-1001`): an id's digits say nothing about the
    /// request, yet unfamiliar ones pulled the reading away (`can you first tell me where
    /// PED-48842 is?`: tracking 0.70; with `PED-1001`, 0.96).
    ///
    /// Only inside a sentence that says something besides its ids: two words or more that are
    /// not filler nor the id parameters' names, labels and synonyms (one for an id in its plain
    /// form). A message that is an id
    /// and a word or two (`o PED-82999 mesmo`) would read as whichever requests the example
    /// appears in, and ran a look-up nobody asked for; with its own digits it stays unclear.
    pub(super) fn apply(&self, message: &str) -> String {
        let mut found = self.spans(message);
        let spans: Vec<_> = found.iter().map(|(_, r)| r.clone()).collect();
        // Bare digits read as a house number or a CEP (`where's my order 76123`: the address
        // change 0.92), so one word besides is enough for them.
        let plain = found.iter().any(|(_, r)| {
            message
                .get(r.clone())
                .is_some_and(|t| t.chars().all(|c| c.is_ascii_digit()))
        });
        let besides: Vec<String> = parameter::content_words(message, &spans)
            .into_iter()
            .filter(|w| !self.naming.contains(w))
            .collect();
        // A question word says what is asked about the id (`where is my order ped 11427`:
        // tracking 0.70 with its own digits, 0.92 with the example's).
        let asks = besides
            .iter()
            .any(|w| parameter::QUESTION_WORDS.contains(&w.as_str()));
        let says_more = besides.len() >= if plain || asks { 1 } else { 2 };
        if spans.is_empty() || !says_more {
            return message.to_owned();
        }
        found.sort_by_key(|(_, r)| std::cmp::Reverse(r.start));
        let mut text = message.to_owned();
        for (i, range) in found {
            if let Some((_, example)) = self.ids.get(i) {
                if text.is_char_boundary(range.start) && text.is_char_boundary(range.end) {
                    text.replace_range(range, example);
                }
            }
        }
        text
    }
}
