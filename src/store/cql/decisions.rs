//! Decision records in CQL (issue 26, `schemas/cql/005_decision_records.cql`): one row per turn
//! under the conversation's partition key, written with the turn's fencing timestamp.

use std::ops::ControlFlow;

use scylla::response::PagingState;
use scylla::statement::batch::{Batch, BatchType};

use super::*;
use crate::ports::{DecisionRecordStore, DecisionRow};

/// The two statements: one fenced cell write (a record, or a null that deletes an expired one)
/// and the conversation's read.
pub(super) struct DecisionStatements {
    save: PreparedStatement,
    load: PreparedStatement,
    list: PreparedStatement,
}

impl DecisionStatements {
    pub(super) async fn prepare(
        session: &Session,
        cfg: &CqlConfig,
    ) -> Result<DecisionStatements, StoreError> {
        let ks = &cfg.keyspace;
        let save = prepare(
            session,
            format!(
                "UPDATE {ks}.decision_records USING TIMESTAMP ? SET record = ? \
                 WHERE tenant_id = ? AND agent_id = ? AND session_id = ? AND turn_id = ?"
            ),
            cfg.write_consistency,
            true,
        )
        .await?;
        let load = prepare(
            session,
            format!(
                "SELECT turn_id, record FROM {ks}.decision_records \
                 WHERE tenant_id = ? AND agent_id = ? AND session_id = ?"
            ),
            cfg.read_consistency,
            true,
        )
        .await?;
        // Every partition key: a scan, paged, for the offline `replay --sample` only.
        let mut list = prepare(
            session,
            format!("SELECT DISTINCT tenant_id, agent_id, session_id FROM {ks}.decision_records"),
            cfg.read_consistency,
            true,
        )
        .await?;
        list.set_page_size(LIST_PAGE_SIZE);
        Ok(DecisionStatements { save, load, list })
    }
}

/// Conversations per page of the `replay --sample` scan.
const LIST_PAGE_SIZE: i32 = 500;

type Cell<'a> = (i64, Option<&'a [u8]>, &'a str, &'a str, &'a str, &'a str);

/// The record's cell, then a null (a delete) for each expired turn, all at timestamp `ts`.
fn cells<'a>(id: &'a Identity, row: &'a DecisionRow, ts: i64) -> Vec<Cell<'a>> {
    let key = (&id.tenant_id, &id.agent_id, &id.session_id);
    let cell = |turn_id: &'a str, bytes: Option<&'a [u8]>| -> Cell<'a> {
        (ts, bytes, key.0, key.1, key.2, turn_id)
    };
    let mut values = vec![cell(&row.turn_id, Some(&row.record))];
    values.extend(row.expired.iter().map(|t| cell(t, None)));
    values
}

impl DecisionRecordStore for ScyllaCheckpointStore {
    /// The record and the deletes of expired ones in one unlogged batch: a single partition, so
    /// one mutation on each replica, all cells with the same fencing timestamp.
    async fn save_decision(
        &self,
        identity: &Identity,
        row: &DecisionRow,
        fence: Fence,
    ) -> Result<(), StoreError> {
        let ts = fence_timestamp(fence, PHASE_TURN_END)?;
        let values = cells(identity, row, ts);
        let _slot = self.slot().await;
        let result = if values.len() == 1 {
            self.session
                .execute_unpaged(&self.decisions.save, &values[0])
                .await
                .map(|_| ())
        } else {
            let mut batch = Batch::new(BatchType::Unlogged);
            for _ in &values {
                batch.append_statement(self.decisions.save.clone());
            }
            batch.set_is_idempotent(true);
            self.session.batch(&batch, &values).await.map(|_| ())
        };
        if result.is_err() {
            counter!(CHECKPOINT_ERRORS_TOTAL, "op" => "record").increment(1);
        }
        result.map_err(classify_execution)
    }

    async fn load_decisions(&self, identity: &Identity) -> Result<Vec<DecisionRow>, StoreError> {
        let _slot = self.slot().await;
        let id = identity;
        let result = self
            .session
            .execute_unpaged(
                &self.decisions.load,
                (&id.tenant_id, &id.agent_id, &id.session_id),
            )
            .await
            .map_err(classify_execution)?;
        let rows = result
            .into_rows_result()
            .map_err(refused("decision record read"))?;
        let typed = rows
            .rows::<(String, Option<Vec<u8>>)>()
            .map_err(refused("decision record read"))?;
        let mut out = Vec::new();
        for row in typed {
            let (turn_id, record) = row.map_err(refused("decision record read"))?;
            if let Some(record) = record {
                out.push(DecisionRow {
                    turn_id,
                    record,
                    expired: Vec::new(),
                });
            }
        }
        Ok(out)
    }

    async fn list_conversations(&self, limit: usize) -> Result<Vec<Identity>, StoreError> {
        let mut ids = Vec::new();
        let mut paging = PagingState::start();
        while ids.len() < limit {
            let (result, next) = self
                .session
                .execute_single_page(&self.decisions.list, (), paging)
                .await
                .map_err(classify_execution)?;
            let rows = result
                .into_rows_result()
                .map_err(refused("decision record scan"))?;
            for row in rows
                .rows::<(String, String, String)>()
                .map_err(refused("decision record scan"))?
            {
                let (tenant, agent, session) = row.map_err(refused("decision record scan"))?;
                ids.push(Identity::new(&tenant, &agent, &session));
            }
            match next.into_paging_control_flow() {
                ControlFlow::Continue(state) => paging = state,
                ControlFlow::Break(()) => break,
            }
        }
        ids.truncate(limit);
        Ok(ids)
    }
}
