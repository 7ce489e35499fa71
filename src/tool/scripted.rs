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
    /// RP-2: the failure's `code`, as a service sends it next to `error`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreValidationScript {
    pub eligible: bool,
    #[serde(default)]
    pub reason: Option<String>,
    /// RP-2: the refusal's `code`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code: Option<String>,
    #[serde(default)]
    pub data: Value,
}

impl ExecutionScript {
    /// What a service answers for this failure: `{"error", "code"}` (the tool server sends it as
    /// the body, the in-process gateway gives it as the result data, like `HttpToolGateway`).
    pub fn failure_body(&self) -> Value {
        let mut body = serde_json::Map::new();
        body.insert(
            "error".into(),
            Value::String(self.error.clone().unwrap_or_else(|| {
                if self.retryable {
                    "temporarily unavailable".into()
                } else {
                    "failed".into()
                }
            })),
        );
        if let Some(code) = &self.code {
            body.insert("code".into(), Value::String(code.clone()));
        }
        Value::Object(body)
    }
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
                code: None,
            },
        }
    }

    pub fn pre_validation(&self, tool: &str) -> PreValidationScript {
        match self.script.get(&format!("{tool}{PRE_VALIDATION_SUFFIX}")) {
            Some(ToolScript::PreValidation(p)) => p.clone(),
            _ => PreValidationScript {
                eligible: true,
                reason: None,
                code: None,
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
            code: p.code,
            data: p.data,
            at_ms: ctx.turn_at_ms,
        }
    }

    async fn execute(&self, request: &ToolRequest, ctx: CallContext<'_>) -> ToolResult {
        let e = self.execution(&request.tool);
        let data = if e.ok {
            e.data.clone()
        } else {
            e.failure_body()
        };
        single_attempt_result(
            &request.idempotency_key,
            e.ok,
            e.retryable,
            data,
            e.error,
            ctx.turn_at_ms,
        )
    }
}
