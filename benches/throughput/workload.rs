//! The workload: each conversation's script, what I/O each scripted turn costs (the raw phase's
//! plan), and the load generator that plays the scripts like people do.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rdkafka::producer::{FutureProducer, FutureRecord};
use serde_json::{json, Map};

use turnstile::domain::decision::Skill;
use turnstile::model::scripted::Scripted;
use turnstile::model::ModelScript;
use turnstile::testkit::model_server::ModelServer;

use crate::args::Args;
use crate::reader::Reader;

pub const TENANT: &str = "bench";
pub const AGENT: &str = "retail-bot";
/// The tool every script collects, confirms and executes.
pub const TOOL: &str = "retail_order_cancel";

/// Kafka helpers: the project's `testkit::bus`, plus the bench's turn shape.
pub mod bus {
    pub use turnstile::testkit::bus::{brokers, create_topics, unique_suffix, unique_topics};

    /// The inbound JSON of a text turn of the bench's tenant and assistant.
    pub fn turn_json(session: &str, turn_id: &str, text: &str) -> Vec<u8> {
        turnstile::testkit::bus::turn_json(
            super::TENANT,
            super::AGENT,
            session,
            turn_id,
            Some(text),
            None,
            "en",
            None,
        )
    }
}

/// One turn of a conversation's script.
pub struct ScriptTurn {
    pub text: String,
    /// A typed parser or the recogniser settles it (its turn id ends in `-typed`).
    pub typed: bool,
    /// The per-turn model script (the interrupt), if any.
    pub script: Option<ModelScript>,
    /// Which step of which script (the rows of the per-turn I/O table).
    pub kind: &'static str,
}

/// Turn `t` of conversation `c`.
pub fn script_turn(args: &Args, c: usize, t: usize) -> ScriptTurn {
    let s = script_text(args, c, t);
    let text = if s.decided && args.distinct_texts {
        format!("{} [{}]", s.text, tag(c * args.turns + t))
    } else {
        s.text.to_owned()
    };
    ScriptTurn {
        text,
        typed: s.typed,
        script: s.script,
        kind: s.kind,
    }
}

/// A short tag unique to `n`, of consonants only so that it spells no word that would sway a
/// decision; four letters (160,000 tags) before a fifth.
pub fn tag(mut n: usize) -> String {
    const LETTERS: &[u8] = b"bcdfghjklmnpqrstvwxz";
    let mut out = Vec::new();
    while out.len() < 4 || n > 0 {
        out.push(LETTERS[n % LETTERS.len()]);
        n /= LETTERS.len();
    }
    String::from_utf8(out).unwrap_or_default()
}

struct ScriptText {
    text: &'static str,
    /// A typed parser should settle it.
    typed: bool,
    /// The scripted load has a model decide it (`--distinct-texts` tags those).
    decided: bool,
    /// The per-turn model script (the interrupt), if any.
    script: Option<ModelScript>,
    kind: &'static str,
}

fn interrupting(args: &Args, c: usize) -> bool {
    args.interrupt_every > 0 && c % args.interrupt_every == args.interrupt_every - 1
}

/// The text of turn `t` of conversation `c`.
fn script_text(args: &Args, c: usize, t: usize) -> ScriptText {
    let s = |text, typed, decided, kind| ScriptText {
        text,
        typed,
        decided,
        script: None,
        kind,
    };
    if interrupting(args, c) {
        match t % 4 {
            0 => s("cancel my order", false, true, "interrupted: collect"),
            1 => {
                let mut router = Map::new();
                router.insert("agent".into(), json!("retail"));
                router.insert("intent".into(), json!("retail_order_tracking"));
                router.insert("confidence".into(), json!(0.95));
                router.insert("arguments".into(), json!({"order_id": "PED-1002"}));
                let script = ModelScript {
                    router: Some(Scripted::Answer(router)),
                    ..ModelScript::default()
                };
                ScriptText {
                    script: Some(script),
                    ..s(
                        "where is my order PED-1002?",
                        false,
                        true,
                        "interrupted: interrupt",
                    )
                }
            }
            2 => s("PED-1001", true, false, "interrupted: fill"),
            _ => s("yes", false, false, "interrupted: confirm"),
        }
    } else {
        match t % 3 {
            0 => s("cancel my order", false, true, "collect"),
            1 => s("PED-1001", true, false, "typed fill"),
            _ => s("yes", true, false, "confirm + execute"),
        }
    }
}

/// One piece of I/O a turn makes, in the order the worker makes them (one after the other: the
/// engine asks for one request at a time; `ROUTER_SPECULATIVE` is off in the bench's config).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// A chat completion for this skill (with `--decision-model embeddings`: the turn's one
    /// embeddings call instead, unless the text was embedded before).
    Model(Skill),
    /// `POST /tools/{TOOL}/pre-validate`.
    PreValidate,
    /// The LC-4 write-ahead (`CheckpointStore::save_write_ahead`) before an execution.
    WriteAhead,
    /// `POST /tools/{TOOL}` with an idempotency key.
    Execute,
}

/// What the worker's turn `t` of conversation `c` costs besides its checkpoint load and
/// end-of-turn save and its reply: the steps in order, and the events it publishes with the
/// reply. Read off the worker phase's own counters (the per-turn I/O table of a run shows both,
/// and the run fails when they part).
pub struct Plan {
    pub steps: &'static [Step],
    pub events: u32,
    /// The tool's arguments once collected.
    pub order_id: &'static str,
}

pub fn plan(args: &Args, c: usize, t: usize) -> Plan {
    use Skill::{Classifier, Router};
    use Step::{Execute, Model, PreValidate, WriteAhead};
    // Measured (the worker phase's row of the I/O table): the typed fill pre-validates, the
    // confirmation executes without pre-validating again; in an interrupting conversation the
    // interrupt's order number fills the pending cancellation (so it pre-validates), and the
    // order number that follows corrects it at the confirmation (MG-6: typed, no model call,
    // pre-validated again).
    let (steps, events): (&'static [Step], u32) = if interrupting(args, c) {
        match t % 4 {
            0 => (&[Model(Classifier), Model(Router)], 1),
            1 => (&[PreValidate], 0),
            2 => (&[PreValidate], 0),
            _ => (&[WriteAhead, Execute], 1),
        }
    } else {
        match t % 3 {
            0 => (&[Model(Classifier), Model(Router)], 1),
            1 => (&[PreValidate], 0),
            _ => (&[WriteAhead, Execute], 1),
        }
    };
    Plan {
        steps,
        events,
        order_id: "PED-1001",
    }
}

pub fn turn_id(session: &str, t: usize, typed: bool) -> String {
    if typed {
        format!("{session}-{t}-typed")
    } else {
        format!("{session}-{t}")
    }
}

/// `(c, t)` of a turn id made by [`drive`] (`{phase}-{suffix}-c{c}-{t}[-typed]`).
pub fn parse_turn_id(turn_id: &str) -> Option<(usize, usize)> {
    let id = turn_id.strip_suffix("-typed").unwrap_or(turn_id);
    let (session, t) = id.rsplit_once('-')?;
    let (_, c) = session.rsplit_once("-c")?;
    Some((c.parse().ok()?, t.parse().ok()?))
}

/// The script kind of a turn id made by [`drive`].
pub fn kind_of(args: &Args, turn_id: &str) -> Option<&'static str> {
    let (c, t) = parse_turn_id(turn_id)?;
    Some(script_text(args, c, t).kind)
}

#[derive(Default)]
pub struct Load {
    pub sent: u64,
    pub latencies_us: Vec<u64>,
    pub typed_answered: u64,
    /// Turns answered, by script kind.
    pub answered_by_kind: BTreeMap<&'static str, u64>,
    pub timeouts: u64,
    pub first_send: Option<Instant>,
    pub last_reply: Option<Instant>,
}

impl Load {
    fn merge(&mut self, other: Load) {
        self.sent += other.sent;
        self.latencies_us.extend(other.latencies_us);
        self.typed_answered += other.typed_answered;
        for (k, n) in other.answered_by_kind {
            *self.answered_by_kind.entry(k).or_default() += n;
        }
        self.timeouts += other.timeouts;
        self.first_send = match (self.first_send, other.first_send) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        self.last_reply = self.last_reply.max(other.last_reply);
    }
}

/// Drives every conversation to its last turn or to `deadline`; typed turns end in `-typed`.
pub async fn drive(
    args: &Args,
    phase: &str,
    topic: &str,
    producer: &FutureProducer,
    reader: &Arc<Reader>,
    model: &ModelServer,
) -> Load {
    let suffix = bus::unique_suffix();
    let deadline = Instant::now() + Duration::from_secs(args.phase_secs);
    let reply_timeout = Duration::from_secs(args.reply_timeout_secs);
    let mut tasks = Vec::new();
    let args = Arc::new(args.clone());
    for c in 0..args.conversations {
        let (args, producer, topic, reader) = (
            args.clone(),
            producer.clone(),
            topic.to_owned(),
            reader.clone(),
        );
        let session = format!("{phase}-{suffix}-c{c}");
        let key = format!("{TENANT}/{AGENT}/{session}");
        let model_scripts: Vec<(String, ModelScript)> = (0..args.turns)
            .filter_map(|t| {
                let turn = script_turn(&args, c, t);
                turn.script.map(|s| (turn_id(&session, t, turn.typed), s))
            })
            .collect();
        for (id, s) in &model_scripts {
            model.set_turn_script(id, s);
        }
        tasks.push(tokio::spawn(async move {
            let mut load = Load::default();
            for t in 0..args.turns {
                if Instant::now() >= deadline {
                    break;
                }
                let turn = script_turn(&args, c, t);
                let id = turn_id(&session, t, turn.typed);
                let payload = bus::turn_json(&session, &id, &turn.text);
                let rx = reader.expect(&id);
                let sent = Instant::now();
                load.first_send.get_or_insert(sent);
                load.sent += 1;
                let produced = producer
                    .send(
                        FutureRecord::to(&topic).key(&key).payload(&payload),
                        Duration::from_secs(30),
                    )
                    .await;
                if produced.is_err() {
                    reader.forget(&id);
                    load.timeouts += 1;
                    break;
                }
                let until = (sent + reply_timeout).min(deadline + Duration::from_secs(5));
                match tokio::time::timeout_at(until.into(), rx).await {
                    Ok(Ok(at)) => {
                        load.latencies_us
                            .push(at.saturating_duration_since(sent).as_micros() as u64);
                        load.last_reply = load.last_reply.max(Some(at));
                        load.typed_answered += u64::from(turn.typed);
                        *load.answered_by_kind.entry(turn.kind).or_default() += 1;
                    }
                    _ => {
                        reader.forget(&id);
                        load.timeouts += 1;
                        break;
                    }
                }
            }
            load
        }));
    }
    let mut total = Load::default();
    for t in tasks {
        if let Ok(l) = t.await {
            total.merge(l);
        }
    }
    total
}
