//! What the embeddings model reads of a message: laughter dropped, shouting lowered, chat's
//! `k` written `ok`, chat shorthand written out (`vc`, `pfv`, `pls`) and a space put after a
//! comma glued to the next word. The
//! configured examples are
//! written without it, and `kkkk` pulls a message away from every intent: `kkkk vc trabalha
//! até q horas?` reads out of scope 0.94, the same question without it the hours intent 0.69.
//! Values are read from the original message as before; only what is embedded changes. (Ids
//! in canonical form were tried too: `ped 6650` → `PED-6650` helped one request and hurt two.)
//!
//! Faces, hearts and joined hands (`cade meu pedido 😩 PED-9999`, `obrigado 🙏`) are a mood, not
//! a request, and the model reads them as words: that message reads the tracking at 0.86, the
//! same without 😩 at 0.92. They are left out (`confirmation::is_face`), with the modifiers that
//! tint or join them; emoji that say something (👍, 👎) stay.
//!
//! Capitals read as another language to the model: `THE ADDRESS ON PED-72158 IS WRONG, FIX IT`
//! reads the address change at 0.54 (the cancellation 0.42), the same words in lower case at
//! 1.00. A message mostly in capitals is lowered whole, and in any message a word of four or
//! more letters all in capitals (`they PROMISED`); words with digits (`PED-72158`) and short
//! acronyms in a normal message (`CEP`, `PIX`) keep their case.

use crate::domain::confirmation::{is_emoji_modifier, is_face};
use crate::domain::parameter::is_laughter;

/// `text` as it is embedded; the text itself when nothing changes, or when nothing would be left.
pub(super) fn for_embedding(text: &str) -> String {
    let kept: Vec<String> = text
        .split_whitespace()
        .filter_map(|token| {
            let token = &without_faces(token)?;
            let core: String = token
                .chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase)
                .collect();
            // Shorthand, `k` for `ok` among it (`k thx`; alone it reads out of scope).
            if let Some((short, word)) = SHORTHAND.iter().find(|(short, _)| *short == core) {
                let lowered = token.to_lowercase();
                if lowered.contains(short) {
                    return Some(lowered.replacen(short, word, 1));
                }
            }
            if !is_laughter(&core) {
                return Some(token.to_owned());
            }
            // `haha, ok` keeps its comma; `lol` alone goes.
            let rest: String = token.chars().filter(|c| !c.is_alphanumeric()).collect();
            (!rest.is_empty()).then_some(rest)
        })
        .collect();
    let shouting = shouting(&kept);
    let mut out = String::new();
    for token in kept.iter().map(|t| lowered(t, shouting)) {
        let glued = token.chars().all(|c| !c.is_alphanumeric());
        if !out.is_empty() && !glued {
            out.push(' ');
        }
        if !(out.is_empty() && glued) {
            out.push_str(&token);
        }
    }
    if out.chars().any(char::is_alphanumeric) {
        spaced_after_marks(&out)
    } else {
        text.to_owned()
    }
}

/// `token` without its faces and their modifiers; none when nothing else is left of it.
fn without_faces(token: &str) -> Option<String> {
    if !token.chars().any(is_face) {
        return Some(token.to_owned());
    }
    let kept: String = token
        .chars()
        .filter(|&c| !is_face(c) && !is_emoji_modifier(c))
        .collect();
    (!kept.is_empty()).then_some(kept)
}

/// Chat shorthand written out (`q dia vence minha conta?` → `que dia …`): the sentence model
/// reads the abbreviation as another word, and the configured examples are written in full.
/// Only abbreviations with one reading in either language (not `n`: `não` or `número`).
const SHORTHAND: &[(&str, &str)] = &[
    ("k", "ok"),
    ("q", "que"),
    ("vc", "você"),
    ("vcs", "vocês"),
    ("pq", "porque"),
    ("tb", "também"),
    ("tbm", "também"),
    ("msm", "mesmo"),
    ("td", "tudo"),
    ("hj", "hoje"),
    ("qdo", "quando"),
    ("qnd", "quando"),
    ("qto", "quanto"),
    ("mto", "muito"),
    ("mt", "muito"),
    ("pfv", "por favor"),
    ("pf", "por favor"),
    ("cmg", "comigo"),
    ("ngm", "ninguém"),
    ("blz", "beleza"),
    ("vlw", "valeu"),
    ("obg", "obrigado"),
    ("u", "you"),
    ("ur", "your"),
    ("pls", "please"),
    ("plz", "please"),
    ("thx", "thanks"),
    ("ty", "thank you"),
    ("nvm", "never mind"),
    ("idk", "i don't know"),
    ("rn", "right now"),
];

/// `IT,THE WHOLE 120 IS WRONG,I CANCELLED` → `IT, THE WHOLE 120 IS WRONG, I CANCELLED`: a
/// comma or a full stop typed with no space between two words. The sentence model reads the
/// glued words as one, and the message is read in clauses only where a space follows the mark.
/// Numbers keep theirs (`1.050,00`).
fn spaced_after_marks(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len() + 4);
    for (i, c) in chars.iter().enumerate() {
        out.push(*c);
        let glued = matches!(c, ',' | '.' | ';' | '!' | '?')
            && i > 0
            && chars.get(i - 1).is_some_and(|p| p.is_alphabetic())
            && chars.get(i + 1).is_some_and(|n| n.is_alphabetic());
        if glued {
            out.push(' ');
        }
    }
    out
}

/// Whether most letters of the words without digits are capitals (at least six of them).
fn shouting(tokens: &[String]) -> bool {
    let letters = tokens
        .iter()
        .filter(|t| !t.chars().any(|c| c.is_ascii_digit()))
        .flat_map(|t| t.chars().filter(|c| c.is_alphabetic()));
    let (upper, all) = letters.fold((0usize, 0usize), |(u, a), c| {
        (u + usize::from(c.is_uppercase()), a + 1)
    });
    upper >= 6 && upper * 10 >= all * 6
}

/// `token` in lower case when it shouts: all its letters capitals, four or more of them (or
/// any, in a shouting message), and no digit.
fn lowered(token: &str, shouting: bool) -> String {
    let letters = token.chars().filter(|c| c.is_alphabetic()).count();
    let capitals = letters > 0 && token.chars().all(|c| !c.is_lowercase());
    if token.chars().any(|c| c.is_ascii_digit()) || !capitals || !(shouting || letters >= 4) {
        return token.to_owned();
    }
    token.to_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laughter_goes_and_the_rest_stays() {
        let read = for_embedding;
        assert_eq!(
            read("kkkk vc trabalha até q horas?"),
            "você trabalha até que horas?"
        );
        assert_eq!(read("btw good morning lol"), "btw good morning");
        assert_eq!(read("hahaha, ok then"), "ok then");
        assert_eq!(read("rsrs obrigada"), "obrigada");
        // Nothing left: the message as it was.
        assert_eq!(read("kkkkk"), "kkkkk");
        // Words that only look like laughter in part stay.
        assert_eq!(read("track my kit"), "track my kit");
        // `k` alone is chat for `ok`.
        assert_eq!(read("k thx"), "ok thanks");
        assert_eq!(read("K, thanks"), "ok, thanks");
    }

    #[test]
    fn faces_go_and_emoji_that_say_something_stay() {
        let read = for_embedding;
        assert_eq!(
            read("cade meu pedido 😩 PED-9999"),
            "cade meu pedido PED-9999"
        );
        assert_eq!(read("obrigado🙏🏽"), "obrigado");
        assert!(read("ok 👍 pode cancelar").contains('👍'));
        assert_eq!(read("where is it?? 😡😡"), "where is it??");
        // Nothing left: the message as it was.
        assert_eq!(read("🙏"), "🙏");
    }

    #[test]
    fn chat_shorthand_is_written_out() {
        let read = for_embedding;
        assert_eq!(
            read("q dia vence minha conta?"),
            "que dia vence minha conta?"
        );
        assert_eq!(read("pfv, cancela pra mim"), "por favor, cancela pra mim");
        assert_eq!(read("can u track it pls"), "can you track it please");
        // `n` is `não` or `número`: left as typed; a shorthand inside a word is no shorthand.
        assert_eq!(read("n 350"), "n 350");
        assert_eq!(read("quero"), "quero");
    }

    #[test]
    fn shouting_is_lowered_and_ids_and_acronyms_keep_their_case() {
        let read = for_embedding;
        assert_eq!(
            read("THE ADDRESS ON PED-72158 IS WRONG, FIX IT"),
            "the address on PED-72158 is wrong, fix it"
        );
        assert_eq!(
            read("CADÊ MEU PEDIDO PED-9999??? JÁ PAGUEI"),
            "cadê meu pedido PED-9999??? já paguei"
        );
        assert_eq!(
            read("the fee they PROMISED to waive"),
            "the fee they promised to waive"
        );
        assert_eq!(read("meu CEP novo é 01310-100"), "meu CEP novo é 01310-100");
        assert_eq!(read("I want to pay with PIX"), "I want to pay with PIX");
    }

    #[test]
    fn a_mark_glued_to_the_next_word_gets_its_space() {
        let read = for_embedding;
        assert_eq!(
            read("I WANT TO DISPUTE IT,THE WHOLE 120 IS WRONG,I CANCELLED"),
            "i want to dispute it, the whole 120 is wrong, i cancelled"
        );
        assert_eq!(
            read("oi,tudo bem?quero ver a fatura"),
            "oi, tudo bem? quero ver a fatura"
        );
        // Numbers, ids and amounts keep their marks.
        assert_eq!(
            read("contest R$ 1.050,00 on PED-1001"),
            "contest R$ 1.050,00 on PED-1001"
        );
    }
}
