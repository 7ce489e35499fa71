//! Deterministic confirmation recogniser (PR-6): plain affirmations and negations in English and
//! Brazilian Portuguese.
//!
//! A message decides only when every word in it belongs to a known affirmation, negation or
//! politeness phrase, and it holds affirmations or negations but not both. Matching is
//! case-insensitive and accent-insensitive (`NÃO` = `nao`), curly apostrophes count as straight
//! ones (`don’t`), and punctuation between words is ignored (`yes, go ahead!`).
//!
//! Decisions where the contract is silent:
//! - `thanks`, `thank you`, `obrigado`/`obrigada`, `valeu` are politeness like `please` and
//!   `por favor`: `no thanks` is a negation, `sim, obrigado` an affirmation; politeness alone
//!   decides nothing.
//! - Longer phrases win over their words: `não quero`, `não pode`, `claro que não`, `of course
//!   not` and `don't do it` are negations; `please do` is an affirmation.
//! - Emoji, digits or any symbol outside ordinary punctuation make the message undecided
//!   (`yes 👍` → `None`): the recogniser only settles plain-text answers.
//! - Bare `right`, `cancel` and `stop` are not included: they are ambiguous between a
//!   confirmation answer and a new request.

/// The user's answer to a confirmation question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confirmation {
    Affirm,
    Deny,
}

/// Affirmations, folded (lowercase, no accents), words separated by one space.
const AFFIRM: &[&str] = &[
    // en
    "yes",
    "yeah",
    "yea",
    "yep",
    "yup",
    "sure",
    "sure thing",
    "ok",
    "okay",
    "okey",
    "alright",
    "all right",
    "confirm",
    "confirmed",
    "i confirm",
    "correct",
    "that's correct",
    "thats correct",
    "that is correct",
    "that's right",
    "thats right",
    "that is right",
    "go ahead",
    "go on",
    "please do",
    "do it",
    "proceed",
    "absolutely",
    "of course",
    "definitely",
    "exactly",
    "affirmative",
    "sounds good",
    // pt-BR
    "sim",
    "pode",
    "pode sim",
    "pode ser",
    "pode seguir",
    "pode continuar",
    "pode prosseguir",
    "pode fazer",
    "pode confirmar",
    "claro",
    "claro que sim",
    "confirmo",
    "confirma",
    "confirmado",
    "isso",
    "isso mesmo",
    "isso ai",
    "certo",
    "correto",
    "exato",
    "exatamente",
    "com certeza",
    "beleza",
    "ta bom",
    "ta certo",
    "esta bom",
    "esta certo",
    "perfeito",
    "positivo",
    "quero",
    "quero sim",
    "manda ver",
];

/// Negations, folded.
const DENY: &[&str] = &[
    // en
    "no",
    "nope",
    "nah",
    "don't",
    "dont",
    "do not",
    "don't do it",
    "do not do it",
    "not now",
    "no way",
    "negative",
    "of course not",
    "absolutely not",
    "definitely not",
    // pt-BR
    "nao",
    "nao quero",
    "nao pode",
    "nao precisa",
    "claro que nao",
    "agora nao",
    "negativo",
    "de jeito nenhum",
    "nem pensar",
];

/// Politeness that neither affirms nor denies, folded.
const POLITE: &[&str] = &[
    // en
    "please",
    "pls",
    "plz",
    "thanks",
    "thank you",
    "thanks a lot",
    "thank you very much",
    "thx",
    // pt-BR
    "por favor",
    "pfv",
    "obrigado",
    "obrigada",
    "muito obrigado",
    "muito obrigada",
    "brigado",
    "brigada",
    "valeu",
    "grato",
    "grata",
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Class {
    Affirm,
    Deny,
    Polite,
}

/// Decides only for a message made of affirmation (or negation) words and politeness alone;
/// anything else → None.
pub fn recognise(text: &str) -> Option<Confirmation> {
    let words = words(text)?;
    let mut affirm = false;
    let mut deny = false;
    let mut i = 0;
    while i < words.len() {
        let rest = words.get(i..).unwrap_or(&[]);
        let (len, class) = longest_phrase(rest)?;
        match class {
            Class::Affirm => affirm = true,
            Class::Deny => deny = true,
            Class::Polite => {}
        }
        i += len;
    }
    match (affirm, deny) {
        (true, false) => Some(Confirmation::Affirm),
        (false, true) => Some(Confirmation::Deny),
        _ => None,
    }
}

/// The longest known phrase at the start of `rest`: its length in words and its class.
fn longest_phrase(rest: &[String]) -> Option<(usize, Class)> {
    let lists = [
        (AFFIRM, Class::Affirm),
        (DENY, Class::Deny),
        (POLITE, Class::Polite),
    ];
    let mut best: Option<(usize, Class)> = None;
    for (list, class) in lists {
        for phrase in list {
            let len = phrase.split(' ').count();
            let matches = len <= rest.len()
                && phrase
                    .split(' ')
                    .zip(rest)
                    .all(|(expected, word)| expected == word);
            if matches && best.is_none_or(|(l, _)| len > l) {
                best = Some((len, class));
            }
        }
    }
    best
}

/// The folded words of the message; `None` if it holds anything but letters, digits, whitespace
/// and ordinary punctuation.
fn words(text: &str) -> Option<Vec<String>> {
    let chars: Vec<char> = text
        .chars()
        .map(|c| match c {
            '\u{2019}' | '\u{2018}' | '\u{2bc}' | '\u{b4}' | '`' => '\'',
            other => other,
        })
        .collect();
    let mut out = Vec::new();
    let mut current = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let inner_apostrophe =
            c == '\'' && !current.is_empty() && chars.get(i + 1).is_some_and(|n| n.is_alphabetic());
        if c.is_alphanumeric() || inner_apostrophe || is_combining(c) {
            for lc in c.to_lowercase() {
                if !is_combining(lc) {
                    current.push(strip_accent(lc));
                }
            }
        } else if c.is_whitespace() || is_punctuation(c) {
            if !current.is_empty() {
                out.push(std::mem::take(&mut current));
            }
        } else {
            return None;
        }
    }
    if !current.is_empty() {
        out.push(current);
    }
    Some(out)
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            c,
            '¡' | '¿' | '…' | '«' | '»' | '“' | '”' | '„' | '–' | '—' | '·' | '\u{200b}'
        )
}

fn is_combining(c: char) -> bool {
    ('\u{300}'..='\u{36f}').contains(&c)
}

fn strip_accent(c: char) -> char {
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' => 'a',
        'ç' => 'c',
        'è' | 'é' | 'ê' | 'ë' => 'e',
        'ì' | 'í' | 'î' | 'ï' => 'i',
        'ñ' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' => 'o',
        'ù' | 'ú' | 'û' | 'ü' => 'u',
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(texts: &[&str], expected: Option<Confirmation>) {
        for text in texts {
            assert_eq!(recognise(text), expected, "{text:?}");
        }
    }

    #[test]
    fn english_affirmations() {
        // PR-6
        all(
            &[
                "yes",
                "yeah",
                "yep",
                "sure",
                "ok",
                "okay",
                "confirm",
                "correct",
                "go ahead",
                "please do",
                "Yes!",
                "  OK.  ",
                "yes, go ahead",
                "Yes please",
                "yes, thanks",
                "YES YES",
                "that's right",
                "that’s correct",
                "sure, go ahead!",
                "of course",
                "all right...",
            ],
            Some(Confirmation::Affirm),
        );
    }

    #[test]
    fn portuguese_affirmations() {
        // PR-6
        all(
            &[
                "sim",
                "pode",
                "claro",
                "confirmo",
                "isso",
                "ok",
                "pode sim",
                "sim, pode",
                "sim por favor",
                "Sim, obrigado!",
                "isso mesmo",
                "SIM",
                "tá bom",
                "com certeza",
                "claro que sim",
                "isso aí",
            ],
            Some(Confirmation::Affirm),
        );
    }

    #[test]
    fn english_negations() {
        // PR-6: `thanks` is politeness, so `no thanks` is a plain negation.
        all(
            &[
                "no",
                "nope",
                "don't",
                "don’t",
                "DON'T!",
                "No.",
                "no thanks",
                "no, thank you",
                "please don't",
                "do not",
                "of course not",
                "don't do it",
                "no no no",
            ],
            Some(Confirmation::Deny),
        );
    }

    #[test]
    fn portuguese_negations() {
        // PR-6
        all(
            &[
                "não",
                "nao",
                "NÃO",
                "não quero",
                "nao quero",
                "não, obrigado",
                "Não, por favor.",
                "não pode",
                "claro que não",
                "na\u{303}o",
            ],
            Some(Confirmation::Deny),
        );
    }

    #[test]
    fn anything_else_is_undecided() {
        // PR-6: only plain affirmations/negations decide; the rest goes to the model.
        all(
            &[
                "",
                "   ",
                "!!!",
                "wait, the number is 45, not 10",
                "yes but change the address",
                "no, cancel it and show my bill",
                "yes no",
                "sim, não",
                "pode não",
                "isso não",
                "don't do it, do it",
                "please",
                "thanks",
                "por favor",
                "obrigado",
                "👍",
                "😀",
                "yes 👍",
                "yes 2",
                "sim, o pedido é PED-1001",
                "yess",
                "right",
                "cancel",
                "what?",
                "s",
                "n",
                "'",
                "don'",
            ],
            None,
        );
    }

    #[test]
    fn serialises_snake_case() {
        // PR-6
        assert_eq!(
            serde_json::to_value(Confirmation::Affirm).ok(),
            Some(serde_json::json!("affirm"))
        );
        assert_eq!(
            serde_json::to_value(Confirmation::Deny).ok(),
            Some(serde_json::json!("deny"))
        );
    }

    #[test]
    fn phrase_lists_are_folded_and_disjoint() {
        // PR-6: each phrase is written folded and belongs to one class only.
        let lists = [AFFIRM, DENY, POLITE];
        for (i, list) in lists.iter().enumerate() {
            for phrase in *list {
                assert_eq!(
                    words(phrase).map(|w| w.join(" ")),
                    Some((*phrase).to_string()),
                    "{phrase} is not folded"
                );
                for other in lists.iter().skip(i + 1) {
                    assert!(!other.contains(phrase), "{phrase} is in two lists");
                }
            }
        }
    }

    proptest! {
        #[test]
        fn recognise_never_panics(text in any::<String>()) {
            // PR-6
            let _ = recognise(&text);
        }

        #[test]
        fn mixed_answers_stay_undecided(
            a in prop::sample::select(vec!["yes", "sim", "ok", "claro", "go ahead"]),
            d in prop::sample::select(vec!["no", "não", "nope", "don't", "nao quero"]),
            sep in prop::sample::select(vec![" ", ", ", "! ", "... "]),
        ) {
            // PR-6: mixed affirm and deny words → None, in either order (`não pode` is one
            // negation phrase, so `pode` is not sampled here).
            prop_assert_eq!(recognise(&format!("{a}{sep}{d}")), None);
            prop_assert_eq!(recognise(&format!("{d}{sep}{a}")), None);
        }
    }
}
