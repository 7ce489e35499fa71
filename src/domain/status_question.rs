//! A customer asking whether what they asked for was done (`did it go through?`, `deu certo
//! então`, `funcionou?`): read without a model, because a sentence model reads these short
//! messages as a goodbye (END_SESSION 0.98 for `deu certo então`) or a greeting, and ending drops
//! what is in flight. The engine answers from the state: the last result again, or that what
//! is pending was not done yet (docs/decisions.md, "Asking whether it worked is answered").
//!
//! Deliberately narrow: one of the phrases below with nothing beside it but a few words of
//! chat (`ok so`, `então`, `né`); `deu certo, obrigado` (a statement with thanks) and `did it
//! work for the other order too?` are other readings.

use crate::domain::confirmation;

/// Phrases that ask whether it was done (folded, words separated by one space).
const PHRASES: &[&str] = &[
    "did it work",
    "did that work",
    "did it go through",
    "did that go through",
    "did it go thru",
    "did it get through",
    "has it gone through",
    "did it get done",
    "is it done",
    "is that done",
    "is it all done",
    "did you do it",
    "was it done",
    "deu certo",
    "deu tudo certo",
    "deu bom",
    "funcionou",
    "foi feito",
    "foi feita",
    "ta feito",
    "esta feito",
    "ficou feito",
    "ja foi feito",
    "ja ta feito",
    "conseguiu",
    "conseguiu fazer",
];

/// Chat that may stand beside the question.
const BESIDE: &[&str] = &[
    "so", "then", "ok", "okay", "and", "hey", "um", "uh", "now", "right", "yet", "all", "entao",
    "e", "ai", "ne", "mesmo", "msm", "agora", "ta", "blz", "beleza", "ja", "la", "oi", "isso",
    "tudo", "hein", "ein",
];

/// Whether `text` only asks whether it was done (see the module's note).
pub fn asks_whether_done(text: &str) -> bool {
    let Some(clauses) = confirmation::clauses(text) else {
        return false;
    };
    let words: Vec<String> = clauses.concat();
    let mut asked = false;
    let mut at = 0;
    while at < words.len() {
        match crate::domain::hold_on::longest(&words[at..], PHRASES) {
            Some(len) if !asked => {
                asked = true;
                at += len;
            }
            _ if BESIDE.contains(&words[at].as_str()) => at += 1,
            _ => return false,
        }
    }
    asked
}

#[cfg(test)]
mod tests {
    use super::asks_whether_done;

    #[test]
    fn asking_whether_it_was_done() {
        for text in [
            "did it go through?",
            "ok so did it work?",
            "deu certo então",
            "deu certo?",
            "e aí, deu certo?",
            "funcionou?",
            "tá feito?",
            "is it done now?",
        ] {
            assert!(asks_whether_done(text), "{text}");
        }
    }

    #[test]
    fn anything_more_is_another_reading() {
        for text in [
            "deu certo, obrigado",
            "did it work for the other order too?",
            "deu certo o cancelamento do PED-1234?",
            "did it go through? also show me my bill",
            "it worked",
            "certo",
            "",
        ] {
            assert!(!asks_whether_done(text), "{text}");
        }
    }
}
