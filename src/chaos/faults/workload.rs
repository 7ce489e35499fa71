//! The generated traffic of a fault scenario: multi-turn conversations whose every model decision
//! is scripted per turn (some replaced by model faults), interleaved with hostile records.

use std::collections::HashMap;

use serde_json::{json, Value};

use super::{Fault, Plan, AGENT, EPOCH_MS, TENANT};
use crate::chaos::Rng;
use crate::domain::turn::Identity;
use crate::model::scripted::ModelScript;
use crate::testkit::bus;

/// A record to produce: key and payload, either absent.
pub(super) type RawRecord = (Option<Vec<u8>>, Option<Vec<u8>>);

/// The generated traffic.
pub(super) struct Workload {
    /// (key, payload) in production order; hostile records interleaved.
    pub(super) records: Vec<RawRecord>,
    pub(super) valid: usize,
    pub(super) hostile: Vec<usize>,
    pub(super) scripts: HashMap<String, ModelScript>,
    pub(super) model_faulted: usize,
    pub(super) identities: Vec<Identity>,
    pub(super) rounds: usize,
}

fn script(v: Value) -> ModelScript {
    serde_json::from_value(v).unwrap_or_default()
}

/// Conversation `c`'s turn in round `round`: its text and the model's script. Each conversation
/// cycles through cancelling an order (request, order number, confirmation) and showing a bill.
fn scripted_turn(round: usize, c: usize) -> (String, ModelScript) {
    match round % 4 {
        0 => (
            "cancel my order".to_owned(),
            script(json!({
                "classifier": {"decision": "ROUTE", "confidence": 0.96},
                "router": {"agent": "retail", "intent": "retail_order_cancel", "confidence": 0.95}
            })),
        ),
        1 => (format!("PED-{}", 1000 + c), ModelScript::default()),
        2 => ("yes".to_owned(), ModelScript::default()),
        _ => (
            "show my bill".to_owned(),
            script(json!({
                "classifier": {"decision": "ROUTE", "confidence": 0.96},
                "router": {"agent": "billing", "intent": "billing_show_bill", "confidence": 0.95}
            })),
        ),
    }
}

/// A faulty script (timeout, error or invalid JSON from the classifier or the router) for a turn
/// that asks the model, in bursts of 1 to 8 turns that start on one turn in ten; `None`: this
/// turn keeps its script.
fn model_fault(rng: &mut Rng, burst_left: &mut usize) -> Option<ModelScript> {
    if *burst_left == 0 && rng.below(10) == 0 {
        *burst_left = 1 + rng.below(8);
    }
    if *burst_left == 0 {
        return None;
    }
    *burst_left -= 1;
    // Timeouts are slow (the profile's timeout per attempt): fewer of them.
    let word = match rng.below(10) {
        0 => "timeout",
        1..=5 => "error",
        _ => "invalid_json",
    };
    Some(if rng.below(2) == 0 {
        script(json!({"classifier": word}))
    } else {
        script(json!({
            "classifier": {"decision": "ROUTE", "confidence": 0.96},
            "router": word
        }))
    })
}

impl Workload {
    pub(super) fn generate(fault: Fault, plan: &Plan, run: &str) -> Workload {
        let mut rng = Rng::new(plan.seed);
        let conversations = plan.conversations.max(1);
        let rounds = plan.turns.div_ceil(conversations).max(1);
        let identities: Vec<Identity> = (0..conversations)
            .map(|c| Identity {
                tenant_id: TENANT.into(),
                agent_id: AGENT.into(),
                session_id: format!("chaos-{run}-{c}"),
            })
            .collect();
        let hostile_total = if fault == Fault::Hostile {
            plan.hostile
        } else {
            0
        };
        let valid_total = rounds * conversations;
        let mut records = Vec::with_capacity(valid_total + hostile_total);
        let mut hostile = Vec::new();
        let mut scripts = HashMap::new();
        let mut model_faulted = 0;
        let mut burst_left = 0;
        for round in 0..rounds {
            for (c, id) in identities.iter().enumerate() {
                let turn_id = format!("t-{run}-{c}-{round}");
                let (text, mut s) = scripted_turn(round, c);
                if fault == Fault::ModelFaults && s.classifier.is_some() {
                    if let Some(faulty) = model_fault(&mut rng, &mut burst_left) {
                        model_faulted += 1;
                        s = faulty;
                    }
                }
                let at = bus_time(EPOCH_MS + (round as i64) * 1_000 + c as i64);
                let payload = bus::turn_json(
                    TENANT,
                    AGENT,
                    &id.session_id,
                    &turn_id,
                    Some(&text),
                    None,
                    "en",
                    Some(&at),
                );
                scripts.insert(turn_id, s);
                records.push((Some(id.key().into_bytes()), Some(payload)));
                // Hostile records, spread evenly, on the keys of real conversations.
                let due = hostile_total * records.len() / (valid_total + hostile_total).max(1);
                while hostile.len() < hostile_total && hostile.len() <= due {
                    let victim = &identities[rng.below(conversations)];
                    hostile.push(records.len());
                    records.push(hostile_record(&mut rng, victim, run, hostile.len()));
                }
            }
        }
        while hostile.len() < hostile_total {
            let victim = &identities[rng.below(conversations)];
            hostile.push(records.len());
            records.push(hostile_record(&mut rng, victim, run, hostile.len()));
        }
        Workload {
            records,
            valid: valid_total,
            hostile,
            scripts,
            model_faulted,
            identities,
            rounds,
        }
    }
}

fn bus_time(ms: i64) -> String {
    crate::message::format_rfc3339_ms(ms)
}

/// One record the worker must refuse: malformed JSON, wrong types, a huge payload, invalid
/// UTF-8, an unknown assistant, a key that is not the body's identity, a tombstone, a missing
/// field, an unknown schema version.
fn hostile_record(rng: &mut Rng, victim: &Identity, run: &str, n: usize) -> RawRecord {
    let key = Some(victim.key().into_bytes());
    let body = |v: Value| Some(serde_json::to_vec(&v).unwrap_or_default());
    let base = || {
        json!({
            "turn_id": format!("h-{run}-{n}"),
            "tenant_id": victim.tenant_id,
            "agent_id": victim.agent_id,
            "session_id": victim.session_id,
            "locale": "en",
            "text": "cancel my order",
        })
    };
    match rng.below(22) {
        0..=2 => (key, Some(b"{\"turn_id\": \"x\", \"text\": ".to_vec())),
        3..=5 => {
            let mut v = base();
            v["turn_id"] = json!(12345);
            v["text"] = json!(["not", "text"]);
            (key, body(v))
        }
        6 => {
            let mut v = base();
            v["text"] = json!("x".repeat(70_000));
            (key, body(v))
        }
        7..=9 => {
            let mut bytes = serde_json::to_vec(&base()).unwrap_or_default();
            let at = bytes.len() / 2;
            bytes.splice(at..at, [0xff, 0xfe, 0xc3]);
            (key, Some(bytes))
        }
        10..=12 => {
            let mut v = base();
            v["agent_id"] = json!("no-such-assistant");
            let k = format!(
                "{}/no-such-assistant/{}",
                victim.tenant_id, victim.session_id
            );
            (Some(k.into_bytes()), body(v))
        }
        13..=15 => {
            let k = format!("{}/{}/someone-else", victim.tenant_id, victim.agent_id);
            (Some(k.into_bytes()), body(base()))
        }
        16 => (key, None),
        17 => {
            let mut v = base();
            if let Some(o) = v.as_object_mut() {
                o.remove("session_id");
            }
            (key, body(v))
        }
        18 => {
            let mut v = base();
            v["schema"] = json!("turnstile.turn.v9");
            (key, body(v))
        }
        19 | 20 => {
            let mut v = base();
            v["tenant_id"] = json!("evil-corp");
            let k = format!("evil-corp/{}/{}", victim.agent_id, victim.session_id);
            (Some(k.into_bytes()), body(v))
        }
        _ => (key, Some(vec![0x00, 0x01, 0x02, 0x80, 0x81])),
    }
}
