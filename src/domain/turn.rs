//! One inbound turn: who it belongs to, what it says, when it happened.

use serde::{Deserialize, Serialize};

use crate::domain::locale::Locale;

/// The conversation identity (ST-3): every checkpoint, Kafka key and lock is scoped by it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub struct Identity {
    pub tenant_id: String,
    pub agent_id: String,
    pub session_id: String,
}

impl Identity {
    pub fn new(tenant_id: &str, agent_id: &str, session_id: &str) -> Identity {
        Identity {
            tenant_id: tenant_id.to_owned(),
            agent_id: agent_id.to_owned(),
            session_id: session_id.to_owned(),
        }
    }

    /// The Kafka key and log form: the three parts joined by `/`.
    pub fn key(&self) -> String {
        format!("{}/{}/{}", self.tenant_id, self.agent_id, self.session_id)
    }
}

/// A structured channel action (a button): decides alone, no model (order of evaluation, step 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ChannelAction {
    Confirm,
    Decline,
    Cancel,
    Handoff,
    End,
    /// SC-11: the queue router or the agent desk gives the conversation back to the assistant.
    Handback,
}

impl ChannelAction {
    /// Every action, in the order the schema lists them.
    pub const ALL: [ChannelAction; 6] = [
        ChannelAction::Confirm,
        ChannelAction::Decline,
        ChannelAction::Cancel,
        ChannelAction::Handoff,
        ChannelAction::End,
        ChannelAction::Handback,
    ];

    /// `confirm, decline, cancel, handoff, end, handback`: for error messages.
    pub fn names() -> String {
        let names: Vec<&str> = ChannelAction::ALL.iter().map(|a| a.as_str()).collect();
        names.join(", ")
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ChannelAction::Confirm => "confirm",
            ChannelAction::Decline => "decline",
            ChannelAction::Cancel => "cancel",
            ChannelAction::Handoff => "handoff",
            ChannelAction::End => "end",
            ChannelAction::Handback => "handback",
        }
    }
}

/// What the user sent: free text, or a structured action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnInput {
    Text(String),
    Action(ChannelAction),
}

/// One inbound message. The engine reads time only from `at_ms` (no clock inside the core).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Turn {
    pub turn_id: String,
    pub identity: Identity,
    pub input: TurnInput,
    pub locale: Locale,
    /// When the channel received the turn, milliseconds since the Unix epoch.
    pub at_ms: i64,
}

impl Turn {
    pub fn text(&self) -> Option<&str> {
        match &self.input {
            TurnInput::Text(t) => Some(t),
            TurnInput::Action(_) => None,
        }
    }
}
