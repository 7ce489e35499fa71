//! `turnstile eval decisions`: first turns of fresh conversations through the real engine and
//! the configured model, scored against expectations. Each line of the data file is
//! `{"text", "locale": "en"|"pt-BR", "expect": <tool> | "out_of_scope" | "human_handoff" |
//! "end_session"}`. Tools are never called: pre-validation answers eligible and execution
//! succeeds in process (`ScriptedTools` with no script).
//!
//! The predicted label is the tool of the transaction the turn started (active or, when it
//! finished in the same turn, last), else `human_handoff` / `end_session` for session control,
//! else `out_of_scope` — a route to an agent without a tool counts as `out_of_scope`.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};

use crate::domain::catalog::{Catalog, Settings};
use crate::domain::engine::Engine;
use crate::domain::locale::Locale;
use crate::domain::turn::{Identity, Turn, TurnInput};
use crate::pipeline::process_turn;
use crate::ports::DecisionModel;
use crate::store::memory::InMemoryCheckpointStore;
use crate::tool::scripted::ScriptedTools;

pub const OUT_OF_SCOPE: &str = "out_of_scope";
pub const HUMAN_HANDOFF: &str = "human_handoff";
pub const END_SESSION: &str = "end_session";

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Example {
    pub text: String,
    pub locale: Locale,
    pub expect: String,
}

/// Parses the JSONL data, naming the line of any problem; expectations must be labels the
/// configuration can produce.
pub fn parse_examples(text: &str, assistant_tools: &[String]) -> Result<Vec<Example>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let example: Example = serde_json::from_str(line).map_err(|e| {
            format!("line {}: {e} (fix: one JSON object per line: {{\"text\", \"locale\": \"en\"|\"pt-BR\", \"expect\"}})", i + 1)
        })?;
        let known = [OUT_OF_SCOPE, HUMAN_HANDOFF, END_SESSION].contains(&example.expect.as_str())
            || assistant_tools.contains(&example.expect);
        if !known {
            return Err(format!(
                "line {}: expect `{}` is not a tool of the assistant nor out_of_scope / human_handoff / end_session (tools: {})",
                i + 1,
                example.expect,
                assistant_tools.join(", ")
            ));
        }
        out.push(example);
    }
    if out.is_empty() {
        return Err("the data file holds no example".into());
    }
    Ok(out)
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LabelScore {
    pub count: usize,
    pub predicted: usize,
    pub correct: usize,
    pub recall: f64,
    pub precision: f64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct LocaleScore {
    pub count: usize,
    pub correct: usize,
    pub accuracy: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Confusion {
    pub expect: String,
    pub predicted: String,
    pub count: usize,
    pub examples: Vec<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecisionsReport {
    pub count: usize,
    pub accuracy: f64,
    pub by_expect: BTreeMap<String, LabelScore>,
    pub by_locale: BTreeMap<String, LocaleScore>,
    /// Every (expect, predicted) pair that differed, most frequent first (the text report shows
    /// the first 10).
    pub confusions: Vec<Confusion>,
    /// Model calls by skill over the whole run.
    pub model_calls: BTreeMap<String, usize>,
    /// Handoff or end decided for a message that asked for neither.
    pub unwanted_session_control: usize,
    pub ms_per_decision_mean: f64,
    pub ms_per_decision_p95: f64,
    pub cpu_ms_per_decision_mean: f64,
}

/// Decides every example as the first turn of its own conversation.
pub async fn evaluate<M: DecisionModel>(
    catalog: &Catalog,
    settings: &Settings,
    assistant: &str,
    model: &M,
    examples: &[Example],
    cpu_seconds: impl Fn() -> f64,
) -> Result<DecisionsReport, String> {
    let engine = Engine::new(catalog, settings);
    let tools = ScriptedTools::default();
    let mut predictions = Vec::with_capacity(examples.len());
    let mut wall_ms = Vec::with_capacity(examples.len());
    let mut model_calls: BTreeMap<String, usize> = BTreeMap::new();
    let cpu_start = cpu_seconds();
    for (i, example) in examples.iter().enumerate() {
        let store = InMemoryCheckpointStore::new();
        let turn = Turn {
            turn_id: format!("eval-{i}"),
            identity: Identity {
                tenant_id: "eval".into(),
                agent_id: assistant.into(),
                session_id: format!("s{i}"),
            },
            input: TurnInput::Text(example.text.clone()),
            locale: example.locale,
            at_ms: 1_700_000_000_000,
        };
        let started = Instant::now();
        let processed = process_turn(&engine, &store, model, &tools, &turn)
            .await
            .map_err(|e| format!("example {} ({:?}): {e}", i + 1, example.text))?;
        wall_ms.push(started.elapsed().as_secs_f64() * 1000.0);
        for skill in &processed.model_calls {
            *model_calls.entry(skill.as_str().to_owned()).or_default() += 1;
        }
        let state = &processed.outcome.state;
        let predicted = if let Some(t) = state
            .active_transaction
            .as_ref()
            .or(state.last_transaction.as_ref())
        {
            t.tool.clone()
        } else if state.human_handoff_requested {
            HUMAN_HANDOFF.to_owned()
        } else if state.session_ended {
            END_SESSION.to_owned()
        } else {
            OUT_OF_SCOPE.to_owned()
        };
        predictions.push(predicted);
    }
    let cpu_ms = (cpu_seconds() - cpu_start) * 1000.0;
    Ok(score(examples, &predictions, model_calls, &wall_ms, cpu_ms))
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

pub fn score(
    examples: &[Example],
    predictions: &[String],
    model_calls: BTreeMap<String, usize>,
    wall_ms: &[f64],
    cpu_ms: f64,
) -> DecisionsReport {
    let mut by_expect: BTreeMap<String, LabelScore> = BTreeMap::new();
    let mut by_locale: BTreeMap<String, LocaleScore> = BTreeMap::new();
    let mut confusions: BTreeMap<(String, String), Vec<String>> = BTreeMap::new();
    let mut correct = 0;
    let mut unwanted = 0;
    for (e, p) in examples.iter().zip(predictions) {
        let hit = e.expect == *p;
        correct += usize::from(hit);
        let s = by_expect.entry(e.expect.clone()).or_default();
        s.count += 1;
        s.correct += usize::from(hit);
        by_expect.entry(p.clone()).or_default().predicted += 1;
        let l = by_locale.entry(e.locale.tag().to_owned()).or_default();
        l.count += 1;
        l.correct += usize::from(hit);
        if !hit {
            confusions
                .entry((e.expect.clone(), p.clone()))
                .or_default()
                .push(e.text.clone());
            if [HUMAN_HANDOFF, END_SESSION].contains(&p.as_str()) {
                unwanted += 1;
            }
        }
    }
    for s in by_expect.values_mut() {
        s.recall = ratio(s.correct, s.count);
        s.precision = ratio(s.correct, s.predicted);
    }
    for l in by_locale.values_mut() {
        l.accuracy = ratio(l.correct, l.count);
    }
    let mut confusions: Vec<Confusion> = confusions
        .into_iter()
        .map(|((expect, predicted), texts)| Confusion {
            expect,
            predicted,
            count: texts.len(),
            examples: texts.into_iter().take(3).collect(),
        })
        .collect();
    confusions.sort_by_key(|c| std::cmp::Reverse(c.count));
    let p95 = crate::eval::p95(wall_ms);
    let n = examples.len().max(1) as f64;
    DecisionsReport {
        count: examples.len(),
        accuracy: ratio(correct, examples.len()),
        by_expect,
        by_locale,
        confusions,
        model_calls,
        unwanted_session_control: unwanted,
        ms_per_decision_mean: wall_ms.iter().sum::<f64>() / n,
        ms_per_decision_p95: p95,
        cpu_ms_per_decision_mean: cpu_ms / n,
    }
}

impl DecisionsReport {
    pub fn render(&self) -> String {
        let mut out = format!(
            "{} first turns: accuracy {:.1} %\n",
            self.count,
            100.0 * self.accuracy
        );
        out.push_str("  expect                     count  recall  precision\n");
        for (label, s) in &self.by_expect {
            if s.count == 0 {
                continue;
            }
            out.push_str(&format!(
                "  {label:<26} {:>5}  {:>5.1} %  {:>5.1} %\n",
                s.count,
                100.0 * s.recall,
                100.0 * s.precision
            ));
        }
        for (locale, l) in &self.by_locale {
            out.push_str(&format!(
                "  locale {locale:<6} {:>5} examples, accuracy {:.1} %\n",
                l.count,
                100.0 * l.accuracy
            ));
        }
        out.push_str(&format!(
            "handoff/end decided for a message that asked for neither: {}\n",
            self.unwanted_session_control
        ));
        out.push_str(&format!(
            "time per decision: mean {:.1} ms, p95 {:.1} ms, CPU {:.1} ms (this process)\n",
            self.ms_per_decision_mean, self.ms_per_decision_p95, self.cpu_ms_per_decision_mean
        ));
        let calls: Vec<String> = self
            .model_calls
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        out.push_str(&format!("model calls: {}\n", calls.join(", ")));
        if !self.confusions.is_empty() {
            out.push_str("worst confusions (expect → predicted):\n");
            for c in self.confusions.iter().take(10) {
                out.push_str(&format!(
                    "  {} → {}: {} e.g. {:?}\n",
                    c.expect, c.predicted, c.count, c.examples
                ));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(text: &str, expect: &str) -> Example {
        Example {
            text: text.into(),
            locale: Locale::En,
            expect: expect.into(),
        }
    }

    #[test]
    fn scores_recall_precision_confusions_and_unwanted_session_control() {
        let examples = [
            ex("a", "retail_order_cancel"),
            ex("b", "retail_order_cancel"),
            ex("c", OUT_OF_SCOPE),
            ex("d", OUT_OF_SCOPE),
        ];
        let predicted = [
            "retail_order_cancel".to_string(),
            OUT_OF_SCOPE.to_string(),
            OUT_OF_SCOPE.to_string(),
            HUMAN_HANDOFF.to_string(),
        ];
        let r = score(
            &examples,
            &predicted,
            BTreeMap::new(),
            &[1.0, 2.0, 3.0, 4.0],
            8.0,
        );
        assert_eq!(r.accuracy, 0.5);
        assert_eq!(r.by_expect["retail_order_cancel"].recall, 0.5);
        assert_eq!(r.by_expect[OUT_OF_SCOPE].precision, 0.5);
        assert_eq!(r.by_expect[HUMAN_HANDOFF].predicted, 1);
        assert_eq!(r.unwanted_session_control, 1);
        assert_eq!(r.ms_per_decision_mean, 2.5);
        assert_eq!(r.cpu_ms_per_decision_mean, 2.0);
        assert_eq!(r.confusions.len(), 2);
    }

    #[test]
    fn bad_lines_name_the_line_and_the_fix() {
        let tools = vec!["retail_order_cancel".to_string()];
        let e = parse_examples("{\"text\": \"x\"}", &tools).expect_err("missing fields");
        assert!(e.starts_with("line 1:") && e.contains("fix:"), "{e}");
        let e = parse_examples(
            "{\"text\": \"x\", \"locale\": \"en\", \"expect\": \"weather\"}",
            &tools,
        )
        .expect_err("unknown label");
        assert!(e.contains("expect `weather`"), "{e}");
        assert!(parse_examples("\n", &tools).is_err());
    }
}
