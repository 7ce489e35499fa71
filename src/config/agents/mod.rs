//! The agents file: assistants (by `agent_id`), their domain agents, typed parameters, tools,
//! tenant access and reply messages. See `config/agents.example.yaml` for the documented shape.
//!
//! Loading has two stages. The structural stage deserializes the YAML into raw structs that deny
//! unknown keys; its one error names the key path and the line/column. The semantic stage then
//! checks references, patterns, ranges, locales and message placeholders, collects every problem
//! of the file, and builds the domain [`Catalog`](crate::domain::catalog::Catalog).
//!
//! Besides the catalog, the file holds the transport settings of the tool webhooks (`tool_http:`,
//! [`ToolHttpSettings`](crate::config::tool_http::ToolHttpSettings)): the domain catalog has no
//! place for them, so [`parse_agents_file`] returns both.

mod build;
mod defaults;
mod load;
mod schema;
mod validate;
mod wording;

pub use self::defaults::{
    default_messages, default_pre_validation_endpoint, DEFAULT_INTERPRETER_PROFILE,
    DEFAULT_MAX_ATTEMPTS, DEFAULT_ROUTER_PROFILE, DEFAULT_TEXT_MAX_LENGTH, MAX_TOOL_HTTP_ATTEMPTS,
    PRE_VALIDATION_PATH_SUFFIX,
};
pub use self::load::{
    load_agents_file, load_catalog, parse_agents_file, parse_catalog, AgentsFile,
};
pub use self::schema::message_entries;
pub use self::validate::endpoint_problem;

#[cfg(test)]
mod tests {
    use crate::config::unknown_placeholders;
    use crate::domain::catalog::{DEFAULT_END_SESSION_MESSAGE, DEFAULT_HUMAN_HANDOFF_MESSAGE};
    use crate::domain::locale::Locale;
    use crate::domain::parameter::ParameterKind;

    use super::defaults::default_example;
    use super::*;

    #[test]
    fn default_messages_use_only_known_placeholders() {
        for l in Locale::ALL {
            for (key, text) in message_entries(&default_messages(l)) {
                assert!(unknown_placeholders(text).is_empty(), "{l} {key}: {text}");
                assert!(!text.trim().is_empty(), "{l} {key}");
            }
        }
        assert_eq!(
            default_messages(Locale::En).human_handoff,
            DEFAULT_HUMAN_HANDOFF_MESSAGE
        );
        assert_eq!(
            default_messages(Locale::En).end_session,
            DEFAULT_END_SESSION_MESSAGE
        );
    }

    #[test]
    fn default_examples_are_valid() {
        for kind in [
            ParameterKind::Integer {
                min: Some(1),
                max: Some(99999),
            },
            ParameterKind::Number,
            ParameterKind::Money,
            ParameterKind::Date,
            ParameterKind::Cep,
        ] {
            assert!(default_example(&kind).is_some(), "{kind:?}");
        }
    }
}
