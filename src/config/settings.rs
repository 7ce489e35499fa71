//! Session-control and engine settings by the seed's environment names (SC-7, SC-8, ST-6), read from
//! the environment ([`settings_from_env`]) or overridden by a scenario's `settings:` block
//! ([`apply_overrides`]). Unset names keep [`Settings::default`] (the seed's defaults).

use serde_json::{Map, Value};

use crate::config::{ConfigError, ConfigErrors};
use crate::domain::catalog::Settings;

pub const ENABLE_ROUTE_STICKINESS: &str = "ENABLE_ROUTE_STICKINESS";
pub const ROUTE_STICKINESS_LLM_PROFILE: &str = "ROUTE_STICKINESS_LLM_PROFILE";
pub const ROUTE_STICKINESS_CONFIDENCE_THRESHOLD: &str = "ROUTE_STICKINESS_CONFIDENCE_THRESHOLD";
pub const ROUTE_STICKINESS_HISTORY_TURNS: &str = "ROUTE_STICKINESS_HISTORY_TURNS";
pub const ROUTE_STICKINESS_MAX_TOKENS: &str = "ROUTE_STICKINESS_MAX_TOKENS";
pub const HUMAN_HANDOFF_MESSAGE: &str = "HUMAN_HANDOFF_MESSAGE";
pub const END_SESSION_MESSAGE: &str = "END_SESSION_MESSAGE";
pub const ROUTER_CONFIDENCE_THRESHOLD: &str = "ROUTER_CONFIDENCE_THRESHOLD";
pub const INTERPRETER_CONFIDENCE_THRESHOLD: &str = "INTERPRETER_CONFIDENCE_THRESHOLD";
pub const TOPIC_CONFIDENCE_THRESHOLD: &str = "TOPIC_CONFIDENCE_THRESHOLD";
pub const SESSION_TTL: &str = "SESSION_TTL";
pub const ROUTER_SPECULATIVE: &str = "ROUTER_SPECULATIVE";

/// Every setting name, as environment variable and as scenario `settings:` key (SC-7).
pub const SETTING_NAMES: &[&str] = &[
    ENABLE_ROUTE_STICKINESS,
    ROUTE_STICKINESS_LLM_PROFILE,
    ROUTE_STICKINESS_CONFIDENCE_THRESHOLD,
    ROUTE_STICKINESS_HISTORY_TURNS,
    ROUTE_STICKINESS_MAX_TOKENS,
    HUMAN_HANDOFF_MESSAGE,
    END_SESSION_MESSAGE,
    ROUTER_CONFIDENCE_THRESHOLD,
    INTERPRETER_CONFIDENCE_THRESHOLD,
    TOPIC_CONFIDENCE_THRESHOLD,
    SESSION_TTL,
    ROUTER_SPECULATIVE,
];

/// The file label of errors found in the environment.
pub const ENV_LABEL: &str = "environment";

/// Reads the settings from environment variables through `lookup` (inject `|k| std::env::var(k).ok()`
/// in production, a map in tests). Only [`SETTING_NAMES`] are read; an unset or empty variable keeps
/// the default. Every invalid value is reported, not just the first.
pub fn settings_from_env(
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Settings, ConfigErrors> {
    let mut settings = Settings::default();
    let mut errors = Vec::new();
    for &name in SETTING_NAMES {
        let Some(raw) = lookup(name) else { continue };
        if raw.trim().is_empty() {
            continue;
        }
        if let Err(e) = set(&mut settings, name, &Value::String(raw), ENV_LABEL) {
            errors.push(e);
        }
    }
    ConfigErrors(errors).into_result(settings)
}

/// Applies a scenario's `settings:` block onto `base`. Values may have the types YAML gives them
/// (bool, number, string) or be strings in the environment's format (`"true"`, `"0.9"`, `"30m"`).
/// `null` resets `HUMAN_HANDOFF_MESSAGE` / `END_SESSION_MESSAGE` to the built-in texts. An unknown
/// name is an error naming it and listing the valid names.
pub fn apply_overrides(
    base: &Settings,
    overrides: &Map<String, Value>,
    file_label: &str,
) -> Result<Settings, ConfigErrors> {
    let mut settings = base.clone();
    let mut errors = Vec::new();
    for (name, value) in overrides {
        let key = format!("settings.{name}");
        if !SETTING_NAMES.contains(&name.as_str()) {
            errors.push(ConfigError::new(
                file_label,
                key,
                format!("unknown setting `{name}`"),
                format!("use one of: {}", SETTING_NAMES.join(", ")),
            ));
            continue;
        }
        if let Err(mut e) = set(&mut settings, name, value, file_label) {
            e.key = key;
            errors.push(e);
        }
    }
    ConfigErrors(errors).into_result(settings)
}

/// The settings of `settings` that differ from the defaults, by name, as [`apply_overrides`]
/// reads them (a scenario's `settings:`, `turnstile export`). The configuration version is
/// not a setting and is left out.
pub fn overrides_of(settings: &Settings) -> Map<String, Value> {
    let d = Settings::default();
    let s = settings;
    let mut out = Map::new();
    let mut put = |name: &str, differs: bool, value: Value| {
        if differs {
            out.insert(name.to_owned(), value);
        }
    };
    let b = |v: bool| Value::Bool(v);
    let n = |v: f64| serde_json::json!(v);
    let text = |v: &Option<String>| v.clone().map_or(Value::Null, Value::String);
    put(
        ENABLE_ROUTE_STICKINESS,
        s.enable_route_stickiness != d.enable_route_stickiness,
        b(s.enable_route_stickiness),
    );
    put(
        ROUTER_SPECULATIVE,
        s.router_speculative != d.router_speculative,
        b(s.router_speculative),
    );
    let profile = Value::String(s.route_stickiness_llm_profile.clone());
    put(
        ROUTE_STICKINESS_LLM_PROFILE,
        s.route_stickiness_llm_profile != d.route_stickiness_llm_profile,
        profile,
    );
    let (st, rt, it) = (
        s.route_stickiness_confidence_threshold,
        s.router_confidence_threshold,
        s.interpreter_confidence_threshold,
    );
    put(
        ROUTE_STICKINESS_CONFIDENCE_THRESHOLD,
        st != d.route_stickiness_confidence_threshold,
        n(st),
    );
    put(
        ROUTER_CONFIDENCE_THRESHOLD,
        rt != d.router_confidence_threshold,
        n(rt),
    );
    put(
        INTERPRETER_CONFIDENCE_THRESHOLD,
        it != d.interpreter_confidence_threshold,
        n(it),
    );
    let turns = s.route_stickiness_history_turns;
    put(
        ROUTE_STICKINESS_HISTORY_TURNS,
        turns != d.route_stickiness_history_turns,
        serde_json::json!(turns),
    );
    let tokens = s.route_stickiness_max_tokens;
    put(
        ROUTE_STICKINESS_MAX_TOKENS,
        tokens != d.route_stickiness_max_tokens,
        serde_json::json!(tokens),
    );
    put(
        HUMAN_HANDOFF_MESSAGE,
        s.human_handoff_message != d.human_handoff_message,
        text(&s.human_handoff_message),
    );
    put(
        END_SESSION_MESSAGE,
        s.end_session_message != d.end_session_message,
        text(&s.end_session_message),
    );
    let ttl = format!("{}s", s.session_ttl_ms / 1000);
    put(
        SESSION_TTL,
        s.session_ttl_ms != d.session_ttl_ms,
        Value::String(ttl),
    );
    out
}

/// Parses `value` for setting `name` and stores it.
fn set(settings: &mut Settings, name: &str, value: &Value, file: &str) -> Result<(), ConfigError> {
    let err = |problem: String, fix: &str| ConfigError::new(file, name, problem, fix);
    match name {
        ENABLE_ROUTE_STICKINESS => {
            settings.enable_route_stickiness = parse_bool(value)
                .map_err(|p| err(p, "use true or false (also accepted: 1/0, yes/no)"))?
        }
        ROUTER_SPECULATIVE => {
            settings.router_speculative = parse_bool(value)
                .map_err(|p| err(p, "use true or false (also accepted: 1/0, yes/no)"))?
        }
        ROUTE_STICKINESS_LLM_PROFILE => {
            let s =
                parse_string(value).map_err(|p| err(p, "name a profile of the profiles file"))?;
            if s.trim().is_empty() {
                return Err(err(
                    "the profile name is empty".into(),
                    "name a profile of the profiles file, e.g. route_continuity",
                ));
            }
            settings.route_stickiness_llm_profile = s.trim().to_owned();
        }
        ROUTE_STICKINESS_CONFIDENCE_THRESHOLD => {
            settings.route_stickiness_confidence_threshold =
                parse_threshold(value).map_err(|p| err(p, "use a number from 0 to 1, e.g. 0.90"))?
        }
        ROUTER_CONFIDENCE_THRESHOLD => {
            settings.router_confidence_threshold =
                parse_threshold(value).map_err(|p| err(p, "use a number from 0 to 1, e.g. 0.90"))?
        }
        INTERPRETER_CONFIDENCE_THRESHOLD => {
            settings.interpreter_confidence_threshold =
                parse_threshold(value).map_err(|p| err(p, "use a number from 0 to 1, e.g. 0.80"))?
        }
        TOPIC_CONFIDENCE_THRESHOLD => {
            settings.topic_confidence_threshold =
                parse_threshold(value).map_err(|p| err(p, "use a number from 0 to 1, e.g. 0.60"))?
        }
        ROUTE_STICKINESS_HISTORY_TURNS => {
            let n = parse_u64(value)
                .map_err(|p| err(p, "use a non-negative whole number of turns, e.g. 2"))?;
            settings.route_stickiness_history_turns = usize::try_from(n).map_err(|_| {
                err(
                    format!("{n} is too large"),
                    "use a small number of turns, e.g. 2",
                )
            })?;
        }
        ROUTE_STICKINESS_MAX_TOKENS => {
            let fix = "use a whole number of tokens of at least 1, e.g. 80";
            let n = parse_u64(value).map_err(|p| err(p, fix))?;
            if n == 0 {
                return Err(err("must be at least 1".into(), fix));
            }
            settings.route_stickiness_max_tokens =
                u32::try_from(n).map_err(|_| err(format!("{n} is too large"), fix))?;
        }
        HUMAN_HANDOFF_MESSAGE => {
            settings.human_handoff_message = parse_message(value)
                .map_err(|p| err(p, "give the reply text, or leave it unset for the default"))?
        }
        END_SESSION_MESSAGE => {
            settings.end_session_message = parse_message(value)
                .map_err(|p| err(p, "give the reply text, or leave it unset for the default"))?
        }
        SESSION_TTL => {
            settings.session_ttl_ms = parse_ttl(value).map_err(|p| {
                err(
                    p,
                    "use a positive duration: 30m, 45s, 2h, 1d, or plain seconds such as 1800",
                )
            })?
        }
        _ => unreachable!("set() is only called with a name of SETTING_NAMES"),
    }
    Ok(())
}

fn describe(value: &Value) -> String {
    match value {
        Value::String(s) => format!("`{s}`"),
        other => format!("`{other}`"),
    }
}

fn parse_bool(value: &Value) -> Result<bool, String> {
    let bad = || format!("{} is not a boolean", describe(value));
    match value {
        Value::Bool(b) => Ok(*b),
        Value::Number(n) => match n.as_u64() {
            Some(1) => Ok(true),
            Some(0) => Ok(false),
            _ => Err(bad()),
        },
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "true" | "1" | "yes" => Ok(true),
            "false" | "0" | "no" => Ok(false),
            _ => Err(bad()),
        },
        _ => Err(bad()),
    }
}

fn parse_string(value: &Value) -> Result<String, String> {
    match value {
        Value::String(s) => Ok(s.clone()),
        Value::Number(n) => Ok(n.to_string()),
        other => Err(format!("{} is not a text", describe(other))),
    }
}

fn parse_message(value: &Value) -> Result<Option<String>, String> {
    match value {
        Value::Null => Ok(None),
        Value::String(s) if s.trim().is_empty() => Ok(None),
        Value::String(s) => Ok(Some(s.clone())),
        other => Err(format!("{} is not a text", describe(other))),
    }
}

fn parse_f64(value: &Value) -> Result<f64, String> {
    match value {
        Value::Number(n) => n
            .as_f64()
            .ok_or_else(|| format!("{} is not a number", describe(value))),
        Value::String(s) => s
            .trim()
            .parse::<f64>()
            .map_err(|_| format!("{} is not a number", describe(value))),
        other => Err(format!("{} is not a number", describe(other))),
    }
}

fn parse_threshold(value: &Value) -> Result<f64, String> {
    let x = parse_f64(value)?;
    if !x.is_finite() || !(0.0..=1.0).contains(&x) {
        return Err(format!("{} is outside [0, 1]", describe(value)));
    }
    Ok(x)
}

fn parse_u64(value: &Value) -> Result<u64, String> {
    let bad = || format!("{} is not a non-negative whole number", describe(value));
    match value {
        Value::Number(n) => n.as_u64().ok_or_else(bad),
        Value::String(s) => s.trim().parse::<u64>().map_err(|_| bad()),
        _ => Err(bad()),
    }
}

/// Parses a duration into milliseconds: `30m`, `45s`, `2h`, `1d`, or plain seconds (`1800`).
/// It must be greater than zero.
pub fn parse_duration_ms(text: &str) -> Result<i64, String> {
    let t = text.trim();
    let bad = || format!("`{text}` is not a duration");
    let (digits, unit_ms): (&str, i64) = match t.char_indices().last() {
        None => return Err(bad()),
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let unit = match c.to_ascii_lowercase() {
                's' => 1_000,
                'm' => 60_000,
                'h' => 3_600_000,
                'd' => 86_400_000,
                _ => return Err(bad()),
            };
            (t[..i].trim_end(), unit)
        }
        Some(_) => (t, 1_000),
    };
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let n: i64 = digits.parse().map_err(|_| bad())?;
    let ms = n
        .checked_mul(unit_ms)
        .ok_or_else(|| format!("`{text}` is too long"))?;
    if ms <= 0 {
        return Err(format!("`{text}` must be greater than zero"));
    }
    Ok(ms)
}

fn parse_ttl(value: &Value) -> Result<i64, String> {
    match value {
        Value::Number(n) => match n.as_u64() {
            Some(secs) => parse_duration_ms(&secs.to_string()),
            None => Err(format!(
                "{} is not a positive whole number of seconds",
                describe(value)
            )),
        },
        Value::String(s) => parse_duration_ms(s),
        other => Err(format!("{} is not a duration", describe(other))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration_ms("30m"), Ok(1_800_000));
        assert_eq!(parse_duration_ms("45s"), Ok(45_000));
        assert_eq!(parse_duration_ms("2h"), Ok(7_200_000));
        assert_eq!(parse_duration_ms("1d"), Ok(86_400_000));
        assert_eq!(parse_duration_ms("1800"), Ok(1_800_000));
        assert!(parse_duration_ms("0").is_err());
        assert!(parse_duration_ms("-5m").is_err());
        assert!(parse_duration_ms("5x").is_err());
        assert!(parse_duration_ms("").is_err());
        assert!(parse_duration_ms("m").is_err());
    }

    #[test]
    fn booleans() {
        for (s, b) in [
            ("TRUE", true),
            ("yes", true),
            ("1", true),
            ("No", false),
            ("0", false),
        ] {
            assert_eq!(parse_bool(&Value::String(s.into())), Ok(b));
        }
        assert!(parse_bool(&Value::String("maybe".into())).is_err());
    }
}
