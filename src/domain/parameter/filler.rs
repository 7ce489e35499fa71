//! PR-1 filler words: what may stand around a value without making the message unclear.

// --- PR-1: filler words and labels ------------------------------------------------------------
//
// Every list holds folded words (lower case, no accents); both locales' lists apply to every
// message, as customers mix languages.

/// Articles: `the number is 45`, `o número é 45`.
pub const FILLER_ARTICLES: &[&str] = &[
    "a", "an", "the", "o", "os", "as", "um", "uma", "uns", "umas",
];

/// Personal, demonstrative, possessive and indefinite pronouns: `it's 45`, `my zip is …`, `é
/// esse`, `I need to track something`.
pub const FILLER_PRONOUNS: &[&str] = &[
    "i",
    "me",
    "my",
    "mine",
    "you",
    "your",
    "yours",
    "it",
    "its",
    "this",
    "that",
    "these",
    "those",
    "we",
    "us",
    "our",
    "ours",
    "he",
    "him",
    "his",
    "she",
    "her",
    "they",
    "them",
    "their",
    "eu",
    "mim",
    "meu",
    "minha",
    "meus",
    "minhas",
    "voce",
    "vc",
    "seu",
    "sua",
    "seus",
    "suas",
    "ele",
    "ela",
    "eles",
    "elas",
    "nos",
    "nosso",
    "nossa",
    "nossos",
    "nossas",
    "dele",
    "dela",
    "isso",
    "isto",
    "este",
    "esta",
    "esse",
    "essa",
    "aquele",
    "aquela",
    "something",
    "anything",
    "algo",
];

/// Forms of *to be* / *ser* / *estar*, the tails English contractions split into (`it's` →
/// `it` `s`, `I'm`, `you're`), and the modals that stand before them (`the number should be
/// 420`, `deveria ser 420`).
pub const FILLER_TO_BE: &[&str] = &[
    "be", "is", "are", "am", "was", "were", "been", "s", "m", "re", "ser", "e", "eh", "sou", "es",
    "somos", "sao", "era", "eram", "foi", "estar", "esta", "ta", "estou", "estamos", "estao",
    "estava", "should", "must", "would", "deveria", "devia", "deve",
];

/// Politeness: `45, please`, `é 45, obrigado`. (`por favor` is in [`FILLER_PHRASES`].)
pub const FILLER_POLITENESS: &[&str] = &[
    "please", "pls", "plz", "thanks", "thank", "thx", "ty", "cheers", "obrigado", "obrigada",
    "brigado", "brigada", "valeu", "grato", "grata", "pf", "pfv", "pfvr",
];

/// Conjunctions joining several answers: `01310-100 and 45`, `01310-100 e 45`.
pub const FILLER_CONJUNCTIONS: &[&str] = &["and", "e"];

/// Discourse markers and acknowledgements: `sorry, 45`, `ok, 45`, `sim, é 45`. `ok`, `yes` and
/// `sim` are here on purpose: while parameters are being collected they acknowledge the question
/// (`ok, 45` answers it); they decide nothing on their own, as a message without a value fills
/// nothing. Negations (`no`, `not`, `não`) are not filler: `não é 45` must not fill 45. The
/// verbs customers hand a value over with are filler too: `righto, put 1 then`, `coloca 12`.
pub const FILLER_DISCOURSE: &[&str] = &[
    "actually",
    "sorry",
    "oops",
    "well",
    "so",
    "ah",
    "oh",
    "uh",
    "um",
    "hmm",
    "hm",
    "just",
    "ok",
    "okay",
    "yes",
    "yeah",
    "yep",
    "sure",
    "right",
    "here",
    "desculpa",
    "desculpe",
    "ops",
    "opa",
    "bom",
    "entao",
    "certo",
    "claro",
    "sim",
    "pronto",
    "aqui",
    "olha",
    "then",
    "righto",
    "put",
    "use",
    "coloca",
    "coloque",
    "bota",
    "poe",
    "usa",
    // Coming back with the value looked up: `found it, 04538 133`, `achei: 04538 133, numero 77`.
    "found",
    "achei",
    "encontrei",
    // Hedges: an answer the customer is unsure of is still the answer (`I think it's 45`,
    // `acho que é PED-12`: checked, and explained when invalid, not routed elsewhere).
    "think",
    "guess",
    "believe",
    "acho",
    "creio",
];

/// MG-6: words of correction forms, filler only when a message is read as a possible
/// correction (a collected value or a confirmation is pending): `I meant 45`, `make that 15
/// instead`, `change it to 45`, `no wait, it should be 45`, `quis dizer 22`, `corrigindo: 22`,
/// `troca pra 45`, `yes but the number is 210`, `no, the zip is …`. A negation right before a
/// value (`not 150`, `não é 20`) marks the old value, which the reader sets aside first.
pub const CORRECTION_MARKERS: &[&str] = &[
    "meant",
    "mean",
    "make",
    "instead",
    "change",
    "changed",
    "to",
    "should",
    "be",
    "but",
    "except",
    "exceto",
    "wait",
    "correction",
    "typo",
    "mistake",
    "misread",
    "misspoke",
    "mistyped",
    "misheard",
    "wrong",
    "rather",
    "correct",
    "one",
    "new",
    "update",
    "quis",
    "quero",
    "dizer",
    "digo",
    "digitei",
    "errado",
    "errei",
    "corrigindo",
    "correcao",
    "correto",
    "certo",
    "melhor",
    "mas",
    "porem",
    "however",
    "espera",
    "pera",
    "troca",
    "trocar",
    "muda",
    "mudar",
    "altera",
    "alterar",
    "pra",
    "para",
    // `na real` (slang for "actually"): `é 25,40 na real`; `na verdade` (`na vdd`) likewise
    // (markers are set aside before filler phrases are read).
    "real",
    "na",
    "verdade",
    "vdd",
    // Affirm-and-correct with the confirming verb: `confirmo sim mas o valor é 98,90`,
    // `confirmed, but the amount is 44.50` (the value changed, so it is asked again).
    "confirm",
    "confirmed",
    "confirmo",
    "confirma",
    // Going back on a value: `no sorry it was 5 after all`, `afinal é 5 mesmo`.
    "afinal",
    "mesmo",
    "novo",
    "nova",
    "lugar",
    "vez",
    "em",
    "de",
    "no",
    "nao",
    "not",
];

/// Question words that say on their own that a message asks (folded): a question typed
/// without its mark (`antes disso onde ta o pedido`), what is asked about an id (`where is my
/// order ped 11427`). `wheres` / `whats`: typed without the apostrophe.
pub const QUESTION_WORDS: &[&str] = &[
    "where", "wheres", "when", "what", "whats", "how", "onde", "cade", "quando", "qual", "como",
];

/// Words that frame a request without saying what it is (folded): `quero contestar`, `I want to
/// track`, `can you help me cancel`. The engine's MG-5 reading and the embeddings router both
/// set them aside to see what a message says beyond asking.
pub const REQUEST_FRAME: &[&str] = &[
    "want",
    "wanna",
    "would",
    "like",
    "need",
    "to",
    "can",
    "could",
    "help",
    "quero",
    "queria",
    "gostaria",
    "preciso",
    "precisava",
    "de",
    "pode",
    "poderia",
    "ajuda",
    "ajudar",
    "favor",
];

/// Filler phrases whose words are not filler alone (`por` is a preposition).
pub const FILLER_PHRASES: &[&[&str]] = &[
    &["por", "favor"],
    &["por", "gentileza"],
    &["na", "verdade"],
    &["after", "all"],
    &["acho", "que"],
    &["creio", "que"],
];

/// The longest filler phrase.
pub(super) const MAX_PHRASE_WORDS: usize = 2;

pub(super) const FILLER_LISTS: [&[&str]; 6] = [
    FILLER_ARTICLES,
    FILLER_PRONOUNS,
    FILLER_TO_BE,
    FILLER_POLITENESS,
    FILLER_CONJUNCTIONS,
    FILLER_DISCOURSE,
];

/// Whether a folded word is filler on its own. Laughter is chat noise beside a value as
/// anywhere else (`it's 46.50 lol`, `é 19,50 kkkk`).
pub(super) fn is_filler(word: &str) -> bool {
    FILLER_LISTS.iter().any(|list| list.contains(&word)) || is_laughter(word)
}

/// Laughter as typed in chat, one folded word: `lol`, `lmao`, `kkkk`, `hahaha`, `hehe`, `rsrs`.
pub(crate) fn is_laughter(word: &str) -> bool {
    let only = |set: &str| !word.is_empty() && word.chars().all(|c| set.contains(c));
    matches!(word, "lol" | "lool" | "lmao" | "lmfao" | "rofl")
        || (word.len() >= 2 && only("k"))
        || (word.len() >= 4 && only("hae") && word.matches('h').count() >= 2)
        || (word.len() >= 2 && word.len() % 2 == 0 && word.as_bytes().chunks(2).all(|c| c == b"rs"))
}

/// The length of a filler phrase starting at `words[0]`, if one does.
fn phrase_at<S: AsRef<str>>(words: &[S]) -> Option<usize> {
    FILLER_PHRASES
        .iter()
        .find(|p| p.len() <= words.len() && p.iter().zip(words).all(|(a, b)| *a == b.as_ref()))
        .map(|p| p.len())
}

/// The length of a filler phrase ending at the last of `words`, if one does.
pub(super) fn phrase_ending<S: AsRef<str>>(words: &[S]) -> Option<usize> {
    FILLER_PHRASES
        .iter()
        .find(|p| {
            p.len() <= words.len()
                && p.iter()
                    .rev()
                    .zip(words.iter().rev())
                    .all(|(a, b)| *a == b.as_ref())
        })
        .map(|p| p.len())
}

/// Whether `words` are all filler words or filler phrases.
pub(super) fn all_filler<S: AsRef<str>>(words: &[S]) -> bool {
    let mut rest = words;
    while let Some((first, tail)) = rest.split_first() {
        if let Some(n) = phrase_at(rest) {
            rest = rest.get(n..).unwrap_or(&[]);
        } else if is_filler(first.as_ref()) {
            rest = tail;
        } else {
            return false;
        }
    }
    true
}
