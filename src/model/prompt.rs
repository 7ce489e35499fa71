//! The chat requests the model adapters send: a short system prompt per skill (asking for JSON
//! only, with the exact schema the `output` parsers read) and a user message that is one JSON
//! object describing the turn. Structs, not `json!`, so the field order on the wire is fixed and
//! golden files stay byte-stable (`tests/golden/model/*.json`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::config::profiles::ModelProfile;
use crate::domain::catalog::Assistant;
use crate::domain::effect::{
    ClassifierRequest, InterpreterRequest, ParameterBrief, RouterRequest, TransactionSummary,
};
use crate::domain::locale::Locale;
use crate::domain::parameter::ParameterKind;
use crate::domain::state::{HistoryEntry, Speaker};

/// SC-1: the classifier only labels the turn; it never answers, runs tools, picks a queue or
/// closes a channel.
pub const CLASSIFIER_PROMPT: &str = include_str!("prompts/classifier.txt");
pub const ROUTER_PROMPT: &str = include_str!("prompts/router.txt");
pub const INTERPRETER_PROMPT: &str = include_str!("prompts/interpreter.txt");

/// One chat message (`role` is `system` or `user`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    pub content: String,
}

impl ChatMessage {
    fn system(content: &str) -> ChatMessage {
        ChatMessage {
            role: "system".into(),
            content: content.trim_end().to_owned(),
        }
    }

    fn user(input: &impl Serialize) -> ChatMessage {
        ChatMessage {
            role: "user".into(),
            // Serialising these plain structs cannot fail; an empty object keeps the call going.
            content: serde_json::to_string(input).unwrap_or_else(|_| "{}".into()),
        }
    }
}

/// `response_format` of an OpenAI-compatible chat request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResponseFormat {
    #[serde(rename = "type")]
    pub kind: String,
}

/// The body of `POST {base_url}/chat/completions`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    pub model: String,
    pub messages: Vec<ChatMessage>,
    pub temperature: f64,
    pub max_tokens: u32,
    /// Only when the profile sets `json_mode`: not every compatible endpoint accepts it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
}

/// The request body for `profile`, capped at `max_tokens` output tokens.
pub fn chat_request(
    profile: &ModelProfile,
    max_tokens: u32,
    messages: Vec<ChatMessage>,
) -> ChatRequest {
    ChatRequest {
        model: profile.model.clone(),
        messages,
        temperature: profile.temperature,
        max_tokens,
        response_format: profile.json_mode.then(|| ResponseFormat {
            kind: "json_object".into(),
        }),
    }
}

/// One previous turn as the classifier sees it: what the customer said, what was answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
struct HistoryTurn {
    #[serde(skip_serializing_if = "String::is_empty")]
    user: String,
    #[serde(skip_serializing_if = "String::is_empty")]
    assistant: String,
}

/// Groups history lines by turn id, oldest first.
fn history_turns(history: &[HistoryEntry]) -> Vec<HistoryTurn> {
    let mut turns: Vec<(&str, HistoryTurn)> = Vec::new();
    for entry in history {
        if turns.last().map(|(id, _)| *id) != Some(entry.turn_id.as_str()) {
            turns.push((
                &entry.turn_id,
                HistoryTurn {
                    user: String::new(),
                    assistant: String::new(),
                },
            ));
        }
        if let Some((_, turn)) = turns.last_mut() {
            let side = match entry.role {
                Speaker::User => &mut turn.user,
                Speaker::Assistant => &mut turn.assistant,
            };
            if !side.is_empty() {
                side.push('\n');
            }
            side.push_str(&entry.text);
        }
    }
    turns.into_iter().map(|(_, t)| t).collect()
}

#[derive(Serialize)]
struct ClassifierInput<'a> {
    message: &'a str,
    locale: Locale,
    history: Vec<HistoryTurn>,
    active_agent: Option<&'a str>,
    active_transaction: Option<&'a TransactionSummary>,
}

/// SC-8: the message, the request's (already capped) history and the active agent/transaction.
pub fn classifier_messages(req: &ClassifierRequest) -> Vec<ChatMessage> {
    let input = ClassifierInput {
        message: &req.message,
        locale: req.locale,
        history: history_turns(&req.history),
        active_agent: req.active_agent.as_deref(),
        active_transaction: req.active_transaction.as_ref(),
    };
    vec![
        ChatMessage::system(CLASSIFIER_PROMPT),
        ChatMessage::user(&input),
    ]
}

#[derive(Serialize)]
struct ParameterInput<'a> {
    name: &'a str,
    #[serde(rename = "type")]
    type_name: &'static str,
    required: bool,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    values: Vec<&'a str>,
}

#[derive(Serialize)]
struct ToolInput<'a> {
    name: &'a str,
    description: &'a str,
    parameters: Vec<ParameterInput<'a>>,
}

#[derive(Serialize)]
struct AgentInput<'a> {
    name: &'a str,
    description: &'a str,
    tools: Vec<ToolInput<'a>>,
}

#[derive(Serialize)]
struct RouterInput<'a> {
    message: &'a str,
    locale: Locale,
    agents: Vec<AgentInput<'a>>,
    active_agent: Option<&'a str>,
    active_transaction: Option<&'a TransactionSummary>,
}

/// The message, the assistant's domain agents and their tools as configured (descriptions,
/// parameter names and types), and the transaction in flight. Only this assistant's tools.
pub fn router_messages(req: &RouterRequest, assistant: &Assistant) -> Vec<ChatMessage> {
    let mut tools_by_agent: BTreeMap<&str, Vec<ToolInput<'_>>> = BTreeMap::new();
    for tool in assistant.tools.values() {
        tools_by_agent
            .entry(tool.agent.as_str())
            .or_default()
            .push(ToolInput {
                name: &tool.name,
                description: tool.description.trim(),
                parameters: tool
                    .parameters
                    .iter()
                    .map(|p| ParameterInput {
                        name: &p.name,
                        type_name: p.kind.type_name(),
                        required: p.required,
                        values: match &p.kind {
                            ParameterKind::Enum { values } => {
                                values.iter().map(|v| v.value.as_str()).collect()
                            }
                            _ => Vec::new(),
                        },
                    })
                    .collect(),
            });
    }
    let agents = assistant
        .agents
        .values()
        .map(|a| AgentInput {
            name: &a.name,
            description: a.description.trim(),
            tools: tools_by_agent.remove(a.name.as_str()).unwrap_or_default(),
        })
        .collect();
    let input = RouterInput {
        message: &req.message,
        locale: req.locale,
        agents,
        active_agent: req.active_agent.as_deref(),
        active_transaction: req.active_transaction.as_ref(),
    };
    vec![
        ChatMessage::system(ROUTER_PROMPT),
        ChatMessage::user(&input),
    ]
}

#[derive(Serialize)]
struct InterpreterInput<'a> {
    message: &'a str,
    locale: Locale,
    transaction: &'a TransactionSummary,
    parameters: &'a [ParameterBrief],
}

/// The message, the transaction's tool, status and collected arguments, and its parameters.
pub fn interpreter_messages(req: &InterpreterRequest) -> Vec<ChatMessage> {
    let input = InterpreterInput {
        message: &req.message,
        locale: req.locale,
        transaction: &req.transaction,
        parameters: &req.parameters,
    };
    vec![
        ChatMessage::system(INTERPRETER_PROMPT),
        ChatMessage::user(&input),
    ]
}

/// The user message's JSON, for tests and tools that inspect a recorded request.
pub fn user_input(messages: &[ChatMessage]) -> Option<Value> {
    messages
        .iter()
        .rev()
        .find(|m| m.role == "user")
        .and_then(|m| serde_json::from_str(&m.content).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(turn: &str, role: Speaker, text: &str) -> HistoryEntry {
        HistoryEntry {
            role,
            text: text.into(),
            turn_id: turn.into(),
            at_ms: 0,
        }
    }

    // SC-8: history lines are grouped per turn, so "N turns" is visible to the model.
    #[test]
    fn history_is_grouped_per_turn() {
        let turns = history_turns(&[
            entry("a", Speaker::User, "hi"),
            entry("a", Speaker::Assistant, "hello"),
            entry("a", Speaker::Assistant, "how can I help?"),
            entry("b", Speaker::User, "bye"),
        ]);
        assert_eq!(turns.len(), 2);
        assert_eq!(turns[0].assistant, "hello\nhow can I help?");
        assert_eq!(turns[1].assistant, "");
    }

    #[test]
    fn prompts_ask_for_the_parsers_schemas() {
        for (prompt, keys) in [
            (CLASSIFIER_PROMPT, &["\"decision\"", "\"confidence\""][..]),
            (
                ROUTER_PROMPT,
                &["\"agent\"", "\"intent\"", "\"out_of_scope\""],
            ),
            (
                INTERPRETER_PROMPT,
                &["\"act\"", "\"arguments\"", "\"confidence\""],
            ),
        ] {
            for k in keys {
                assert!(prompt.contains(k), "{k}");
            }
        }
    }
}
