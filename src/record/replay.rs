//! Re-running a conversation's decision records through the engine (`turnstile replay`).
//!
//! **Exact** ([`replay_exact`]): each turn is fed its recorded answers from the state the
//! previous turn replayed to, with no model and no tool; the outputs and the state after must
//! digest as recorded. **Re-decide** ([`redecide`]): each turn runs with another configuration;
//! model questions go to the model given (live calls allowed), tool questions are answered from
//! the record (never called), and a tool question the record has no answer for makes the
//! conversation diverge at that turn (nothing after it can be judged).

use std::collections::VecDeque;
use std::fmt::Write as _;

use super::{empty_state_digest, settings_of, DecisionRecord, RecordedOutputs};
use crate::domain::effect::{Answer, Request, TurnOutcome};
use crate::domain::engine::{Engine, Step};
use crate::domain::state::{self, AgentState};
use crate::ports::{CallContext, DecisionModel};

/// What replaying one turn showed.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The same outputs and state as recorded.
    Same,
    /// Different outputs or state: what differs, in words.
    Changed(Vec<String>),
    /// The turn could not be decided from the record (a tool answer never recorded, an answer
    /// of the wrong kind): the conversation stops being judged here.
    Diverged(String),
    /// Not replayed: no base state to start from, or the record kept no answers.
    Skipped(String),
}

/// One turn of a replay.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnReport {
    /// 1-based position among the conversation's kept records.
    pub index: usize,
    pub turn_id: String,
    pub verdict: Verdict,
    pub recorded: RecordedOutputs,
    /// What the replay produced, when it ran to the end of the turn.
    pub replayed: Option<RecordedOutputs>,
    /// Model calls made (re-decide with a changed configuration only).
    pub model_calls: usize,
}

/// A whole conversation's replay.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ConversationReport {
    pub turns: Vec<TurnReport>,
}

impl ConversationReport {
    /// Turns whose outcome changed or that diverged.
    pub fn differences(&self) -> usize {
        self.turns
            .iter()
            .filter(|t| matches!(t.verdict, Verdict::Changed(_) | Verdict::Diverged(_)))
            .count()
    }

    /// Model calls made by the whole replay.
    pub fn model_calls(&self) -> usize {
        self.turns.iter().map(|t| t.model_calls).sum()
    }

    /// One line per turn; a changed turn adds its differences, recorded and replayed.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for t in &self.turns {
            let (word, detail) = match &t.verdict {
                Verdict::Same => ("same", String::new()),
                Verdict::Changed(what) => ("CHANGED", what.join("; ")),
                Verdict::Diverged(why) => ("DIVERGED", why.clone()),
                Verdict::Skipped(why) => ("skipped", why.clone()),
            };
            let _ = write!(out, "turn {} {}: {word}", t.index, t.turn_id);
            if !detail.is_empty() {
                let _ = write!(out, " ({detail})");
            }
            out.push('\n');
            if let (Verdict::Changed(_), Some(now)) = (&t.verdict, &t.replayed) {
                let _ = writeln!(out, "  recorded: {}", summary(&t.recorded));
                let _ = writeln!(out, "  replayed: {}", summary(now));
            }
        }
        out
    }
}

/// A one-line, reviewer-readable summary of a turn's outputs.
pub fn summary(o: &RecordedOutputs) -> String {
    let events: Vec<&str> = o.events.iter().map(|e| e.as_str()).collect();
    format!(
        "route={} status={} events=[{}] executed=[{}] reply={:?}",
        o.route.as_deref().unwrap_or("-"),
        o.status.map_or("-", |s| s.as_str()),
        events.join(","),
        o.executed.join(","),
        o.replies.join(" / "),
    )
}

/// The parts of [`differences`] that make a decision.
const DECISION_PARTS: [&str; 5] = [
    "route",
    "transaction status",
    "events",
    "tool executions",
    "reply",
];

/// What differs between a recorded and a replayed turn, in words.
pub fn differences(recorded: &RecordedOutputs, replayed: &RecordedOutputs) -> Vec<String> {
    let mut what = Vec::new();
    if recorded.route != replayed.route {
        what.push("route".to_owned());
    }
    if recorded.status != replayed.status {
        what.push("transaction status".to_owned());
    }
    if recorded.events != replayed.events {
        what.push("events".to_owned());
    }
    if recorded.executed != replayed.executed {
        what.push("tool executions".to_owned());
    }
    if recorded.replies != replayed.replies {
        what.push("reply".to_owned());
    }
    if what.is_empty() && recorded.digest != replayed.digest {
        what.push("event data or transaction ids".to_owned());
    }
    if what.is_empty() && recorded.after != replayed.after {
        what.push("conversation state".to_owned());
    }
    what
}

/// Where each turn starts: the previous replayed state when the records chain, else the
/// record's own base, else nowhere (the turn is skipped).
struct Chain {
    state: Option<AgentState>,
    previous_after: Option<String>,
}

impl Chain {
    fn new() -> Chain {
        Chain {
            state: None,
            previous_after: None,
        }
    }

    /// The state `record` starts from, or why there is none.
    fn start(&mut self, record: &DecisionRecord) -> Result<AgentState, String> {
        let chained = self.previous_after.as_deref() == Some(record.before.as_str());
        match (&self.state, &record.base) {
            (Some(state), _) if chained => Ok(state.clone()),
            (_, Some(base)) => Ok(base.clone()),
            _ if self.previous_after.is_none() && record.before == empty_state_digest() => {
                Ok(AgentState::default())
            }
            _ if self.previous_after.is_none() => Err(
                "the turns before it were not kept (a conversation longer than the record \
                 window, or records written before this release)"
                    .to_owned(),
            ),
            _ => Err(
                "the record of the turn before it is missing (a record write failed)".to_owned(),
            ),
        }
    }

    fn advance(&mut self, record: &DecisionRecord, state: Option<AgentState>) {
        self.previous_after = Some(record.outputs.after.clone());
        self.state = state;
    }
}

/// Replays every record with its recorded answers: no model, no tool.
pub fn replay_exact(engine: &Engine<'_>, records: &[DecisionRecord]) -> ConversationReport {
    let mut chain = Chain::new();
    let mut report = ConversationReport::default();
    for (i, record) in records.iter().enumerate() {
        let turn = |verdict, replayed| TurnReport {
            index: i + 1,
            turn_id: record.turn.turn_id.clone(),
            verdict,
            recorded: record.outputs.clone(),
            replayed,
            model_calls: 0,
        };
        let start = match usable(record).and_then(|()| chain.start(record)) {
            Ok(s) => s,
            Err(why) => {
                report.turns.push(turn(Verdict::Skipped(why), None));
                chain.advance(record, None);
                continue;
            }
        };
        let settings = settings_of(engine.settings(), record);
        let engine = Engine::new(engine.catalog(), &settings);
        let (verdict, replayed, state) = match engine.replay(&start, &record.turn, &record.answers)
        {
            Err(e) => (Verdict::Diverged(e.to_string()), None, None),
            Ok((_, Step::Need(request))) => (Verdict::Diverged(unanswered(&request)), None, None),
            Ok((_, Step::Done(outcome))) => judge(record, &outcome, Compare::Exactly),
        };
        report.turns.push(turn(verdict, replayed));
        chain.advance(record, state);
    }
    report
}

/// A record without answers cannot be replayed.
fn usable(record: &DecisionRecord) -> Result<(), String> {
    if record.oversized {
        return Err("its record was over the size bound and kept no answers".to_owned());
    }
    Ok(())
}

fn unanswered(request: &Request) -> String {
    format!(
        "the engine asked for a {} answer the record does not have",
        request_kind(request)
    )
}

fn request_kind(request: &Request) -> &'static str {
    match request {
        Request::Classify(_) => "classifier",
        Request::Route(_) => "router",
        Request::Interpret(_) => "interpreter",
        Request::PreValidate(_) => "pre-validation",
        Request::PersistExecuting(_) => "write-ahead",
        Request::Execute(_) => "tool",
    }
}

/// How much of a turn's outputs must match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compare {
    /// Everything: the outputs' and the state's digests too (the same configuration).
    Exactly,
    /// What a reviewer reads: route, status, events, executions, reply. Under another
    /// configuration, event data and the state carry configuration (a tool's confirmation
    /// flag) that changes with it while the decision does not.
    Decision,
}

/// The verdict of a finished turn against its record, with the state to go on from.
fn judge(
    record: &DecisionRecord,
    outcome: &TurnOutcome,
    compare: Compare,
) -> (Verdict, Option<RecordedOutputs>, Option<AgentState>) {
    let now = RecordedOutputs::of(outcome, &state::encode(&outcome.state));
    let mut what = differences(&record.outputs, &now);
    if compare == Compare::Decision {
        what.retain(|w| DECISION_PARTS.contains(&w.as_str()));
    }
    let verdict = if what.is_empty() {
        Verdict::Same
    } else {
        Verdict::Changed(what)
    };
    (verdict, Some(now), Some(outcome.state.clone()))
}

/// The recorded tool answers of one turn, by kind, in order; and the tools it executed.
struct RecordedTools {
    pre_validations: VecDeque<Answer>,
    executions: VecDeque<(Answer, Option<String>)>,
}

impl RecordedTools {
    fn of(record: &DecisionRecord) -> RecordedTools {
        let mut names = record.outputs.executed.iter().cloned();
        let mut tools = RecordedTools {
            pre_validations: VecDeque::new(),
            executions: VecDeque::new(),
        };
        for answer in &record.answers {
            match answer {
                Answer::PreValidation(_) => tools.pre_validations.push_back(answer.clone()),
                Answer::Tool(_) => tools.executions.push_back((answer.clone(), names.next())),
                _ => {}
            }
        }
        tools
    }

    /// The recorded answer for this tool request, or why there is none.
    fn answer(&mut self, request: &Request) -> Result<Answer, String> {
        let missing = |what: &str, tool: &str| {
            format!("the new decision needs a {what} answer for {tool} that was never recorded")
        };
        match request {
            Request::PreValidate(r) => self
                .pre_validations
                .pop_front()
                .ok_or_else(|| missing("pre-validation", &r.tool)),
            Request::Execute(r) => match self.executions.pop_front() {
                Some((answer, Some(name))) if name == r.tool => Ok(answer),
                _ => Err(missing("tool", &r.tool)),
            },
            Request::PersistExecuting(_) => Ok(Answer::Persisted),
            _ => Err(unanswered(request)),
        }
    }
}

/// Re-decides every record under `engine` (another configuration): model questions go to
/// `model`, tool questions are answered from the record. Each turn starts from the state the
/// previous turn reached under the new configuration.
pub async fn redecide<M: DecisionModel>(
    engine: &Engine<'_>,
    model: &M,
    records: &[DecisionRecord],
) -> ConversationReport {
    let mut chain = Chain::new();
    let mut report = ConversationReport::default();
    let mut diverged = false;
    for (i, record) in records.iter().enumerate() {
        let mut turn = TurnReport {
            index: i + 1,
            turn_id: record.turn.turn_id.clone(),
            verdict: Verdict::Same,
            recorded: record.outputs.clone(),
            replayed: None,
            model_calls: 0,
        };
        let start = match (diverged, usable(record).and_then(|()| chain.start(record))) {
            (true, _) => Err("an earlier turn diverged".to_owned()),
            (false, start) => start,
        };
        let state = match start {
            Err(why) => {
                turn.verdict = Verdict::Skipped(why);
                None
            }
            Ok(start) => {
                let (verdict, replayed, state, calls) =
                    redecide_turn(engine, model, record, &start).await;
                diverged = matches!(verdict, Verdict::Diverged(_));
                (turn.verdict, turn.replayed, turn.model_calls) = (verdict, replayed, calls);
                state
            }
        };
        report.turns.push(turn);
        chain.advance(record, state);
    }
    report
}

type Redecided = (Verdict, Option<RecordedOutputs>, Option<AgentState>, usize);

async fn redecide_turn<M: DecisionModel>(
    engine: &Engine<'_>,
    model: &M,
    record: &DecisionRecord,
    start: &AgentState,
) -> Redecided {
    let turn = &record.turn;
    let ctx = CallContext {
        turn_id: &turn.turn_id,
        turn_at_ms: turn.at_ms,
        speculative: false,
    };
    let diverged = |why: String, calls| (Verdict::Diverged(why), None, None, calls);
    let settings = settings_of(engine.settings(), record);
    let engine = &Engine::new(engine.catalog(), &settings);
    let version = &engine.settings().config_version;
    if !version.is_empty() && *version == record.config {
        // The configuration the turn was decided under: its recorded answers, no model call.
        return match engine.replay(start, turn, &record.answers) {
            Err(e) => diverged(e.to_string(), 0),
            Ok((_, Step::Need(request))) => diverged(unanswered(&request), 0),
            Ok((_, Step::Done(outcome))) => {
                let (verdict, replayed, state) = judge(record, &outcome, Compare::Exactly);
                (verdict, replayed, state, 0)
            }
        };
    }
    let mut tools = RecordedTools::of(record);
    let mut calls = 0;
    let mut run = match engine.start(start, turn) {
        Ok(run) => run,
        Err(e) => return diverged(e.to_string(), calls),
    };
    let mut step = run.resume(None);
    loop {
        let request = match step {
            Err(e) => return diverged(e.to_string(), calls),
            Ok(Step::Done(outcome)) => {
                let (verdict, replayed, state) = judge(record, &outcome, Compare::Decision);
                return (verdict, replayed, state, calls);
            }
            Ok(Step::Need(request)) => request,
        };
        let answer = match &request {
            Request::Classify(r) => Answer::Classifier(model.classify(r, ctx).await),
            Request::Route(r) => Answer::Router(model.route(r, ctx).await),
            Request::Interpret(r) => Answer::Interpreter(model.interpret(r, ctx).await),
            _ => match tools.answer(&request) {
                Ok(answer) => answer,
                Err(why) => return diverged(why, calls),
            },
        };
        if request.skill().is_some() {
            calls += 1;
        }
        step = run.resume(Some(answer));
    }
}

/// One request of a replayed turn and the recorded answer it was given.
pub type Exchange = (Request, Answer);

/// Replays `record` from `start` step by step with its recorded answers, keeping each request
/// next to its answer (export needs the tool a pre-validation was for). `Err`: why the record
/// does not replay to the end.
pub fn trace(
    engine: &Engine<'_>,
    start: &AgentState,
    record: &DecisionRecord,
) -> Result<(Vec<Exchange>, TurnOutcome), String> {
    let settings = settings_of(engine.settings(), record);
    let engine = Engine::new(engine.catalog(), &settings);
    let mut run = engine
        .start(start, &record.turn)
        .map_err(|e| e.to_string())?;
    let mut step = run.resume(None).map_err(|e| e.to_string())?;
    let mut answers = record.answers.iter();
    let mut exchanges = Vec::new();
    loop {
        let request = match step {
            Step::Done(outcome) => return Ok((exchanges, *outcome)),
            Step::Need(request) => request,
        };
        let Some(answer) = answers.next() else {
            return Err(unanswered(&request));
        };
        step = run
            .resume(Some(answer.clone()))
            .map_err(|e| e.to_string())?;
        exchanges.push((request, answer.clone()));
    }
}

/// Each record's start state in order, chained as [`replay_exact`] chains them; `Err` names the
/// first record that cannot be started or traced (export needs the whole conversation).
pub fn trace_all(
    engine: &Engine<'_>,
    records: &[DecisionRecord],
) -> Result<Vec<(AgentState, Vec<Exchange>, TurnOutcome)>, String> {
    let mut chain = Chain::new();
    let mut traced = Vec::new();
    for (i, record) in records.iter().enumerate() {
        let fail = |why: String| format!("turn {} ({}): {why}", i + 1, record.turn.turn_id);
        usable(record).map_err(fail)?;
        let start = chain.start(record).map_err(fail)?;
        let (exchanges, outcome) = trace(engine, &start, record).map_err(fail)?;
        chain.advance(record, Some(outcome.state.clone()));
        traced.push((start, exchanges, outcome));
    }
    Ok(traced)
}

/// The outcome class of a recorded turn, for the sample report: what happened to the
/// conversation, from its events first, else its transaction status.
pub fn outcome_label(o: &RecordedOutputs) -> &'static str {
    use crate::domain::effect::EventType as E;
    let has = |kind: E| o.events.contains(&kind);
    if has(E::HumanHandoffRequested) {
        "handoff"
    } else if has(E::EndRequested) {
        "end"
    } else if has(E::Completed) {
        "executed"
    } else if has(E::Failed) || has(E::OutOfScope) {
        "refused"
    } else if has(E::Cancelled) {
        "cancelled"
    } else if let Some(status) = o.status.filter(|s| !s.is_terminal()) {
        status.as_str()
    } else {
        "answered"
    }
}

/// At most this many changed conversations are listed by name.
const SAMPLE_CHANGED_LISTED: usize = 20;

/// Many conversations' replays, by the recorded outcome of their turns: `replay --sample`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SampleReport {
    pub conversations: usize,
    /// Conversations with at least one changed or diverged turn.
    pub changed_conversations: usize,
    /// Recorded outcome → (turns judged, turns changed or diverged).
    pub by_outcome: std::collections::BTreeMap<&'static str, (usize, usize)>,
    /// Turns not judged (no base, after a divergence, no answers kept).
    pub skipped: usize,
    /// The changed conversations (`tenant/agent/session`) and their first changed turn, to
    /// replay one by one.
    pub changed: Vec<(String, usize)>,
}

impl SampleReport {
    /// Adds the replay of conversation `key`.
    pub fn add(&mut self, key: &str, report: &ConversationReport) {
        self.conversations += 1;
        if report.differences() > 0 {
            self.changed_conversations += 1;
            let first = report
                .turns
                .iter()
                .find(|t| matches!(t.verdict, Verdict::Changed(_) | Verdict::Diverged(_)))
                .map_or(0, |t| t.index);
            self.changed.push((key.to_owned(), first));
        }
        for t in &report.turns {
            let changed = match t.verdict {
                Verdict::Same => false,
                Verdict::Changed(_) | Verdict::Diverged(_) => true,
                Verdict::Skipped(_) => {
                    self.skipped += 1;
                    continue;
                }
            };
            let entry = self
                .by_outcome
                .entry(outcome_label(&t.recorded))
                .or_default();
            entry.0 += 1;
            entry.1 += usize::from(changed);
        }
    }

    /// The changed share per outcome, then the totals.
    pub fn render(&self) -> String {
        let mut out = String::from("outcome                   turns  changed  share\n");
        let (mut all, mut changed) = (0, 0);
        for (outcome, (turns, diff)) in &self.by_outcome {
            let share = 100.0 * *diff as f64 / (*turns).max(1) as f64;
            let _ = writeln!(out, "{outcome:<24} {turns:>6} {diff:>8} {share:>5.1} %");
            all += turns;
            changed += diff;
        }
        let share = 100.0 * changed as f64 / all.max(1) as f64;
        let _ = writeln!(out, "{:<24} {all:>6} {changed:>8} {share:>5.1} %", "all");
        let _ = writeln!(
            out,
            "{} of {} conversations changed; {} turns not judged",
            self.changed_conversations, self.conversations, self.skipped
        );
        for (key, turn) in self.changed.iter().take(SAMPLE_CHANGED_LISTED) {
            let _ = writeln!(out, "changed: {key} from turn {turn}");
        }
        if self.changed.len() > SAMPLE_CHANGED_LISTED {
            let more = self.changed.len() - SAMPLE_CHANGED_LISTED;
            let _ = writeln!(out, "changed: … and {more} more");
        }
        out
    }
}
