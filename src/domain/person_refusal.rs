//! A customer refusing a person (`I don't want to talk to a human, just fix it`, `não quero falar
//! com ninguém, só resolve isso`, `no need for an agent`): read without a model, because a sentence
//! model reads the words of a request for a person and misses the negation — it handed such
//! messages off, or ended the session, and dropped what was in flight (docs/decisions.md, "A
//! refused person is no handoff").
//!
//! Deliberately narrow: a negator followed at once by a verb of wanting, needing, talking or
//! transferring (or by the person word itself: `no human`, `sem atendente`), then only such
//! verbs and linking words up to a word for a person (`human`, `atendente`, `ninguém`) or a verb
//! of transferring (`don't transfer me`), all in one clause. `no, I want a human` (the negator
//! answers something before it), `I don't want a bot, I want a human` (`bot` is no person) and
//! `não consigo falar com um atendente` (not being able to is asking) are not refusals.

use std::ops::Range;

use crate::domain::parameter;

/// Negators that refuse what follows them (folded; `don't` is read as `don` `t`).
/// `no` and `sem` refuse only a person named at once (`sem atendente`), never a verb (`sem falar
/// com atendente não dá` asks for one).
const NEGATORS: &[&str] = &["not", "dont", "never", "nao", "nem", "nunca"];

/// A subject before the negator, part of the refusal.
const SUBJECTS: &[&str] = &["i", "we", "eu", "nos", "a", "gente"];

/// Words that may follow a negator at once (besides a person word).
const VERBS: &[&str] = &[
    "want",
    "wanna",
    "need",
    "needed",
    "talk",
    "speak",
    "chat",
    "be",
    "transfer",
    "quero",
    "queria",
    "quer",
    "preciso",
    "precisa",
    "precisamos",
    "falar",
    "conversar",
    "me",
    "transferir",
    "transfere",
    "transfira",
    "passa",
    "passar",
    "chama",
    "chamar",
];

/// Words that may stand between that verb and the person.
const LINKS: &[&str] = &[
    "to",
    "with",
    "a",
    "an",
    "any",
    "the",
    "another",
    "real",
    "for",
    "being",
    "get",
    "go",
    "transferred",
    "passed",
    "com",
    "um",
    "uma",
    "o",
    "de",
    "pra",
    "para",
    "mais",
    "outro",
    "outra",
    "nenhum",
    "nenhuma",
    "ser",
    "transferido",
    "transferida",
    "por",
    "enviar",
    "send",
];

/// A person, or being passed to one.
const PERSONS: &[&str] = &[
    "human",
    "humans",
    "person",
    "people",
    "agent",
    "agents",
    "attendant",
    "representative",
    "rep",
    "someone",
    "somebody",
    "anyone",
    "anybody",
    "operator",
    "staff",
    "supervisor",
    "manager",
    "humano",
    "humana",
    "pessoa",
    "atendente",
    "atendentes",
    "alguem",
    "ninguem",
    "operador",
    "operadora",
    "funcionario",
    "funcionaria",
    "supervisora",
    "gerente",
    "transfer",
    "transferir",
    "transfere",
    "transfira",
    "transferred",
    "transferido",
    "transferida",
];

/// Words that only urge the assistant on (`just fix it`, `só resolve isso`): with nothing else
/// beside the refusal, the message says nothing more than "carry on".
const URGING: &[&str] = &[
    "just", "only", "fix", "solve", "sort", "handle", "do", "it", "this", "that", "out", "please",
    "pls", "help", "me", "at", "all", "anymore", "ever", "bot", "robot", "you", "yourself", "so",
    "quickly", "now", "asap", "fast", "thanks", "i", "want", "need", "resolve", "resolva",
    "resolver", "resolvam", "faz", "faca", "fazer", "isso", "ai", "logo", "rapido", "agora", "ja",
    "ajuda", "ajude", "mesmo", "voce", "vc", "vcs", "voces", "robo", "por", "favor", "pfv", "mais",
    "tambem", "entao", "quero", "preciso", "que", "aqui", "here", "nao", "no", "ok", "obrigado",
    "obrigada", "valeu", "e", "and", "the", "a", "o", "can", "could", "pode",
];

/// What a message that refuses a person says besides the refusal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Besides {
    /// Nothing but urging on (`just fix it`): the assistant carries on.
    Nothing,
    /// The rest of the message, the refusal taken out (`just cancel PED-1234`): read as the
    /// message.
    Rest(String),
}

/// Whether `text` refuses a person (see the module's note), and what it says besides.
pub fn refuses_a_person(text: &str) -> Option<Besides> {
    let words = parameter::word_spans(text);
    let breaks_before = |i: usize| {
        i > 0 && text[words[i - 1].0.end..words[i].0.start].contains([',', '.', ';', '!', '?', ':'])
    };
    let span = (0..words.len()).find_map(|at| refusal_at(&words, at, &breaks_before))?;
    let rest = format!("{} {}", &text[..span.start], &text[span.end..]);
    let rest = rest.trim_matches(|c: char| c.is_whitespace() || ",.;:!-".contains(c));
    let urging_only = parameter::word_spans(rest)
        .iter()
        .all(|(_, w)| URGING.contains(&w.as_str()));
    Some(if urging_only {
        Besides::Nothing
    } else {
        Besides::Rest(rest.to_owned())
    })
}

/// The byte span of a refusal starting at word `at`, if one does.
fn refusal_at(
    words: &[(Range<usize>, String)],
    at: usize,
    breaks_before: &impl Fn(usize) -> bool,
) -> Option<Range<usize>> {
    let word = |i: usize| words.get(i).map(|(_, w)| w.as_str());
    // `don't`: `don` `t`; `no` refuses only the person or a need at once (`no human`, `no need
    // for an agent`), never what a `no` answers (`no, I want a human`, `no i want a human`).
    let next = match word(at)? {
        "don" | "doesn" | "didn" if word(at + 1) == Some("t") => at + 2,
        "no" if matches!(word(at + 1), Some("need" | "way")) => at + 2,
        "no" if word(at + 1).is_some_and(|w| PERSONS.contains(&w)) => at + 1,
        "sem" if word(at + 1).is_some_and(|w| PERSONS.contains(&w) && !w.starts_with("transf")) => {
            at + 1
        }
        w if NEGATORS.contains(&w) => at + 1,
        _ => return None,
    };
    let first = word(next)?;
    let needs = next == at + 2 && word(at) == Some("no");
    if breaks_before(next) || !(needs || VERBS.contains(&first) || PERSONS.contains(&first)) {
        return None;
    }
    // The subject before the negator goes with it (`I don't want a human`).
    let start = match at.checked_sub(1) {
        Some(before) if !breaks_before(at) && SUBJECTS.contains(&word(before)?) => before,
        _ => at,
    };
    (next..words.len().min(next + 9))
        .take_while(|&i| i == next || !breaks_before(i))
        .take_while(|&i| {
            let w = word(i).unwrap_or_default();
            VERBS.contains(&w) || LINKS.contains(&w) || PERSONS.contains(&w)
        })
        .find(|&i| word(i).is_some_and(|w| PERSONS.contains(&w)))
        .map(|i| words[start].0.start..words[i].0.end)
}

#[cfg(test)]
mod tests {
    use super::{refuses_a_person, Besides};

    #[test]
    fn a_refused_person_with_nothing_else_carries_on() {
        for text in [
            "i don't want to talk to a human, just fix it",
            "I do not want to speak to a person",
            "não quero falar com ninguém, só resolve isso",
            "nao preciso de atendente",
            "no need for an agent, you can do it",
            "no human please",
            "don't transfer me, just sort it out",
            "não me transfere não",
            "sem atendente, resolve aí vc mesmo",
        ] {
            assert_eq!(refuses_a_person(text), Some(Besides::Nothing), "{text}");
        }
    }

    #[test]
    fn what_follows_a_refused_person_is_read_as_the_message() {
        assert_eq!(
            refuses_a_person("I don't want a human, just cancel PED-1234"),
            Some(Besides::Rest("just cancel PED-1234".into()))
        );
        assert_eq!(
            refuses_a_person("não quero atendente. quero ver minha fatura"),
            Some(Besides::Rest("quero ver minha fatura".into()))
        );
    }

    #[test]
    fn a_request_for_a_person_is_no_refusal() {
        for text in [
            "I want to talk to a human",
            "no, I want a human",
            "no i want a human",
            "nao, quero falar com um atendente",
            "não eu quero falar com um atendente",
            "I don't want a bot, I want a human",
            "não quero falar com robô, quero um atendente",
            "não consigo falar com um atendente",
            "sem falar com atendente não dá",
            "sem transferir pra um atendente eu não resolvo",
            "why can't I talk to a person?",
            "don't cancel it, get me an agent",
            "não aguento mais, quero falar com alguém",
            "this is not working, human please",
            "",
        ] {
            assert_eq!(refuses_a_person(text), None, "{text}");
        }
    }
}
