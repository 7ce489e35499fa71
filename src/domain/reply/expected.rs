//! RP-4: what is wrong with an invalid value and the parameter's expected form, as a clause
//! that follows a colon (`"0" is not a valid house number: it must be a whole number from 1 to
//! 99999.`). A parameter's configured `description` is its expected form in words; without one
//! the clause is built from its type and example.

use serde_json::Value;

use super::format;
use crate::domain::catalog::ParameterSpec;
use crate::domain::locale::Locale;
use crate::domain::parameter::{InvalidReason, ParameterKind};

/// The parameter's example in the locale's format (`R$ 71,99`, `31/12/2025`).
pub(super) fn example(p: &ParameterSpec, locale: Locale, symbol: &str) -> Option<String> {
    let raw = p.example.as_deref()?;
    let canonical = p
        .kind
        .validate(&Value::String(raw.to_owned()), locale)
        .ok()
        .and_then(|v| format::scalar(&v, locale))
        .unwrap_or_else(|| raw.to_owned());
    Some(match &p.kind {
        ParameterKind::Money => format::money(&canonical, locale, symbol)
            .or_else(|| format::money(raw, locale, symbol))
            .unwrap_or_else(|| raw.to_owned()),
        ParameterKind::Date => format::date(&canonical, locale).unwrap_or_else(|| raw.to_owned()),
        ParameterKind::Number => format::number(&canonical, locale),
        _ => raw.to_owned(),
    })
}

/// What is wrong and what is expected, for `why` (see the module comment).
pub(super) fn clause(
    p: &ParameterSpec,
    why: InvalidReason,
    locale: Locale,
    symbol: &str,
) -> String {
    let en = locale == Locale::En;
    match (why, &p.kind) {
        (InvalidReason::OutOfRange, ParameterKind::Integer { min, max }) => {
            return range(*min, *max, en);
        }
        (InvalidReason::TooLong, ParameterKind::Text { max_len }) => {
            return if en {
                format!("it can have at most {max_len} characters")
            } else {
                format!("pode ter no máximo {max_len} caracteres")
            };
        }
        _ => {}
    }
    if let Some(description) = p.wording.description.get(&locale) {
        return description.clone();
    }
    let like = example(p, locale, symbol)
        .map(|e| {
            if en {
                format!(", like {e}")
            } else {
                format!(", como {e}")
            }
        })
        .unwrap_or_default();
    match &p.kind {
        ParameterKind::Id { .. } => match example(p, locale, symbol) {
            Some(e) if en => format!("it should look like {e}"),
            Some(e) => format!("o formato esperado é {e}"),
            None if en => "it is not in the expected format".into(),
            None => "não está no formato esperado".into(),
        },
        ParameterKind::Integer { min, max } if min.is_some() || max.is_some() => {
            range(*min, *max, en)
        }
        ParameterKind::Integer { .. } if en => format!("it must be a whole number{like}"),
        ParameterKind::Integer { .. } => format!("deve ser um número inteiro{like}"),
        ParameterKind::Number if en => format!("it must be a number{like}"),
        ParameterKind::Number => format!("deve ser um número{like}"),
        ParameterKind::Money if en => format!("it must be an amount of money{like}"),
        ParameterKind::Money => format!("deve ser uma quantia em dinheiro{like}"),
        ParameterKind::Date if en => format!("it must be a date{like}"),
        ParameterKind::Date => format!("deve ser uma data{like}"),
        ParameterKind::Cep if en => format!("a CEP has 8 digits{like}"),
        ParameterKind::Cep => format!("o CEP tem 8 dígitos{like}"),
        ParameterKind::Enum { values } => {
            let options: Vec<String> = values.iter().map(|v| v.value.clone()).collect();
            let or = if en { " or " } else { " ou " };
            let list = match options.split_last() {
                Some((last, init)) if !init.is_empty() => format!("{}{or}{last}", init.join(", ")),
                _ => options.join(""),
            };
            if en {
                format!("it must be {list}")
            } else {
                format!("deve ser {list}")
            }
        }
        ParameterKind::Text { .. } if en => "please write it in a few words".into(),
        ParameterKind::Text { .. } => "escreva em poucas palavras".into(),
    }
}

fn range(min: Option<i64>, max: Option<i64>, en: bool) -> String {
    match (min, max, en) {
        (Some(lo), Some(hi), true) => format!("it must be a whole number from {lo} to {hi}"),
        (Some(lo), Some(hi), false) => format!("deve ser um número inteiro de {lo} a {hi}"),
        (Some(lo), None, true) => format!("it must be a whole number of at least {lo}"),
        (Some(lo), None, false) => format!("deve ser um número inteiro a partir de {lo}"),
        (None, Some(hi), true) => format!("it must be a whole number of at most {hi}"),
        (None, Some(hi), false) => format!("deve ser um número inteiro até {hi}"),
        (None, None, true) => "it must be a whole number".into(),
        (None, None, false) => "deve ser um número inteiro".into(),
    }
}
