//! Free-text values (MG-5): a reason the customer tells in their own words fills the free-text
//! parameter it answers — in the message that starts the transaction, beside typed values, or on
//! its own while it is pending.

use serde_json::Value;

use super::{Flowing, Run};
use crate::domain::confirmation;
use crate::domain::parameter;
use crate::domain::transaction::TransactionStatus;
use crate::domain::withdrawal;

/// Folded words that open a question without a question mark (`quanto tempo demora`, `how long
/// does it take`): a question about the transaction is PR-3a's, never the reason.
pub(super) const QUESTION_OPENERS: &[&str] = &[
    "what", "how", "when", "where", "why", "which", "who", "can", "could", "will", "would", "is",
    "are", "do", "does", "did", "should", "que", "quanto", "quanta", "quando", "como", "onde",
    "qual", "quais", "porque", "pq", "quem", "sera", "posso", "pode", "consigo", "da",
];

impl Run<'_> {
    /// MG-5 for free text: a message that starts a transaction, or answers it with typed values,
    /// while a free-text parameter is missing, fills that parameter with the message itself
    /// when it says more than a request for the tool: it has at least three words outside the
    /// typed values and filler, and two of them (of three letters or more) are not request words:
    /// the tool's title, action verbs and parameter labels, the words that frame any request
    /// ([`REQUEST_WORDS`]) and the assistant's conversational examples (`good morning`), compared
    /// by their first five letters so inflections match (`charged` ~ `charge`, `contestar` ~
    /// `contestação`). The tool's example utterances are not request words: customers' examples
    /// of a contestation carry reasons (`I was charged twice`), and a message that repeats one
    /// says why. `I want to dispute a charge` gives no reason; `there's a charge of R$ 150 I
    /// don't recognise, I want to dispute it` does. A bare yes or no never fills it.
    pub(super) fn free_text_reading(
        &self,
        text: &str,
        spans: &[std::ops::Range<usize>],
    ) -> Option<(String, Value)> {
        let tool = self.active_tool()?;
        let tx = self.active()?;
        let param = tool.parameters.iter().find(|p| {
            matches!(p.kind, parameter::ParameterKind::Text { .. })
                && tx.missing_parameters.contains(&p.name)
        })?;
        let (words, news, objects) = self.words_beyond_a_request(text, spans)?;
        if (news < 2 && !objects)
            || words.len() < 3
            || crate::domain::confirmation::recognise(text).is_some()
        {
            return None;
        }
        // A customer who explains at length has given the reason: what fits of it is kept (its
        // first words up to the limit), rather than asking for a reason already given.
        let text = match param.kind {
            parameter::ParameterKind::Text { max_len } => words_within(text.trim(), max_len),
            _ => text.trim(),
        };
        let value = param
            .kind
            .validate(&Value::String(text.to_owned()), self.turn.locale);
        value.ok().map(|v| (param.name.clone(), v))
    }

    /// MG-5: a model's free-text value that is the whole message while every word of it only
    /// asks for the tool (`I want to contest a charge`, sent twice) is no reason: it would be
    /// recorded as one.
    pub(super) fn is_bare_request_as_text(&self, name: &str, value: &Value, text: &str) -> bool {
        let text_param = self
            .active_tool()
            .and_then(|t| t.parameter(name))
            .is_some_and(|p| matches!(p.kind, parameter::ParameterKind::Text { .. }));
        text_param
            && value.as_str().map(str::trim) == Some(text.trim())
            && self
                .words_beyond_a_request(text, &[])
                .is_some_and(|(_, news, objects)| news == 0 && !objects)
    }

    /// The content words of `text` outside `spans`, how many of them (of three letters or more,
    /// not digits) are not request words, and whether one objects (see
    /// [`Self::free_text_reading`]).
    fn words_beyond_a_request(
        &self,
        text: &str,
        spans: &[std::ops::Range<usize>],
    ) -> Option<(Vec<String>, usize, bool)> {
        let tool = self.active_tool()?;
        let conversation = self
            .assistant
            .conversation
            .iter()
            .flat_map(|t| t.examples.values())
            .flatten();
        let phrases = tool
            .action_verbs
            .values()
            .flatten()
            .chain(conversation)
            .chain([&tool.title.en, &tool.title.pt_br])
            .chain(
                tool.parameters
                    .iter()
                    .flat_map(|p| [&p.label.en, &p.label.pt_br]),
            );
        let mut known: Vec<String> = parameter::REQUEST_FRAME
            .iter()
            .chain(REQUEST_WORDS)
            .map(|w| (*w).to_owned())
            .collect();
        for phrase in phrases {
            known.extend(parameter::content_words(phrase, &[]));
        }
        let words = parameter::content_words(text, spans);
        let news = words
            .iter()
            .filter(|w| w.chars().count() > 2 && !w.chars().all(|c| c.is_ascii_digit()))
            .filter(|w| !known.iter().any(|k| same_stem(k, w)))
            .count();
        let objects = words.iter().any(|w| OBJECTION_WORDS.contains(&w.as_str()));
        Some((words, news, objects))
    }

    /// Step 5 when the interpreter read nothing actionable: clarified — unless the message
    /// tells the reason asked for, which the router's topics (a greeting, a thanks) see first.
    pub(super) async fn unread(&mut self, text: &str) -> Flowing<()> {
        match self.free_text_answer(text) {
            Some(_) => Box::pin(self.route(text, None)).await,
            None => self.clarify(false),
        }
    }

    /// A pending-parameter answer beats routing, for free text too: while a free-text
    /// parameter is the one asked for, a message that goes on with the customer's story (`é de
    /// uma revista que eu não assinei`, `I paid for express shipping but it came with regular
    /// shipping`) is its value, whatever a sentence model makes of its words. Only a statement
    /// counts — no question (a `?` or a question word first), no farewell, no withdrawal, no
    /// action verb or value of another tool — and only when [`Self::free_text_reading`] reads
    /// more than a request in it. A greeting, a thanks or a hold-on is the router's topic and
    /// never gets here (docs/decisions.md, "A reason told while it is pending").
    pub(super) fn free_text_answer(&self, text: &str) -> Option<(String, Value)> {
        let tx = self.active()?;
        let tool = self.active_tool()?;
        let asked = tool.parameter(tx.missing_parameters.first()?)?;
        let question = text.contains(['?', '¿'])
            || parameter::folded_words(text)
                .first()
                .is_some_and(|w| QUESTION_OPENERS.contains(&w.as_str()));
        if tx.status != TransactionStatus::CollectingParameters
            || !matches!(asked.kind, parameter::ParameterKind::Text { .. })
            || question
            || confirmation::says_goodbye(text)
        {
            return None;
        }
        let own = self.confirmation_verbs();
        if withdrawal::withdraws_first(text, &own) || withdrawal::withdraws_last(text, &own) {
            return None;
        }
        let another = self.assistant.tools.values().any(|other| {
            let verbs: Vec<String> = other.action_verbs.values().flatten().cloned().collect();
            other.name != tool.name
                && (confirmation::names_a_verb(text, &verbs)
                    || !other
                        .read_clear_values(text, self.turn.locale, Default::default())
                        .values
                        .is_empty())
        });
        if another {
            return None;
        }
        self.free_text_reading(text, &[])
    }
}

/// The longest prefix of `text` of whole words within `max_chars` characters.
fn words_within(text: &str, max_chars: usize) -> &str {
    if text.chars().count() <= max_chars {
        return text;
    }
    let cut = text
        .char_indices()
        .nth(max_chars)
        .map_or(text.len(), |(i, _)| i);
    let head = &text[..cut];
    head.rfind(char::is_whitespace)
        .map_or(head, |space| head[..space].trim_end())
}

/// Words that frame any request rather than describe it (folded), beyond
/// [`parameter::REQUEST_FRAME`] (`I want to`, `can you`, `quero`, `preciso`, `pode`): what stands
/// beside them in a message is what it says.
const REQUEST_WORDS: &[&str] = &[
    "please",
    "fazer",
    // Framing a request, not a reason: `file a dispute about my last invoice`, `abrir uma
    // contestação sobre a última fatura`.
    "file",
    "open",
    "start",
    "make",
    "about",
    "regarding",
    "last",
    "latest",
    "recent",
    "abrir",
    "registrar",
    "sobre",
    "referente",
    "ultima",
    "ultimo",
    // Asking how to make it is still the request: `how do I dispute something on my bill`,
    // `como faço pra contestar uma cobrança dessa fatura`.
    "how",
    "way",
    "something",
    "como",
    "faco",
    "faz",
    "jeito",
    "algo",
    "dessa",
    "desta",
    "desse",
    "deste",
    "nessa",
    "nesta",
    // Where the charge is and how the customer reached us frame the request too: `I'm calling
    // about my bill, there's a charge on there I want to contest`, `a charge that appears on my
    // latest statement`, `tô ligando por causa da minha fatura, tem uma cobrança aí`.
    "bill",
    "statement",
    "invoice",
    "account",
    "fatura",
    "conta",
    "there",
    "appears",
    "shows",
    "showing",
    "aparece",
    "calling",
    "call",
    "ligando",
    "ligar",
    "liguei",
    "alo",
    "formally",
    "formalmente",
    "tem",
    "por",
    "causa",
    "que",
    "ai",
    // A charge that came on the bill, or a problem with it, is still no reason: `qro contestar
    // 59,90 q veio na minha fatura`, `I have a problem with my bill, I want to dispute 50`.
    "veio",
    "vieram",
    "came",
    "apareceu",
    "appeared",
    "problem",
    "problema",
    "issue",
    // Indirect politeness frames a request too: `would it perhaps be possible to contest a
    // charge on my latest bill?`, `sorry to bother you`, `eu estava pensando se seria possível
    // contestar um valor`.
    "possible",
    "possibly",
    "perhaps",
    "maybe",
    "wondering",
    "wonder",
    "bother",
    "might",
    "kindly",
    "possivel",
    "talvez",
    "pensando",
    "estava",
    "seria",
    "incomodar",
    // Chat spellings of `quero`.
    "qro",
    "kero",
];

/// Words that say what is wrong (folded): a negation or an excess (`that I don't recognise`,
/// `que eu não reconheço`, `cobraram a mais`, `charged twice`). With one of them beside the
/// request, the message gives a reason however few other words it has.
const OBJECTION_WORDS: &[&str] = &[
    // An apostrophe splits a word here: `don't` is `don` and `t`.
    "not", "never", "don", "dont", "didn", "didnt", "doesn", "doesnt", "haven", "wasn", "isn",
    "twice", "double", "wrong", "nao", "nunca", "nem", "mais", "duas", "dobro", "errado", "errada",
    "indevida", "indevido",
];

/// Two folded words match when they are equal or share their first five letters (`charged` and
/// `charge`, `contestar` and `contestacao`): a stem without a stemmer, enough to tell request
/// words from a description.
pub(super) fn same_stem(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    let prefix = a.chars().zip(b.chars()).take_while(|(x, y)| x == y).count();
    prefix >= 5
}
