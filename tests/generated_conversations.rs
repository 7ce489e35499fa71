//! The engine's "Jepsen": whole generated conversations for the example domain, played through the
//! real pipeline with crashes, restarts and redeliveries, and judged by an independent checker
//! (`tests/generated/check.rs`, which documents exactly what it checks) of the safety invariants:
//! MG-6 (confirmed arguments — also after corrections at confirmation, which must be applied and
//! asked again —, pre-validation), PR-6 (deterministic confirmation), LC-2 (latch and
//! `last_transaction`), LC-4/EV-4 (one execution per idempotency key), EV-1 (redelivery), SC-5/SC-6
//! (no tool on a handoff or end turn) and the contract's order of events.
//!
//! Short form (CI): `cargo test --test generated_conversations`.
//! Long form: `TURNSTILE_GENERATED_CONVERSATIONS=100000 cargo test --release --test
//! generated_conversations -- --nocapture` (optionally `TURNSTILE_GENERATED_SEED=<first seed>`).
//! A failure prints its seed and the shrunk conversation as a scenario file (also written under
//! `target/generated_conversations/`), ready for `tests/scenarios/`.

mod generated;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use serde_json::{json, Value};
use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::Catalog;
use turnstile::domain::turn::ChannelAction;
use turnstile::scenario::format::parse_scenario;

use generated::check::{check, correction_at_confirmation, Kind, Violation};
use generated::grammar::{generate, Conversation, Correction, Crash, GenTurn};
use generated::run::{play, scenario_turn, settings_block, tools_of};
use generated::shrink::shrink;
use generated::trace::{RedeliverySeen, ToolCallSeen, TurnTrace};
use generated::yaml::{render, Expectations};

/// Conversations in the short form: well under a minute in a debug build on two cores.
const SHORT_FORM: u64 = 10_000;
const DEFAULT_SEED: u64 = 20_260_101;

fn catalog() -> Catalog {
    load_catalog(Path::new("config/agents.example.yaml")).expect("example config")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("runtime")
}

fn env_u64(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.trim().replace('_', "").parse().ok())
        .unwrap_or(default)
}

fn violations_of(
    c: &Conversation,
    catalog: &Catalog,
    rt: &tokio::runtime::Runtime,
) -> (Vec<TurnTrace>, Vec<Violation>) {
    let traces = play(c, catalog, rt);
    let violations = check(&traces);
    (traces, violations)
}

/// What a shrunk failure's scenario can expect so that it fails until the bug is fixed.
fn expectations(violations: &[Violation], c: &Conversation) -> Expectations {
    let mut e = Expectations::new();
    for v in violations {
        if matches!(
            v.kind,
            Kind::UnconfirmedArguments
                | Kind::NoDeterministicConfirmation
                | Kind::NotPreValidated
                | Kind::ToolOnSessionControlTurn
        ) {
            e.insert(v.turn, json!({"tool_calls": []}));
        }
        if v.kind == Kind::CorrectionNotApplied {
            // MG-6: decided in step 3 and asked again (the question's wording per locale).
            let pt_br = c.turns.get(v.turn - 1).is_some_and(|t| t.pt_br);
            let question = if pt_br {
                "Por favor, confirme"
            } else {
                "Please confirm"
            };
            e.insert(
                v.turn,
                json!({"tool_calls": [], "model_calls": [], "reply_contains": question}),
            );
        }
    }
    e
}

/// Shrinks, prints and saves a failing conversation; returns the report.
fn report_failure(
    c: &Conversation,
    violations: &[Violation],
    catalog: &Catalog,
    rt: &tokio::runtime::Runtime,
) -> String {
    let kind = violations[0].kind;
    let small = shrink(c, |cand| {
        violations_of(cand, catalog, rt)
            .1
            .iter()
            .any(|v| v.kind == kind)
    });
    let (_, small_violations) = violations_of(&small, catalog, rt);
    let notes: Vec<String> = small_violations.iter().map(|v| v.to_string()).collect();
    let yaml = render(
        &small,
        &format!("generated seed {}: {kind:?}", c.seed),
        &notes,
        &expectations(&small_violations, &small),
    );
    let dir = Path::new("target/generated_conversations");
    let _ = std::fs::create_dir_all(dir);
    let file = dir.join(format!("seed-{}.yaml", c.seed));
    let _ = std::fs::write(&file, &yaml);
    format!(
        "seed {} violates the safety invariants:\n  {}\nshrunk from {} to {} turns; scenario \
         (also in {}):\n{yaml}",
        c.seed,
        violations
            .iter()
            .map(|v| v.to_string())
            .collect::<Vec<_>>()
            .join("\n  "),
        c.turns.len(),
        small.turns.len(),
        file.display()
    )
}

#[derive(Default)]
struct Tally {
    conversations: u64,
    turns: u64,
    executions: BTreeMap<String, u64>,
    by_button: u64,
    by_text: u64,
    crashes: u64,
    crash_reissued: u64,
    redeliveries: u64,
    endings: BTreeMap<String, u64>,
    questions: u64,
    /// MG-6: correction messages that met a pending confirmation with another value.
    corrections_at_confirmation: u64,
    /// MG-6: executions whose last question was shown by such a correction.
    executed_after_correction: u64,
    failure: Option<String>,
}

impl Tally {
    fn add(&mut self, traces: &[TurnTrace]) {
        self.conversations += 1;
        // Whether the last confirmation question was shown by a correction (MG-6).
        let mut corrected_question = false;
        for t in traces {
            self.turns += 1;
            let correction = correction_at_confirmation(t).is_some();
            self.corrections_at_confirmation += u64::from(correction);
            if !t.executions.is_empty() && corrected_question {
                self.executed_after_correction += 1;
            }
            self.crashes += u64::from(t.crashed);
            self.redeliveries += u64::from(t.redelivery.is_some());
            // LC-4: the call was made, the worker died, the redelivery re-issued it.
            if t.executions.iter().any(|e| e.delivery > 0) && t.executions.len() > 1 {
                self.crash_reissued += 1;
            }
            for e in &t.executions {
                *self.executions.entry(e.tool.clone()).or_default() += 1;
            }
            if !t.executions.is_empty() {
                match (t.action.as_deref(), t.text.is_some()) {
                    (Some("confirm"), _) => self.by_button += 1,
                    (None, true) if t.model_calls.is_empty() => self.by_text += 1,
                    _ => {}
                }
            }
            for (ty, d) in &t.events {
                if let Some(r) = d["transaction"]["reason"].as_str() {
                    *self.endings.entry(format!("{ty}:{r}")).or_default() += 1;
                } else if ty.starts_with("transaction.") && ty != "transaction.started" {
                    *self.endings.entry(ty.clone()).or_default() += 1;
                }
            }
            let asks =
                |r: &String| r.contains("Please confirm") || r.contains("Por favor, confirme");
            if t.replies.iter().any(asks) {
                self.questions += 1;
                corrected_question = correction;
            }
        }
    }

    fn merge(&mut self, o: Tally) {
        self.conversations += o.conversations;
        self.turns += o.turns;
        for (k, v) in o.executions {
            *self.executions.entry(k).or_default() += v;
        }
        self.by_button += o.by_button;
        self.by_text += o.by_text;
        self.crashes += o.crashes;
        self.crash_reissued += o.crash_reissued;
        self.redeliveries += o.redeliveries;
        for (k, v) in o.endings {
            *self.endings.entry(k).or_default() += v;
        }
        self.questions += o.questions;
        self.corrections_at_confirmation += o.corrections_at_confirmation;
        self.executed_after_correction += o.executed_after_correction;
        if self.failure.is_none() {
            self.failure = o.failure;
        }
    }
}

// MG-6, PR-6, LC-2, LC-4, EV-1, EV-4, SC-5, SC-6, Events: every generated conversation keeps every
// safety invariant the checker knows.
#[test]
fn generated_conversations_keep_the_safety_invariants() {
    let count = env_u64("TURNSTILE_GENERATED_CONVERSATIONS", SHORT_FORM);
    let first = env_u64("TURNSTILE_GENERATED_SEED", DEFAULT_SEED);
    let threads = std::thread::available_parallelism()
        .map(|n| n.get() as u64)
        .unwrap_or(1)
        .clamp(1, 8)
        .min(count.max(1));
    let started = Instant::now();
    let tally = std::thread::scope(|s| {
        let workers: Vec<_> = (0..threads)
            .map(|w| {
                s.spawn(move || {
                    let catalog = catalog();
                    let rt = runtime();
                    let mut tally = Tally::default();
                    let mut i = w;
                    while i < count {
                        let seed = first.wrapping_add(i);
                        let c = generate(seed);
                        let (traces, violations) = violations_of(&c, &catalog, &rt);
                        tally.add(&traces);
                        if !violations.is_empty() {
                            tally.failure = Some(report_failure(&c, &violations, &catalog, &rt));
                            break;
                        }
                        i += threads;
                    }
                    tally
                })
            })
            .collect();
        let mut total = Tally::default();
        for w in workers {
            total.merge(w.join().expect("worker thread"));
        }
        total
    });
    let elapsed = started.elapsed();
    println!(
        "generated conversations: {} checked, {} turns, seeds {first}..{}, {threads} threads, \
         {:.1} s\n  executions {:?}\n  executing turns: confirm button {}, text with no model \
         call {}; confirmation replies {}\n  corrections at confirmation {} (executions after \
         a corrected question {})\n  crashes {} (re-issued executions {}), \
         redeliveries {}\n  endings {:?}",
        tally.conversations,
        tally.turns,
        first.wrapping_add(count.saturating_sub(1)),
        elapsed.as_secs_f64(),
        tally.executions,
        tally.by_button,
        tally.by_text,
        tally.questions,
        tally.corrections_at_confirmation,
        tally.executed_after_correction,
        tally.crashes,
        tally.crash_reissued,
        tally.redeliveries,
        tally.endings,
    );
    if let Some(f) = tally.failure {
        panic!("{f}");
    }
    // The generator must keep reaching the interesting states, or the invariants hold vacuously.
    if count >= SHORT_FORM {
        for tool in [
            "retail_order_cancel",
            "retail_address_change",
            "billing_contestation",
            "billing_show_bill",
        ] {
            assert!(
                tally.executions.get(tool).copied().unwrap_or(0) > 0,
                "no {tool} execution: {:?}",
                tally.executions
            );
        }
        assert!(tally.by_button > 0 && tally.by_text > 0);
        assert!(
            tally.crash_reissued > 0,
            "no execution was re-issued after a crash"
        );
        // MG-6: corrections meet pending confirmations, and corrected questions get executed.
        assert!(
            tally.corrections_at_confirmation > 0 && tally.executed_after_correction > 0,
            "corrections at confirmation {}, executions after a corrected question {}",
            tally.corrections_at_confirmation,
            tally.executed_after_correction
        );
    }
}

// ---- the failure output: a scenario file the project's parser and runner accept ----

fn sample() -> Conversation {
    let mut open = GenTurn::text("cancel order ped-1001");
    open.classifier = Some(json!({"decision": "ROUTE", "confidence": 0.9}));
    open.router = Some(json!({
        "agent": "retail", "intent": "retail_order_cancel", "confidence": 0.91,
        "arguments": {"order_id": "PED-12", "house_number": "46"}
    }));
    open.tools = tools_of(&[(
        "retail_order_cancel.pre_validation",
        json!({"eligible": true}),
    )]);
    open.redeliver = true;
    let mut yes = GenTurn::text("yes");
    yes.pt_br = true;
    yes.after_ms = 31 * 60 * 1000;
    yes.restart = true;
    yes.interpreter = Some(json!("invalid_json"));
    yes.tools = tools_of(&[(
        "retail_order_cancel",
        json!({"ok": false, "retryable": true, "error": "backend: \"down\""}),
    )]);
    let mut quirky = GenTurn::text("no");
    quirky.classifier = Some(json!("timeout"));
    quirky.router = Some(json!({"out_of_scope": true, "confidence": 0.89}));
    let mut corrected = GenTurn::text("não é PED-1001, é ped 2002");
    corrected.pt_br = true;
    corrected.correction = Some(Correction {
        param: "order_id",
        value: json!("PED-2002"),
        only_tool: None,
    });
    let mut action = GenTurn::action(ChannelAction::Confirm);
    action.crash = Some(Crash::AtWriteAhead);
    Conversation {
        seed: 7,
        stickiness: false,
        turns: vec![
            open,
            yes,
            quirky,
            corrected,
            GenTurn::text("01310-100"),
            GenTurn::text("R$ 1 234,56"),
            GenTurn::text("🙂 ???"),
            GenTurn::text(""),
            GenTurn::text("não, pode"),
            action,
        ],
    }
}

// The printed failure is a scenario in the shared format: parsed back by the project's own
// parser (src/scenario/format.rs) it is exactly the conversation the harness played.
#[test]
fn a_rendered_conversation_parses_back_as_the_same_scenario() {
    let mut seeds: Vec<Conversation> = (0..200).map(|s| generate(DEFAULT_SEED + s)).collect();
    seeds.push(sample());
    for c in seeds {
        let yaml = render(&c, "round trip", &["a note".into()], &Expectations::new());
        let parsed = parse_scenario(&yaml, "generated.yaml")
            .unwrap_or_else(|e| panic!("seed {}: {e}\n{yaml}", c.seed));
        assert_eq!(parsed.settings, settings_block(&c), "{yaml}");
        assert_eq!(parsed.turns.len(), c.turns.len());
        for (got, want) in parsed.turns.iter().zip(&c.turns) {
            assert_eq!(got, &scenario_turn(want), "seed {}\n{yaml}", c.seed);
        }
    }
}

// ... and the scenario runner (`turnstile scenarios`) runs it, expectations included.
#[test]
fn a_rendered_failure_runs_in_the_scenario_runner() {
    let c = sample();
    let mut expect = Expectations::new();
    expect.insert(
        1,
        json!({"tool_calls": [], "transaction_status": "AWAITING_CONFIRMATION"}),
    );
    let yaml = render(&c, "runner accepts it", &[], &expect);
    let dir = std::env::temp_dir().join(format!("turnstile-generated-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("generated.yaml");
    std::fs::write(&file, &yaml).unwrap();
    let report = turnstile::scenario::run_paths(&[file]).expect("runs");
    assert_eq!(report.failed(), 0, "{}\n{yaml}", report.render());
    assert_eq!(report.passed(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

// The same seed always gives the same conversation, and the same conversation the same trace.
#[test]
fn seeds_reproduce() {
    let (catalog, rt) = (catalog(), runtime());
    for seed in DEFAULT_SEED..DEFAULT_SEED + 20 {
        assert_eq!(generate(seed), generate(seed));
        let c = generate(seed);
        assert_eq!(play(&c, &catalog, &rt), play(&c, &catalog, &rt));
    }
}

// ---- the checker can fail: hand-made bad traces ----

const CANCEL: &str = "retail_order_cancel";

fn tx(id: &str, status: &str, args: Value) -> Value {
    json!({"id": id, "tool": CANCEL, "status": status, "arguments": args})
}

fn state(active: Option<Value>, last: Option<Value>) -> Value {
    json!({"active_transaction": active, "last_transaction": last})
}

fn call(tx: &str, args: Value, key: &str, delivery: usize) -> ToolCallSeen {
    ToolCallSeen {
        delivery,
        tool: CANCEL.into(),
        transaction_id: tx.into(),
        arguments: args,
        idempotency_key: key.into(),
        ok: true,
    }
}

/// A correct conversation: open with PED-1001 (pre-validated, question shown), then `yes`.
fn good_trace() -> Vec<TurnTrace> {
    let args = json!({"order_id": "PED-1001"});
    let mut t1 = TurnTrace::new(1);
    t1.text = Some("cancel order PED-1001".into());
    t1.after = state(Some(tx("x1", "AWAITING_CONFIRMATION", args.clone())), None);
    t1.replies = vec!["Please confirm the order cancellation: PED-1001. Reply yes or no.".into()];
    t1.events = vec![(
        "transaction.started".into(),
        json!({"transaction": tx("x1", "COLLECTING_PARAMETERS", json!({}))}),
    )];
    t1.model_calls = vec!["classifier".into(), "router".into()];
    t1.pre_validations = vec![call("x1", args.clone(), "x1:pre_validation:1", 0)];
    let mut t2 = TurnTrace::new(2);
    t2.text = Some("yes".into());
    t2.before = t1.after.clone();
    let done = tx("x1", "COMPLETED", args.clone());
    t2.after = state(None, Some(done.clone()));
    t2.replies = vec!["Done!".into()];
    t2.events = vec![("transaction.completed".into(), json!({"transaction": done}))];
    t2.executions = vec![call("x1", args, "x1:execute", 0)];
    vec![t1, t2]
}

fn kinds(traces: &[TurnTrace]) -> Vec<Kind> {
    let mut k: Vec<Kind> = check(traces).into_iter().map(|v| v.kind).collect();
    k.dedup();
    k
}

#[test]
fn checker_accepts_a_correct_trace() {
    assert_eq!(check(&good_trace()), vec![]);
    // LC-4: the re-issued call after a crash, same key, is the same execution.
    let mut t = good_trace();
    t[1].crashed = true;
    let again = ToolCallSeen {
        delivery: 1,
        ..t[1].executions[0].clone()
    };
    t[1].executions.push(again);
    assert_eq!(check(&t), vec![]);
}

// MG-6: executed with arguments other than those of the last question shown.
#[test]
fn checker_reports_arguments_other_than_the_last_question() {
    let mut t = good_trace();
    t[1].executions[0].arguments = json!({"order_id": "PED-2002"});
    assert!(
        kinds(&t).contains(&Kind::UnconfirmedArguments),
        "{:?}",
        check(&t)
    );
    // A later question with other arguments replaces the first one.
    let mut t = good_trace();
    let mut t2 = TurnTrace::new(2);
    t2.text = Some("actually PED-2002".into());
    t2.before = t[0].after.clone();
    t2.after = state(
        Some(tx(
            "x1",
            "AWAITING_CONFIRMATION",
            json!({"order_id": "PED-2002"}),
        )),
        None,
    );
    t2.replies = vec!["Please confirm the order cancellation: PED-2002.".into()];
    t2.model_calls = vec!["classifier".into(), "interpreter".into()];
    t[1].index = 3;
    t.insert(1, t2);
    assert!(kinds(&t).contains(&Kind::UnconfirmedArguments));
}

/// `good_trace` with a correction between the question and the `yes`: turn 2 `I meant
/// PED-2002`, applied (pre-validated again, the question shown again with PED-2002) and
/// decided with no model call; turn 3 `yes` executes PED-2002.
fn corrected_trace() -> Vec<TurnTrace> {
    let mut t = good_trace();
    let new = json!({"order_id": "PED-2002"});
    let mut t2 = TurnTrace::new(2);
    t2.text = Some("I meant PED-2002".into());
    t2.correction = Some(Correction {
        param: "order_id",
        value: json!("PED-2002"),
        only_tool: None,
    });
    t2.before = t[0].after.clone();
    t2.after = state(Some(tx("x1", "AWAITING_CONFIRMATION", new.clone())), None);
    t2.replies = vec!["Please confirm the order cancellation: PED-2002. Reply yes or no.".into()];
    t2.pre_validations = vec![call("x1", new.clone(), "x1:pre_validation:2", 0)];
    t[1].index = 3;
    t[1].before = t2.after.clone();
    let done = tx("x1", "COMPLETED", new.clone());
    t[1].after = state(None, Some(done.clone()));
    t[1].events = vec![("transaction.completed".into(), json!({"transaction": done}))];
    t[1].executions = vec![call("x1", new, "x1:execute", 0)];
    t.insert(1, t2);
    t
}

// MG-6: a correction at confirmation, applied and asked again, then confirmed: no violation.
#[test]
fn checker_accepts_an_applied_correction() {
    assert_eq!(check(&corrected_trace()), vec![]);
    // A pre-validated tool whose re-run pre-validation refuses the corrected arguments ends it.
    let mut t = corrected_trace();
    t.truncate(2);
    let refused = tx("x1", "OUT_OF_SCOPE", json!({"order_id": "PED-2002"}));
    t[1].after = state(None, Some(refused.clone()));
    t[1].replies = vec!["Sorry, the order cancellation is not possible.".into()];
    t[1].events = vec![(
        "transaction.out_of_scope".into(),
        json!({"transaction": refused}),
    )];
    t[1].pre_validations[0].ok = false;
    assert_eq!(check(&t), vec![]);
}

// MG-6: an ignored correction — the old question asked again and `yes` executing the old value
// — keeps every other invariant (the execution matches the last question shown), so only the
// correction invariant catches it.
#[test]
fn checker_reports_an_ignored_correction() {
    let old = json!({"order_id": "PED-1001"});
    let mut t = corrected_trace();
    t[1].after = state(Some(tx("x1", "AWAITING_CONFIRMATION", old.clone())), None);
    t[1].replies = vec!["Please confirm the order cancellation: PED-1001. Reply yes or no.".into()];
    t[1].model_calls = vec!["classifier".into(), "interpreter".into()];
    t[1].pre_validations.clear();
    t[2].before = t[1].after.clone();
    let done = tx("x1", "COMPLETED", old.clone());
    t[2].after = state(None, Some(done.clone()));
    t[2].events = vec![("transaction.completed".into(), json!({"transaction": done}))];
    t[2].executions = vec![call("x1", old, "x1:execute", 0)];
    assert_eq!(
        kinds(&t),
        vec![Kind::CorrectionNotApplied],
        "{:?}",
        check(&t)
    );
    assert_eq!(check(&t)[0].turn, 2);
    // Merged, but decided by a model: still reported.
    let mut t = corrected_trace();
    t[1].model_calls = vec!["classifier".into(), "interpreter".into()];
    assert_eq!(kinds(&t), vec![Kind::CorrectionNotApplied]);
    // Merged without showing the question again: the correction is reported, and so is the
    // execution of arguments no question showed.
    let mut t = corrected_trace();
    t[1].replies.clear();
    let k = kinds(&t);
    assert!(
        k.contains(&Kind::CorrectionNotApplied) && k.contains(&Kind::UnconfirmedArguments),
        "{k:?}"
    );
    // Ended (here declined) instead of asked again.
    let mut t = corrected_trace();
    t.truncate(2);
    let declined = tx("x1", "CANCELLED", json!({"order_id": "PED-1001"}));
    t[1].after = state(None, Some(declined.clone()));
    t[1].events = vec![(
        "transaction.cancelled".into(),
        json!({"transaction": declined}),
    )];
    assert_eq!(kinds(&t), vec![Kind::CorrectionNotApplied]);
}

// MG-6: the correction invariant applies only where the contract decides the turn in step 3.
#[test]
fn a_correction_applies_only_at_a_pending_confirmation_of_another_value() {
    let t = corrected_trace();
    assert!(correction_at_confirmation(&t[1]).is_some());
    let exempt: [fn(&mut TurnTrace); 6] = [
        // ST-6: the session expired first.
        |t| t.after_ms = 31 * 60 * 1000,
        // A person owns the conversation (SC-5).
        |t| t.before["human_handoff_requested"] = json!(true),
        // The same value: nothing to correct.
        |t| t.before["active_transaction"]["arguments"]["order_id"] = json!("PED-2002"),
        // Not awaiting confirmation.
        |t| t.before["active_transaction"]["status"] = json!("COLLECTING_PARAMETERS"),
        // A parameter the pending tool does not have.
        |t| {
            t.correction = Some(Correction {
                param: "house_number",
                value: json!(46),
                only_tool: None,
            })
        },
        // A reading that belongs to another tool (`I meant 2002` while an address change waits).
        |t| {
            if let Some(c) = t.correction.as_mut() {
                c.only_tool = Some("retail_address_change");
            }
        },
    ];
    for (i, edit) in exempt.into_iter().enumerate() {
        let mut t2 = t[1].clone();
        edit(&mut t2);
        assert!(correction_at_confirmation(&t2).is_none(), "exemption {i}");
    }
}

// PR-6: executed after a model reading, a question or a non-confirmation turn.
#[test]
fn checker_reports_an_execution_without_a_deterministic_confirmation() {
    for (text, model) in [("yes", true), ("ok?", false), ("wait, PED-1001", false)] {
        let mut t = good_trace();
        t[1].text = Some(text.into());
        if model {
            t[1].model_calls = vec!["classifier".into(), "interpreter".into()];
        }
        assert_eq!(kinds(&t), vec![Kind::NoDeterministicConfirmation], "{text}");
    }
}

// MG-6, LC-1: a pre-validated tool executed with no eligible pre-validation of those arguments.
#[test]
fn checker_reports_a_missing_or_stale_pre_validation() {
    let mut t = good_trace();
    t[0].pre_validations[0].ok = false;
    assert_eq!(kinds(&t), vec![Kind::NotPreValidated]);
    let mut t = good_trace();
    t[0].pre_validations[0].arguments = json!({"order_id": "PED-9999"});
    assert_eq!(kinds(&t), vec![Kind::NotPreValidated]);
    let mut t = good_trace();
    t[0].pre_validations.clear();
    assert_eq!(kinds(&t), vec![Kind::NotPreValidated]);
}

// LC-4, EV-4: a second execution under one key (another turn, or the same delivery twice).
#[test]
fn checker_reports_a_second_execution_under_one_key() {
    let mut t = good_trace();
    let dup = t[1].executions[0].clone();
    t[1].executions.push(dup);
    assert!(kinds(&t).contains(&Kind::SecondExecution));
    // Same key on a later turn.
    let mut t = good_trace();
    let mut t3 = TurnTrace::new(3);
    t3.action = Some("confirm".into());
    t3.before = t[1].after.clone();
    t3.after = t[1].after.clone();
    t3.executions = t[1].executions.clone();
    t.push(t3);
    assert!(kinds(&t).contains(&Kind::SecondExecution));
}

// SC-5, SC-6: no tool on a handoff or end turn.
#[test]
fn checker_reports_a_tool_on_a_handoff_turn() {
    let mut t = good_trace();
    t[1].text = None;
    t[1].action = Some("handoff".into());
    assert!(kinds(&t).contains(&Kind::ToolOnSessionControlTurn));
}

// LC-2: the latch cleared without a terminal event; a terminal transaction not in last.
#[test]
fn checker_reports_latch_and_last_transaction_violations() {
    let mut t = good_trace();
    t[1].events.clear();
    let k = kinds(&t);
    assert!(k.contains(&Kind::LatchClearedWithoutTerminal), "{k:?}");
    let mut t = good_trace();
    t[1].after = state(None, None);
    assert_eq!(kinds(&t), vec![Kind::TerminalMissingFromLast]);
    let mut t = good_trace();
    t[1].after = state(
        Some(tx("x1", "COMPLETED", json!({"order_id": "PED-1001"}))),
        None,
    );
    assert!(kinds(&t).contains(&Kind::TerminalMissingFromLast));
}

// EV-1: a redelivered turn that changes anything.
#[test]
fn checker_reports_a_redelivery_that_changes_something() {
    for r in [
        RedeliverySeen {
            state_changed: true,
            ..RedeliverySeen::default()
        },
        RedeliverySeen {
            replies: vec!["Done!".into()],
            ..RedeliverySeen::default()
        },
        RedeliverySeen {
            tool_calls: 1,
            ..RedeliverySeen::default()
        },
    ] {
        let mut t = good_trace();
        t[1].redelivery = Some(r);
        assert_eq!(kinds(&t), vec![Kind::RedeliveryChangedSomething]);
    }
}

// Events: out of the contract's order.
#[test]
fn checker_reports_events_out_of_order() {
    let ended = |id: &str| json!({"transaction": tx(id, "CANCELLED", json!({}))});
    let started = |id: &str| json!({"transaction": tx(id, "COLLECTING_PARAMETERS", json!({}))});
    let mut base = TurnTrace::new(1);
    base.before = state(Some(tx("old", "COLLECTING_PARAMETERS", json!({}))), None);
    base.after = state(None, Some(tx("new", "CANCELLED", json!({}))));
    let orders: Vec<Vec<(&str, Value)>> = vec![
        // started before the old one's ending
        vec![
            ("transaction.started", started("new")),
            ("transaction.cancelled", ended("old")),
            ("transaction.cancelled", ended("new")),
        ],
        // session event before a transaction event
        vec![
            ("transaction.cancelled", ended("old")),
            ("session.end.requested", json!({})),
            ("transaction.started", started("new")),
            ("transaction.cancelled", ended("new")),
        ],
        // a transaction event without an id
        vec![
            ("transaction.cancelled", ended("old")),
            ("transaction.started", json!({})),
            ("transaction.cancelled", ended("new")),
        ],
    ];
    for events in orders {
        let mut t = base.clone();
        t.events = events.into_iter().map(|(k, d)| (k.to_owned(), d)).collect();
        assert!(
            kinds(std::slice::from_ref(&t)).contains(&Kind::EventsOutOfOrder),
            "{:?}",
            t.events
        );
    }
    let mut ok = base.clone();
    ok.events = vec![
        ("transaction.cancelled".into(), ended("old")),
        ("transaction.started".into(), started("new")),
        ("transaction.cancelled".into(), ended("new")),
    ];
    assert_eq!(check(&[ok]), vec![]);
}

// The checker fails on real traces too: mutate an execution the engine really performed.
#[test]
fn checker_catches_mutations_of_real_traces() {
    let (catalog, rt) = (catalog(), runtime());
    let mut mutated = 0;
    for seed in DEFAULT_SEED..DEFAULT_SEED + 3000 {
        let traces = play(&generate(seed), &catalog, &rt);
        let Some(i) = traces.iter().position(|t| {
            t.executions
                .iter()
                .any(|e| e.tool == CANCEL && e.delivery == 0)
        }) else {
            continue;
        };
        assert_eq!(check(&traces), vec![], "seed {seed} fails unmutated");
        let mut bad = traces.clone();
        bad[i].executions[0].arguments = json!({"order_id": "PED-0000"});
        assert!(
            kinds(&bad).contains(&Kind::UnconfirmedArguments),
            "seed {seed}"
        );
        let mut bad = traces.clone();
        let again = bad[i].executions[0].clone();
        bad[i].executions.push(again);
        assert!(kinds(&bad).contains(&Kind::SecondExecution), "seed {seed}");
        mutated += 1;
        if mutated == 5 {
            break;
        }
    }
    assert!(mutated > 0, "no generated conversation cancelled an order");
}
