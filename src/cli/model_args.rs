//! The model arguments `turnstile run` and `turnstile eval decisions` share, and the decision
//! model both build from them and the profiles.

use std::path::PathBuf;
use std::sync::Arc;

use crate::config::profiles::Profiles;
use crate::config::skills::SkillProfiles;
use crate::domain::catalog::{Catalog, Settings};
use crate::model::configured::{ConfiguredModel, ConfiguredModelError, EmbeddingsSetup};
use crate::model::http::{ModelConfigError, OpenAiCompatibleModel};

/// Base-URL overrides of the model profiles and the embeddings cache.
#[derive(Debug, Clone, clap::Args)]
pub struct ModelArgs {
    /// Overrides every chat model profile's base URL (a gateway, or a test server).
    #[arg(long, env = "TURNSTILE_MODEL_BASE_URL")]
    pub model_base_url: Option<String>,
    /// Overrides every embeddings profile's base URL (e.g. http://127.0.0.1:8000/v1).
    #[arg(long, env = "TURNSTILE_EMBEDDINGS_BASE_URL")]
    pub embeddings_base_url: Option<String>,
    /// Where embeddings profiles cache their fitted examples (by content hash), so a restart
    /// neither re-embeds nor refits; unset = no cache.
    #[arg(long, env = "TURNSTILE_EMBEDDINGS_CACHE_DIR")]
    pub embeddings_cache_dir: Option<PathBuf>,
}

/// Calls at once of the built model; `None` = unbounded.
#[derive(Debug, Clone, Copy, Default)]
pub struct ModelConcurrency {
    /// Chat calls, per chat model (the decision model's and its escalation model).
    pub chat: Option<usize>,
    /// Embeddings calls, all embeddings profiles together.
    pub embeddings: Option<usize>,
}

impl ModelArgs {
    /// The decision model the profiles configure: the chat model (base-URL override and
    /// concurrency cap applied, to the escalation model too) and the embeddings profiles. A chat
    /// model that cannot be built is [`ConfiguredModelError::Config`].
    pub async fn build_model(
        &self,
        catalog: &Arc<Catalog>,
        settings: &Arc<Settings>,
        profiles: Arc<Profiles>,
        env: &dyn Fn(&str) -> Option<String>,
        concurrency: ModelConcurrency,
    ) -> Result<ConfiguredModel, ConfiguredModelError> {
        let chat_setup = |m: OpenAiCompatibleModel| {
            let m = match &self.model_base_url {
                Some(url) => m.with_base_url_override(url),
                None => m,
            };
            match concurrency.chat {
                Some(n) => m.with_max_concurrency(n),
                None => Ok(m),
            }
        };
        // The one place the skills' profile references are resolved for a decision model.
        let skills =
            SkillProfiles::resolve(catalog, settings, &profiles).map_err(ModelConfigError::from)?;
        let llm =
            OpenAiCompatibleModel::from_skills(catalog.clone(), settings.clone(), &skills, env)
                .and_then(chat_setup)?;
        let setup = EmbeddingsSetup {
            base_url: self.embeddings_base_url.clone(),
            cache_dir: self.embeddings_cache_dir.clone(),
            max_concurrency: concurrency.embeddings,
        };
        ConfiguredModel::build(
            llm,
            catalog.clone(),
            settings.clone(),
            &skills,
            &setup,
            env,
            chat_setup,
        )
        .await
    }
}
