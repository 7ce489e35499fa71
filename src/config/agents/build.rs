//! Building the domain catalog from the raw file: assistants, their parameters and tools.

use std::collections::{BTreeMap, BTreeSet};

use crate::domain::catalog::{
    Assistant, DomainAgent, Localized, MessageSet, OnAttemptsExhausted, ParameterSpec,
    SessionExamples, TenantRule, Tool, ToolAccess,
};
use crate::domain::locale::Locale;
use crate::domain::parameter::{EnumValue, IdPattern, ParameterKind};
use crate::domain::wording::ParameterWording;

use super::defaults::{
    default_example, default_messages, default_pre_validation_endpoint,
    DEFAULT_INTERPRETER_PROFILE, DEFAULT_MAX_ATTEMPTS, DEFAULT_ROUTER_PROFILE,
    DEFAULT_TEXT_MAX_LENGTH, RESERVED_AGENT_NAMES,
};
use super::load::Validator;
use super::schema::{
    message_slot, RawAgent, RawAssistant, RawEnumValue, RawExhausted, RawKind, RawMessages,
    RawParameter, RawProfileRefs, RawSessionExamples, RawTenantRule, RawTool, RawToolAccess,
};
use super::validate::{names, valid_in_some_locale};
use super::wording::RawToolWording;

/// A parameter definition after validation, before tools take it.
#[derive(Debug, Clone)]
struct ParameterDef {
    kind: ParameterKind,
    label: Localized,
    synonyms: Vec<String>,
    example: Option<String>,
    wording: ParameterWording,
    sensitive: bool,
}

impl Validator<'_> {
    pub(super) fn assistant(&mut self, id: &str, a: RawAssistant) -> Option<Assistant> {
        let base = format!("assistants.{id}");
        let errors_before = self.errors.len();
        if id.trim().is_empty() {
            self.err(
                "assistants",
                "an assistant has an empty agent_id",
                "give the assistant a non-empty key, e.g. retail-bot",
            );
        } else if id.contains('/') {
            self.err(
                &base,
                format!("agent_id `{id}` contains `/`"),
                "remove `/` from the agent_id (it is part of the conversation key)",
            );
        }

        let default_locale = match &a.default_locale {
            None => Locale::En,
            Some(tag) => self
                .locale(&format!("{base}.default_locale"), tag)
                .unwrap_or_default(),
        };

        let agents = self.domain_agents(&base, a.agents);

        // Parameter definitions (shared by the tools).
        let mut params: BTreeMap<String, ParameterDef> = BTreeMap::new();
        for (name, raw) in a.parameters {
            let key = format!("{base}.parameters.{name}");
            self.check_name(&key, "parameter", &name);
            if let Some(def) = self.parameter(&key, &name, raw) {
                params.insert(name, def);
            }
        }

        // Tools.
        if a.tools.is_empty() {
            self.err(
                format!("{base}.tools"),
                "no tool is defined",
                "define at least one tool under `tools:`",
            );
        }
        let mut tools = BTreeMap::new();
        for (name, raw) in a.tools {
            let key = format!("{base}.tools.{name}");
            self.check_name(&key, "tool", &name);
            if let Some(tool) = self.tool(&key, &name, raw, &agents, &params, default_locale) {
                tools.insert(name, tool);
            }
        }

        let tenants = self.tenant_rules(&base, a.tenants, &tools);

        let (router_profile, interpreter_profile) = self.profile_names(&base, a.profiles);

        let messages = self.assistant_messages(&base, a.messages);

        let session_examples = self.session_examples(&base, a.session_examples.unwrap_or_default());

        let conversation = self.topics(&format!("{base}.conversation"), a.conversation, "reply");

        let currency_symbol =
            self.currency_symbol(&format!("{base}.currency_symbol"), a.currency_symbol);
        if self.errors.len() > errors_before {
            return None;
        }
        Some(Assistant {
            agent_id: id.to_owned(),
            tenants,
            agents,
            tools,
            messages,
            default_locale,
            router_profile,
            interpreter_profile,
            session_examples,
            conversation,
            currency_symbol,
        })
    }

    /// The router and interpreter profile names (the defaults when not given).
    fn profile_names(&mut self, base: &str, refs: Option<RawProfileRefs>) -> (String, String) {
        let refs = refs.unwrap_or(RawProfileRefs {
            router: None,
            interpreter: None,
        });
        let mut profile = |role: &str, value: Option<String>, default: &str| match value {
            None => default.to_owned(),
            Some(p) if p.trim().is_empty() => {
                self.err(
                    format!("{base}.profiles.{role}"),
                    "the profile name is empty",
                    format!(
                        "name a profile of the profiles file, or remove the key for `{default}`"
                    ),
                );
                default.to_owned()
            }
            Some(p) => p.trim().to_owned(),
        };
        let router_profile = profile("router", refs.router, DEFAULT_ROUTER_PROFILE);
        let interpreter_profile =
            profile("interpreter", refs.interpreter, DEFAULT_INTERPRETER_PROFILE);
        (router_profile, interpreter_profile)
    }

    /// The domain agents the router can pick: at least one, none named like session control.
    fn domain_agents(
        &mut self,
        base: &str,
        raw_agents: BTreeMap<String, RawAgent>,
    ) -> BTreeMap<String, DomainAgent> {
        let mut agents = BTreeMap::new();
        if raw_agents.is_empty() {
            self.err(
                format!("{base}.agents"),
                "no domain agent is defined",
                "define at least one agent the router can pick, e.g. `retail: {description: ...}`",
            );
        }
        for (name, raw) in raw_agents {
            let key = format!("{base}.agents.{name}");
            self.check_name(&key, "agent", &name);
            if RESERVED_AGENT_NAMES.contains(&name.as_str()) {
                self.err(
                    &key,
                    format!("`{name}` is reserved for session control"),
                    "rename the agent",
                );
            }
            let phrase = self.localized(raw.phrase, &name);
            agents.insert(
                name.clone(),
                DomainAgent {
                    name,
                    description: raw.description.trim().to_owned(),
                    phrase,
                },
            );
        }
        agents
    }

    /// Which tenants may use the assistant and which of its tools: at least one rule, one per
    /// tenant, naming only defined tools.
    fn tenant_rules(
        &mut self,
        base: &str,
        rules: Vec<RawTenantRule>,
        tools: &BTreeMap<String, Tool>,
    ) -> Vec<TenantRule> {
        let mut tenants = Vec::new();
        if rules.is_empty() {
            self.err(
                format!("{base}.tenants"),
                "no tenant may use this assistant",
                "add a rule, e.g. `tenants: [{tenant: \"*\", tools: \"*\"}]` to open it to every \
             tenant",
            );
        }
        let mut seen_tenants = BTreeSet::new();
        for (i, rule) in rules.into_iter().enumerate() {
            let key = format!("{base}.tenants[{i}]");
            let tenant = rule.tenant.trim().to_owned();
            if tenant.is_empty() {
                self.err(
                    format!("{key}.tenant"),
                    "the tenant is empty",
                    "give a tenant_id, or \"*\" for every tenant",
                );
            } else if !seen_tenants.insert(tenant.clone()) {
                self.err(
                    format!("{key}.tenant"),
                    format!("tenant `{tenant}` has more than one rule"),
                    "merge the rules into one",
                );
            }
            let access = match rule.tools {
                RawToolAccess::All => ToolAccess::All,
                RawToolAccess::Only(list) => {
                    for (j, t) in list.iter().enumerate() {
                        if !tools.contains_key(t) && !self.tool_was_defined(base, t) {
                            self.err(
                                format!("{key}.tools[{j}]"),
                                format!("tool `{t}` is not defined in this assistant"),
                                format!("use one of: {}", names(tools.keys())),
                            );
                        }
                    }
                    ToolAccess::Only(list)
                }
            };
            tenants.push(TenantRule {
                tenant,
                tools: access,
            });
        }
        tenants
    }

    /// The assistant's messages: the defaults of every locale, then the file's overrides.
    fn assistant_messages(
        &mut self,
        base: &str,
        raw_messages: BTreeMap<String, RawMessages>,
    ) -> BTreeMap<Locale, MessageSet> {
        let mut messages: BTreeMap<Locale, MessageSet> = Locale::ALL
            .iter()
            .map(|&l| (l, default_messages(l)))
            .collect();
        for (tag, raw) in raw_messages {
            let key = format!("{base}.messages.{tag}");
            let Some(locale) = self.locale(&key, &tag) else {
                continue;
            };
            let set = messages
                .get_mut(&locale)
                .expect("every locale has defaults");
            for (name, value) in raw.entries() {
                let Some(text) = value else { continue };
                let mkey = format!("{key}.{name}");
                *message_slot(set, name) = self.message_template(&mkey, name, text);
            }
        }
        messages
    }

    /// The example utterances of session control (handoff, end, cancel, out of scope).
    fn session_examples(&mut self, base: &str, raw_session: RawSessionExamples) -> SessionExamples {
        SessionExamples {
            human_handoff: self.examples(
                &format!("{base}.session_examples.human_handoff"),
                raw_session.human_handoff,
            ),
            end_session: self.examples(
                &format!("{base}.session_examples.end_session"),
                raw_session.end_session,
            ),
            cancel: self.examples(
                &format!("{base}.session_examples.cancel"),
                raw_session.cancel,
            ),
            out_of_scope: self.examples(
                &format!("{base}.session_examples.out_of_scope"),
                raw_session.out_of_scope,
            ),
        }
    }

    fn parameter(&mut self, key: &str, name: &str, mut raw: RawParameter) -> Option<ParameterDef> {
        let before = self.errors.len();
        let type_name = format!("{:?}", raw.kind).to_lowercase();
        self.check_misplaced_fields(key, &raw, &type_name);
        let kind = self.parameter_kind(key, &mut raw);

        let label = self.localized(raw.label, name);
        let wording = self.parameter_wording(key, raw.phrase, raw.gender, raw.description, &label);
        let synonyms: Vec<String> = raw
            .synonyms
            .into_iter()
            .map(|s| s.0.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect();
        let example = raw.example.map(|s| s.0.trim().to_owned());
        let sensitive = raw.sensitive;
        let kind = kind?;
        let example = self.parameter_example(key, &kind, example, &type_name);
        if self.errors.len() > before {
            return None;
        }
        Some(ParameterDef {
            kind,
            label,
            synonyms,
            example,
            wording,
            sensitive,
        })
    }

    /// Fields that belong to another type of parameter are errors.
    fn check_misplaced_fields(&mut self, key: &str, raw: &RawParameter, type_name: &str) {
        let misplaced = |field: &str, allowed: &str| {
            (
                format!("{key}.{field}"),
                format!("`{field}` does not apply to a `{type_name}` parameter"),
                format!("remove `{field}` (it is only for `{allowed}` parameters)"),
            )
        };
        let mut problems = Vec::new();
        if raw.kind != RawKind::Id && raw.pattern.is_some() {
            problems.push(misplaced("pattern", "id"));
        }
        if raw.kind != RawKind::Integer {
            if raw.min.is_some() {
                problems.push(misplaced("min", "integer"));
            }
            if raw.max.is_some() {
                problems.push(misplaced("max", "integer"));
            }
        }
        if raw.kind != RawKind::Text && raw.max_length.is_some() {
            problems.push(misplaced("max_length", "text"));
        }
        if raw.kind != RawKind::Enum && raw.values.is_some() {
            problems.push(misplaced("values", "enum"));
        }
        for (k, p, f) in problems {
            self.err(k, p, f);
        }
    }

    /// The parameter's type with its constraints, or `None` (errors recorded) when they are
    /// invalid.
    fn parameter_kind(&mut self, key: &str, raw: &mut RawParameter) -> Option<ParameterKind> {
        match raw.kind {
            RawKind::Id => match raw.pattern.as_deref().map(str::trim) {
                None | Some("") => {
                    self.err(
                        format!("{key}.pattern"),
                        "an id parameter needs a non-empty pattern",
                        "add a regular expression for the id, e.g. `pattern: \"PED-[0-9]{4,}\"`",
                    );
                    None
                }
                Some(p) => match IdPattern::new(p) {
                    Ok(pattern) => Some(ParameterKind::Id { pattern }),
                    Err(e) => {
                        self.err(
                            format!("{key}.pattern"),
                            e,
                            "write a valid regular expression that matches the whole id \
                             (Rust regex syntax), e.g. \"PED-[0-9]{4,}\"",
                        );
                        None
                    }
                },
            },
            RawKind::Integer => {
                if let (Some(min), Some(max)) = (raw.min, raw.max) {
                    if min > max {
                        self.err(
                            format!("{key}.min"),
                            format!("min {min} is greater than max {max}"),
                            "make min less than or equal to max",
                        );
                    }
                }
                Some(ParameterKind::Integer {
                    min: raw.min,
                    max: raw.max,
                })
            }
            RawKind::Number => Some(ParameterKind::Number),
            RawKind::Money => Some(ParameterKind::Money),
            RawKind::Date => Some(ParameterKind::Date),
            RawKind::Cep => Some(ParameterKind::Cep),
            RawKind::Text => match raw.max_length {
                Some(0) => {
                    self.err(
                        format!("{key}.max_length"),
                        "max_length must be at least 1",
                        format!(
                            "use a positive number of characters, or remove it for \
                             {DEFAULT_TEXT_MAX_LENGTH}"
                        ),
                    );
                    None
                }
                Some(n) => Some(ParameterKind::Text {
                    max_len: usize::try_from(n).unwrap_or(usize::MAX),
                }),
                None => Some(ParameterKind::Text {
                    max_len: DEFAULT_TEXT_MAX_LENGTH,
                }),
            },
            RawKind::Enum => self.enum_kind(key, raw.values.take().unwrap_or_default()),
        }
    }

    /// An enum's values, each word (value or synonym) non-empty and owned by one value only.
    fn enum_kind(&mut self, key: &str, values: Vec<RawEnumValue>) -> Option<ParameterKind> {
        if values.is_empty() {
            self.err(
                format!("{key}.values"),
                "an enum parameter needs at least one value",
                "list the accepted values, e.g. `values: [{value: express, synonyms: \
                 [fast]}]`",
            );
            None
        } else {
            let mut seen = BTreeMap::new();
            for (i, v) in values.iter().enumerate() {
                for (j, word) in std::iter::once(&v.value)
                    .chain(v.synonyms.iter())
                    .enumerate()
                {
                    let wkey = if j == 0 {
                        format!("{key}.values[{i}].value")
                    } else {
                        format!("{key}.values[{i}].synonyms[{}]", j - 1)
                    };
                    let norm = word.trim().to_lowercase();
                    if norm.is_empty() {
                        self.err(wkey, "the value is empty", "remove it or give a text");
                    } else if let Some(prev) = seen.insert(norm, i) {
                        if prev != i {
                            self.err(
                                wkey,
                                format!("`{word}` already means values[{prev}]"),
                                "give each word to one value only",
                            );
                        }
                    }
                }
            }
            Some(ParameterKind::Enum {
                values: values
                    .into_iter()
                    .map(|v| EnumValue {
                        value: v.value.trim().to_owned(),
                        synonyms: v
                            .synonyms
                            .into_iter()
                            .map(|s| s.trim().to_owned())
                            .collect(),
                    })
                    .collect(),
            })
        }
    }

    /// The example replies show after an invalid value: the file's, which must be valid, or the
    /// type's default (an id parameter must give one).
    fn parameter_example(
        &mut self,
        key: &str,
        kind: &ParameterKind,
        example: Option<String>,
        type_name: &str,
    ) -> Option<String> {
        match example {
            Some(e) => {
                if !valid_in_some_locale(kind, &e) {
                    self.err(
                        format!("{key}.example"),
                        format!("example `{e}` is not a valid {type_name} value"),
                        "give an example the parameter accepts (replies show it after an \
                         invalid value)",
                    );
                }
                Some(e)
            }
            None => {
                if matches!(kind, ParameterKind::Id { .. }) {
                    self.err(
                        format!("{key}.example"),
                        "an id parameter needs an example",
                        "add a valid id, e.g. `example: PED-1001` (replies show it after an \
                         invalid value)",
                    );
                }
                default_example(kind)
            }
        }
    }

    fn tool(
        &mut self,
        key: &str,
        name: &str,
        mut raw: RawTool,
        agents: &BTreeMap<String, DomainAgent>,
        params: &BTreeMap<String, ParameterDef>,
        default_locale: Locale,
    ) -> Option<Tool> {
        let before = self.errors.len();
        if !agents.contains_key(&raw.agent) {
            self.err(
                format!("{key}.agent"),
                format!("agent `{}` is not defined in this assistant", raw.agent),
                if agents.is_empty() {
                    "define the agent under the assistant's `agents:`".to_owned()
                } else {
                    format!(
                        "use one of: {}; or define it under the assistant's `agents:`",
                        names(agents.keys())
                    )
                },
            );
        }
        let raw_wording = RawToolWording::take(&mut raw);
        let max_attempts = raw.max_attempts.unwrap_or(DEFAULT_MAX_ATTEMPTS);
        if max_attempts == 0 {
            self.err(
                format!("{key}.max_attempts"),
                "max_attempts must be at least 1",
                format!("use 1 or more, or remove it for the default {DEFAULT_MAX_ATTEMPTS}"),
            );
        }

        let parameters = self.tool_parameters(key, &raw, params);

        let endpoint = self.endpoint(&format!("{key}.endpoint"), raw.endpoint);
        let explicit_pre = self.endpoint(
            &format!("{key}.pre_validation_endpoint"),
            raw.pre_validation_endpoint,
        );
        if explicit_pre.is_some() && !raw.pre_validation {
            self.err(
                format!("{key}.pre_validation_endpoint"),
                "pre_validation_endpoint is set but pre_validation is false, so it is never called",
                "set `pre_validation: true`, or remove `pre_validation_endpoint`",
            );
        }
        let pre_validation_endpoint = if raw.pre_validation {
            explicit_pre.or_else(|| endpoint.as_deref().map(default_pre_validation_endpoint))
        } else {
            None
        };

        let title = self.localized(raw.title, &name.replace('_', " "));
        let examples = self.examples(&format!("{key}.examples"), raw.examples);
        let action_verbs = self.examples(&format!("{key}.action_verbs"), raw.action_verbs);
        let questions = self.topics(&format!("{key}.questions"), raw.questions, "answer");
        let wording = self.tool_wording(key, raw_wording, &title, default_locale);
        if self.errors.len() > before {
            return None;
        }
        Some(Tool {
            name: name.to_owned(),
            agent: raw.agent,
            description: raw.description.trim().to_owned(),
            title,
            parameters,
            confirmation: raw.confirmation,
            pre_validation: raw.pre_validation,
            max_attempts,
            on_attempts_exhausted: match raw.on_attempts_exhausted {
                RawExhausted::Clarify => OnAttemptsExhausted::Clarify,
                RawExhausted::Handoff => OnAttemptsExhausted::Handoff,
            },
            endpoint,
            pre_validation_endpoint,
            examples,
            action_verbs,
            questions,
            wording,
        })
    }

    /// The tool's parameters (required, then optional), each listed once and defined by the
    /// assistant.
    fn tool_parameters(
        &mut self,
        key: &str,
        raw: &RawTool,
        params: &BTreeMap<String, ParameterDef>,
    ) -> Vec<ParameterSpec> {
        let mut seen = BTreeSet::new();
        let mut parameters = Vec::new();
        for (list, required, entries) in [
            ("parameters", true, &raw.parameters),
            ("optional_parameters", false, &raw.optional_parameters),
        ] {
            for (i, p) in entries.iter().enumerate() {
                let pkey = format!("{key}.{list}[{i}]");
                if !seen.insert(p.clone()) {
                    self.err(
                        pkey,
                        format!("parameter `{p}` is listed more than once"),
                        "list each parameter once, in `parameters` or `optional_parameters`",
                    );
                    continue;
                }
                match params.get(p) {
                    Some(def) => parameters.push(ParameterSpec {
                        name: p.clone(),
                        kind: def.kind.clone(),
                        required,
                        label: def.label.clone(),
                        synonyms: def.synonyms.clone(),
                        example: def.example.clone(),
                        wording: def.wording.clone(),
                        sensitive: def.sensitive,
                    }),
                    None if self.parameter_was_defined(key, p) => {}
                    None => self.err(
                        pkey,
                        format!("parameter `{p}` is not defined"),
                        format!(
                            "define it under the assistant's `parameters:`{}",
                            if params.is_empty() {
                                String::new()
                            } else {
                                format!(", or use one of: {}", names(params.keys()))
                            }
                        ),
                    ),
                }
            }
        }
        parameters
    }
}
