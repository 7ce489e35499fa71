use std::collections::BTreeMap;

use super::coroutine::Slot;
use super::*;
use crate::domain::effect::Transition;
use crate::domain::locale::Locale;
use crate::domain::transaction::is_legal_transition;
use crate::domain::turn::Identity;

/// A transaction of `tool` in `status` with `arguments`, opened at 1 s.
fn transaction(
    tool: &str,
    status: TransactionStatus,
    arguments: BTreeMap<String, Value>,
) -> Transaction {
    Transaction {
        id: "tx-1".into(),
        agent: "retail".into(),
        tool: tool.into(),
        status,
        reason: None,
        arguments,
        missing_parameters: Vec::new(),
        confirmation_required: true,
        confirmation_received: false,
        pre_validation: Vec::new(),
        evidence: Vec::new(),
        turn_ids: Vec::new(),
        failed_attempts: 0,
        executing_turn_id: None,
        opened_at_ms: 1_000,
        updated_at_ms: 1_000,
    }
}

// LC-3: the engine's only way to change a status refuses every pair outside the table with
// `IllegalTransition` and leaves the transaction as it was ("never applied"). No turn input
// reaches this refusal (every call site moves from a status the restore step normalised to a
// legal target), so it is driven here directly; tests/engine_properties.rs checks the inputs.
#[test]
fn transition_refuses_every_illegal_pair_and_applies_none() {
    let catalog =
        crate::config::agents::load_catalog(std::path::Path::new("config/agents.example.yaml"))
            .unwrap();
    let settings = Settings::default();
    let assistant = catalog.assistant("retail-bot").unwrap();
    let turn = Turn {
        turn_id: "t-1".into(),
        identity: Identity::new("t1", "retail-bot", "s1"),
        input: TurnInput::Text("hi".into()),
        locale: Locale::En,
        at_ms: 5_000,
    };
    let mut checked = 0;
    for from in TransactionStatus::ALL {
        for to in TransactionStatus::ALL.into_iter().filter(|to| *to != from) {
            let tx = Transaction {
                missing_parameters: vec!["order_id".into()],
                ..transaction("retail_order_cancel", from, BTreeMap::new())
            };
            let state = AgentState {
                active_transaction: Some(tx),
                ..AgentState::default()
            };
            let mut run = Run::new(&settings, assistant, &turn, state, Slot::default());
            let result = run.transition(to);
            let tx = run.state.active_transaction.as_ref().unwrap();
            if is_legal_transition(from, to) {
                assert!(result.is_ok(), "{from:?} -> {to:?} refused");
                assert_eq!((tx.status, tx.updated_at_ms), (to, 5_000));
                assert_eq!(run.out.transitions, vec![Transition { from, to }]);
            } else {
                match result {
                    Err(EngineError::IllegalTransition {
                        transaction_id,
                        from: f,
                        to: t,
                    }) => assert_eq!((transaction_id.as_str(), f, t), ("tx-1", from, to)),
                    Err(e) => panic!("{from:?} -> {to:?}: {e}"),
                    Ok(()) => panic!("{from:?} -> {to:?} was applied"),
                }
                assert_eq!((tx.status, tx.updated_at_ms), (from, 1_000));
                assert!(run.out.transitions.is_empty());
                checked += 1;
            }
        }
    }
    // 72 ordered pairs of distinct statuses, 21 of them legal.
    assert_eq!(checked, 72 - 21);
}

/// Every turn parked at a model call holds its suspended future. The steps after each ask are
/// boxed (routing.rs, `Run::run`) and the run is not rebound inside the future, so a turn at the
/// classifier holds the run and that path only: 6.4 KB with an inline call tree, ~2.5 KB now.
#[test]
fn a_suspended_turn_holds_a_small_future() {
    let catalog =
        crate::config::agents::load_catalog(std::path::Path::new("config/agents.example.yaml"))
            .unwrap();
    let settings = Settings::default();
    let engine = Engine::new(&catalog, &settings);
    let turn = Turn {
        turn_id: "t-1".into(),
        identity: Identity::new("t1", "retail-bot", "s1"),
        input: TurnInput::Text("cancel my order".into()),
        locale: Locale::En,
        at_ms: 5_000,
    };
    let (run, step) = engine.replay(&AgentState::default(), &turn, &[]).unwrap();
    assert!(matches!(step, Step::Need(Request::Classify(_))), "{step:?}");
    let bytes = run.future_bytes();
    let run_bytes = std::mem::size_of::<Run<'_>>();
    assert!(bytes > 0);
    assert!(
        bytes <= run_bytes + 1024,
        "the suspended turn's future is {bytes} bytes (the run alone is {run_bytes})"
    );
}

// MG-6: a correction with chat around it reads as the correction alone would; asides are set
// apart only when the rest then reads whole.
#[test]
fn a_correction_beside_asides_corrects() {
    let catalog =
        crate::config::agents::load_catalog(std::path::Path::new("config/agents.example.yaml"))
            .unwrap();
    let settings = Settings::default();
    let assistant = catalog.assistant("retail-bot").unwrap();
    let read = |tool: &str, arguments: &[(&str, Value)], text: &str| {
        let turn = Turn {
            turn_id: "t-2".into(),
            identity: Identity::new("t1", "retail-bot", "s1"),
            input: TurnInput::Text(text.into()),
            locale: Locale::PtBr,
            at_ms: 5_000,
        };
        let arguments = arguments
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect();
        let tx = transaction(tool, TransactionStatus::AwaitingConfirmation, arguments);
        let state = AgentState {
            active_transaction: Some(tx),
            ..AgentState::default()
        };
        let run = Run::new(&settings, assistant, &turn, state, Slot::default());
        run.correction_beside_asides(text).map(|r| {
            r.values
                .into_iter()
                .map(|v| (v.name, v.value))
                .collect::<Vec<_>>()
        })
    };
    let contestation = [
        ("subject", Value::from("taxa")),
        ("amount", Value::from("24.50")),
    ];
    assert_eq!(
        read(
            "billing_contestation",
            &contestation,
            "sim mas é 25,40 na real, me confundi"
        ),
        Some(vec![("amount".to_owned(), Value::from("25.40"))])
    );
    let address = [
        ("order_id", Value::from("PED-323386")),
        ("zip_code", Value::from("30140-071")),
        ("house_number", Value::from(1520)),
    ];
    assert_eq!(
        read(
            "retail_address_change",
            &address,
            "Sim, por gentileza, porém o número correto é 1502. Peço desculpas pelo equívoco."
        ),
        Some(vec![("house_number".to_owned(), Value::from(1502))])
    );
    // A clause that is no aside (a question, a request) keeps the message out.
    assert_eq!(
        read(
            "billing_contestation",
            &contestation,
            "é 25,40, quando vocês respondem?"
        ),
        None
    );
    // The same value again corrects nothing.
    assert_eq!(
        read(
            "billing_contestation",
            &contestation,
            "é 24,50 mesmo, me confundi"
        ),
        None
    );
}
