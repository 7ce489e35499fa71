//! Reads a model's answer defensively: code fences, text around the JSON, wrong types, missing
//! fields and out-of-range confidences all become `ModelFailure::InvalidJson`, never a panic.

use std::collections::BTreeMap;

use serde_json::Value;

use crate::domain::decision::{
    ClassifierDecision, InterpreterAct, InterpreterDecision, ModelAnswer, ModelFailure,
    RouterDecision, SessionControl,
};

/// Finds the first JSON object in `text` (inside code fences or surrounded by prose).
pub fn extract_json_object(text: &str) -> Option<Value> {
    let trimmed = text.trim();
    if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(trimmed) {
        return Some(v);
    }
    let bytes = trimmed.as_bytes();
    let mut start = 0;
    while let Some(offset) = trimmed[start..].find('{') {
        let open = start + offset;
        if let Some(close) = matching_brace(bytes, open) {
            if let Ok(v @ Value::Object(_)) = serde_json::from_str::<Value>(&trimmed[open..=close])
            {
                return Some(v);
            }
        }
        start = open + 1;
    }
    None
}

/// The index of the `}` closing the `{` at `open`, string- and escape-aware.
fn matching_brace(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for (i, &b) in bytes.iter().enumerate().skip(open) {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' => depth += 1,
            b'}' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

fn confidence(v: &Value) -> Result<f64, ModelFailure> {
    let c = match v.get("confidence") {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .ok_or(ModelFailure::InvalidJson)?;
    if c.is_finite() && (0.0..=1.0).contains(&c) {
        Ok(c)
    } else {
        Err(ModelFailure::InvalidJson)
    }
}

fn arguments(v: &Value) -> Result<BTreeMap<String, Value>, ModelFailure> {
    match v.get("arguments") {
        None | Some(Value::Null) => Ok(BTreeMap::new()),
        Some(Value::Object(m)) => Ok(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect()),
        Some(_) => Err(ModelFailure::InvalidJson),
    }
}

fn label(v: &Value, key: &str) -> Option<String> {
    v.get(key)
        .and_then(Value::as_str)
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// `{decision, confidence}` over the four labels (SC-1).
pub fn parse_classifier(v: &Value) -> ModelAnswer<ClassifierDecision> {
    let decision = match label(v, "decision")
        .map(|s| s.to_ascii_uppercase())
        .as_deref()
    {
        Some("CONTINUE") => SessionControl::Continue,
        Some("ROUTE") => SessionControl::Route,
        Some("HUMAN_HANDOFF") => SessionControl::HumanHandoff,
        Some("END_SESSION") => SessionControl::EndSession,
        _ => return Err(ModelFailure::InvalidJson),
    };
    Ok(ClassifierDecision {
        decision,
        confidence: confidence(v)?,
    })
}

/// `{agent, intent, confidence, arguments}` or `{out_of_scope: true, confidence}`.
pub fn parse_router(v: &Value) -> ModelAnswer<RouterDecision> {
    if v.get("out_of_scope").and_then(Value::as_bool) == Some(true) {
        let confidence = confidence(v).unwrap_or(1.0);
        return Ok(RouterDecision::OutOfScope { confidence });
    }
    if let Some(topic) = label(v, "topic") {
        let tool = label(v, "tool");
        return Ok(RouterDecision::Topic {
            tool,
            topic,
            confidence: confidence(v)?,
        });
    }
    let agent = label(v, "agent").ok_or(ModelFailure::InvalidJson)?;
    let intent = match v.get("intent") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.trim().to_owned()).filter(|s| !s.is_empty()),
        Some(_) => return Err(ModelFailure::InvalidJson),
    };
    Ok(RouterDecision::Route {
        agent,
        intent,
        confidence: confidence(v)?,
        arguments: arguments(v)?,
    })
}

/// `{act, arguments, confidence}` with act in provide | cancel | affirm | deny | unclear.
pub fn parse_interpreter(v: &Value) -> ModelAnswer<InterpreterDecision> {
    let act = match label(v, "act").map(|s| s.to_ascii_lowercase()).as_deref() {
        Some("provide") => InterpreterAct::Provide,
        Some("cancel") => InterpreterAct::Cancel,
        Some("affirm") => InterpreterAct::Affirm,
        Some("deny") => InterpreterAct::Deny,
        Some("unclear") => InterpreterAct::Unclear,
        _ => return Err(ModelFailure::InvalidJson),
    };
    Ok(InterpreterDecision {
        act,
        arguments: arguments(v)?,
        confidence: confidence(v)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn finds_json_in_fences_and_prose() {
        let text = "Sure!\n```json\n{\"decision\": \"ROUTE\", \"confidence\": 0.9}\n```\nbye {";
        let v = extract_json_object(text).unwrap();
        assert_eq!(v["decision"], "ROUTE");
        assert!(extract_json_object("no json here").is_none());
        assert!(extract_json_object("{\"a\": \"}\"").is_none());
        let nested = extract_json_object("x {\"a\": {\"b\": \"}\"}} y").unwrap();
        assert_eq!(nested["a"]["b"], "}");
    }

    // SC-2: invalid output is a failure, not a decision.
    #[test]
    fn classifier_rejects_bad_shapes() {
        assert!(parse_classifier(&json!({"decision": "continue", "confidence": 0.95})).is_ok());
        for bad in [
            json!({"decision": "MAYBE", "confidence": 0.95}),
            json!({"decision": "ROUTE"}),
            json!({"decision": "ROUTE", "confidence": 1.5}),
            json!({"decision": "ROUTE", "confidence": -0.1}),
            json!({"decision": 3, "confidence": 0.9}),
            json!({"decision": "ROUTE", "confidence": "high"}),
        ] {
            assert_eq!(
                parse_classifier(&bad),
                Err(ModelFailure::InvalidJson),
                "{bad}"
            );
        }
    }

    #[test]
    fn router_and_interpreter_shapes() {
        let r = parse_router(&json!({"agent": "retail", "intent": "retail_order_cancel",
            "confidence": 0.95, "arguments": {"order_id": "PED-1001"}}))
        .unwrap();
        assert!(
            matches!(r, RouterDecision::Route { ref intent, .. } if intent.as_deref() == Some("retail_order_cancel"))
        );
        assert!(matches!(
            parse_router(&json!({"out_of_scope": true, "confidence": 0.93})),
            Ok(RouterDecision::OutOfScope { .. })
        ));
        assert!(
            parse_router(&json!({"agent": "retail", "confidence": 0.9, "arguments": [1]})).is_err()
        );
        let i = parse_interpreter(
            &json!({"act": "provide", "arguments": {"amount": "10"}, "confidence": 0.9}),
        )
        .unwrap();
        assert_eq!(i.act, InterpreterAct::Provide);
        assert!(parse_interpreter(&json!({"act": "dance", "confidence": 0.9})).is_err());
    }
}
