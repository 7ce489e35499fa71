//! Words that point back at something the conversation already named: `the same order`, `that
//! one`, `cancel it`, `o endereço dele`, `esse pedido`. A request that points back and gives no
//! value of its own means the value the last transaction had (docs/decisions.md, "A request that
//! points back").

/// Folded words that point back wherever they stand. `esta` is left out: folded, it is also
/// `está` (is).
pub const POINTING_WORDS: &[&str] = &[
    "same", "it", "its", "this", "previous", "mesmo", "mesma", "ele", "ela", "dele", "dela",
    "esse", "essa", "este", "desse", "dessa", "deste", "desta", "nesse", "nessa", "neste", "nesta",
    "aquele", "aquela", "daquele", "daquela", "anterior",
];

/// Folded words after which `that` points back (`that one`, `that order`); elsewhere `that` is
/// mostly a conjunction (`I think that …`), except as the last word (`cancel that`).
const AFTER_THAT: &[&str] = &["one", "order", "purchase", "package", "item", "same"];

/// Whether `text` points back at something already named (see the module's note).
pub fn points_back(text: &str) -> bool {
    let words = super::folded_words(text);
    words.iter().enumerate().any(|(i, w)| {
        POINTING_WORDS.contains(&w.as_str())
            || (w == "that"
                && words
                    .get(i + 1)
                    .is_none_or(|next| AFTER_THAT.contains(&next.as_str())))
    })
}

#[cfg(test)]
mod tests {
    use super::points_back;

    #[test]
    fn references_to_what_was_named_point_back() {
        for text in [
            "then I need to change the delivery address for the same order",
            "ok then just cancel that one, I found it cheaper",
            "can you cancel it?",
            "cancel that",
            "quero mudar o endereço dele",
            "na vdd cancela esse pedido logo",
            "e o mesmo pedido, dá pra trocar o endereço?",
        ] {
            assert!(points_back(text), "{text}");
        }
    }

    #[test]
    fn requests_that_name_nothing_earlier_do_not() {
        for text in [
            "I want to change the address of my order",
            "I think that my order is late, can you track my order",
            "quero cancelar um pedido",
            "o pedido está atrasado, quero rastrear",
            "track another order please",
        ] {
            assert!(!points_back(text), "{text}");
        }
    }
}
