//! `ScriptedModel`: answers each model component from a turn's scenario script. An unscripted
//! component answers `error`, so fallback paths run (scenarios.md, runner rules).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::domain::decision::{
    ClassifierDecision, InterpreterDecision, ModelAnswer, ModelFailure, RouterDecision,
};
use crate::domain::effect::{ClassifierRequest, InterpreterRequest, RouterRequest};
use crate::model::output;
use crate::ports::{CallContext, DecisionModel};

/// One component's scripted answer: a fault word, or the JSON the model would return.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Scripted {
    Fault(ModelFailure),
    Answer(serde_json::Map<String, Value>),
}

/// What each model component answers during one turn.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelScript {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub classifier: Option<Scripted>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub router: Option<Scripted>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interpreter: Option<Scripted>,
}

/// Turns a script entry into the answer the real adapter would produce for the same body.
pub fn answer_with<T>(
    scripted: Option<&Scripted>,
    parse: impl Fn(&Value) -> ModelAnswer<T>,
) -> ModelAnswer<T> {
    match scripted {
        None => Err(ModelFailure::Error),
        Some(Scripted::Fault(f)) => Err(*f),
        Some(Scripted::Answer(map)) => parse(&Value::Object(map.clone())),
    }
}

/// A `DecisionModel` answering from one turn's script, in process.
#[derive(Debug, Clone, Default)]
pub struct ScriptedModel {
    pub script: ModelScript,
}

impl ScriptedModel {
    pub fn new(script: ModelScript) -> Self {
        ScriptedModel { script }
    }
}

impl DecisionModel for ScriptedModel {
    async fn classify(
        &self,
        _request: &ClassifierRequest,
        _ctx: CallContext<'_>,
    ) -> ModelAnswer<ClassifierDecision> {
        answer_with(self.script.classifier.as_ref(), output::parse_classifier)
    }

    async fn route(
        &self,
        _request: &RouterRequest,
        _ctx: CallContext<'_>,
    ) -> ModelAnswer<RouterDecision> {
        answer_with(self.script.router.as_ref(), output::parse_router)
    }

    async fn interpret(
        &self,
        _request: &InterpreterRequest,
        _ctx: CallContext<'_>,
    ) -> ModelAnswer<InterpreterDecision> {
        answer_with(self.script.interpreter.as_ref(), output::parse_interpreter)
    }
}
