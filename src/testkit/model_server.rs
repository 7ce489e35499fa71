//! `ModelServer`: a real HTTP server on loopback speaking OpenAI chat completions, answering each
//! `(X-Turnstile-Turn-Id, X-Turnstile-Skill)` from a scenario's per-turn model script, with
//! low-level faults for transport tests and default answers for benchmarks.
//!
//! What a request gets, first match wins:
//! 1. the turn's script for that skill ([`ModelServer::set_turn_script`]): an answer becomes a
//!    200 chat completion whose content is the answer as a JSON string; `invalid_json` a 200 whose
//!    content is prose; `timeout` a reply held back for the timeout delay (30 s by default, cut
//!    short at shutdown); `error` an HTTP 500;
//! 2. the skill's default behaviour ([`ModelServer::set_default`]);
//! 3. the default behaviour of every skill ([`ModelServer::set_default_all`]);
//! 4. HTTP 500, so an unscripted call takes the engine's fallback path.

use std::collections::{BTreeMap, HashMap};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::routing::post;
use axum::Router;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::domain::decision::{ModelFailure, Skill};
use crate::model::scripted::{ModelScript, Scripted};

pub const SKILL_HEADER: &str = "x-turnstile-skill";
pub const TURN_ID_HEADER: &str = "x-turnstile-turn-id";
pub const SPECULATIVE_HEADER: &str = "x-turnstile-speculative";
/// Set on a response the connection must cut after this many body bytes (truncated faults).
const CUT_AFTER_HEADER: &str = "x-testkit-cut-after";
/// What `invalid_json` answers: a chat completion whose content holds no JSON object.
pub const NOT_JSON_CONTENT: &str = "I think the customer wants to keep going with the order.";
/// How long a scripted `timeout` holds its reply by default: longer than any test profile.
pub const DEFAULT_TIMEOUT_DELAY: Duration = Duration::from_secs(30);

/// What the server sends back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    /// A chat completion whose `choices[0].message.content` is this text.
    Content(String),
    /// This body verbatim.
    Raw(String),
}

/// A low-level answer: latency, status, body, and transport faults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Behaviour {
    pub latency: Duration,
    pub status: u16,
    pub reply: Reply,
    /// Announce a `Content-Length` larger than the body, send part of it, then close.
    pub truncated: bool,
    /// Overrides `application/json` (e.g. `text/html`, a proxy's error page).
    pub content_type: Option<String>,
}

impl Behaviour {
    /// 200 with a chat completion whose content is `answer` as a JSON string.
    pub fn answer(answer: Value) -> Behaviour {
        Behaviour::content(answer.to_string())
    }

    /// 200 with a chat completion whose content is `text`.
    pub fn content(text: impl Into<String>) -> Behaviour {
        Behaviour {
            latency: Duration::ZERO,
            status: 200,
            reply: Reply::Content(text.into()),
            truncated: false,
            content_type: None,
        }
    }

    /// `status` with an OpenAI-style error body.
    pub fn status(status: u16) -> Behaviour {
        Behaviour {
            status,
            reply: Reply::Raw(
                json!({"error": {"message": "scripted failure", "type": "server_error"}})
                    .to_string(),
            ),
            ..Behaviour::content("")
        }
    }

    /// 200 with `body` verbatim (a body that is not a chat completion, say).
    pub fn raw(body: impl Into<String>) -> Behaviour {
        Behaviour {
            reply: Reply::Raw(body.into()),
            ..Behaviour::content("")
        }
    }

    /// 200 with an HTML page, as a captive portal or a misrouted proxy sends.
    pub fn html() -> Behaviour {
        Behaviour::raw("<html><body><h1>Welcome</h1></body></html>").with_content_type("text/html")
    }

    pub fn with_latency(mut self, latency: Duration) -> Behaviour {
        self.latency = latency;
        self
    }

    pub fn with_status(mut self, status: u16) -> Behaviour {
        self.status = status;
        self
    }

    pub fn with_content_type(mut self, content_type: impl Into<String>) -> Behaviour {
        self.content_type = Some(content_type.into());
        self
    }

    pub fn truncated(mut self) -> Behaviour {
        self.truncated = true;
        self
    }
}

/// One request as received.
#[derive(Debug, Clone, PartialEq)]
pub struct RecordedRequest {
    pub path: String,
    pub skill: Option<String>,
    pub turn_id: Option<String>,
    pub speculative: Option<String>,
    pub authorization: Option<String>,
    /// Every header, lower-case names.
    pub headers: BTreeMap<String, String>,
    /// The parsed JSON body (`Null` when it was not JSON).
    pub body: Value,
}

impl RecordedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }

    /// The JSON object of the last `user` message: what the model was told about the turn.
    pub fn user_input(&self) -> Option<Value> {
        let messages = self.body.get("messages")?.as_array()?;
        let content = messages
            .iter()
            .rev()
            .find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?
            .get("content")?
            .as_str()?;
        serde_json::from_str(content).ok()
    }
}

struct Shared {
    scripts: Mutex<HashMap<(String, Skill), Scripted>>,
    defaults: Mutex<HashMap<Skill, Behaviour>>,
    default_all: Mutex<Option<Behaviour>>,
    timeout_delay: Mutex<Duration>,
    /// How long every scripted answer is held (a slow-ish model): 0 by default.
    answer_latency: Mutex<Duration>,
    requests: Mutex<Vec<RecordedRequest>>,
    shutdown: watch::Receiver<bool>,
    served: AtomicU64,
    /// Chat requests being answered now, and the most seen at once.
    open: AtomicU64,
    peak_open: AtomicU64,
}

/// Counts a chat request as open until dropped (every return path of the handler).
struct OpenRequest<'a>(&'a Shared);

impl<'a> OpenRequest<'a> {
    fn new(shared: &'a Shared) -> Self {
        let now = shared.open.fetch_add(1, Ordering::SeqCst) + 1;
        shared.peak_open.fetch_max(now, Ordering::SeqCst);
        OpenRequest(shared)
    }
}

impl Drop for OpenRequest<'_> {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A poisoned lock only means another test thread panicked; the data is still usable.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The running server. Dropping it stops it too.
pub struct ModelServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    stop: watch::Sender<bool>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl ModelServer {
    /// Starts on `127.0.0.1:0`.
    ///
    /// # Panics
    /// When no loopback port can be bound (test support: the test cannot run anyway).
    pub async fn start() -> ModelServer {
        ModelServer::try_start()
            .await
            .expect("bind a loopback port for the model server")
    }

    pub async fn try_start() -> std::io::Result<ModelServer> {
        let listener = CuttingListener(TcpListener::bind("127.0.0.1:0").await?);
        let addr = listener.0.local_addr()?;
        let (stop, shutdown) = watch::channel(false);
        let shared = Arc::new(Shared {
            scripts: Mutex::default(),
            defaults: Mutex::default(),
            default_all: Mutex::default(),
            timeout_delay: Mutex::new(DEFAULT_TIMEOUT_DELAY),
            answer_latency: Mutex::new(Duration::ZERO),
            requests: Mutex::default(),
            shutdown: shutdown.clone(),
            served: AtomicU64::new(0),
            open: AtomicU64::new(0),
            peak_open: AtomicU64::new(0),
        });
        let app = Router::new()
            .route("/v1/chat/completions", post(chat))
            .fallback(not_found)
            .with_state(shared.clone());
        let mut signal = shutdown;
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, app).with_graceful_shutdown(async move {
                let _ = signal.wait_for(|stopped| *stopped).await;
            });
            if let Err(e) = serve.await {
                tracing::warn!(error = %e, "Model test server stopped with an error.");
            }
        });
        Ok(ModelServer {
            addr,
            shared,
            stop,
            task: Mutex::new(Some(task)),
        })
    }

    /// The base URL a profile (or `--base-url`) points at: `http://127.0.0.1:<port>/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Scripts every skill of one turn; skills the script leaves out answer HTTP 500.
    pub fn set_turn_script(&self, turn_id: &str, script: &ModelScript) {
        let mut scripts = lock(&self.shared.scripts);
        for (skill, entry) in [
            (Skill::Classifier, &script.classifier),
            (Skill::Router, &script.router),
            (Skill::Interpreter, &script.interpreter),
        ] {
            let key = (turn_id.to_owned(), skill);
            match entry {
                Some(s) => scripts.insert(key, s.clone()),
                None => scripts.remove(&key),
            };
        }
    }

    /// What `skill` answers when no turn script covers the request.
    pub fn set_default(&self, skill: Skill, behaviour: Behaviour) {
        lock(&self.shared.defaults).insert(skill, behaviour);
    }

    /// What every skill answers when neither a turn script nor a skill default covers it.
    pub fn set_default_all(&self, behaviour: Behaviour) {
        *lock(&self.shared.default_all) = Some(behaviour);
    }

    /// Forgets every default behaviour (turn scripts stay).
    pub fn clear_defaults(&self) {
        lock(&self.shared.defaults).clear();
        *lock(&self.shared.default_all) = None;
    }

    /// How long a scripted `timeout` holds its reply.
    pub fn set_timeout_delay(&self, delay: Duration) {
        *lock(&self.shared.timeout_delay) = delay;
    }

    /// How long every scripted answer (not a scripted fault) is held before it is sent.
    pub fn set_answer_latency(&self, latency: Duration) {
        *lock(&self.shared.answer_latency) = latency;
    }

    /// Every request received so far, in arrival order.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        lock(&self.shared.requests).clone()
    }

    /// The requests of one skill.
    pub fn requests_for(&self, skill: Skill) -> Vec<RecordedRequest> {
        self.requests()
            .into_iter()
            .filter(|r| r.skill.as_deref() == Some(skill.as_str()))
            .collect()
    }

    /// The most chat requests this server was answering at the same time.
    pub fn peak_concurrent_requests(&self) -> u64 {
        self.shared.peak_open.load(Ordering::SeqCst)
    }

    pub fn clear_requests(&self) {
        lock(&self.shared.requests).clear();
    }

    /// Stops accepting, ends held replies, and waits (at most 5 s) for the server to finish.
    pub async fn shutdown(&self) {
        let _ = self.stop.send(true);
        let task = lock(&self.task).take();
        if let Some(mut task) = task {
            if tokio::time::timeout(Duration::from_secs(5), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }
}

impl Drop for ModelServer {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
    }
}

fn parse_skill(s: &str) -> Option<Skill> {
    match s.trim().to_ascii_lowercase().as_str() {
        "classifier" => Some(Skill::Classifier),
        "router" => Some(Skill::Router),
        "interpreter" => Some(Skill::Interpreter),
        _ => None,
    }
}

fn record(shared: &Shared, path: &str, headers: &HeaderMap, body: &[u8]) -> RecordedRequest {
    let headers: BTreeMap<String, String> = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    let get = |name: &str| headers.get(name).cloned();
    let recorded = RecordedRequest {
        path: path.to_owned(),
        skill: get(SKILL_HEADER),
        turn_id: get(TURN_ID_HEADER),
        speculative: get(SPECULATIVE_HEADER),
        authorization: get(header::AUTHORIZATION.as_str()),
        body: serde_json::from_slice(body).unwrap_or(Value::Null),
        headers,
    };
    lock(&shared.requests).push(recorded.clone());
    recorded
}

async fn not_found(
    State(shared): State<Arc<Shared>>,
    uri: axum::http::Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    record(&shared, uri.path(), &headers, &body);
    plain(StatusCode::NOT_FOUND, "not found")
}

async fn chat(State(shared): State<Arc<Shared>>, headers: HeaderMap, body: Bytes) -> Response {
    let _open = OpenRequest::new(&shared);
    let recorded = record(&shared, "/v1/chat/completions", &headers, &body);
    let skill = recorded.skill.as_deref().and_then(parse_skill);
    let behaviour = choose(&shared, skill, recorded.turn_id.as_deref());
    if !behaviour.latency.is_zero() {
        let mut stop = shared.shutdown.clone();
        tokio::select! {
            _ = tokio::time::sleep(behaviour.latency) => {}
            // A held reply must not keep the server alive after shutdown.
            _ = stop.wait_for(|stopped| *stopped) => {
                return plain(StatusCode::SERVICE_UNAVAILABLE, "shutting down");
            }
        }
    }
    let model = recorded
        .body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("test-model");
    let n = shared.served.fetch_add(1, Ordering::Relaxed);
    respond(&behaviour, model, n)
}

fn choose(shared: &Shared, skill: Option<Skill>, turn_id: Option<&str>) -> Behaviour {
    let scripted = match (skill, turn_id) {
        (Some(s), Some(t)) => lock(&shared.scripts).get(&(t.to_owned(), s)).cloned(),
        _ => None,
    };
    match scripted {
        Some(Scripted::Answer(map)) => {
            Behaviour::answer(Value::Object(map)).with_latency(*lock(&shared.answer_latency))
        }
        Some(Scripted::Fault(ModelFailure::InvalidJson)) => Behaviour::content(NOT_JSON_CONTENT),
        Some(Scripted::Fault(ModelFailure::Timeout)) => {
            Behaviour::status(504).with_latency(*lock(&shared.timeout_delay))
        }
        Some(Scripted::Fault(ModelFailure::Error)) => Behaviour::status(500),
        None => skill
            .and_then(|s| lock(&shared.defaults).get(&s).cloned())
            .or_else(|| lock(&shared.default_all).clone())
            .unwrap_or_else(|| Behaviour::status(500)),
    }
}

fn respond(b: &Behaviour, model: &str, n: u64) -> Response {
    let body = match &b.reply {
        Reply::Raw(raw) => raw.clone(),
        Reply::Content(content) => json!({
            "id": format!("chatcmpl-test-{n}"),
            "object": "chat.completion",
            "created": 0,
            "model": model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }],
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        })
        .to_string(),
    };
    let status = StatusCode::from_u16(b.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = b.content_type.as_deref().unwrap_or("application/json");
    let builder = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, content_type);
    // hyper refuses to send a body shorter than its Content-Length, so the connection wrapper
    // does the cutting (see `CuttingStream`).
    let builder = if b.truncated {
        builder.header(CUT_AFTER_HEADER, body.len() / 2)
    } else {
        builder
    };
    builder
        .body(Body::from(body))
        .unwrap_or_else(|_| plain(StatusCode::INTERNAL_SERVER_ERROR, "bad scripted response"))
}

fn plain(status: StatusCode, text: &'static str) -> Response {
    let mut r = Response::new(Body::from(text));
    *r.status_mut() = status;
    r
}

/// Accepts connections wrapped in [`CuttingStream`].
struct CuttingListener(TcpListener);

impl axum::serve::Listener for CuttingListener {
    type Io = CuttingStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (CuttingStream, SocketAddr) {
        loop {
            match self.0.accept().await {
                Ok((inner, addr)) => {
                    return (
                        CuttingStream {
                            inner,
                            cut: Cut::Open,
                        },
                        addr,
                    )
                }
                // Out of descriptors or an aborted handshake: try again shortly.
                Err(_) => tokio::time::sleep(Duration::from_millis(5)).await,
            }
        }
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Cut {
    Open,
    /// Bytes still let through before the connection fails.
    Cutting(usize),
    Done,
}

/// A connection that, for a response carrying [`CUT_AFTER_HEADER`], sends the head and that
/// many body bytes, then fails every write: the client sees a Content-Length never reached and
/// the connection closed.
struct CuttingStream {
    inner: TcpStream,
    cut: Cut,
}

/// Where to cut a response head + body written in one buffer, when it asks for a cut.
fn cut_point(buf: &[u8]) -> Option<usize> {
    let find = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).position(|w| w == needle);
    let marker = format!("\r\n{CUT_AFTER_HEADER}: ");
    let at = find(buf, marker.as_bytes())? + marker.len();
    let digits = buf[at..].iter().take_while(|b| b.is_ascii_digit()).count();
    let keep: usize = std::str::from_utf8(&buf[at..at + digits])
        .ok()?
        .parse()
        .ok()?;
    let head_end = at + find(&buf[at..], b"\r\n\r\n")? + 4;
    Some(head_end + keep)
}

impl AsyncRead for CuttingStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for CuttingStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.cut == Cut::Open {
            if let Some(at) = cut_point(buf) {
                self.cut = Cut::Cutting(at);
            }
        }
        match self.cut {
            Cut::Open => Pin::new(&mut self.inner).poll_write(cx, buf),
            Cut::Cutting(0) | Cut::Done => {
                self.cut = Cut::Done;
                Poll::Ready(Err(io::Error::new(
                    io::ErrorKind::BrokenPipe,
                    "testkit: response cut short on purpose",
                )))
            }
            Cut::Cutting(left) => {
                let allowed = left.min(buf.len());
                let written = Pin::new(&mut self.inner).poll_write(cx, &buf[..allowed]);
                if let Poll::Ready(Ok(n)) = written {
                    self.cut = Cut::Cutting(left - n);
                }
                written
            }
        }
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
