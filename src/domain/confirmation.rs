//! Deterministic confirmation recogniser (PR-6): affirmations, negations and judgements of
//! correctness in English and Brazilian Portuguese.
//!
//! A message decides only when **every** word in it belongs to the lexicon below and its
//! polarity is unambiguous; one unknown word leaves it undecided, so the recogniser can be rich
//! without guessing. Matching is case- and accent-insensitive (`NÃO` = `nao`), curly
//! apostrophes count as straight ones, and a hyphen inside a word joins (`uh-huh`).
//!
//! How a message is read:
//! - A question mark anywhere (`ok?`, `pode?`) leaves it undecided: a question is not an answer.
//! - Punctuation splits the message into clauses; a phrase never spans two clauses, so
//!   `não, pode` is a negation and an affirmation (undecided) while `não pode` is one negation.
//! - Each clause is read with the longest lexicon phrase at each position. Entries are:
//!   *answers* (`yes`, `sim`, `no`), *judgements* (`true`, `correct`, `certo`, `wrong`, and
//!   verbs of consent such as `go ahead`, `pode`), *negators* (`not`, `don't`, `não`),
//!   *intensifiers* (`absolutely`, `very`), *hedges* (`sure`, `certain`), *filler* (politeness,
//!   pronouns, forms of to be / ser / estar, framings such as `i think`, `the answer is`,
//!   `what you just said`) and *uncertainty* (`maybe`, `not sure`, `i don't know`, `talvez`).
//! - A negator turns the next affirming judgement of its clause into a negation (`not correct`,
//!   `não está certo`, `that isn't the right answer`); a negator with nothing after it is a
//!   negation (`please don't`, `i think not`, `absolutely not`). A negated negative judgement
//!   (`not false`, `not wrong`) is left undecided rather than read as consent; a negated hedge
//!   (`not sure`, `not positive`), a negated strong intensifier (`not exactly`) and a negated
//!   verb of thinking with nothing after it (`i can't believe it`) are uncertainty.
//! - Uncertainty anywhere leaves the message undecided (`maybe yes`).
//! - Affirmation and negation in one message (`no, wait, yes`) leave it undecided. An
//!   intensifier that can stand alone (`absolutely!`, `definitely`) affirms when nothing else in
//!   the message has a polarity.
//!
//! Decisions where the contract is silent:
//! - `thanks`, `obrigado`, `valeu` are politeness like `please`: `no thanks` is a negation and
//!   politeness alone decides nothing.
//! - Bare `right` (a clause starting with it), `cancel` and `stop` decide nothing: they are
//!   ambiguous between an answer and a new request. `right` counts after another word of its
//!   clause (`that's right`, `exactly right`).
//! - A statement that the offer is what the customer wants (`that's what i want`, `i'd like
//!   that`, `é isso que eu quero`) is an affirming judgement, and a negator flips it (`that's
//!   not what i want`); any wish beyond those phrases is left to the order of evaluation.
//! - `pode ser` is uncertainty (it means "could be" as often as "fine"); `tá` alone is filler.
//! - Digits or any symbol outside ordinary punctuation leave the message undecided, except the
//!   emoji that say `ok` (👍 ✅), `no` (👎 ❌) or `maybe` (🤔 🤷), and faces and hearts, which
//!   say nothing (`sim 👍`, `pode 🙏`).
//! - Chat noise is not an unknown word: laughter and interjections (`lol`, `kkkk`, `hahaha`,
//!   `rsrs`, `putz`) are filler, and a stretched word (`yesss`, `siiim`, `nãooo`) is the lexicon
//!   word it stretches.
//! - [`answer_after_asides`]: clauses of chat before the answer (`sorry my cat walked on the
//!   phone. yes cancel it`) do not hide it when they carry no answer, digit, action verb,
//!   contrast, deferral, wish or question word; the answer must come last.
//! - [`answer_before_asides`]: a plain answer first, then chat (`yes, sorry, I swapped the digits
//!   the first time`, `sim, já falei kkk`): decided when every later clause is such an aside with
//!   no doubt or farewell, and the first is more than an acknowledgement (`ok good, leave it as
//!   it is` decides nothing).
//! - One lexicon serves both locales: customers mix them (`ok`, `yes` in pt-BR chats), and no
//!   entry of one language means the opposite in the other.

use std::collections::HashMap;
use std::sync::OnceLock;

/// The user's answer to a confirmation question.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Confirmation {
    Affirm,
    Deny,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Polarity {
    Affirm,
    Deny,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// An answer on its own (`yes`, `sim`, `no`); a negator before it does not flip it.
    Answer(Polarity),
    /// A judgement or a verb of consent (`true`, `go ahead`, `wrong`); a negator flips an
    /// affirming one. `bare: false` = not at the start of a clause (`right`).
    Judgement { polarity: Polarity, bare: bool },
    /// `sure`, `certain`: affirming, but negated it is uncertainty.
    Hedge,
    /// `not`, `don't`, `não`.
    Negator,
    /// `absolutely` (`alone: true` affirms when nothing else has a polarity), `very`.
    Intensifier { alone: bool },
    /// Politeness, pronouns, copulas, `the answer`.
    Filler,
    /// A verb of thinking or saying (`i think`, `i would say`): filler, except that a negated
    /// one with no judgement after it (`i can't believe it`) leaves the message undecided.
    Frame,
    /// `maybe`, `not sure`, `i don't know`.
    Uncertain,
}

use Kind::{Answer, Filler, Frame, Hedge, Intensifier, Negator, Uncertain};
use Polarity::{Affirm, Deny};

const fn judge(polarity: Polarity) -> Kind {
    Kind::Judgement {
        polarity,
        bare: true,
    }
}

const YES: Kind = Answer(Affirm);
const NO: Kind = Answer(Deny);
const TRUE: Kind = judge(Affirm);
const FALSE: Kind = judge(Deny);
const STRONG: Kind = Intensifier { alone: true };
const MILD: Kind = Intensifier { alone: false };

/// The lexicon, folded (lowercase, no accents, straight apostrophes), words separated by one
/// space. Each phrase appears once (a unit test checks).
const LEXICON: &[(&str, Kind)] = &[
    // ---- en answers
    ("yes", YES),
    ("yeah", YES),
    ("yea", YES),
    ("yeap", YES),
    ("yep", YES),
    ("yup", YES),
    ("ye", YES),
    ("yeh", YES),
    ("yah", YES),
    ("ya", YES),
    ("aye", YES),
    ("uh huh", YES),
    ("mhm", YES),
    ("mm hmm", YES),
    ("ok", YES),
    ("okay", YES),
    ("okey", YES),
    ("okie", YES),
    ("alright", YES),
    ("all right", YES),
    ("sure thing", YES),
    ("of course", YES),
    ("affirmative", YES),
    ("affirmitive", YES),
    ("afirmative", YES),
    ("you got it", YES),
    ("you bet", YES),
    ("no doubt", YES),
    ("no", NO),
    ("nope", NO),
    ("nah", NO),
    ("naw", NO),
    ("nay", NO),
    ("nada", NO),
    ("no way", NO),
    ("no chance", NO),
    ("negative", NO),
    ("negatory", NO),
    ("of course not", NO),
    ("not at all", NO),
    ("not now", NO),
    ("not happening", NO),
    ("no good", NO),
    ("i'll pass", NO),
    ("ill pass", NO),
    ("i pass", NO),
    ("hard pass", NO),
    ("i think not", NO),
    ("i don't think so", NO),
    ("i dont think so", NO),
    ("i do not think so", NO),
    ("i'd rather not", NO),
    ("rather not", NO),
    ("better not", NO),
    ("disagree", NO),
    // ---- en judgements and verbs of consent
    ("true", TRUE),
    ("correct", TRUE),
    (
        "right",
        Kind::Judgement {
            polarity: Affirm,
            bare: false,
        },
    ),
    ("accurate", TRUE),
    ("proper", TRUE),
    ("valid", TRUE),
    ("factual", TRUE),
    ("fact", TRUE),
    ("facts", TRUE),
    ("the truth", TRUE),
    ("the case", TRUE),
    ("confirm", TRUE),
    ("confirmed", TRUE),
    ("approved", TRUE),
    ("approve", TRUE),
    ("accepted", TRUE),
    ("accept", TRUE),
    ("agreed", TRUE),
    ("agree", TRUE),
    // Statements that the offer is what the customer wants: judgements, so a negator flips
    // them (`that's not what i want`, `i don't like that`).
    ("what i want", TRUE),
    ("what i wanted", TRUE),
    ("what i need", TRUE),
    ("like that", TRUE),
    ("i'd like that", TRUE),
    ("i would like that", TRUE),
    ("how it is", TRUE),
    ("do like that", TRUE),
    ("i'd", Filler),
    ("fine", TRUE),
    ("good", TRUE),
    ("great", TRUE),
    ("awesome", TRUE),
    ("perfect", TRUE),
    ("excellent", TRUE),
    ("sounds good", TRUE),
    ("sounds great", TRUE),
    ("sounds right", TRUE),
    ("works", TRUE),
    ("makes sense", TRUE),
    ("go ahead", TRUE),
    ("very well", TRUE),
    ("the one", TRUE),
    ("go for it", TRUE),
    ("crack on", TRUE),
    ("carry on", TRUE),
    ("let's go", TRUE),
    ("lets go", TRUE),
    ("let's do it", TRUE),
    ("lets do it", TRUE),
    ("let's roll", TRUE),
    ("lets roll", TRUE),
    ("make it so", TRUE),
    ("send it", TRUE),
    ("hit it", TRUE),
    ("too easy", TRUE),
    ("lovely", TRUE),
    ("brilliant", TRUE),
    ("sweet", TRUE),
    ("spot on", TRUE),
    ("bingo", TRUE),
    ("righto", YES),
    ("roger", YES),
    ("yessir", YES),
    ("final answer", Filler),
    ("go on", TRUE),
    ("proceed", TRUE),
    // A bare `go` consents (`ok go`, `ok ok go 👍`); with its object named, consent goes on to
    // the transaction (`proceed with the cancellation`).
    ("go", TRUE),
    ("proceed with", TRUE),
    ("go ahead with", TRUE),
    ("carry on with", TRUE),
    ("go through with", TRUE),
    ("continue", TRUE),
    ("continue with", TRUE),
    ("please do", TRUE),
    ("do it", TRUE),
    ("do that", TRUE),
    ("right answer", TRUE),
    ("i think so", TRUE),
    ("i believe so", TRUE),
    ("false", FALSE),
    ("wrong", FALSE),
    ("incorrect", FALSE),
    ("improper", FALSE),
    ("inaccurate", FALSE),
    ("untrue", FALSE),
    ("invalid", FALSE),
    ("erroneous", FALSE),
    ("mistaken", FALSE),
    ("fake", FALSE),
    ("bogus", FALSE),
    ("a lie", FALSE),
    ("wrong answer", FALSE),
    ("terrible", FALSE),
    ("bad", FALSE),
    ("awful", FALSE),
    // ---- en hedges, negators, intensifiers
    ("sure", Hedge),
    ("certain", Hedge),
    ("confident", Hedge),
    ("positive", Hedge),
    ("not", Negator),
    ("don't", Negator),
    ("dont", Negator),
    ("do not", Negator),
    ("doesn't", Negator),
    ("doesnt", Negator),
    ("does not", Negator),
    ("isn't", Negator),
    ("isnt", Negator),
    ("aren't", Negator),
    ("arent", Negator),
    ("wasn't", Negator),
    ("wasnt", Negator),
    ("weren't", Negator),
    ("can't", Negator),
    ("cant", Negator),
    ("cannot", Negator),
    ("can not", Negator),
    ("won't", Negator),
    ("wont", Negator),
    ("wouldn't", Negator),
    ("wouldnt", Negator),
    ("shouldn't", Negator),
    ("ain't", Negator),
    ("never", Negator),
    ("absolutely", STRONG),
    ("definitely", STRONG),
    ("obviously", STRONG),
    ("obviamente", STRONG),
    ("naturally", STRONG),
    ("naturalmente", STRONG),
    ("most definitely", STRONG),
    ("certainly", STRONG),
    ("indeed", STRONG),
    ("exactly", STRONG),
    ("precisely", STRONG),
    ("totally", STRONG),
    ("for sure", STRONG),
    ("very", MILD),
    ("very much", MILD),
    ("really", MILD),
    ("alot", MILD),
    ("a lot", MILD),
    ("truly", MILD),
    ("completely", MILD),
    ("entirely", MILD),
    ("actually", MILD),
    ("quite", MILD),
    ("pretty", MILD),
    ("so", MILD),
    ("so much", MILD),
    ("most", MILD),
    ("overwhelmingly", MILD),
    ("resounding", MILD),
    ("definite", MILD),
    ("hard", MILD),
    ("at all", MILD),
    ("hell", MILD),
    ("just", MILD),
    ("all", MILD),
    // ---- en filler: politeness, pronouns, copulas, framings
    // The operation named as the object of consent (`proceed with the cancellation`): a name,
    // not a verb (`cancel`, `change` are the tools' verbs, PR-6).
    ("cancellation", Filler),
    ("the contestation", Filler),
    ("the address change", Filler),
    ("the request", Filler),
    ("the operation", Filler),
    // A modal before the action's verb grants it, as `pode` does (`yes can cancel`, `you can
    // change it`); `can't` and `cannot` are negators, and `can you …?` a question.
    ("can", Filler),
    ("please", Filler),
    ("pls", Filler),
    ("plz", Filler),
    ("thanks", Filler),
    ("thank you", Filler),
    ("thank you very much", Filler),
    ("thx", Filler),
    ("sorry", Filler),
    ("i'm afraid", Filler),
    ("im afraid", Filler),
    ("i am afraid", Filler),
    ("oh", Filler),
    ("ohh", Filler),
    ("well", Filler),
    ("hmm", Filler),
    ("hm", Filler),
    ("um", Filler),
    ("uh", Filler),
    ("ah", Filler),
    ("hey", Filler),
    ("sir", Filler),
    // Terms of address (`yes dear`, `pode sim, meu filho`): politeness, like `sir`.
    ("dear", Filler),
    ("my dear", Filler),
    ("buddy", Filler),
    ("mate", Filler),
    ("pal", Filler),
    ("bro", Filler),
    ("ma'am", Filler),
    ("maam", Filler),
    ("then", Filler),
    ("now", Filler),
    ("also", Filler),
    ("too", Filler),
    ("and", Filler),
    ("a", Filler),
    ("an", Filler),
    ("the", Filler),
    ("i", Filler),
    ("i'm", Filler),
    ("im", Filler),
    ("am", Filler),
    ("me", Filler),
    ("my", Filler),
    ("you", Filler),
    ("you're", Filler),
    ("youre", Filler),
    ("it", Filler),
    ("it's", Filler),
    ("its", Filler),
    ("it'd", Filler),
    ("that", Filler),
    ("that's", Filler),
    ("thats", Filler),
    ("that'd", Filler),
    ("thatd", Filler),
    ("that'll", Filler),
    ("this", Filler),
    ("is", Filler),
    ("are", Filler),
    ("was", Filler),
    ("were", Filler),
    ("be", Filler),
    ("been", Filler),
    ("will be", Filler),
    ("would be", Filler),
    ("should be", Filler),
    ("one", Filler),
    ("to that", Filler),
    ("to this", Filler),
    ("to that question", Filler),
    ("to the question", Filler),
    ("on that", Filler),
    ("about that", Filler),
    ("from me", Filler),
    ("for me", Filler),
    ("the answer", Filler),
    ("my answer", Filler),
    ("the response", Filler),
    ("my response", Filler),
    ("as my answer", Filler),
    ("as my response", Filler),
    ("statement", Filler),
    ("information", Filler),
    ("info", Filler),
    ("what you just said", Filler),
    ("what you said", Filler),
    ("what you're saying", Filler),
    ("think", Frame),
    ("believe", Frame),
    ("i know", Frame),
    ("i say", Frame),
    ("i'd say", Frame),
    ("id say", Frame),
    ("i would say", Frame),
    ("i must say", Frame),
    ("i have to say", Frame),
    ("i would have to say", Frame),
    ("i'd have to say", Frame),
    ("i gotta say", Frame),
    ("i've got to say", Frame),
    ("i'm going to say", Frame),
    ("i'm gonna say", Frame),
    ("i'll say", Frame),
    ("i vote", Frame),
    ("i meant", Frame),
    ("i mean", Frame),
    ("i'm saying", Frame),
    ("i am saying", Frame),
    ("i'm telling you", Frame),
    ("i am telling you", Frame),
    ("i want you to know", Frame),
    ("i would prefer", Filler),
    ("i'd prefer", Filler),
    ("i can", Filler),
    ("seems", Frame),
    ("it seems", Frame),
    ("appears", Frame),
    ("it appears", Frame),
    // ---- en uncertainty
    ("maybe", Uncertain),
    ("perhaps", Uncertain),
    ("possibly", Uncertain),
    ("possible", Uncertain),
    ("possibility", Uncertain),
    ("probably", Uncertain),
    ("probable", Uncertain),
    ("might", Uncertain),
    ("may", Uncertain),
    ("could", Uncertain),
    ("either", Uncertain),
    ("neither", Uncertain),
    ("both", Uncertain),
    ("unsure", Uncertain),
    ("uncertain", Uncertain),
    ("undecided", Uncertain),
    ("unclear", Uncertain),
    ("not sure", Uncertain),
    ("not certain", Uncertain),
    ("idk", Uncertain),
    ("dunno", Uncertain),
    ("don't know", Uncertain),
    ("dont know", Uncertain),
    ("do not know", Uncertain),
    ("no idea", Uncertain),
    ("no clue", Uncertain),
    ("not a clue", Uncertain),
    ("haven't a clue", Uncertain),
    ("can't say", Uncertain),
    ("cant say", Uncertain),
    ("cannot say", Uncertain),
    ("couldn't say", Uncertain),
    ("hard to say", Uncertain),
    ("can't tell", Uncertain),
    ("cant tell", Uncertain),
    ("can't confirm", Uncertain),
    ("cannot confirm", Uncertain),
    ("who knows", Uncertain),
    ("guess", Uncertain),
    ("suppose", Uncertain),
    ("depends", Uncertain),
    ("kind of", Uncertain),
    ("kinda", Uncertain),
    ("sort of", Uncertain),
    ("sorta", Uncertain),
    // ---- pt-BR answers
    ("sim", YES),
    // Chat shorthand for `sim` (`ss pode cancelar`).
    ("ss", YES),
    // Spanish speakers writing Portuguese (`sí, pode`), and `sim` without its last letter.
    ("si", YES),
    ("claro", YES),
    ("claro que sim", YES),
    ("com certeza", YES),
    ("beleza", YES),
    ("blz", YES),
    ("ta bom", YES),
    ("ta ok", YES),
    ("ta certo", YES),
    ("pode crer", YES),
    ("manda ver", YES),
    ("manda bala", YES),
    ("fechado", YES),
    ("bora", YES),
    ("bora la", YES),
    ("fechou", YES),
    ("partiu", YES),
    ("firmeza", YES),
    ("dale", YES),
    ("suave", YES),
    ("tranquilo", YES),
    ("massa", TRUE),
    ("demorou", YES),
    ("de boa", YES),
    ("pode ir", TRUE),
    ("segue", TRUE),
    ("prossiga", TRUE),
    ("uhum", YES),
    ("aham", YES),
    ("positivo", YES),
    ("sem duvida", YES),
    ("tudo bem", YES),
    ("negativo", NO),
    ("nem pensar", NO),
    ("de jeito nenhum", NO),
    ("de forma alguma", NO),
    ("nada disso", NO),
    ("claro que nao", NO),
    ("agora nao", NO),
    ("nao quero", NO),
    ("melhor nao", NO),
    ("nao pode", NO),
    ("nao precisa", NO),
    ("discordo", NO),
    // ---- pt-BR judgements and verbs of consent
    ("pode", TRUE),
    ("pode sim", TRUE),
    ("pode seguir", TRUE),
    ("pode continuar", TRUE),
    ("pode prosseguir", TRUE),
    ("pode fazer", TRUE),
    ("pode confirmar", TRUE),
    ("pode mandar", TRUE),
    // Verbs of carrying the operation out (`pode efetuar a alteração`, `pode prosseguir`).
    ("efetuar", TRUE),
    ("efetua", TRUE),
    ("efetue", TRUE),
    ("realizar", TRUE),
    ("realiza", TRUE),
    ("realize", TRUE),
    ("prosseguir", TRUE),
    ("continuar", TRUE),
    ("continua", TRUE),
    ("siga", TRUE),
    ("seguir com", TRUE),
    ("confirmo", TRUE),
    ("confirma", TRUE),
    ("confirmado", TRUE),
    ("confirmada", TRUE),
    ("quero", TRUE),
    ("quero sim", TRUE),
    ("concordo", TRUE),
    ("aprovado", TRUE),
    ("isso", TRUE),
    // `(é) só isso` closes (`that's all`): its `isso` is no yes (`brigada, é só isso` at a
    // confirmation ran the tool).
    ("so isso", Filler),
    ("isso mesmo", TRUE),
    ("isso msm", TRUE),
    ("isso que eu quero", TRUE),
    ("e isso que eu quero", TRUE),
    ("era isso que eu queria", TRUE),
    ("isso ai", TRUE),
    // `esse mesmo` (that very one): the offer named as the one wanted.
    ("esse mesmo", TRUE),
    ("essa mesma", TRUE),
    ("este mesmo", TRUE),
    ("esta mesma", TRUE),
    // `aí` pointing again (`esse aí mesmo`: that one there, that very one).
    ("esse ai mesmo", TRUE),
    ("essa ai mesma", TRUE),
    // `isso é`, `isso está`: the pronoun before a judgement (`isso está errado`).
    ("isso e", Filler),
    ("isso esta", Filler),
    ("isso ta", Filler),
    ("certo", TRUE),
    ("certinho", TRUE),
    ("correto", TRUE),
    ("exato", TRUE),
    ("verdade", TRUE),
    ("verdadeiro", TRUE),
    ("perfeito", TRUE),
    ("otimo", TRUE),
    ("tudo certo", TRUE),
    ("faz sentido", TRUE),
    ("acho que sim", TRUE),
    ("errado", FALSE),
    ("incorreto", FALSE),
    ("falso", FALSE),
    ("mentira", FALSE),
    ("invalido", FALSE),
    // ---- pt-BR negators and intensifiers
    ("nao", Negator),
    ("nunca", Negator),
    ("exatamente", STRONG),
    ("certamente", STRONG),
    ("totalmente", MILD),
    ("muito", MILD),
    ("mesmo", MILD),
    ("mesma", MILD),
    // Chat spelling of `mesmo`.
    ("msm", MILD),
    ("bem", MILD),
    ("realmente", MILD),
    // ---- pt-BR filler
    // The operation named as the object of consent (`pode efetuar a alteração`): a name, not
    // a verb (`troca`, `cancela` are the tools' verbs, PR-6).
    ("alteracao", Filler),
    ("cancelamento", Filler),
    ("contestacao", Filler),
    ("a mudanca", Filler),
    ("a operacao", Filler),
    ("a solicitacao", Filler),
    ("com", Filler),
    ("por favor", Filler),
    ("meu deus", Filler),
    ("oh my god", Filler),
    ("hum", Filler),
    ("logo", Filler),
    ("right away", Filler),
    ("de uma vez", Filler),
    ("tenho certeza", Hedge),
    ("pfv", Filler),
    ("pf", Filler),
    ("obrigado", Filler),
    ("obrigada", Filler),
    ("muito obrigado", Filler),
    ("muito obrigada", Filler),
    ("brigado", Filler),
    ("brigada", Filler),
    ("valeu", Filler),
    ("grato", Filler),
    ("grata", Filler),
    ("desculpa", Filler),
    ("desculpe", Filler),
    ("olha", Filler),
    ("entao", Filler),
    ("agora", Filler),
    ("cool", Filler),
    ("pensando bem", Filler),
    ("on second thought", Filler),
    ("senhor", Filler),
    ("whatever", Filler),
    // Framing before the answer (`Compreendo. Nesse caso, pode prosseguir`, `fine, do it
    // anyway`, `finally. yes`, `ok where was i. yes cancel it`, `Pois bem. Confirmo`).
    ("compreendo", Filler),
    ("nesse caso", Filler),
    ("neste caso", Filler),
    ("in that case", Filler),
    ("anyway", Filler),
    ("anyways", Filler),
    ("mesmo assim", Filler),
    ("finally", Filler),
    ("finalmente", Filler),
    ("enfim", Filler),
    ("pois bem", Filler),
    ("por gentileza", Filler),
    ("where was i", Filler),
    ("onde eu estava", Filler),
    // Chat shorthand for ok (`k do it`: the verb answers); `vai lá` (go on).
    ("k", Filler),
    ("vai la", YES),
    ("ele", Filler),
    ("ela", Filler),
    ("lo", Filler),
    ("la", Filler),
    ("senhora", Filler),
    ("esse", Filler),
    ("essa", Filler),
    ("este", Filler),
    ("isto", Filler),
    // `né` closing an answer (`sim né`) asks for agreement, it adds no polarity.
    ("ne", Filler),
    ("na verdade", Filler),
    // `não manda ainda não`, `don't submit it yet`: time words around a refusal.
    ("ainda", Filler),
    ("yet", Filler),
    // `so no for now`, `não, por enquanto não`: for the time being, still the answer.
    ("for now", Filler),
    ("for the moment", Filler),
    ("por enquanto", Filler),
    ("por agora", Filler),
    ("meu filho", Filler),
    ("minha filha", Filler),
    ("filho", Filler),
    ("filha", Filler),
    ("moco", Filler),
    ("moca", Filler),
    ("querido", Filler),
    ("querida", Filler),
    ("meu querido", Filler),
    ("minha querida", Filler),
    ("amigo", Filler),
    ("amiga", Filler),
    ("meu amigo", Filler),
    ("minha amiga", Filler),
    ("eu", Filler),
    ("e", Filler),
    ("esta", Filler),
    ("ta", Filler),
    ("o", Filler),
    ("os", Filler),
    ("as", Filler),
    ("uma", Filler),
    ("acho", Frame),
    ("acho que", Frame),
    ("creio que", Frame),
    ("pra mim", Filler),
    ("por mim", Filler),
    ("a resposta", Filler),
    ("minha resposta", Filler),
    // ---- pt-BR uncertainty
    ("talvez", Uncertain),
    ("nao sei", Uncertain),
    ("sei la", Uncertain),
    ("sei nao", Uncertain),
    ("nao tenho certeza", Uncertain),
    ("quem sabe", Uncertain),
    ("depende", Uncertain),
    ("provavelmente", Uncertain),
    ("possivelmente", Uncertain),
    ("mais ou menos", Uncertain),
    ("pode ser", Uncertain),
    ("acho que talvez", Uncertain),
    ("duvido", Uncertain),
];

/// The lexicon's phrases, folded, in their listed order (for checks that compare them with
/// other texts, e.g. `tests/conversations_overlap.rs`).
pub fn lexicon_phrases() -> impl Iterator<Item = &'static str> {
    LEXICON.iter().map(|(phrase, _)| *phrase)
}

fn lexicon() -> &'static (HashMap<&'static str, Kind>, usize) {
    static LOOKUP: OnceLock<(HashMap<&'static str, Kind>, usize)> = OnceLock::new();
    LOOKUP.get_or_init(|| {
        let longest = LEXICON
            .iter()
            .map(|(phrase, _)| phrase.split(' ').count())
            .max()
            .unwrap_or(1);
        (LEXICON.iter().copied().collect(), longest)
    })
}

/// Decides only for a message made of lexicon phrases with one unambiguous polarity; anything
/// else → None (the turn goes on through the order of evaluation).
pub fn recognise(text: &str) -> Option<Confirmation> {
    recognise_with(text, &[])
}

/// [`recognise`] with the pending tool's action verbs (PR-6): `sure, change it` and `pode
/// trocar` affirm when `change` / `trocar` are its verbs. A verb counts as an affirmation word
/// only beside an affirmation (`change it` alone decides nothing, nor does `no, change it`);
/// negated (`don't change it`, `não troca`) it is a negation. Verbs are phrases, compared
/// folded like every word here.
pub fn recognise_with(text: &str, action_verbs: &[String]) -> Option<Confirmation> {
    if text.contains(['?', '¿']) {
        return None;
    }
    let verbs = verb_phrases(action_verbs);
    let mut acted = false;
    let mut affirm = false;
    let mut deny = false;
    let mut intensified = false;
    for clause in clauses(text)? {
        let clause: Vec<String> = clause.into_iter().map(unstretched).collect();
        let mut negated = false;
        let mut negated_frame = false;
        let mut at = 0;
        while at < clause.len() {
            let rest = clause.get(at..).unwrap_or(&[]);
            let (len, kind) = match longest_phrase(rest, at == 0) {
                Some(found) => found,
                None => {
                    let len = longest_verb(rest, &verbs)?;
                    at += len;
                    if std::mem::take(&mut negated) {
                        deny = true;
                    } else {
                        acted = true;
                    }
                    continue;
                }
            };
            at += len;
            match kind {
                Uncertain => return None,
                Filler => {}
                Frame => negated_frame |= negated,
                // `not exactly`, `not definitely`: a hedge, not a negation.
                Intensifier { alone: true } if negated => return None,
                Intensifier { alone } => intensified |= alone,
                Negator => negated = true,
                Hedge if negated => return None,
                Hedge => affirm = true,
                Answer(polarity) => {
                    // `don't, yes` is mixed: the negator stays a negation of its own.
                    deny |= std::mem::take(&mut negated);
                    negated_frame = false;
                    match polarity {
                        Affirm => affirm = true,
                        Deny => deny = true,
                    }
                }
                Kind::Judgement { polarity, .. } => match (polarity, {
                    negated_frame = false;
                    std::mem::take(&mut negated)
                }) {
                    (Affirm, false) => affirm = true,
                    (Deny, false) | (Affirm, true) => deny = true,
                    // `not wrong`: consent by double negation is not deterministic enough.
                    (Deny, true) => return None,
                },
            }
        }
        if negated && negated_frame {
            return None;
        }
        deny |= negated;
    }
    if acted && (deny || !affirm) {
        // `change it` alone, or `no, change it`: the verb is no answer on its own.
        return None;
    }
    match (affirm, deny) {
        (true, false) => Some(Confirmation::Affirm),
        (false, true) => Some(Confirmation::Deny),
        (false, false) if intensified => Some(Confirmation::Affirm),
        _ => None,
    }
}

/// PR-6 for a longer message: its first clause plainly refuses (`melhor não, vou esperar`,
/// `nope, I'll check with my wife first`) and no later clause affirms or names the action
/// (`não, pode cancelar`, `no, change it` decide nothing): a refusal, always safe to act on. A
/// question decides nothing. The engine asks only after the typed reading (`no, the zip is …`
/// is a correction).
///
/// Returns what follows the refusal (`don't cancel it, just track PED-2719` → `just track
/// PED-2719`), which the engine routes when it names another tool's action.
pub fn refuses_first<'t>(text: &'t str, action_verbs: &[String]) -> Option<&'t str> {
    const BREAKS: [char; 4] = [',', '.', ';', '!'];
    // The first clause that says something (`hmm, on second thought don't cancel it`).
    let (head, rest) = text
        .match_indices(BREAKS)
        .map(|(at, _)| (&text[..at], &text[at + 1..]))
        .find(|(head, _)| !only_filler(head))?;
    if head.trim().is_empty() || rest.trim().is_empty() || text.contains(['?', '¿']) {
        return None;
    }
    (recognise_with(head, action_verbs) == Some(Confirmation::Deny)
        && !rest
            .split(BREAKS)
            .any(|c| recognise_with(c, action_verbs) == Some(Confirmation::Affirm))
        && !names_a_verb(rest, action_verbs))
    .then(|| rest.trim())
}

/// Words that put the answer off (folded): `let me check with my bank first`, `vou ver com o
/// banco antes`.
const DEFERRALS: &[&str] = &[
    "first",
    "later",
    "before",
    "check",
    "ask",
    "think",
    "wait",
    "hold",
    "yet",
    "antes",
    "depois",
    "primeiro",
    "pensar",
    "perguntar",
    "verificar",
    "conferir",
    "ver",
    "espera",
    "pera",
    "perai",
    "ainda",
    "maybe",
    "talvez",
];

/// PR-6 for a message that puts the answer off, then refuses (`hmm actually let me check with
/// my bank first. don't submit it yet`, `na verdade vou ver com o banco antes. não manda ainda
/// não`): its last clause refuses on its own, and every earlier clause is filler, an aside or a
/// deferral (a word of [`DEFERRALS`], no digit, nothing affirming). A question decides nothing.
/// A refusal, always safe to act on.
pub fn refuses_after_deferral(text: &str, action_verbs: &[String]) -> bool {
    if text.contains(['?', '¿']) {
        return false;
    }
    let Some(clauses) = clauses(text) else {
        return false;
    };
    // Politeness after the refusal (`not now, thanks`) is not its last word.
    let said = clauses
        .iter()
        .rposition(|c| !only_filler(&c.join(" ")))
        .map_or(0, |at| at + 1);
    let Some((last, earlier)) = clauses.get(..said).and_then(<[_]>::split_last) else {
        return false;
    };
    if earlier.is_empty()
        || recognise_with(&last.join(" "), action_verbs) != Some(Confirmation::Deny)
    {
        return false;
    }
    // Read left to right with the longest phrase at each word, so `na verdade` is the filler
    // it is and not `verdade` (true).
    let affirms = |words: &[String]| {
        let mut at = 0;
        while at < words.len() {
            match longest_phrase(words.get(at..).unwrap_or(&[]), at == 0) {
                Some((_, Answer(Affirm) | Hedge)) => return true,
                Some((
                    _,
                    Kind::Judgement {
                        polarity: Affirm, ..
                    },
                )) => return true,
                Some((len, _)) => at += len,
                None => at += 1,
            }
        }
        false
    };
    earlier.iter().all(|c| {
        let words: Vec<String> = c.iter().cloned().map(unstretched).collect();
        let defers = words.iter().any(|w| DEFERRALS.contains(&w.as_str()))
            && !words
                .iter()
                .any(|w| w.chars().any(|ch| ch.is_ascii_digit()))
            && !affirms(&words);
        // `actually`, `well then`: lexicon words with no polarity of their own.
        let neutral = {
            let mut at = 0;
            while let Some((len, Filler | Frame | Intensifier { alone: false })) =
                longest_phrase(words.get(at..).unwrap_or(&[]), at == 0)
            {
                at += len;
            }
            at == words.len()
        };
        defers
            || neutral
            || is_aside(&words, &[])
            || recognise_with(&words.join(" "), action_verbs) == Some(Confirmation::Deny)
    })
}

/// PR-6 for a message that opens with chat: its last clause decides on its own and every earlier
/// clause is the same answer or an aside — chat that carries no answer, value, request or
/// reservation (`sorry my cat walked on the phone. yes cancel it`, `foi mal, meu filho pegou o
/// celular. sim, cancela`). The answer must come last, so an aside after it (`ok, let me check
/// with my wife`) leaves the message undecided. `catalog_verbs`: every tool's verbs; a clause
/// naming one is a request, not an aside.
pub fn answer_after_asides(
    text: &str,
    action_verbs: &[String],
    catalog_verbs: &[String],
) -> Option<Confirmation> {
    if text.contains(['?', '¿']) {
        return None;
    }
    let clauses = clauses(text)?;
    let alone = |c: &[String]| recognise_with(&c.join(" "), action_verbs);
    // The answer is every clause after the last aside, read together (`sim, cancela`).
    let last_aside = clauses.iter().rposition(|c| {
        alone(c).is_none()
            && (is_aside(c, catalog_verbs) || opened_aside(c, catalog_verbs).is_some())
    })?;
    let (earlier, answer) = clauses.split_at(last_aside + 1);
    let answer: Vec<String> = answer.iter().map(|c| c.join(" ")).collect();
    // No clause after the last aside: nothing to read, and `recognise_with` decides nothing.
    let answer = recognise_with(&answer.join(", "), action_verbs)?;
    earlier
        .iter()
        .all(|c| match alone(c) {
            Some(said) => said == answer,
            None => {
                is_aside(c, catalog_verbs)
                    || opened_aside(c, catalog_verbs)
                        .is_some_and(|opened| opened.is_none_or(|o| o == answer))
            }
        })
        .then_some(answer)
}

/// PR-6 for an answer followed by chat: the first clause that is not filler answers on its own
/// (`yes`, `sim`, `yes cancel it`) and every later clause says the same or is an aside — chat
/// that carries no answer, value, request, reservation, doubt or farewell (`yes, sorry, I swapped
/// the digits the first time`, `sim, já falei kkk`, `yes, my wife bought it by mistake`). An
/// aside that defers or contrasts (`ok, let me check with my wife first`, `sim, mas…`) or
/// doubts (`yes, the zip is wrong`) leaves the message undecided, as a question does.
pub fn answer_before_asides(
    text: &str,
    action_verbs: &[String],
    catalog_verbs: &[String],
) -> Option<Confirmation> {
    // A reservation: `leave it as it is`, `deixa assim` keep things as they are.
    const DOUBTS: &[&str] = &[
        "wrong",
        "incorrect",
        "errado",
        "errada",
        "incorreto",
        "incorreta",
        "sure",
        "certeza",
        "leave",
        "deixa",
    ];
    // Acknowledgements: `ok good, leave it as it is then` opens with no answer to the question.
    const ACKNOWLEDGING: &[&str] = &[
        "ok", "okay", "k", "good", "great", "fine", "cool", "alright", "nice", "perfect", "then",
        "beleza", "blz", "ta", "bom", "certo", "otimo", "legal", "show", "entao",
    ];
    if text.contains(['?', '¿']) {
        return None;
    }
    let clauses = clauses(text)?;
    let mut said = clauses.iter().skip_while(|c| only_filler(&c.join(" ")));
    let first = said.next()?;
    let acknowledges = first
        .iter()
        .all(|w| ACKNOWLEDGING.contains(&unstretched(w.clone()).as_str()));
    let answer = if acknowledges {
        // An acknowledgement answers when a yes follows it (`ok, sim, pode cancelar`).
        recognise_with(&said.next()?.join(" "), action_verbs)
            .filter(|a| *a == Confirmation::Affirm)?
    } else {
        recognise_with(&first.join(" "), action_verbs)?
    };
    let rest: Vec<&Vec<String>> = said.collect();
    let fits = |c: &Vec<String>| {
        // `the first time`, `da primeira vez` date what happened; they defer nothing.
        let words: Vec<String> = c
            .iter()
            .enumerate()
            .filter(|(i, w)| {
                let next = c.get(i + 1).map(String::as_str);
                !matches!(
                    (w.as_str(), next),
                    ("first", Some("time")) | ("primeira", Some("vez"))
                )
            })
            .map(|(_, w)| w.clone())
            .collect();
        let joined = words.join(" ");
        recognise_with(&joined, action_verbs) == Some(answer)
            // Thanks after a yes or a no thank for the help; they take no leave.
            || only_thanks(&joined)
            || (is_aside(&words, catalog_verbs)
                && !words.iter().any(|w| DOUBTS.contains(&w.as_str()))
                && !says_goodbye(&joined))
    };
    (!rest.is_empty() && rest.into_iter().all(fits)).then_some(answer)
}

/// A clause that opens with answer words and goes on with an aside (`ok she agrees`, `sim, ela
/// concordou`): `Some` with the opening's polarity (`None` when it opened with filler only).
/// Mixed openings (`ok no`) are no such clause.
fn opened_aside(clause: &[String], catalog_verbs: &[String]) -> Option<Option<Confirmation>> {
    let words: Vec<String> = clause.iter().cloned().map(unstretched).collect();
    let mut at = 0;
    let mut said: Option<Confirmation> = None;
    while let Some((len, kind)) = longest_phrase(words.get(at..).unwrap_or(&[]), at == 0) {
        match kind {
            Filler => {}
            Answer(p) => {
                let p = match p {
                    Affirm => Confirmation::Affirm,
                    Deny => Confirmation::Deny,
                };
                if said.is_some_and(|s| s != p) {
                    break;
                }
                said = Some(p);
            }
            _ => break,
        }
        at += len;
    }
    let rest = words.get(at..).unwrap_or(&[]);
    (at > 0 && !rest.is_empty() && is_aside(rest, catalog_verbs)).then_some(said)
}

/// Words that take leave on their own (folded): `bye`, `tchau`.
const FAREWELLS: &[&str] = &[
    "bye",
    "goodbye",
    "byebye",
    "cya",
    "tchau",
    "tchauzinho",
    "flw",
    "falou",
    "adeus",
];

/// Phrases that take leave (folded). A wish counts only as a whole clause of its own kind
/// ([`wish_at`]); `good night` is English only (`boa noite` greets as often as it closes).
const FAREWELL_PHRASES: &[&[&str]] = &[
    &["bye", "bye"],
    &["see", "you"],
    &["see", "ya"],
    &["see", "you", "later"],
    &["take", "care"],
    &["good", "night"],
    &["ate", "mais"],
    &["ate", "logo"],
    &["ate", "breve"],
    &["ate", "a", "proxima"],
    // "That was all I needed": nothing more is wanted, whatever is pending.
    &["that's", "all"],
    &["that", "is", "all"],
    &["that", "will", "be", "all"],
    &["that'll", "be", "all"],
    // Typed without the apostrophe (`ok thank you thats all`).
    &["thats", "all"],
    // Without its subject, as Brazilians write English (`ok thank you very much, is all`).
    &["is", "all"],
    &["nothing", "else"],
    &["mais", "nada"],
    &["nada", "mais"],
];

/// Valedictions, as a letter closes (folded): they stand beside a farewell (`Era só isso. Um
/// abraço`) but take no leave themselves — a letter closes with one after its request too
/// (`… cancel order PED-11623. Kind regards.`).
const VALEDICTIONS: &[&[&str]] = &[
    &["regards"],
    &["kind", "regards"],
    &["best", "regards"],
    &["warm", "regards"],
    &["sincerely"],
    &["abraco"],
    &["abracos"],
    &["um", "abraco"],
    &["abs"],
    &["atenciosamente"],
    &["cordialmente"],
];

/// Whether `clause` is only a valediction (`Kind regards`, `Um abraço`, `Atenciosamente`).
pub fn is_valediction(clause: &str) -> bool {
    let Some(words) = clauses(clause) else {
        return false;
    };
    let words: Vec<String> = words.into_iter().flatten().collect();
    longest_phrase_at(&words, VALEDICTIONS) == Some(words.len())
}

/// The length in words of the longest of `phrases` that `words` starts with.
fn longest_phrase_at(words: &[String], phrases: &[&[&str]]) -> Option<usize> {
    phrases
        .iter()
        .filter(|p| words.len() >= p.len() && words.iter().zip(p.iter()).all(|(w, p)| w == p))
        .map(|p| p.len())
        .max()
}

/// Closings that take leave only once nothing is in flight: with a question pending they may
/// answer it (`era isso` = that is what I meant; `that's it` = that is right).
const CLOSING_PHRASES: &[&[&str]] = &[
    &["that's", "it"],
    &["thats", "it"],
    &["thats", "everything"],
    &["era", "isso"],
    &["era", "so", "isso"],
    &["e", "so", "isso"],
    &["so", "isso"],
    &["done", "here"],
    &["all", "done"],
    &["i'm", "done"],
    &["that's", "everything"],
];

/// Farewell phrases whose words a test sentence could share: listed for
/// `tests/conversations_overlap.rs` beside the recogniser's lexicon.
pub fn farewell_phrases() -> impl Iterator<Item = String> {
    FAREWELL_PHRASES
        .iter()
        .chain(CLOSING_PHRASES)
        .map(|p| p.join(" "))
}

/// What may stand beside a farewell in a closing clause (folded): `ok, tchau`, `thanks, bye`,
/// `então tá, até mais`, `much obliged, good night`, `está bem, muito obrigada pela atenção`.
const BESIDE_A_FAREWELL: &[&str] = &[
    "ok",
    "okay",
    "k",
    "alright",
    "well",
    "so",
    "then",
    "now",
    "and",
    "thanks",
    "thank",
    "you",
    "thx",
    "ty",
    "ta",
    "entao",
    "e",
    "bom",
    "beleza",
    "blz",
    "valeu",
    "vlw",
    "obrigado",
    "obrigada",
    "brigado",
    "brigada",
    "obg",
    "gente",
    "pessoal",
    "everyone",
    "all",
    "for",
    // Thanks for everything (`obrigada por tudo e boa noite`).
    "everything",
    "por",
    "tudo",
    "much",
    "many",
    "very",
    "obliged",
    "appreciate",
    "it",
    "your",
    "the",
    "help",
    "great",
    "perfect",
    "cool",
    "nice",
    "awesome",
    "esta",
    "bem",
    "muito",
    "pela",
    "pelo",
    "atencao",
    "ajuda",
    "show",
    "otimo",
    "otima",
    "perfeito",
    "massa",
    "top",
    "y'all",
    "guys",
    // What the thanks are for, in formal closings (`agradeço imensamente a atenção`, `muito
    // obrigado pela presteza`, `thank you for your patience`).
    "imensamente",
    "presteza",
    "paciencia",
    "gentileza",
    "atendimento",
    "sua",
    "seu",
    "a",
    "patience",
    "assistance",
    "service",
    // Waving off an apology or a wait before closing (`alright no problem thank you so much
    // have a good one`, `sem problema, valeu, tchau`).
    "no",
    "problem",
    "problems",
    "worries",
    "sem",
    "problema",
    // Acknowledging before closing (`I understand. In that case, that will be all.`).
    "i",
    "understand",
    "in",
    "that",
    "case",
    "entendi",
    "entendo",
];

/// A wish that closes (folded words from `at`): `have a good one`, `have a nice day`, `tenha um
/// bom dia`, `tenha uma ótima tarde` — the verb, an article, an adjective of good wishes, then
/// what is wished; returns how many words it takes. After thanks the verb may go unsaid
/// (`obrigado, bom fim de semana!`, `thanks, great weekend`): no one greets after thanking.
fn wish_at(words: &[String], thanked: bool) -> Option<usize> {
    const VERBS: &[&str] = &["have", "tenha", "tenham"];
    const ARTICLES: &[&str] = &["a", "um", "uma"];
    const GOOD: &[&str] = &[
        "good",
        "nice",
        "great",
        "lovely",
        "wonderful",
        "bom",
        "boa",
        "otimo",
        "otima",
        "excelente",
    ];
    const WISHED: &[&str] = &[
        "one",
        "day",
        "night",
        "evening",
        "afternoon",
        "weekend",
        "dia",
        "tarde",
        "noite",
        "semana",
    ];
    let word = |i: usize| words.get(i).map(String::as_str);
    let mut at = 0;
    if word(0).is_some_and(|w| VERBS.contains(&w)) {
        at = 1;
    } else if !thanked {
        return None;
    }
    if at > 0 && word(at).is_some_and(|w| ARTICLES.contains(&w)) {
        at += 1;
    }
    if !word(at).is_some_and(|w| GOOD.contains(&w)) {
        return None;
    }
    at += 1;
    match word(at) {
        Some("fim") if word(at + 1) == Some("de") && word(at + 2) == Some("semana") => Some(at + 3),
        Some(w) if WISHED.contains(&w) => Some(at + 1),
        _ => None,
    }
}

/// SC-10: whether `clause` takes leave — a farewell (`bye`, `tchau`, `see you`, `até mais`,
/// `that's all`, `era isso`, `have a good one`) with nothing beside it but acknowledgement and
/// thanks (`ok, tchau`; `thanks, bye bye`). A closing clause that says so ends a message
/// whatever came before it (`vence dia 10 né? ok, tchau`): the customer is not waiting for an
/// answer. A bare wish of the time of day in pt-BR (`boa noite`) is not a farewell here: it
/// greets as often as it closes.
pub fn says_goodbye(clause: &str) -> bool {
    takes_leave(clause, true)
}

/// SC-10: whether `clause` takes leave whatever is pending — [`says_goodbye`] without the
/// closings that may answer a pending question (`era isso`, `that's it`): `vlw tchau` and
/// `many thanks, that is all` leave a confirmation unanswered, `era isso` may answer it.
pub fn says_goodbye_in_flight(clause: &str) -> bool {
    takes_leave(clause, false)
}

fn takes_leave(clause: &str, closings: bool) -> bool {
    let Some(words) = clauses(clause) else {
        return false;
    };
    let words: Vec<String> = words.into_iter().flatten().map(unstretched).collect();
    let mut at = 0;
    let mut farewell = false;
    let mut thanked = false;
    while at < words.len() {
        let rest = &words[at..];
        let phrase = longest_phrase_at(rest, FAREWELL_PHRASES)
            .max(longest_phrase_at(rest, CLOSING_PHRASES).filter(|_| closings))
            .or_else(|| wish_at(rest, thanked))
            // After thanks, a wish of the time of day closes (`grato pela atenção. boa noite`):
            // no one greets after thanking.
            .or_else(|| thanked.then(|| time_of_day_at(rest)).flatten());
        let word = rest[0].as_str();
        let valediction = longest_phrase_at(rest, VALEDICTIONS);
        if let Some(len) = phrase {
            farewell = true;
            at += len;
        } else if FAREWELLS.contains(&word) || FAREWELLS.contains(&squeezed(word).as_str()) {
            farewell = true;
            at += 1;
        } else if let Some(len) = valediction {
            at += len;
        } else if BESIDE_A_FAREWELL.contains(&word)
            || THANKS.contains(&word)
            || BESIDE_THANKS.contains(&word)
        {
            thanked |= THANKS.contains(&word);
            at += 1;
        } else {
            return false;
        }
    }
    farewell
}

/// A pt-BR wish of the time of day at the start of `words` (`boa noite`, `bom dia`), as the
/// number of words it takes.
fn time_of_day_at(words: &[String]) -> Option<usize> {
    match (words.first()?.as_str(), words.get(1)?.as_str()) {
        ("boa", "noite" | "tarde") | ("bom", "dia") => Some(2),
        _ => None,
    }
}

/// Words that thank (folded).
const THANKS: &[&str] = &[
    "thanks",
    "thank",
    "thx",
    "ty",
    "obrigado",
    "obrigada",
    "brigado",
    "brigada",
    "obg",
    "obgd",
    "valeu",
    "vlw",
    "agradeco",
    "grato",
    "grata",
    "appreciate",
    "agradece",
    "agradecemos",
];

/// What else a thanks may carry without saying more (folded): `obrigado mesmo assim`, `thanks
/// again`, `valeu demais`.
const BESIDE_THANKS: &[&str] = &[
    "mesmo",
    "assim",
    "anyway",
    "anyways",
    "again",
    "a",
    "bunch",
    "ton",
    "lot",
    "muitissimo",
    "demais",
    "mto",
    "ai",
    // Thanks in advance take no leave: they thank for what is still to come (`obrigado desde
    // já`, `thanks in advance`).
    "desde",
    "ja",
    "in",
    "advance",
    "antecipadamente",
    "viu",
    "ah",
    "oh",
    // Who thanks and how much (`I really appreciate it`, `ela agradece`).
    "i",
    "we",
    "she",
    "he",
    "really",
    "truly",
    "eu",
    "ela",
    "ele",
    "nos",
];

/// SC-10: whether `message` only thanks (`obrigado mesmo assim`, `thanks a lot!`, `ok, valeu`):
/// thanks with nothing beside them but acknowledgement — no farewell ([`says_goodbye`]), no
/// request, no closing. Thanks are answered; they do not end the session (the customer may
/// well go on).
pub fn only_thanks(message: &str) -> bool {
    let Some(words) = clauses(message) else {
        return false;
    };
    let words: Vec<String> = words.into_iter().flatten().map(unstretched).collect();
    words.iter().any(|w| THANKS.contains(&w.as_str()))
        && words.iter().all(|w| {
            THANKS.contains(&w.as_str())
                || BESIDE_THANKS.contains(&w.as_str())
                || BESIDE_A_FAREWELL.contains(&w.as_str())
        })
}

/// `word` with each run of one letter made one (`tchauuu` → `tchau`, `byee` → `bye`).
fn squeezed(word: &str) -> String {
    let mut chars: Vec<char> = word.chars().collect();
    chars.dedup();
    chars.into_iter().collect()
}

/// SC-10: whether `text` opens by consenting (its first clause that is not filler affirms), every
/// later clause affirms too or is an aside ([`is_aside`]: no value, correction, refusal, doubt or
/// request), and it neither asks nor says goodbye — a message the engine must not read as
/// an end while that consent is pending (`então tá, confirmado`, `yes, my wife bought it by mistake`).
pub fn opens_with_consent(text: &str, action_verbs: &[String]) -> bool {
    // Beyond the words that take leave alone: the first words of `see you`, `até logo`.
    const LEAVE_TAKING: &[&str] = &["later", "ate", "see"];
    if text.contains(['?', '¿']) {
        return false;
    }
    let Some(clauses) = clauses(text) else {
        return false;
    };
    let farewell = clauses.iter().flatten().any(|w| {
        let w = unstretched(w.clone());
        FAREWELLS.contains(&w.as_str()) || LEAVE_TAKING.contains(&w.as_str())
    });
    let affirms =
        |c: &Vec<String>| recognise_with(&c.join(" "), action_verbs) == Some(Confirmation::Affirm);
    let mut said = clauses.iter().skip_while(|c| only_filler(&c.join(" ")));
    !farewell && said.next().is_some_and(affirms) && said.all(|c| affirms(c) || is_aside(c, &[]))
}

/// Whether a lexicon phrase of a kind `wanted` accepts starts at any word of `words`.
fn holds_phrase(words: &[String], wanted: impl Fn(&Kind) -> bool) -> bool {
    let (lookup, longest) = lexicon();
    (0..words.len()).any(|at| {
        let mut phrase = String::new();
        words.iter().skip(at).take(*longest).any(|w| {
            if !phrase.is_empty() {
                phrase.push(' ');
            }
            phrase.push_str(w);
            lookup.get(phrase.as_str()).is_some_and(&wanted)
        })
    })
}

/// Words that make a clause more than an aside: a contrast, another object, a deferral, a wish
/// or a question.
const NOT_ASIDE: &[&str] = &[
    "but",
    "except",
    "instead",
    "other",
    "another",
    "else",
    "wait",
    "first",
    "later",
    "check",
    "ask",
    "think",
    "hold",
    "before",
    "after",
    "mind",
    "change",
    "changed",
    "different",
    "only",
    "also",
    "want",
    "need",
    "like",
    "where",
    "when",
    "how",
    "what",
    "why",
    "which",
    "mas",
    "porem",
    "exceto",
    "outro",
    "outra",
    "outros",
    "outras",
    "espera",
    "pera",
    "perai",
    "antes",
    "depois",
    "primeiro",
    "pensar",
    "perguntar",
    "verificar",
    "conferir",
    "ver",
    "ideia",
    "mudei",
    "diferente",
    "tambem",
    "tb",
    "tbm",
    "quero",
    "queria",
    "preciso",
    "gostaria",
    "onde",
    "quando",
    "como",
    "qual",
    "quanto",
    "quanta",
    "pq",
    "porque",
];

/// Whether a clause (folded words) is chat around an answer: no digit, no word of
/// [`NOT_ASIDE`], no action verb of any tool, no lexicon phrase with a polarity.
pub(crate) fn is_aside(clause: &[String], catalog_verbs: &[String]) -> bool {
    let words: Vec<String> = clause.iter().cloned().map(unstretched).collect();
    !words.is_empty()
        && !words
            .iter()
            .any(|w| w.chars().any(|c| c.is_ascii_digit()) || NOT_ASIDE.contains(&w.as_str()))
        && !holds_phrase(&words, |k| !matches!(k, Filler | Frame))
        && !names_a_verb(&words.join(" "), catalog_verbs)
}

/// Whether every word of `text` is filler or an interjection (`hmm`, `well, oh`).
fn only_filler(text: &str) -> bool {
    clauses(text).is_some_and(|cs| {
        cs.iter().all(|c| {
            let mut at = 0;
            while at < c.len() {
                match longest_phrase(c.get(at..).unwrap_or(&[]), at == 0) {
                    Some((len, Filler)) => at += len,
                    _ => return false,
                }
            }
            true
        })
    })
}

/// The action verb phrases as folded words, as the recogniser compares them.
pub(crate) fn verb_phrases(action_verbs: &[String]) -> Vec<Vec<String>> {
    action_verbs
        .iter()
        .filter_map(|v| clauses(v))
        .filter_map(|c| c.into_iter().next())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether `text` holds one of the action verb phrases (`no, change it` is no refusal).
pub(crate) fn names_a_verb(text: &str, action_verbs: &[String]) -> bool {
    let verbs = verb_phrases(action_verbs);
    clauses(text).is_some_and(|cs| {
        cs.iter().any(|c| {
            (0..c.len()).any(|i| longest_verb(c.get(i..).unwrap_or(&[]), &verbs).is_some())
        })
    })
}

/// Words that negate a verb up to three words after them (folded, as [`clauses`] splits them):
/// `don't track it`, `não quero cancelar`, `can't you see it on my account?`.
const VERB_NEGATORS: &[&str] = &[
    "not", "no", "don't", "dont", "didn't", "never", "can't", "cant", "cannot", "won't", "nao",
    "nem", "nunca",
];

/// Whether `phrase` occurs in `words` with no [`VERB_NEGATORS`] word in the three words before
/// it.
pub(crate) fn said_unnegated(words: &[String], phrase: &[String]) -> bool {
    !phrase.is_empty()
        && (0..words.len()).any(|at| {
            words.get(at..at + phrase.len()) == Some(phrase)
                && !words
                    .get(at.saturating_sub(3)..at)
                    .unwrap_or(&[])
                    .iter()
                    .any(|w| VERB_NEGATORS.contains(&w.as_str()))
        })
}

/// Whether `text` names one of the action verb phrases, not negated (`show me the bill`; not
/// `can't you see it on my account?`). Symbols the recogniser does not read are skipped.
pub(crate) fn names_a_verb_unnegated(text: &str, action_verbs: &[String]) -> bool {
    let plain: String = text
        .chars()
        .filter(|c| c.is_alphanumeric() || c.is_whitespace() || c.is_ascii() || is_punctuation(*c))
        .collect();
    let words: Vec<String> = clauses(&plain)
        .unwrap_or_default()
        .into_iter()
        .flatten()
        .collect();
    verb_phrases(action_verbs)
        .iter()
        .any(|v| said_unnegated(&words, v))
}

/// The length in words of the longest action verb phrase at the start of `rest`, if any. A
/// word typed with two neighbouring letters swapped reads as the verb's word (`yes cancle it`,
/// `pode cacnelar`) when that word has five letters or more, as the lexicon's words do.
fn longest_verb(rest: &[String], verbs: &[Vec<String>]) -> Option<usize> {
    verbs
        .iter()
        .filter(|v| v.len() <= rest.len() && v.iter().zip(rest).all(|(a, b)| same_verb_word(a, b)))
        .map(Vec::len)
        .max()
}

/// Whether the typed word `typed` is the verb word `verb`, or it with one neighbouring-letter
/// swap (five letters or more: `cancle`, `chnage`; short words swap into other words).
fn same_verb_word(verb: &str, typed: &str) -> bool {
    if verb == typed {
        return true;
    }
    let letters: Vec<char> = typed.chars().collect();
    letters.len() >= 5
        && verb.chars().count() == letters.len()
        && neighbours_swapped(&letters).any(|w| w == verb)
}

/// A word typed stretched (`yesss`, `siiim`, `okkk`, `nãooo`) as the lexicon word it stretches,
/// or with two neighbouring letters swapped (`pdoe`, `yse`: four letters or more, one lexicon
/// word only), when it is not a lexicon word itself.
fn unstretched(word: String) -> String {
    let (lookup, _) = lexicon();
    if lookup.contains_key(word.as_str()) {
        return word;
    }
    let squeezed = squeezed(&word);
    if squeezed != word && lookup.contains_key(squeezed.as_str()) {
        return squeezed;
    }
    let letters: Vec<char> = word.chars().collect();
    if letters.len() < 4 {
        return word;
    }
    let mut swapped = neighbours_swapped(&letters).filter(|w| lookup.contains_key(w.as_str()));
    match (swapped.next(), swapped.next()) {
        (Some(only), None) => only,
        _ => word,
    }
}

/// `letters` with each pair of different neighbouring letters swapped, one pair at a time
/// (`pdoe` → `dpoe`, `pode`, `pdeo`): the slip a fast or dyslexic typist makes most.
pub fn neighbours_swapped(letters: &[char]) -> impl Iterator<Item = String> + '_ {
    (0..letters.len().saturating_sub(1))
        .filter(move |&i| letters[i] != letters[i + 1])
        .map(move |i| {
            let mut w = letters.to_vec();
            w.swap(i, i + 1);
            w.into_iter().collect()
        })
}

/// Interjections (`ugh`, `putz`, `nossa`) and laughter: chat noise that carries no answer, read
/// as filler wherever they stand.
fn is_interjection(word: &str) -> bool {
    const WORDS: &[&str] = &[
        "omg", "ugh", "argh", "meh", "jeez", "geez", "gosh", "wow", "oof", "welp", "phew", "aff",
        "affs", "afe", "putz", "vish", "vixe", "eita", "nossa", "poxa", "puxa", "caramba", "gente",
        "mano", "ufa", "ops", "opa", "ih", "xi", "ai", "ae",
    ];
    WORDS.contains(&word) || crate::domain::parameter::is_laughter(word)
}

/// The longest lexicon phrase at the start of `rest`: its length in words and its kind. `None`
/// when no phrase starts here (an unknown word), or when the only one may not open a clause.
fn longest_phrase(rest: &[String], clause_start: bool) -> Option<(usize, Kind)> {
    let (lookup, longest) = lexicon();
    let mut phrase = String::new();
    let mut best = None;
    for (i, word) in rest.iter().take(*longest).enumerate() {
        if i > 0 {
            phrase.push(' ');
        }
        phrase.push_str(word);
        match lookup.get(phrase.as_str()) {
            Some(Kind::Judgement { bare: false, .. }) if clause_start && i == 0 => {}
            Some(&kind) => best = Some((i + 1, kind)),
            None => {}
        }
    }
    best.or_else(|| {
        rest.first()
            .filter(|w| is_interjection(w))
            .map(|_| (1, Filler))
    })
}

/// The message's clauses (split at punctuation), each a list of folded words; `None` if it
/// holds anything but letters, digits, whitespace and ordinary punctuation.
pub(crate) fn clauses(text: &str) -> Option<Vec<Vec<String>>> {
    let chars: Vec<char> = text
        .chars()
        .map(|c| match c {
            '\u{2019}' | '\u{2018}' | '\u{2bc}' | '\u{b4}' | '`' => '\'',
            '\u{2010}' | '\u{2011}' => '-',
            other => other,
        })
        .collect();
    let mut clauses = Vec::new();
    let mut clause = Vec::new();
    let mut word = String::new();
    for (i, &c) in chars.iter().enumerate() {
        let joins_letters = !word.is_empty() && chars.get(i + 1).is_some_and(|n| n.is_alphabetic());
        if c.is_alphanumeric() || (c == '\'' && joins_letters) || is_combining(c) {
            for lc in c.to_lowercase() {
                if !is_combining(lc) {
                    word.push(strip_accent(lc));
                }
            }
        } else if c.is_whitespace() || c == '\u{200b}' || (c == '-' && joins_letters) {
            if !word.is_empty() {
                clause.push(std::mem::take(&mut word));
            }
        } else if is_punctuation(c) {
            if !word.is_empty() {
                clause.push(std::mem::take(&mut word));
            }
            if !clause.is_empty() {
                clauses.push(std::mem::take(&mut clause));
            }
        } else {
            match emoji_word(c)? {
                "" => {}
                // A face between words closes what came before, as a full stop would (`it was
                // my son who subscribed 🙈 nah forget it`).
                FACE => {
                    if !word.is_empty() {
                        clause.push(std::mem::take(&mut word));
                    }
                    if !clause.is_empty() {
                        clauses.push(std::mem::take(&mut clause));
                    }
                }
                said => {
                    if !word.is_empty() {
                        clause.push(std::mem::take(&mut word));
                    }
                    clause.push(said.to_owned());
                }
            }
        }
    }
    if !word.is_empty() {
        clause.push(word);
    }
    if !clause.is_empty() {
        clauses.push(clause);
    }
    Some(clauses)
}

/// What [`emoji_word`] gives for a face, a heart or joined hands: no word, the end of a clause.
const FACE: &str = ".";

/// An emoji as the word it says in an answer: a thumbs-up or a check mark is `ok`, a
/// thumbs-down or a cross `no`, a shrug or a thinking face `maybe`; faces, hearts and joined
/// hands say nothing but close a clause ([`FACE`]), the modifiers that join or tint emoji
/// nothing at all (`""`). `None`: a symbol whose meaning in an answer is unclear, which leaves
/// the message undecided.
fn emoji_word(c: char) -> Option<&'static str> {
    match c {
        '👍' | '👌' | '✅' | '✔' | '☑' | '🆗' | '🙆' | '🤝' => Some("ok"),
        '👎' | '❌' | '✖' | '🚫' | '🙅' => Some("no"),
        '🤔' | '🤷' => Some("maybe"),
        // The text variation selector and the gender signs of a joined emoji (`🤷‍♀️`) too.
        c if is_emoji_modifier(c) => Some(""),
        '\u{fe0e}' | '♀' | '♂' => Some(""),
        c if is_face(c) => Some(FACE),
        _ => None,
    }
}

/// Faces and gestures (🙂 😅 🙏 🥲), hearts and sparkles: a mood, no word — in an answer they
/// close a clause ([`FACE`]), and what a sentence model reads of a message leaves them out.
/// Checked after the emoji that say something (🤔 is `maybe` in an answer).
pub fn is_face(c: char) -> bool {
    matches!(c,
        '\u{1f600}'..='\u{1f64f}'
        | '\u{1f910}'..='\u{1f92f}'
        | '\u{1f970}'..='\u{1f97a}'
        | '❤'
        | '\u{1f493}'..='\u{1f49f}'
        | '🧡'
        | '✨')
}

/// What tints or joins emoji: skin tones, the emoji variation selector, the zero-width joiner.
pub fn is_emoji_modifier(c: char) -> bool {
    matches!(c, '\u{1f3fb}'..='\u{1f3ff}' | '\u{fe0f}' | '\u{200d}')
}

fn is_punctuation(c: char) -> bool {
    c.is_ascii_punctuation()
        || matches!(
            c,
            '¡' | '¿' | '…' | '«' | '»' | '“' | '”' | '„' | '–' | '—' | '·'
        )
}

fn is_combining(c: char) -> bool {
    ('\u{300}'..='\u{36f}').contains(&c)
}

fn strip_accent(c: char) -> char {
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' => 'a',
        'ç' => 'c',
        'è' | 'é' | 'ê' | 'ë' => 'e',
        'ì' | 'í' | 'î' | 'ï' => 'i',
        'ñ' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' => 'o',
        'ù' | 'ú' | 'û' | 'ü' => 'u',
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn all(texts: &[&str], expected: Option<Confirmation>) {
        for text in texts {
            assert_eq!(recognise(text), expected, "{text:?}");
        }
    }

    #[test]
    fn english_affirmations() {
        // PR-6: the contract's list, with politeness and punctuation around it.
        all(
            &[
                "yes",
                "yeah",
                "yep",
                "sure",
                "ok",
                "okay",
                "confirm",
                "correct",
                "go ahead",
                "please do",
                "Yes!",
                "  OK.  ",
                "yes, go ahead",
                "Yes please",
                "yes, thanks",
                "YES YES",
                "that's right",
                "that’s correct",
                "sure, go ahead!",
                "of course",
                "all right...",
                "uh-huh",
                "yes\u{200b}please",
            ],
            Some(Confirmation::Affirm),
        );
    }

    #[test]
    fn portuguese_affirmations() {
        // PR-6
        all(
            &[
                "sim",
                "pode",
                "claro",
                "confirmo",
                "isso",
                "ok",
                "pode sim",
                "sim, pode",
                "sim por favor",
                "Sim, obrigado!",
                "isso mesmo",
                "isso msm",
                "SIM",
                "tá bom",
                "com certeza",
                "claro que sim",
                "isso aí",
                "está certo",
                "é verdade",
                "tudo certo, pode seguir",
            ],
            Some(Confirmation::Affirm),
        );
    }

    #[test]
    fn colloquial_and_regional_consents() {
        // PR-6: British, Australian and casual English; pt-BR slang. `final answer` is filler.
        all(
            &[
                "Lovely, yes, crack on",
                "yes, final answer",
                "let's roll",
                "too easy, yep",
                "righto",
                "brilliant, send it",
                "fechou",
                "bora lá",
                "partiu, pode fazer",
                "firmeza",
                "tranquilo, pode ir",
            ],
            Some(Confirmation::Affirm),
        );
        // Negated, a consent refuses.
        all(
            &["don't send it", "no, don't crack on"],
            Some(Confirmation::Deny),
        );
        // Interjections and `aí` around a consent, thanks after it, certainty stated.
        all(
            &[
                "claro, confirma aí",
                "confirma ae",
                "ai meu deus, sim sim, isso logo",
                "yes please do that, thank you so much",
                "sim, agora tenho certeza",
                "yes, right away",
            ],
            Some(Confirmation::Affirm),
        );
        all(&["não tenho certeza", "ai, sei lá"], None);
        all(
            &["ai não", "ai, não", "humm, melhor não"],
            Some(Confirmation::Deny),
        );
    }

    #[test]
    fn consent_to_carry_the_operation_out_affirms() {
        // PR-6: a bare `go`, and a verb of carrying it out with the operation as its object.
        all(
            &[
                "ok go",
                "ok ok go 👍",
                "Very well. Yes, please proceed with the cancellation.",
                "go ahead with the address change",
                "Agora está correto. Pode efetuar a alteração, por favor.",
                "pode prosseguir com o cancelamento",
                "sim, pode realizar a contestação",
                // Framing before the answer, formal or chatty.
                "Compreendo. Nesse caso, pode prosseguir com a alteração, por gentileza.",
                "Pois bem. Confirmo a contestação.",
                "fine, do it anyway",
                "finally. yes",
                "ok where was i. yes",
                "vai lá 👍",
            ],
            Some(Confirmation::Affirm),
        );
        all(
            &[
                "no, don't proceed with the cancellation",
                "não efetua a alteração",
            ],
            Some(Confirmation::Deny),
        );
        // The operation named with nothing about it decides nothing.
        all(&["the cancellation", "a alteração", "go back"], None);
    }

    #[test]
    fn thanks_with_nothing_but_acknowledgement_only_thank() {
        for text in [
            "obrigado mesmo assim",
            "thanks a lot!",
            "ok, valeu",
            "Thank you so much",
            "ah, obrigado desde já viu",
            "thanks in advance",
        ] {
            assert!(only_thanks(text), "{text}");
        }
        for text in [
            "thanks, bye",
            "ok",
            "thanks, that's all",
            "valeu, cancela",
            "",
        ] {
            assert!(!only_thanks(text), "{text}");
        }
    }

    #[test]
    fn a_farewell_with_nothing_but_thanks_beside_it_takes_leave() {
        for text in [
            "tchau",
            "ok, tchau",
            "thanks, bye bye",
            "byeee",
            "então tá, até mais",
            "ok then, see you",
            "valeu, falou",
            "Much obliged. Good night.",
            "tá bom brigado era isso",
            "Está bem. Muito obrigada pela atenção, tenha uma boa tarde.",
            "thanks so much, have a great weekend",
            "ok that's all, thank you",
            "Thanks. Done here.",
            // After thanks, a wish of the time of day closes; so do formal thanks.
            "obrigada, boa tarde",
            "Muito obrigado pela presteza. Boa noite.",
            "Agradeço imensamente a atenção. Tenham uma ótima tarde.",
            "Grato pela atenção. Boa noite.",
            "I understand. In that case, that will be all. Thank you for your patience.",
            // After thanks, a wish needs no verb; a waved-off apology stands beside a closing.
            "obrigado, bom fim de semana!",
            "valeu, boa semana",
            "alright no problem thank you so much have a good one",
            "sem problema, valeu, tchau",
            "ok thank you thats all",
            // Valedictions beside a farewell; `is all` as Brazilians write English.
            "Thanks, that is all. Kind regards",
            "Era só isso mesmo. Um abraço",
            "valeu, tchau, abs",
            "Obrigada por tudo e boa noite",
            "ok thank you very much, is all",
        ] {
            assert!(says_goodbye(text), "{text}");
        }
        for text in [
            "thanks",
            "boa noite",
            // Greeting first: the wish opens (`boa tarde, obrigada por atender`).
            "boa tarde, obrigada",
            // A valediction alone takes no leave: letters close with one after a request.
            "Kind regards",
            "Atenciosamente",
            "have a look",
            "era isso mesmo que eu queria cancelar",
            "that's all wrong",
            "cancel it, bye",
            "não quero dar tchau",
            // A wish with no thanks before it greets as often as it closes.
            "bom fim de semana",
            "no problem",
            "até",
            "",
        ] {
            assert!(!says_goodbye(text), "{text}");
        }
    }

    // SC-10: with a transaction in flight only a farewell proper leaves it; a closing that may
    // answer what is pending (`era isso`, `that's it`) does not.
    #[test]
    fn a_farewell_proper_takes_leave_whatever_is_pending() {
        for text in [
            "vlw tchau",
            "ok, tchau",
            "Many thanks for your assistance, that is all.",
            "thanks, see you",
            "obrigado, até mais",
        ] {
            assert!(says_goodbye_in_flight(text), "{text}");
        }
        for text in [
            "tá bom brigado era isso",
            "ok that's it",
            "Thanks. Done here.",
            "ok",
        ] {
            assert!(says_goodbye(text) || text == "ok", "{text}");
            assert!(!says_goodbye_in_flight(text), "{text}");
        }
    }

    #[test]
    fn a_refusing_first_clause_declines_unless_a_later_one_affirms() {
        let verbs: Vec<String> = ["cancel", "cancelar", "pode cancelar", "change", "change it"]
            .iter()
            .map(|v| (*v).to_owned())
            .collect();
        for text in [
            "melhor não, vou esperar mais uma semana",
            "nope, I'll check with my wife first",
            "no thanks. I'll call the bank myself",
            "não, deixa assim",
            // A negated action verb refuses too, and what follows is handed back.
            "don't cancel it, I'll keep it",
        ] {
            assert!(refuses_first(text, &verbs).is_some(), "{text}");
        }
        assert_eq!(
            refuses_first(
                "hmm, on second thought don't cancel it, just track PED-2719",
                &verbs
            ),
            Some("just track PED-2719"),
            "filler before the refusal is no first clause"
        );
        assert_eq!(
            refuses_first("don't cancel it, just track PED-2719 for me", &verbs),
            Some("just track PED-2719 for me")
        );
        for text in [
            "não, pode cancelar",
            "no, yes, go ahead",
            "no, why?",
            "no, change it",
            "no",
            "I'll wait, no thanks",
            "sure, but later",
        ] {
            assert!(refuses_first(text, &verbs).is_none(), "{text}");
        }
    }

    #[test]
    fn english_negations() {
        // PR-6: `thanks` is politeness, so `no thanks` is a plain negation.
        all(
            &[
                "no",
                "nope",
                "don't",
                "don’t",
                "DON'T!",
                "No.",
                "no thanks",
                "no, thank you",
                "please don't",
                "do not",
                "of course not",
                "don't do it",
                "no no no",
                "absolutely not",
                "i think not",
                "better not",
            ],
            Some(Confirmation::Deny),
        );
        // `ss` is chat shorthand for `sim`.
        all(&["ss", "ss pode"], Some(Confirmation::Affirm));
        // `(é) só isso` closes; its `isso` is no yes.
        all(&["brigada, é só isso", "só isso mesmo, obrigado"], None);
    }

    #[test]
    fn portuguese_negations() {
        // PR-6
        all(
            &[
                "não",
                "nao",
                "NÃO",
                "não quero",
                "nao quero",
                "não, obrigado",
                "Não, por favor.",
                "não pode",
                "claro que não",
                "na\u{303}o",
                "não está certo",
                "está errado",
                "não é verdade",
                "de jeito nenhum",
                "não, isso está errado",
                "melhor não",
                "acho melhor não",
            ],
            Some(Confirmation::Deny),
        );
    }

    #[test]
    fn judgements_of_correctness() {
        // PR-6 (amended): judgements decide; a negated affirmation is a negation.
        all(
            &[
                "that is true",
                "you are correct",
                "that's exactly right",
                "what you just said is accurate",
                "the answer is yes",
                "i think that's true",
                "definitely",
                "absolutely!",
                "that would be great",
                "yes sir, that is a fact",
                "yes, obviously",
                "sim, obviamente",
                "sim, pdoe",
            ],
            Some(Confirmation::Affirm),
        );
        all(
            &[
                "not correct",
                "that's not right",
                "that is not true, it's false",
                "you are wrong",
                "that isn't the right answer",
                "no, that can't be right",
                "the statement is false",
                "i don't think so",
                "i do not believe that is correct",
                "not really",
                "i'll pass",
                "that is not the case",
            ],
            Some(Confirmation::Deny),
        );
    }

    #[test]
    fn questions_are_not_answers() {
        // PR-6 (amended): `ok?` asks, it does not confirm.
        all(
            &[
                "ok?",
                "pode?",
                "yes?",
                "sim?",
                "are you sure?",
                "is it correct?",
                "¿no",
                "no?",
            ],
            None,
        );
    }

    #[test]
    fn mixed_polarity_is_undecided() {
        // PR-6 (amended): both polarities in one message decide nothing; `não pode` is one
        // negation but `não, pode` is a negation and an affirmation.
        all(
            &[
                "não, pode",
                "no, wait, yes",
                "yes no",
                "sim, não",
                "pode não",
                "isso não",
                "don't do it, do it",
                "that is true, no",
                "correct, not correct",
                "yes and no",
            ],
            None,
        );
    }

    #[test]
    fn uncertainty_and_double_negation_are_undecided() {
        // PR-6: `not sure` is no negation, `not wrong` no confirmation.
        all(
            &[
                "maybe",
                "maybe yes",
                "not sure",
                "i'm not quite sure",
                "i don't know",
                "no idea",
                "perhaps, perhaps not",
                "it could be true",
                "can't say",
                "talvez",
                "não sei",
                "não tenho certeza",
                "pode ser",
                "that is not false",
                "not wrong",
                "not uncertain",
            ],
            None,
        );
    }

    #[test]
    fn anything_else_is_undecided() {
        // PR-6: only answers decide; the rest follows the order of evaluation.
        all(
            &[
                "",
                "   ",
                "!!!",
                "wait, the number is 45, not 10",
                "yes but change the address",
                "no, cancel it and show my bill",
                "please",
                "thanks",
                "por favor",
                "obrigado",
                "i think",
                "that is",
                "very",
                "😀",
                "yes 🦄",
                "yes 2",
                "sim, o pedido é PED-1001",
                "right",
                "right, go ahead",
                "cancel",
                "stop",
                "what?",
                "s",
                "n",
                "'",
                "don'",
                "no problem with the order",
                "i have no idea",
                "how is the weather today",
                "never mind",
                "i can't answer that",
                "i can't believe it",
                "i don't think",
                "the answer",
                "i'm not positive",
                "not exactly",
                "i can't confirm that",
                "probably not",
                "i suppose so",
                "not that i know of",
            ],
            None,
        );
    }

    #[test]
    fn emoji_say_what_they_show() {
        // PR-6: a thumbs-up is an answer on WhatsApp; faces and hearts are politeness.
        all(
            &[
                "👍",
                "sim 👍",
                "👍🏽",
                "ok 👌",
                "pode 🙏",
                "✅ confirmo",
                "yes!! 😊",
            ],
            Some(Confirmation::Affirm),
        );
        all(&["👎", "não ❌", "nope 🙅‍♂️"], Some(Confirmation::Deny));
        // Doubt, an unknown symbol, or both polarities decide nothing.
        all(&["sim 🤔", "🤷‍♀️", "yes 🦄", "👍 👎", "🙂"], None);
        let verbs = vec!["cancelar".to_owned(), "pode cancelar".to_owned()];
        assert_eq!(
            recognise_with("simmm 👍 pode cancelar", &verbs),
            Some(Confirmation::Affirm)
        );
    }

    #[test]
    fn pointing_and_terms_of_address_are_politeness() {
        // PR-6: `esse mesmo` names the offer as the one wanted; `né`, `meu filho`, `dear` add
        // no polarity.
        let verbs = vec!["cancelar".to_owned(), "pode cancelar".to_owned()];
        for text in [
            "esse mesmo, pode cancelar",
            "Isso, pode cancelar esse.",
            "SIM né",
            "Pode sim, meu filho.",
            "esse mesmo",
            "essa aí mesma",
            "yes dear",
            "Very well, I confirm.",
            "that's the one",
        ] {
            assert_eq!(
                recognise_with(text, &verbs),
                Some(Confirmation::Affirm),
                "{text:?}"
            );
        }
        all(
            &["esse não", "that's not the one", "não, minha filha"],
            Some(Confirmation::Deny),
        );
        all(&["esse", "meu filho", "né"], None);
    }

    #[test]
    fn a_deferral_then_a_refusal_refuses() {
        // PR-6: the answer put off, then refused in the last clause.
        let verbs = vec![
            "submit".to_owned(),
            "submit it".to_owned(),
            "manda".to_owned(),
        ];
        for text in [
            "hmm actually let me check with my bank first. don't submit it yet",
            "hmm, na verdade vou ver com o banco antes. não manda ainda não",
            "wait, let me think. no",
            "actually, let me ask my husband first, maybe he ordered something. not now, thanks",
            "Actually, let me check with my husband first, so no for now",
            "vou ver com meu marido antes. não, por enquanto não",
        ] {
            assert!(refuses_after_deferral(text, &verbs), "{text:?}");
        }
        for text in [
            // Affirming before, a question, a value, one clause, or no refusal last.
            "yes, let me check first. no",
            "let me check with my bank first, can you not submit it yet?",
            "check PED-1001 first. don't submit it",
            "don't submit it yet",
            "let me check with my bank first. ok submit it",
            "let me check with my bank first",
        ] {
            assert!(!refuses_after_deferral(text, &verbs), "{text:?}");
        }
    }

    #[test]
    fn serialises_snake_case() {
        // PR-6
        assert_eq!(
            serde_json::to_value(Confirmation::Affirm).ok(),
            Some(serde_json::json!("affirm"))
        );
        assert_eq!(
            serde_json::to_value(Confirmation::Deny).ok(),
            Some(serde_json::json!("deny"))
        );
    }

    #[test]
    fn lexicon_is_folded_and_has_no_duplicates() {
        // PR-6: each phrase is written as `clauses` folds it, and only once.
        let mut seen = std::collections::BTreeSet::new();
        for (phrase, _) in LEXICON {
            assert_eq!(
                clauses(phrase).map(|c| c.concat().join(" ")),
                Some((*phrase).to_string()),
                "{phrase} is not folded"
            );
            assert!(seen.insert(*phrase), "{phrase} is listed twice");
        }
    }

    const AFFIRMING: &[&str] = &[
        "yes",
        "sim",
        "ok",
        "go ahead",
        "that's right",
        "pode",
        "confirmo",
        "that is correct",
    ];
    const DENYING: &[&str] = &["no", "não", "nope", "don't", "nao quero", "that's wrong"];

    proptest! {
        #[test]
        fn recognise_never_panics(text in any::<String>()) {
            // PR-6
            let _ = recognise(&text);
        }

        #[test]
        fn answers_in_two_clauses_with_both_polarities_stay_undecided(
            a in prop::sample::select(AFFIRMING),
            d in prop::sample::select(DENYING),
            sep in prop::sample::select(vec![", ", "! ", "... ", ". ", " - "]),
        ) {
            // PR-6: mixed affirm and deny → None, in either order.
            prop_assert_eq!(recognise(&format!("{a}{sep}{d}")), None);
            prop_assert_eq!(recognise(&format!("{d}{sep}{a}")), None);
        }

        #[test]
        fn a_question_mark_undoes_any_answer(
            answer in prop::sample::select([AFFIRMING, DENYING].concat()),
            polite in prop::sample::select(vec!["", "please ", "por favor "]),
        ) {
            // PR-6 (amended): a question is not an answer.
            let plain = format!("{polite}{answer}");
            prop_assert!(recognise(&plain).is_some(), "{} decides", plain);
            prop_assert_eq!(recognise(&format!("{polite}{answer}?")), None);
        }

        #[test]
        fn uncertainty_undoes_any_answer(
            answer in prop::sample::select([AFFIRMING, DENYING].concat()),
            doubt in prop::sample::select(vec!["maybe", "not sure", "i don't know", "talvez", "perhaps"]),
            sep in prop::sample::select(vec![" ", ", "]),
        ) {
            // PR-6: an uncertain answer never decides.
            prop_assert_eq!(recognise(&format!("{answer}{sep}{doubt}")), None);
            prop_assert_eq!(recognise(&format!("{doubt}{sep}{answer}")), None);
        }

        #[test]
        fn a_negated_affirming_judgement_is_a_negation(
            judgement in prop::sample::select(vec!["correct", "true", "right", "accurate", "certo", "verdade"]),
            negator in prop::sample::select(vec!["that is not", "that's not", "that isn't", "not", "não é", "não está"]),
        ) {
            // PR-6 (amended): `not correct`, `não está certo`.
            prop_assert_eq!(recognise(&format!("{negator} {judgement}")), Some(Confirmation::Deny));
        }
    }

    // PR-6: a plain answer, then chat that carries no answer, value, request, reservation,
    // doubt or farewell, decides; an acknowledgement first, or a deferral after, does not.
    #[test]
    fn chat_after_a_plain_answer_does_not_hide_it() {
        let verbs: Vec<String> = ["cancel", "cancela", "cancelar", "pode"]
            .iter()
            .map(|v| (*v).to_owned())
            .collect();
        let read = |text: &str| answer_before_asides(text, &verbs, &verbs);
        for text in [
            "yes, sorry, I swapped the digits the first time",
            "sim, ja falei kkk",
            "yes, my wife bought it by mistake",
            "pode, né. fazer o quê",
            // Thanks after the answer thank for the help; an acknowledgement before a yes.
            "yes that's right, go ahead and cancel it, thank you so much for the help",
            "sim, pode cancelar, muito obrigada mesmo",
            "ok, sim, pode cancelar, ele agradece",
            // The offer pointed at, the verb, then an apology.
            "isso, esse aí mesmo. pode cancelar, desculpa a confusão",
        ] {
            assert_eq!(read(text), Some(Confirmation::Affirm), "{text}");
        }
        assert_eq!(read("no, thanks a lot anyway"), Some(Confirmation::Deny));
        assert_eq!(
            read("no, my husband already bought one"),
            Some(Confirmation::Deny)
        );
        for text in [
            "ok, let me check with my wife first",
            "ok good, leave it as it is then. thanks",
            "yes, the zip is wrong",
            "yes, wait",
            "yes, thanks, bye",
            "yes, is it refunded?",
            "yes",
            "sim, mas o número é outro",
        ] {
            assert_eq!(read(text), None, "{text}");
        }
    }

    // PR-6: chat before the answer — laughter, interjections, stretched words, an aside that
    // carries no answer, value, request or reservation — does not hide it.
    #[test]
    fn chat_around_an_answer_does_not_hide_it() {
        let verbs: Vec<String> = ["cancel", "cancela", "cancelar", "dispute"]
            .iter()
            .map(|v| (*v).to_owned())
            .collect();
        let read = |text: &str| {
            recognise_with(text, &verbs).or_else(|| answer_after_asides(text, &verbs, &verbs))
        };
        for text in [
            "lol ok, yes cancel",
            "kkkk sim",
            "hahaha yes",
            "yesss",
            "siiim pode",
            "okkk",
            "ok whatever, yes confirm the dispute",
            "ok, pode cancelar ele",
            "sorry my cat walked on the phone. yes cancel it",
            "foi mal, meu filho pegou o celular. sim, cancela",
            "rsrs desculpa a demora. pode sim",
            // An aside opened by the same answer.
            "ok she agrees. yes, go ahead and cancel it",
            "sim ela concordou. pode cancelar",
        ] {
            assert_eq!(read(text), Some(Confirmation::Affirm), "{text}");
        }
        assert_eq!(read("naooo"), Some(Confirmation::Deny));
        assert_eq!(
            read("my husband came home. no thanks"),
            Some(Confirmation::Deny)
        );
        for text in [
            // The answer must come last, alone.
            "ok, let me check with my wife",
            "yes. my cat walked on the phone",
            // An aside that holds a reservation, a value, a request or a question is no aside.
            "wait, my wife says. yes",
            "I want the other one. yes",
            "the order is PED-1002. yes",
            "show me the bill first. ok",
            "when does it arrive. ok",
            "i'm not sure. yes",
            "sorry my cat walked on the phone. yes?",
            // An aside opened by the other answer is mixed.
            "no she agrees. yes cancel it",
            // Laughter decides nothing alone.
            "kkkk",
            "lol",
        ] {
            assert_eq!(read(text), None, "{text}");
        }
    }

    // SC-10: an opening consent is not an end, unless the message refuses, doubts, asks or says
    // goodbye anywhere.
    #[test]
    fn an_opening_consent_is_told_from_an_end() {
        let verbs: Vec<String> = vec!["cancel".to_owned()];
        for text in [
            "então tá, confirmado",
            "yes, my wife bought it by mistake",
            "sim, meu marido comprou sem querer",
            "ok, whatever works",
            "hmm, sure, go for it and thanks",
        ] {
            assert!(opens_with_consent(text, &verbs), "{text}");
        }
        for text in [
            "ok, thanks, bye",
            "sim, obrigado, tchau",
            "yes, no, I don't know",
            "sure, but not today",
            "ok?",
            "thanks, that's all",
            "that's all, yes",
            // A correction after the consent is a correction (tests/generated_conversations.rs).
            "ok, make it ped-1001 instead",
            "sim, mas o número é 45",
        ] {
            assert!(!opens_with_consent(text, &verbs), "{text}");
        }
    }

    // PR-6 (amended): a statement that the offer is what the customer wants is a judgement, so
    // a negator flips it.
    #[test]
    fn wishes_are_judgements_a_negator_flips() {
        all(
            &[
                "yes, that's what i want",
                "yeah that's what i want",
                "yes i do like that",
                "yes, i'd really like that alot",
                "yeah, that's how it is",
                "é isso que eu quero",
            ],
            Some(Confirmation::Affirm),
        );
        all(
            &["that's not what i want!", "i don't like that, no"],
            Some(Confirmation::Deny),
        );
    }

    // PR-6: the pending tool's verbs confirm beside an affirmation, decline negated, and decide
    // nothing alone or beside a negation.
    #[test]
    fn action_verbs_need_an_affirmation() {
        let verbs = [
            "change".to_string(),
            "trocar".to_string(),
            "cancel it".to_string(),
        ];
        let with = |t: &str| recognise_with(t, &verbs);
        assert_eq!(with("sure, change it"), Some(Confirmation::Affirm));
        assert_eq!(with("pode trocar"), Some(Confirmation::Affirm));
        assert_eq!(with("yes, cancel it please"), Some(Confirmation::Affirm));
        assert_eq!(with("don't change it"), Some(Confirmation::Deny));
        assert_eq!(with("change it"), None);
        assert_eq!(with("no, change it"), None);
        // A modal grants the verb, as `pode` does; negated it refuses.
        assert_eq!(with("yes can change"), Some(Confirmation::Affirm));
        assert_eq!(with("yes, you can cancel it"), Some(Confirmation::Affirm));
        assert_eq!(with("you can't change it"), Some(Confirmation::Deny));
        assert_eq!(with("can change"), None, "no affirmation, no answer");
        assert_eq!(
            recognise("sure, change it"),
            None,
            "without the verbs: undecided"
        );
    }

    // PR-6: a verb typed with two neighbouring letters swapped is still the pending tool's verb
    // (five letters or more); a word that is no verb still leaves the message undecided.
    #[test]
    fn action_verbs_read_through_one_swap() {
        let verbs = [
            "cancel it".to_string(),
            "cancelar".to_string(),
            "send".to_string(),
        ];
        let with = |t: &str| recognise_with(t, &verbs);
        assert_eq!(with("yes cancle it"), Some(Confirmation::Affirm));
        assert_eq!(with("pode cacnelar"), Some(Confirmation::Affirm));
        assert_eq!(with("don't cancle it"), Some(Confirmation::Deny));
        assert_eq!(with("yes sned"), None, "four letters: too short to mend");
        assert_eq!(with("yes candle it"), None, "another letter, not a swap");
    }
}
