//! The partition state machine with no Kafka: table-driven runs (each row an input at a time and
//! the commands it must give) and a property test of its invariants. Time is a value here: each
//! row says at which millisecond its input arrives.

use std::collections::{BTreeMap, HashMap, HashSet};

use proptest::prelude::*;

use super::*;

fn limits() -> Limits {
    Limits {
        max_in_flight: 4,
        max_in_flight_per_partition: 2,
        max_buffered_per_partition: 4,
        commit_interval: Duration::from_millis(50),
        drain_budget: Duration::from_secs(8),
    }
}

fn record(partition: i32, offset: i64, key: &str) -> FetchedRecord {
    FetchedRecord {
        partition,
        offset,
        key: Some(key.as_bytes().to_vec()),
        payload: Some(b"{}".to_vec()),
        timestamp_ms: Some(1_000),
    }
}

/// One row's input.
#[derive(Debug, Clone, Copy)]
enum Act {
    /// Assigned with a committed offset (-1: none).
    Assign(i32, i64),
    Epoch(i32, Option<i64>),
    Rec(i32, i64, &'static str),
    /// The running turn of that record finished.
    Done(i32, i64),
    Fenced(i32, i64),
    Revoke(&'static [i32], u64),
    Tick,
    Shutdown,
    /// The transaction in flight committed.
    TxOk,
    /// The transaction in flight failed, then was aborted.
    TxFailed,
}

/// The machine, a start time, the turns it started and the transaction in flight.
struct Run {
    machine: Partitions,
    t0: Instant,
    running: HashMap<(i32, i64), Start>,
    transaction: Option<Transaction>,
}

impl Run {
    fn new() -> Self {
        let t0 = Instant::now();
        Run {
            machine: Partitions::new(limits(), t0),
            t0,
            running: HashMap::new(),
            transaction: None,
        }
    }

    fn input(&mut self, act: Act) -> Input {
        match act {
            Act::Assign(partition, committed) => Input::Assigned {
                partition,
                offsets: PartitionOffsets::from_commit(committed, ""),
            },
            Act::Epoch(partition, epoch) => Input::Epoch { partition, epoch },
            Act::Rec(p, o, k) => Input::Record(record(p, o, k)),
            Act::Done(p, o) | Act::Fenced(p, o) => {
                let s = self.running.remove(&(p, o)).expect("a running turn");
                Input::Finished(Finished {
                    partition: p,
                    generation: s.generation,
                    offset: o,
                    key: s.key,
                    turn_id: format!("turn-{o}"),
                    outputs: Vec::new(),
                    record_timestamp_ms: s.record.timestamp_ms,
                    fenced: matches!(act, Act::Fenced(..)),
                    outcome: "applied",
                })
            }
            Act::Revoke(ps, id) => Input::Revoked {
                partitions: ps.to_vec(),
                id,
            },
            Act::Tick => Input::Tick,
            Act::Shutdown => Input::Shutdown,
            Act::TxOk | Act::TxFailed => Input::TransactionEnded {
                transaction: self.transaction.take().expect("a transaction in flight"),
                committed: matches!(act, Act::TxOk),
            },
        }
    }

    /// Feeds one row's input at `ms`; returns its commands, summarised.
    fn step(&mut self, ms: u64, act: Act) -> Vec<String> {
        let now = self.t0 + Duration::from_millis(ms);
        let mut lines = Vec::new();
        if matches!(act, Act::TxFailed) {
            let cmds = self.machine.on(Input::TransactionFailed, now);
            lines.extend(self.absorb(cmds));
        }
        let input = self.input(act);
        let cmds = self.machine.on(input, now);
        lines.extend(self.absorb(cmds));
        lines
    }

    fn absorb(&mut self, cmds: Vec<Command>) -> Vec<String> {
        let mut lines = Vec::new();
        for c in cmds {
            if let Some(line) = summary(&c) {
                lines.push(line);
            }
            match c {
                Command::Start(s) => {
                    self.running.insert((s.partition, s.record.offset), s);
                }
                Command::Commit(t) => {
                    assert!(self.transaction.is_none(), "two transactions in flight");
                    self.transaction = Some(t);
                }
                _ => {}
            }
        }
        lines
    }
}

/// A command as one short line; gauges and lag figures are left out.
fn summary(c: &Command) -> Option<String> {
    Some(match c {
        Command::Start(s) => format!(
            "start {}/{} {} e{} m{}",
            s.partition, s.record.offset, s.key, s.epoch, s.committed_mark
        ),
        Command::AcquireEpoch { partition, after } => {
            format!("epoch {partition} after {}ms", after.as_millis())
        }
        Command::Pause(ps) => format!("pause {ps:?}"),
        Command::Resume(ps) => format!("resume {ps:?}"),
        Command::ReleaseBytes(_) => "release".into(),
        Command::Dropped { partition, records } => format!("dropped {partition} {records}"),
        Command::Commit(t) => {
            let offsets: Vec<String> = t
                .offsets
                .iter()
                .map(|o| {
                    let extra = PartitionOffsets::from_commit(o.offset, &o.metadata);
                    let above: Vec<i64> = (o.offset..o.offset + 20)
                        .filter(|x| extra.is_completed(*x))
                        .collect();
                    format!("{}@{}{above:?}", o.partition, o.offset)
                })
                .collect();
            let turns: Vec<String> = t
                .turns
                .iter()
                .map(|c| format!("{}/{}", c.partition, c.offset))
                .collect();
            format!("commit {} turns {}", offsets.join(" "), turns.join(","))
        }
        Command::AnswerRevocation(id) => format!("answer {id}"),
        Command::Cache(CacheCommand::Forget(p, why)) => format!("forget {p} {}", why.as_str()),
        Command::Cache(CacheCommand::Suspend) => "cache suspend".into(),
        Command::Cache(CacheCommand::Resume) => "cache resume".into(),
        Command::Cache(CacheCommand::InFlight(..)) | Command::Gauges { .. } | Command::Lag(_) => {
            return None
        }
        Command::ClearLag(p) => format!("clear-lag {p}"),
        Command::Stop => "stop".into(),
    })
}

/// Plays a table: each row is (millisecond, input, the commands it must give).
fn play(table: &[(u64, Act, &[&str])]) -> Run {
    let mut run = Run::new();
    for (i, (ms, act, want)) in table.iter().enumerate() {
        let got = run.step(*ms, *act);
        assert_eq!(got, *want, "row {i}: {act:?} at {ms} ms");
    }
    run
}

use Act::*;

/// assign → records → turn finished → commit → revoke mid-turn → commit → drain at shutdown.
#[test]
fn assign_records_commit_revoke_mid_turn_and_drain() {
    let run = play(&[
        (0, Assign(0, 10), &["epoch 0 after 0ms"]),
        (0, Rec(0, 10, "a"), &[]),
        (1, Epoch(0, Some(7)), &["start 0/10 a e7 m-1"]),
        (2, Rec(0, 11, "a"), &[]), // a's second record waits for its first
        (2, Rec(0, 12, "b"), &["start 0/12 b e7 m-1"]),
        (3, Done(0, 12), &[]), // not due: committed at the interval
        (60, Tick, &["commit 0@10[12] turns 0/12"]), // 10 runs: the mark stays; 12 in metadata
        (61, Done(0, 10), &["start 0/11 a e7 m-1"]), // a's next record
        (62, TxOk, &["cache resume"]),
        (120, Tick, &["commit 0@11[12] turns 0/10"]),
        (121, TxOk, &["cache resume"]),
        (130, Rec(0, 13, "c"), &["start 0/13 c e7 m11"]),
        (131, Rec(0, 14, "c"), &[]),
        // Revoked with 11 and 13 running: 14 is dropped, the answer waits.
        (140, Revoke(&[0], 1), &["release", "dropped 0 1"]),
        (141, Rec(0, 15, "d"), &["release"]), // a revoking partition takes nothing
        (150, Done(0, 11), &[]),
        (
            160,
            Done(0, 13),
            &["forget 0 revoked", "commit 0@14[] turns 0/11,0/13"],
        ),
        (161, TxOk, &["cache resume", "clear-lag 0", "answer 1"]),
        (170, Rec(0, 14, "c"), &["release"]), // no longer held
        // Another assignment of it, and shutdown with a turn running.
        (200, Assign(0, 14), &["epoch 0 after 0ms"]),
        (201, Epoch(0, Some(8)), &[]),
        (202, Rec(0, 14, "c"), &["start 0/14 c e8 m-1"]),
        (203, Rec(0, 15, "c"), &[]),
        (204, Shutdown, &["release", "dropped 0 1", "pause [0]"]),
        (205, Rec(0, 16, "e"), &[]), // queued, never started while draining
        (210, Done(0, 14), &["commit 0@15[] turns 0/14"]), // drained: the flush
        (211, TxOk, &["cache resume", "stop"]),
    ]);
    assert!(run.machine.stopped());
    assert_eq!(run.machine.running(), 0);
}

/// A fenced turn forgets the partition's cached rows and is never committed; a failed
/// transaction suspends the cache and publishes its turns again first, in order.
#[test]
fn fenced_turns_and_failed_transactions() {
    play(&[
        (0, Assign(0, 0), &["epoch 0 after 0ms"]),
        (0, Epoch(0, Some(1)), &[]),
        (1, Rec(0, 0, "a"), &["start 0/0 a e1 m-1"]),
        (1, Rec(0, 1, "b"), &["start 0/1 b e1 m-1"]),
        (2, Fenced(0, 0), &["forget 0 fenced"]),
        (3, Done(0, 1), &[]),
        (60, Tick, &["commit 0@0[1] turns 0/1"]),
        (61, Rec(0, 2, "b"), &["start 0/2 b e1 m-1"]),
        (62, Done(0, 2), &[]),
        (63, TxFailed, &["cache suspend"]),
        // Retried at the next interval, 1 ahead of 2 (one key's replies stay in order).
        (120, Tick, &["commit 0@0[1, 2] turns 0/1,0/2"]),
        (121, TxOk, &["cache resume"]),
        // Nothing new: the fenced offset 0 holds the mark, and the metadata is committed again
        // every interval (as the committer always did).
        (180, Tick, &["commit 0@0[1, 2] turns "]),
    ]);
}

/// A revocation whose turn outlives the drain budget is answered at the budget; the late
/// finish of the old assignment is not committed and leaves the new assignment's key alone.
#[test]
fn a_revocation_out_of_budget_and_a_late_finish() {
    play(&[
        (0, Assign(0, 5), &["epoch 0 after 0ms"]),
        (0, Epoch(0, None), &["epoch 0 after 1000ms"]),
        (1000, Epoch(0, Some(2)), &["commit 0@5[] turns "]),
        (1001, TxOk, &["cache resume"]),
        (1002, Rec(0, 5, "a"), &["start 0/5 a e2 m5"]),
        (1003, Revoke(&[0], 9), &[]),
        (5000, Tick, &[]),
        // The budget is spent: released, and nothing new to commit, so answered at once.
        (9003, Tick, &["forget 0 revoked", "clear-lag 0", "answer 9"]),
        (9004, Assign(0, 6), &["epoch 0 after 0ms"]),
        (9005, Epoch(0, Some(3)), &[]),
        (9006, Rec(0, 6, "a"), &["start 0/6 a e3 m-1"]),
        (9007, Rec(0, 7, "a"), &[]),
        (9008, Done(0, 5), &[]), // the old turn: a's next record still waits for 0/6
        (9060, Tick, &["commit 0@6[] turns "]),
    ]);
}

/// A full buffer pauses the partition, below half resumes it; records the previous owner
/// finished are skipped; a flush whose transaction is never reported is answered at the timeout.
#[test]
fn buffers_skips_and_flush_timeout() {
    let mut run = Run::new();
    let mut offsets = PartitionOffsets::from_commit(0, "");
    for o in 0..3 {
        offsets.deliver(o);
    }
    offsets.complete(2);
    let (meta, _) = offsets.commit_metadata();
    let input = Input::Assigned {
        partition: 0,
        offsets: PartitionOffsets::from_commit(0, &meta),
    };
    let cmds = run.machine.on(input, run.t0);
    run.absorb(cmds);
    let rows: &[(u64, Act, &[&str])] = &[
        (0, Epoch(0, Some(1)), &[]),
        (1, Rec(0, 0, "a"), &["start 0/0 a e1 m-1"]),
        (1, Rec(0, 1, "a"), &[]),
        (1, Rec(0, 2, "a"), &["release"]), // finished by the previous owner
        (1, Rec(0, 3, "a"), &[]),
        (1, Rec(0, 4, "a"), &[]),
        (1, Rec(0, 5, "a"), &["pause [0]"]),
        (2, Done(0, 0), &["start 0/1 a e1 m-1"]),
        (3, Done(0, 1), &["start 0/3 a e1 m-1"]),
        (4, Done(0, 3), &["start 0/4 a e1 m-1"]),
        (5, Done(0, 4), &["resume [0]", "start 0/5 a e1 m-1"]),
        (5, Rec(0, 6, "a"), &[]),
        (60, Tick, &["commit 0@5[] turns 0/0,0/1,0/3,0/4"]),
        (61, Revoke(&[0], 4), &["release", "dropped 0 1"]),
        (62, Done(0, 5), &["forget 0 revoked"]), // the flush waits for the transaction in flight
        (63, TxOk, &["cache resume", "commit 0@6[] turns 0/5"]),
    ];
    for (ms, act, want) in rows {
        assert_eq!(run.step(*ms, *act), *want, "{act:?} at {ms} ms");
    }
    let _ = run.transaction.take(); // the flush's transaction is never reported
    let late = run.t0 + Duration::from_millis(63) + FLUSH_TIMEOUT;
    let cmds = run.machine.on(Input::Tick, late);
    let lines = run.absorb(cmds);
    assert_eq!(lines, ["clear-lag 0", "answer 4"]);
}

/// A random history's model: which offsets were delivered and finished, per assignment.
#[derive(Default)]
struct Model {
    delivered: BTreeMap<(i32, u64), Vec<i64>>,
    finished: HashSet<(i32, u64, i64)>,
    running_keys: HashSet<(i32, u64, String)>,
}

#[derive(Debug, Clone)]
enum Op {
    Assign(i32),
    Epoch(i32),
    Rec(i32, u8),
    Finish(prop::sample::Index, bool),
    Revoke(i32),
    Tick(u16),
    Shutdown,
    Report(bool),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        1 => (0i32..2).prop_map(Op::Assign),
        2 => (0i32..2).prop_map(Op::Epoch),
        8 => ((0i32..2), (0u8..4)).prop_map(|(p, k)| Op::Rec(p, k)),
        6 => (any::<prop::sample::Index>(), prop::bool::weighted(0.1))
            .prop_map(|(i, f)| Op::Finish(i, f)),
        1 => (0i32..2).prop_map(Op::Revoke),
        3 => (1u16..3_000).prop_map(Op::Tick),
        1 => Just(Op::Shutdown),
        3 => prop::bool::weighted(0.8).prop_map(Op::Report),
    ]
}

/// Checks one batch of commands against the model; records starts and transactions.
fn check(
    cmds: Vec<Command>,
    model: &mut Model,
    running: &mut Vec<Start>,
    transaction: &mut Option<Transaction>,
    machine: &Partitions,
) -> Result<(), TestCaseError> {
    for c in cmds {
        match c {
            Command::Start(s) => {
                let key = (s.partition, s.generation, s.key.clone());
                prop_assert!(
                    model.running_keys.insert(key),
                    "two turns of one key: {:?}",
                    s
                );
                running.push(s);
            }
            Command::Commit(t) => {
                prop_assert!(transaction.is_none(), "two transactions in flight");
                for o in &t.offsets {
                    let delivered = model.delivered.get(&(o.partition, o.generation));
                    let meta = PartitionOffsets::from_commit(o.offset, &o.metadata);
                    for d in delivered.into_iter().flatten() {
                        let done = model.finished.contains(&(o.partition, o.generation, *d));
                        prop_assert!(done || *d >= o.offset, "committed past unfinished {}", d);
                        prop_assert!(
                            done || !meta.is_completed(*d),
                            "unfinished {} in metadata",
                            d
                        );
                    }
                }
                for c in &t.turns {
                    let o = t.offsets.iter().find(|o| o.partition == c.partition);
                    let covered = o.is_some_and(|o| {
                        c.offset < o.offset
                            || PartitionOffsets::from_commit(o.offset, &o.metadata)
                                .is_completed(c.offset)
                    });
                    prop_assert!(
                        covered,
                        "outputs of {} published without its offset",
                        c.offset
                    );
                }
                *transaction = Some(t);
            }
            _ => {}
        }
    }
    prop_assert!(machine.running() <= limits().max_in_flight);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Over random histories (assignments, records, finishes in any order, fenced turns,
    /// revocations, failed transactions, shutdown): never a commit past an unfinished offset,
    /// never two turns of one key at once, never over the in-flight bound.
    #[test]
    fn never_commits_past_unfinished_never_runs_a_key_twice(
        ops in prop::collection::vec(op(), 1..300),
    ) {
        let t0 = Instant::now();
        let mut now = t0;
        let mut machine = Partitions::new(limits(), t0);
        let mut model = Model::default();
        let mut running: Vec<Start> = Vec::new();
        let mut transaction: Option<Transaction> = None;
        let mut next_offset: HashMap<i32, i64> = HashMap::new();
        let mut generations: HashMap<i32, u64> = HashMap::new();
        let mut generation = 0u64;
        let mut revocations = 0u64;
        for op in ops {
            now += Duration::from_millis(1);
            let input = match op {
                Op::Assign(p) => {
                    generation += 1;
                    generations.insert(p, generation);
                    let start = *next_offset.entry(p).or_insert(0);
                    Input::Assigned { partition: p, offsets: PartitionOffsets::from_commit(start, "") }
                }
                Op::Epoch(p) => Input::Epoch { partition: p, epoch: Some(1) },
                Op::Rec(p, k) => {
                    let o = next_offset.entry(p).or_insert(0);
                    let offset = *o;
                    *o += 1;
                    if let Some(g) = generations.get(&p) {
                        model.delivered.entry((p, *g)).or_default().push(offset);
                    }
                    Input::Record(record(p, offset, &format!("k{k}")))
                }
                Op::Finish(ix, fenced) => {
                    if running.is_empty() {
                        continue;
                    }
                    let s = running.remove(ix.index(running.len()));
                    model.running_keys.remove(&(s.partition, s.generation, s.key.clone()));
                    if !fenced {
                        model.finished.insert((s.partition, s.generation, s.record.offset));
                    }
                    Input::Finished(Finished {
                        partition: s.partition,
                        generation: s.generation,
                        offset: s.record.offset,
                        key: s.key,
                        turn_id: String::new(),
                        outputs: Vec::new(),
                        record_timestamp_ms: None,
                        fenced,
                        outcome: "applied",
                    })
                }
                Op::Revoke(p) => {
                    revocations += 1;
                    generations.remove(&p);
                    Input::Revoked { partitions: vec![p], id: revocations }
                }
                Op::Tick(ms) => {
                    now += Duration::from_millis(u64::from(ms));
                    Input::Tick
                }
                Op::Shutdown => Input::Shutdown,
                Op::Report(ok) => match transaction.take() {
                    Some(t) => Input::TransactionEnded { transaction: t, committed: ok },
                    None => continue,
                },
            };
            let cmds = machine.on(input, now);
            check(cmds, &mut model, &mut running, &mut transaction, &machine)?;
        }
    }
}
