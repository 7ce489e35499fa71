//! Driver errors classified into `StoreError`: transient (`Unavailable`, worth retrying) versus
//! final (`Rejected`).

use super::*;

/// Transient (worth retrying, `Unavailable`) versus final (`Rejected`).
pub(super) fn classify_execution(e: ExecutionError) -> StoreError {
    let transient = match &e {
        ExecutionError::RequestTimeout(_)
        | ExecutionError::EmptyPlan
        | ExecutionError::ConnectionPoolError(_)
        | ExecutionError::SchemaAgreementError(_)
        | ExecutionError::MetadataError(_)
        | ExecutionError::UseKeyspaceError(_) => true,
        ExecutionError::LastAttemptError(attempt) => attempt_is_transient(attempt),
        ExecutionError::PrepareError(p) => prepare_is_transient(p),
        _ => false,
    };
    wrap(transient, "", e)
}

pub(super) fn classify_prepare(e: PrepareError) -> StoreError {
    wrap(prepare_is_transient(&e), "prepare", e)
}

pub(super) fn classify_schema_agreement(e: SchemaAgreementError) -> StoreError {
    // Disagreement or a timeout while nodes converge is the normal transient case for DDL.
    StoreError::unavailable("schema agreement").caused_by(e)
}

pub(super) fn classify_new_session(e: NewSessionError, cfg: &CqlConfig) -> StoreError {
    let contacts = cfg.contact_points.join(",");
    let refused = matches!(
        e,
        NewSessionError::EmptyKnownNodesList | NewSessionError::IllegalConfig(_)
    );
    wrap(!refused, format!("cannot connect to {contacts}"), e)
}

pub(super) fn prepare_is_transient(e: &PrepareError) -> bool {
    match e {
        PrepareError::ConnectionPoolError(_) => true,
        PrepareError::AllAttemptsFailed { first_attempt } => attempt_is_transient(first_attempt),
        _ => false,
    }
}

pub(super) fn attempt_is_transient(e: &RequestAttemptError) -> bool {
    match e {
        RequestAttemptError::BrokenConnectionError(_)
        | RequestAttemptError::UnableToAllocStreamId => true,
        RequestAttemptError::DbError(db, _) => matches!(
            db,
            DbError::Unavailable { .. }
                | DbError::Overloaded
                | DbError::IsBootstrapping
                | DbError::ReadTimeout { .. }
                | DbError::WriteTimeout { .. }
                | DbError::ReadFailure { .. }
                | DbError::WriteFailure { .. }
                | DbError::ServerError
                | DbError::RateLimitReached { .. }
                | DbError::TruncateError
        ),
        _ => false,
    }
}

fn wrap(
    transient: bool,
    what: impl Into<String>,
    cause: impl std::error::Error + Send + Sync + 'static,
) -> StoreError {
    let error = if transient {
        StoreError::unavailable(what)
    } else {
        StoreError::rejected(what)
    };
    error.caused_by(cause)
}

/// A refusal caused by the driver's `e`, for `map_err`: `.map_err(refused("checkpoint read"))`.
pub(super) fn refused<E: std::error::Error + Send + Sync + 'static>(
    what: &'static str,
) -> impl FnOnce(E) -> StoreError {
    move |e| StoreError::rejected(what).caused_by(e)
}
