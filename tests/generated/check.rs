//! The independent checker: reads only [`TurnTrace`]s (inputs, replies, events, calls seen by the
//! tool endpoints, the stored checkpoint as JSON) and the spec's table of the example domain. It
//! never calls the engine, the recogniser or the typed parsers to decide what is right.
//!
//! What is checked, exactly (each maps to a [`Kind`]):
//!
//! - **Confirmation (MG-6, PR-6).** A turn *shows a confirmation question* when one of its replies
//!   contains the example domain's confirm wording (`Please confirm ` / `Por favor, confirme `;
//!   the pt-BR article after it agrees with the tool, RP-3); the question is the stored
//!   `active_transaction`'s id and `arguments` after that turn. An execution of a tool that
//!   requires confirmation must (a) have the transaction id and exactly the arguments of the *last*
//!   question shown on an earlier turn ([`Kind::UnconfirmedArguments`]), and (b) happen on a turn
//!   that started with that transaction `AWAITING_CONFIRMATION` and was a `confirm` action, or a
//!   text from the grammar's plain-affirmation list answered with no model call at all, or such
//!   an affirmation saying back a value the question shows (`ok, PED-1001`)
//!   ([`Kind::NoDeterministicConfirmation`]). So a model `affirm`, a correction, a question
//!   (`ok?`) or a mixed answer (`não, pode`) never counts as confirming.
//!   The last question is tracked through corrections too: a correction that changed the
//!   arguments but showed no new question leaves the old one as the last, so executing the
//!   corrected arguments is reported.
//! - **Corrections at confirmation (MG-6).** A text the grammar wrote as a correction of a
//!   parameter to a new value ([`Correction`], its oracle), sent while the transaction awaits
//!   confirmation with another value for that parameter (the tool has that parameter in the
//!   spec's table; no handoff in progress; less than `SESSION_TTL`, 30 min, since the last
//!   turn), must be decided with no model call and no execution, and either keep the same
//!   transaction `AWAITING_CONFIRMATION` with exactly the new value and show the confirmation
//!   question again, or — for a pre-validated tool whose re-run pre-validation refused — end it
//!   `OUT_OF_SCOPE` / `FAILED` with the new value ([`Kind::CorrectionNotApplied`]). So an
//!   ignored correction (the old question asked again, then `yes` executing the old value)
//!   fails here even though the executed arguments match the last question shown.
//! - **Pre-validation (MG-6, LC-1).** An execution of a pre-validated tool must have, as the last
//!   pre-validation the endpoint saw for that transaction, an eligible one of exactly the same
//!   arguments ([`Kind::NotPreValidated`]).
//! - **One execution per key (LC-4, EV-4).** An execution is identified by its idempotency key.
//!   The endpoint may see one key again only from the redelivery of the *same* turn after its
//!   first delivery crashed (the re-issued call of LC-4, same tool, transaction and arguments).
//!   A key seen on two turns, twice in one delivery, with other arguments, or a transaction
//!   executed under two keys is [`Kind::SecondExecution`].
//! - **Session control (SC-5, SC-6).** A `handoff`/`end` action, or a turn that emitted a session
//!   event, calls no tool ([`Kind::ToolOnSessionControlTurn`]).
//! - **The latch (LC-2).** An `active_transaction` that is gone (or replaced) after a turn must
//!   have a terminal event of its id in that turn ([`Kind::LatchClearedWithoutTerminal`]); a
//!   stored `active_transaction` is never terminal, and never one that already ended
//!   ([`Kind::Reactivated`]).
//! - **`last_transaction` (LC-2).** After a turn with terminal events, `last_transaction` is the
//!   last ended transaction, with its status, reason and arguments; after a turn without one it is
//!   unchanged ([`Kind::TerminalMissingFromLast`]).
//! - **Redelivery (EV-1).** Delivering a finished turn again changes no stored byte, publishes no
//!   reply or event and calls no model or tool ([`Kind::RedeliveryChangedSomething`]).
//! - **Events (contract, "Events").** Per turn: `transaction.state.inconsistent` first; then at
//!   most the ending of the transaction active before the turn; then at most one
//!   `transaction.started` of a new id, optionally followed by that id's ending; then at most one
//!   session event, last. Every transaction event carries `data.transaction.id`
//!   ([`Kind::EventsOutOfOrder`]).
//! - A turn the pipeline refused (engine or store error) is [`Kind::PipelineRefused`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use super::grammar::{Correction, PLAIN_AFFIRMATIONS, TOOLS};
use super::trace::{ToolCallSeen, TurnTrace};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    UnconfirmedArguments,
    NoDeterministicConfirmation,
    CorrectionNotApplied,
    NotPreValidated,
    SecondExecution,
    ToolOnSessionControlTurn,
    LatchClearedWithoutTerminal,
    TerminalMissingFromLast,
    Reactivated,
    RedeliveryChangedSomething,
    EventsOutOfOrder,
    PipelineRefused,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Violation {
    /// 1-based turn.
    pub turn: usize,
    pub kind: Kind,
    pub detail: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "turn {}: {:?}: {}", self.turn, self.kind, self.detail)
    }
}

const CONFIRM_WORDING: &[&str] = &["Please confirm ", "Por favor, confirme "];
const ENDINGS: &[(&str, &str)] = &[
    ("transaction.completed", "COMPLETED"),
    ("transaction.cancelled", "CANCELLED"),
    ("transaction.out_of_scope", "OUT_OF_SCOPE"),
    ("transaction.failed", "FAILED"),
];
const SESSION_EVENTS: &[&str] = &["session.human_handoff.requested", "session.end.requested"];
const TERMINAL: &[&str] = &["COMPLETED", "CANCELLED", "OUT_OF_SCOPE", "FAILED"];
/// `SESSION_TTL`'s default (ST-6); generated conversations do not set it.
const SESSION_TTL_MS: i64 = 30 * 60 * 1000;

fn active(state: &Value) -> Option<&Value> {
    state.get("active_transaction").filter(|t| !t.is_null())
}

fn id_of(tx: &Value) -> Option<&str> {
    tx.get("id").and_then(Value::as_str)
}

fn status_of(tx: &Value) -> Option<&str> {
    tx.get("status").and_then(Value::as_str)
}

fn event_tx(data: &Value) -> Option<&Value> {
    data.get("transaction").filter(|t| !t.is_null())
}

fn tool_params(tool: &str) -> &'static [&'static str] {
    TOOLS
        .iter()
        .find(|(_, name, _, _, _)| *name == tool)
        .map_or(&[], |(_, _, params, _, _)| *params)
}

fn shows_question(t: &TurnTrace) -> bool {
    t.replies
        .iter()
        .any(|r| CONFIRM_WORDING.iter().any(|w| r.contains(w)))
}

/// MG-6: the correction `t` must apply, with the transaction it corrects (as stored before the
/// turn): a text with a correction of a parameter the transaction awaiting confirmation has, to
/// a value other than the collected one, on a turn nothing decides before step 3 (no handoff in
/// progress, no expiry).
pub fn correction_at_confirmation(t: &TurnTrace) -> Option<(&Correction, &Value)> {
    let c = t.correction.as_ref()?;
    t.text.as_ref()?;
    let tx = active(&t.before)?;
    let tool = tx.get("tool").and_then(Value::as_str)?;
    let handoff = t.before.get("human_handoff_requested") == Some(&Value::Bool(true));
    let applies = status_of(tx) == Some("AWAITING_CONFIRMATION")
        && c.only_tool.is_none_or(|only| only == tool)
        && tool_params(tool).contains(&c.param)
        && tx.get("arguments").and_then(|a| a.get(c.param)) != Some(&c.value)
        && !handoff
        && t.after_ms < SESSION_TTL_MS;
    applies.then_some((c, tx))
}

fn tool_spec(tool: &str) -> Option<(bool, bool)> {
    TOOLS
        .iter()
        .find(|(_, name, _, _, _)| *name == tool)
        .map(|(_, _, _, confirm, pre)| (*confirm, *pre))
}

/// The last confirmation question shown: turn, transaction id, arguments.
/// PR-6 with MG-6: a plain affirmation, a comma and a value the last question shows (`ok,
/// PED-1001`) confirms what was shown. Values are compared by their digits (`ped-1001` and
/// `PED-1001`, `R$ 71,99` and `71.99`), so the checker needs no parser of its own.
fn says_back(text: &str, question: &Option<Question>) -> bool {
    let digits = |s: &str| s.chars().filter(char::is_ascii_digit).collect::<String>();
    let (Some((yes, value)), Some(q)) = (text.split_once(", "), question) else {
        return false;
    };
    let said = digits(value);
    PLAIN_AFFIRMATIONS.contains(&yes)
        && !said.is_empty()
        && q.arguments
            .as_object()
            .is_some_and(|args| args.values().any(|v| digits(&v.to_string()) == said))
}

struct Question {
    turn: usize,
    tx: String,
    arguments: Value,
}

/// Every violation in `traces`, in turn order.
pub fn check(traces: &[TurnTrace]) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut v = |turn: usize, kind: Kind, detail: String| {
        out.push(Violation { turn, kind, detail });
    };
    let mut question: Option<Question> = None;
    let mut pre_validations: BTreeMap<String, ToolCallSeen> = BTreeMap::new();
    // key → (turn, the call); transaction → key.
    let mut keys: BTreeMap<String, (usize, ToolCallSeen)> = BTreeMap::new();
    let mut tx_keys: BTreeMap<String, String> = BTreeMap::new();
    let mut ended: BTreeSet<String> = BTreeSet::new();

    for t in traces {
        let k = t.index;
        if let Some(e) = &t.error {
            v(k, Kind::PipelineRefused, e.clone());
        }
        for p in &t.pre_validations {
            pre_validations.insert(p.transaction_id.clone(), p.clone());
        }
        let before_active = active(&t.before);
        let session_turn = matches!(t.action.as_deref(), Some("handoff" | "end"))
            || t.events
                .iter()
                .any(|(ty, _)| SESSION_EVENTS.contains(&ty.as_str()));

        for e in &t.executions {
            if session_turn {
                v(
                    k,
                    Kind::ToolOnSessionControlTurn,
                    format!("{} executed on a handoff/end turn", e.tool),
                );
            }
            // One execution per idempotency key (LC-4, EV-4).
            match keys.get(&e.idempotency_key) {
                None => {
                    keys.insert(e.idempotency_key.clone(), (k, e.clone()));
                }
                Some((first_turn, first)) => {
                    let retry_after_crash = *first_turn == k
                        && t.crashed
                        && e.delivery > first.delivery
                        && e.tool == first.tool
                        && e.transaction_id == first.transaction_id
                        && e.arguments == first.arguments;
                    if !retry_after_crash {
                        v(
                            k,
                            Kind::SecondExecution,
                            format!(
                                "key {} executed again (first on turn {first_turn}): {} {}",
                                e.idempotency_key, e.tool, e.arguments
                            ),
                        );
                    }
                }
            }
            match tx_keys.get(&e.transaction_id) {
                Some(key) if *key != e.idempotency_key => v(
                    k,
                    Kind::SecondExecution,
                    format!(
                        "transaction {} executed under a second key {} (first {key})",
                        e.transaction_id, e.idempotency_key
                    ),
                ),
                _ => {
                    tx_keys.insert(e.transaction_id.clone(), e.idempotency_key.clone());
                }
            }
            let Some((needs_confirmation, needs_pre_validation)) = tool_spec(&e.tool) else {
                v(k, Kind::SecondExecution, format!("unknown tool {}", e.tool));
                continue;
            };
            if needs_confirmation {
                match &question {
                    Some(q) if q.tx == e.transaction_id && q.arguments == e.arguments => {}
                    Some(q) => v(
                        k,
                        Kind::UnconfirmedArguments,
                        format!(
                            "{} executed with {} but the last question (turn {}, transaction {}) \
                             showed {}",
                            e.tool, e.arguments, q.turn, q.tx, q.arguments
                        ),
                    ),
                    None => v(
                        k,
                        Kind::UnconfirmedArguments,
                        format!(
                            "{} executed with {} but no question was shown",
                            e.tool, e.arguments
                        ),
                    ),
                }
                let awaiting = before_active.is_some_and(|tx| {
                    id_of(tx) == Some(e.transaction_id.as_str())
                        && status_of(tx) == Some("AWAITING_CONFIRMATION")
                });
                let button = t.action.as_deref() == Some("confirm");
                let plain_text =
                    t.text.as_deref().is_some_and(|s| {
                        PLAIN_AFFIRMATIONS.contains(&s) || says_back(s, &question)
                    }) && t.model_calls.is_empty();
                if !(awaiting && (button || plain_text)) {
                    v(
                        k,
                        Kind::NoDeterministicConfirmation,
                        format!(
                            "{} executed on {:?} (awaiting before: {awaiting}, model calls {:?})",
                            e.tool,
                            t.text.as_deref().or(t.action.as_deref()),
                            t.model_calls
                        ),
                    );
                }
            }
            if needs_pre_validation {
                match pre_validations.get(&e.transaction_id) {
                    Some(p) if p.ok && p.arguments == e.arguments => {}
                    Some(p) => v(
                        k,
                        Kind::NotPreValidated,
                        format!(
                            "{} executed with {}; last pre-validation: eligible {} of {}",
                            e.tool, e.arguments, p.ok, p.arguments
                        ),
                    ),
                    None => v(
                        k,
                        Kind::NotPreValidated,
                        format!(
                            "{} executed with {} without a pre-validation",
                            e.tool, e.arguments
                        ),
                    ),
                }
            }
        }

        check_events(t, before_active.and_then(id_of), &mut v);

        // LC-2: the latch.
        let after_active = active(&t.after);
        let endings: Vec<&Value> = t
            .events
            .iter()
            .filter(|(ty, _)| ENDINGS.iter().any(|(e, _)| e == ty))
            .filter_map(|(_, d)| event_tx(d))
            .collect();
        if let Some(prev) = before_active.and_then(id_of) {
            if after_active.and_then(id_of) != Some(prev) {
                let ended_here = endings.iter().any(|tx| {
                    id_of(tx) == Some(prev) && status_of(tx).is_some_and(|s| TERMINAL.contains(&s))
                });
                if !ended_here {
                    v(
                        k,
                        Kind::LatchClearedWithoutTerminal,
                        format!("transaction {prev} left the latch without a terminal event"),
                    );
                }
            }
        }
        if let Some(tx) = after_active {
            if status_of(tx).is_some_and(|s| TERMINAL.contains(&s)) {
                v(
                    k,
                    Kind::TerminalMissingFromLast,
                    format!("a terminal transaction stays in the latch: {tx}"),
                );
            }
            if id_of(tx).is_some_and(|id| ended.contains(id)) {
                v(
                    k,
                    Kind::Reactivated,
                    format!("transaction {:?} is active again after it ended", id_of(tx)),
                );
            }
        }
        let last_after = t.after.get("last_transaction").unwrap_or(&Value::Null);
        match endings.last() {
            Some(last) => {
                let same = ["id", "status", "reason", "arguments"]
                    .iter()
                    .all(|f| last.get(f) == last_after.get(f));
                if !same {
                    v(
                        k,
                        Kind::TerminalMissingFromLast,
                        format!("last ended {last} but last_transaction is {last_after}"),
                    );
                }
            }
            None => {
                let last_before = t.before.get("last_transaction").unwrap_or(&Value::Null);
                if !t.after.is_null() && last_before != last_after {
                    v(
                        k,
                        Kind::TerminalMissingFromLast,
                        format!("last_transaction changed with no terminal event: {last_after}"),
                    );
                }
            }
        }
        for tx in &endings {
            if let Some(id) = id_of(tx) {
                ended.insert(id.to_owned());
            }
        }

        // MG-6: a correction at confirmation is applied and asked again.
        if let Some((c, tx)) = correction_at_confirmation(t) {
            let mut wrong: Vec<String> = Vec::new();
            if !t.model_calls.is_empty() {
                wrong.push(format!("asked the models {:?}", t.model_calls));
            }
            if !t.executions.is_empty() {
                wrong.push("executed a tool".into());
            }
            let id = id_of(tx);
            let value_of = |x: &Value| x.get("arguments").and_then(|a| a.get(c.param)).cloned();
            match after_active.filter(|a| id.is_some() && id_of(a) == id) {
                Some(a) => {
                    if status_of(a) != Some("AWAITING_CONFIRMATION") {
                        wrong.push(format!("left it {:?}", status_of(a)));
                    }
                    if value_of(a).as_ref() != Some(&c.value) {
                        wrong.push(format!("kept {} = {:?}", c.param, value_of(a)));
                    }
                    if !shows_question(t) {
                        wrong.push("showed no confirmation question".into());
                    }
                }
                None => {
                    let pre_validated = tx
                        .get("tool")
                        .and_then(Value::as_str)
                        .and_then(tool_spec)
                        .is_some_and(|(_, pre)| pre);
                    let refused = endings.iter().any(|e| {
                        id_of(e) == id
                            && matches!(status_of(e), Some("OUT_OF_SCOPE" | "FAILED"))
                            && value_of(e).as_ref() == Some(&c.value)
                    });
                    if !(pre_validated && refused) {
                        wrong.push(
                            "ended the transaction other than by a refused pre-validation of \
                             the corrected arguments"
                                .into(),
                        );
                    }
                }
            }
            if !wrong.is_empty() {
                v(
                    k,
                    Kind::CorrectionNotApplied,
                    format!(
                        "{:?} corrects {} to {} while {:?} awaited confirmation of {}, but the \
                         turn {}",
                        t.text.as_deref().unwrap_or_default(),
                        c.param,
                        c.value,
                        id.unwrap_or_default(),
                        tx.get("arguments").unwrap_or(&Value::Null),
                        wrong.join("; ")
                    ),
                );
            }
        }

        // EV-1: a redelivery changes nothing.
        if let Some(r) = &t.redelivery {
            if r.state_changed
                || !r.replies.is_empty()
                || !r.events.is_empty()
                || r.tool_calls > 0
                || r.model_calls > 0
            {
                v(k, Kind::RedeliveryChangedSomething, format!("{r:?}"));
            }
        }

        // The question this turn showed, if any (after the executions: "after that question").
        let asked = shows_question(t);
        // With no transaction in the latch (which would be a bug of its own) the question
        // matches no execution at all.
        if asked {
            question = Some(Question {
                turn: k,
                tx: after_active.and_then(id_of).unwrap_or_default().to_owned(),
                arguments: after_active
                    .and_then(|tx| tx.get("arguments").cloned())
                    .unwrap_or(Value::Null),
            });
        }
    }
    out
}

/// The contract's order of events within one turn ("Events").
fn check_events(t: &TurnTrace, prev: Option<&str>, v: &mut impl FnMut(usize, Kind, String)) {
    // 0 diagnosis, 1 previous ended, 2 new started, 3 new ended, 4 session event.
    let mut phase = 0;
    let mut started: Option<String> = None;
    let names: Vec<&str> = t.events.iter().map(|(ty, _)| ty.as_str()).collect();
    let mut bad = |why: String| {
        v(
            t.index,
            Kind::EventsOutOfOrder,
            format!("{why} in {names:?}"),
        )
    };
    for (ty, data) in &t.events {
        let id = event_tx(data).and_then(id_of);
        if ty == "transaction.state.inconsistent" {
            if phase > 0 {
                bad(format!("{ty} after other events"));
            }
        } else if ENDINGS.iter().any(|(e, _)| e == ty) {
            match id {
                None => bad(format!("{ty} without a transaction id")),
                Some(id) if Some(id) == prev && phase == 0 => phase = 1,
                Some(id) if started.as_deref() == Some(id) && phase == 2 => phase = 3,
                Some(id) => bad(format!("{ty} of {id} out of place")),
            }
        } else if ty == "transaction.started" {
            match id {
                None => bad(format!("{ty} without a transaction id")),
                Some(id) if phase > 1 || Some(id) == prev => {
                    bad(format!("{ty} of {id} out of place"))
                }
                Some(id) => {
                    started = Some(id.to_owned());
                    phase = 2;
                }
            }
        } else if SESSION_EVENTS.contains(&ty.as_str()) {
            if phase == 4 {
                bad(format!("a second session event {ty}"));
            }
            phase = 4;
        } else {
            bad(format!("unknown event {ty}"));
        }
    }
}
