//! Configuration loading: the example domain, the seed's setting names and profiles format (SC-7),
//! and errors that name the file, the key and the fix for every class of broken config.

use std::collections::BTreeMap;
use std::path::Path;

use turnstile::config::agents::{
    load_agents_file, load_catalog, parse_agents_file, parse_catalog, DEFAULT_MAX_ATTEMPTS,
};
use turnstile::config::profiles::{
    check_profile_references, load_profiles, parse_profiles, Provider,
};
use turnstile::config::settings::{apply_overrides, settings_from_env, SETTING_NAMES};
use turnstile::config::ConfigErrors;
use turnstile::domain::catalog::{OnAttemptsExhausted, Settings, ToolAccess};
use turnstile::domain::locale::Locale;
use turnstile::domain::parameter::ParameterKind;
use turnstile::tool::ToolHttpSettings;

const AGENTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/agents.example.yaml");
const PROFILES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/config/profiles.example.yaml");

/// A small valid agents file; tests break one thing at a time.
const MINIMAL: &str = r#"
assistants:
  shop-bot:
    tenants: [{tenant: "*", tools: "*"}]
    agents:
      retail: {description: orders}
    parameters:
      order_id: {type: id, pattern: "PED-[0-9]{4,}", example: PED-1001}
    tools:
      order_cancel:
        agent: retail
        parameters: [order_id]
        confirmation: true
"#;

fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |k| map.get(k).cloned()
}

/// The error text names the file and the key and says how to fix it.
fn assert_names(err: &ConfigErrors, file: &str, key: &str, needle: &str) {
    let text = err.to_string();
    let line = text
        .lines()
        .find(|l| l.contains(key))
        .unwrap_or_else(|| panic!("no error names key `{key}`:\n{text}"));
    assert!(
        line.starts_with(&format!("{file}: ")),
        "file not named: {line}"
    );
    assert!(line.contains("fix:"), "no fix: {line}");
    assert!(
        line.to_lowercase().contains(&needle.to_lowercase()),
        "`{needle}` not in: {line}"
    );
}

fn catalog_err(yaml: &str) -> ConfigErrors {
    parse_catalog(yaml, "agents.yaml").expect_err("must be rejected")
}

// ---- the example domain (scenarios.md) ----

#[test]
fn example_config_has_the_example_domain() {
    let catalog = load_catalog(Path::new(AGENTS)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(catalog.assistants.len(), 1);
    let a = catalog.assistant("retail-bot").expect("retail-bot");
    assert_eq!(a.default_locale, Locale::En);
    assert_eq!(
        a.agents.keys().map(String::as_str).collect::<Vec<_>>(),
        ["billing", "retail"]
    );
    // Open to every tenant, every tool.
    assert!(a.serves("any-tenant"));
    assert_eq!(a.tenant_rule("t1").unwrap().tools, ToolAccess::All);
    assert!(a.offers("t1", "billing_show_bill"));

    // LC-1: confirmation and pre-validation steps as the table says.
    let expected = [
        (
            "retail_order_cancel",
            "retail",
            &["order_id"][..],
            true,
            true,
        ),
        (
            "retail_order_tracking",
            "retail",
            &["order_id"][..],
            false,
            false,
        ),
        (
            "retail_address_change",
            "retail",
            &["order_id", "zip_code", "house_number"][..],
            true,
            false,
        ),
        (
            "billing_contestation",
            "billing",
            &["subject", "amount"][..],
            true,
            false,
        ),
        ("billing_show_bill", "billing", &[][..], false, false),
    ];
    assert_eq!(a.tools.len(), expected.len());
    for (name, agent, params, confirmation, pre_validation) in expected {
        let t = a.tools.get(name).unwrap_or_else(|| panic!("tool {name}"));
        assert_eq!(t.agent, agent, "{name}");
        let names: Vec<&str> = t.parameters.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, params, "{name}");
        assert!(t.parameters.iter().all(|p| p.required), "{name}");
        assert_eq!(t.confirmation, confirmation, "{name}");
        assert_eq!(t.pre_validation, pre_validation, "{name}");
        // MG-4: default 3 attempts, then clarification.
        assert_eq!(t.max_attempts, DEFAULT_MAX_ATTEMPTS, "{name}");
        assert_eq!(
            t.on_attempts_exhausted,
            OnAttemptsExhausted::Clarify,
            "{name}"
        );
        assert!(
            !t.description.is_empty(),
            "{name} needs a router description"
        );
        assert!(
            !t.title.en.is_empty() && !t.title.pt_br.is_empty(),
            "{name}"
        );
    }

    // MG-4: parameter kinds.
    let change = &a.tools["retail_address_change"];
    let order_id = change.parameter("order_id").unwrap();
    match &order_id.kind {
        ParameterKind::Id { pattern } => {
            assert_eq!(pattern.as_str(), "PED-[0-9]{4,}");
            assert!(pattern.is_match("PED-1001"));
            assert!(!pattern.is_match("PED-12"));
        }
        other => panic!("order_id is {other:?}"),
    }
    assert_eq!(order_id.example.as_deref(), Some("PED-1001"));
    assert_eq!(
        change.parameter("zip_code").unwrap().kind,
        ParameterKind::Cep
    );
    assert!(matches!(
        change.parameter("house_number").unwrap().kind,
        ParameterKind::Integer { .. }
    ));
    let contest = &a.tools["billing_contestation"];
    assert!(matches!(
        contest.parameter("subject").unwrap().kind,
        ParameterKind::Text { .. }
    ));
    assert_eq!(
        contest.parameter("amount").unwrap().kind,
        ParameterKind::Money
    );

    // Both locales, seed defaults for handoff and end of session (SC-7).
    let en = a.messages(Locale::En);
    assert_eq!(
        en.human_handoff,
        "I will transfer your request to a person."
    );
    assert_eq!(
        en.end_session,
        "The session has ended. Thank you for contacting us."
    );
    assert!(en.confirm.contains("{arguments}") && en.confirm.contains("yes or no"));
    assert!(en.ask_parameters.contains("{params}"));
    let pt = a.messages(Locale::PtBr);
    assert_ne!(pt.human_handoff, en.human_handoff);
    assert!(pt.confirm.contains("sim ou não"));
    assert_eq!(order_id.label.get(Locale::PtBr), "número do pedido");
}

#[test]
fn example_profiles_have_the_seed_profile() {
    // SC-7: the seed's profiles format and its route_continuity profile.
    let profiles = load_profiles(Path::new(PROFILES)).unwrap_or_else(|e| panic!("{e}"));
    let p = profiles.get("route_continuity").expect("route_continuity");
    assert_eq!(p.provider, Provider::OciOpenai);
    assert_eq!(p.model, "openai.gpt-4.1-mini");
    assert_eq!(p.temperature, 0.0);
    assert_eq!(p.max_tokens, 80);
    assert_eq!(p.timeout_seconds, 5.0);
    assert!(!p.json_mode);
    assert!(profiles.get("router").is_some() && profiles.get("interpreter").is_some());

    let catalog = load_catalog(Path::new(AGENTS)).unwrap();
    check_profile_references(&catalog, AGENTS, &Settings::default(), &profiles)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn messages_fall_back_to_defaults_and_labels_to_the_other_locale() {
    let yaml = format!(
        "{MINIMAL}    messages:\n      pt-BR: {{clarify: \"Não entendi, pode repetir?\"}}\n"
    );
    let yaml = yaml.replace(
        "example: PED-1001}",
        "example: PED-1001, label: {en: order number}}",
    );
    let c = parse_catalog(&yaml, "agents.yaml").unwrap_or_else(|e| panic!("{e}"));
    let a = c.assistant("shop-bot").unwrap();
    assert_eq!(
        a.messages(Locale::PtBr).clarify,
        "Não entendi, pode repetir?"
    );
    assert!(!a.messages(Locale::PtBr).confirm.is_empty());
    let p = a.tools["order_cancel"].parameter("order_id").unwrap();
    assert_eq!(p.label.get(Locale::PtBr), "order number");
    assert_eq!(a.router_profile, "router");
    assert_eq!(a.interpreter_profile, "interpreter");
}

// ---- broken agents files ----

#[test]
fn unknown_key_is_named() {
    let e = catalog_err(&MINIMAL.replace("confirmation: true", "confirmaton: true"));
    assert_names(
        &e,
        "agents.yaml",
        "assistants.shop-bot.tools.order_cancel",
        "unknown field `confirmaton`",
    );
    assert!(e.to_string().contains("line"), "{e}");
}

#[test]
fn wrong_type_is_named() {
    let e = catalog_err(&MINIMAL.replace("confirmation: true", "confirmation: maybe"));
    assert_names(
        &e,
        "agents.yaml",
        "assistants.shop-bot.tools.order_cancel.confirmation",
        "invalid type",
    );
}

#[test]
fn tool_naming_a_missing_agent() {
    let e = catalog_err(&MINIMAL.replace("agent: retail", "agent: shipping"));
    assert_names(
        &e,
        "agents.yaml",
        "assistants.shop-bot.tools.order_cancel.agent",
        "`shipping`",
    );
}

#[test]
fn missing_parameter_reference() {
    let e = catalog_err(&MINIMAL.replace("parameters: [order_id]", "parameters: [order_id, zip]"));
    assert_names(
        &e,
        "agents.yaml",
        "assistants.shop-bot.tools.order_cancel.parameters[1]",
        "`zip` is not defined",
    );
}

#[test]
fn parameter_listed_twice() {
    let e = catalog_err(&MINIMAL.replace(
        "parameters: [order_id]",
        "parameters: [order_id]\n        optional_parameters: [order_id]",
    ));
    assert_names(
        &e,
        "agents.yaml",
        "assistants.shop-bot.tools.order_cancel.optional_parameters[0]",
        "more than once",
    );
}

#[test]
fn bad_pattern() {
    // MG-4: id patterns must compile.
    let e = catalog_err(&MINIMAL.replace("PED-[0-9]{4,}", "PED-[0-9"));
    assert_names(
        &e,
        "agents.yaml",
        "assistants.shop-bot.parameters.order_id.pattern",
        "pattern",
    );
    // The tool referencing the broken parameter is not reported a second time.
    assert_eq!(e.len(), 1, "{e}");
}

#[test]
fn unknown_placeholder() {
    let yaml = format!("{MINIMAL}    messages:\n      en: {{confirm: \"Confirm {{order}}?\"}}\n");
    let e = catalog_err(&yaml);
    assert_names(
        &e,
        "agents.yaml",
        "assistants.shop-bot.messages.en.confirm",
        "`{order}`",
    );
}

#[test]
fn unknown_message_key_and_locale() {
    let yaml = format!("{MINIMAL}    messages:\n      en: {{confirmation: \"x\"}}\n");
    assert_names(
        &catalog_err(&yaml),
        "agents.yaml",
        "assistants.shop-bot.messages.en",
        "unknown field `confirmation`",
    );
    let yaml = format!("{MINIMAL}    messages:\n      fr: {{clarify: \"Pardon ?\"}}\n");
    assert_names(
        &catalog_err(&yaml),
        "agents.yaml",
        "assistants.shop-bot.messages.fr",
        "unknown locale",
    );
}

#[test]
fn semantic_errors_are_all_collected() {
    let yaml = MINIMAL
        .replace("agent: retail", "agent: shipping")
        .replace(
            "confirmation: true",
            "confirmation: true\n        max_attempts: 0",
        )
        .replace("tools: \"*\"", "tools: [order_kancel]");
    let e = catalog_err(&yaml);
    let text = e.to_string();
    assert!(e.len() >= 3, "{text}");
    assert!(text.contains("tools.order_cancel.agent"), "{text}");
    assert!(text.contains("tools.order_cancel.max_attempts"), "{text}");
    assert!(text.contains("tenants[0].tools[0]"), "{text}");
    assert!(text.lines().all(|l| l.contains("(fix: ")), "{text}");
}

#[test]
fn other_semantic_checks() {
    let cases: &[(&str, &str, &str, &str)] = &[
        (
            "tenants: [{tenant: \"*\", tools: \"*\"}]",
            "tenants: []",
            "assistants.shop-bot.tenants",
            "no tenant",
        ),
        (
            "{type: id, pattern: \"PED-[0-9]{4,}\", example: PED-1001}",
            "{type: integer, min: 10, max: 1}",
            "assistants.shop-bot.parameters.order_id.min",
            "greater than max",
        ),
        (
            "{type: id, pattern: \"PED-[0-9]{4,}\", example: PED-1001}",
            "{type: enum, values: []}",
            "assistants.shop-bot.parameters.order_id.values",
            "at least one value",
        ),
        (
            "shop-bot:",
            "shop/bot:",
            "assistants.shop/bot",
            "contains `/`",
        ),
        (
            "example: PED-1001",
            "example: 1001",
            "assistants.shop-bot.parameters.order_id.example",
            "not a valid id value",
        ),
    ];
    for (from, to, key, needle) in cases {
        let e = catalog_err(&MINIMAL.replace(from, to));
        assert_names(&e, "agents.yaml", key, needle);
    }
    assert_names(
        &catalog_err("assistants: {}\n"),
        "agents.yaml",
        "assistants",
        "no assistant",
    );
}

#[test]
fn enum_parameters_accept_values_and_synonyms() {
    let yaml = MINIMAL
        .replace("parameters: [order_id]", "parameters: [order_id, speed]")
        .replace(
            "    tools:\n",
            "      speed: {type: enum, values: [standard, {value: express, synonyms: [fast, rápido]}]}\n    tools:\n",
        );
    let c = parse_catalog(&yaml, "agents.yaml").unwrap_or_else(|e| panic!("{e}"));
    let speed = c.assistants["shop-bot"].tools["order_cancel"]
        .parameter("speed")
        .unwrap();
    match &speed.kind {
        ParameterKind::Enum { values } => {
            assert_eq!(values.len(), 2);
            assert_eq!(values[1].value, "express");
            assert_eq!(values[1].synonyms, ["fast", "rápido"]);
        }
        other => panic!("{other:?}"),
    }
}

// ---- settings (SC-7, ST-6) ----

#[test]
fn settings_use_the_seed_names_and_defaults() {
    // SC-7: exactly the seed's names plus this project's.
    for name in [
        "ENABLE_ROUTE_STICKINESS",
        "ROUTE_STICKINESS_LLM_PROFILE",
        "ROUTE_STICKINESS_CONFIDENCE_THRESHOLD",
        "ROUTE_STICKINESS_HISTORY_TURNS",
        "ROUTE_STICKINESS_MAX_TOKENS",
        "HUMAN_HANDOFF_MESSAGE",
        "END_SESSION_MESSAGE",
        "ROUTER_CONFIDENCE_THRESHOLD",
        "INTERPRETER_CONFIDENCE_THRESHOLD",
        "TOPIC_CONFIDENCE_THRESHOLD",
        "SESSION_TTL",
    ] {
        assert!(SETTING_NAMES.contains(&name), "{name}");
    }
    let s = settings_from_env(env(&[])).unwrap();
    assert_eq!(s, Settings::default());
    assert!(s.enable_route_stickiness);
    assert_eq!(s.route_stickiness_llm_profile, "route_continuity");
    assert_eq!(s.route_stickiness_confidence_threshold, 0.90);
    assert_eq!(s.route_stickiness_history_turns, 2);
    assert_eq!(s.route_stickiness_max_tokens, 80);
    assert_eq!(s.session_ttl_ms, 30 * 60 * 1000); // ST-6
}

#[test]
fn settings_from_the_seed_dotenv() {
    let s = settings_from_env(env(&[
        ("ENABLE_ROUTE_STICKINESS", "false"),
        ("ROUTE_STICKINESS_LLM_PROFILE", "tiny"),
        ("ROUTE_STICKINESS_CONFIDENCE_THRESHOLD", "0.85"),
        ("ROUTE_STICKINESS_HISTORY_TURNS", "4"),
        ("ROUTE_STICKINESS_MAX_TOKENS", "64"),
        ("HUMAN_HANDOFF_MESSAGE", "A human will help you."),
        ("END_SESSION_MESSAGE", "Bye."),
        ("ROUTER_CONFIDENCE_THRESHOLD", "0.7"),
        ("INTERPRETER_CONFIDENCE_THRESHOLD", "1"),
        ("TOPIC_CONFIDENCE_THRESHOLD", "0.55"),
        ("SESSION_TTL", "2h"),
        ("ROUTER_SPECULATIVE", "YES"),
    ]))
    .unwrap_or_else(|e| panic!("{e}"));
    assert!(!s.enable_route_stickiness);
    assert_eq!(s.route_stickiness_llm_profile, "tiny");
    assert_eq!(s.route_stickiness_confidence_threshold, 0.85);
    assert_eq!(s.route_stickiness_history_turns, 4);
    assert_eq!(s.route_stickiness_max_tokens, 64);
    assert_eq!(
        s.human_handoff_message.as_deref(),
        Some("A human will help you.")
    );
    assert_eq!(s.end_session_message.as_deref(), Some("Bye."));
    assert_eq!(s.router_confidence_threshold, 0.7);
    assert_eq!(s.interpreter_confidence_threshold, 1.0);
    assert_eq!(s.topic_confidence_threshold, 0.55);
    assert_eq!(s.session_ttl_ms, 2 * 3600 * 1000);
    assert!(s.router_speculative);
    let s = settings_from_env(env(&[("SESSION_TTL", "1800")])).unwrap();
    assert_eq!(s.session_ttl_ms, 1_800_000);
}

#[test]
fn bad_threshold_in_env() {
    let e = settings_from_env(env(&[
        ("ROUTE_STICKINESS_CONFIDENCE_THRESHOLD", "1.5"),
        ("SESSION_TTL", "0"),
        ("ROUTE_STICKINESS_MAX_TOKENS", "0"),
    ]))
    .expect_err("rejected");
    assert_names(
        &e,
        "environment",
        "ROUTE_STICKINESS_CONFIDENCE_THRESHOLD",
        "outside [0, 1]",
    );
    assert_names(&e, "environment", "SESSION_TTL", "greater than zero");
    assert_names(
        &e,
        "environment",
        "ROUTE_STICKINESS_MAX_TOKENS",
        "at least 1",
    );
}

#[test]
fn scenario_overrides_take_yaml_types() {
    let block: serde_json::Map<String, serde_json::Value> = serde_json::from_str(
        r#"{"ENABLE_ROUTE_STICKINESS": false, "ROUTE_STICKINESS_CONFIDENCE_THRESHOLD": 0.95,
            "SESSION_TTL": "45s", "ROUTER_SPECULATIVE": "true",
            "ROUTE_STICKINESS_HISTORY_TURNS": 0, "ROUTER_CONFIDENCE_THRESHOLD": "0.9"}"#,
    )
    .unwrap();
    let s = apply_overrides(&Settings::default(), &block, "s.yaml").unwrap();
    assert!(!s.enable_route_stickiness);
    assert_eq!(s.route_stickiness_confidence_threshold, 0.95);
    assert_eq!(s.session_ttl_ms, 45_000);
    assert!(s.router_speculative);
    assert_eq!(s.route_stickiness_history_turns, 0);
    assert_eq!(s.router_confidence_threshold, 0.9);
}

#[test]
fn unknown_scenario_setting() {
    let block: serde_json::Map<String, serde_json::Value> =
        serde_json::from_str(r#"{"ENABLE_STICKINESS": true}"#).unwrap();
    let e = apply_overrides(&Settings::default(), &block, "scenario.yaml").expect_err("unknown");
    assert_names(
        &e,
        "scenario.yaml",
        "settings.ENABLE_STICKINESS",
        "unknown setting",
    );
    assert!(e.to_string().contains("ENABLE_ROUTE_STICKINESS"), "{e}");
}

// ---- profiles (SC-7) ----

#[test]
fn invalid_profile_provider() {
    let yaml = "profiles:\n  route_continuity:\n    provider: openai\n    model: m\n    temperature: 0\n    max_tokens: 80\n    timeout_seconds: 5\n";
    let e = parse_profiles(yaml, "profiles.yaml").expect_err("rejected");
    assert_names(
        &e,
        "profiles.yaml",
        "profiles.route_continuity.provider",
        "unknown variant `openai`",
    );
    assert!(e.to_string().contains("oci_openai"), "{e}");
}

#[test]
fn profile_semantic_checks() {
    let yaml = "profiles:\n  p:\n    provider: openai_compatible\n    model: m\n    temperature: 3\n    max_tokens: 0\n    timeout_seconds: 0\n    base_url: ftp://x\n    api_key_env: sk-abc123secret\n    headers: {Authorization: Bearer x}\n";
    let e = parse_profiles(yaml, "profiles.yaml").expect_err("rejected");
    assert_names(&e, "profiles.yaml", "profiles.p.temperature", "[0, 2]");
    assert_names(&e, "profiles.yaml", "profiles.p.max_tokens", "not a valid");
    assert_names(
        &e,
        "profiles.yaml",
        "profiles.p.timeout_seconds",
        "positive",
    );
    assert_names(&e, "profiles.yaml", "profiles.p.base_url", "http");
    assert_names(
        &e,
        "profiles.yaml",
        "profiles.p.api_key_env",
        "environment variable",
    );
    assert_names(
        &e,
        "profiles.yaml",
        "profiles.p.headers.Authorization",
        "credentials",
    );
    // A pasted key is never echoed whole.
    assert!(!e.to_string().contains("sk-abc123secret"), "{e}");
}

#[test]
fn profile_with_optional_keys() {
    let yaml = "profiles:\n  local:\n    provider: openai_compatible\n    model: llama\n    temperature: 0.2\n    max_tokens: 100\n    timeout_seconds: 2.5\n    base_url: http://localhost:8000/v1\n    api_key_env: LOCAL_KEY\n    headers: {X-Team: cs}\n    json_mode: true\n";
    let p = parse_profiles(yaml, "profiles.yaml").unwrap_or_else(|e| panic!("{e}"));
    let l = p.get("local").unwrap();
    assert_eq!(l.provider, Provider::OpenaiCompatible);
    assert_eq!(l.base_url.as_deref(), Some("http://localhost:8000/v1"));
    assert_eq!(l.api_key_env.as_deref(), Some("LOCAL_KEY"));
    assert_eq!(l.headers["X-Team"], "cs");
    assert!(l.json_mode);
}

#[test]
fn missing_profile_reference() {
    let catalog = parse_catalog(MINIMAL, "agents.yaml").unwrap();
    let profiles = parse_profiles(
        "profiles:\n  router:\n    provider: oci_openai\n    model: m\n    temperature: 0\n    max_tokens: 80\n    timeout_seconds: 5\n",
        "profiles.yaml",
    )
    .unwrap();
    let e = check_profile_references(&catalog, "agents.yaml", &Settings::default(), &profiles)
        .expect_err("route_continuity and interpreter are missing");
    assert_names(
        &e,
        "environment",
        "ROUTE_STICKINESS_LLM_PROFILE",
        "route_continuity",
    );
    assert_names(
        &e,
        "agents.yaml",
        "assistants.shop-bot.profiles.interpreter",
        "`interpreter`",
    );
}

// ---- tool endpoints and tool_http (LC-1, LC-4, EV-4: the webhooks tools run through) ----

/// MINIMAL's tool with extra keys (indented as tool keys).
fn minimal_with_tool_keys(keys: &str) -> String {
    MINIMAL.replace(
        "        confirmation: true\n",
        &format!("        confirmation: true\n{keys}"),
    )
}

#[test]
fn example_tools_have_relative_endpoints() {
    let file = load_agents_file(Path::new(AGENTS)).unwrap_or_else(|e| panic!("{e}"));
    let a = file.catalog.assistant("retail-bot").unwrap();
    for (name, tool) in &a.tools {
        assert_eq!(
            tool.endpoint.as_deref(),
            Some(format!("/tools/{name}").as_str())
        );
        let expected_pre = tool
            .pre_validation
            .then(|| format!("/tools/{name}/pre-validate"));
        assert_eq!(tool.pre_validation_endpoint, expected_pre, "{name}");
    }
    assert_eq!(file.tool_http, ToolHttpSettings::default());
    assert_eq!(file.tool_http.max_attempts, 3);
}

#[test]
fn endpoints_absolute_explicit_and_defaulted() {
    let yaml = minimal_with_tool_keys(
        "        pre_validation: true\n        endpoint: https://tools.example.com/orders/cancel/\n",
    );
    let c = parse_catalog(&yaml, "agents.yaml").unwrap_or_else(|e| panic!("{e}"));
    let tool = &c.assistant("shop-bot").unwrap().tools["order_cancel"];
    assert_eq!(
        tool.endpoint.as_deref(),
        Some("https://tools.example.com/orders/cancel/")
    );
    assert_eq!(
        tool.pre_validation_endpoint.as_deref(),
        Some("https://tools.example.com/orders/cancel/pre-validate")
    );

    let yaml = minimal_with_tool_keys(
        "        pre_validation: true\n        endpoint: /tools/order_cancel\n        \
         pre_validation_endpoint: http://checks.internal:9000/eligibility\n",
    );
    let c = parse_catalog(&yaml, "agents.yaml").unwrap_or_else(|e| panic!("{e}"));
    let tool = &c.assistant("shop-bot").unwrap().tools["order_cancel"];
    assert_eq!(
        tool.pre_validation_endpoint.as_deref(),
        Some("http://checks.internal:9000/eligibility")
    );

    // No endpoint is still a valid catalog (the scripted gateway needs none).
    let c = parse_catalog(MINIMAL, "agents.yaml").unwrap();
    let tool = &c.assistant("shop-bot").unwrap().tools["order_cancel"];
    assert_eq!(
        (
            tool.endpoint.as_deref(),
            tool.pre_validation_endpoint.as_deref()
        ),
        (None, None)
    );
}

#[test]
fn invalid_endpoints_are_named_with_a_fix() {
    let key = "assistants.shop-bot.tools.order_cancel.endpoint";
    for (bad, needle) in [
        ("ftp://files.example.com/x", "scheme `ftp`"),
        (
            "tools/order_cancel",
            "neither an absolute http(s) URL nor a path",
        ),
        ("//host/tools/x", "no scheme"),
        ("/tools/x?token=1", "query or fragment"),
        ("\"\"", "empty"),
        ("\"/tools/a b\"", "whitespace"),
    ] {
        let yaml = minimal_with_tool_keys(&format!("        endpoint: {bad}\n"));
        let err = catalog_err(&yaml);
        assert_names(&err, "agents.yaml", key, needle);
        assert!(
            err.to_string().contains("TURNSTILE_TOOLS_BASE_URL"),
            "{err}"
        );
    }
}

#[test]
fn pre_validation_endpoint_needs_pre_validation() {
    let yaml = minimal_with_tool_keys(
        "        endpoint: /tools/order_cancel\n        pre_validation_endpoint: /check\n",
    );
    assert_names(
        &catalog_err(&yaml),
        "agents.yaml",
        "assistants.shop-bot.tools.order_cancel.pre_validation_endpoint",
        "pre_validation: true",
    );
}

#[test]
fn tool_http_settings_parse_and_validate() {
    let yaml = format!(
        "{MINIMAL}tool_http:\n  timeout_ms: 1500\n  max_attempts: 5\n  initial_backoff_ms: 50\n  \
         max_backoff_ms: 800\n"
    );
    let file = parse_agents_file(&yaml, "agents.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        file.tool_http,
        ToolHttpSettings {
            timeout_ms: 1500,
            max_attempts: 5,
            initial_backoff_ms: 50,
            max_backoff_ms: 800,
        }
    );
    // A partial block keeps the other defaults.
    let file = parse_agents_file(
        &format!("{MINIMAL}tool_http: {{max_attempts: 1}}\n"),
        "a.yaml",
    )
    .unwrap();
    assert_eq!(file.tool_http.max_attempts, 1);
    assert_eq!(
        file.tool_http.timeout_ms,
        ToolHttpSettings::default().timeout_ms
    );

    for (block, key, needle) in [
        ("{timeout_ms: 0}", "tool_http.timeout_ms", "at least 1"),
        (
            "{max_attempts: 0}",
            "tool_http.max_attempts",
            "outside 1..=10",
        ),
        (
            "{max_attempts: 11}",
            "tool_http.max_attempts",
            "outside 1..=10",
        ),
        (
            "{initial_backoff_ms: 500, max_backoff_ms: 100}",
            "tool_http.initial_backoff_ms",
            "greater than max_backoff_ms",
        ),
        ("{timeout: 5}", "tool_http", "unknown field"),
    ] {
        let err = catalog_err(&format!("{MINIMAL}tool_http: {block}\n"));
        assert_names(&err, "agents.yaml", key, needle);
    }
}

// ---- what the customer reads (RP-1..RP-4): the keys and their errors ----

/// MINIMAL with `extra` appended under the tool `order_cancel`.
fn with_tool_keys(extra: &str) -> String {
    MINIMAL.replace(
        "        confirmation: true\n",
        &format!("        confirmation: true\n{extra}"),
    )
}

#[test]
fn rp1_rp2_rp3_wording_keys_build_the_catalog() {
    let yaml = with_tool_keys(
        "        gender: feminine\n\
         \x20       result: {en: \"Order {order_id} is {status}[ ({eta:date})].\"}\n\
         \x20       result_fields:\n\
         \x20         status: {label: {pt-BR: situação}, values: {open: {en: open, pt-BR: aberto}}}\n\
         \x20         total: {format: money}\n\
         \x20       service_locale: pt-BR\n\
         \x20       reasons: {shipped: {en: it shipped}}\n",
    )
    .replace("    tenants:", "    currency_symbol: \"US$\"\n    tenants:");
    let c = parse_catalog(&yaml, "agents.yaml").unwrap_or_else(|e| panic!("{e}"));
    let a = c.assistant("shop-bot").unwrap();
    assert_eq!(a.currency_symbol, "US$");
    let t = &a.tools["order_cancel"];
    // No `phrase`: "the <title>" / "a <title>" for a feminine tool.
    assert_eq!(t.wording.phrase.get(Locale::En), "the order cancel");
    assert_eq!(t.wording.phrase.get(Locale::PtBr), "a order cancel");
    assert_eq!(t.wording.service_locale, Locale::PtBr);
    // RP-2: a locale without a text has none (no borrowing from another language).
    assert!(!t.wording.result.contains_key(&Locale::PtBr));
    assert!(!t.wording.reasons["shipped"].contains_key(&Locale::PtBr));
    let p = t.parameter("order_id").unwrap();
    assert_eq!(p.wording.phrase.get(Locale::PtBr), "o order_id");
}

#[test]
fn rp3_pt_br_gender_is_told_by_the_phrase_or_named() {
    let yaml = with_tool_keys("        phrase: {pt-BR: a troca do pedido}\n");
    let c = parse_catalog(&yaml, "agents.yaml").unwrap_or_else(|e| panic!("{e}"));
    let t = &c.assistant("shop-bot").unwrap().tools["order_cancel"];
    assert_eq!(
        t.wording.phrase.gender,
        turnstile::domain::wording::Gender::Feminine
    );
    assert_names(
        &catalog_err(&with_tool_keys(
            "        phrase: {pt-BR: troca do pedido}\n",
        )),
        "agents.yaml",
        "assistants.shop-bot.tools.order_cancel.phrase.pt-BR",
        "gender",
    );
    assert_names(
        &catalog_err(&with_tool_keys(
            "        phrase: {pt-BR: a troca}\n        gender: masculine\n",
        )),
        "agents.yaml",
        "assistants.shop-bot.tools.order_cancel.gender",
        "agree",
    );
}

#[test]
fn rp1_result_templates_and_fields_are_checked() {
    for (extra, key, needle) in [
        (
            "        result: {en: \"Order {order_id\"}\n",
            "tools.order_cancel.result.en",
            "never closed",
        ),
        (
            "        result: {en: \"{total:euro}\"}\n",
            "tools.order_cancel.result.en",
            "unknown format `euro`",
        ),
        (
            "        result: {pt-BR: \"{status|a|b}\"}\n",
            "tools.order_cancel.result.pt-BR",
            "gender",
        ),
        (
            "        result_fields: {total: {format: euro}}\n",
            "tools.order_cancel.result_fields.total.format",
            "money, date",
        ),
        (
            "        service_locale: fr\n",
            "tools.order_cancel.service_locale",
            "unknown locale",
        ),
        (
            "        reasons: {shipped: {en: \" \"}}\n",
            "tools.order_cancel.reasons.shipped.en",
            "empty",
        ),
        (
            "        phrase: {en: \"\"}\n",
            "tools.order_cancel.phrase.en",
            "empty",
        ),
    ] {
        assert_names(
            &catalog_err(&with_tool_keys(extra)),
            "agents.yaml",
            &format!("assistants.shop-bot.{key}"),
            needle,
        );
    }
}

#[test]
fn rp2_rp3_message_templates_are_checked_per_key() {
    for (message, needle) in [
        // RP-3: {tool} carries its article.
        (
            "completed: \"Done! Your {tool} is complete.\"",
            "`your {tool}`",
        ),
        // RP-2: a reason may be absent, so it stands in an optional segment.
        ("failed: \"Sorry: {reason}.\"", "[: {reason}]"),
        // Each key has its own placeholders.
        (
            "confirm: \"Confirm {reason}?\"",
            "unknown placeholder `{reason}`",
        ),
        ("clarify: \"Sorry {x}\"", "takes no placeholder"),
        ("declined: \"OK [{tool}\"", "never closed"),
        ("routed: \"{agent|a|b}\"", "has no gender"),
    ] {
        let yaml = format!("{MINIMAL}    messages:\n      en: {{{message}}}\n");
        let key = message.split(':').next().unwrap();
        assert_names(
            &catalog_err(&yaml),
            "agents.yaml",
            &format!("assistants.shop-bot.messages.en.{key}"),
            needle,
        );
    }
    let yaml = MINIMAL.replace("    tenants:", "    currency_symbol: \" \"\n    tenants:");
    assert_names(
        &catalog_err(&yaml),
        "agents.yaml",
        "assistants.shop-bot.currency_symbol",
        "empty",
    );
    // A message without placeholders is shown as written, its escapes resolved.
    let yaml = format!("{MINIMAL}    messages:\n      en: {{clarify: \"Sorry [[?]]\"}}\n");
    let c = parse_catalog(&yaml, "agents.yaml").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        c.assistant("shop-bot")
            .unwrap()
            .messages(Locale::En)
            .clarify,
        "Sorry [?]"
    );
}

// ---- SC-9: a conversational intent that takes leave ----

#[test]
fn only_a_conversational_intent_may_end_the_session() {
    let farewell = "        questions:\n          bye:\n            ends_session: true\n            examples: {en: [have a nice day]}\n            answer: {en: You too!}\n";
    let e = catalog_err(&minimal_with_tool_keys(farewell));
    assert_names(
        &e,
        "agents.yaml",
        "questions.bye.ends_session",
        "only a conversational intent can end the session",
    );
    let file = load_agents_file(Path::new(AGENTS)).unwrap_or_else(|e| panic!("{e}"));
    let a = file.catalog.assistant("retail-bot").unwrap();
    let ending: Vec<&str> = a
        .conversation
        .iter()
        .filter(|t| t.ends_session)
        .map(|t| t.name.as_str())
        .collect();
    assert_eq!(ending, ["farewell"], "the example configures one farewell");
}
