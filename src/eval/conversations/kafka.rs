//! Playing turns through Kafka against a running worker (`turnstile run`, `scripts/run.sh`): each
//! turn is produced to the worker's inbound topic exactly as a channel adapter sends it
//! (`schemas/turn.v1.json`, keyed by the conversation identity), and the turn is over when the
//! worker's stored checkpoint has applied it and every output its outbox lists for it has been
//! read back from the replies and events topics (`read_committed`, as a downstream reader).
//!
//! The state judged is the stored checkpoint, read from the store before and after the turn
//! (a reply carries neither arguments nor missing parameters). What the in-process run takes from
//! the engine's outcome is derived from what the worker publishes:
//!
//! | in process | through Kafka |
//! |---|---|
//! | reply text | the reply record's `text` (the same non-empty texts joined by `\n`) |
//! | events | the CloudEvents' `type` and `data`, in the events partition's order |
//! | `route.handoff` | the reply's `handoff`; `false` when the turn published no reply |
//! | executed tools | each `transaction.completed` event (`ok`) and each `transaction.failed` whose transaction's `reason` is `tool_failed` (not `ok`), with that transaction's tool and arguments: the engine ends a transaction those two ways only after executing its tool |
//! | model calls | not published by the worker: not counted |
//!
//! A turn the worker dead-letters fails with the dead letter's reason; a turn with no answer
//! within the timeout fails with "no reply within N s", and the rest of its conversation is not
//! played (the turn may still be processed later, and the next turn would be judged against the
//! wrong state). When the first turns sent all go unanswered, the remaining ones are failed
//! without being sent, so a stopped worker ends the run in about one timeout.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer, StreamConsumer};
use rdkafka::message::{BorrowedMessage, Headers, Message};
use rdkafka::producer::{FutureProducer, FutureRecord};
use rdkafka::{Offset, TopicPartitionList};
use serde_json::Value;
use tokio::sync::Notify;

use crate::domain::effect::{Event, EventType, ExecutedTool};
use crate::domain::state::AgentState;
use crate::domain::transaction::{reason, Transaction};
use crate::domain::turn::{Turn, TurnInput};
use crate::message::{
    format_rfc3339_ms, ActionMessage, CloudEvent, DeadLetterMessage, ReplyMessage, Topics,
    TurnMessage, TurnSchema, HEADER_TURN_ID,
};
use crate::pipeline::{decode_record, outbox};
use crate::store::cql::ScyllaCheckpointStore;

use super::play::{ObservedTurn, TurnRun, TurnTransport};

/// How long metadata and watermark requests may take at start before the broker counts as
/// unreachable.
const METADATA_TIMEOUT: Duration = Duration::from_secs(10);
/// How often a waiting turn reads its checkpoint when nothing arrived for it.
const STORE_POLL: Duration = Duration::from_secs(1);
/// The longest a waiting turn sleeps between two looks at what arrived.
const WAKE: Duration = Duration::from_millis(250);
/// The `channel` of the turns this player sends.
pub const EVAL_CHANNEL: &str = "eval";

/// The worker to play against: its brokers, topics and the per-turn budget.
#[derive(Debug, Clone, PartialEq)]
pub struct KafkaTarget {
    pub brokers: String,
    /// Extra librdkafka settings, the worker's own (`TURNSTILE_KAFKA_*`: TLS, SASL).
    pub overrides: Vec<(String, String)>,
    pub topics: Topics,
    /// How long one turn may wait for the worker's answer.
    pub turn_timeout: Duration,
    /// Unanswered turns, with no turn answered yet, after which the rest are failed unsent.
    pub give_up_after: usize,
}

/// Why playing through Kafka cannot start.
#[derive(Debug, thiserror::Error)]
pub enum KafkaPlayError {
    #[error(
        "Kafka at {brokers} is unreachable: {detail} (fix: start it: bash scripts/services.sh up, \
         and the worker: bash scripts/run.sh; or point --brokers / TURNSTILE_BROKERS at the worker's brokers)"
    )]
    Unreachable { brokers: String, detail: String },
    #[error(
        "the worker's topic `{topic}` does not exist at {brokers} (fix: start the worker: bash \
         scripts/run.sh, which creates its topics; or name the topics the worker uses with \
         --topic-* / TURNSTILE_TOPIC_*)"
    )]
    MissingTopic { topic: String, brokers: String },
    #[error("cannot create the Kafka {what}: {detail}")]
    Client { what: &'static str, detail: String },
}

/// What arrived for one turn.
#[derive(Debug, Default)]
struct TurnOutputs {
    reply: Option<ReplyMessage>,
    events: Vec<Event>,
    output_ids: HashSet<String>,
    /// An output that does not read as its schema says: the turn fails with it.
    malformed: Option<String>,
}

/// One read output.
#[derive(Debug)]
enum Output {
    Reply(Box<ReplyMessage>),
    Event(Event),
}

/// Outputs of this run's turns, by turn id, filled by the reader task.
#[derive(Debug, Default)]
struct Inbox {
    turns: Mutex<HashMap<String, TurnOutputs>>,
    /// Dead letters of this run's records, by inbound (partition, offset).
    dead: Mutex<HashMap<(i32, i64), String>>,
    last_error: Mutex<Option<String>>,
    arrived: Notify,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Inbox {
    /// Files one consumed record under its turn (records of other runs are ignored).
    fn file(&self, topics: &Topics, prefix: &str, m: &BorrowedMessage<'_>) {
        let header_turn = m.headers().and_then(|h| {
            h.iter()
                .find(|x| x.key == HEADER_TURN_ID)
                .and_then(|x| x.value)
                .map(|v| String::from_utf8_lossy(v).into_owned())
        });
        if header_turn
            .as_deref()
            .is_some_and(|t| !t.starts_with(prefix))
        {
            return; // another run's or conversation's output: not even parsed
        }
        let payload = m.payload().unwrap_or_default();
        let filed = if m.topic() == topics.dead_letters {
            self.file_dead_letter(payload, topics, prefix)
        } else {
            let reply = m.topic() == topics.replies;
            self.file_output(reply, payload, header_turn, prefix)
        };
        if filed {
            self.arrived.notify_waiters();
        }
    }

    /// A dead letter of one of this run's turns, by the inbound record's position.
    fn file_dead_letter(&self, payload: &[u8], topics: &Topics, prefix: &str) -> bool {
        let Ok(d) = DeadLetterMessage::from_json(payload) else {
            return false;
        };
        let session = d.original.key.as_deref().and_then(|k| k.split('/').nth(2));
        if d.original.topic != topics.inbound || !session.is_some_and(|s| s.starts_with(prefix)) {
            return false;
        }
        let why = format!(
            "the worker dead-lettered the turn ({}): {}",
            d.reason.as_str(),
            d.detail
        );
        lock(&self.dead).insert((d.original.partition, d.original.offset), why);
        true
    }

    /// A reply or event, by the turn id and output id it carries (read once: a republished
    /// output, EV-1, has the same id). One that does not read as its schema says is filed under
    /// its `turn_id` header, to fail that turn.
    fn file_output(
        &self,
        reply: bool,
        payload: &[u8],
        header_turn: Option<String>,
        prefix: &str,
    ) -> bool {
        let parsed = if reply {
            ReplyMessage::from_json(payload).map(|r| {
                (
                    r.turn_id.clone(),
                    r.output_id.clone(),
                    Output::Reply(Box::new(r)),
                )
            })
        } else {
            CloudEvent::from_json(payload).map(|e| {
                let event = Event {
                    kind: e.kind,
                    data: Value::Object(e.data),
                };
                (e.turnid, e.id, Output::Event(event))
            })
        };
        let (turn_id, output) = match parsed {
            Ok((turn_id, id, output)) => (turn_id, Ok((id, output))),
            Err(e) => match header_turn {
                Some(turn_id) => {
                    let what = if reply { "reply" } else { "event" };
                    (turn_id, Err(format!("a malformed {what}: {}", e.detail)))
                }
                None => return false,
            },
        };
        if !turn_id.starts_with(prefix) {
            return false;
        }
        let mut turns = lock(&self.turns);
        let outputs = turns.entry(turn_id).or_default();
        match output {
            Ok((id, output)) => {
                if !outputs.output_ids.insert(id) {
                    return false;
                }
                match output {
                    Output::Reply(r) => outputs.reply = Some(*r),
                    Output::Event(e) => outputs.events.push(e),
                }
            }
            Err(why) => outputs.malformed = Some(why),
        }
        true
    }

    fn has_any(&self, turn_id: &str) -> bool {
        lock(&self.turns).contains_key(turn_id)
    }

    /// The turn's outputs once every expected one arrived (`None` expected: once its reply did),
    /// or at once when one of them is malformed (the turn fails with it).
    fn complete(&self, turn_id: &str, expected: Option<&[String]>) -> Option<TurnOutputs> {
        let mut turns = lock(&self.turns);
        let ready = match (turns.get(turn_id), expected) {
            (None, Some(ids)) => ids.is_empty(),
            (None, None) => false,
            (Some(o), _) if o.malformed.is_some() => true,
            (Some(o), Some(ids)) => ids.iter().all(|id| o.output_ids.contains(id)),
            (Some(o), None) => o.reply.is_some(),
        };
        ready.then(|| turns.remove(turn_id).unwrap_or_default())
    }
}

/// Plays turns against a running worker ([module doc](self)).
pub struct KafkaTransport {
    producer: FutureProducer,
    store: ScyllaCheckpointStore,
    target: KafkaTarget,
    inbox: Arc<Inbox>,
    reader: tokio::task::JoinHandle<()>,
    answered: AtomicUsize,
    unanswered: AtomicUsize,
}

impl Drop for KafkaTransport {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

fn client_config(target: &KafkaTarget) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", &target.brokers);
    for (k, v) in &target.overrides {
        c.set(k, v);
    }
    c
}

/// Every partition of the outbound topics at its current end, after checking that the worker's
/// four topics exist (blocking: librdkafka's metadata calls).
fn outputs_from_now(target: &KafkaTarget) -> Result<TopicPartitionList, KafkaPlayError> {
    let consumer: BaseConsumer =
        client_config(target)
            .create()
            .map_err(|e| KafkaPlayError::Client {
                what: "metadata client",
                detail: e.to_string(),
            })?;
    let unreachable = |detail: String| KafkaPlayError::Unreachable {
        brokers: target.brokers.clone(),
        detail,
    };
    let t = &target.topics;
    let mut list = TopicPartitionList::new();
    for topic in [&t.inbound, &t.replies, &t.events, &t.dead_letters] {
        let metadata = consumer
            .fetch_metadata(Some(topic), METADATA_TIMEOUT)
            .map_err(|e| unreachable(e.to_string()))?;
        let partitions: Vec<i32> = metadata
            .topics()
            .iter()
            .filter(|m| m.name() == topic && m.error().is_none())
            .flat_map(|m| m.partitions().iter().map(|p| p.id()))
            .collect();
        if partitions.is_empty() {
            return Err(KafkaPlayError::MissingTopic {
                topic: topic.clone(),
                brokers: target.brokers.clone(),
            });
        }
        if topic == &t.inbound {
            continue;
        }
        for p in partitions {
            let (_, high) = consumer
                .fetch_watermarks(topic, p, METADATA_TIMEOUT)
                .map_err(|e| unreachable(e.to_string()))?;
            list.add_partition_offset(topic, p, Offset::Offset(high))
                .map_err(|e| unreachable(e.to_string()))?;
        }
    }
    Ok(list)
}

impl KafkaTransport {
    /// Checks the worker's topics, starts reading its outputs from their current end and
    /// readies the producer. `session_prefix` is the run's (only its turns' outputs are kept).
    pub async fn connect(
        target: KafkaTarget,
        store: ScyllaCheckpointStore,
        session_prefix: &str,
    ) -> Result<KafkaTransport, KafkaPlayError> {
        let probe = target.clone();
        let assignment = tokio::task::spawn_blocking(move || outputs_from_now(&probe))
            .await
            .map_err(|e| KafkaPlayError::Client {
                what: "metadata client",
                detail: e.to_string(),
            })??;
        let consumer: StreamConsumer = client_config(&target)
            .set("group.id", format!("turnstile-eval-{session_prefix}"))
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("isolation.level", "read_committed")
            .set("enable.partition.eof", "false")
            .create()
            .map_err(|e| KafkaPlayError::Client {
                what: "consumer",
                detail: e.to_string(),
            })?;
        consumer
            .assign(&assignment)
            .map_err(|e| KafkaPlayError::Client {
                what: "consumer",
                detail: e.to_string(),
            })?;
        let producer: FutureProducer = client_config(&target)
            .set("enable.idempotence", "true")
            .set("linger.ms", "1")
            .create()
            .map_err(|e| KafkaPlayError::Client {
                what: "producer",
                detail: e.to_string(),
            })?;
        let inbox = Arc::new(Inbox::default());
        let reader = tokio::spawn(read_outputs(
            consumer,
            target.topics.clone(),
            session_prefix.to_owned(),
            inbox.clone(),
        ));
        Ok(KafkaTransport {
            producer,
            store,
            target,
            inbox,
            reader,
            answered: AtomicUsize::new(0),
            unanswered: AtomicUsize::new(0),
        })
    }
}

/// The reader task: every output record of the run into the inbox.
async fn read_outputs(consumer: StreamConsumer, topics: Topics, prefix: String, inbox: Arc<Inbox>) {
    loop {
        match consumer.recv().await {
            Ok(m) => inbox.file(&topics, &prefix, &m),
            Err(e) => {
                *lock(&inbox.last_error) = Some(e.to_string());
                tokio::time::sleep(WAKE).await;
            }
        }
    }
}

/// The inbound record of `turn`, as a channel adapter sends it (`schemas/turn.v1.json`); its
/// `received_at` is the turn's own time, so session expiry sees the in-process run's clock.
pub fn turn_message(turn: &Turn) -> TurnMessage {
    let (text, action) = match &turn.input {
        TurnInput::Text(t) => (Some(t.clone()), None),
        TurnInput::Action(a) => (None, Some(ActionMessage { kind: *a })),
    };
    let id = &turn.identity;
    TurnMessage {
        schema: Some(TurnSchema::V1),
        turn_id: turn.turn_id.clone(),
        tenant_id: id.tenant_id.clone(),
        agent_id: id.agent_id.clone(),
        session_id: id.session_id.clone(),
        text,
        action,
        locale: Some(turn.locale),
        channel: Some(EVAL_CHANNEL.to_owned()),
        sent_at: None,
        received_at: Some(format_rfc3339_ms(turn.at_ms)),
        metadata: None,
    }
}

/// The tool executions a turn's events show ([module doc](self)).
pub fn executions(events: &[Event]) -> Vec<ExecutedTool> {
    events
        .iter()
        .filter_map(|e| {
            let tx = &e.data["transaction"];
            let ok = match e.kind {
                EventType::Completed => true,
                EventType::Failed if tx["reason"] == reason::TOOL_FAILED => false,
                _ => return None,
            };
            let tx: Transaction = serde_json::from_value(tx.clone()).ok()?;
            Some(ExecutedTool {
                idempotency_key: tx.execution_key(),
                tool: tx.tool,
                arguments: tx.arguments,
                ok,
            })
        })
        .collect()
}

fn observed(outputs: TurnOutputs) -> Result<ObservedTurn, String> {
    if let Some(why) = outputs.malformed {
        return Err(format!("the worker published {why}"));
    }
    let executed = executions(&outputs.events);
    Ok(ObservedTurn {
        handoff_route: outputs
            .reply
            .as_ref()
            .is_some_and(|r| r.handoff == Some(true)),
        reply: outputs.reply.map(|r| r.text).unwrap_or_default(),
        events: outputs.events,
        executed,
        model_calls: Vec::new(),
        decisions: Vec::new(),
    })
}

/// How waiting for a turn ended without its outputs.
enum Unanswered {
    /// No answer in time: the turn may still be processed later.
    TimedOut(String),
    /// The worker answered with a dead letter, or its checkpoint cannot be read.
    Failed(String),
}

/// The stored checkpoint: applied this turn (and the output ids its outbox lists for it)?
struct Stored {
    state: AgentState,
    applied: bool,
    expected: Option<Vec<String>>,
}

impl KafkaTransport {
    async fn stored(&self, turn: &Turn) -> Result<Stored, String> {
        let row = self
            .store
            .load_row(&turn.identity)
            .await
            .map_err(|e| format!("cannot read the stored checkpoint: {e}"))?;
        let Some(row) = row else {
            return Ok(Stored {
                state: AgentState::default(),
                applied: false,
                expected: None,
            });
        };
        let (state, _) = decode_record(&row.state, row.in_flight.as_deref())
            .map_err(|e| format!("cannot read the stored checkpoint: {e}"))?;
        let expected = outbox::decode(row.outbox.as_deref())
            .into_iter()
            .find(|e| e.turn_id == turn.turn_id)
            .map(|e| {
                e.outputs
                    .iter()
                    .filter(|o| o.topic != "dead_letters")
                    .map(|o| o.output_id.clone())
                    .collect()
            });
        Ok(Stored {
            applied: state.has_applied(&turn.turn_id),
            state,
            expected,
        })
    }

    /// Produces the turn; its inbound (partition, offset).
    async fn send(&self, turn: &Turn) -> Result<(i32, i64), String> {
        let payload = serde_json::to_vec(&turn_message(turn))
            .map_err(|e| format!("cannot encode the turn: {e}"))?;
        let key = turn.identity.key();
        let topic = &self.target.topics.inbound;
        self.producer
            .send(
                FutureRecord::to(topic).key(&key).payload(&payload),
                self.target.turn_timeout,
            )
            .await
            .map(|d| (d.partition, d.offset))
            .map_err(|(e, _)| format!("cannot produce the turn to {topic}: {e}"))
    }

    /// Waits until the worker applied the turn and its outputs arrived, or it was dead-lettered,
    /// or the deadline passed.
    async fn answer(
        &self,
        turn: &Turn,
        at: (i32, i64),
        deadline: Instant,
    ) -> Result<(ObservedTurn, AgentState), Unanswered> {
        let mut last_read: Option<Instant> = None;
        let mut store_error = None;
        loop {
            let arrived = self.inbox.arrived.notified();
            tokio::pin!(arrived);
            arrived.as_mut().enable();
            if let Some(why) = lock(&self.inbox.dead).remove(&at) {
                return Err(Unanswered::Failed(why));
            }
            let due = last_read.is_none_or(|t| t.elapsed() >= STORE_POLL);
            if due || self.inbox.has_any(&turn.turn_id) {
                last_read = Some(Instant::now());
                match self.stored(turn).await {
                    Ok(s) if s.applied => {
                        let expected = s.expected.as_deref();
                        if let Some(outputs) = self.inbox.complete(&turn.turn_id, expected) {
                            return observed(outputs)
                                .map(|o| (o, s.state))
                                .map_err(Unanswered::Failed);
                        }
                    }
                    Ok(_) => {}
                    Err(e) => store_error = Some(e),
                }
            }
            tokio::select! {
                _ = arrived => {}
                _ = tokio::time::sleep(WAKE) => {}
                _ = tokio::time::sleep_until(deadline.into()) => {
                    return Err(Unanswered::TimedOut(self.timeout_message(store_error)));
                }
            }
        }
    }

    fn timeout_message(&self, store_error: Option<String>) -> String {
        let mut message = format!(
            "no reply within {} s (is the worker running and reading {} at {}? start it: bash scripts/run.sh)",
            self.target.turn_timeout.as_secs(),
            self.target.topics.inbound,
            self.target.brokers
        );
        for (what, e) in [
            ("the last Kafka error", lock(&self.inbox.last_error).clone()),
            ("the last checkpoint read", store_error),
        ] {
            if let Some(e) = e {
                message.push_str(&format!("; {what}: {e}"));
            }
        }
        message
    }

    fn gave_up(&self) -> Option<String> {
        let unanswered = self.unanswered.load(Ordering::SeqCst);
        (self.answered.load(Ordering::SeqCst) == 0
            && unanswered >= self.target.give_up_after.max(1))
        .then(|| {
            format!(
                "not sent: the worker answered none of the {unanswered} turns sent so far within {} s \
                 (is it running? start it: bash scripts/run.sh)",
                self.target.turn_timeout.as_secs()
            )
        })
    }
}

impl TurnTransport for KafkaTransport {
    type Session = ();

    fn open_session(&self) {}

    async fn play_turn(&self, _: &(), turn: &Turn) -> TurnRun {
        if let Some(why) = self.gave_up() {
            return TurnRun::failed(why, true);
        }
        let before = self.stored(turn).await.map(|s| s.state);
        let started = Instant::now();
        let at = match self.send(turn).await {
            Ok(at) => at,
            Err(e) => return TurnRun::failed(e, true),
        };
        let answer = self
            .answer(turn, at, started + self.target.turn_timeout)
            .await;
        let latency_ms = started.elapsed().as_secs_f64() * 1000.0;
        let (after, result, abandon) = match answer {
            Ok((observed, after)) => {
                self.answered.fetch_add(1, Ordering::SeqCst);
                (Ok(after), Ok(observed), false)
            }
            Err(Unanswered::Failed(why)) => {
                self.answered.fetch_add(1, Ordering::SeqCst);
                (self.stored(turn).await.map(|s| s.state), Err(why), false)
            }
            Err(Unanswered::TimedOut(why)) => {
                self.unanswered.fetch_add(1, Ordering::SeqCst);
                (before.clone(), Err(why), true)
            }
        };
        TurnRun {
            before,
            after,
            result,
            latency_ms,
            abandon,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::locale::Locale;
    use crate::domain::turn::{ChannelAction, Identity};
    use serde_json::json;

    #[test]
    fn a_turn_goes_out_as_the_schema_says_with_its_own_time() {
        let turn = Turn {
            turn_id: "eval-1-1-u2".into(),
            identity: Identity::new("acme", "retail-bot", "eval-1-1"),
            input: TurnInput::Action(ChannelAction::Confirm),
            locale: Locale::PtBr,
            at_ms: 1_767_225_602_000,
        };
        let bytes = serde_json::to_vec(&turn_message(&turn)).expect("encode");
        let back = TurnMessage::from_json(&bytes).expect("valid against the schema");
        assert_eq!(
            back.received_at.as_deref(),
            Some("2026-01-01T00:00:02.000Z")
        );
        assert_eq!(back.action.map(|a| a.kind), Some(ChannelAction::Confirm));
        assert_eq!(back.text, None);
        assert_eq!(back.identity().key(), "acme/retail-bot/eval-1-1");
    }

    /// The reply and the events of `turn` as the worker publishes them: (topic, payload, id).
    fn published(turn: &Turn) -> Vec<(crate::message::OutputTopic, Vec<u8>, String)> {
        use crate::domain::effect::{RouteDecision, TurnOutcome};
        let outcome = TurnOutcome {
            state: AgentState::default(),
            duplicate: false,
            replies: vec![
                "One moment.".into(),
                String::new(),
                "A person will help.".into(),
            ],
            events: vec![Event {
                kind: EventType::HumanHandoffRequested,
                data: json!({"reason": "asked"}),
            }],
            route: Some(RouteDecision {
                route: "human".into(),
                intent: None,
                handoff: true,
                session_control: Some("HUMAN_HANDOFF".into()),
            }),
            executed: Vec::new(),
            fallbacks: Vec::new(),
            inconsistencies: Vec::new(),
            transitions: Vec::new(),
            settled_without_model: None,
            results: Vec::new(),
            handback: None,
        };
        crate::message::encode_outputs(turn, &outcome, 0)
            .into_iter()
            .map(|o| (o.topic(), o.payload, o.output_id))
            .collect()
    }

    #[test]
    fn outputs_are_filed_by_their_turn_once_and_complete_when_the_outbox_ones_arrived() {
        use crate::message::OutputTopic;
        let turn = |session: &str| Turn {
            turn_id: format!("{session}-u1"),
            identity: Identity::new("t1", "retail-bot", session),
            input: TurnInput::Text("a person please".into()),
            locale: Locale::En,
            at_ms: 0,
        };
        let (ours, theirs) = (turn("eval-7-1"), turn("other-1"));
        let inbox = Inbox::default();
        let outputs = published(&ours);
        let ids: Vec<String> = outputs.iter().map(|o| o.2.clone()).collect();
        let file = |(topic, payload, _): &(OutputTopic, Vec<u8>, String)| {
            inbox.file_output(*topic == OutputTopic::Replies, payload, None, "eval-7")
        };
        assert!(file(&outputs[0]), "the reply is filed");
        assert!(!file(&outputs[0]), "a republished reply is read once");
        assert!(
            inbox.complete(&ours.turn_id, Some(&ids)).is_none(),
            "the event is still missing"
        );
        assert!(published(&theirs).iter().all(|o| !file(o)), "another run's");
        assert!(file(&outputs[1]));
        let filed = inbox.complete(&ours.turn_id, Some(&ids)).expect("complete");
        let seen = observed(filed).expect("well-formed");
        assert_eq!(seen.reply, "One moment.\nA person will help.");
        assert!(seen.handoff_route);
        assert_eq!(seen.events.len(), 1);
        assert_eq!(seen.events[0].data["reason"], "asked");
        assert!(!inbox.has_any(&ours.turn_id), "taken out once complete");
        // A turn that published nothing is complete once its outbox entry says so.
        assert!(inbox.complete("eval-7-2-u1", Some(&[])).is_some());
        assert!(inbox.complete("eval-7-2-u1", None).is_none());
        // An output that does not read as its schema says fails its turn.
        assert!(inbox.file_output(true, b"{}", Some("eval-7-3-u1".into()), "eval-7"));
        let bad = inbox.complete("eval-7-3-u1", Some(&ids)).expect("filed");
        assert!(observed(bad).is_err_and(|e| e.contains("a malformed reply")));
    }

    #[test]
    fn executions_are_the_completed_and_the_tool_failed_transactions() {
        let tx = |status: &str, reason: Option<&str>| {
            json!({"transaction": {
                "id": "t1", "agent": "retail", "tool": "retail_order_cancel", "status": status,
                "arguments": {"order_id": "PED-1"}, "missing_parameters": [],
                "confirmation_required": true, "confirmation_received": true,
                "opened_at_ms": 0, "updated_at_ms": 0, "reason": reason,
            }})
        };
        let events = [
            Event {
                kind: EventType::Started,
                data: tx("COLLECTING_PARAMETERS", None),
            },
            Event {
                kind: EventType::Completed,
                data: tx("COMPLETED", None),
            },
            Event {
                kind: EventType::Failed,
                data: tx("FAILED", Some("tool_failed")),
            },
            Event {
                kind: EventType::Failed,
                data: tx("FAILED", Some("pre_validation_failed")),
            },
        ];
        let found = executions(&events);
        assert_eq!(
            found
                .iter()
                .map(|x| (x.tool.as_str(), x.ok, x.idempotency_key.as_str()))
                .collect::<Vec<_>>(),
            [
                ("retail_order_cancel", true, "t1:execute"),
                ("retail_order_cancel", false, "t1:execute")
            ]
        );
        assert_eq!(found[0].arguments["order_id"], "PED-1");
    }
}
