//! The I/O a phase made per turn, counted the same way for the worker and the raw loop: chat
//! completions and tool webhooks as the test servers received them (by the turn id header),
//! outputs as the reply reader saw them, checkpoint loads and saves (the worker's metrics, the
//! raw loop's own counters). The raw phase is a fair ceiling only if its row matches the
//! worker's: [`mismatches`] is what fails the run when they part.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use turnstile::testkit::model_server::RecordedRequest;
use turnstile::testkit::tool_server::{ToolAction, ToolCall};

use crate::args::Args;
use crate::reader::Outputs;
use crate::workload::kind_of;

/// Counts of one kind of turn (or of all).
#[derive(Debug, Default, Clone, Copy)]
pub struct Counts {
    pub turns: u64,
    pub classifier: u64,
    pub router: u64,
    pub interpreter: u64,
    pub pre_validate: u64,
    pub execute: u64,
    pub replies: u64,
    pub events: u64,
    /// Chat request body bytes (for the mean body size).
    pub chat_bytes: u64,
}

impl Counts {
    fn add(&mut self, o: &Counts) {
        self.turns += o.turns;
        self.classifier += o.classifier;
        self.router += o.router;
        self.interpreter += o.interpreter;
        self.pre_validate += o.pre_validate;
        self.execute += o.execute;
        self.replies += o.replies;
        self.events += o.events;
        self.chat_bytes += o.chat_bytes;
    }

    fn chat(&self) -> u64 {
        self.classifier + self.router + self.interpreter
    }

    /// Per turn, in the table's column order.
    fn rates(&self) -> [(&'static str, f64); 7] {
        let n = self.turns.max(1) as f64;
        [
            ("classifier", self.classifier as f64 / n),
            ("router", self.router as f64 / n),
            ("interpreter", self.interpreter as f64 / n),
            ("pre-validate", self.pre_validate as f64 / n),
            ("execute", self.execute as f64 / n),
            ("replies", self.replies as f64 / n),
            ("events", self.events as f64 / n),
        ]
    }
}

/// A phase's I/O per turn.
#[derive(Debug, Default, Clone)]
pub struct PhaseIo {
    pub by_kind: BTreeMap<&'static str, Counts>,
    /// Checkpoint loads and saves (write-aheads included) per turn processed.
    pub loads_per_turn: f64,
    pub saves_per_turn: f64,
    /// Raw phase with `--decision-model embeddings`: embeddings calls made (the worker's have
    /// no counter).
    pub embeddings_calls: Option<u64>,
}

impl PhaseIo {
    /// Counts what the servers and the reader saw of the turns of this phase's load.
    pub fn collect(
        args: &Args,
        answered_by_kind: &BTreeMap<&'static str, u64>,
        requests: &[RecordedRequest],
        tool_calls: &[ToolCall],
        outputs: &Outputs,
    ) -> PhaseIo {
        let mut by_kind: BTreeMap<&'static str, Counts> = answered_by_kind
            .iter()
            .map(|(k, n)| {
                (
                    *k,
                    Counts {
                        turns: *n,
                        ..Counts::default()
                    },
                )
            })
            .collect();
        for r in requests {
            let Some(kind) = r.turn_id.as_deref().and_then(|t| kind_of(args, t)) else {
                continue;
            };
            let c = by_kind.entry(kind).or_default();
            match r.skill.as_deref() {
                Some("classifier") => c.classifier += 1,
                Some("router") => c.router += 1,
                Some("interpreter") => c.interpreter += 1,
                _ => {}
            }
            c.chat_bytes += r.body.to_string().len() as u64;
        }
        for call in tool_calls {
            let Some(kind) = call.turn_id.as_deref().and_then(|t| kind_of(args, t)) else {
                continue;
            };
            let c = by_kind.entry(kind).or_default();
            match call.action {
                ToolAction::PreValidate => c.pre_validate += 1,
                ToolAction::Execute => c.execute += 1,
            }
        }
        for (turn_id, (replies, events)) in outputs {
            let Some(kind) = kind_of(args, turn_id) else {
                continue;
            };
            let c = by_kind.entry(kind).or_default();
            c.replies += u64::from(*replies);
            c.events += u64::from(*events);
        }
        PhaseIo {
            by_kind,
            ..PhaseIo::default()
        }
    }

    pub fn total(&self) -> Counts {
        let mut t = Counts::default();
        for c in self.by_kind.values() {
            t.add(c);
        }
        t
    }

    /// `classifier 0.50, router 0.50, …` per turn over all kinds, for the notes.
    pub fn summary(&self) -> String {
        let total = self.total();
        let mut s: Vec<String> = total
            .rates()
            .iter()
            .map(|(name, r)| format!("{name} {r:.2}"))
            .collect();
        s.push(format!("checkpoint loads {:.2}", self.loads_per_turn));
        s.push(format!("saves {:.2}", self.saves_per_turn));
        if let Some(n) = self.embeddings_calls {
            s.push(format!(
                "embeddings calls {:.2}",
                n as f64 / total.turns.max(1) as f64
            ));
        }
        s.join(", ")
    }
}

/// Two per-turn rates differ when they are more than 0.05 calls per turn apart, or 5 % of the
/// larger above one call per turn.
fn differ(a: f64, b: f64) -> bool {
    (a - b).abs() > 0.05 * a.max(b).max(1.0)
}

/// Where the raw loop's I/O per turn parts from the worker's: per script kind (so a phase cut
/// short, whose mix of kinds differs, still compares), and the checkpoint loads and saves.
pub fn mismatches(worker: &PhaseIo, raw: &PhaseIo) -> Vec<String> {
    let mut out = Vec::new();
    for (kind, w) in &worker.by_kind {
        let Some(r) = raw.by_kind.get(kind) else {
            continue;
        };
        if w.turns == 0 || r.turns == 0 {
            continue;
        }
        for ((name, wr), (_, rr)) in w.rates().iter().zip(r.rates().iter()) {
            if differ(*wr, *rr) {
                out.push(format!(
                    "`{kind}` turns: {name} {rr:.2} per turn in raw, {wr:.2} in the worker"
                ));
            }
        }
    }
    for (name, w, r) in [
        (
            "checkpoint loads",
            worker.loads_per_turn,
            raw.loads_per_turn,
        ),
        (
            "checkpoint saves",
            worker.saves_per_turn,
            raw.saves_per_turn,
        ),
    ] {
        if differ(w, r) {
            out.push(format!(
                "{name}: {r:.2} per turn in raw, {w:.2} in the worker"
            ));
        }
    }
    out
}

/// The per-turn I/O table: one row per script kind and phase, so a reader sees that the raw
/// loop made the worker's calls.
pub fn table(phases: &[(&str, &PhaseIo)]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "| turn kind | phase | turns | classifier | router | interpreter | pre-validate | execute | replies | events | mean chat body bytes |"
    );
    let _ = writeln!(s, "|---|---|---|---|---|---|---|---|---|---|---|");
    let mut kinds: Vec<&str> = Vec::new();
    for (_, io) in phases {
        for k in io.by_kind.keys() {
            if !kinds.contains(k) {
                kinds.push(k);
            }
        }
    }
    let row = |s: &mut String, kind: &str, phase: &str, c: &Counts| {
        let rates: Vec<String> = c.rates().iter().map(|(_, r)| format!("{r:.2}")).collect();
        let body = if c.chat() > 0 {
            format!("{}", c.chat_bytes / c.chat())
        } else {
            "–".into()
        };
        let _ = writeln!(
            s,
            "| {kind} | {phase} | {} | {} | {body} |",
            c.turns,
            rates.join(" | ")
        );
    };
    for kind in kinds {
        for (phase, io) in phases {
            if let Some(c) = io.by_kind.get(kind) {
                row(&mut s, kind, phase, c);
            }
        }
    }
    for (phase, io) in phases {
        row(&mut s, "**all**", phase, &io.total());
    }
    s
}
