//! What the embeddings model reads of a message: laughter dropped. The configured examples are
//! written without it, and `kkkk` pulls a message away from every intent: `kkkk vc trabalha
//! até q horas?` reads out of scope 0.94, the same question without it the hours intent 0.69.
//! Values are read from the original message as before; only what is embedded changes. (Ids
//! in canonical form were tried too: `ped 6650` → `PED-6650` helped one request and hurt two.)

use crate::domain::confirmation::is_laughter;

/// `text` as it is embedded; the text itself when nothing changes, or when nothing would be left.
pub(super) fn for_embedding(text: &str) -> String {
    let kept: Vec<String> = text
        .split_whitespace()
        .filter_map(|token| {
            let core: String = token
                .chars()
                .filter(|c| c.is_alphanumeric())
                .flat_map(char::to_lowercase)
                .collect();
            if !is_laughter(&core) {
                return Some(token.to_owned());
            }
            // `haha, ok` keeps its comma; `lol` alone goes.
            let rest: String = token.chars().filter(|c| !c.is_alphanumeric()).collect();
            (!rest.is_empty()).then_some(rest)
        })
        .collect();
    let mut out = String::new();
    for token in kept {
        let glued = token.chars().all(|c| !c.is_alphanumeric());
        if !out.is_empty() && !glued {
            out.push(' ');
        }
        if !(out.is_empty() && glued) {
            out.push_str(&token);
        }
    }
    if out.chars().any(char::is_alphanumeric) {
        out
    } else {
        text.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn laughter_goes_and_the_rest_stays() {
        let read = for_embedding;
        assert_eq!(
            read("kkkk vc trabalha até q horas?"),
            "vc trabalha até q horas?"
        );
        assert_eq!(read("btw good morning lol"), "btw good morning");
        assert_eq!(read("hahaha, ok then"), "ok then");
        assert_eq!(read("rsrs obrigada"), "obrigada");
        // Nothing left: the message as it was.
        assert_eq!(read("kkkkk"), "kkkkk");
        // Words that only look like laughter in part stay.
        assert_eq!(read("track my kit"), "track my kit");
    }
}
