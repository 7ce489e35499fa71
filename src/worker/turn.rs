//! One record's task: the pipeline's `handle_record` inside the turn's span, and what the
//! partition state machine needs to know of its end ([`Finished`]).

use std::sync::Arc;

#[cfg(feature = "harness")]
use super::fault;
use super::partitions::{Finished, Start};
use crate::domain::catalog::{Catalog, Settings};
use crate::domain::engine::Engine;
use crate::message::{DecodeLimits, InboundRecord, Topics};
use crate::pipeline::{handle_record, Disposition, Ports, Rules};
use crate::ports::{CheckpointStore, DecisionModel, ToolGateway};
use crate::store::{CachingCheckpointStore, CheckpointCache, RetryingStore};

/// The worker's store: the checkpoint cache in front of the one retry layer in front of the
/// adapter.
pub(super) type WorkerStore<S> = CachingCheckpointStore<RetryingStore<S>>;

/// What every turn task shares: the services (the store behind the cache and the retry layer),
/// the topics, the decode limits, and the coordinator's handle on the store's cache.
pub(super) struct Shared<M, T, S> {
    pub(super) catalog: Arc<Catalog>,
    pub(super) settings: Arc<Settings>,
    pub(super) model: M,
    pub(super) tools: T,
    pub(super) store: WorkerStore<S>,
    pub(super) topics: Topics,
    pub(super) limits: DecodeLimits,
    pub(super) cache: Arc<CheckpointCache>,
    #[cfg(feature = "harness")]
    pub(super) fault: fault::AbortAfterSaves,
}

/// Processes one record inside a span carrying its topic, partition, offset, tenant and turn id
/// (the span is attached to the future, never entered across an await), so every line logged
/// for the turn — a model fallback, a tool retry, a store wait — names the turn it belongs to.
pub(super) async fn process_record<M, T, S>(shared: &Shared<M, T, S>, start: Start) -> Finished
where
    M: DecisionModel + Send + Sync,
    T: ToolGateway + Send + Sync,
    S: CheckpointStore + Send + Sync,
{
    use tracing::Instrument;
    let span = crate::telemetry::turn_span(
        &shared.topics.inbound,
        start.record.partition,
        start.record.offset,
    );
    Box::pin(apply_record(shared, start)).instrument(span).await
}

/// The pipeline's [`handle_record`], and what the coordinator needs to know of its end.
async fn apply_record<M, T, S>(shared: &Shared<M, T, S>, start: Start) -> Finished
where
    M: DecisionModel + Send + Sync,
    T: ToolGateway + Send + Sync,
    S: CheckpointStore + Send + Sync,
{
    let Start {
        generation,
        key,
        record,
        epoch,
        committed_mark,
        ..
    } = start;
    let inbound = InboundRecord {
        topic: &shared.topics.inbound,
        partition: record.partition,
        offset: record.offset,
        key: record.key.as_deref(),
        payload: record.payload.as_deref(),
        timestamp_ms: record.timestamp_ms,
    };
    let rules = Rules {
        engine: Engine::new(&shared.catalog, &shared.settings),
        catalog: &shared.catalog,
        limits: &shared.limits,
    };
    let ports = Ports {
        store: &shared.store,
        model: &shared.model,
        tools: &shared.tools,
    };
    let handled = handle_record(rules, ports, &inbound, epoch, committed_mark).await;
    let mut finished = Finished {
        partition: record.partition,
        generation,
        offset: record.offset,
        key,
        turn_id: String::new(),
        outputs: Vec::new(),
        record_timestamp_ms: record.timestamp_ms,
        fenced: false,
        outcome: "fenced",
    };
    match handled {
        Ok(h) => {
            finished.fenced = h.disposition == Disposition::Fenced;
            finished.outcome = h.disposition.as_str();
            finished.turn_id = h.turn_id;
            finished.outputs = h.outputs;
            #[cfg(feature = "harness")]
            if h.disposition == Disposition::Applied {
                shared.fault.after_save();
            }
        }
        // Only reachable without the retry layer, which the worker always has: leave the
        // record uncommitted (redelivered to the next owner) rather than guess.
        Err(e) => {
            tracing::error!(error = %e, "Checkpoint store error escaped the retry layer; the record stays uncommitted.");
            finished.fenced = true;
        }
    }
    finished
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::http::OpenAiCompatibleModel;
    use crate::store::cql::ScyllaCheckpointStore;
    use crate::tool::http::HttpToolGateway;
    use crate::worker::consumer::FetchedRecord;

    type RealShared = Shared<OpenAiCompatibleModel, HttpToolGateway, ScyllaCheckpointStore>;

    /// The size of the future a closure would build, without building it.
    fn future_size<F, Fut>(_: F) -> usize
    where
        F: FnOnce(&'static RealShared) -> Fut,
    {
        std::mem::size_of::<Fut>()
    }

    /// Every turn in flight is a task holding this future; unboxed, the CQL driver's and the
    /// pipeline's nested futures made it 13.8 KB (138 MB at 10,000 turns in flight).
    #[test]
    fn a_turn_in_flight_holds_a_small_future() {
        let size = future_size(|shared| {
            let record = FetchedRecord {
                partition: 0,
                offset: 0,
                key: None,
                payload: None,
                timestamp_ms: None,
            };
            let start = Start {
                partition: 0,
                generation: 0,
                key: String::new(),
                record,
                epoch: 0,
                committed_mark: 0,
            };
            process_record(shared, start)
        });
        assert!(
            size <= 6 * 1024,
            "process_record's future is {size} bytes: box the large awaits inside it"
        );
    }

    /// Under a slow model most turns in flight wait for a model slot inside `decide_turn`, each
    /// holding its pending model calls (and `apply_turn`'s future around it), so these futures'
    /// sizes multiply by the turns in flight. They stay small because the cascade builds only the
    /// component it takes, the HTTP exchange is boxed once a slot is held, and `decide_turn`
    /// boxes each step's calls and uses its start state in place; the bounds below fail a change
    /// that inlines a large future again.
    #[test]
    fn a_turn_waiting_for_a_model_slot_holds_small_futures() {
        use crate::domain::effect::{ClassifierRequest, ToolRequest};
        use crate::domain::state::AgentState;
        use crate::domain::turn::Turn;
        use crate::model::configured::ConfiguredModel;
        use crate::ports::{CallContext, DecisionModel, Fence, ToolGateway};

        struct Parts {
            engine: Engine<'static>,
            store: WorkerStore<ScyllaCheckpointStore>,
            model: ConfiguredModel,
            tools: HttpToolGateway,
            turn: Turn,
            classify: ClassifierRequest,
            tool: ToolRequest,
        }
        impl Parts {
            fn ports(
                &self,
            ) -> Ports<'_, WorkerStore<ScyllaCheckpointStore>, ConfiguredModel, HttpToolGateway>
            {
                Ports {
                    store: &self.store,
                    model: &self.model,
                    tools: &self.tools,
                }
            }
        }
        fn size<F, Fut>(_: F) -> usize
        where
            F: FnOnce(&'static Parts) -> Fut,
        {
            std::mem::size_of::<Fut>()
        }
        let ctx = CallContext {
            turn_id: "",
            turn_at_ms: 0,
            speculative: false,
        };
        let classify = size(|p| p.model.classify(&p.classify, ctx));
        let execute = size(|p| p.tools.execute(&p.tool, ctx));
        let apply = size(|p| {
            crate::pipeline::apply_turn(
                &p.engine,
                p.ports(),
                &p.turn,
                crate::pipeline::Position {
                    topic: "",
                    partition: 0,
                    offset: 0,
                    epoch: 0,
                    committed_mark: 0,
                },
            )
        });
        let decide = size(|p| {
            crate::pipeline::decide_turn(
                &p.engine,
                p.ports(),
                &p.turn,
                crate::pipeline::TurnStart::new(AgentState::default(), None, ""),
                Fence {
                    epoch: 0,
                    offset: 0,
                },
            )
        });
        assert!(
            classify <= 2 * 1024,
            "a classify call's future is {classify} bytes"
        );
        assert!(
            execute <= 2 * 1024,
            "a tool call's future is {execute} bytes"
        );
        assert!(decide <= 4 * 1024, "decide_turn's future is {decide} bytes");
        // What it holds across the store read is the row's small handle, not a decoded
        // checkpoint.
        assert!(
            apply <= 1024,
            "apply_turn's future is {apply} bytes: box what it holds across its awaits"
        );
    }
}
