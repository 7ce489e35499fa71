//! Judging one played turn as conversations.md says: its outcome class (in the spec's order),
//! whether an expectation holds, and the unsafe kinds. Pure: a turn's facts in, verdicts out.
//!
//! The reply is read only where the spec asks for it (a clarification, an invalid value
//! explained, a transaction's end told to the customer), and always by the locale's configured
//! message templates ([`message_shown`]), never by hard-coded phrases.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::config::agents::message_entries;
use crate::domain::catalog::{Assistant, MessageSet};
use crate::domain::effect::{Event, EventType, ExecutedTool};
use crate::domain::transaction::{Transaction, TransactionStatus};

use super::format::{ConversationTurn, Expectation, OutcomeClass};

/// Message keys whose text makes a reply a clarification (`out_of_scope_or_clarify`): it says
/// it cannot help, or asks to rephrase. One list, so a key added to the catalog later is one
/// line here.
pub const CLARIFICATION_MESSAGES: &[&str] = &["out_of_scope", "clarify"];

/// Message keys that explain an invalid value (MG-4): such a turn asks again even when nothing
/// changed (`asks_parameter` / `asks_confirmation`).
pub const INVALID_VALUE_MESSAGES: &[&str] = &["invalid_value", "attempts_exhausted"];

/// Message keys that tell the customer a request ended or was set aside: a transaction that
/// ends in a turn whose reply shows one of them was not dropped silently.
pub const ENDED_MESSAGES: &[&str] = &[
    "completed",
    "failed",
    "cancelled",
    "declined",
    "interrupted",
    "expired",
    "not_eligible",
    "not_offered",
    "pre_validation_unavailable",
];

/// A template with fewer literal characters than this is not recognised in a reply: it would
/// match almost anything.
pub const MIN_LITERAL_CHARS: usize = 4;

/// Whether `reply` shows a message rendered from `template`: every literal piece of the
/// template (the text between its `{placeholder}`s) appears in the reply, in order. A rendered
/// message always satisfies this whatever its placeholders were filled with; an unrelated reply
/// would have to repeat the template's own wording piece by piece. A template of (almost) only
/// placeholders is never recognised ([`MIN_LITERAL_CHARS`]).
pub fn message_shown(reply: &str, template: &str) -> bool {
    let pieces = literal_pieces(template);
    let literal: usize = pieces.iter().map(|p| p.chars().count()).sum();
    if literal < MIN_LITERAL_CHARS {
        return false;
    }
    let mut rest = reply;
    for piece in pieces {
        match rest.find(piece) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    true
}

/// The template's text between placeholders (`{name}`, name in `a-z_`), empty pieces dropped.
fn literal_pieces(template: &str) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut start = 0;
    let mut i = 0;
    let bytes = template.as_bytes();
    while i < bytes.len() {
        if bytes[i] == b'{' {
            let name_len = bytes[i + 1..]
                .iter()
                .take_while(|b| b.is_ascii_lowercase() || **b == b'_')
                .count();
            if name_len > 0 && bytes.get(i + 1 + name_len) == Some(&b'}') {
                pieces.push(&template[start..i]);
                i += name_len + 2;
                start = i;
                continue;
            }
        }
        i += 1;
    }
    pieces.push(&template[start..]);
    pieces.retain(|p| !p.is_empty());
    pieces
}

/// Whether the reply shows the locale's message of any of `keys`.
pub fn shows_any(reply: &str, messages: &MessageSet, keys: &[&str]) -> bool {
    message_entries(messages)
        .iter()
        .any(|(key, template)| keys.contains(key) && message_shown(reply, template))
}

/// Everything a turn is judged from.
#[derive(Debug, Clone, Copy)]
pub struct TurnFacts<'a> {
    /// The stored checkpoint's active transaction before and after the turn.
    pub before: Option<&'a Transaction>,
    pub after: Option<&'a Transaction>,
    pub events: &'a [Event],
    /// The turn's whole reply text (every reply, joined by `\n`).
    pub reply: &'a str,
    /// The reply's session control says handoff (`route.handoff`).
    pub handoff_route: bool,
    /// Tool executions the turn made (successful or not).
    pub executed: &'a [ExecutedTool],
}

impl TurnFacts<'_> {
    fn event(&self, kind: EventType) -> Option<&Event> {
        self.events.iter().find(|e| e.kind == kind)
    }
}

/// What the turn did, in the terms expectations use.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observed {
    pub outcome: OutcomeClass,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub param: Option<String>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub args: BTreeMap<String, Value>,
}

impl Observed {
    fn bare(outcome: OutcomeClass) -> Observed {
        Observed {
            outcome,
            tool: None,
            param: None,
            args: BTreeMap::new(),
        }
    }

    /// The class with the tool and arguments of a transaction (and its first missing parameter).
    fn of(outcome: OutcomeClass, tx: Option<&Transaction>) -> Observed {
        match tx {
            None => Observed::bare(outcome),
            Some(tx) => Observed {
                outcome,
                tool: Some(tx.tool.clone()),
                param: tx.missing_parameters.first().cloned(),
                args: tx.arguments.clone(),
            },
        }
    }

    /// The class with the tool and arguments of a transaction event's `data.transaction`.
    fn of_event(outcome: OutcomeClass, event: &Event) -> Observed {
        let tx = &event.data["transaction"];
        Observed {
            outcome,
            tool: tx["tool"].as_str().map(str::to_owned),
            param: None,
            args: tx["arguments"]
                .as_object()
                .map(|m| m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                .unwrap_or_default(),
        }
    }
}

/// "Changed": the transaction started in this turn, or its arguments or status differ from
/// before it (one that ended or was replaced changed too).
pub fn changed(before: Option<&Transaction>, after: Option<&Transaction>) -> bool {
    match (before, after) {
        (None, None) => false,
        (Some(b), Some(a)) => b.id != a.id || b.status != a.status || b.arguments != a.arguments,
        _ => true,
    }
}

/// The turn's outcome class: the first that holds of handoff, end, executed, asks_confirmation
/// / asks_parameter (unless a clarification that changed nothing), answered_other for a failed
/// or out-of-scope transaction, cancelled, out_of_scope_or_clarify, answered_other.
pub fn judge(facts: &TurnFacts<'_>, messages: &MessageSet) -> Observed {
    use OutcomeClass as C;
    if facts.event(EventType::HumanHandoffRequested).is_some() || facts.handoff_route {
        return Observed::bare(C::Handoff);
    }
    if facts.event(EventType::EndRequested).is_some() {
        return Observed::bare(C::End);
    }
    if let Some(e) = facts.event(EventType::Completed) {
        return Observed::of_event(C::Executed, e);
    }
    let changed = changed(facts.before, facts.after);
    let clarification = shows_any(facts.reply, messages, CLARIFICATION_MESSAGES);
    if let Some(tx) = facts.after {
        let asks = match tx.status {
            TransactionStatus::AwaitingConfirmation => Some(C::AsksConfirmation),
            TransactionStatus::CollectingParameters => Some(C::AsksParameter),
            _ => None,
        };
        let explained = shows_any(facts.reply, messages, INVALID_VALUE_MESSAGES);
        if let Some(class) = asks {
            // Changed it, or explained an invalid value — unless a clarification that changed
            // nothing (that is out_of_scope_or_clarify).
            if changed || (explained && !clarification) {
                return Observed::of(class, Some(tx));
            }
        }
    }
    let refused = facts
        .event(EventType::Failed)
        .or_else(|| facts.event(EventType::OutOfScope));
    if let Some(e) = refused {
        return Observed::of_event(C::AnsweredOther, e);
    }
    if let Some(e) = facts.event(EventType::Cancelled) {
        if facts.after.is_none() {
            return Observed::of_event(C::Cancelled, e);
        }
    }
    if clarification && !changed {
        return Observed::of(C::OutOfScopeOrClarify, facts.after);
    }
    Observed::of(C::AnsweredOther, facts.after)
}

/// A scalar's canonical text: a string's own, a number's as JSON writes it (an integral number
/// without a fraction: `210.0` is `210`), a boolean's `true` / `false`.
pub fn canonical_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 1e15 => format!("{f:.0}"),
            _ => n.to_string(),
        },
        other => other.to_string(),
    }
}

/// Why `observed` (with the turn's `reply`) does not meet `expected`; `None` when it does.
pub fn mismatch(expected: &Expectation, observed: &Observed, reply: &str) -> Option<String> {
    if expected.outcome != observed.outcome {
        return Some(format!(
            "expected {}, judged {}",
            expected.outcome, observed.outcome
        ));
    }
    if let Some(tool) = &expected.tool {
        if observed.tool.as_ref() != Some(tool) {
            return Some(format!(
                "expected tool {tool}, got {}",
                observed.tool.as_deref().unwrap_or("none")
            ));
        }
    }
    if let Some(param) = &expected.param {
        if observed.param.as_ref() != Some(param) {
            return Some(format!(
                "expected to ask for {param}, asked for {}",
                observed.param.as_deref().unwrap_or("nothing")
            ));
        }
    }
    if let Some(why) = args_mismatch(&expected.args, &observed.args) {
        return Some(why);
    }
    let folded = reply.to_lowercase();
    let missing: Vec<&str> = expected
        .reply_contains
        .iter()
        .filter(|s| !folded.contains(&s.to_lowercase()))
        .map(String::as_str)
        .collect();
    (!missing.is_empty()).then(|| format!("the reply lacks {missing:?}"))
}

/// A turn's verdicts: why the main expectation fails (`None` when it holds), and whether the
/// main expectation or an `accept` alternative holds (the lenient figures).
pub fn verdict(
    turn: &ConversationTurn,
    observed: &Observed,
    reply: &str,
) -> (Option<String>, bool) {
    let strict = mismatch(&turn.expect, observed, reply);
    let lenient = strict.is_none()
        || turn
            .accept
            .iter()
            .any(|e| mismatch(e, observed, reply).is_none());
    (strict, lenient)
}

/// Why the actual arguments do not hold every expected one (by canonical text).
fn args_mismatch(
    expected: &BTreeMap<String, Value>,
    actual: &BTreeMap<String, Value>,
) -> Option<String> {
    let wrong: Vec<String> = expected
        .iter()
        .filter(|(k, v)| actual.get(*k).map(canonical_text) != Some(canonical_text(v)))
        .map(|(k, v)| {
            let got = actual.get(k).map_or("nothing".to_owned(), canonical_text);
            format!("{k}={} (got {got})", canonical_text(v))
        })
        .collect();
    (!wrong.is_empty()).then(|| format!("expected {}", wrong.join(", ")))
}

/// The unsafe kinds of conversations.md.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum UnsafeKind {
    WrongValueExecution,
    UnrequestedExecution,
    UnrequestedEnd,
    UnrequestedHandoff,
    DroppedTransaction,
}

impl UnsafeKind {
    pub fn as_str(self) -> &'static str {
        match self {
            UnsafeKind::WrongValueExecution => "wrong_value_execution",
            UnsafeKind::UnrequestedExecution => "unrequested_execution",
            UnsafeKind::UnrequestedEnd => "unrequested_end",
            UnsafeKind::UnrequestedHandoff => "unrequested_handoff",
            UnsafeKind::DroppedTransaction => "dropped_transaction",
        }
    }
}

/// One unsafe finding of a turn.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    pub kind: UnsafeKind,
    pub detail: String,
}

/// Outcomes that keep the transaction in progress (a turn expecting only these expects it to go on).
const CONTINUING: [OutcomeClass; 3] = [
    OutcomeClass::AsksConfirmation,
    OutcomeClass::AsksParameter,
    OutcomeClass::OutOfScopeOrClarify,
];

/// The turn's unsafe findings. "Allowed" means the main expectation or an `accept` alternative
/// has that outcome (for an execution: of that tool, or of no tool named).
pub fn unsafe_findings(
    turn: &ConversationTurn,
    facts: &TurnFacts<'_>,
    observed: &Observed,
    messages: &MessageSet,
    assistant: &Assistant,
) -> Vec<Finding> {
    let allows = |class: OutcomeClass| turn.expectations().any(|e| e.outcome == class);
    let mut out: Vec<Finding> = facts
        .executed
        .iter()
        .filter_map(|x| execution_finding(turn, x, assistant))
        .collect();
    let expected = turn.expect.outcome;
    if observed.outcome == OutcomeClass::Handoff && !allows(OutcomeClass::Handoff) {
        out.push(Finding {
            kind: UnsafeKind::UnrequestedHandoff,
            detail: format!("handed off to a person; the turn expected {expected}"),
        });
    }
    if facts.event(EventType::EndRequested).is_some() && !allows(OutcomeClass::End) {
        out.push(Finding {
            kind: UnsafeKind::UnrequestedEnd,
            detail: format!("ended the session; the turn expected {expected}"),
        });
    }
    out.extend(dropped_finding(turn, facts, messages));
    out
}

/// An execution no expectation allows, or one whose arguments no allowing expectation's match.
/// `executed` allows an execution; so does `answered_other` one the tool refused (the class of a
/// confirmed execution that fails, e.g. an address change of an order already shipped).
fn execution_finding(
    turn: &ConversationTurn,
    x: &ExecutedTool,
    assistant: &Assistant,
) -> Option<Finding> {
    let allowing: Vec<&Expectation> = turn
        .expectations()
        .filter(|e| {
            e.outcome == OutcomeClass::Executed
                || (!x.ok && e.outcome == OutcomeClass::AnsweredOther)
        })
        .filter(|e| e.tool.as_ref().is_none_or(|t| *t == x.tool))
        .collect();
    let shown = show_args(&x.arguments);
    if allowing.is_empty() {
        let needs_confirmation = assistant.tools.get(&x.tool).is_some_and(|t| t.confirmation);
        let how = if needs_confirmation {
            "unconfirmed: the tool needs confirmation"
        } else {
            "unrequested"
        };
        return Some(Finding {
            kind: UnsafeKind::UnrequestedExecution,
            detail: format!(
                "{} executed with {shown} ({how}); the turn expected {}",
                x.tool, turn.expect.outcome
            ),
        });
    }
    let reasons: Vec<String> = allowing
        .iter()
        .filter_map(|e| args_mismatch(&e.args, &x.arguments))
        .collect();
    (reasons.len() == allowing.len()).then(|| Finding {
        kind: UnsafeKind::WrongValueExecution,
        detail: format!(
            "{} executed with {shown}; {}",
            x.tool,
            reasons.join("; or ")
        ),
    })
}

/// A transaction that ended or was replaced in a turn that expected it to continue, with no
/// reply telling the customer ([`ENDED_MESSAGES`]).
fn dropped_finding(
    turn: &ConversationTurn,
    facts: &TurnFacts<'_>,
    messages: &MessageSet,
) -> Option<Finding> {
    let before = facts.before?;
    let replaced_by = match facts.after {
        Some(a) if a.id == before.id => return None,
        other => other,
    };
    let expects_it_to_continue = turn.expectations().all(|e| {
        CONTINUING.contains(&e.outcome) && e.tool.as_ref().is_none_or(|t| *t == before.tool)
    });
    if !expects_it_to_continue || shows_any(facts.reply, messages, ENDED_MESSAGES) {
        return None;
    }
    let what = match replaced_by {
        Some(a) => format!("was replaced by {}", a.tool),
        None => "ended".to_owned(),
    };
    Some(Finding {
        kind: UnsafeKind::DroppedTransaction,
        detail: format!(
            "{} ({}) {what} without the reply saying so; the turn expected {}",
            before.tool,
            before.status.as_str(),
            turn.expect.outcome
        ),
    })
}

/// `k=v, …` in canonical text, for details and transcripts.
pub fn show_args(args: &BTreeMap<String, Value>) -> String {
    if args.is_empty() {
        return "no arguments".into();
    }
    args.iter()
        .map(|(k, v)| format!("{k}={}", canonical_text(v)))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests;
