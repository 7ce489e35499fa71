//! `ConfiguredModel`: the `DecisionModel` the worker runs — each skill (classifier, router,
//! interpreter) is answered by the provider its profile names: an embeddings profile
//! ([`EmbeddingModel`]) or a chat profile ([`OpenAiCompatibleModel`]).
//!
//! **Cascade** (beyond the seeds): an embeddings profile with `escalate_to: LLM_PROFILE` asks
//! that LLM whenever its own answer is not confident (below the skill's threshold:
//! `ROUTE_STICKINESS_CONFIDENCE_THRESHOLD`, `ROUTER_CONFIDENCE_THRESHOLD`,
//! `INTERPRETER_CONFIDENCE_THRESHOLD`) or failed, so the LLM sees only the turns the embeddings
//! cannot settle. Every decision is counted in `turnstile_decisions_total{skill, component}`:
//! `embeddings` or `llm` for the component whose confident answer stands, `fallback` when none
//! is confident (the engine then applies the seed's fallbacks).

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::Arc;

use metrics::counter;

use crate::config::skills::{SkillProfile, SkillProfiles};
use crate::domain::catalog::{Catalog, Settings};
use crate::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, RouterDecision, Skill,
};
use crate::domain::effect::{ClassifierRequest, InterpreterRequest, RouterRequest};
use crate::model::embedding::{EmbeddingModel, EmbeddingModelError};
use crate::model::http::{ModelConfigError, OpenAiCompatibleModel};
use crate::ports::{CallContext, DecisionModel};
use crate::telemetry::DECISIONS_TOTAL;

/// Where the embeddings profiles' calls go and where their fitted examples are cached.
#[derive(Debug, Clone, Default)]
pub struct EmbeddingsSetup {
    /// Overrides every embeddings profile's `base_url` (`TURNSTILE_EMBEDDINGS_BASE_URL`).
    pub base_url: Option<String>,
    /// `TURNSTILE_EMBEDDINGS_CACHE_DIR`; `None` = no disk cache.
    pub cache_dir: Option<PathBuf>,
    /// Embeddings calls at once, all embeddings profiles together
    /// (`TURNSTILE_EMBEDDINGS_MAX_CONCURRENCY`); `None` = unbounded.
    pub max_concurrency: Option<usize>,
}

#[derive(Clone)]
pub struct ConfiguredModel {
    llm: OpenAiCompatibleModel,
    /// The chat model with every escalating embeddings profile replaced by its `escalate_to`.
    escalation: Option<OpenAiCompatibleModel>,
    /// By profile name: the fitted model, and whether the profile escalates.
    embeddings: Arc<BTreeMap<String, (EmbeddingModel, bool)>>,
    catalog: Arc<Catalog>,
    settings: Arc<Settings>,
}

impl std::fmt::Debug for ConfiguredModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ConfiguredModel")
            .field("llm", &self.llm)
            .field("embeddings", &self.embeddings.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfiguredModelError {
    #[error(transparent)]
    Config(#[from] ModelConfigError),
    #[error(transparent)]
    Embeddings(#[from] EmbeddingModelError),
}

impl ConfiguredModel {
    /// `llm` is the chat model built from the same catalog, settings and `skills` (with its
    /// base-URL override and concurrency cap applied by the caller); the embeddings profiles of
    /// `skills` in use are fitted here, and the escalation model built when one escalates.
    pub async fn build(
        llm: OpenAiCompatibleModel,
        catalog: Arc<Catalog>,
        settings: Arc<Settings>,
        skills: &SkillProfiles,
        setup: &EmbeddingsSetup,
        env: &dyn Fn(&str) -> Option<String>,
        escalation_override: impl Fn(
            OpenAiCompatibleModel,
        ) -> Result<OpenAiCompatibleModel, ModelConfigError>,
    ) -> Result<ConfiguredModel, ConfiguredModelError> {
        // In the order the skills are named: the classifier (when called), then each assistant's.
        let classifier = skills
            .classifier
            .as_ref()
            .filter(|_| settings.enable_route_stickiness);
        let used = classifier
            .into_iter()
            .chain(catalog.assistants.values().flat_map(|a| {
                [&a.router_profile, &a.interpreter_profile]
                    .into_iter()
                    .filter_map(|name| skills.assistant_profile(name))
            }));
        let mut embeddings = BTreeMap::new();
        // One pool: the profiles of a process normally share one embeddings server.
        let slots = setup
            .max_concurrency
            .map(|n| Arc::new(tokio::sync::Semaphore::new(n.max(1))));
        for skill in used {
            let SkillProfile::Embeddings {
                profile,
                escalate_to,
            } = skill
            else {
                continue;
            };
            if embeddings.contains_key(&profile.name) {
                continue;
            }
            let model = EmbeddingModel::build(
                profile,
                setup.base_url.as_deref(),
                catalog.clone(),
                setup.cache_dir.clone(),
                slots.clone(),
                env,
            )
            .await?;
            embeddings.insert(profile.name.clone(), (model, escalate_to.is_some()));
        }
        let escalation = if embeddings.values().any(|(_, escalates)| *escalates) {
            let model = OpenAiCompatibleModel::from_skills(
                catalog.clone(),
                settings.clone(),
                &skills.escalated(),
                env,
            )?;
            Some(escalation_override(model)?)
        } else {
            None
        };
        Ok(ConfiguredModel {
            llm,
            escalation,
            embeddings: Arc::new(embeddings),
            catalog,
            settings,
        })
    }

    /// Fails when a chat profile in use has no usable base URL (see
    /// [`OpenAiCompatibleModel::check_endpoints`]).
    pub fn check_endpoints(&self) -> Result<(), ModelConfigError> {
        self.llm.check_endpoints()?;
        self.escalation
            .as_ref()
            .map_or(Ok(()), OpenAiCompatibleModel::check_endpoints)
    }

    fn embeddings_for(&self, profile: &str) -> Option<(&EmbeddingModel, bool)> {
        let (model, escalates) = self.embeddings.get(profile)?;
        Some((model, *escalates && self.escalation.is_some()))
    }

    fn router_profile(&self, assistant: &str) -> &str {
        self.catalog
            .assistant(assistant)
            .map_or("", |a| a.router_profile.as_str())
    }

    fn interpreter_profile(&self, assistant: &str) -> &str {
        self.catalog
            .assistant(assistant)
            .map_or("", |a| a.interpreter_profile.as_str())
    }
}

/// Counts the decision by the component whose confident answer stands.
fn count<T>(
    skill: Skill,
    answer: &ModelAnswer<T>,
    confident: impl Fn(&T) -> bool,
    component: &'static str,
) {
    let component = match answer {
        Ok(a) if confident(a) => component,
        _ => "fallback",
    };
    counter!(DECISIONS_TOTAL, "skill" => skill.as_str(), "component" => component).increment(1);
}

fn router_confidence(d: &RouterDecision) -> f64 {
    match d {
        RouterDecision::Route { confidence, .. }
        | RouterDecision::OutOfScope { confidence }
        | RouterDecision::Topic { confidence, .. } => *confidence,
    }
}

/// The embeddings answer when it is confident (or nothing escalates), else the escalation LLM's;
/// the chat model when the skill's profile is not an embeddings one. Each component's future is
/// built only when it is taken: a turn waiting for a model slot holds one call's future, not
/// three unstarted ones (thousands wait at a time under a slow model).
async fn cascade<T, E, X, L>(
    skill: Skill,
    confident: impl Fn(&T) -> bool,
    embeddings: Option<(impl FnOnce() -> E, Option<impl FnOnce() -> X>)>,
    llm: impl FnOnce() -> L,
) -> ModelAnswer<T>
where
    E: Future<Output = ModelAnswer<T>>,
    X: Future<Output = ModelAnswer<T>>,
    L: Future<Output = ModelAnswer<T>>,
{
    let (answer, component) = match embeddings {
        Some((embedded, escalation)) => {
            let answer = embedded().await;
            match escalation {
                Some(escalated) if !answer.as_ref().is_ok_and(&confident) => {
                    (escalated().await, "llm")
                }
                _ => (answer, "embeddings"),
            }
        }
        None => (llm().await, "llm"),
    };
    count(skill, &answer, confident, component);
    answer
}

impl DecisionModel for ConfiguredModel {
    async fn classify(
        &self,
        request: &ClassifierRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<ClassifierDecision> {
        let threshold = self.settings.route_stickiness_confidence_threshold;
        let embeddings = self
            .embeddings_for(&self.settings.route_stickiness_llm_profile)
            .map(|(model, escalates)| {
                let escalation = self.escalation.as_ref().filter(|_| escalates);
                (
                    move || model.classify(request),
                    escalation.map(|llm| move || llm.classify(request, ctx)),
                )
            });
        cascade(
            Skill::Classifier,
            |d: &ClassifierDecision| d.confidence >= threshold,
            embeddings,
            || self.llm.classify(request, ctx),
        )
        .await
    }

    async fn route(
        &self,
        request: &RouterRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<RouterDecision> {
        let threshold = self.settings.router_confidence_threshold;
        let embeddings = self
            .embeddings_for(self.router_profile(&request.assistant))
            .map(|(model, escalates)| {
                let escalation = self.escalation.as_ref().filter(|_| escalates);
                (
                    move || model.route(request),
                    escalation.map(|llm| move || llm.route(request, ctx)),
                )
            });
        cascade(
            Skill::Router,
            |d: &RouterDecision| router_confidence(d) >= threshold,
            embeddings,
            || self.llm.route(request, ctx),
        )
        .await
    }

    async fn interpret(
        &self,
        request: &InterpreterRequest,
        ctx: CallContext<'_>,
    ) -> ModelAnswer<InterpreterDecision> {
        let threshold = self.settings.interpreter_confidence_threshold;
        let embeddings = self
            .embeddings_for(self.interpreter_profile(&request.assistant))
            .map(|(model, escalates)| {
                let escalation = self.escalation.as_ref().filter(|_| escalates);
                (
                    move || model.interpret(request),
                    escalation.map(|llm| move || llm.interpret(request, ctx)),
                )
            });
        cascade(
            Skill::Interpreter,
            |d: &InterpreterDecision| d.confidence >= threshold,
            embeddings,
            || self.llm.interpret(request, ctx),
        )
        .await
    }
}
