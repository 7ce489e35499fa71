//! Expectation matching: objects are recursive subsets except `arguments` (exact); lists are
//! exact; `null` means absent or null. Argument values compare by text: the expectation's source
//! text (the scenario reader keeps it, [`crate::scenario::format`]) with the stored canonical
//! value's text, so `71.990` is not `"71.99"` while `45` and `"45"` both are `45` (MG-4). Other
//! scalars compare by value (`71.99` = "71.99").

use serde_json::Value;

/// Checks `expected` against `actual`; the error says where and what differed.
pub fn check(expected: &Value, actual: &Value) -> Result<(), String> {
    subset(expected, actual, "")
}

fn subset(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    match expected {
        Value::Null => {
            if actual.is_null() {
                Ok(())
            } else {
                Err(diff(path, expected, actual))
            }
        }
        Value::Object(exp) => {
            let Some(act) = actual.as_object() else {
                return Err(diff(path, expected, actual));
            };
            for (k, v) in exp {
                let child = join(path, k);
                let a = act.get(k).unwrap_or(&Value::Null);
                if k == "arguments" {
                    exact(v, a, &child)?;
                } else {
                    subset(v, a, &child)?;
                }
            }
            Ok(())
        }
        Value::Array(exp) => {
            let Some(act) = actual.as_array() else {
                return Err(diff(path, expected, actual));
            };
            if exp.len() != act.len() {
                return Err(diff(path, expected, actual));
            }
            for (i, (e, a)) in exp.iter().zip(act).enumerate() {
                subset(e, a, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => {
            if scalar_eq(expected, actual) {
                Ok(())
            } else {
                Err(diff(path, expected, actual))
            }
        }
    }
}

/// `arguments`: the same keys, each value with the same text.
fn exact(expected: &Value, actual: &Value, path: &str) -> Result<(), String> {
    match (expected, actual) {
        (Value::Object(e), Value::Object(a)) => {
            if e.len() != a.len() || e.keys().any(|k| !a.contains_key(k)) {
                return Err(diff(path, expected, actual));
            }
            for (k, v) in e {
                exact(v, &a[k], &join(path, k))?;
            }
            Ok(())
        }
        (Value::Null, Value::Object(a)) if a.is_empty() => Ok(()),
        (Value::Object(e), Value::Null) if e.is_empty() => Ok(()),
        (Value::Array(e), Value::Array(a)) if e.len() == a.len() => {
            for (i, (x, y)) in e.iter().zip(a).enumerate() {
                exact(x, y, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => match (text_of(expected), text_of(actual)) {
            (Some(e), Some(a)) if e == a => Ok(()),
            _ => Err(diff(path, expected, actual)),
        },
    }
}

/// A scalar's text: a string's own, a number's or boolean's as JSON writes it.
fn text_of(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn scalar_eq(expected: &Value, actual: &Value) -> bool {
    if expected == actual {
        return true;
    }
    match (number_of(expected), number_of(actual)) {
        (Some(e), Some(a)) => (e - a).abs() < 1e-9,
        _ => false,
    }
}

fn number_of(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => {
            let t = s.trim();
            // Only plain decimal text counts as a number: "PED-1001" or "01310-100" never do.
            if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
                t.parse().ok()
            } else {
                None
            }
        }
        _ => None,
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_owned()
    } else {
        format!("{path}.{key}")
    }
}

fn diff(path: &str, expected: &Value, actual: &Value) -> String {
    let at = if path.is_empty() {
        String::new()
    } else {
        format!("at {path}: ")
    };
    format!("{at}expected {expected}, got {actual}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn subset_objects_exact_arguments() {
        let actual = json!({"tool": "t", "status": "X", "arguments": {"a": "71.99", "b": 45}});
        assert!(check(&json!({"tool": "t"}), &actual).is_ok());
        assert!(check(&json!({"arguments": {"a": 71.99, "b": "45"}}), &actual).is_ok());
        assert!(check(&json!({"arguments": {"a": "71.99", "b": 45}}), &actual).is_ok());
        assert!(check(&json!({"arguments": {"a": "71.990", "b": 45}}), &actual).is_err());
        assert!(check(&json!({"arguments": {"a": "71.99"}}), &actual).is_err());
        assert!(check(&json!({"tool": "u"}), &actual).is_err());
        assert!(check(&json!({"missing": null}), &actual).is_ok());
        assert!(check(&json!(null), &json!(null)).is_ok());
        assert!(check(&json!(null), &actual).is_err());
    }

    #[test]
    fn lists_are_exact_and_ids_are_not_numbers() {
        assert!(check(&json!(["a", "b"]), &json!(["a", "b"])).is_ok());
        assert!(check(&json!(["a"]), &json!(["a", "b"])).is_err());
        assert!(check(&json!("71.99"), &json!("71.990")).is_ok());
        assert!(check(&json!("01310-100"), &json!("01310100")).is_err());
        assert!(check(&json!({"arguments": {}}), &json!({"arguments": {}})).is_ok());
    }
}
