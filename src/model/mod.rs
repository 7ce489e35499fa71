//! Model-backed decisions behind `ports::DecisionModel`: output parsing shared by every adapter,
//! the chat prompts, and the adapters (scripted for scenarios and tests, OpenAI-compatible HTTP).

pub mod configured;
pub mod embedding;
pub mod http;
pub mod output;
pub mod prompt;
pub mod scripted;

pub use http::{ModelConfigError, OpenAiCompatibleModel, RawAnswer};
pub use scripted::{ModelScript, Scripted, ScriptedModel};

/// A slot of a client's concurrency cap (`None`: uncapped), waited for before the call's timeout
/// starts; the wait shows in `turnstile_model_requests_waiting`. Shared by the chat and the
/// embeddings clients.
pub(crate) async fn acquire_slot(
    slots: &Option<std::sync::Arc<tokio::sync::Semaphore>>,
) -> Option<tokio::sync::OwnedSemaphorePermit> {
    let slots = slots.as_ref()?;
    let _waiting =
        crate::telemetry::Waiting::start(metrics::gauge!(crate::telemetry::MODEL_REQUESTS_WAITING));
    slots.clone().acquire_owned().await.ok()
}
