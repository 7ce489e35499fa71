//! A customer asking the bot to wait while they go and look something up (`one sec, let me find
//! the amount`, `peraí que vou ver na conta de luz`, `não lembro o valor, peraí`): read without a
//! model, because the words of what they will look at (`bill`, `conta`, `número`) drag a sentence
//! model to a tool nobody asked for. The transaction in flight is kept and its pending step asked
//! again (docs/decisions.md, "A hold-on is read before any model").
//!
//! Deliberately narrow, like the withdrawal reader: no digit and no question anywhere; the
//! message either opens (after openers) with a wait phrase followed by nothing or by the
//! customer's own next step (`let me`, `I'll`, `vou`, `deixa eu`), or ends with a wait phrase
//! after saying they do not have the value at hand (`don't remember`, `não sei`). Anything else
//! after it (`wait, don't cancel`, `one sec, my wife says no`) is another reading's.

use crate::domain::confirmation;
use crate::domain::parameter::QUESTION_WORDS;

/// Wait phrases, folded, words separated by one space.
const WAITS: &[&str] = &[
    "hold on",
    "hold on a sec",
    "hold on a second",
    "one sec",
    "one second",
    "a sec",
    "a second",
    "one moment",
    "a moment",
    "just a moment",
    "just a sec",
    "just a second",
    "give me a sec",
    "give me a second",
    "give me a minute",
    "give me a moment",
    "wait",
    "wait a sec",
    "wait a second",
    "wait a minute",
    "brb",
    "pera",
    "perai",
    "pera ai",
    "espera",
    "espera ai",
    "espera um pouco",
    "um minuto",
    "so um minuto",
    "um minutinho",
    "so um minutinho",
    "um momento",
    "so um momento",
    "um segundo",
    "so um segundo",
    "um instante",
    "so um instante",
    "aguarda",
    "aguarde",
    "ja volto",
];

/// The customer's own next step, folded (`let me check`, `I'll look`, `vou ver`), with and
/// without the apostrophe.
const OWN_STEP: &[&str] = &[
    "let me",
    "i'll",
    "i ll",
    "ill",
    "i will",
    "i'm gonna",
    "i m gonna",
    "im gonna",
    "gonna",
    "i need to",
    "i have to",
    "vou",
    "vo",
    "deixa eu",
    "deixa me",
    "preciso",
    "tenho que",
];

/// Not having the value at hand, folded (`don't remember`, `não lembro`).
const NOT_AT_HAND: &[&str] = &[
    "don't remember",
    "don't know",
    "don't have",
    "can't find",
    "don t remember",
    "dont remember",
    "don t know",
    "dont know",
    "don t have",
    "dont have",
    "can t find",
    "cant find",
    "nao lembro",
    "nao sei",
    "nao tenho",
    "nao achei",
    "nao to achando",
    "nao estou achando",
];

/// Words that may open the message before the wait phrase (`ah tá, peraí`).
const OPENERS: &[&str] = &["ah", "oh", "ok", "okay", "hmm", "hm", "ta", "then", "entao"];

/// Besides [`FIRST`], `antes` alone puts a question before what is pending (`aliás, antes, onde
/// tá o PED-90377?`), though it may ask about it (folded).
const BEFORE_THAT: &[&str] = &["antes"];

/// Whether `text` is a question put before what is pending (`hold on, before that - where's
/// PED-85230 right now?`, `aliás, antes, onde tá o PED-90377?`): a value in it belongs to the
/// question, not to the pending step (PR-3 before PR-1). One of [`FIRST`] or [`BEFORE_THAT`]
/// among the first six words, and a question mark — or, as customers type questions without one, a question
/// word right after it (`pera antes disso onde ta o pedido ped390812`).
pub fn asks_before_that(text: &str) -> bool {
    let Some((words, asked)) = words_and_mark(text) else {
        return false;
    };
    let asks = openings(&words, FIRST)
        .chain(openings(&words, BEFORE_THAT))
        .any(|end| asked || words.get(end).is_some_and(|w| is_question_word(w)));
    asks
}

/// Phrases that put a request first in so many words (folded). Not `antes` alone
/// ([`BEFORE_THAT`]), which also opens questions about what is pending (`antes de confirmar: …`).
const FIRST: &[&str] = &[
    "before that",
    "before this",
    "before we do that",
    "first",
    "antes disso",
    "antes de tudo",
    "primeiro",
];

/// Whether `text` is a question the customer puts before what is pending in so many words
/// (`hmm wait, before that, how much is my bill?`, `actually wait, first tell me where it is`,
/// `where is my order PED-17950 first?`): one of [`FIRST`] among its first six words or as its
/// last, and a question mark or a question word after the phrase.
pub fn puts_question_first(text: &str) -> bool {
    let Some((words, asked)) = words_and_mark(text) else {
        return false;
    };
    let last = words.last().is_some_and(|w| FIRST.contains(&w.as_str()));
    let put_first = (asked && last)
        || openings(&words, FIRST)
            .any(|end| asked || words[end..].iter().any(|w| is_question_word(w)));
    put_first
}

/// The folded words of `text`, and whether it carries a question mark.
fn words_and_mark(text: &str) -> Option<(Vec<String>, bool)> {
    let clauses = confirmation::clauses(text)?;
    Some((clauses.concat(), text.contains(['?', '¿'])))
}

/// Where each of `phrases` found among the first six of `words` ends (an index into `words`).
fn openings<'w>(words: &'w [String], phrases: &'w [&str]) -> impl Iterator<Item = usize> + 'w {
    let head = words.len().min(6);
    (0..head).filter_map(move |at| longest(&words[at..head], phrases).map(|len| at + len))
}

fn is_question_word(word: &str) -> bool {
    QUESTION_WORDS.contains(&word)
}

/// Whether `text` asks the bot to wait (see the module's note).
pub fn holds_on(text: &str) -> bool {
    if text.contains(['?', '¿']) || text.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    let Some(clauses) = confirmation::clauses(text) else {
        return false;
    };
    let words: Vec<String> = clauses.concat();
    let opened = words
        .iter()
        .position(|w| !OPENERS.contains(&w.as_str()))
        .unwrap_or(words.len());
    let rest = &words[opened..];
    if let Some(len) = longest(rest, WAITS) {
        let after = rest.get(len..).unwrap_or(&[]);
        // `peraí que vou ver`, `one sec while I look`: a linking word before the step.
        let after = match after.first().map(String::as_str) {
            Some("que" | "q" | "while" | "and" | "e") => &after[1..],
            _ => after,
        };
        // An answer after it (`wait, let me check with my wife... no, leave it`) is the answer.
        // So is a withdrawal (`pera, vou ver com meu marido antes, deixa pra lá`).
        let answers = clauses
            .iter()
            .skip(1)
            .any(|c| confirmation::recognise(&c.join(" ")).is_some())
            || crate::domain::withdrawal::withdraws_last(text, &[]);
        return !answers && (after.is_empty() || longest(after, OWN_STEP).is_some());
    }
    // The wait phrase last, after not having the value at hand.
    let Some((last, earlier)) = clauses.split_last() else {
        return false;
    };
    longest(last, WAITS) == Some(last.len())
        && !earlier.is_empty()
        && earlier
            .iter()
            .any(|c| (0..c.len()).any(|at| longest(&c[at..], NOT_AT_HAND).is_some()))
}

/// The length in words of the longest phrase of `phrases` (folded, words separated by one
/// space) that `words` starts with.
pub(crate) fn longest(words: &[String], phrases: &[&str]) -> Option<usize> {
    phrases
        .iter()
        .map(|p| p.split(' ').collect::<Vec<_>>())
        .filter(|p| p.len() <= words.len() && p.iter().zip(words).all(|(a, b)| *a == b))
        .map(|p| p.len())
        .max()
}

#[cfg(test)]
mod tests {
    use super::{asks_before_that, holds_on, puts_question_first};

    #[test]
    fn a_question_put_first_in_so_many_words() {
        for text in [
            "hmm wait, before that, how much is my bill?",
            "actually wait, first tell me where it is, has it shipped?",
            "actually wait, where is my order PED-17950 first?",
            "pera, antes disso quanto tá minha fatura?",
            "primeiro me diz onde tá o pedido",
        ] {
            assert!(puts_question_first(text), "{text}");
        }
        for text in [
            // `antes` alone opens questions about what is pending.
            "Antes de confirmar: a alteração implica algum custo adicional de frete?",
            "before I confirm, will I get a refund?",
            "first of all, thanks",
            "where is my order?",
            "I want to track it first",
        ] {
            assert!(!puts_question_first(text), "{text}");
        }
    }

    #[test]
    fn a_question_put_before_what_is_pending() {
        for text in [
            "hold on, before that - where's PED-85230 right now?",
            "aliás, antes, onde tá o PED-90377?",
            "first, is PED-1234 already shipped?",
            // A question word right after, no question mark.
            "pera antes disso onde ta o pedido ped390812",
            "wait, before that, where is PED-85230 now",
        ] {
            assert!(asks_before_that(text), "{text}");
        }
        for text in [
            "before that, it was PED-85230",
            "antes disso o pedido é o ped390812",
            "first the order, PED-1234, where do I put it",
            "it's PED-1234, can you check it first?",
            "where is it?",
        ] {
            assert!(!asks_before_that(text), "{text}");
        }
    }

    #[test]
    fn waiting_to_look_something_up_holds_on() {
        for text in [
            "one sec, let me find the amount",
            "hold on, let me double check the number on the receipt",
            "ah ta, peraí que vou ver na conta de luz",
            "peraí que vou confirmar o número com o porteiro",
            "só um minuto q vou pegar o cep",
            "nao lembro o valor, peraí",
            "I don't remember the zip, give me a sec",
            "hold on",
            "peraí",
        ] {
            assert!(holds_on(text), "{text}");
        }
    }

    #[test]
    fn anything_more_after_the_wait_is_another_reading() {
        for text in [
            "wait, don't cancel it",
            "no wait, 51, I always swap those",
            "hold on, before that - where's my order?",
            "pera, antes me diz onde ta o pedido",
            "ah pera, acho que foi meu marido que assinou",
            "wait I want to talk to a person",
            "I'll wait for the next statement",
            "nao lembro o valor",
            "hmm wait let me check with my wife first... no, leave it for now",
            "pera, vou ver com meu marido antes, deixa pra lá",
            "",
        ] {
            assert!(!holds_on(text), "{text}");
        }
    }
}
