//! One `turnstile run` child process of an end-to-end run, and what the runner keeps to watch
//! it: readiness, the group's committed offsets, the output reader, the log.

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant};

use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::{Offset, TopicPartitionList};

use super::outputs::Outputs;
use super::{CATCH_UP_TIMEOUT, LOG_TAIL_LINES, READY_TIMEOUT, STOP_GRACE};
use crate::message::Topics;
use crate::testkit::worker_process;

/// One worker child process and what the runner keeps to watch it.
pub(super) struct Worker {
    pub(super) n: usize,
    pub(super) exe: PathBuf,
    pub(super) env: Vec<(String, String)>,
    pub(super) topics: Topics,
    pub(super) child: Option<Child>,
    pub(super) port: u16,
    pub(super) log_path: PathBuf,
    pub(super) reader: Outputs,
    /// A consumer in the worker's group that never subscribes: it only reads committed offsets
    /// and watermarks.
    pub(super) offsets: BaseConsumer,
    pub(super) ready: bool,
}

impl Worker {
    /// Starts `turnstile run` with the worker's environment on a free loopback port.
    pub(super) fn spawn(&mut self) -> Result<(), String> {
        let port = worker_process::free_port()?;
        let mut env = self.env.clone();
        env.push(("TURNSTILE_LISTEN".into(), format!("127.0.0.1:{port}")));
        let banner = format!("e2e runner: starting worker {} on port {port}", self.n);
        self.child = Some(worker_process::spawn(
            &self.exe,
            &env,
            &self.log_path,
            &banner,
        )?);
        self.port = port;
        self.ready = false;
        Ok(())
    }

    /// Polls `/readyz` until 200 (group joined, store and broker reachable).
    pub(super) fn wait_ready(&mut self) -> Result<(), String> {
        let started = Instant::now();
        let mut respawns = 0;
        loop {
            if let Some(exited) = self.exited() {
                // The port picked may have been taken in between; one more try then.
                if exited.code == Some(64) && respawns < 2 && self.log_mentions("TURNSTILE_LISTEN")
                {
                    respawns += 1;
                    self.spawn()?;
                    continue;
                }
                return Err(format!(
                    "worker {} exited ({}) before it was ready{}",
                    self.n,
                    exited.text,
                    self.log_tail()
                ));
            }
            if worker_process::readyz(self.port) {
                self.ready = true;
                return Ok(());
            }
            if started.elapsed() >= READY_TIMEOUT {
                return Err(format!(
                    "worker {} was not ready (/readyz on 127.0.0.1:{}) within {} s{}",
                    self.n,
                    self.port,
                    READY_TIMEOUT.as_secs(),
                    self.log_tail()
                ));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// How the child ended, when it has.
    pub(super) fn exited(&mut self) -> Option<Exited> {
        match self.child.as_mut().map(Child::try_wait) {
            Some(Ok(Some(status))) => Some(Exited {
                code: status.code(),
                text: status.to_string(),
            }),
            // No child, or it cannot be asked: treat it as gone so the caller respawns.
            None => Some(Exited {
                code: None,
                text: "not running".into(),
            }),
            Some(Err(e)) => Some(Exited {
                code: None,
                text: format!("cannot be asked: {e}"),
            }),
            Some(Ok(None)) => None,
        }
    }

    /// SIGKILL and reap.
    pub(super) fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            worker_process::kill(&mut child);
        }
        self.ready = false;
    }

    /// SIGTERM, so the worker drains and leaves its group; SIGKILL if it does not stop in time.
    pub(super) fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            worker_process::terminate(&mut child, STOP_GRACE);
        }
    }

    /// The group's committed offset of inbound `partition` (the next offset to process).
    pub(super) fn committed(&self, partition: i32) -> Option<i64> {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(&self.topics.inbound, partition);
        let committed = self
            .offsets
            .committed_offsets(tpl, Duration::from_secs(5))
            .ok()?;
        let element = committed.find_partition(&self.topics.inbound, partition)?;
        match element.offset() {
            Offset::Offset(o) => Some(o),
            _ => None,
        }
    }

    /// Reads the output topics up to their current high watermarks: everything the worker has
    /// appended so far that is committed (or aborted) is then seen (or skipped).
    pub(super) fn catch_up(&mut self) {
        let mut marks = Vec::new();
        for (topic, partition) in &self.reader.partitions {
            if let Ok((_, high)) =
                self.offsets
                    .fetch_watermarks(topic, *partition, Duration::from_secs(5))
            {
                marks.push((topic.clone(), *partition, high));
            }
        }
        let started = Instant::now();
        while !self.reader.caught_up(&marks) && started.elapsed() < CATCH_UP_TIMEOUT {
            self.reader.poll_for(Duration::from_millis(20));
        }
    }

    fn log_text(&self) -> String {
        let mut text = String::new();
        if let Ok(mut f) = File::open(&self.log_path) {
            let _ = f.read_to_string(&mut text);
        }
        text
    }

    fn log_mentions(&self, needle: &str) -> bool {
        self.log_text()
            .rsplit("----- e2e runner:")
            .next()
            .is_some_and(|last| last.contains(needle))
    }

    /// The last lines of the worker's log, for a failure message.
    pub(super) fn log_tail(&self) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(LOG_TAIL_LINES)..];
        let mut out = format!("\nlast lines of {}:", self.log_path.display());
        for line in tail {
            let short: String = line.chars().take(400).collect();
            out.push_str("\n  ");
            out.push_str(&short);
        }
        out
    }
}

/// How a worker process ended.
pub(super) struct Exited {
    pub(super) code: Option<i32>,
    pub(super) text: String,
}

impl Drop for Worker {
    /// A runner that returns early must not leave workers behind.
    fn drop(&mut self) {
        self.kill();
    }
}
