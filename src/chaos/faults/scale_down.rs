//! The scale-down measurement (issue 25, item 6): three workers share the inbound topic under a
//! steady stream of turns, then either two of them get SIGTERM at once (a StatefulSet with
//! `podManagementPolicy: Parallel` scaled 3 → 1) or one is SIGKILLed with a transaction open
//! (its outputs written, never committed: the committer's fault hook
//! `TURNSTILE_FAULT_HOLD_TRANSACTION_FILE`). A `read_committed` reader of the output topics
//! stamps when each record became visible; from that, the inbound copy and the signal's moment,
//! [`Stall`] reports how long readers and customers waited. Measured, never judged: timing
//! decides no verdict, only the checker's findings do (no lost, no duplicated output).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::harness::Harness;
use super::{Fault, Injected, Plan};
use crate::chaos::checker::InboundCopy;
use crate::clock::now_ms;
use crate::message::Topics;
use crate::testkit::bus::{OutputReader, ReadMessage};

/// Workers before the scale-down.
pub const WORKERS: usize = 3;
/// Traffic before the signal: every worker holds partitions and the rates settle.
const BASELINE: Duration = Duration::from_secs(20);
/// The Kubernetes default grace period the chart keeps (`terminationGracePeriodSeconds: 30`):
/// a SIGTERMed worker still running after it is SIGKILLed.
const GRACE: Duration = Duration::from_secs(30);
/// The window before the signal its "before" figures come from (after the group settled).
const BASELINE_WINDOW_MS: i64 = 15_000;
/// The worker log line of the hold hook (`worker::fault::HoldTransaction`).
const HOLDING: &str = "Fault injection: holding a Kafka transaction open";

/// What the harness did and when, for [`Stall::measure`].
#[derive(Debug, Clone, Default)]
pub struct Signal {
    /// Wall-clock ms of the signal (SIGTERM sent, or SIGKILL of the held worker).
    pub at_ms: i64,
    /// SIGTERM: per signalled worker, how long it took to exit (`None`: killed after the grace).
    pub exits: Vec<Option<Duration>>,
    /// SIGKILL: from arming the hold to the kill (the hook's flush plus the log poll).
    pub held_for: Option<Duration>,
    /// Wall-clock ms the last inbound record was produced.
    pub production_end_ms: i64,
}

/// How long readers waited around the signal, from the reader's arrival stamps.
#[derive(Debug, Clone, Default)]
pub struct Stall {
    pub signal: Signal,
    pub drain_budget: Duration,
    pub transaction_timeout: Duration,
    pub session_timeout: Duration,
    /// Output record visible to the reader minus its producer timestamp: how long a
    /// `read_committed` reader waited for a record that was already written. Before the signal
    /// (its last 15 s) and after it (max), and the partition of the worst one after it.
    pub visibility_before_ms: i64,
    pub visibility_after_ms: i64,
    pub visibility_after_partition: Option<(String, i32)>,
    /// Reply visible minus the inbound record's timestamp: what the customer waited (turns
    /// answered in the 15 s before the signal, and after it: max and 99th percentile).
    pub turn_wait_before_ms: i64,
    pub turn_wait_after_ms: i64,
    pub turn_wait_after_p99_ms: i64,
    /// The longest time an inbound partition went without a new reply: in the baseline (the
    /// last 15 s before the signal) and over the signal (a gap ending after it and starting
    /// before production ended), with that partition.
    pub gap_before_ms: i64,
    pub gap_after_ms: i64,
    pub gap_after_partition: Option<i32>,
}

/// Starts the two extra workers (worker 2 armed with the hold hook for the kill) and waits until
/// all three are ready and the group settled; watching the outputs meanwhile.
pub(super) fn start_workers(h: &mut Harness, fault: Fault) -> Result<(), String> {
    for w in 1..WORKERS {
        let extra = if fault == Fault::KillInTransaction && w == WORKERS - 1 {
            vec![(
                "TURNSTILE_FAULT_HOLD_TRANSACTION_FILE".to_owned(),
                hold_file(h).display().to_string(),
            )]
        } else {
            Vec::new()
        };
        h.spawn_with(w, None, &extra)?;
    }
    // Ready, and every worker was assigned partitions at least once: the group has settled.
    let until = Instant::now() + Duration::from_secs(90);
    while !(0..WORKERS).all(|w| h.ready(w) && h.log_contains(w, "Partitions assigned")) {
        if Instant::now() > until {
            return Err(
                "the three workers did not all join and hold partitions within 90 s".into(),
            );
        }
        h.watch(Duration::from_millis(200));
    }
    eprintln!("  {WORKERS} workers ready, each holding partitions");
    Ok(())
}

fn hold_file(h: &Harness) -> std::path::PathBuf {
    h.log_dir.join("hold-transaction")
}

/// After the baseline: SIGTERM workers 1 and 2 at once and wait for both to exit (SIGKILL after
/// the grace period), or arm worker 2's hold and SIGKILL it once its transaction is held.
pub(super) fn inject(h: &mut Harness, fault: Fault, injected: &mut Injected) -> Result<(), String> {
    h.watch(BASELINE);
    let mut signal = Signal::default();
    if fault == Fault::ScaleDown {
        signal.at_ms = now_ms();
        let sent = Instant::now();
        for w in 1..WORKERS {
            h.signal_term(w);
        }
        eprintln!("  SIGTERM to workers 1 and 2 (scale {WORKERS} -> 1)");
        signal.exits = vec![None; WORKERS - 1];
        while sent.elapsed() < GRACE && signal.exits.iter().any(Option::is_none) {
            h.watch(Duration::from_millis(20));
            for w in 1..WORKERS {
                if signal.exits[w - 1].is_none() && h.reap_if_exited(w) {
                    signal.exits[w - 1] = Some(sent.elapsed());
                }
            }
        }
        for w in 1..WORKERS {
            h.kill(w);
        }
        eprintln!("  exits after the signal: {:?}", signal.exits);
        injected.restarts += WORKERS - 1;
    } else {
        let file = hold_file(h);
        std::fs::write(&file, b"hold").map_err(|e| format!("{}: {e}", file.display()))?;
        let armed = Instant::now();
        while !h.log_contains(WORKERS - 1, HOLDING) {
            if armed.elapsed() > Duration::from_secs(30) {
                return Err("worker 2 held no transaction within 30 s of the hold".into());
            }
            h.watch(Duration::from_millis(10));
        }
        h.kill(WORKERS - 1);
        signal.at_ms = now_ms();
        signal.held_for = Some(armed.elapsed());
        eprintln!(
            "  SIGKILL of worker 2 with a transaction open ({:.2} s after the hold was armed)",
            armed.elapsed().as_secs_f64()
        );
        injected.kills += 1;
    }
    injected.signal = Some(signal);
    Ok(())
}

/// The run's timings as the workers read them (their own defaults, then the harness's env).
pub(super) fn timings(env: &[(String, String)]) -> (Duration, Duration, Duration) {
    let vars: HashMap<&str, &str> = env.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let config =
        crate::worker::config::WorkerConfig::from_env(|k| vars.get(k).map(|v| (*v).to_owned()))
            .unwrap_or_default();
    (
        config.drain_budget,
        config.transaction_timeout,
        config.session_timeout,
    )
}

impl Stall {
    /// Computes every figure from the reader's records and arrival stamps and the inbound copy.
    pub fn measure(
        signal: Signal,
        env: &[(String, String)],
        reader: &OutputReader,
        inbound: &[InboundCopy],
        topics: &Topics,
    ) -> Stall {
        Stall::from_records(
            signal,
            env,
            &reader.seen,
            &reader.arrived_ms,
            inbound,
            topics,
        )
    }

    /// [`Stall::measure`] on the records (`seen`) and when each became visible (`arrived_ms`).
    pub fn from_records(
        signal: Signal,
        env: &[(String, String)],
        seen: &[ReadMessage],
        arrived_ms: &[i64],
        inbound: &[InboundCopy],
        topics: &Topics,
    ) -> Stall {
        let (drain_budget, transaction_timeout, session_timeout) = timings(env);
        let s = signal.at_ms;
        let mut stall = Stall {
            drain_budget,
            transaction_timeout,
            session_timeout,
            ..Stall::default()
        };
        // Inbound partition and timestamp of every valid turn, by turn id.
        let mut turns: HashMap<String, (i32, i64)> = HashMap::new();
        for r in inbound {
            let turn_id = r
                .payload
                .as_deref()
                .and_then(|p| serde_json::from_slice::<serde_json::Value>(p).ok())
                .and_then(|v| v.get("turn_id")?.as_str().map(str::to_owned));
            if let (Some(t), Some(ts)) = (turn_id, r.timestamp_ms) {
                turns.insert(t, (r.partition, ts));
            }
        }
        let mut waits_after = Vec::new();
        let mut arrivals: HashMap<i32, Vec<i64>> = HashMap::new();
        for (m, &at) in seen.iter().zip(arrived_ms) {
            let baseline = at < s && at >= s - BASELINE_WINDOW_MS;
            if let Some(ts) = m.timestamp_ms {
                let wait = at - ts;
                if baseline {
                    stall.visibility_before_ms = stall.visibility_before_ms.max(wait);
                } else if wait > stall.visibility_after_ms {
                    stall.visibility_after_ms = wait;
                    stall.visibility_after_partition = Some((m.topic.clone(), m.partition));
                }
            }
            if m.topic != topics.replies {
                continue;
            }
            let Some(&(partition, produced)) = m.turn_id.as_ref().and_then(|t| turns.get(t)) else {
                continue;
            };
            arrivals.entry(partition).or_default().push(at);
            if baseline {
                stall.turn_wait_before_ms = stall.turn_wait_before_ms.max(at - produced);
            } else if at >= s {
                waits_after.push(at - produced);
            }
        }
        waits_after.sort_unstable();
        stall.turn_wait_after_ms = waits_after.last().copied().unwrap_or(0);
        stall.turn_wait_after_p99_ms = waits_after
            .get((waits_after.len() * 99 / 100).min(waits_after.len().saturating_sub(1)))
            .copied()
            .unwrap_or(0);
        for (partition, mut at) in arrivals {
            at.sort_unstable();
            for pair in at.windows(2) {
                let (from, to) = (pair[0], pair[1]);
                let gap = to - from;
                if to < s && from >= s - BASELINE_WINDOW_MS {
                    stall.gap_before_ms = stall.gap_before_ms.max(gap);
                } else if to >= s && from <= signal.production_end_ms && gap > stall.gap_after_ms {
                    stall.gap_after_ms = gap;
                    stall.gap_after_partition = Some(partition);
                }
            }
        }
        stall.signal = signal;
        stall
    }

    /// The measurement as a table for people, one row per figure, against its target.
    pub fn render(&self, fault: Fault) -> String {
        let secs = |ms: i64| format!("{:.2} s", ms as f64 / 1000.0);
        let (target_name, target) = if fault == Fault::ScaleDown {
            ("drain budget", self.drain_budget)
        } else {
            ("transaction timeout", self.transaction_timeout)
        };
        let mut out = format!(
            "\n{} — drain budget {:.1} s, transaction timeout {:.1} s, session timeout {:.1} s\n\n| figure | before the signal | after the signal | target |\n|---|---|---|---|\n",
            fault.name(),
            self.drain_budget.as_secs_f64(),
            self.transaction_timeout.as_secs_f64(),
            self.session_timeout.as_secs_f64()
        );
        let worst = self
            .visibility_after_partition
            .as_ref()
            .map(|(t, p)| format!(" ({t}[{p}])"))
            .unwrap_or_default();
        out.push_str(&format!(
            "| read_committed wait for a written output (visible − producer timestamp), max | {} | **{}**{worst} | ≤ {} {:.1} s |\n",
            secs(self.visibility_before_ms),
            secs(self.visibility_after_ms),
            target_name,
            target.as_secs_f64()
        ));
        let gap_partition = self
            .gap_after_partition
            .map(|p| format!(" (inbound partition {p})"))
            .unwrap_or_default();
        out.push_str(&format!(
            "| longest time an inbound partition's replies stopped | {} | **{}**{gap_partition} | – |\n",
            secs(self.gap_before_ms),
            secs(self.gap_after_ms)
        ));
        out.push_str(&format!(
            "| turn wait (inbound produced → reply visible), max | {} | {} (p99 {}) | – |\n",
            secs(self.turn_wait_before_ms),
            secs(self.turn_wait_after_ms),
            secs(self.turn_wait_after_p99_ms)
        ));
        if !self.signal.exits.is_empty() {
            let exits: Vec<String> = self
                .signal
                .exits
                .iter()
                .map(|e| {
                    e.map_or("killed after the grace".to_owned(), |d| {
                        format!("{:.2} s", d.as_secs_f64())
                    })
                })
                .collect();
            out.push_str(&format!(
                "\nSIGTERMed workers exited after: {}\n",
                exits.join(", ")
            ));
        }
        if let Some(held) = self.signal.held_for {
            out.push_str(&format!(
                "\nSIGKILL {:.2} s after the hold was armed (the transaction was open that long before the kill at most)\n",
                held.as_secs_f64()
            ));
        }
        out
    }
}

/// Sizes of the measurement unless given: a steady stream of about 20 turns/s for 60 s.
pub fn default_plan(plan: &mut Plan, explicit_turns: bool, explicit_conversations: bool) {
    if !explicit_conversations {
        plan.conversations = 60;
    }
    if !explicit_turns {
        plan.turns = 1_200;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 100_000;

    fn topics() -> Topics {
        Topics {
            inbound: "t".into(),
            replies: "r".into(),
            events: "e".into(),
            dead_letters: "d".into(),
        }
    }

    fn turn(partition: i32, turn_id: &str, produced_ms: i64) -> InboundCopy {
        InboundCopy {
            partition,
            offset: 0,
            key: None,
            payload: Some(format!(r#"{{"turn_id": "{turn_id}"}}"#).into_bytes()),
            timestamp_ms: Some(produced_ms),
        }
    }

    fn reply(topic: &str, partition: i32, turn_id: &str, written_ms: i64) -> ReadMessage {
        ReadMessage {
            topic: topic.into(),
            partition,
            offset: 0,
            key: String::new(),
            payload: serde_json::Value::Null,
            output_id: None,
            turn_id: Some(turn_id.into()),
            timestamp_ms: Some(written_ms),
        }
    }

    #[test]
    fn waits_and_gaps_around_the_signal() {
        // Inbound partition 0: turns a (before), b and c (after, c blocked 12 s behind an open
        // transaction); partition 1: d before, e after. One event far in the past is ignored.
        let inbound = [
            turn(0, "a", S - 2_000),
            turn(0, "b", S + 500),
            turn(0, "c", S + 1_000),
            turn(1, "d", S - 1_000),
            turn(1, "e", S + 200),
        ];
        let seen = [
            reply("e", 0, "old", S - 60_000),
            reply("r", 0, "a", S - 1_500),
            reply("r", 2, "b", S + 800),
            reply("r", 2, "c", S + 1_200),
            reply("r", 1, "d", S - 900),
            reply("r", 1, "e", S + 400),
        ];
        let arrived = [S - 59_000, S - 1_400, S + 900, S + 13_200, S - 800, S + 500];
        let signal = Signal {
            at_ms: S,
            production_end_ms: S + 30_000,
            ..Signal::default()
        };
        let env = [("TURNSTILE_DRAIN_BUDGET_MS".to_owned(), "4000".to_owned())];
        let stall = Stall::from_records(signal, &env, &seen, &arrived, &inbound, &topics());
        assert_eq!(stall.drain_budget, Duration::from_secs(4));
        assert_eq!(stall.transaction_timeout, Duration::from_secs(9));
        // Before: only the 15 s window counts (the old event's 1 s wait is outside it).
        assert_eq!(stall.visibility_before_ms, 100);
        assert_eq!(stall.visibility_after_ms, 12_000);
        assert_eq!(stall.visibility_after_partition, Some(("r".to_owned(), 2)));
        assert_eq!(stall.turn_wait_before_ms, 600);
        assert_eq!(stall.turn_wait_after_ms, 12_200);
        // Partition 0's replies: S-1.4 s, S+0.9 s, S+13.2 s: the longest stop over the signal
        // is 12.3 s; partition 1's 1.3 s.
        assert_eq!(stall.gap_after_ms, 12_300);
        assert_eq!(stall.gap_after_partition, Some(0));
        assert_eq!(stall.gap_before_ms, 0);
    }
}
