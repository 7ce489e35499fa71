//! PR-2 read without a model: a message that opens by plainly withdrawing the request
//! (`never mind, I'll just pick it up myself`, `esquece, resolvo na loja`) cancels what is in
//! flight, whatever its remainder says — a reason, a plan, another request (which the router then
//! reads, PR-2). Customers explain why they withdraw; the explanation is what a sentence model
//! reads, and it drags the whole message away from "cancel" (`vou resolver na loja` reads as the
//! order cancellation).
//!
//! Deliberately narrow, like the confirmation recogniser: the first clause must be one of the
//! phrases below after optional openers (`ah`, `actually`, `no`), nothing may affirm or name the
//! pending action after it (`forget it, yes, change it` decides nothing), and a message with a
//! digit or a question decides nothing (a number is an answer or a correction, a question is
//! PR-3a). Phrases that also mean "keep it as it is" (`leave it`, `deixa`, `deixa assim`) are
//! left out: at a correction they mean keep the value, not drop the request.

use crate::domain::confirmation::{self, Confirmation};

/// Withdrawals, folded (lowercase, no accents), words separated by one space.
const WITHDRAWALS: &[&str] = &[
    "never mind",
    "nevermind",
    "nvm",
    "forget it",
    "forget about it",
    "forget that",
    "forget the whole thing",
    "scratch that",
    "drop it",
    "esquece",
    "esqueca",
    "esquece isso",
    "esquece isso ai",
    "esquece entao",
    "deixa pra la",
    "deixa para la",
    "deixa quieto",
    "desencana",
];

/// Words that may open the clause before the withdrawal (`ah, never mind` is one clause only
/// when written `ah never mind`).
const OPENERS: &[&str] = &[
    "ah", "oh", "ahh", "hmm", "hmmm", "hm", "hum", "humm", "hummm", "um", "uh", "ok", "okay",
    "actually", "nah", "no", "nope", "na", "verdade", "nao", "aff", "entao", "so", "well", "just",
    // On second thought: `on second thought, never mind`, `pensando bem, esquece`, `quer saber,
    // deixa pra lá`.
    "on", "second", "thought", "pensando", "bem", "quer", "saber", "sabe",
];

/// Whether `text` opens by withdrawing the request (see the module doc). `action_verbs`: the
/// pending tool's verbs (`forget it, change it` names the action and decides nothing).
pub fn withdraws_first(text: &str, action_verbs: &[String]) -> bool {
    if text.contains(['?', '¿']) || text.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    let Some(clauses) = confirmation::clauses(text) else {
        return false;
    };
    let Some(at) = clauses.iter().position(|c| !is_openers(c)) else {
        return false;
    };
    let Some((first, rest)) = clauses.get(at..).and_then(<[Vec<String>]>::split_first) else {
        return false;
    };
    if !is_withdrawal(first) {
        return false;
    }
    let rest_text: Vec<String> = rest.iter().map(|c| c.join(" ")).collect();
    !rest_text.iter().any(|c| {
        confirmation::recognise_with(c, action_verbs) == Some(Confirmation::Affirm)
            || confirmation::names_a_verb(c, action_verbs)
    })
}

/// PR-2 with the reason first: the message ends with a plain withdrawal (after openers) and what
/// comes before it is its reason (`ugh I don't have the new zip on me. never mind`, `não achei o
/// número, deixa pra lá`) — no affirmation and no action verb in it, and, as for
/// [`withdraws_first`], no digit and no question anywhere.
pub fn withdraws_last(text: &str, action_verbs: &[String]) -> bool {
    if text.contains(['?', '¿']) || text.chars().any(|c| c.is_ascii_digit()) {
        return false;
    }
    let Some(clauses) = confirmation::clauses(text) else {
        return false;
    };
    let Some((last, earlier)) = clauses.split_last() else {
        return false;
    };
    !earlier.is_empty()
        && is_withdrawal(last)
        && earlier.iter().all(|c| {
            let c = c.join(" ");
            confirmation::recognise_with(&c, action_verbs) != Some(Confirmation::Affirm)
                && !confirmation::names_a_verb(&c, action_verbs)
        })
}

/// Whether a clause (folded words) is a withdrawal after optional openers (`ah never mind`).
fn is_withdrawal(clause: &[String]) -> bool {
    let opened = clause
        .iter()
        .position(|w| !OPENERS.contains(&w.as_str()))
        .unwrap_or(clause.len());
    WITHDRAWALS.contains(&clause.get(opened..).unwrap_or(&[]).join(" ").as_str())
}

fn is_openers(clause: &[String]) -> bool {
    clause.iter().all(|w| OPENERS.contains(&w.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verbs() -> Vec<String> {
        [
            "change",
            "change it",
            "trocar",
            "pode trocar",
            "cancel",
            "cancelar",
        ]
        .iter()
        .map(|v| (*v).to_owned())
        .collect()
    }

    #[test]
    fn a_withdrawing_first_clause_cancels_whatever_reason_follows() {
        // PR-2: an explicit abandon, with the customer's reason after it.
        for text in [
            "never mind, I'll just pick it up myself",
            "never mind",
            "Nevermind. I'll go to the store",
            "ah, forget it, not needed anymore",
            "actually forget about it, my wife already did it",
            "esquece, vou resolver na loja",
            "Deixa pra lá, depois eu vejo",
            "ah deixa quieto, não precisa mais",
            "na verdade esquece isso",
            "humm, pensando bem deixa pra lá, vou ver com meu marido primeiro",
            "forget it, show me my bill",
            // On second thought.
            "hmm pensando bem esquece, acho que foi minha esposa que assinou",
            "quer saber, deixa pra lá",
            "on second thought never mind",
        ] {
            assert!(withdraws_first(text, &verbs()), "{text}");
        }
    }

    #[test]
    fn a_withdrawal_last_after_its_reason_cancels() {
        // PR-2: the reason first, then the withdrawal.
        for text in [
            "ugh I don't have the new zip on me. never mind",
            // A face closes the reason as a full stop would.
            "ok found it, it was my son who subscribed 🙈 nah forget it",
            "não achei o número da casa, deixa pra lá",
            "I'll wait, never mind",
            "my wife already did it. forget it",
        ] {
            assert!(withdraws_last(text, &verbs()), "{text}");
        }
        for text in [
            // A number, a question, an affirmation or the action before it decides nothing.
            "the zip is 01310-100, never mind",
            "can you do it today? never mind",
            "yes, never mind",
            "change it, never mind",
            // Alone it is withdraws_first's.
            "never mind",
            "never mind, I'll go to the store",
        ] {
            assert!(!withdraws_last(text, &verbs()), "{text}");
        }
    }

    #[test]
    fn anything_else_decides_nothing() {
        for text in [
            // A number is an answer or a correction; a question is PR-3a.
            "never mind, the order is PED-1002",
            "forget it, what's the fee?",
            // Affirming or naming the action after it is no withdrawal.
            "forget it, yes, change it",
            "esquece, pode trocar",
            // Keep-it-as-it-is phrases and plain answers are other readings.
            "leave it, the zip is right",
            "deixa assim",
            "no, I meant the other order",
            "sorry, the street is Rua Augusta",
            // The withdrawal must open the message.
            "I'll wait, never mind",
            "never mind the weather, where is my order",
            "",
            "ok",
        ] {
            assert!(!withdraws_first(text, &verbs()), "{text}");
        }
    }
}
