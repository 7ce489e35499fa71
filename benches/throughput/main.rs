//! Throughput and cost of the real worker (issue 5, part 1): `turnstile run` as a child process
//! against the real Kafka and Cassandra of `scripts/services.sh`, the OpenAI-compatible test
//! server answering after a configurable latency (or, with `--decision-model embeddings`, the
//! embedding decision model calling the real embeddings server), and the tool test server.
//!
//! Run (services up first: `bash scripts/services.sh up`):
//!
//! ```text
//! cargo bench --features harness --bench throughput -- --model-latency-ms 200 --conversations 1000 --partitions 12
//! cargo bench --features harness --bench throughput -- --decision-model embeddings --distinct-texts --conversations 50
//! ```
//!
//! Phases (`--phases`, comma-separated, run in this order):
//! - `worker`: the worker with the in-flight caps given (`--max-in-flight-per-partition`,
//!   `--max-in-flight`);
//! - `baseline`: the same worker, same inputs, partition-serial
//!   (`TURNSTILE_MAX_IN_FLIGHT_PER_PARTITION=1`, what a plain consumer loop does);
//! - `raw`: no engine: the same drivers, and a loop in this process making per message the I/O
//!   the worker's turn makes — checkpoint load, the turn's chat completions (classifier, router,
//!   interpreter) to the model test server and tool webhooks (pre-validate, execute) to the tool
//!   test server, the LC-4 write-ahead before an execution, the end-of-turn save, the reply and
//!   events in a Kafka transaction with the offsets — at the worker's concurrency cap: the
//!   ceiling the worker is compared with. The report's "I/O per turn" table shows the raw
//!   loop's calls next to the worker's, and the run fails when they differ;
//! - `backlog`: `--backlog-messages` inbound turns produced before the worker starts, then the
//!   worker's RSS sampled while it works the backlog down (bounded memory under backlog).
//!
//! Load: each conversation is a task sending one turn, waiting for its reply as a
//! `read_committed` reader sees it, then sending the next (paced like a person). Scripts cycle
//! through collect (`cancel my order`: classifier + router), typed fill (`PED-1001`: no model),
//! confirm + execute (`yes`: no model, the tool runs); every `--interrupt-every`-th conversation
//! interrupts the collection with `where is my order PED-1002?` (meant for the router → order
//! tracking; its order number fills the pending cancellation instead, typed parameters beating
//! routing).
//!
//! Each phase has its own topics, consumer group and session ids; the run migrates one keyspace
//! (`turnstile_bench_<secs>_<random>`) and drops it at the end. Results: a Markdown table printed
//! and written to `target/bench/throughput-<timestamp>.md`; worker logs in `target/bench/logs/`.
//!
//! Modules: [`args`] (options), [`workload`] (scripts, the raw loop's plan of each turn's I/O,
//! the load generator), [`reader`] (replies and outputs as a `read_committed` reader sees
//! them), [`phases`] (worker, baseline, backlog, raw), [`io`] (the I/O per turn of a phase and
//! the raw-vs-worker check), [`measure`] (CPU, RSS, the worker's metrics), [`report`] (rows,
//! ratios, the Markdown), [`servers`] (services, keyspace, test servers).

mod args;
mod io;
mod measure;
mod phases;
mod reader;
mod report;
mod servers;
mod workload;

use args::{parse_args, short_form, Args};
use phases::{backlog_phase, raw_phase, worker_phase};
use report::{check_short_form, raw_vs_worker, render, Row};
use servers::{drop_keyspace, manifest, setup, unix_secs};

fn main() {
    // `cargo test --all-targets --features harness` runs bench binaries without `--bench`: test
    // mode runs the short form (CI), which checks what the harness proves besides speed — every
    // turn answered, none dead-lettered, no model call on typed turns, the raw loop's I/O the
    // worker's — and never judges timing.
    let short = !std::env::args().any(|a| a == "--bench");
    let args = if short {
        short_form()
    } else {
        match parse_args() {
            Ok(a) => a,
            Err(e) => {
                eprintln!("throughput: {e}");
                std::process::exit(2);
            }
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(args.clone())) {
        Err(e) => {
            eprintln!("throughput: {e}");
            std::process::exit(1);
        }
        Ok(rows) if short => {
            if let Err(problems) = check_short_form(&args, &rows) {
                for p in &problems {
                    eprintln!("throughput short form: {p}");
                }
                std::process::exit(1);
            }
            eprintln!("throughput short form: every phase answered every turn");
        }
        Ok(_) => {}
    }
}

async fn run(args: Args) -> Result<Vec<Row>, String> {
    let fx = setup(&args).await?;
    let mut rows: Vec<Row> = Vec::new();
    let mut failures = Vec::new();
    for phase in &args.phases {
        eprintln!("[{phase}] starting");
        let result = match phase.as_str() {
            "worker" => worker_phase(&args, &fx, "worker", args.per_partition).await,
            "baseline" => worker_phase(&args, &fx, "baseline", 1).await,
            "raw" => raw_phase(&args, &fx).await,
            _ => backlog_phase(&args, &fx).await,
        };
        match result {
            Ok(r) => {
                eprintln!(
                    "[{phase}] {} turns in {:.1} s = {:.1} turns/s, p50 {:.0} ms",
                    r.turns, r.seconds, r.turns_per_s, r.p50_ms
                );
                rows.push(r);
            }
            Err(e) => {
                eprintln!("[{phase}] FAILED: {e}");
                failures.push(format!("{phase}: {e}"));
            }
        }
    }
    if args.keep_keyspace {
        // Kept for replaying the run's decision records (issue 26's 10,000-conversation check).
        eprintln!(
            "kept keyspace {k}: turnstile replay --sample 100000 --keyspace {k}",
            k = fx.keyspace
        );
    } else {
        drop_keyspace(&fx.keyspace).await;
    }

    // A raw loop that did not make the worker's I/O is no ceiling: the run fails, loudly.
    if let Some((reference, problems)) = raw_vs_worker(&rows) {
        if !problems.is_empty() {
            eprintln!("[raw] I/O per turn differs from the {reference} phase's:");
            for p in &problems {
                eprintln!("[raw]   {p}");
            }
            failures.push(format!(
                "raw: its I/O per turn differs from the {reference} phase's ({} differences, see \"I/O per turn\")",
                problems.len()
            ));
        }
    }

    let report = render(&args, &fx, &rows, &failures);
    println!("{report}");
    let path = args
        .out
        .clone()
        .unwrap_or_else(|| manifest("target/bench").join(format!("throughput-{}.md", unix_secs())));
    std::fs::write(&path, &report).map_err(|e| format!("{}: {e}", path.display()))?;
    eprintln!("results written to {}", path.display());
    if failures.is_empty() {
        Ok(rows)
    } else {
        Err(format!(
            "{} failure(s): {}",
            failures.len(),
            failures.join("; ")
        ))
    }
}
