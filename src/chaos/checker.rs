//! The independent checker: from the inbound topic, the output topics read with
//! `read_committed`, the tool server's execution log and the CQL store, it proves that a run kept
//! every turn exactly once, and fails loudly when the run did no real work.
//!
//! What it proves (each a list of findings that must stay empty):
//! - every valid inbound turn has exactly one committed reply set (`lost` otherwise);
//! - no reply, event or dead letter is committed twice (by `output_id`), and no tool is executed
//!   twice for one turn or under an idempotency key the serial replay does not produce
//!   (`duplicates`);
//! - no output and no tool execution exists without its inbound turn (`orphans`);
//! - every record the worker must refuse is dead-lettered once, with a reason (`not_dead_lettered`);
//! - the final state of every conversation equals the state obtained by replaying its turns
//!   serially through the pure engine ([`process_turn`] with an in-memory store) with the same
//!   recorded decisions: the model scripts the model server served for each turn and the tool
//!   results it recorded (`state_mismatches`, `tool_mismatches`).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use serde_json::Value;

use crate::domain::catalog::{Catalog, Settings};
use crate::domain::decision::{PreValidationResult, ToolResult};
use crate::domain::effect::{ToolRequest, TurnOutcome};
use crate::domain::engine::Engine;
use crate::domain::state::AgentState;
use crate::domain::turn::Turn;
use crate::message::{decode_turn, encode_outputs, DecodeLimits, InboundRecord, OutputKind};
use crate::model::scripted::{ModelScript, ScriptedModel};
use crate::pipeline::process_turn;
use crate::ports::{CallContext, ToolGateway};
use crate::store::memory::InMemoryCheckpointStore;
use crate::testkit::bus::ReadMessage;
use crate::testkit::tool_server::Execution;
use crate::tool::scripted::ScriptedTools;

/// One record of the inbound topic, as produced.
#[derive(Debug, Clone)]
pub struct InboundCopy {
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Option<Vec<u8>>,
    pub timestamp_ms: Option<i64>,
}

/// Everything the checker reads; gathered by the harness after the workers stopped.
pub struct Evidence<'a> {
    pub inbound_topic: &'a str,
    pub replies_topic: &'a str,
    pub events_topic: &'a str,
    pub dead_letters_topic: &'a str,
    pub inbound: &'a [InboundCopy],
    /// Every message of the reply, event and dead-letter topics (`read_committed`).
    pub outputs: &'a [ReadMessage],
    /// The tool server's log: one entry per decided idempotency key.
    pub executions: &'a [Execution],
    /// The stored state of each conversation (by identity key), `None` when no row exists.
    pub states: &'a HashMap<String, Option<AgentState>>,
    /// The recorded model decisions, per turn id (absent: every model call failed).
    pub model_scripts: &'a HashMap<String, ModelScript>,
    pub limits: DecodeLimits,
    pub catalog: &'a Catalog,
    pub settings: &'a Settings,
}

/// The checker's verdict. Every `Vec` is a list of findings, each one line for people.
#[derive(Debug, Default, Clone)]
pub struct CheckReport {
    pub inbound_records: usize,
    pub valid_turns: usize,
    pub refused_records: usize,
    pub conversations: usize,
    pub replies: usize,
    pub events: usize,
    pub dead_letters: usize,
    pub tool_executions: usize,
    /// Dead letters by reason.
    pub dead_letter_reasons: BTreeMap<String, usize>,
    pub lost: Vec<String>,
    pub duplicates: Vec<String>,
    pub orphans: Vec<String>,
    pub not_dead_lettered: Vec<String>,
    pub state_mismatches: Vec<String>,
    pub tool_mismatches: Vec<String>,
    /// A turn's committed replies and events differ from the serial replay's (ids or reply text).
    pub output_mismatches: Vec<String>,
    /// Valid turns the worker dead-lettered (e.g. the store refused a write for too long).
    pub valid_dead_lettered: Vec<String>,
}

impl CheckReport {
    /// Every finding list, with its name.
    pub fn findings(&self) -> Vec<(&'static str, &Vec<String>)> {
        vec![
            ("lost turns", &self.lost),
            ("duplicates", &self.duplicates),
            ("outputs without their turn", &self.orphans),
            ("hostile records not dead-lettered", &self.not_dead_lettered),
            ("state mismatches", &self.state_mismatches),
            ("tool execution mismatches", &self.tool_mismatches),
            ("reply set mismatches", &self.output_mismatches),
            ("valid turns dead-lettered", &self.valid_dead_lettered),
        ]
    }

    /// No finding, and the run did real work: at least `min_replies` replies and, when
    /// `min_executions` > 0, at least that many tool executions.
    pub fn passed(&self, min_replies: usize, min_executions: usize) -> bool {
        self.findings().iter().all(|(_, f)| f.is_empty())
            && self.real_work(min_replies, min_executions).is_none()
    }

    /// Why the run did no real work, if it did not.
    pub fn real_work(&self, min_replies: usize, min_executions: usize) -> Option<String> {
        if self.valid_turns == 0 {
            return Some("no valid inbound turn was produced".into());
        }
        if self.replies < min_replies {
            return Some(format!(
                "only {} replies committed, fewer than the {min_replies} a working run produces",
                self.replies
            ));
        }
        if self.tool_executions < min_executions {
            return Some(format!(
                "only {} tool executions, fewer than the {min_executions} a working run produces",
                self.tool_executions
            ));
        }
        None
    }

    /// The findings, at most `limit` lines of each.
    pub fn render_findings(&self, limit: usize) -> String {
        let mut out = String::new();
        for (name, list) in self.findings() {
            if list.is_empty() {
                continue;
            }
            out.push_str(&format!("  {name}: {}\n", list.len()));
            for line in list.iter().take(limit) {
                out.push_str(&format!("    - {line}\n"));
            }
        }
        out
    }
}

/// A `ToolGateway` answering like [`ScriptedTools`] and recording every execution's key.
struct RecordingTools {
    inner: ScriptedTools,
    executed: std::sync::Mutex<Vec<(String, String)>>,
}

impl ToolGateway for RecordingTools {
    async fn pre_validate(
        &self,
        request: &ToolRequest,
        ctx: CallContext<'_>,
    ) -> PreValidationResult {
        self.inner.pre_validate(request, ctx).await
    }

    async fn execute(&self, request: &ToolRequest, ctx: CallContext<'_>) -> ToolResult {
        if let Ok(mut e) = self.executed.lock() {
            e.push((request.tool.clone(), request.idempotency_key.clone()));
        }
        self.inner.execute(request, ctx).await
    }
}

/// A valid inbound turn and where it is: (partition, offset, turn).
type PlacedTurn = (i32, i64, Turn);

/// (output id, reply text) of a committed reply or event.
type OutputCopy = (String, Option<String>);

/// What the output topics hold, per inbound record.
#[derive(Default)]
struct Outputs<'a> {
    /// Turn id → committed replies.
    replies_of: HashMap<&'a str, usize>,
    /// Turn id → each committed reply and event.
    outputs_of: HashMap<&'a str, Vec<OutputCopy>>,
    /// (partition, offset) of an inbound record → its dead letters.
    dead_letters_at: HashMap<(i32, i64), usize>,
}

/// Runs every check. Never panics on hostile evidence.
pub async fn check(ev: &Evidence<'_>) -> CheckReport {
    let mut r = CheckReport {
        inbound_records: ev.inbound.len(),
        ..CheckReport::default()
    };
    // 1. Decode the inbound topic exactly as the worker does.
    let (turns, refused) = decode_inbound(ev);
    r.valid_turns = turns.len();
    r.refused_records = refused.len();
    let turn_ids: BTreeSet<&str> = turns.iter().map(|(_, _, t)| t.turn_id.as_str()).collect();
    // 2. Outputs: duplicates by output id, orphans, reply sets per turn.
    let outputs = read_outputs(ev, &turn_ids, &mut r);
    let dead_lettered_valid = check_answers(&turns, &refused, &outputs, &mut r);
    // 3. Tool executions.
    let actual_keys = check_executions(ev, &turn_ids, &mut r);
    // 4. Serial replay per conversation.
    let replay_keys = replay(ev, &turns, &dead_lettered_valid, &outputs, &mut r).await;
    for k in actual_keys.iter().filter(|k| !replay_keys.contains(**k)) {
        r.tool_mismatches.push(format!(
            "key {k} executed, but the serial replay never executes it"
        ));
    }
    for k in replay_keys
        .iter()
        .filter(|k| !actual_keys.contains(k.as_str()))
    {
        r.tool_mismatches.push(format!(
            "key {k} executed by the serial replay, but never by the run"
        ));
    }
    r
}

/// The inbound topic decoded exactly as the worker does: the valid turns, and where the records
/// it refuses are.
fn decode_inbound(ev: &Evidence<'_>) -> (Vec<PlacedTurn>, BTreeSet<(i32, i64)>) {
    let mut turns: Vec<PlacedTurn> = Vec::new();
    let mut refused: BTreeSet<(i32, i64)> = BTreeSet::new();
    for rec in ev.inbound {
        let inbound = InboundRecord {
            topic: ev.inbound_topic,
            partition: rec.partition,
            offset: rec.offset,
            key: rec.key.as_deref(),
            payload: rec.payload.as_deref(),
            timestamp_ms: rec.timestamp_ms,
        };
        match decode_turn(&inbound, &ev.limits, ev.catalog) {
            Ok(t) => turns.push((rec.partition, rec.offset, t)),
            Err(_) => {
                refused.insert((rec.partition, rec.offset));
            }
        }
    }
    (turns, refused)
}

/// Sorts the committed outputs by inbound record; finds outputs committed twice (by output id)
/// and outputs of no valid inbound turn.
fn read_outputs<'a>(
    ev: &'a Evidence<'_>,
    turn_ids: &BTreeSet<&str>,
    r: &mut CheckReport,
) -> Outputs<'a> {
    let mut out = Outputs::default();
    // Output id → where each copy is (topic partition@offset), for the duplicate findings.
    let mut by_output_id: HashMap<&str, Vec<String>> = HashMap::new();
    for m in ev.outputs {
        match &m.output_id {
            Some(id) => by_output_id.entry(id.as_str()).or_default().push(format!(
                "{} {}@{} turn {}",
                m.topic.rsplit('.').next().unwrap_or(""),
                m.partition,
                m.offset,
                m.turn_id.as_deref().unwrap_or("-")
            )),
            None => r.orphans.push(format!(
                "{} {}@{} has no output_id header",
                m.topic, m.partition, m.offset
            )),
        }
        if m.topic == ev.dead_letters_topic {
            read_dead_letter(m, &mut out, r);
            continue;
        }
        let turn_id = m
            .turn_id
            .as_deref()
            .or_else(|| m.payload.get("turn_id").and_then(Value::as_str))
            .or_else(|| m.payload.get("turnid").and_then(Value::as_str));
        match turn_id {
            Some(t) if turn_ids.contains(t) => {
                let text = m
                    .payload
                    .get("text")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                out.outputs_of
                    .entry(t)
                    .or_default()
                    .push((m.output_id.clone().unwrap_or_default(), text));
                if m.topic == ev.replies_topic {
                    r.replies += 1;
                    *out.replies_of.entry(t).or_default() += 1;
                } else {
                    r.events += 1;
                }
            }
            Some(t) => r.orphans.push(format!(
                "{} {}@{}: turn {t} is not a valid inbound turn",
                m.topic, m.partition, m.offset
            )),
            None => r.orphans.push(format!(
                "{} {}@{} names no turn",
                m.topic, m.partition, m.offset
            )),
        }
    }
    let mut repeated: Vec<(&str, &Vec<String>)> = by_output_id
        .iter()
        .filter(|(_, at)| at.len() > 1)
        .map(|(id, at)| (*id, at))
        .collect();
    repeated.sort();
    for (id, at) in repeated {
        r.duplicates.push(format!(
            "output_id {id} committed {} times: {}",
            at.len(),
            at.join(", ")
        ));
    }
    out
}

/// Counts one dead letter against the inbound record it names (an orphan when it names none, or
/// gives no reason).
fn read_dead_letter(m: &ReadMessage, out: &mut Outputs<'_>, r: &mut CheckReport) {
    r.dead_letters += 1;
    let original = m.payload.get("original");
    let field = |k: &str| original.and_then(|o| o.get(k)).and_then(Value::as_i64);
    let reason = m
        .payload
        .get("reason")
        .and_then(Value::as_str)
        .unwrap_or("");
    *r.dead_letter_reasons.entry(reason.to_owned()).or_default() += 1;
    match (field("partition"), field("offset")) {
        (Some(p), Some(o)) if !reason.is_empty() => {
            let p = i32::try_from(p).unwrap_or(-1);
            *out.dead_letters_at.entry((p, o)).or_default() += 1;
        }
        _ => r.orphans.push(format!(
            "dead letter {}@{} names no original record or no reason",
            m.partition, m.offset
        )),
    }
}

/// Every valid turn answered (a reply, not a dead letter), every refused record dead-lettered
/// once, no dead letter of another record. Returns where the dead-lettered valid turns are.
fn check_answers(
    turns: &[PlacedTurn],
    refused: &BTreeSet<(i32, i64)>,
    outputs: &Outputs<'_>,
    r: &mut CheckReport,
) -> BTreeSet<(i32, i64)> {
    // Each turn's replies must come from one reply set: distinct output ids, so a second set of
    // the same turn would show up as repeated output ids (checked above). A turn with none is lost.
    let mut dead_lettered_valid: BTreeSet<(i32, i64)> = BTreeSet::new();
    for (p, o, t) in turns {
        if outputs.dead_letters_at.contains_key(&(*p, *o)) {
            dead_lettered_valid.insert((*p, *o));
            r.valid_dead_lettered
                .push(format!("turn {} ({p}@{o}) was dead-lettered", t.turn_id));
        } else if !outputs.replies_of.contains_key(t.turn_id.as_str()) {
            r.lost.push(format!(
                "turn {} ({p}@{o}) has no committed reply",
                t.turn_id
            ));
        }
    }
    for at in refused {
        match outputs.dead_letters_at.get(at) {
            None => r.not_dead_lettered.push(format!(
                "refused record {}@{} has no dead letter",
                at.0, at.1
            )),
            Some(n) if *n > 1 => r
                .duplicates
                .push(format!("record {}@{} dead-lettered {n} times", at.0, at.1)),
            Some(_) => {}
        }
    }
    for (at, _) in outputs.dead_letters_at.iter() {
        if !refused.contains(at) && !dead_lettered_valid.contains(at) {
            r.orphans.push(format!(
                "dead letter of {}@{}, which is no inbound record",
                at.0, at.1
            ));
        }
    }
    dead_lettered_valid
}

/// Tool executions: none without its turn, at most one per turn (the traffic executes at most
/// one tool per turn). Returns the idempotency keys of the successful executions.
fn check_executions<'a>(
    ev: &'a Evidence<'_>,
    turn_ids: &BTreeSet<&str>,
    r: &mut CheckReport,
) -> BTreeSet<&'a str> {
    let mut executions_of: HashMap<&str, Vec<&Execution>> = HashMap::new();
    let actual_keys: BTreeSet<&str> = ev
        .executions
        .iter()
        .filter(|e| (200..300).contains(&e.status))
        .map(|e| e.idempotency_key.as_str())
        .collect();
    for e in ev.executions {
        if (200..300).contains(&e.status) {
            r.tool_executions += 1;
        }
        match e.turn_id.as_deref() {
            Some(t) if turn_ids.contains(t) => executions_of.entry(t).or_default().push(e),
            other => r.orphans.push(format!(
                "tool execution {} ({}) of turn {:?}, which is no valid inbound turn",
                e.idempotency_key, e.tool, other
            )),
        }
    }
    for (t, list) in &executions_of {
        if list.len() > 1 {
            let keys: Vec<&str> = list.iter().map(|e| e.idempotency_key.as_str()).collect();
            r.duplicates.push(format!(
                "turn {t} executed tools {} times (keys {keys:?})",
                list.len()
            ));
        }
    }
    actual_keys
}

/// Replays every conversation serially, in inbound order (one key = one partition = offsets),
/// and compares its outputs and final state with the run's. Returns the idempotency keys the
/// replay executes.
async fn replay(
    ev: &Evidence<'_>,
    turns: &[PlacedTurn],
    dead_lettered_valid: &BTreeSet<(i32, i64)>,
    outputs: &Outputs<'_>,
    r: &mut CheckReport,
) -> BTreeSet<String> {
    let mut conversations: BTreeMap<String, Vec<&Turn>> = BTreeMap::new();
    let mut ordered: Vec<&PlacedTurn> = turns.iter().collect();
    ordered.sort_by_key(|(p, o, _)| (*p, *o));
    for (_, _, t) in ordered {
        conversations.entry(t.identity.key()).or_default().push(t);
    }
    r.conversations = conversations.len();
    let engine = Engine::new(ev.catalog, ev.settings);
    let mut replay_keys: BTreeSet<String> = BTreeSet::new();
    let dead_lettered_turns: BTreeSet<&str> = turns
        .iter()
        .filter(|(p, o, _)| dead_lettered_valid.contains(&(*p, *o)))
        .map(|(_, _, t)| t.turn_id.as_str())
        .collect();
    for (key, list) in &conversations {
        let store = InMemoryCheckpointStore::new();
        let mut failed = None;
        for turn in list {
            // The tool results the tool server recorded for this turn (its default otherwise).
            let tools = RecordingTools {
                inner: ScriptedTools::default(),
                executed: std::sync::Mutex::new(Vec::new()),
            };
            let model = ScriptedModel::new(
                ev.model_scripts
                    .get(&turn.turn_id)
                    .cloned()
                    .unwrap_or_default(),
            );
            let processed = match process_turn(&engine, &store, &model, &tools, turn).await {
                Ok(p) => p,
                Err(e) => {
                    failed = Some(format!("replay of turn {} failed: {e}", turn.turn_id));
                    break;
                }
            };
            if !dead_lettered_turns.contains(turn.turn_id.as_str()) {
                compare_outputs(turn, &processed.outcome, outputs, r);
            }
            let executed = tools.executed.into_inner().unwrap_or_default();
            replay_keys.extend(executed.into_iter().map(|(_, k)| k));
        }
        if let Some(f) = failed {
            r.state_mismatches.push(format!("{key}: {f}"));
            continue;
        }
        compare_state(ev, key, list, &store, r).await;
    }
    replay_keys
}

/// Exactly one reply set: the committed replies and events of this turn are the replay's, id
/// for id, and the reply text is the replay's.
fn compare_outputs(turn: &Turn, outcome: &TurnOutcome, outputs: &Outputs<'_>, r: &mut CheckReport) {
    let mut expected: Vec<OutputCopy> = encode_outputs(turn, outcome, 0)
        .iter()
        .map(|o| {
            let v: Value = serde_json::from_slice(&o.payload).unwrap_or_default();
            let text = (o.kind == OutputKind::Reply)
                .then(|| v.get("text").and_then(Value::as_str).map(str::to_owned))
                .flatten();
            (o.output_id.clone(), text)
        })
        .collect();
    let mut actual = outputs
        .outputs_of
        .get(turn.turn_id.as_str())
        .cloned()
        .unwrap_or_default();
    actual.sort();
    actual.dedup();
    expected.sort();
    if actual != expected {
        r.output_mismatches.push(format!(
            "turn {}: committed {:?}, the serial replay gives {:?}",
            turn.turn_id, actual, expected
        ));
    }
}

/// The conversation's stored state equals the replay's final state.
async fn compare_state(
    ev: &Evidence<'_>,
    key: &str,
    list: &[&Turn],
    store: &InMemoryCheckpointStore,
    r: &mut CheckReport,
) {
    let Some(first) = list.first() else { return };
    let expected = crate::pipeline::load_state(store, first)
        .await
        .map(|(s, _)| s)
        .unwrap_or_default();
    match ev.states.get(key) {
        None | Some(None) => r.state_mismatches.push(format!(
            "{key}: no stored state, {} turns replayed",
            list.len()
        )),
        Some(Some(actual)) => {
            let (a, b) = (comparable(actual), comparable(&expected));
            if a != b {
                r.state_mismatches
                    .push(format!("{key}: {}", first_difference(&a, &b, "")));
            }
        }
    }
}

/// The transaction-relevant projection of a state: everything but evidence records and their
/// timings (wall-clock facts of one attempt, not decisions).
pub fn comparable(state: &AgentState) -> Value {
    let mut v = serde_json::to_value(state).unwrap_or(Value::Null);
    strip(&mut v);
    v
}

fn strip(v: &mut Value) {
    strip_in(v, false);
}

/// Drops evidence and attempt timings; inside pre-validation records also their wall-clock
/// `at_ms` (when the call happened, not what it decided).
fn strip_in(v: &mut Value, in_record: bool) {
    match v {
        Value::Object(map) => {
            map.retain(|k, _| {
                !(k.contains("evidence")
                    || k.ends_with("duration_ms")
                    || k.ends_with("latency_ms")
                    || k == "attempts"
                    || (in_record && k == "at_ms"))
            });
            for (k, x) in map.iter_mut() {
                strip_in(x, in_record || k.contains("pre_validation"));
            }
        }
        Value::Array(list) => list.iter_mut().for_each(|x| strip_in(x, in_record)),
        _ => {}
    }
}

/// The path and both values of the first difference, for a one-line finding.
fn first_difference(actual: &Value, expected: &Value, path: &str) -> String {
    match (actual, expected) {
        (Value::Object(a), Value::Object(b)) => {
            let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
            for k in keys {
                let (x, y) = (
                    a.get(k).unwrap_or(&Value::Null),
                    b.get(k).unwrap_or(&Value::Null),
                );
                if x != y {
                    return first_difference(x, y, &format!("{path}.{k}"));
                }
            }
        }
        (Value::Array(a), Value::Array(b)) if a.len() == b.len() => {
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                if x != y {
                    return first_difference(x, y, &format!("{path}[{i}]"));
                }
            }
        }
        _ => {}
    }
    let clip = |v: &Value| {
        let s = v.to_string();
        if s.chars().count() > 300 {
            format!("{}…", s.chars().take(300).collect::<String>())
        } else {
            s
        }
    };
    format!(
        "{} stored {} but the serial replay gives {}",
        if path.is_empty() { "state" } else { path },
        clip(actual),
        clip(expected)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn first_difference_names_the_path() {
        let a = json!({"x": {"y": [1, 2]}});
        let b = json!({"x": {"y": [1, 3]}});
        assert!(first_difference(&a, &b, "").starts_with(".x.y[1] stored 2"));
    }

    fn read(topic: &str, offset: i64, output_id: &str, turn_id: &str) -> ReadMessage {
        ReadMessage {
            topic: topic.into(),
            partition: 0,
            offset,
            key: String::new(),
            payload: json!({"turn_id": turn_id}),
            output_id: Some(output_id.into()),
            turn_id: Some(turn_id.into()),
            timestamp_ms: None,
        }
    }

    fn inbound(offset: i64, turn_id: &str) -> InboundCopy {
        InboundCopy {
            partition: 0,
            offset,
            key: Some(b"acme/retail-bot/s1".to_vec()),
            payload: Some(crate::testkit::bus::turn_json(
                "acme",
                "retail-bot",
                "s1",
                turn_id,
                Some("hello"),
                None,
                "en",
                Some("2026-01-01T00:00:00.000Z"),
            )),
            timestamp_ms: None,
        }
    }

    /// The checker is not vacuous: a doubled reply, a lost turn, an orphan output, a refused
    /// record without its dead letter and a missing state are each found.
    #[test]
    fn the_checker_finds_loss_duplication_and_orphans() {
        let catalog =
            crate::config::agents::load_catalog(std::path::Path::new("config/agents.example.yaml"))
                .expect("example config");
        let settings = Settings::default();
        let records = vec![
            inbound(0, "a"),
            inbound(1, "b"),
            InboundCopy {
                partition: 0,
                offset: 2,
                key: None,
                payload: Some(b"{not json".to_vec()),
                timestamp_ms: None,
            },
        ];
        let outputs = vec![
            read("r", 0, "o1", "a"),
            read("r", 1, "o1", "a"),
            read("r", 2, "o2", "zzz"),
        ];
        let states = HashMap::new();
        let scripts = HashMap::new();
        let ev = Evidence {
            inbound_topic: "in",
            replies_topic: "r",
            events_topic: "e",
            dead_letters_topic: "d",
            inbound: &records,
            outputs: &outputs,
            executions: &[],
            states: &states,
            model_scripts: &scripts,
            limits: DecodeLimits::default(),
            catalog: &catalog,
            settings: &settings,
        };
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("runtime");
        let r = rt.block_on(check(&ev));
        assert_eq!(r.valid_turns, 2);
        assert_eq!(r.duplicates.len(), 1, "{r:?}");
        assert_eq!(r.lost.len(), 1, "{r:?}");
        assert!(r.lost[0].contains("turn b"), "{r:?}");
        assert_eq!(r.orphans.len(), 1, "{r:?}");
        assert_eq!(r.not_dead_lettered.len(), 1, "{r:?}");
        assert_eq!(r.state_mismatches.len(), 1, "{r:?}");
        assert!(!r.passed(0, 0));
    }

    #[test]
    fn a_run_without_work_fails() {
        let r = CheckReport::default();
        assert!(!r.passed(1, 0));
        let r = CheckReport {
            valid_turns: 10,
            replies: 10,
            tool_executions: 0,
            ..CheckReport::default()
        };
        assert!(r.passed(10, 0));
        assert!(!r.passed(10, 1));
    }
}
