//! `EmbeddingModel`: SC-1's embedding decision model. Each decision embeds the message once and
//! reads it against the assistant's fitted [`ExampleIndex`] — the classifier, the router and the
//! interpreter's in-transaction reading (`cancel`, a free-text value, `unclear`). Values of typed
//! parameters are never taken from it: the engine's typed parsers read them (PR-1, MG-5).
//!
//! How the labels map to decisions (pure functions below, tested on their own):
//! - classifier: `HUMAN_HANDOFF` = P(handoff examples), `END_SESSION` = P(end examples),
//!   `CONTINUE` = P(the active agent's tools) + P(cancel examples) when an agent is active,
//!   `ROUTE` = the rest (other agents' tools, out of scope); the most probable label, with its
//!   probability as the confidence.
//! - router: the most probable label; a tool → that tool and its agent, anything else → out of
//!   scope; confidence = its probability. No arguments: the typed parsers read the message.
//! - interpreter: `cancel` when the cancel examples are the most probable; else, when a
//!   free-text parameter is pending and the message is not read as another decision (cancel,
//!   handoff, end, another tool), `provide` that parameter with the message itself, confidence =
//!   1 − P(those other decisions); else `unclear`.

pub mod client;
pub mod examples;
pub mod head;
mod ids;
mod normalise;
mod reading;
mod segments;
mod signature;
mod typos;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::Value;

use crate::config::profiles::ModelProfile;
use crate::domain::catalog::{Assistant, Catalog};
use crate::domain::confirmation;
use crate::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, RouterDecision, SessionControl,
};
use crate::domain::effect::{ClassifierRequest, InterpreterRequest, RouterRequest};
use crate::domain::parameter;
use crate::domain::withdrawal;
use crate::model::http::ModelConfigError;

pub use client::{EmbeddingsClient, EmbeddingsError};
pub use examples::{ExampleIndex, IndexError, Label};
pub use head::{FitOptions, LinearHead};
pub use reading::{classify_from, interpret_from, route_from};
use reading::{confidence_of, intent_of, SegmentReading};
use segments::{
    asks_for_agreement, closing_tails, conjoined, last_clause, last_sentence, number_like_tokens,
    purpose_parts, segments, sentences, trailing_number, two_words_or_more,
};

/// The share of a message's reading that must already be an ending for its farewell to decide
/// (`beleza valeu tchau`: thanks 0.50, end 0.50).
const CLOSING_SHARE: f32 = 0.4;

/// One embeddings profile: its client and every assistant's fitted examples.
#[derive(Debug, Clone)]
pub struct EmbeddingModel {
    profile: String,
    client: EmbeddingsClient,
    indexes: Arc<BTreeMap<String, ExampleIndex>>,
    /// Per assistant, what its messages are read as before embedding: its words, for mending
    /// typos ([`typos`]), and its ids' stand-ins.
    readings: Arc<BTreeMap<String, (typos::Vocabulary, ids::IdStandIns)>>,
    catalog: Arc<Catalog>,
}

impl EmbeddingModel {
    /// Builds the client and fits (or loads from `cache_dir`) every assistant's examples.
    pub async fn build(
        profile: &ModelProfile,
        base_url: Option<&str>,
        catalog: Arc<Catalog>,
        cache_dir: Option<PathBuf>,
        slots: Option<Arc<tokio::sync::Semaphore>>,
        env: &dyn Fn(&str) -> Option<String>,
    ) -> Result<EmbeddingModel, EmbeddingModelError> {
        let client = EmbeddingsClient::new(profile, base_url, env)?;
        let client = match slots {
            Some(s) => client.with_slots(s),
            None => client,
        };
        let mut indexes = BTreeMap::new();
        let mut readings = BTreeMap::new();
        for (id, assistant) in &catalog.assistants {
            let labelled = examples::labelled_examples(assistant);
            readings.insert(
                id.clone(),
                (
                    vocabulary_of(assistant, &labelled),
                    ids::IdStandIns::of(assistant),
                ),
            );
            let index = ExampleIndex::build(
                &client,
                id,
                &labelled,
                cache_dir.as_deref(),
                FitOptions::default(),
            )
            .await?;
            indexes.insert(id.clone(), index);
        }
        Ok(EmbeddingModel {
            profile: profile.name.clone(),
            client,
            indexes: Arc::new(indexes),
            readings: Arc::new(readings),
            catalog,
        })
    }

    pub fn profile(&self) -> &str {
        &self.profile
    }

    /// What the model reads of `message`: laughter and shouting normalised, ids read as their
    /// parameter's example, typos mended against the assistant's words.
    fn as_embedded(&self, assistant: &str, message: &str) -> String {
        let message = match self.readings.get(assistant) {
            Some((vocabulary, _)) => signature::without_signature(message, |w| vocabulary.knows(w)),
            None => message,
        };
        // Numbers in words as digits, so a dictated id stands in like a typed one.
        let digits = parameter::spelled::as_digits(message);
        let normalised = normalise::for_embedding(&digits);
        let Some((vocabulary, ids)) = self.readings.get(assistant) else {
            return normalised;
        };
        let read = ids.apply(&normalised);
        let mended = vocabulary.mend(&read);
        if mended.words > 0 {
            metrics::counter!(crate::telemetry::EMBEDDING_WORDS_MENDED_TOTAL, "profile" => self.profile.clone())
                .increment(mended.words as u64);
            tracing::debug!(profile = %self.profile, words_mended = mended.words, "Misspelt words mended before embedding.");
        }
        mended.text.into_owned()
    }

    async fn embed_one(
        &self,
        assistant: &str,
        text: &str,
    ) -> ModelAnswer<(Vec<f32>, &ExampleIndex)> {
        let Some(index) = self.indexes.get(assistant) else {
            tracing::warn!(profile = %self.profile, assistant, "No examples are fitted for this assistant; the engine falls back.");
            return Err(crate::domain::decision::ModelFailure::Error);
        };
        if let Some(v) = recent::get(self.client.space(), text) {
            if v.len() == index.dim() {
                return Ok((v, index));
            }
        }
        match self.client.embed(&[text]).await {
            Ok(mut v) if v.len() == 1 && v[0].len() == index.dim() => {
                let v = v.remove(0);
                recent::put(self.client.space(), text, &v);
                Ok((v, index))
            }
            Ok(v) => {
                let e = EmbeddingsError::Dimension {
                    expected: index.dim(),
                    got: v.first().map_or(0, Vec::len),
                };
                tracing::warn!(profile = %self.profile, error = %e, "Embeddings call unusable; the engine falls back.");
                Err(e.failure())
            }
            Err(e) => {
                tracing::warn!(profile = %self.profile, error = %e, "Embeddings call failed; the engine falls back.");
                Err(e.failure())
            }
        }
    }

    pub async fn classify(&self, request: &ClassifierRequest) -> ModelAnswer<ClassifierDecision> {
        let assistant = self.assistant_for_classifier(&request.assistant);
        let request = &ClassifierRequest {
            message: self.as_embedded(&assistant, &request.message),
            ..request.clone()
        };
        // SC-10: a message that only takes leave (`much obliged. good night`, `tá bom brigado era
        // isso`: a farewell with nothing beside it but thanks and acknowledgement) while nothing
        // is in flight is an end, however its thanks pull the embedding toward the thanks intent.
        // With a transaction in flight only a farewell proper (`vlw tchau`, `many thanks, that
        // is all`) leaves it: `era isso` may answer what is pending.
        let leaves = if request.active_transaction.is_none() {
            confirmation::says_goodbye(&request.message)
        } else {
            confirmation::says_goodbye_in_flight(&request.message)
        };
        if leaves && !request.message.contains(['?', '¿']) {
            return Ok(ClassifierDecision {
                decision: SessionControl::EndSession,
                confidence: 1.0,
            });
        }
        let (x, index) = self.embed_one(&assistant, &request.message).await?;
        let a = self.catalog.assistant(&assistant);
        let active_tool = request.active_transaction.as_ref().map(|t| t.tool.as_str());
        let agent = request.active_agent.as_deref();
        let ranked = index.rank(&x);
        let whole = classify_from(&ranked, a, agent, active_tool);
        let ending: f32 = ranked
            .iter()
            .filter(|(l, _)| **l == Label::EndSession)
            .map(|(_, p)| p)
            .sum();
        // Boxed: the second look holds its tails across awaits, and every turn's future
        // carries this one (`a_turn_waiting_for_a_model_slot_holds_small_futures`).
        let whole =
            Box::pin(self.closing_last(request, index, whole, ending, a, agent, active_tool)).await;
        // A statement closed by `né` / `, right` asks for agreement: no ending, however its
        // words read (`então ele sai amanhã né`: end 0.93). Not confident: the router reads it.
        // Thanks alone (`obrigado mesmo assim`: end 0.95) answer; they take no leave (SC-10).
        if whole.decision == SessionControl::EndSession
            && (asks_for_agreement(&request.message) || confirmation::only_thanks(&request.message))
        {
            return Ok(ClassifierDecision {
                confidence: 0.0,
                ..whole
            });
        }
        // A request for a person in any sentence is a request for a person (`but I want it
        // cancelled! get me an agent`): the sentences are read on their own too, and one that
        // asks for a person more confidently than the whole message says anything decides.
        // When the whole message already leans to a person, its comma clauses are read too
        // (`charged twice again, i'm done with bots, give me a human agent`): the clause
        // confirms that reading, it does not make one (SC-10).
        // A purpose clause is read apart too: `can I talk to a person to make sure it's really
        // refunded?` asks for a person, and why.
        let sentences = if whole.decision == SessionControl::HumanHandoff {
            segments(&request.message)
        } else {
            let sentences = sentences(&request.message);
            match purpose_parts(&request.message).filter(|_| sentences.is_empty()) {
                Some((request, why)) => vec![request, why],
                None => sentences,
            }
        };
        let sentences: Vec<&str> = sentences.into_iter().filter(two_words_or_more).collect();
        if sentences.len() < 2 {
            return Ok(whole);
        }
        let vectors = match self.client.embed(&sentences).await {
            Ok(v) if v.len() == sentences.len() && v.iter().all(|x| x.len() == index.dim()) => v,
            // The whole message's reading stands; a failed extra look is no failed decision.
            _ => return Ok(whole),
        };
        // The router reads the sentences again (`segments`): it finds them here.
        for (sentence, vector) in sentences.iter().zip(&vectors) {
            recent::put(self.client.space(), sentence, vector);
        }
        let handoff = vectors
            .iter()
            .map(|x| classify_from(&index.rank(x), a, agent, active_tool))
            .filter(|d| d.decision == SessionControl::HumanHandoff)
            .max_by(|l, r| l.confidence.total_cmp(&r.confidence));
        // (Also when the whole message already leans to a person, but not confidently.)
        Ok(match handoff {
            Some(d) if d.confidence > whole.confidence => d,
            _ => whole,
        })
    }

    /// A message that leans to ending and closes with a farewell (`ok obrigada, tchau`,
    /// `great, thanks. bye!`, `beleza valeu tchau`) ends as surely as its farewell does: the
    /// thanks before it pull the whole message toward the thanks intent, under the threshold.
    /// Only when the whole message already leans to ending — its most probable reading, or at
    /// least [`CLOSING_SHARE`] of it (SC-10: the farewell confirms a reading, it does not make
    /// one) — with no question, and with a short closing ([`closing_tails`]).
    #[allow(clippy::too_many_arguments)]
    async fn closing_last(
        &self,
        request: &ClassifierRequest,
        index: &ExampleIndex,
        whole: ClassifierDecision,
        ending: f32,
        assistant: Option<&Assistant>,
        agent: Option<&str>,
        active_tool: Option<&str>,
    ) -> ClassifierDecision {
        let tails = closing_tails(&request.message);
        // A last clause that takes leave (`…então. tchau`, `vence dia 10 né? ok, tchau`) is a
        // reading of its own: its embedding still has to read as an ending, confidently.
        // Only with nothing in flight (ending then drops nothing) or what is in flight
        // withdrawn first (`ah esquece, vou ver com meu banco. tchau`: the end says it was not
        // done, SC-6), and only a clause the customer set apart, or the whole message (`cancel
        // PED-1234 bye` is a request).
        let takes_leave = (request.active_transaction.is_none()
            || withdrawal::withdraws_first(&request.message, &[]))
            && last_clause(&request.message).map_or(
                confirmation::says_goodbye(&request.message),
                confirmation::says_goodbye,
            );
        let leans = whole.decision == SessionControl::EndSession || ending >= CLOSING_SHARE;
        let looks = takes_leave || (leans && !request.message.contains(['?', '¿']));
        if !looks || tails.is_empty() {
            return whole;
        }
        self.prefetch(&tails).await;
        let named = self.assistant_for_classifier(&request.assistant);
        let mut best = whole;
        for tail in tails {
            // A set-apart last clause that only takes leave (`blz vou esperar entao, valeu
            // tchau`) ends as the whole-message rule does, however its thanks read (thanks 0.97).
            if takes_leave && confirmation::says_goodbye(tail) {
                return ClassifierDecision {
                    decision: SessionControl::EndSession,
                    confidence: 1.0,
                };
            }
            // The whole message's reading stands; a failed extra look is no failed decision.
            let Ok((v, _)) = self.embed_one(&named, tail).await else {
                continue;
            };
            let closing = classify_from(&index.rank(&v), assistant, agent, active_tool);
            if closing.decision == SessionControl::EndSession
                && closing.confidence > best.confidence
            {
                best = closing;
            }
        }
        best
    }

    pub async fn route(&self, request: &RouterRequest) -> ModelAnswer<RouterDecision> {
        let decision = self.route_message(request).await?;
        Ok(self.with_spelled_values(request, decision))
    }

    /// A request whose values are written in words or dictated (`my order ped five three seven
    /// two zero`, `cento e cinquenta reais`) carries them as its arguments, read as a language
    /// model reads them: the routed tool's clear typed reading of the message with its numbers
    /// as digits (`parameter::spelled`). The engine's typed parsers read typed forms only (PR-1)
    /// and their reading wins over these (MG-5).
    fn with_spelled_values(
        &self,
        request: &RouterRequest,
        mut decision: RouterDecision,
    ) -> RouterDecision {
        let std::borrow::Cow::Owned(digits) = parameter::spelled::as_digits(&request.message)
        else {
            return decision;
        };
        if let RouterDecision::Route {
            intent: Some(tool),
            arguments,
            ..
        } = &mut decision
        {
            let tool = self
                .catalog
                .assistant(&request.assistant)
                .and_then(|a| a.tools.get(tool.as_str()));
            if let Some(tool) = tool {
                let values = values_in_words(tool, &digits, request.locale, Default::default());
                for (name, value) in values {
                    arguments.entry(name).or_insert(value);
                }
            }
        }
        decision
    }

    async fn route_message(&self, request: &RouterRequest) -> ModelAnswer<RouterDecision> {
        let request = &RouterRequest {
            message: self.as_embedded(&request.assistant, &request.message),
            ..request.clone()
        };
        let (x, index) = self.embed_one(&request.assistant, &request.message).await?;
        let read = SegmentReading {
            assistant: self.catalog.assistant(&request.assistant),
            in_transaction: request.active_transaction.is_some() || request.after_cancel,
            active: request.active_transaction.as_ref().map(|t| t.tool.as_str()),
            index,
        };
        let whole = read.decide_given_values(&x, &request.message, request.locale);
        if request.active_transaction.is_none() {
            let verb = read.decide_given_verb(&x, &request.message, request.locale);
            let first = self.first_of_two(request, &read).await;
            let surest = [verb, first]
                .into_iter()
                .flatten()
                .max_by(|a, b| confidence_of(a).total_cmp(&confidence_of(b)));
            if let Some(surest) = surest.filter(|d| confidence_of(d) > confidence_of(&whole)) {
                return Ok(surest);
            }
        }
        let segments = segments(&request.message);
        // The customer's last word names the request (`forget it, just cancel PED-8360
        // instead`; `bom dia, queria rastrear meu pedido`): a last sentence or clause read as a
        // request more confidently than the whole message decides.
        let Some((last, earlier)) = segments.split_last() else {
            return Ok(whole);
        };
        self.prefetch(&segments).await;
        if two_words_or_more(last) {
            let clause = *last;
            if let Some(last) = self.read_request(request, &read, last).await {
                if confidence_of(&last) > confidence_of(&whole) {
                    return Ok(last);
                }
                // A complaint before the request reads as another tool (`que absurdo essa
                // fatura veio alta de novo, me mostra essa conta agora`: the contestation
                // 1.00): a last clause that asks by its tool's own verb, after clauses that
                // name no tool by theirs, is the request.
                if request.active_transaction.is_none()
                    && intent_of(&last) != intent_of(&whole)
                    && reading::asks_by_its_verb(read.assistant, clause, &last, earlier)
                {
                    return Ok(last);
                }
            }
        }
        // An earlier clause may make the whole message's own request surer, never another one
        // (`mano cade minha encomenda, numero ped1999`: the id pulls the whole toward every
        // tool that takes an order number, 0.68; its first clause is the tracking, 0.96).
        let RouterDecision::Route {
            intent: Some(tool), ..
        } = &whole
        else {
            return Ok(whole);
        };
        let mut best = whole.clone();
        for segment in earlier.iter().copied().filter(two_words_or_more) {
            match self.read_request(request, &read, segment).await {
                Some(
                    d @ RouterDecision::Route {
                        intent: Some(_), ..
                    },
                ) if intent_of(&d) == Some(tool.as_str())
                    && confidence_of(&d) > confidence_of(&best) =>
                {
                    best = d;
                }
                _ => {}
            }
        }
        Ok(best)
    }

    /// Two requests joined by `and` / `e` (`please cancel PED-73688 and tell me how much my bill
    /// is`, `quero cancelar o pedido PED-75140 e também contestar uma cobrança…`): each reads
    /// under the threshold as a whole, so the message went out of scope. The first is taken,
    /// as customers list what matters first, when it names its tool by that tool's own verb
    /// (`I was charged twice and I want to cancel it` gives a reason first, not a request) and
    /// the second part reads as another tool's request.
    async fn first_of_two(
        &self,
        request: &RouterRequest,
        read: &SegmentReading<'_>,
    ) -> Option<RouterDecision> {
        let (first, second) = conjoined(&request.message)?;
        let named = reading::named_by_verb(read.assistant?, first)?;
        self.prefetch(&[first, second]).await;
        let first = self.read_request(request, read, first).await?;
        let second = self.read_request(request, read, second).await?;
        let (Some(a), Some(b)) = (intent_of(&first), intent_of(&second)) else {
            return None;
        };
        (a == named && a != b).then_some(first)
    }

    /// Embeds in one call the texts not embedded lately, so reading them one by one costs no
    /// further call. A failed call is no failure: each read then tries on its own.
    async fn prefetch(&self, texts: &[&str]) {
        let space = self.client.space();
        let missing: Vec<&str> = texts
            .iter()
            .copied()
            .filter(|t| recent::get(space, t).is_none())
            .collect();
        if missing.len() < 2 {
            return;
        }
        if let Ok(vectors) = self.client.embed(&missing).await {
            for (text, vector) in missing.iter().zip(&vectors) {
                recent::put(space, text, vector);
            }
        }
    }

    /// A segment's reading when it names a request (`None`: not a request, or the look failed —
    /// a failed extra look is no failed decision). A clause read mostly as a session action
    /// (`it said that yesterday too`: end 0.99, tracking 0.01) names no request, however its
    /// remainder renormalises.
    async fn read_request(
        &self,
        request: &RouterRequest,
        read: &SegmentReading<'_>,
        segment: &str,
    ) -> Option<RouterDecision> {
        let (v, _) = self.embed_one(&request.assistant, segment).await.ok()?;
        match read.decide(&v) {
            (
                d @ RouterDecision::Route {
                    intent: Some(_), ..
                },
                session,
            ) if session < 0.5 => Some(d),
            _ => None,
        }
    }

    pub async fn interpret(
        &self,
        request: &InterpreterRequest,
    ) -> ModelAnswer<InterpreterDecision> {
        let embedded = self.as_embedded(&request.assistant, &request.message);
        let (x, index) = self.embed_one(&request.assistant, &embedded).await?;
        let asked = self.asked_value(request);
        Ok(interpret_from(&index.rank(&x), request, asked))
    }

    /// The value of the parameter the last reply asked for, read anywhere in the message (its
    /// numbers in words as digits) by the liberal typed reader (`it was 99.90 each time`, `put 1,
    /// that's what the mailman uses`):
    /// what a language model would extract there, and what PR-1 leaves to the model because
    /// other words stand around it. Only when the message holds one number-like token, so a
    /// sentence with several numbers (`I called 3 times about order 45`) is not guessed at; an
    /// invalid value is passed on as written, for the engine to explain (RP-4).
    fn asked_value(&self, request: &InterpreterRequest) -> Option<BTreeMap<String, Value>> {
        asked_value(&self.catalog, request)
    }

    /// Answer logs of older releases carry no assistant: with one configured, it is that one.
    fn assistant_for_classifier(&self, named: &str) -> String {
        if named.is_empty() && self.catalog.assistants.len() == 1 {
            self.catalog
                .assistants
                .keys()
                .next()
                .cloned()
                .unwrap_or_default()
        } else {
            named.to_owned()
        }
    }
}

/// The words an assistant is written in: its examples, each tool's action verbs, title and
/// parameter labels, and the confirmation recogniser's lexicon and farewells.
fn vocabulary_of(assistant: &Assistant, labelled: &[(Label, String)]) -> typos::Vocabulary {
    let mut texts: Vec<String> = labelled.iter().map(|(_, t)| t.clone()).collect();
    for tool in assistant.tools.values() {
        texts.extend(tool.action_verbs.values().flatten().cloned());
        texts.extend([tool.title.en.clone(), tool.title.pt_br.clone()]);
        for p in &tool.parameters {
            // Not the synonyms: more near neighbours leave fewer slips with one reading
            // (`número do prédio` made `pedio` as near to `prédio` as to `pedido`).
            texts.extend([
                p.name.replace('_', " "),
                p.label.en.clone(),
                p.label.pt_br.clone(),
            ]);
        }
    }
    texts.extend(confirmation::lexicon_phrases().map(str::to_owned));
    texts.extend(confirmation::farewell_phrases());
    typos::Vocabulary::from_texts(texts.iter().map(String::as_str))
}

/// [`EmbeddingModel::asked_value`] over `catalog`.
fn asked_value(catalog: &Catalog, request: &InterpreterRequest) -> Option<BTreeMap<String, Value>> {
    let missing = &request.transaction.missing_parameters;
    let asked = missing.first()?;
    let tool = catalog
        .assistant(&request.assistant)?
        .tools
        .get(&request.transaction.tool)?;
    let spec = tool.parameter(asked)?;
    let one = |value: &Value| Some(BTreeMap::from([(asked.clone(), value.clone())]));
    // A number in words is read as its digits (`two hundred ten`, `cento e cinquenta reais`).
    let money = matches!(spec.kind, parameter::ParameterKind::Money);
    let message = parameter::spelled::as_digits_in(&request.message, money);
    let options = parameter::ClearOptions {
        asked: Some(asked),
        ..Default::default()
    };
    // Values written in words or dictated, read as PR-1 reads typed ones: `o cep é zero quatro
    // cinco três oito um três três número duzentos e dez` gives both.
    if let std::borrow::Cow::Owned(digits) = &message {
        let mut values = values_in_words(tool, digits, request.locale, options);
        values.retain(|name, _| missing.contains(name));
        if !values.is_empty() {
            return Some(values);
        }
    }
    if matches!(spec.kind, parameter::ParameterKind::Text { .. })
        || number_like_tokens(&message) != 1
    {
        return None;
    }
    let reading = parameter::extract(&[(asked, &spec.kind)], &message, request.locale);
    if let Some(v) = reading.value(asked) {
        return one(v);
    }
    if let Some(r) = reading.rejection(asked) {
        return one(&Value::String(r.raw.clone()));
    }
    let labelled = [parameter::LabelledParameter {
        name: asked,
        kind: &spec.kind,
        labels: &[],
    }];
    // After an aside, a last sentence that is only the value answers the question asked, in
    // the plain forms PR-1 reads only then (`desculpa, meu filho pegou o celular. é 82790`);
    // so does a message's one number that ends it (`sorry it cut me off it's 53901`), not one
    // said of something else before more words (`my neighbour's is 82790, I think`).
    let answer = [last_sentence(&message), trailing_number(&message)]
        .into_iter()
        .flatten()
        .find_map(|text| {
            let reading = parameter::extract_clear_with(&labelled, text, request.locale, options);
            reading.value(asked).filter(|_| reading.whole).and_then(one)
        });
    answer
}

/// The tool's values in `digits`, a message with its numbers in words rewritten as digits
/// (`parameter::spelled`), read as PR-1 reads typed ones (the clear reading). Money only when it
/// is the one number: its cents are often said apart (`seventy-one reais and ninety-nine cents`).
fn values_in_words(
    tool: &crate::domain::catalog::Tool,
    digits: &str,
    locale: crate::domain::locale::Locale,
    options: parameter::ClearOptions<'_>,
) -> BTreeMap<String, Value> {
    let one_number = number_like_tokens(digits) == 1;
    tool.read_clear_values(digits, locale, options)
        .values
        .into_iter()
        .filter(|v| {
            one_number
                || !tool
                    .parameter(&v.name)
                    .is_some_and(|p| p.kind == parameter::ParameterKind::Money)
        })
        .map(|v| (v.name, v.value))
        .collect()
}

#[derive(Debug, thiserror::Error)]
pub enum EmbeddingModelError {
    #[error(transparent)]
    Config(#[from] ModelConfigError),
    #[error(transparent)]
    Index(#[from] IndexError),
}

/// The vectors of the last few messages: one turn asks the classifier, then the router (and
/// maybe the interpreter) about the same message, and each would embed it again.
mod recent {
    use std::collections::VecDeque;
    use std::sync::{Mutex, OnceLock};

    const CAPACITY: usize = 512;

    type Entries = VecDeque<(String, String, Vec<f32>)>;

    fn entries() -> &'static Mutex<Entries> {
        static RECENT: OnceLock<Mutex<Entries>> = OnceLock::new();
        RECENT.get_or_init(|| Mutex::new(VecDeque::with_capacity(CAPACITY)))
    }

    pub fn get(space: &str, text: &str) -> Option<Vec<f32>> {
        let entries = entries().lock().ok()?;
        entries
            .iter()
            .rev()
            .find(|(s, t, _)| s == space && t == text)
            .map(|(_, _, v)| v.clone())
    }

    pub fn put(space: &str, text: &str, vector: &[f32]) {
        if let Ok(mut entries) = entries().lock() {
            if entries.len() == CAPACITY {
                entries.pop_front();
            }
            entries.push_back((space.to_owned(), text.to_owned(), vector.to_vec()));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::reading::{reads_a_value, toward_active_tool};
    use super::*;
    use crate::domain::decision::InterpreterAct;
    use crate::domain::effect::{ParameterBrief, TransactionSummary};
    use crate::domain::locale::Locale;
    use crate::domain::transaction::TransactionStatus;

    fn example_catalog() -> Catalog {
        crate::config::agents::load_catalog(std::path::Path::new("config/agents.example.yaml"))
            .unwrap()
    }

    fn collecting(missing: &[&str], message: &str) -> InterpreterRequest {
        InterpreterRequest {
            message: message.to_owned(),
            assistant: "store".to_owned(),
            locale: Locale::En,
            transaction: TransactionSummary {
                agent: "billing".to_owned(),
                tool: "billing_contestation".to_owned(),
                status: TransactionStatus::CollectingParameters,
                arguments: BTreeMap::new(),
                missing_parameters: missing.iter().map(|m| (*m).to_owned()).collect(),
            },
            parameters: vec![
                ParameterBrief {
                    name: "subject".to_owned(),
                    type_name: "text".to_owned(),
                    label: "reason".to_owned(),
                    required: true,
                },
                ParameterBrief {
                    name: "amount".to_owned(),
                    type_name: "money".to_owned(),
                    label: "amount".to_owned(),
                    required: true,
                },
            ],
        }
    }

    #[test]
    fn sentences_split_at_sentence_ends_only() {
        assert_eq!(
            sentences("but I want it cancelled! get me an agent"),
            vec!["but I want it cancelled", "get me an agent"]
        );
        // A decimal point, a lone word and one sentence split nothing.
        assert!(sentences("it was 99.90 each time").is_empty());
        assert!(sentences("ugh. get me an agent").is_empty());
        assert!(sentences("seriously?? ok where is it then").is_empty());
        assert_eq!(
            sentences("that's too much?? ok where is it"),
            vec!["that's too much?", "ok where is it"]
        );
    }

    #[test]
    fn an_id_inside_a_sentence_is_read_as_its_parameters_example() {
        let catalog = example_catalog();
        let ids = ids::IdStandIns::of(catalog.assistant("retail-bot").expect("example assistant"));
        assert_eq!(
            ids.apply("hold on, can you first tell me where PED-48842 is?"),
            "hold on, can you first tell me where PED-1001 is?"
        );
        assert_eq!(
            ids.apply("need to change the address on order ped 86811"),
            "need to change the address on order PED-1001"
        );
        // An id with a word or two, or none: its own digits stay.
        for alone in [
            "o PED-82999 mesmo",
            "e o Ped-1501?",
            "PED-48842",
            "order PED-48842 pls",
        ] {
            assert_eq!(ids.apply(alone), alone);
        }
        // Digits right after a word that names only the id (`order`, `pedido`) are the id in
        // its plain form; after a word another parameter shares (`número`), or too short for
        // the pattern, they stay.
        assert_eq!(
            ids.apply("where's my order 76123"),
            "where's my order PED-1001"
        );
        assert_eq!(
            ids.apply("QUERO SABER ONDE ESTA MEU PEDIDO 310233"),
            "QUERO SABER ONDE ESTA MEU PEDIDO PED-1001"
        );
        assert_eq!(
            ids.apply("can you check order #76123 for me"),
            "can you check order #PED-1001 for me"
        );
        for kept in [
            "the cep is 01310-100 and the número 2000",
            "I ordered 3 shirts, order number 12",
            "I called 76123 times about my order",
        ] {
            assert_eq!(ids.apply(kept), kept);
        }
    }

    #[test]
    fn a_purpose_clause_is_read_apart_from_the_request() {
        assert_eq!(
            purpose_parts("Can I talk to a person to make sure it's really refunded?"),
            Some((
                "Can I talk to a person",
                "to make sure it's really refunded?"
            ))
        );
        assert_eq!(
            purpose_parts("quero falar com alguém pra ver se o estorno sai"),
            Some(("quero falar com alguém", "pra ver se o estorno sai"))
        );
        // Nothing before it, or no purpose clause: no parts.
        assert_eq!(purpose_parts("to make sure it's refunded"), None);
        assert_eq!(purpose_parts("i want to talk to a person"), None);
    }

    #[test]
    fn the_last_segment_is_the_last_sentence_or_comma_clause() {
        let last_segment = |m: &'static str| segments(m).last().copied().filter(two_words_or_more);
        assert_eq!(
            segments("mano cade minha encomenda, numero ped1999"),
            vec!["mano cade minha encomenda", "numero ped1999"]
        );
        assert!(segments("contest R$ 1.050,00 please").is_empty());
        assert_eq!(
            last_segment("forget it, just cancel PED-8360 instead"),
            Some("just cancel PED-8360 instead")
        );
        assert_eq!(
            last_segment("pensando bem, nao cancela nao. só me fala onde ele tá, o PED-4102"),
            Some("só me fala onde ele tá, o PED-4102")
        );
        assert_eq!(last_segment("cancel PED-1001"), None);
        assert_eq!(last_segment("PED-1001, ok"), None);
    }

    #[test]
    fn a_tool_reads_a_value_of_a_form_only_it_takes() {
        let catalog = example_catalog();
        let tool = |name: &str| {
            catalog
                .assistants
                .values()
                .find_map(|a| a.tools.get(name))
                .unwrap()
        };
        let cep = "meu cep novo é 88015-600, preciso que o pedido vá pra lá";
        assert!(reads_a_value(
            tool("retail_address_change"),
            cep,
            Locale::PtBr
        ));
        assert!(!reads_a_value(
            tool("retail_order_tracking"),
            cep,
            Locale::PtBr
        ));
        assert!(!reads_a_value(tool("billing_show_bill"), cep, Locale::PtBr));
        let id = "can you tell me where PED-8842 is";
        assert!(reads_a_value(tool("retail_order_tracking"), id, Locale::En));
        assert!(reads_a_value(tool("retail_address_change"), id, Locale::En));
        assert!(!reads_a_value(
            tool("billing_contestation"),
            "my bill is wrong",
            Locale::En
        ));
    }

    #[test]
    fn the_closing_is_the_last_short_clause_or_the_last_words() {
        let none: Vec<&str> = Vec::new();
        assert_eq!(closing_tails("ok obrigada, tchau"), vec!["tchau"]);
        assert_eq!(closing_tails("great, thanks. bye!"), vec!["bye"]);
        assert_eq!(closing_tails("thanks!"), none);
        assert_eq!(closing_tails("bye"), none);
        assert_eq!(closing_tails(", bye"), none);
        // A long last clause is no closing.
        assert_eq!(closing_tails("ok, where is my order PED-1001 now"), none);
        assert_eq!(
            closing_tails("Thank you very much, dear. That will be all."),
            vec!["That will be all"]
        );
        // Typed without punctuation: the last two words, and the last one.
        assert_eq!(
            closing_tails("tá bom obrigado tchau"),
            vec!["obrigado tchau", "tchau"]
        );
        assert_eq!(
            closing_tails("beleza valeu tchau!"),
            vec!["valeu tchau", "tchau"]
        );
        assert_eq!(closing_tails("valeu tchau"), none);
    }

    #[test]
    fn two_requests_joined_by_and_split_at_the_first_join() {
        assert_eq!(
            conjoined("please cancel PED-73688 and tell me how much my bill is"),
            Some(("please cancel PED-73688", "tell me how much my bill is"))
        );
        assert_eq!(
            conjoined("quero cancelar o pedido PED-75140 e também contestar uma cobrança"),
            Some((
                "quero cancelar o pedido PED-75140",
                "contestar uma cobrança"
            ))
        );
        // Too short a part to be a request.
        assert_eq!(conjoined("cancel and refund my order"), None);
        assert_eq!(conjoined("track my order please"), None);
    }

    #[test]
    fn a_request_that_says_only_the_verb_is_told_from_one_that_says_more() {
        let catalog = example_catalog();
        let a = catalog.assistants.values().next().unwrap();
        let contest = a.tools.get("billing_contestation").unwrap();
        let track = a.tools.get("retail_order_tracking").unwrap();
        assert!(reading::only_the_verb(contest, "quero contestar", true));
        assert!(reading::only_the_verb(track, "I want to track", true));
        assert!(!reading::only_the_verb(
            contest,
            "quero contestar isso aí",
            true
        ));
        assert!(!reading::only_the_verb(
            contest,
            "how long does it take to contest",
            true
        ));
        assert!(!reading::only_the_verb(contest, "quero", true));
        // A verb alone frames no request (`show` is Portuguese slang for "great").
        let bill = a.tools.get("billing_show_bill").unwrap();
        assert!(!reading::only_the_verb(bill, "show", true));
        // With a pronoun for its object it asks (`show it`, `me mostra ela`), unless something
        // was in flight for the pronoun to mean (`esquece, cancela isso`).
        assert!(reading::only_the_verb(bill, "ok show it", true));
        assert!(reading::only_the_verb(
            bill,
            "então me mostra ela por favor",
            true
        ));
        let cancel = a.tools.get("retail_order_cancel").unwrap();
        assert!(!reading::only_the_verb(
            cancel,
            "esquece, cancela isso",
            false
        ));
    }

    #[test]
    fn a_verb_names_its_tool_when_only_it_has_that_verb() {
        let catalog = example_catalog();
        let a = catalog.assistants.values().next().unwrap();
        let named = |text: &str| reading::named_by_verb(a, text);
        assert_eq!(
            named("i want to cancel order PED-27730 it's going to the wrong address"),
            Some("retail_order_cancel")
        );
        assert_eq!(
            named("então rastreia o ped6187 pra mim"),
            Some("retail_order_tracking")
        );
        assert_eq!(
            named("Quero contestar isso aí."),
            Some("billing_contestation")
        );
        // Negated, shared by two tools (`check`), two tools named, or none.
        assert_eq!(named("i don't want to cancel PED-1234"), None);
        assert_eq!(named("não quero cancelar o PED-1234"), None);
        assert_eq!(named("can you check PED-1234"), None);
        assert_eq!(
            named("don't cancel it, just track PED-2719"),
            Some("retail_order_tracking")
        );
        assert_eq!(named("cancel PED-1234 and track PED-4321"), None);
        assert_eq!(named("where is my order"), None);
    }

    #[test]
    fn a_closing_tag_asks_for_agreement() {
        assert!(asks_for_agreement("então ele sai amanhã né"));
        assert!(asks_for_agreement("então ele sai amanhã, né."));
        assert!(asks_for_agreement("so it ships tomorrow, right"));
        assert!(!asks_for_agreement("all right"));
        assert!(!asks_for_agreement("ok, tchau"));
        assert!(!asks_for_agreement("nenhuma"));
    }

    #[test]
    fn number_like_tokens_count_numbers_not_their_separators() {
        assert_eq!(number_like_tokens("it was 99.90 each time"), 1);
        assert_eq!(number_like_tokens("R$ 1.050,00 for PED-1001"), 2);
        assert_eq!(number_like_tokens("01310-100, number 45"), 2);
        assert_eq!(number_like_tokens("no numbers here"), 0);
        assert_eq!(number_like_tokens("1, 2"), 2);
    }

    #[test]
    fn the_asked_value_in_a_sentence_is_provided_unless_the_message_is_read_as_another_decision() {
        let tool = Label::Tool("billing_contestation".to_owned());
        let amount = Some(BTreeMap::from([(
            "amount".to_owned(),
            Value::String("99.90".to_owned()),
        )]));
        let request = collecting(&["amount"], "it was 99.90 each time");
        let d = interpret_from(&[(&tool, 0.8)], &request, amount.clone());
        assert_eq!(d.act, InterpreterAct::Provide);
        assert_eq!(
            d.arguments.get("amount"),
            amount.as_ref().and_then(|a| a.get("amount"))
        );
        // Another tool with little confidence does not take the answer away; a handoff does.
        let other = Label::Tool("billing_show_bill".to_owned());
        let d = interpret_from(&[(&other, 0.6), (&tool, 0.4)], &request, amount.clone());
        assert_eq!(d.act, InterpreterAct::Provide);
        assert!((d.confidence - 1.0).abs() < 1e-9, "{d:?}");
        // A number is no abandonment: the cancel label takes nothing from the answer.
        let cancel = Label::Cancel;
        let d = interpret_from(&[(&cancel, 0.6), (&tool, 0.4)], &request, amount.clone());
        assert_eq!((d.act, d.confidence), (InterpreterAct::Provide, 1.0));
        let handoff = Label::HumanHandoff;
        let d = interpret_from(&[(&handoff, 0.7), (&tool, 0.3)], &request, amount.clone());
        assert_eq!(d.act, InterpreterAct::Unclear);
        // Nothing read: nothing provided, and the free-text subject is not filled by a sentence
        // that answers the amount.
        let request = collecting(&["amount", "subject"], "it was 99.90 each time");
        let d = interpret_from(&[(&tool, 0.8)], &request, amount);
        assert_eq!(d.arguments.keys().collect::<Vec<_>>(), vec!["amount"]);
        let request = collecting(&["amount"], "hold on let me look");
        let d = interpret_from(&[(&tool, 0.8)], &request, None);
        assert_eq!(d.act, InterpreterAct::Unclear);
    }

    // A number in words is what a language model reads as a value: the embeddings interpreter
    // reads it as its digits (the typed parsers of PR-1 do not).
    #[test]
    fn the_asked_value_may_be_written_in_words() {
        let catalog = example_catalog();
        let assistant = catalog.assistants.keys().next().expect("one").clone();
        let ask = |message: &str| {
            let mut request = collecting(&["amount"], message);
            request.assistant = assistant.clone();
            asked_value(&catalog, &request).and_then(|v| v.get("amount").cloned())
        };
        let money = |s: &str| Some(Value::String(s.to_owned()));
        assert_eq!(ask("cento e cinquenta reais"), money("150.00"));
        assert_eq!(ask("it was seventy five reais"), money("75.00"));
        assert_eq!(ask("R$ 99,90"), money("99.90"));
        // Asked for an amount, two numbers in a row are a price.
        assert_eq!(ask("it was forty nine ninety"), money("49.90"));
        // Cents said apart are the one amount (`parameter::spelled`); an article is none.
        assert_eq!(
            ask("seventy-one reais and ninety-nine cents"),
            money("71.99")
        );
        assert_eq!(ask("um valor que eu não reconheço"), None);
        // An order number's plain form (`82790`) answers only where PR-1 reads it: after an
        // aside, in a last sentence that is only the value; not inside another sentence.
        let ask_id = |message: &str| {
            let mut request = collecting(&["order_id"], message);
            request.assistant = assistant.clone();
            request.transaction.agent = "retail".to_owned();
            request.transaction.tool = "retail_order_tracking".to_owned();
            asked_value(&catalog, &request).and_then(|v| v.get("order_id").cloned())
        };
        let id = Some(Value::String("PED-82790".to_owned()));
        assert_eq!(ask_id("desculpa, meu filho pegou o celular. é 82790"), id);
        assert_eq!(ask_id("sorry! 82790"), id);
        assert_eq!(ask_id("my neighbour is 82790, I think"), None);
        assert_eq!(ask_id("is it 82790? I'm not sure."), None);
        // A message that ends with its one number answers with it; dictated digits likewise.
        assert_eq!(ask_id("sorry it cut me off it's 82790"), id);
        assert_eq!(
            ask_id("sorry it cut me off it's eight two seven nine zero"),
            id
        );
        assert_eq!(ask_id("I called 3 times already"), None);
    }

    // Dictated values (voice-to-text) are read as a language model reads them: every missing
    // value the tool's clear reading finds in the message with its numbers as digits.
    #[test]
    fn dictated_values_fill_every_missing_parameter_they_name() {
        let catalog = example_catalog();
        let assistant = catalog.assistants.keys().next().expect("one").clone();
        let mut request = collecting(
            &["zip_code", "house_number"],
            "o cep é zero quatro cinco três oito um três três número duzentos e dez apartamento cinquenta",
        );
        request.assistant = assistant;
        request.locale = Locale::PtBr;
        request.transaction.agent = "retail".to_owned();
        request.transaction.tool = "retail_address_change".to_owned();
        let values = asked_value(&catalog, &request).expect("values read");
        assert_eq!(
            values.get("zip_code"),
            Some(&Value::String("04538-133".to_owned()))
        );
        assert_eq!(values.get("house_number"), Some(&Value::from(210)));
    }

    // MG-5: a question put to the assistant is no reason; the customer's own question may be.
    #[test]
    fn a_question_to_the_assistant_does_not_fill_the_reason() {
        let tool = Label::Tool("billing_contestation".to_owned());
        for message in [
            "vc pode me explicar como funciona antes?",
            "what's there to explain? can't you see it on my account?",
        ] {
            let request = collecting(&["subject", "amount"], message);
            let d = interpret_from(&[(&tool, 0.8)], &request, None);
            assert_eq!(d.act, InterpreterAct::Unclear, "{message}");
        }
        let request = collecting(
            &["subject", "amount"],
            "why was I charged twice for one order?",
        );
        let d = interpret_from(&[(&tool, 0.8)], &request, None);
        assert_eq!(d.act, InterpreterAct::Provide);
        assert!(d.arguments.contains_key("subject"));
    }

    #[test]
    fn a_conversational_intent_is_as_confident_as_all_of_them_together_a_tool_question_alone() {
        let thanks = Label::Topic {
            tool: None,
            name: "thanks".to_owned(),
        };
        let ack = Label::Topic {
            tool: None,
            name: "acknowledgement".to_owned(),
        };
        let oos = Label::OutOfScope;
        match route_from(
            &[(&thanks, 0.52), (&ack, 0.45), (&oos, 0.03)],
            None,
            false,
            None,
        ) {
            RouterDecision::Topic {
                topic, confidence, ..
            } => {
                assert_eq!(topic, "thanks");
                assert!((confidence - 0.97).abs() < 1e-6, "{confidence}");
            }
            other => panic!("{other:?}"),
        }
        let timing = Label::Topic {
            tool: Some("billing_contestation".to_owned()),
            name: "timing".to_owned(),
        };
        let refund = Label::Topic {
            tool: Some("billing_contestation".to_owned()),
            name: "refund".to_owned(),
        };
        match route_from(
            &[(&timing, 0.52), (&refund, 0.45), (&oos, 0.03)],
            None,
            true,
            None,
        ) {
            RouterDecision::Topic { confidence, .. } => {
                assert!((confidence - 0.52).abs() < 1e-6, "{confidence}")
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_request_competes_with_questions_about_its_tool_not_with_other_topics() {
        let bill = Label::Tool("billing_show_bill".to_owned());
        let payment = Label::Topic {
            tool: Some("billing_show_bill".to_owned()),
            name: "payment".to_owned(),
        };
        let greeting = Label::Topic {
            tool: None,
            name: "greeting".to_owned(),
        };
        let oos = Label::OutOfScope;
        let catalog = crate::config::agents::parse_catalog(
            include_str!("../../../config/agents.example.yaml"),
            "agents.example.yaml",
        )
        .expect("the example configuration parses");
        let assistant = catalog.assistants.values().next();
        let confidence = |ranked: &[(&Label, f32)]| match route_from(ranked, assistant, false, None)
        {
            RouterDecision::Route { confidence, .. } => confidence,
            other => panic!("{other:?}"),
        };
        // Its own question stays in the normalisation: 0.84 of 1.0, under a 0.90 threshold.
        let own = confidence(&[(&bill, 0.84), (&payment, 0.14), (&oos, 0.02)]);
        assert!((own - 0.84).abs() < 1e-4, "{own}");
        // A conversational topic leaves it: 0.84 of 0.86.
        let other = confidence(&[(&bill, 0.84), (&greeting, 0.14), (&oos, 0.02)]);
        assert!((other - 0.84 / 0.86).abs() < 1e-4, "{other}");
        match route_from(
            &[(&payment, 0.5), (&bill, 0.45), (&oos, 0.05)],
            assistant,
            false,
            None,
        ) {
            // Its question more than its request: as sure as the two together (0.5 + 0.45).
            RouterDecision::Topic { confidence, .. } => assert!((confidence - 0.95).abs() < 1e-6),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_question_another_tool_also_answers_is_about_the_transaction_in_progress() {
        let topic = |tool: &str, name: &str| Label::Topic {
            tool: Some(tool.to_owned()),
            name: name.to_owned(),
        };
        let cancel_refund = topic("retail_order_cancel", "refund");
        let contest_refund = topic("billing_contestation", "refund");
        let cancel_fee = topic("retail_order_cancel", "fee");
        let oos = Label::OutOfScope;
        let ranked = vec![
            (&cancel_refund, 0.6),
            (&cancel_fee, 0.2),
            (&contest_refund, 0.15),
            (&oos, 0.05),
        ];
        let moved = toward_active_tool(ranked.clone(), Some("billing_contestation"));
        assert_eq!(moved[0].0, &contest_refund);
        assert!((moved[0].1 - 0.75).abs() < 1e-6, "{moved:?}");
        // A question only another tool has stays that tool's; no transaction, nothing moves.
        assert!(moved.iter().any(|(l, _)| *l == &cancel_fee));
        assert_eq!(toward_active_tool(ranked.clone(), None), ranked);
    }
}
