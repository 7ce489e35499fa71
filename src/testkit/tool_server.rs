//! `ToolServer`: a real HTTP server on loopback speaking the tool webhook protocol of
//! `tool::HttpToolGateway`, answering from per-turn scenario scripts, with injectable faults.
//!
//! - `POST /tools/{name}` and `/tools/{name}/...`: the body's `action` (`execute` |
//!   `pre_validate`) decides; without one, a path ending in `/pre-validate` is a pre-validation.
//! - Scripts are keyed by the `X-Turnstile-Turn-Id` header ([`ToolServer::set_turn_script`]), in
//!   the scenario `tools:` format: `{ok: true, data}` → 200 with `data`; `{ok: false, retryable:
//!   true}` → 503 on every attempt; `{ok: false}` → 400 `{"error": ...}`; `name.pre_validation:
//!   {eligible, reason, data}` → that answer. Unscripted: 200 `{}`, and eligible.
//! - Idempotency like a real tool: the first decided answer (2xx or 4xx) of an execution key is
//!   stored, and a repeated key gets it back without executing again; a 503 decides nothing, so a
//!   retry may still execute. [`ToolServer::executions`] has one entry per decided key.
//! - Faults, consumed one per request, by target `name` (execution) or `name.pre_validation`:
//!   [`fail_next`](ToolServer::fail_next), [`respond_next`](ToolServer::respond_next) (any
//!   status and raw body), [`delay_next`](ToolServer::delay_next) (the call is handled, then the
//!   answer waits — the work is done but the client may time out) and
//!   [`close_next`](ToolServer::close_next) (the connection drops before any answer; nothing is
//!   executed).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::connect_info::Connected;
use axum::extract::{ConnectInfo, State};
use axum::http::{header, HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::serve::{IncomingStream, Listener};
use axum::Router;
use serde_json::{json, Value};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use crate::tool::scripted::{ScriptedTools, ToolScript, PRE_VALIDATION_SUFFIX};

/// What a call asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolAction {
    Execute,
    PreValidate,
}

/// One request the server received, in arrival order.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCall {
    pub tool: String,
    pub action: ToolAction,
    pub path: String,
    pub idempotency_key: Option<String>,
    pub turn_id: Option<String>,
    /// Lower-case header names.
    pub headers: BTreeMap<String, String>,
    /// The JSON body, or the raw text when it was not JSON.
    pub body: Value,
    /// Wall-clock arrival time, ms since the epoch.
    pub at_ms: i64,
    /// The status answered; `None` when the connection was closed instead.
    pub status: Option<u16>,
    /// True when the answer was the stored one of an earlier call with the same key.
    pub replayed: bool,
}

/// One execution key the server decided (2xx done, 4xx refused): the first call that carried it.
#[derive(Debug, Clone, PartialEq)]
pub struct Execution {
    pub tool: String,
    pub idempotency_key: String,
    pub turn_id: Option<String>,
    pub arguments: Value,
    pub status: u16,
    pub response: Value,
}

#[derive(Debug, Clone)]
enum Fault {
    Respond { status: u16, body: String },
    Delay(Duration),
    Close,
}

#[derive(Debug, Clone)]
struct Reply {
    status: u16,
    body: String,
    replayed: bool,
}

#[derive(Debug, Default)]
struct Inner {
    scripts: HashMap<String, BTreeMap<String, ToolScript>>,
    faults: HashMap<String, VecDeque<Fault>>,
    calls: Vec<ToolCall>,
    executions: Vec<Execution>,
    /// Execution key → the first decided answer.
    decided: HashMap<String, (u16, String)>,
}

type Shared = Arc<Mutex<Inner>>;

/// A running tool server; dropped, it stops serving.
#[derive(Debug)]
pub struct ToolServer {
    addr: SocketAddr,
    shared: Shared,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<()>>,
}

impl ToolServer {
    /// Binds 127.0.0.1 on a free port and serves until [`shutdown`](Self::shutdown) or drop.
    pub async fn start() -> io::Result<ToolServer> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let shared: Shared = Arc::default();
        let app = Router::new()
            .fallback(handle)
            .with_state(shared.clone())
            .into_make_service_with_connect_info::<ConnHandle>();
        let (stop, stopped) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serving =
                axum::serve(KillableListener(listener), app).with_graceful_shutdown(async move {
                    let _ = stopped.await;
                });
            if let Err(error) = serving.await {
                tracing::warn!(%error, "Tool test server stopped with an error.");
            }
        });
        Ok(ToolServer {
            addr,
            shared,
            stop: Some(stop),
            task: Some(task),
        })
    }

    /// `http://127.0.0.1:<port>`: the base URL relative tool endpoints join.
    pub fn base_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The scenario `tools:` block of the turn whose calls carry `turn_id` (replaces any earlier).
    pub fn set_turn_script(&self, turn_id: &str, script: &BTreeMap<String, ToolScript>) {
        lock(&self.shared)
            .scripts
            .insert(turn_id.to_owned(), script.clone());
    }

    /// The next `n` calls to `target` answer `status` with `{"error": "injected HTTP <status>"}`,
    /// without executing. `target` is a tool name, or `name.pre_validation`.
    pub fn fail_next(&self, target: &str, n: usize, status: u16) {
        let body = json!({"error": format!("injected HTTP {status}")}).to_string();
        self.push(target, n, Fault::Respond { status, body });
    }

    /// The next `n` calls to `target` answer `status` with this raw body, without executing.
    pub fn respond_next(&self, target: &str, n: usize, status: u16, body: impl Into<String>) {
        let body = body.into();
        self.push(target, n, Fault::Respond { status, body });
    }

    /// The next `n` calls to `target` are handled (and executed) as usual, then answered only
    /// after `delay`.
    pub fn delay_next(&self, target: &str, n: usize, delay: Duration) {
        self.push(target, n, Fault::Delay(delay));
    }

    /// The next `n` calls to `target` get their connection closed with no answer and no effect.
    pub fn close_next(&self, target: &str, n: usize) {
        self.push(target, n, Fault::Close);
    }

    /// Every call received, in order.
    pub fn calls(&self) -> Vec<ToolCall> {
        lock(&self.shared).calls.clone()
    }

    /// One entry per decided execution key, in order.
    pub fn executions(&self) -> Vec<Execution> {
        lock(&self.shared).executions.clone()
    }

    /// Stops accepting, lets calls in progress finish (for at most a second), and waits.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut task) = self.task.take() {
            if tokio::time::timeout(Duration::from_secs(1), &mut task)
                .await
                .is_err()
            {
                task.abort();
            }
        }
    }

    fn push(&self, target: &str, n: usize, fault: Fault) {
        let mut inner = lock(&self.shared);
        let queue = inner.faults.entry(target.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(fault, n));
    }
}

impl Drop for ToolServer {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

async fn handle(
    State(shared): State<Shared>,
    ConnectInfo(conn): ConnectInfo<ConnHandle>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let at_ms = now_ms();
    let path = uri.path().to_owned();
    let Some((tool, rest)) = tool_path(&path) else {
        return reply(
            404,
            json!({"error": "not a /tools/{name} path"}).to_string(),
        );
    };
    if method != Method::POST {
        return reply(405, json!({"error": "use POST"}).to_string());
    }
    let headers = header_strings(&headers);
    let idempotency_key = headers.get("idempotency-key").cloned();
    let turn_id = headers.get("x-turnstile-turn-id").cloned();
    let parsed: Result<Value, String> = serde_json::from_slice(&body).map_err(|e| e.to_string());
    let action = requested_action(&parsed, rest);
    let recorded_action = *action.as_ref().unwrap_or(&ToolAction::Execute);
    let target = match recorded_action {
        ToolAction::Execute => tool.to_owned(),
        ToolAction::PreValidate => format!("{tool}{PRE_VALIDATION_SUFFIX}"),
    };
    let mut call = ToolCall {
        tool: tool.to_owned(),
        action: recorded_action,
        path: path.clone(),
        idempotency_key: idempotency_key.clone(),
        turn_id: turn_id.clone(),
        headers,
        body: parsed
            .clone()
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned())),
        at_ms,
        status: None,
        replayed: false,
    };

    let (answer, delay) = {
        let mut inner = lock(&shared);
        let fault = inner.faults.get_mut(&target).and_then(VecDeque::pop_front);
        let (answer, delay) = match fault {
            Some(Fault::Close) => {
                conn.kill();
                inner.calls.push(call);
                // Never written: the killed connection fails the write and is dropped.
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
            Some(Fault::Respond { status, body }) => (
                Reply {
                    status,
                    body,
                    replayed: false,
                },
                None,
            ),
            Some(Fault::Delay(d)) => (
                inner.answer(tool, action, &idempotency_key, &turn_id, &parsed),
                Some(d),
            ),
            None => (
                inner.answer(tool, action, &idempotency_key, &turn_id, &parsed),
                None,
            ),
        };
        call.status = Some(answer.status);
        call.replayed = answer.replayed;
        inner.calls.push(call);
        (answer, delay)
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    reply(answer.status, answer.body)
}

/// Every request header, its value read as (lossy) UTF-8.
fn header_strings(headers: &HeaderMap) -> BTreeMap<String, String> {
    headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// The body's `action`; without one, the path says (`.../pre-validate`, else execute).
fn requested_action(parsed: &Result<Value, String>, rest: &str) -> Result<ToolAction, String> {
    match parsed.as_ref().ok().and_then(|b| b.get("action")) {
        Some(Value::String(a)) if a == "execute" => Ok(ToolAction::Execute),
        Some(Value::String(a)) if a == "pre_validate" => Ok(ToolAction::PreValidate),
        Some(other) => Err(format!("unknown action {other}")),
        None if rest.trim_end_matches('/').ends_with("pre-validate") => Ok(ToolAction::PreValidate),
        None => Ok(ToolAction::Execute),
    }
}

impl Inner {
    /// The protocol answer to a call that no fault intercepted.
    fn answer(
        &mut self,
        tool: &str,
        action: Result<ToolAction, String>,
        key: &Option<String>,
        turn_id: &Option<String>,
        body: &Result<Value, String>,
    ) -> Reply {
        let fresh = |status: u16, body: Value| Reply {
            status,
            body: body.to_string(),
            replayed: false,
        };
        let body = match body {
            Ok(b) => b,
            Err(e) => return fresh(400, json!({"error": format!("body is not JSON: {e}")})),
        };
        let action = match action {
            Ok(a) => a,
            Err(e) => return fresh(400, json!({"error": e})),
        };
        let script = ScriptedTools::new(
            turn_id
                .as_ref()
                .and_then(|t| self.scripts.get(t))
                .cloned()
                .unwrap_or_default(),
        );
        match action {
            ToolAction::PreValidate => {
                let p = script.pre_validation(tool);
                fresh(
                    200,
                    json!({"eligible": p.eligible, "reason": p.reason, "code": p.code, "data": p.data}),
                )
            }
            ToolAction::Execute => {
                let Some(key) = key else {
                    return fresh(400, json!({"error": "missing Idempotency-Key header"}));
                };
                if let Some((status, stored)) = self.decided.get(key) {
                    return Reply {
                        status: *status,
                        body: stored.clone(),
                        replayed: true,
                    };
                }
                let e = script.execution(tool);
                let (status, response) = if e.ok {
                    let data = if e.data.is_null() { json!({}) } else { e.data };
                    (200, data)
                } else if e.retryable {
                    // Nothing decided: a later attempt with this key may still execute.
                    return fresh(503, e.failure_body());
                } else {
                    (400, e.failure_body())
                };
                let text = response.to_string();
                self.decided.insert(key.clone(), (status, text.clone()));
                self.executions.push(Execution {
                    tool: tool.to_owned(),
                    idempotency_key: key.clone(),
                    turn_id: turn_id.clone(),
                    arguments: body.get("arguments").cloned().unwrap_or(Value::Null),
                    status,
                    response,
                });
                Reply {
                    status,
                    body: text,
                    replayed: false,
                }
            }
        }
    }
}

/// `/tools/{name}[/rest]` → `(name, rest)`.
fn tool_path(path: &str) -> Option<(&str, &str)> {
    let tail = path.strip_prefix("/tools/")?;
    let (name, rest) = tail.split_once('/').unwrap_or((tail, ""));
    (!name.is_empty()).then_some((name, rest))
}

fn reply(status: u16, body: String) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

use crate::clock::now_ms;

/// A test that panicked while holding the lock leaves data that is still worth reading.
fn lock(shared: &Mutex<Inner>) -> MutexGuard<'_, Inner> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

// ---------------------------------------------------------------------------------------------
// Connection close fault: every connection carries a kill switch the handler can reach through
// `ConnectInfo`; once set, the connection's next read or write fails and hyper drops it, so the
// client sees the connection close with no response at all.
// ---------------------------------------------------------------------------------------------

struct KillableListener(TcpListener);

impl Listener for KillableListener {
    type Io = KillableStream;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (KillableStream, SocketAddr) {
        let (stream, addr) = Listener::accept(&mut self.0).await;
        (
            KillableStream {
                inner: stream,
                killed: Arc::default(),
            },
            addr,
        )
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.0.local_addr()
    }
}

struct KillableStream {
    inner: TcpStream,
    killed: Arc<AtomicBool>,
}

impl KillableStream {
    fn check(&self) -> io::Result<()> {
        if self.killed.load(Ordering::SeqCst) {
            Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "closed by fault injection",
            ))
        } else {
            Ok(())
        }
    }
}

impl AsyncRead for KillableStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if let Err(e) = this.check() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if let Err(e) = this.check() {
            return Poll::Ready(Err(e));
        }
        Pin::new(&mut this.inner).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

/// The handler's way to its connection's kill switch.
#[derive(Clone)]
struct ConnHandle(Arc<AtomicBool>);

impl ConnHandle {
    fn kill(&self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Connected<IncomingStream<'_, KillableListener>> for ConnHandle {
    fn connect_info(stream: IncomingStream<'_, KillableListener>) -> Self {
        ConnHandle(stream.io().killed.clone())
    }
}
