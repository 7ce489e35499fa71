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
    wrap(transient, e.to_string())
}

pub(super) fn classify_prepare(e: &PrepareError) -> StoreError {
    wrap(prepare_is_transient(e), e.to_string())
}

pub(super) fn classify_schema_agreement(e: SchemaAgreementError) -> StoreError {
    // Disagreement or a timeout while nodes converge is the normal transient case for DDL.
    StoreError::Unavailable(format!("schema agreement: {e}"))
}

pub(super) fn classify_new_session(e: NewSessionError, cfg: &CqlConfig) -> StoreError {
    let contacts = cfg.contact_points.join(",");
    match e {
        NewSessionError::EmptyKnownNodesList | NewSessionError::IllegalConfig(_) => {
            StoreError::Rejected(format!("cannot connect to {contacts}: {e}"))
        }
        other => StoreError::Unavailable(format!("cannot connect to {contacts}: {other}")),
    }
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

pub(super) fn wrap(transient: bool, message: String) -> StoreError {
    if transient {
        StoreError::Unavailable(message)
    } else {
        StoreError::Rejected(message)
    }
}
