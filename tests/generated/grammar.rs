//! A seeded generator of whole conversations for the example domain (`config/agents.example.yaml`).
//!
//! A conversation is plain data in the shape of a scenario file (`../shared/spec/scenarios.md`):
//! per turn the user input, the locale, the clock step, what each model component answers, what
//! the tools answer, and `restart` / `redeliver`. The one thing the scenario format cannot say is a
//! crash in the middle of a turn (`crash`), which the harness injects around the checkpoint store.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use turnstile::domain::turn::ChannelAction;

/// SplitMix64: tiny, seedable, and good enough to pick grammar branches.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x9E37_79B9_7F4A_7C15)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n as u64) as usize
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.next_u64() % 100 < percent
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }

    /// Picks an index by weight.
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
        let mut roll = self.next_u64() % total;
        for (i, w) in weights.iter().enumerate() {
            if roll < u64::from(*w) {
                return i;
            }
            roll -= u64::from(*w);
        }
        weights.len() - 1
    }
}

/// What the user sent.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    Text(String),
    Action(ChannelAction),
}

/// Where a turn's first delivery dies; the harness then restarts and delivers the turn again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Crash {
    /// The LC-4 write-ahead (EXECUTING) is stored, then the process dies before the tool call.
    AtWriteAhead,
    /// The turn ran (tool call included, if any) but its final checkpoint was never saved.
    BeforeFinalSave,
}

/// One generated turn, in the scenario format's terms.
#[derive(Debug, Clone, PartialEq)]
pub struct GenTurn {
    pub input: Input,
    pub pt_br: bool,
    pub after_ms: i64,
    /// Each component: `None` (unscripted: answers `error`), a fault word or the model's JSON.
    pub classifier: Option<Value>,
    pub router: Option<Value>,
    pub interpreter: Option<Value>,
    /// `tools:` of the scenario: `<tool>` → execution script, `<tool>.pre_validation` → answer.
    pub tools: BTreeMap<String, Value>,
    pub restart: bool,
    pub redeliver: bool,
    pub crash: Option<Crash>,
}

impl GenTurn {
    pub fn text(text: &str) -> GenTurn {
        GenTurn {
            input: Input::Text(text.to_owned()),
            pt_br: false,
            after_ms: 1000,
            classifier: None,
            router: None,
            interpreter: None,
            tools: BTreeMap::new(),
            restart: false,
            redeliver: false,
            crash: None,
        }
    }

    pub fn action(action: ChannelAction) -> GenTurn {
        GenTurn {
            input: Input::Action(action),
            ..GenTurn::text("")
        }
    }
}

/// A whole generated conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct Conversation {
    pub seed: u64,
    /// `ENABLE_ROUTE_STICKINESS` (SC-7).
    pub stickiness: bool,
    pub turns: Vec<GenTurn>,
}

/// The example domain as the spec's table states it (scenarios.md): `(agent, tool, parameters,
/// confirmation, pre-validation)`. The checker reads the same table, never the engine's catalog.
pub const TOOLS: &[(&str, &str, &[&str], bool, bool)] = &[
    ("retail", "retail_order_cancel", &["order_id"], true, true),
    (
        "retail",
        "retail_order_tracking",
        &["order_id"],
        false,
        false,
    ),
    (
        "retail",
        "retail_address_change",
        &["order_id", "zip_code", "house_number"],
        true,
        false,
    ),
    (
        "billing",
        "billing_contestation",
        &["subject", "amount"],
        true,
        false,
    ),
    ("billing", "billing_show_bill", &[], false, false),
];

/// Plain affirmations: the only texts the checker accepts as a deterministic confirmation (PR-6
/// as amended: affirmation words, judgements and politeness alone, no question, one polarity).
pub const PLAIN_AFFIRMATIONS: &[&str] = &[
    "yes",
    "Yes!",
    "yes, go ahead",
    "yes please",
    "ok",
    "okay",
    "sure",
    "correct",
    "that's right",
    "sim",
    "sim, pode",
    "pode sim",
    "confirmo",
    "isso",
    "claro",
    "está certo",
    "sim, por favor",
];

/// Affirmation-looking texts PR-6 (amended) does not recognise: questions and mixed polarity.
pub const NOT_PLAIN_AFFIRMATIONS: &[&str] = &["ok?", "pode?", "yes?", "não, pode", "no, wait, yes"];

const NEGATIONS: &[&str] = &[
    "no",
    "não",
    "nao",
    "nope",
    "não quero",
    "don't",
    "não está certo",
    "that's wrong",
    "not correct",
    "no thanks",
];

const CANCELS: &[&str] = &[
    "forget it",
    "esquece",
    "never mind the address change",
    "forget it, show my bill",
    "esquece, mostra minha fatura",
    "cancel that",
    "deixa pra lá",
];

const SESSION: &[&str] = &[
    "let me talk to a human, I have called 3 times",
    "quero falar com um atendente, já liguei 3 vezes",
    "I want a person",
    "bye",
    "tchau",
    "that's all, bye",
    "esquece, me liga no 98765-4321",
];

const OPENERS: &[&str] = &[
    "cancel my order",
    "cancel order PED-1001",
    "cancela o pedido ped-1001",
    "where is my order",
    "track order PED-2002",
    "change the delivery address",
    "change the address of order PED-1001 to 01310-100, number 45",
    "show my bill",
    "mostra minha fatura",
    "I want to contest a charge",
    "contest the gym charge of R$ 71,99",
    "quero contestar uma cobrança de R$ 1 234,56",
];

const NOISE: &[&str] = &[
    "order",
    "pedido",
    "hello",
    "",
    "🙂 ???",
    "what?",
    "I called 3 times",
];

const ORDER_IDS: &[&str] = &["PED-1001", "ped-1001", "PED-2002", "PED-123456"];
const CEPS: &[&str] = &["01310-100", "04538-133", "01310100"];
const HOUSES: &[&str] = &["45", "120", "7"];
const MONEY: &[&str] = &[
    "R$ 71,99",
    "1,234.56",
    "R$ 1 234,56",
    "R$ 1.234,56",
    "71.99",
    "$71.99",
];
const SUBJECTS: &[&str] = &[
    "gym charge",
    "duplicate charge on my card",
    "cobrança da academia",
];
const NEAR_MISSES: &[&str] = &[
    "PED-12",
    "ped-9",
    "01310-10",
    "the zip is 0131-10",
    "0",
    "the number is 0",
    "call me at 98765-4321 tomorrow",
    "31/02/2026",
    "R$ 1 234",
];
const DATES: &[&str] = &["15/01/2026", "2026-01-15", "amanhã"];

/// Model-side argument values: valid, invalid and foreign ones (MG-4 validates them all).
fn model_argument(rng: &mut Rng, tool_params: &[&str]) -> (String, Value) {
    let name = if !tool_params.is_empty() && rng.chance(85) {
        (*rng.pick(tool_params)).to_owned()
    } else {
        (*rng.pick(&[
            "order_id",
            "zip_code",
            "house_number",
            "amount",
            "subject",
            "foo",
        ]))
        .to_owned()
    };
    let value = match name.as_str() {
        "order_id" => rng
            .pick(&[
                json!("PED-4444"),
                json!("ped-1001"),
                json!("PED-12"),
                json!("nope"),
            ])
            .clone(),
        "zip_code" => rng
            .pick(&[json!("01310-100"), json!("04538133"), json!("0131-10")])
            .clone(),
        "house_number" => rng
            .pick(&[json!(45), json!("46"), json!(0), json!(-1)])
            .clone(),
        "amount" => rng
            .pick(&[json!("R$ 71,99"), json!("10.00"), json!("abc"), json!(10)])
            .clone(),
        "subject" => rng.pick(&[json!("gym charge"), json!("")]).clone(),
        _ => json!("bar"),
    };
    (name, value)
}

fn confidence(rng: &mut Rng, threshold: f64) -> f64 {
    // Below, at and above the threshold, plus clear highs and lows (SC-2, step 5, step 6).
    let options = [0.5, threshold - 0.01, threshold, threshold + 0.01, 0.97];
    let i = rng.weighted(&[1, 2, 2, 2, 6]);
    (options[i] * 100.0f64).round() / 100.0
}

fn fault(rng: &mut Rng) -> Value {
    json!(rng.pick(&["timeout", "invalid_json", "error"]))
}

fn classifier(rng: &mut Rng) -> Option<Value> {
    match rng.weighted(&[6, 10, 3, 81]) {
        0 => None,
        1 => Some(fault(rng)),
        // A label the model cannot return is invalid output (docs/decisions.md, runner).
        2 => Some(json!({"decision": "MAYBE", "confidence": 0.99})),
        _ => {
            let decision = ["CONTINUE", "ROUTE", "HUMAN_HANDOFF", "END_SESSION"]
                [rng.weighted(&[40, 40, 12, 8])];
            Some(json!({"decision": decision, "confidence": confidence(rng, 0.90)}))
        }
    }
}

fn router(rng: &mut Rng, focus: usize) -> Option<Value> {
    match rng.weighted(&[8, 9, 10, 2, 71]) {
        0 => None,
        1 => Some(fault(rng)),
        2 => Some(json!({"out_of_scope": true, "confidence": confidence(rng, 0.90)})),
        3 => Some(json!({"agent": "travel", "intent": "book_flight", "confidence": 0.97})),
        _ => {
            let tool = if rng.chance(60) {
                focus
            } else {
                rng.below(TOOLS.len())
            };
            let (agent, name, params, _, _) = TOOLS[tool];
            let intent = if rng.chance(85) {
                json!(name)
            } else {
                Value::Null
            };
            let mut arguments = serde_json::Map::new();
            if rng.chance(40) {
                for _ in 0..=rng.below(2) {
                    let (k, v) = model_argument(rng, params);
                    arguments.insert(k, v);
                }
            }
            Some(json!({
                "agent": agent,
                "intent": intent,
                "confidence": confidence(rng, 0.90),
                "arguments": arguments,
            }))
        }
    }
}

fn interpreter(rng: &mut Rng, focus: usize) -> Option<Value> {
    match rng.weighted(&[14, 10, 76]) {
        0 => None,
        1 => Some(fault(rng)),
        _ => {
            let act = ["provide", "cancel", "affirm", "deny", "unclear"]
                [rng.weighted(&[40, 12, 18, 14, 16])];
            let mut arguments = serde_json::Map::new();
            if act == "provide" || rng.chance(15) {
                for _ in 0..=rng.below(2) {
                    let (k, v) = model_argument(rng, TOOLS[focus].2);
                    arguments.insert(k, v);
                }
            }
            Some(json!({
                "act": act,
                "arguments": arguments,
                "confidence": confidence(rng, 0.80),
            }))
        }
    }
}

fn tools(rng: &mut Rng) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for (_, name, _, _, pre) in TOOLS {
        if rng.chance(25) {
            let script = match rng.weighted(&[4, 3, 3]) {
                0 => json!({"ok": true, "data": {"ref": "R-1"}}),
                1 => json!({"ok": false, "retryable": true, "error": "backend unavailable"}),
                _ => json!({"ok": false, "retryable": false, "error": "already shipped"}),
            };
            out.insert((*name).to_owned(), script);
        }
        if *pre && rng.chance(35) {
            let script = match rng.weighted(&[4, 35, 25]) {
                0 => json!({"eligible": true}),
                1 => json!({"eligible": false, "reason": "already shipped"}),
                // How a scenario says "could not be obtained" (docs/e2e.md, LC-1).
                _ => json!({"eligible": false, "reason": "pre_validation_unavailable: timeout"}),
            };
            out.insert(format!("{name}.pre_validation"), script);
        }
    }
    out
}

/// A value-bearing text for the focus tool: typed values with filler, labels, corrections.
fn value_text(rng: &mut Rng, focus: usize) -> String {
    let params = TOOLS[focus].2;
    let param = if params.is_empty() || rng.chance(15) {
        *rng.pick(&["order_id", "zip_code", "house_number", "amount", "subject"])
    } else {
        *rng.pick(params)
    };
    let value = match param {
        "order_id" => *rng.pick(ORDER_IDS),
        "zip_code" => *rng.pick(CEPS),
        "house_number" => *rng.pick(HOUSES),
        "amount" => *rng.pick(MONEY),
        _ => *rng.pick(SUBJECTS),
    };
    match rng.below(9) {
        0..=2 => value.to_owned(),
        3 => format!("it's {value}"),
        4 => format!("ok, {value}"),
        5 => match param {
            "order_id" => format!("{} {value}", rng.pick(&["the order is", "o pedido é"])),
            "zip_code" => format!("my zip is {value} and the number is {}", rng.pick(HOUSES)),
            "house_number" => format!("{} {value}", rng.pick(&["the number is", "o número é"])),
            "amount" => format!("the amount is {value}"),
            _ => format!("{value}, {}", rng.pick(MONEY)),
        },
        // MG-6 corrections: valid, invalid and half valid.
        6 => format!(
            "actually the CEP is {} and the number is {}",
            rng.pick(CEPS),
            rng.pick(&["0", "46", "120"])
        ),
        7 => format!(
            "wait, {}",
            rng.pick(&["the number is 46, not 10", "it's PED-2002"])
        ),
        _ => format!("{} {}", rng.pick(&["no, the order is", "actually"]), value),
    }
}

fn text(rng: &mut Rng, focus: usize) -> String {
    match rng.weighted(&[12, 24, 6, 5, 16, 5, 8, 8, 6, 2, 5]) {
        0 => (*rng.pick(OPENERS)).to_owned(),
        1 => value_text(rng, focus),
        2 => (*rng.pick(NEAR_MISSES)).to_owned(),
        3 => (*rng.pick(DATES)).to_owned(),
        4 => (*rng.pick(PLAIN_AFFIRMATIONS)).to_owned(),
        5 => (*rng.pick(NOT_PLAIN_AFFIRMATIONS)).to_owned(),
        6 => (*rng.pick(NEGATIONS)).to_owned(),
        7 => (*rng.pick(CANCELS)).to_owned(),
        8 => (*rng.pick(SESSION)).to_owned(),
        9 => "x".repeat(rng.below(300) + 1),
        _ => (*rng.pick(NOISE)).to_owned(),
    }
}

/// The conversation of `seed`: the same seed always gives the same conversation.
pub fn generate(seed: u64) -> Conversation {
    let mut rng = Rng::new(seed);
    let stickiness = rng.chance(75);
    // One tool the conversation is "about", so transactions get deep enough to confirm.
    let focus = rng.weighted(&[3, 1, 3, 3, 1]);
    let len = 1 + rng.below(14);
    let mut turns = Vec::with_capacity(len);
    for i in 0..len {
        let input = if rng.chance(14) {
            Input::Action(
                [
                    ChannelAction::Confirm,
                    ChannelAction::Decline,
                    ChannelAction::Cancel,
                    ChannelAction::Handoff,
                    ChannelAction::End,
                ][rng.weighted(&[45, 15, 15, 13, 12])],
            )
        } else if i == 0 && rng.chance(60) {
            Input::Text((*rng.pick(OPENERS)).to_owned())
        } else {
            Input::Text(text(&mut rng, focus))
        };
        let after_ms = match rng.weighted(&[90, 7, 3]) {
            0 => 1000,
            1 => 1000 * (2 + rng.below(600) as i64),
            // Past SESSION_TTL (30 min): ST-6 expiry on this turn.
            _ => 31 * 60 * 1000,
        };
        turns.push(GenTurn {
            input,
            pt_br: rng.chance(30),
            after_ms,
            classifier: if stickiness || rng.chance(20) {
                classifier(&mut rng)
            } else {
                None
            },
            router: router(&mut rng, focus),
            interpreter: interpreter(&mut rng, focus),
            tools: tools(&mut rng),
            restart: rng.chance(10),
            redeliver: rng.chance(15),
            crash: match rng.weighted(&[88, 6, 6]) {
                0 => None,
                1 => Some(Crash::AtWriteAhead),
                _ => Some(Crash::BeforeFinalSave),
            },
        });
    }
    Conversation {
        seed,
        stickiness,
        turns,
    }
}
