//! The CQL schema and `ScyllaCheckpointStore::migrate`: the embedded `schemas/cql/*.cql`,
//! rendered with the configured keyspace, replication and retention, applied in order.

use super::*;

/// DDL waits for schema agreement server-side, which takes seconds on a busy node.
pub(super) const DDL_TIMEOUT: Duration = Duration::from_secs(30);
/// The schema, applied in order by [`ScyllaCheckpointStore::migrate`]. Embedded so the binary
/// migrates without the source tree.
pub(super) const MIGRATIONS: &[(&str, &str)] = &[
    (
        "001_keyspace.cql",
        include_str!("../../../schemas/cql/001_keyspace.cql"),
    ),
    (
        "002_checkpoints.cql",
        include_str!("../../../schemas/cql/002_checkpoints.cql"),
    ),
    (
        "003_partition_leases.cql",
        include_str!("../../../schemas/cql/003_partition_leases.cql"),
    ),
    (
        "004_checkpoints_retention.cql",
        include_str!("../../../schemas/cql/004_checkpoints_retention.cql"),
    ),
    (
        "005_decision_records.cql",
        include_str!("../../../schemas/cql/005_decision_records.cql"),
    ),
];
impl ScyllaCheckpointStore {
    /// Creates the keyspace and tables from `schemas/cql/*.cql`, in order, waiting for schema
    /// agreement after each statement. Idempotent: safe to run on every deploy.
    pub async fn migrate(cfg: &CqlConfig) -> Result<(), StoreError> {
        cfg.validate()?;
        let session = build_session(cfg).await?;
        for (name, template) in MIGRATIONS {
            let text = render(template, cfg)?;
            for stmt in split_statements(&text) {
                let mut statement = Statement::new(stmt.clone());
                statement.set_request_timeout(Some(DDL_TIMEOUT.max(cfg.request_timeout())));
                // IF NOT EXISTS / ALTER to a fixed value: repeating it converges.
                statement.set_is_idempotent(true);
                let session = &session;
                with_retries("migrate", || {
                    let statement = statement.clone();
                    async move {
                        session
                            .query_unpaged(statement, ())
                            .await
                            .map_err(classify_execution)?;
                        session
                            .await_schema_agreement()
                            .await
                            .map_err(classify_schema_agreement)?;
                        Ok(())
                    }
                })
                .await
                .map_err(|e| match e {
                    StoreError::Rejected { what, cause } => StoreError::Rejected {
                        what: format!("{name}: {what}"),
                        cause,
                    },
                    other => other,
                })?;
            }
            tracing::info!(file = name, keyspace = %cfg.keyspace, "cql migration applied");
        }
        Ok(())
    }
}

pub(super) fn render(template: &str, cfg: &CqlConfig) -> Result<String, StoreError> {
    let text = template
        .replace("{{keyspace}}", &cfg.keyspace)
        .replace("{{replication}}", cfg.replication.trim())
        .replace(
            "{{default_time_to_live}}",
            &cfg.retention_seconds().to_string(),
        );
    if split_statements(&text).iter().any(|s| s.contains("{{")) {
        return Err(StoreError::rejected(
            "schema template has an unknown placeholder",
        ));
    }
    Ok(text)
}

/// Splits a CQL script on `;`, dropping `--` comments; quotes are respected so a `;` or `--`
/// inside a string literal stays part of the statement.
pub(super) fn split_statements(script: &str) -> Vec<String> {
    let mut statements = Vec::new();
    let mut current = String::new();
    for line in script.lines() {
        let mut in_quote = false;
        let mut chars = line.chars().peekable();
        while let Some(c) = chars.next() {
            match c {
                '\'' => {
                    in_quote = !in_quote;
                    current.push(c);
                }
                '-' if !in_quote && chars.peek() == Some(&'-') => break,
                ';' if !in_quote => {
                    let stmt = current.trim().to_owned();
                    if !stmt.is_empty() {
                        statements.push(stmt);
                    }
                    current.clear();
                }
                _ => current.push(c),
            }
        }
        current.push('\n');
    }
    let rest = current.trim();
    if !rest.is_empty() {
        statements.push(rest.to_owned());
    }
    statements
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_statements_and_drops_comments() {
        let script =
            "-- a; b\nCREATE X (a int, -- c;\n b text) WITH comment = 'x; -- y';\n\nALTER Y;";
        let stmts = split_statements(script);
        assert_eq!(stmts.len(), 2);
        assert!(stmts[0].contains("'x; -- y'"));
        assert!(!stmts[0].contains("c;"));
        assert_eq!(stmts[1], "ALTER Y");
    }

    #[test]
    fn renders_every_placeholder() {
        let cfg = CqlConfig::default();
        for (name, template) in MIGRATIONS {
            let text = render(template, &cfg).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!text.contains("{{"), "{name}");
        }
    }
}
