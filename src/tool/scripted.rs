//! `ScriptedTools`: tool and pre-validation results from a turn's scenario script. An unscripted
//! tool succeeds with `{}`; an unscripted pre-validation is eligible (scenarios.md).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::decision::{PreValidationResult, ToolResult};
use crate::domain::effect::ToolRequest;
use crate::domain::engine::single_attempt_result;
use crate::ports::{CallContext, ToolGateway};

/// Suffix naming a tool's pre-validation in a `tools:` script (`retail_order_cancel.pre_validation`).
pub const PRE_VALIDATION_SUFFIX: &str = ".pre_validation";

/// One scripted result: a tool result or a pre-validation answer, by key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum ToolScript {
    Execution(ExecutionScript),
    PreValidation(PreValidationScript),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExecutionScript {
    pub ok: bool,
    #[serde(default)]
    pub data: Value,
    #[serde(default)]
    pub retryable: bool,
    #[serde(default)]
    pub error: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreValidationScript {
    pub eligible: bool,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub data: Value,
}

/// A `ToolGateway` answering from one turn's script, in process.
#[derive(Debug, Clone, Default)]
pub struct ScriptedTools {
    pub script: BTreeMap<String, ToolScript>,
}

impl ScriptedTools {
    pub fn new(script: BTreeMap<String, ToolScript>) -> Self {
        ScriptedTools { script }
    }

    pub fn execution(&self, tool: &str) -> ExecutionScript {
        match self.script.get(tool) {
            Some(ToolScript::Execution(e)) => e.clone(),
            _ => ExecutionScript {
                ok: true,
                data: Value::Object(Default::default()),
                retryable: false,
                error: None,
            },
        }
    }

    pub fn pre_validation(&self, tool: &str) -> PreValidationScript {
        match self.script.get(&format!("{tool}{PRE_VALIDATION_SUFFIX}")) {
            Some(ToolScript::PreValidation(p)) => p.clone(),
            _ => PreValidationScript {
                eligible: true,
                reason: None,
                data: Value::Null,
            },
        }
    }
}

impl ToolGateway for ScriptedTools {
    async fn pre_validate(
        &self,
        request: &ToolRequest,
        ctx: CallContext<'_>,
    ) -> PreValidationResult {
        let p = self.pre_validation(&request.tool);
        PreValidationResult {
            eligible: p.eligible,
            reason: p.reason,
            data: p.data,
            at_ms: ctx.turn_at_ms,
        }
    }

    async fn execute(&self, request: &ToolRequest, ctx: CallContext<'_>) -> ToolResult {
        let e = self.execution(&request.tool);
        single_attempt_result(
            &request.idempotency_key,
            e.ok,
            e.retryable,
            e.data,
            e.error,
            ctx.turn_at_ms,
        )
    }
}
