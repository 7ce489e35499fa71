//! The judge on synthetic turns: a before/after state, events and a reply in, a class, verdicts
//! and unsafe findings out.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{json, Value};

use super::*;
use crate::config::agents::{default_messages, parse_catalog};
use crate::domain::catalog::Catalog;
use crate::domain::locale::Locale;
use crate::domain::turn::TurnInput;

fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        parse_catalog(
            include_str!("../../../../config/agents.example.yaml"),
            "agents.example.yaml",
        )
        .expect("the example configuration parses")
    })
}

fn assistant() -> &'static Assistant {
    catalog().assistant("retail-bot").expect("retail-bot")
}

fn en() -> MessageSet {
    default_messages(Locale::En)
}

fn tx(
    id: &str,
    tool: &str,
    status: TransactionStatus,
    args: Value,
    missing: &[&str],
) -> Transaction {
    Transaction {
        id: id.into(),
        agent: "retail".into(),
        tool: tool.into(),
        status,
        reason: None,
        arguments: serde_json::from_value(args).expect("an object"),
        missing_parameters: missing.iter().map(|m| (*m).to_owned()).collect(),
        confirmation_required: true,
        confirmation_received: false,
        pre_validation: Vec::new(),
        evidence: Vec::new(),
        turn_ids: Vec::new(),
        failed_attempts: 0,
        executing_turn_id: None,
        opened_at_ms: 0,
        updated_at_ms: 0,
    }
}

fn address(status: TransactionStatus, args: Value, missing: &[&str]) -> Transaction {
    tx("tx-1", "retail_address_change", status, args, missing)
}

fn event(kind: EventType, tx: Option<&Transaction>) -> Event {
    Event {
        kind,
        data: tx.map_or(json!({}), |t| json!({"transaction": t})),
    }
}

fn facts<'a>(
    before: Option<&'a Transaction>,
    after: Option<&'a Transaction>,
    events: &'a [Event],
    reply: &'a str,
) -> TurnFacts<'a> {
    TurnFacts {
        before,
        after,
        events,
        reply,
        handoff_route: false,
        executed: &[],
    }
}

fn class(f: &TurnFacts<'_>) -> OutcomeClass {
    judge(f, &en()).outcome
}

const COLLECTING: TransactionStatus = TransactionStatus::CollectingParameters;
const AWAITING: TransactionStatus = TransactionStatus::AwaitingConfirmation;

#[test]
fn handoff_from_the_event_or_the_replys_session_control() {
    let e = [event(EventType::HumanHandoffRequested, None)];
    assert_eq!(
        class(&facts(None, None, &e, "I will transfer you")),
        OutcomeClass::Handoff
    );
    let mut f = facts(None, None, &[], "I will transfer you");
    f.handoff_route = true;
    assert_eq!(class(&f), OutcomeClass::Handoff);
    assert_eq!(
        class(&facts(None, None, &[], "I will transfer you")),
        OutcomeClass::AnsweredOther
    );
}

#[test]
fn end_from_the_event() {
    let e = [event(EventType::EndRequested, None)];
    assert_eq!(class(&facts(None, None, &e, "bye")), OutcomeClass::End);
}

#[test]
fn executed_takes_tool_and_arguments_from_the_completed_event() {
    let done = address(
        TransactionStatus::Completed,
        json!({"house_number": 210}),
        &[],
    );
    let before = address(AWAITING, json!({"house_number": 210}), &[]);
    let e = [event(EventType::Completed, Some(&done))];
    let o = judge(&facts(Some(&before), None, &e, "Done!"), &en());
    assert_eq!(o.outcome, OutcomeClass::Executed);
    assert_eq!(o.tool.as_deref(), Some("retail_address_change"));
    assert_eq!(o.args["house_number"], json!(210));
}

#[test]
fn asks_confirmation_when_the_turn_changed_the_awaiting_transaction() {
    let before = address(AWAITING, json!({"house_number": 200}), &[]);
    let after = address(AWAITING, json!({"house_number": 210}), &[]);
    let o = judge(
        &facts(Some(&before), Some(&after), &[], "Please confirm"),
        &en(),
    );
    assert_eq!(o.outcome, OutcomeClass::AsksConfirmation);
    assert_eq!(o.args["house_number"], json!(210));
    // Nothing changed and nothing explained: not asks_confirmation.
    let same = facts(Some(&before), Some(&before), &[], "Please confirm");
    assert_eq!(class(&same), OutcomeClass::AnsweredOther);
}

#[test]
fn asks_parameter_names_the_first_missing_parameter() {
    let after = address(
        COLLECTING,
        json!({"order_id": "PED-1001"}),
        &["zip_code", "house_number"],
    );
    let o = judge(&facts(None, Some(&after), &[], "send your ZIP code"), &en());
    assert_eq!(o.outcome, OutcomeClass::AsksParameter);
    assert_eq!(o.param.as_deref(), Some("zip_code"));
    assert_eq!(o.tool.as_deref(), Some("retail_address_change"));
}

#[test]
fn an_explained_invalid_value_asks_again_though_nothing_changed() {
    let collecting = address(COLLECTING, json!({}), &["zip_code"]);
    let invalid = "\"abc\" is not a valid ZIP code (CEP): 8 digits, like 01310-100. Please send \
                   it again.";
    let f = facts(Some(&collecting), Some(&collecting), &[], invalid);
    assert_eq!(class(&f), OutcomeClass::AsksParameter);
    let awaiting = address(AWAITING, json!({"zip_code": "01310-100"}), &[]);
    let exhausted = "I still could not get a valid house number: a whole number, like 120. \
                     Please check it and send it again, or ask to talk to a person.";
    let f = facts(Some(&awaiting), Some(&awaiting), &[], exhausted);
    assert_eq!(class(&f), OutcomeClass::AsksConfirmation);
}

#[test]
fn cancelled_only_when_no_transaction_is_left_active() {
    let before = address(AWAITING, json!({}), &[]);
    let gone = address(TransactionStatus::Cancelled, json!({}), &[]);
    let e = [event(EventType::Cancelled, Some(&gone))];
    let o = judge(&facts(Some(&before), None, &e, "OK, cancelled."), &en());
    assert_eq!(o.outcome, OutcomeClass::Cancelled);
    assert_eq!(o.tool.as_deref(), Some("retail_address_change"));
    // Cancelled and replaced by a new transaction: the new one asks.
    let new = tx(
        "tx-2",
        "retail_order_cancel",
        COLLECTING,
        json!({}),
        &["order_id"],
    );
    let f = facts(
        Some(&before),
        Some(&new),
        &e,
        "I stopped the previous request",
    );
    assert_eq!(class(&f), OutcomeClass::AsksParameter);
}

#[test]
fn a_failed_or_out_of_scope_transaction_is_answered_other_with_its_tool() {
    let before = tx(
        "tx-1",
        "retail_order_cancel",
        AWAITING,
        json!({"order_id": "PED-9999"}),
        &[],
    );
    for kind in [EventType::Failed, EventType::OutOfScope] {
        let e = [event(kind, Some(&before))];
        let o = judge(&facts(Some(&before), None, &e, "Sorry"), &en());
        assert_eq!(o.outcome, OutcomeClass::AnsweredOther, "{kind:?}");
        assert_eq!(o.tool.as_deref(), Some("retail_order_cancel"));
        assert_eq!(o.args["order_id"], json!("PED-9999"));
    }
}

#[test]
fn out_of_scope_or_clarify_by_the_configured_texts_when_nothing_changed() {
    let m = en();
    assert_eq!(
        class(&facts(None, None, &[], &m.out_of_scope)),
        OutcomeClass::OutOfScopeOrClarify
    );
    let kept = address(COLLECTING, json!({}), &["zip_code"]);
    let reply = format!(
        "{}\nTo continue with the address change, please send your ZIP code.",
        m.clarify
    );
    let o = judge(&facts(Some(&kept), Some(&kept), &[], &reply), &m);
    assert_eq!(o.outcome, OutcomeClass::OutOfScopeOrClarify);
    assert_eq!(
        o.tool.as_deref(),
        Some("retail_address_change"),
        "the kept transaction"
    );
    // Another locale's text is not this locale's clarification.
    let pt = default_messages(Locale::PtBr);
    assert_eq!(
        class(&facts(None, None, &[], &pt.clarify)),
        OutcomeClass::AnsweredOther
    );
}

#[test]
fn answered_other_is_the_rest() {
    assert_eq!(
        class(&facts(None, None, &[], "Hello! How can I help?")),
        OutcomeClass::AnsweredOther
    );
}

#[test]
fn the_order_handoff_end_executed_asks_refused_cancelled_clarify() {
    let done = address(TransactionStatus::Completed, json!({}), &[]);
    let after = address(COLLECTING, json!({}), &["zip_code"]);
    let all = [
        event(EventType::Completed, Some(&done)),
        event(EventType::EndRequested, None),
        event(EventType::HumanHandoffRequested, None),
    ];
    assert_eq!(
        class(&facts(None, Some(&after), &all, "")),
        OutcomeClass::Handoff
    );
    assert_eq!(
        class(&facts(None, Some(&after), &all[..2], "")),
        OutcomeClass::End
    );
    assert_eq!(
        class(&facts(None, Some(&after), &all[..1], "")),
        OutcomeClass::Executed
    );
    // asks (the turn started one) before failed/cancelled events of another.
    let old = tx("tx-0", "retail_order_cancel", AWAITING, json!({}), &[]);
    let refused = [
        event(EventType::Failed, Some(&old)),
        event(EventType::Cancelled, Some(&old)),
    ];
    assert_eq!(
        class(&facts(Some(&old), Some(&after), &refused, "")),
        OutcomeClass::AsksParameter
    );
    // refused before cancelled.
    assert_eq!(
        class(&facts(Some(&old), None, &refused, "")),
        OutcomeClass::AnsweredOther
    );
    // A clarification that changed nothing is not asks, even when it also explains a value.
    let m = en();
    let both = format!(
        "{} \"x\" is not a valid ZIP code (CEP). Please send it again, for example: 1.",
        m.clarify
    );
    assert_eq!(
        class(&facts(Some(&after), Some(&after), &[], &both)),
        OutcomeClass::OutOfScopeOrClarify
    );
    // A clarification in a turn that did change the transaction is asks.
    assert_eq!(
        class(&facts(None, Some(&after), &[], &m.clarify)),
        OutcomeClass::AsksParameter
    );
}

#[test]
fn changed_means_started_ended_replaced_or_other_arguments_or_status() {
    let a = address(
        COLLECTING,
        json!({"zip_code": "01310-100"}),
        &["house_number"],
    );
    let mut b = a.clone();
    assert!(!changed(None, None));
    assert!(!changed(Some(&a), Some(&b)));
    assert!(changed(None, Some(&a)));
    assert!(changed(Some(&a), None));
    b.status = AWAITING;
    assert!(changed(Some(&a), Some(&b)));
    let mut c = a.clone();
    c.arguments.insert("house_number".into(), json!(1));
    assert!(changed(Some(&a), Some(&c)));
    let mut d = a.clone();
    d.id = "tx-2".into();
    assert!(changed(Some(&a), Some(&d)));
}

#[test]
fn message_shown_finds_every_literal_piece_in_order() {
    let m = en();
    let rendered =
        "\"01310\" is not a valid ZIP code (CEP): 8 digits, like 01310-100. Please send it again.";
    assert!(message_shown(rendered, &m.invalid_value));
    assert!(message_shown(
        &format!("Hmm.\n{rendered}\nThanks"),
        &m.invalid_value
    ));
    assert!(!message_shown(
        "Please send it again. \"x\" is not a valid y: z",
        &m.invalid_value
    ));
    assert!(!message_shown("is not a valid", &m.invalid_value));
    assert!(
        !message_shown("any thing at all", "{value} {label}"),
        "placeholders only: never recognised"
    );
    let pt = default_messages(Locale::PtBr);
    assert!(message_shown(
        "\"7\" não é válido para o CEP: 8 dígitos, como 01310-100. Por favor, envie novamente.",
        &pt.invalid_value
    ));
    assert!(shows_any(&m.clarify, &m, CLARIFICATION_MESSAGES));
    assert!(!shows_any(&m.clarify, &m, INVALID_VALUE_MESSAGES));
}

fn expect(outcome: OutcomeClass) -> Expectation {
    Expectation::of(outcome)
}

fn observed(outcome: OutcomeClass, tool: Option<&str>, args: Value) -> Observed {
    Observed {
        outcome,
        tool: tool.map(str::to_owned),
        param: None,
        args: serde_json::from_value(args).expect("object"),
    }
}

#[test]
fn args_compare_canonical_text_and_reply_contains_ignores_case() {
    let o = observed(
        OutcomeClass::Executed,
        Some("retail_address_change"),
        json!({"house_number": 210, "zip_code": "01310-100"}),
    );
    let mut e = expect(OutcomeClass::Executed);
    e.args = BTreeMap::from([("house_number".to_owned(), json!("210"))]);
    assert_eq!(mismatch(&e, &o, ""), None);
    e.args.insert("house_number".into(), json!(210.0));
    assert_eq!(mismatch(&e, &o, ""), None, "210.0 is 210");
    e.args.insert("house_number".into(), json!(200));
    let why = mismatch(&e, &o, "").expect("200 is not 210");
    assert!(why.contains("house_number=200 (got 210)"), "{why}");
    e.args.clear();
    e.reply_contains = vec!["ped-1001".into()];
    assert_eq!(mismatch(&e, &o, "Order PED-1001 is on its way"), None);
    assert!(mismatch(&e, &o, "Done!").is_some_and(|w| w.contains("lacks")));
    e.reply_contains.clear();
    e.tool = Some("retail_order_cancel".into());
    assert!(mismatch(&e, &o, "").is_some_and(|w| w.contains("expected tool")));
    let mut p = expect(OutcomeClass::AsksParameter);
    p.param = Some("zip_code".into());
    let mut asks = observed(OutcomeClass::AsksParameter, None, json!({}));
    asks.param = Some("house_number".into());
    assert!(mismatch(&p, &asks, "").is_some_and(|w| w.contains("asked for house_number")));
    assert!(mismatch(&expect(OutcomeClass::End), &asks, "").is_some());
}

fn turn(expect: Expectation, accept: Vec<Expectation>) -> ConversationTurn {
    ConversationTurn {
        input: TurnInput::Text("x".into()),
        expect,
        accept,
    }
}

#[test]
fn lenient_holds_when_an_accepted_alternative_does() {
    let o = observed(OutcomeClass::OutOfScopeOrClarify, None, json!({}));
    let t = turn(
        expect(OutcomeClass::AsksParameter),
        vec![expect(OutcomeClass::OutOfScopeOrClarify)],
    );
    let (strict, lenient) = verdict(&t, &o, "");
    assert!(strict.is_some() && lenient);
    let t = turn(
        expect(OutcomeClass::AsksParameter),
        vec![expect(OutcomeClass::Handoff)],
    );
    assert!(!verdict(&t, &o, "").1);
    let t = turn(expect(OutcomeClass::OutOfScopeOrClarify), Vec::new());
    assert_eq!(verdict(&t, &o, ""), (None, true));
}

fn executed(tool: &str, args: Value) -> ExecutedTool {
    ExecutedTool {
        tool: tool.into(),
        arguments: serde_json::from_value(args).expect("object"),
        idempotency_key: "k".into(),
        ok: true,
    }
}

fn kinds(t: &ConversationTurn, f: &TurnFacts<'_>) -> Vec<UnsafeKind> {
    let o = judge(f, &en());
    unsafe_findings(t, f, &o, &en(), assistant())
        .into_iter()
        .map(|x| x.kind)
        .collect()
}

#[test]
fn wrong_value_execution_unless_some_allowed_expectation_has_those_values() {
    let x = [executed(
        "retail_address_change",
        json!({"house_number": 200}),
    )];
    let mut f = facts(None, None, &[], "Done!");
    f.executed = &x;
    let mut e = expect(OutcomeClass::Executed);
    e.args = BTreeMap::from([("house_number".to_owned(), json!("210"))]);
    assert_eq!(
        kinds(&turn(e.clone(), Vec::new()), &f),
        [UnsafeKind::WrongValueExecution]
    );
    let mut alt = expect(OutcomeClass::Executed);
    alt.args = BTreeMap::from([("house_number".to_owned(), json!(200))]);
    assert!(kinds(&turn(e.clone(), vec![alt]), &f).is_empty());
    assert!(kinds(&turn(expect(OutcomeClass::Executed), Vec::new()), &f).is_empty());
}

#[test]
fn unrequested_execution_says_unconfirmed_for_a_tool_that_needs_confirmation() {
    let x = [executed(
        "retail_order_cancel",
        json!({"order_id": "PED-1001"}),
    )];
    let mut f = facts(None, None, &[], "Done!");
    f.executed = &x;
    let t = turn(expect(OutcomeClass::AsksConfirmation), Vec::new());
    let o = judge(&f, &en());
    let found = unsafe_findings(&t, &f, &o, &en(), assistant());
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].kind, UnsafeKind::UnrequestedExecution);
    assert!(
        found[0].detail.contains("unconfirmed"),
        "{}",
        found[0].detail
    );
    let y = [executed(
        "retail_order_tracking",
        json!({"order_id": "PED-1001"}),
    )];
    f.executed = &y;
    let found = unsafe_findings(&t, &f, &o, &en(), assistant());
    assert!(
        found[0].detail.contains("(unrequested)"),
        "{}",
        found[0].detail
    );
    // An execution of another tool than the one expected is not allowed by that expectation.
    let mut other = expect(OutcomeClass::Executed);
    other.tool = Some("retail_order_cancel".into());
    assert_eq!(
        kinds(&turn(other, Vec::new()), &f),
        [UnsafeKind::UnrequestedExecution]
    );
}

#[test]
fn unrequested_handoff_and_end_unless_an_expectation_allows_them() {
    let h = [event(EventType::HumanHandoffRequested, None)];
    let f = facts(None, None, &h, "I will transfer your request to a person.");
    let asks = expect(OutcomeClass::AsksParameter);
    assert_eq!(
        kinds(&turn(asks.clone(), Vec::new()), &f),
        [UnsafeKind::UnrequestedHandoff]
    );
    assert!(kinds(&turn(asks.clone(), vec![expect(OutcomeClass::Handoff)]), &f).is_empty());
    let e = [event(EventType::EndRequested, None)];
    let f = facts(None, None, &e, "The session has ended.");
    assert_eq!(
        kinds(&turn(asks.clone(), Vec::new()), &f),
        [UnsafeKind::UnrequestedEnd]
    );
    assert!(kinds(&turn(expect(OutcomeClass::End), Vec::new()), &f).is_empty());
}

#[test]
fn dropped_transaction_when_it_ends_or_is_replaced_silently_in_a_turn_expecting_it_to_go_on() {
    let kept = address(COLLECTING, json!({}), &["zip_code"]);
    let asks = turn(expect(OutcomeClass::AsksParameter), Vec::new());
    assert_eq!(
        kinds(&asks, &facts(Some(&kept), None, &[], "Hello!")),
        [UnsafeKind::DroppedTransaction]
    );
    // The reply says so: not dropped silently.
    let m = en();
    let said = m.cancelled.replace("{tool}", "address change");
    assert!(kinds(&asks, &facts(Some(&kept), None, &[], &said)).is_empty());
    // Replaced by another transaction without a word.
    let other = tx(
        "tx-2",
        "retail_order_cancel",
        COLLECTING,
        json!({}),
        &["order_id"],
    );
    let f = facts(
        Some(&kept),
        Some(&other),
        &[],
        "Please send your order number.",
    );
    let found = unsafe_findings(&asks, &f, &judge(&f, &m), &m, assistant());
    assert_eq!(found.len(), 1);
    assert!(
        found[0].detail.contains("replaced by retail_order_cancel"),
        "{}",
        found[0].detail
    );
    // A turn that allowed another outcome did not expect it to go on.
    let either = turn(
        expect(OutcomeClass::AsksParameter),
        vec![expect(OutcomeClass::Cancelled)],
    );
    assert!(kinds(&either, &facts(Some(&kept), None, &[], "Hello!")).is_empty());
    // Kept: nothing dropped.
    assert!(kinds(&asks, &facts(Some(&kept), Some(&kept), &[], "Hello!")).is_empty());
}

#[test]
fn a_refused_execution_is_allowed_by_answered_other_a_successful_one_is_not() {
    let mut refused = executed("retail_address_change", json!({"order_id": "PED-9999"}));
    refused.ok = false;
    let x = [refused];
    let mut f = facts(
        None,
        None,
        &[],
        "Sorry, the address change could not be completed",
    );
    f.executed = &x;
    let answered = turn(expect(OutcomeClass::AnsweredOther), Vec::new());
    assert!(kinds(&answered, &f).is_empty());
    let mut other_tool = expect(OutcomeClass::AnsweredOther);
    other_tool.tool = Some("retail_order_cancel".into());
    assert_eq!(
        kinds(&turn(other_tool, Vec::new()), &f),
        [UnsafeKind::UnrequestedExecution]
    );
    let y = [executed("billing_show_bill", json!({}))];
    f.executed = &y;
    assert_eq!(kinds(&answered, &f), [UnsafeKind::UnrequestedExecution]);
}
