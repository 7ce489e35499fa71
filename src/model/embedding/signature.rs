//! A name signed at the end of a message (`… Have a lovely day. Dorothy Hammond`, `Um abraço,
//! Maria Aparecida.`), as customers used to letters and e-mail close theirs. The sentence model
//! reads a name as words of some request: `That is all I needed today. Have a lovely day.
//! Dorothy Hammond` read the greeting intent at 0.99, and a closing whose last clause is a name
//! is no closing to `confirmation::says_goodbye`. A valediction before it (`Kind regards`, `Um
//! abraço`) says no more than the name: `… Era só isso mesmo. Um abraço` ends on a clause that
//! takes no leave, and `… cancel order PED-11623. Kind regards` is the request. What the model
//! reads leaves both out; values are read from the message as written, as before.

use crate::domain::confirmation;

/// Lower-case words that join the parts of a name (`Maria da Silva`, `Ludwig van Beethoven`).
const JOINING: &[&str] = &["da", "de", "do", "das", "dos", "e", "van", "von", "del"];

/// The most words a signed name takes (`Antônio Carlos Pereira da Silva` is five).
const MOST_WORDS: usize = 5;

/// `message` without the name signed at its end, when its last part — after a sentence end, a
/// comma or a line break — is only a name: capitalised words, none a word `known` (a word of
/// the assistant's examples: `Thanks`, `Tchau`, `Cancel`), no digits, no acronyms (`PED`,
/// `CEP`). The message itself otherwise, and always when nothing would be left before the name.
/// Then a valediction closing what is left goes too (`… Kind regards`).
pub(super) fn without_signature(message: &str, known: impl Fn(&str) -> bool) -> &str {
    let unsigned = without_last_part(message, |tail| is_name(tail, &known));
    without_last_part(unsigned, confirmation::is_valediction)
}

/// `message` without its last part (after a sentence end, a comma, a semicolon or a line break)
/// when `drops` says so and something with letters is left before it.
fn without_last_part(message: &str, drops: impl Fn(&str) -> bool) -> &str {
    let trimmed = message.trim_end().trim_end_matches(['.', '!']);
    let Some((head, tail)) = trimmed.rsplit_once(['.', '!', ',', ';', '\n']) else {
        return message;
    };
    let head = head.trim_end_matches(['.', '!', ',', ';', ' ', '\n']);
    if !head.chars().any(char::is_alphabetic) || !drops(tail.trim()) {
        return message;
    }
    head
}

fn is_name(text: &str, known: &impl Fn(&str) -> bool) -> bool {
    let words: Vec<&str> = text.split_whitespace().collect();
    let (Some(first), Some(last)) = (words.first(), words.last()) else {
        return false;
    };
    words.len() <= MOST_WORDS
        && is_capitalised(first)
        && is_capitalised(last)
        && words
            .iter()
            .all(|w| (is_capitalised(w) && !known(&w.to_lowercase())) || JOINING.contains(w))
}

/// A word written as a name is: a capital, then at least one lower-case letter, letters only
/// (a hyphen or an apostrophe inside: `Anne-Marie`, `O'Brien`).
fn is_capitalised(word: &str) -> bool {
    let mut chars = word.chars();
    chars.next().is_some_and(char::is_uppercase)
        && chars.clone().any(char::is_lowercase)
        && chars.all(|c| c.is_alphabetic() || matches!(c, '-' | '\'' | '’'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn known(word: &str) -> bool {
        ["thanks", "tchau", "cancel", "yes", "bye", "now"].contains(&word)
    }

    #[test]
    fn a_name_signed_after_the_message_is_left_out() {
        for (message, read) in [
            (
                "That is all I needed today. Have a lovely day. Dorothy Hammond",
                "That is all I needed today. Have a lovely day",
            ),
            (
                "Era só isso mesmo. Um abraço, Maria Aparecida.",
                "Era só isso mesmo",
            ),
            (
                "Please cancel order PED-11623. Kind regards.",
                "Please cancel order PED-11623",
            ),
            ("Thank you.\nKind regards,\nJohn Smith", "Thank you"),
            (
                "Obrigada por tudo e boa noite. Josefa.",
                "Obrigada por tudo e boa noite",
            ),
            (
                "Tenha um ótimo dia. Antônio Carlos Pereira da Silva",
                "Tenha um ótimo dia",
            ),
            ("thanks\nAnne-Marie O'Brien", "thanks"),
        ] {
            assert_eq!(without_signature(message, known), read, "{message}");
        }
    }

    #[test]
    fn words_that_say_something_ids_and_lone_names_stay() {
        for message in [
            // Known words, capitalised or not.
            "ok. Thanks",
            "I want to cancel it. Now",
            "Ok, Tchau!",
            // Ids, acronyms and numbers are no name.
            "my order is. PED-1234",
            "the zip code. CEP",
            "number. Casa 45",
            // A name alone, or in the middle of a sentence, is what the customer said.
            "Dorothy Hammond",
            "I want to talk to Maria about it",
            "Hello. my name is Dorothy",
            // Lower case is no signature; a valediction alone is all there is.
            "thanks. dorothy",
            "Kind regards",
        ] {
            assert_eq!(without_signature(message, known), message, "{message}");
        }
    }
}
