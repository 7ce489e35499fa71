//! Driver session setup: building the session (contact points, DC-aware routing, timeouts,
//! credentials) and preparing statements, with the short bounded start-up retries.

use super::*;

pub(super) async fn build_session(cfg: &CqlConfig) -> Result<Session, StoreError> {
    let mut policy = DefaultPolicy::builder().token_aware(true);
    if let Some(dc) = &cfg.local_dc {
        policy = policy
            .prefer_datacenter(dc.clone())
            .permit_dc_failover(false);
    }
    let profile = ExecutionProfile::builder()
        .request_timeout(Some(cfg.request_timeout()))
        .consistency(cfg.write_consistency)
        .serial_consistency(Some(SerialConsistency::LocalSerial))
        .load_balancing_policy(policy.build())
        .build();
    let mut builder = SessionBuilder::new()
        .known_nodes(&cfg.contact_points)
        .connection_timeout(cfg.request_timeout())
        .default_execution_profile_handle(profile.into_handle());
    if let Some(credentials) = &cfg.credentials {
        builder = builder.user(&credentials.username, credentials.password()?);
    }
    if let Some(tls) = &cfg.tls {
        builder = builder.tls_context(Some(tls.context()?));
    }
    // A node that just started answers OPTIONS before it serves queries: retry briefly.
    let builder = &builder;
    with_retries("connect", || async {
        builder
            .build()
            .await
            .map_err(|e| classify_new_session(e, cfg))
    })
    .await
}

pub(super) async fn prepare(
    session: &Session,
    text: String,
    consistency: Consistency,
    idempotent: bool,
) -> Result<PreparedStatement, StoreError> {
    let mut prepared = with_retries("prepare", || async {
        session
            .prepare(text.as_str())
            .await
            .map_err(classify_prepare)
    })
    .await
    .map_err(|e| match e {
        StoreError::Rejected { what, cause } => StoreError::Rejected {
            what: format!("{what} (is the schema migrated? run `turnstile migrate`)"),
            cause,
        },
        other => other,
    })?;
    prepared.set_consistency(consistency);
    prepared.set_is_idempotent(idempotent);
    Ok(prepared)
}

/// Bounded, jittered exponential retries of an idempotent operation on transient errors only:
/// 50 ms doubling to 800 ms, at most 4 retries and 2 s of total pause.
pub(super) async fn with_retries<T, F, Fut>(op: &'static str, f: F) -> Result<T, StoreError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, StoreError>>,
{
    f.retry(
        ExponentialBuilder::new()
            .with_min_delay(Duration::from_millis(50))
            .with_max_delay(Duration::from_millis(800))
            .with_max_times(4)
            .with_total_delay(Some(Duration::from_secs(2)))
            .with_jitter(),
    )
    .when(crate::store::retrying::retried_briefly)
    .notify(|e, pause| tracing::warn!(op, error = %e, ?pause, "checkpoint store retry"))
    .await
}
