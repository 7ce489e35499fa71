//! Typos mended before a message is embedded. Customers swap and drop letters (`cancle my
//! ordre`, `rastrear meu peddio`, `mudar o endereso`), and a small embeddings model reads the
//! misspelt word as another token altogether: `i need to cancle my ordre` read the cancellation
//! at 0.84, under the threshold. A word the assistant's own vocabulary (its examples, action
//! verbs, titles and labels, and the recogniser's lexicon) does not know is replaced by the one
//! vocabulary word it is a single slip away from: two neighbouring letters swapped (words of four
//! letters or more), or one letter dropped, added or replaced between the first and the last (five
//! or more: a different ending is an inflection, `parcelar` is not `parcela`; a different first
//! letter is often the other language, `chave` is not `have`). A word with two
//! such neighbours, or none, stays as written. Only what is embedded changes; values and the
//! lexical readings still read the customer's own words.

use std::borrow::Cow;
use std::collections::{BTreeSet, HashMap};

/// The shortest word a swap may mend; shorter words are too often other words.
const MIN_SWAPPED: usize = 4;
/// The shortest word a dropped, added or replaced letter may mend.
const MIN_EDITED: usize = 5;

/// A text as mended, and how many of its words were.
#[derive(Debug)]
pub(super) struct Mended<'t> {
    pub(super) text: Cow<'t, str>,
    pub(super) words: usize,
}

/// One assistant's words, folded (lower case, no accents), each with its written form.
#[derive(Debug, Clone, Default)]
pub(super) struct Vocabulary {
    words: HashMap<String, String>,
}

impl Vocabulary {
    pub(super) fn from_texts<'a>(texts: impl IntoIterator<Item = &'a str>) -> Vocabulary {
        let mut words = HashMap::new();
        for text in texts {
            for (_, written) in letter_runs(text) {
                words
                    .entry(fold(written))
                    .or_insert_with(|| written.to_lowercase());
            }
        }
        Vocabulary { words }
    }

    /// Whether `word` is one of the assistant's words (folded).
    pub(super) fn knows(&self, word: &str) -> bool {
        self.words.contains_key(&fold(word))
    }

    /// `text` with each unknown word a single slip away from exactly one known word replaced
    /// by it; the text itself when nothing is mended.
    pub(super) fn mend<'t>(&self, text: &'t str) -> Mended<'t> {
        let mut out = String::new();
        let mut at = 0;
        let mut words = 0;
        for (start, written) in letter_runs(text) {
            let Some(known) = self.nearest(&fold(written)) else {
                continue;
            };
            out.push_str(&text[at..start]);
            out.push_str(known);
            at = start + written.len();
            words += 1;
        }
        if words == 0 {
            return Mended {
                text: Cow::Borrowed(text),
                words,
            };
        }
        out.push_str(&text[at..]);
        Mended {
            text: Cow::Owned(out),
            words,
        }
    }

    fn nearest(&self, word: &str) -> Option<&str> {
        let letters: Vec<char> = word.chars().collect();
        if letters.len() < MIN_SWAPPED || self.words.contains_key(word) {
            return None;
        }
        let swapped = self.known(crate::domain::confirmation::neighbours_swapped(&letters));
        if swapped.len() == 1 {
            return swapped.into_iter().next();
        }
        if !swapped.is_empty() || letters.len() < MIN_EDITED {
            return None;
        }
        let edited = self.known(edits(&letters));
        (edited.len() == 1)
            .then(|| edited.into_iter().next())
            .flatten()
    }

    fn known(&self, candidates: impl Iterator<Item = String>) -> BTreeSet<&str> {
        candidates
            .filter_map(|c| self.words.get(&c).map(String::as_str))
            .collect()
    }
}

/// Runs of letters (apostrophes inside a word included: `don't`) with their byte offsets; a
/// run touching a digit (`ped1001`) is no word to mend and is left out.
fn letter_runs(text: &str) -> Vec<(usize, &str)> {
    let mut out = Vec::new();
    let mut start: Option<usize> = None;
    let mut digit = false;
    let chars: Vec<(usize, char)> = text.char_indices().collect();
    for (k, &(i, c)) in chars.iter().enumerate() {
        let inner_apostrophe = c == '\''
            && start.is_some()
            && chars.get(k + 1).is_some_and(|(_, n)| n.is_alphabetic());
        if c.is_alphabetic() || inner_apostrophe {
            start.get_or_insert(i);
            continue;
        }
        if let Some(s) = start.take() {
            if !digit && !c.is_ascii_digit() {
                out.push((s, &text[s..i]));
            }
        }
        digit = c.is_ascii_digit();
    }
    if let Some(s) = start {
        if !digit {
            out.push((s, &text[s..]));
        }
    }
    out
}

fn fold(word: &str) -> String {
    crate::domain::parameter::folded_words(word).concat()
}

fn edits(letters: &[char]) -> impl Iterator<Item = String> + '_ {
    const ALPHABET: &str = "abcdefghijklmnopqrstuvwxyz";
    // Never at the last letter: a word's ending is its inflection (`parcelar` is no slip of
    // `parcela`, nor `cancels` of `cancel`), and an inflection not among the examples is still
    // its own word. Nor at the first: customers rarely miss it, and words of the other
    // language are one first letter apart (`chave` is not `have`).
    let last = letters.len() - 1;
    let dropped = (1..last).map(move |i| {
        let mut w = letters.to_vec();
        w.remove(i);
        w.into_iter().collect::<String>()
    });
    let added = (1..last).flat_map(move |i| {
        ALPHABET.chars().map(move |c| {
            let mut w = letters.to_vec();
            w.insert(i, c);
            w.into_iter().collect::<String>()
        })
    });
    let replaced = (1..last).flat_map(move |i| {
        ALPHABET
            .chars()
            .filter(move |&c| c != letters[i])
            .map(move |c| {
                let mut w = letters.to_vec();
                w[i] = c;
                w.into_iter().collect::<String>()
            })
    });
    dropped.chain(added).chain(replaced)
}

#[cfg(test)]
mod tests {
    use super::*;

    impl Vocabulary {
        fn mend_text<'t>(&self, text: &'t str) -> Cow<'t, str> {
            self.mend(text).text
        }
    }

    fn vocabulary() -> Vocabulary {
        Vocabulary::from_texts([
            "I want to cancel my order",
            "quero rastrear meu pedido",
            "mudar o endereço de entrega",
            "track the carrier",
            "show my bill",
            "ship it",
            "shop",
            "have a nice day",
        ])
    }

    #[test]
    fn a_word_one_slip_from_one_known_word_is_mended() {
        let v = vocabulary();
        assert_eq!(
            v.mend_text("i need to cancle my ordre"),
            "i need to cancel my order"
        );
        assert_eq!(v.mend_text("rastrear meu peddio"), "rastrear meu pedido");
        assert_eq!(v.mend_text("mudar o endereso"), "mudar o endereço");
        assert_eq!(
            v.mend_text("trakc PED-1001, the carier?"),
            "track PED-1001, the carrier?"
        );
    }

    #[test]
    fn known_short_ambiguous_and_numbered_words_stay() {
        let v = vocabulary();
        // Known, or too short to tell.
        assert_eq!(v.mend_text("cancel my order"), "cancel my order");
        assert_eq!(v.mend_text("my bil"), "my bil");
        // `shup` is one letter from both `ship` and `shop`, but four letters: swaps only.
        assert_eq!(v.mend_text("shup"), "shup");
        // A word next to a digit is a value, not a typo; a word far from every known one stays.
        assert_eq!(v.mend_text("ped1001 cancle"), "ped1001 cancel");
        assert_eq!(v.mend_text("newspaper"), "newspaper");
        // Another ending is another inflection, not a slip.
        assert_eq!(v.mend_text("orders tracked"), "orders tracked");
        assert_eq!(v.mend_text("me manda a chave"), "me manda a chave");
        assert!(matches!(
            v.mend_text("nothing to mend here"),
            Cow::Borrowed(_)
        ));
        assert_eq!(v.mend("cancle my ordre").words, 2);
    }
}
