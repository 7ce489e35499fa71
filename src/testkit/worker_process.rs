//! `turnstile run` as a child process, started and stopped the same way by every harness that
//! needs a real worker (the end-to-end scenario runner, the fault harness, the Kafka worker
//! tests, the throughput bench).
//!
//! A child gets exactly the environment its harness gives it ([`WorkerEnv::vars`] plus what the
//! harness adds): a setting or topic name exported in the developer's shell cannot leak in.

use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::config::profiles::load_profiles;
use crate::message::Topics;

/// Variables a worker may need from the harness's own environment; everything else is cleared.
pub const PASSTHROUGH_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "TMPDIR",
    "LD_LIBRARY_PATH",
    "RUST_BACKTRACE",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// What a harness's workers share: where they read and write and which services they call.
#[derive(Debug, Clone)]
pub struct WorkerEnv {
    /// `RUST_LOG` for the child.
    pub log_filter: String,
    pub config: PathBuf,
    pub profiles: PathBuf,
    pub brokers: String,
    pub group_id: String,
    pub topics: Topics,
    pub keyspace: String,
    pub cql_contact: String,
    pub model_base_url: String,
    pub tools_base_url: String,
    pub session_timeout_ms: u64,
    /// Must stay below the session timeout (the worker refuses to start otherwise).
    pub drain_budget_ms: u64,
    /// `None`: the worker's default.
    pub commit_interval_ms: Option<u64>,
}

impl WorkerEnv {
    /// The child's whole environment, in the names `WorkerConfig::from_env` reads. Every profile
    /// that names an API key variable gets a dummy key: the worker refuses to start without it,
    /// and the model test server ignores keys.
    pub fn vars(&self) -> Result<Vec<(String, String)>, String> {
        let mut vars: Vec<(String, String)> = PASSTHROUGH_ENV
            .iter()
            .filter_map(|k| std::env::var(k).ok().map(|v| ((*k).to_owned(), v)))
            .collect();
        let mut set = |k: &str, v: String| vars.push((k.to_owned(), v));
        set("RUST_LOG", self.log_filter.clone());
        set("TURNSTILE_CONFIG", self.config.display().to_string());
        set("TURNSTILE_PROFILES", self.profiles.display().to_string());
        set("TURNSTILE_BROKERS", self.brokers.clone());
        set("TURNSTILE_GROUP_ID", self.group_id.clone());
        set("TURNSTILE_TOPIC_TURNS", self.topics.inbound.clone());
        set("TURNSTILE_TOPIC_REPLIES", self.topics.replies.clone());
        set("TURNSTILE_TOPIC_EVENTS", self.topics.events.clone());
        set(
            "TURNSTILE_TOPIC_DEAD_LETTERS",
            self.topics.dead_letters.clone(),
        );
        set("TURNSTILE_KEYSPACE", self.keyspace.clone());
        set("TURNSTILE_CQL_CONTACT", self.cql_contact.clone());
        set("TURNSTILE_MODEL_BASE_URL", self.model_base_url.clone());
        set("TURNSTILE_TOOLS_BASE_URL", self.tools_base_url.clone());
        set(
            "TURNSTILE_SESSION_TIMEOUT_MS",
            self.session_timeout_ms.to_string(),
        );
        set(
            "TURNSTILE_DRAIN_BUDGET_MS",
            self.drain_budget_ms.to_string(),
        );
        if let Some(ms) = self.commit_interval_ms {
            set("TURNSTILE_COMMIT_INTERVAL_MS", ms.to_string());
        }
        let profiles = load_profiles(&self.profiles)
            .map_err(|e| format!("{}: {e}", self.profiles.display()))?;
        for profile in profiles.profiles.values() {
            if let Some(var) = &profile.api_key_env {
                vars.push((var.clone(), "test-dummy-key".into()));
            }
        }
        Ok(vars)
    }
}

/// Starts `exe run` with exactly `vars`, stdout and stderr appended to `log` after a `banner`
/// line (a log that spans restarts shows where each incarnation began).
pub fn spawn(
    exe: &Path,
    vars: &[(String, String)],
    log: &Path,
    banner: &str,
) -> Result<Child, String> {
    let mut out = OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let err = out
        .try_clone()
        .map_err(|e| format!("cannot open {}: {e}", log.display()))?;
    let _ = writeln!(out, "----- {banner} -----");
    Command::new(exe)
        .arg("run")
        .env_clear()
        .envs(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::from(out))
        .stderr(Stdio::from(err))
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", exe.display()))
}

/// Sends SIGTERM to `child` (through `kill`: std has no signal API) and returns at once.
pub fn signal_term(child: &Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// SIGTERM (the worker drains, commits and leaves its group), then SIGKILL if it has not ended
/// within `grace`. The exit status when it ended by itself.
pub fn terminate(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    signal_term(child);
    let until = Instant::now() + grace;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(50)),
            _ => break,
        }
    }
    kill(child);
    None
}

/// SIGKILL (what `Child::kill` sends on Unix) and reap: no drain, no commit.
pub fn kill(child: &mut Child) {
    let _ = child.kill();
    let _ = child.wait();
}

/// A loopback port free right now (the worker binds it a moment later; callers retry a lost
/// race).
pub fn free_port() -> Result<u16, String> {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// `GET path` on the worker's operations listener: the status code and the body.
pub fn http_get(listen: &str, path: &str) -> Option<(u16, String)> {
    let addr: SocketAddr = listen.parse().ok()?;
    let mut stream = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(2)));
    // HTTP/1.0: the answer is never chunked and the server closes after it.
    let request = format!("GET {path} HTTP/1.0\r\nHost: {listen}\r\n\r\n");
    stream.write_all(request.as_bytes()).ok()?;
    let mut answer = String::new();
    let _ = stream.read_to_string(&mut answer);
    let (head, body) = answer.split_once("\r\n\r\n")?;
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, body.to_owned()))
}

/// `GET /readyz` on `127.0.0.1:port` answered 200 (group joined, store and broker reachable).
pub fn readyz(port: u16) -> bool {
    http_get(&format!("127.0.0.1:{port}"), "/readyz").is_some_and(|(status, _)| status == 200)
}

/// A hard link (or copy) of the running binary in `dir`, for harnesses that run inside
/// `turnstile` itself: a `cargo build` mid-run cannot take it away.
pub fn snapshot_binary(dir: &Path) -> Result<PathBuf, String> {
    let exe =
        std::env::current_exe().map_err(|e| format!("cannot find the turnstile binary: {e}"))?;
    let dest = dir.join("turnstile");
    if std::fs::hard_link(&exe, &dest).is_ok() {
        return Ok(dest);
    }
    // Already replaced (Linux then names it "... (deleted)"): the kernel still has this one.
    let source = if exe.exists() {
        exe
    } else {
        PathBuf::from("/proc/self/exe")
    };
    std::fs::copy(&source, &dest)
        .map(|_| dest)
        .map_err(|e| format!("cannot copy {} for the workers: {e}", source.display()))
}
