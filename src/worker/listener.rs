//! The operations listener: `/metrics` (Prometheus text), `/healthz` (process alive) and
//! `/readyz` (partitions assigned or group joined, checkpoint store and broker reachable).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::{header, StatusCode};
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;
use metrics_exporter_prometheus::PrometheusHandle;

use crate::worker::Health;

#[derive(Clone)]
struct ListenerState {
    metrics: PrometheusHandle,
    health: Arc<Health>,
}

/// Binds `addr` and serves until the task is dropped; returns the bound address.
pub async fn serve(
    addr: &str,
    metrics: PrometheusHandle,
    health: Arc<Health>,
) -> std::io::Result<(std::net::SocketAddr, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    let app = Router::new()
        .route("/metrics", get(metrics_text))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .with_state(ListenerState { metrics, health });
    let task = tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            tracing::error!(error = %e, "Operations listener stopped.");
        }
    });
    Ok((bound, task))
}

async fn metrics_text(State(s): State<ListenerState>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        s.metrics.render(),
    )
}

async fn ready(State(s): State<ListenerState>) -> impl IntoResponse {
    let h = &s.health;
    let joined =
        h.joined.load(Ordering::Relaxed) || h.assigned_partitions.load(Ordering::Relaxed) > 0;
    let store = h.store_ok.load(Ordering::Relaxed);
    let broker = h.broker_ok.load(Ordering::Relaxed);
    let body = format!(
        "{{\"group_joined\":{joined},\"assigned_partitions\":{},\"store\":{store},\"broker\":{broker}}}\n",
        h.assigned_partitions.load(Ordering::Relaxed)
    );
    // The same rule as `turnstile_ready` (`Health::is_ready`), so the gauge and the probe agree.
    let status = if h.is_ready() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, [(header::CONTENT_TYPE, "application/json")], body)
}
