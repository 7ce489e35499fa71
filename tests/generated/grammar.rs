//! A seeded generator of whole conversations for the example domain (`config/agents.example.yaml`).
//!
//! A conversation is plain data in the shape of a scenario file (`docs/scenarios.md`):
//! per turn the user input, the locale, the clock step, what each model component answers, what
//! the tools answer, and `restart` / `redeliver`. The one thing the scenario format cannot say is a
//! crash in the middle of a turn (`crash`), which the harness injects around the checkpoint store.
//!
//! A correction message (MG-6: `I meant PED-2002`, `não é 45, é 46`, `yes, but the number is
//! 210`) carries what it means ([`Correction`]), which the checker holds the engine to. MG-6
//! episodes (an opener with every argument of a tool that confirms, one or two corrections, an
//! answer) make corrections meet a pending confirmation often.

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
    /// What the text means when the grammar wrote it as a correction (MG-6): the checker's
    /// oracle. Not part of the scenario (a rendered file notes it in a comment).
    pub correction: Option<Correction>,
}

/// A correction message's meaning, as the grammar wrote it: `param` is corrected to `value`, the
/// canonical value (MG-4) a typed parser must store (`ped 3003` → `"PED-3003"`, `R$ 80,00` →
/// `"80.00"`, `46` → `46`).
#[derive(Debug, Clone, PartialEq)]
pub struct Correction {
    pub param: &'static str,
    pub value: Value,
    /// The one tool for which the text reads as this correction, when the reading depends on
    /// the tool: the bare number of an order id (`I meant 2002`) is the order id only where no
    /// other parameter reads a number (the cancellation); the address change reads it as the
    /// house number (MG-4a).
    pub only_tool: Option<&'static str>,
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
            correction: None,
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

// ---- MG-6: corrections, with what they mean ----

/// New values a correction gives, as typed and as stored (MG-4, MG-4a). House numbers stay
/// below 1000 so that no plain form of an order id (4 digits or more) could read them.
const NEW_ORDER_IDS: &[(&str, &str)] = &[
    ("PED-2002", "PED-2002"),
    ("ped 3003", "PED-3003"),
    ("Ped4004", "PED-4004"),
    ("PED_5005", "PED-5005"),
    ("ped#6006", "PED-6006"),
    ("ped-1001", "PED-1001"),
];
const NEW_HOUSES: &[i64] = &[7, 46, 120, 210];
const NEW_CEPS: &[(&str, &str)] = &[
    ("04538-133", "04538-133"),
    ("01001-000", "01001-000"),
    ("01310-100", "01310-100"),
];
const NEW_AMOUNTS: &[(&str, &str)] = &[
    ("R$ 80,00", "80.00"),
    ("$90.50", "90.50"),
    ("R$ 1.234,56", "1234.56"),
    ("79.99", "79.99"),
];

/// MG-6's correction forms (`{new}` the new value, `{old}` a value set aside, `{label}` the
/// parameter's word): en, then pt-BR. Each message is nothing but the correction.
const CORRECTION_FORMS_EN: &[&str] = &[
    "actually {new}",
    "I meant {new}",
    "make that {new}",
    "{new}, not {old}",
    "not {old}, {new}",
    "sorry, I meant {new}",
    "yes, but the {label} is {new}",
    "ok, make it {new} instead",
];
const CORRECTION_FORMS_PT: &[&str] = &[
    "é {new}, não {old}",
    "não é {old}, é {new}",
    "na verdade {new}",
    "quis dizer {new}",
    "sim, mas o {label} é {new}",
];

/// The parameters a correction message corrects (free text has no correction form).
const CORRECTABLE: &[&str] = &["order_id", "zip_code", "house_number", "amount"];

/// A correction message for one of `params` (or, rarely, any parameter) and what it means.
pub fn correction_text(rng: &mut Rng, params: &[&'static str]) -> (String, bool, Correction) {
    let own: Vec<&'static str> = params
        .iter()
        .copied()
        .filter(|p| CORRECTABLE.contains(p))
        .collect();
    let param = if !own.is_empty() && rng.chance(90) {
        *rng.pick(&own)
    } else {
        *rng.pick(CORRECTABLE)
    };
    let pt_br = rng.chance(40);
    // (typed, stored, old, en label, pt-BR label)
    let (new, value, old, label_en, label_pt): (String, Value, &str, &str, &str) = match param {
        "order_id" => {
            let (typed, stored) = *rng.pick(NEW_ORDER_IDS);
            let old = if stored == "PED-1001" {
                "PED-2002"
            } else {
                "PED-1001"
            };
            (typed.to_owned(), json!(stored), old, "order", "pedido")
        }
        "zip_code" => {
            let (typed, stored) = *rng.pick(NEW_CEPS);
            let old = if stored == "01310-100" {
                "04538-133"
            } else {
                "01310-100"
            };
            (typed.to_owned(), json!(stored), old, "zip", "CEP")
        }
        "house_number" => {
            let n = *rng.pick(NEW_HOUSES);
            let old = if n == 45 { "46" } else { "45" };
            (n.to_string(), json!(n), old, "number", "número")
        }
        _ => {
            let (typed, stored) = *rng.pick(NEW_AMOUNTS);
            let old = if stored == "71.99" {
                "R$ 80,00"
            } else {
                "R$ 71,99"
            };
            (typed.to_owned(), json!(stored), old, "amount", "valor")
        }
    };
    let mut correction = Correction {
        param,
        value,
        only_tool: None,
    };
    // MG-4a: the bare number of an order id, in a correction form of the collected id.
    let new = if param == "order_id" && rng.chance(20) {
        correction.only_tool = Some("retail_order_cancel");
        correction
            .value
            .as_str()
            .and_then(|id| id.strip_prefix("PED-"))
            .unwrap_or("2002")
            .to_owned()
    } else {
        new
    };
    let (form, label) = if pt_br {
        (*rng.pick(CORRECTION_FORMS_PT), label_pt)
    } else {
        (*rng.pick(CORRECTION_FORMS_EN), label_en)
    };
    let text = form
        .replace("{new}", &new)
        .replace("{old}", old)
        .replace("{label}", label);
    (text, pt_br, correction)
}

/// Openers that give every argument of a tool that asks for confirmation, so the transaction
/// awaits confirmation after one turn (LC-1): `(tool index in TOOLS, text, pt-BR)`.
const FULL_OPENERS: &[(usize, &str, bool)] = &[
    (0, "cancel order PED-1001", false),
    (0, "cancela o pedido ped-1001", true),
    (
        2,
        "change the address of order PED-1001 to 01310-100, number 45",
        false,
    ),
    (
        2,
        "quero mudar o endereço do pedido PED-1001 para o CEP 01310-100, número 45",
        true,
    ),
    (3, "contest the gym charge of R$ 71,99", false),
];

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

/// A random user text for a conversation about `focus`; a correction comes with its meaning
/// and its locale (a pt-BR form is sent as pt-BR).
fn text(rng: &mut Rng, focus: usize) -> (String, Option<(bool, Correction)>) {
    let plain = match rng.weighted(&[12, 24, 6, 5, 16, 5, 8, 8, 6, 2, 5, 7]) {
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
        10 => (*rng.pick(NOISE)).to_owned(),
        _ => {
            let (text, pt_br, correction) = correction_text(rng, TOOLS[focus].2);
            return (text, Some((pt_br, correction)));
        }
    };
    (plain, None)
}

/// One planned turn of an MG-6 episode.
enum Planned {
    /// Open the tool (index in [`TOOLS`]) with every argument; the classifier and the router are
    /// scripted to route it.
    Open(usize, &'static str, bool),
    Correct(String, bool, Correction),
    /// Answer the question: mostly a plain affirmation or the confirm button.
    Answer,
}

/// An MG-6 episode: a tool that asks for confirmation opened with every argument, one or two
/// corrections while its question is pending, then an answer — so corrections reach
/// `AWAITING_CONFIRMATION` often, whatever else the conversation does around them.
fn plan_episode(rng: &mut Rng) -> Vec<Planned> {
    let (tool, opener, pt_br) = *rng.pick(FULL_OPENERS);
    let mut plan = vec![Planned::Open(tool, opener, pt_br)];
    for _ in 0..1 + rng.below(2) {
        let (text, pt_br, correction) = correction_text(rng, TOOLS[tool].2);
        plan.push(Planned::Correct(text, pt_br, correction));
    }
    plan.push(Planned::Answer);
    plan
}

/// The conversation of `seed`: the same seed always gives the same conversation.
pub fn generate(seed: u64) -> Conversation {
    let mut rng = Rng::new(seed);
    let stickiness = rng.chance(75);
    // One tool the conversation is "about", so transactions get deep enough to confirm.
    let focus = rng.weighted(&[3, 1, 3, 3, 1]);
    let len = 1 + rng.below(14);
    let mut turns = Vec::with_capacity(len);
    let mut episode: Vec<Planned> = Vec::new();
    for i in 0..len {
        if episode.is_empty() && rng.chance(9) {
            episode = plan_episode(&mut rng);
            episode.reverse();
        }
        let mut locale = None;
        let mut correction = None;
        let mut opens = None;
        let input = match episode.pop() {
            Some(Planned::Open(tool, text, pt_br)) => {
                locale = Some(pt_br);
                opens = Some(tool);
                Input::Text(text.to_owned())
            }
            Some(Planned::Correct(text, pt_br, c)) => {
                locale = Some(pt_br);
                correction = Some(c);
                Input::Text(text)
            }
            Some(Planned::Answer) => match rng.weighted(&[60, 15, 25]) {
                0 => Input::Text((*rng.pick(PLAIN_AFFIRMATIONS)).to_owned()),
                1 => Input::Action(ChannelAction::Confirm),
                _ => Input::Text(text(&mut rng, focus).0),
            },
            None if rng.chance(14) => Input::Action(
                [
                    ChannelAction::Confirm,
                    ChannelAction::Decline,
                    ChannelAction::Cancel,
                    ChannelAction::Handoff,
                    ChannelAction::End,
                ][rng.weighted(&[45, 15, 15, 13, 12])],
            ),
            None if i == 0 && rng.chance(60) => Input::Text((*rng.pick(OPENERS)).to_owned()),
            None => {
                let (text, meaning) = text(&mut rng, focus);
                if let Some((pt_br, c)) = meaning {
                    locale = Some(pt_br);
                    correction = Some(c);
                }
                Input::Text(text)
            }
        };
        let after_ms = match rng.weighted(&[90, 7, 3]) {
            0 => 1000,
            1 => 1000 * (2 + rng.below(600) as i64),
            // Past SESSION_TTL (30 min): ST-6 expiry on this turn.
            _ => 31 * 60 * 1000,
        };
        let pt_br = rng.chance(30);
        let mut turn = GenTurn {
            input,
            pt_br: locale.unwrap_or(pt_br),
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
            correction,
        };
        if let Some(tool) = opens {
            let (agent, name, _, _, _) = TOOLS[tool];
            turn.classifier = Some(json!({"decision": "ROUTE", "confidence": 0.97}));
            turn.router = Some(json!({"agent": agent, "intent": name, "confidence": 0.97}));
        }
        turns.push(turn);
    }
    Conversation {
        seed,
        stickiness,
        turns,
    }
}
