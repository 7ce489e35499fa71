//! A customer asking what the assistant needs from them (`what do you need from me?`, `o que vc
//! precisa que eu informe?`): read without a model, because a sentence model reads the words
//! (`informe`, `send`) as a request for a tool nobody asked for (`quero abrir uma contestação. o
//! que vc precisa que eu informe?` showed the bill). The answer to it is the pending step's own
//! question, which names what is needed (docs/decisions.md, "What do you need? is answered by
//! the pending question").
//!
//! A clause that opens (after a few openers) with one of the phrases below is the question; the
//! other clauses of the message are read as the message.

use crate::domain::parameter;

/// Phrases that ask what is needed (folded, words separated by one space).
const PHRASES: &[&str] = &[
    "what do you need",
    "what do u need",
    "what else do you need",
    "what info do you need",
    "what information do you need",
    "what details do you need",
    "what do i need to send",
    "what do i need to give",
    "what should i send",
    "what should i give",
    "o que voce precisa",
    "o que vc precisa",
    "o que voces precisam",
    "o que vcs precisam",
    "o que mais voce precisa",
    "o que mais vc precisa",
    "o que eu preciso informar",
    "o que eu preciso mandar",
    "o que eu preciso enviar",
    "o que preciso informar",
    "o que preciso mandar",
    "o que preciso enviar",
    "quais dados voce precisa",
    "quais dados vc precisa",
    "quais informacoes voce precisa",
    "quais informacoes vc precisa",
];

/// Words that may open the clause before the phrase.
const OPENERS: &[&str] = &["and", "so", "ok", "then", "e", "entao", "ta", "mas", "but"];

/// When `text` asks what is needed: the rest of the message, that question's clause taken out
/// (empty when the message is only the question).
pub fn rest_beside(text: &str) -> Option<String> {
    let clauses = parameter::parts(text, &['.', '?', '!', ';', ',']);
    let asks = |clause: &str| {
        let words = parameter::folded_words(clause);
        let opened = words
            .iter()
            .position(|w| !OPENERS.contains(&w.as_str()))
            .unwrap_or(words.len());
        let joined = words[opened..].join(" ");
        PHRASES
            .iter()
            .any(|p| joined == *p || joined.starts_with(&format!("{p} ")))
    };
    if !clauses.iter().any(|c| asks(c)) {
        return None;
    }
    let rest: Vec<&str> = clauses.into_iter().filter(|c| !asks(c)).collect();
    Some(rest.join(". "))
}

#[cfg(test)]
mod tests {
    use super::rest_beside;

    #[test]
    fn the_question_alone_leaves_nothing() {
        for text in [
            "what do you need from me?",
            "ok what info do you need",
            "o que vc precisa que eu informe?",
            "e o que mais você precisa?",
        ] {
            assert_eq!(rest_beside(text), Some(String::new()), "{text}");
        }
    }

    #[test]
    fn the_rest_of_the_message_is_kept() {
        assert_eq!(
            rest_beside("quero abrir uma contestação. o que vc precisa que eu informe?"),
            Some("quero abrir uma contestação".into())
        );
        assert_eq!(
            rest_beside("I want to change my address, what do you need?"),
            Some("I want to change my address".into())
        );
    }

    #[test]
    fn other_questions_are_not_it() {
        for text in [
            "what do you mean?",
            "do you need my cpf?",
            "o que você faz?",
            "I need to cancel my order",
            "",
        ] {
            assert_eq!(rest_beside(text), None, "{text}");
        }
    }
}
