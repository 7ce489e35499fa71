//! `turnstile eval clinc150`: CLINC150 (Larson et al., 2019) as a turnstile configuration — its
//! 10 domains as agents, its 150 intents as tools with the `train` utterances as their examples,
//! `oos_train` as the assistant's out-of-scope examples — decided by the embeddings router.
//!
//! Each query is one router decision through the configured embeddings profile
//! (`EmbeddingModel::route`, the code the worker runs), one at a time and timed. The prediction is
//! the routed tool when its confidence reaches the threshold, else out of scope — what the engine
//! does with a router decision below `router_confidence_threshold` (SC-2: fallback, no tool).
//!
//! The threshold is chosen on `val` + `oos_val` only: the confidence that maximises the accuracy
//! over all of their queries, out of scope counted as one more class (ties: the lowest) — the
//! plain validation accuracy, which weighs each query once whatever its kind. In-scope accuracy is Larson et al.'s: over
//! the in-scope queries, an out-of-scope prediction is wrong. The report also gives the figures at
//! the seeds' router threshold, for comparison.

use std::collections::BTreeMap;
use std::time::Instant;

use serde::Serialize;
use serde_json::json;

use crate::eval::clinc150::{Clinc150, Split};

/// CLINC150's intent of out-of-scope queries.
pub const OOS: &str = "oos";
/// The assistant (agent_id) of the generated configuration.
pub const ASSISTANT: &str = "clinc150";
pub const THRESHOLD_RULE: &str =
    "maximises accuracy over val + oos_val, out of scope as one more class (ties: the lowest)";

/// Domain → its intents (CLINC150's `domains.json`).
pub type Domains = BTreeMap<String, Vec<String>>;

/// CLINC150's own `domains.json` (CC BY 3.0), built in: CLINC's full data file does not hold it.
pub fn builtin_domains() -> Domains {
    serde_json::from_str(include_str!("clinc150_domains.json")).unwrap_or_default()
}

/// The agents YAML (JSON is YAML) of CLINC150 as one assistant. Every `train` intent needs a
/// domain.
pub fn catalog_yaml(train: &Split, oos_train: &Split, domains: &Domains) -> Result<String, String> {
    let domain_of: BTreeMap<&str, &str> = domains
        .iter()
        .flat_map(|(d, intents)| intents.iter().map(move |i| (i.as_str(), d.as_str())))
        .collect();
    let mut examples: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (text, intent) in train {
        examples.entry(intent).or_default().push(text);
    }
    let unassigned: Vec<&str> = examples
        .keys()
        .copied()
        .filter(|i| !domain_of.contains_key(i))
        .collect();
    if !unassigned.is_empty() {
        return Err(format!(
            "intents without a domain: {} (fix: pass --domains with a JSON object domain → [intents])",
            unassigned.join(", ")
        ));
    }
    let used: std::collections::BTreeSet<&str> = examples.keys().map(|i| domain_of[i]).collect();
    let agents: serde_json::Map<String, serde_json::Value> = used
        .iter()
        .map(|d| {
            (
                (*d).to_owned(),
                json!({ "description": format!("CLINC150 domain {d}") }),
            )
        })
        .collect();
    let tools: serde_json::Map<String, serde_json::Value> = examples
        .iter()
        .map(|(intent, texts)| {
            (
                (*intent).to_owned(),
                json!({ "agent": domain_of[intent], "description": format!("CLINC150 intent {intent}"),
                        "parameters": [], "examples": { "en": texts } }),
            )
        })
        .collect();
    let oos: Vec<&str> = oos_train.iter().map(|(t, _)| t.as_str()).collect();
    let mut assistant = json!({
        "default_locale": "en",
        "tenants": [{ "tenant": "*", "tools": "*" }],
        "agents": agents,
        "tools": tools,
    });
    if !oos.is_empty() {
        assistant["session_examples"] = json!({ "out_of_scope": { "en": oos } });
    }
    Ok(json!({ "assistants": { ASSISTANT: assistant } }).to_string())
}

/// One router decision on a query.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The routed tool; `None` for an out-of-scope decision or a fallback.
    pub intent: Option<String>,
    pub confidence: f64,
}

impl Decision {
    /// The intent predicted at `threshold` (`oos` below it).
    pub fn predicted(&self, threshold: f64) -> &str {
        match &self.intent {
            Some(i) if self.confidence >= threshold => i,
            _ => OOS,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Scores {
    pub in_scope_accuracy: f64,
    pub oos_recall: f64,
    pub oos_precision: f64,
    pub in_scope_count: usize,
    pub oos_count: usize,
}

/// Scores of `decisions[i]` against `expected[i]` (an intent or `oos`) at `threshold`.
pub fn score(expected: &[&str], decisions: &[Decision], threshold: f64) -> Scores {
    let (mut in_scope, mut correct, mut oos, mut oos_hit, mut predicted_oos) = (0, 0, 0, 0, 0);
    for (want, d) in expected.iter().zip(decisions) {
        let got = d.predicted(threshold);
        if got == OOS {
            predicted_oos += 1;
        }
        if *want == OOS {
            oos += 1;
            oos_hit += usize::from(got == OOS);
        } else {
            in_scope += 1;
            correct += usize::from(got == *want);
        }
    }
    let ratio = |a: usize, b: usize| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    Scores {
        in_scope_accuracy: ratio(correct, in_scope),
        oos_recall: ratio(oos_hit, oos),
        oos_precision: ratio(oos_hit, predicted_oos),
        in_scope_count: in_scope,
        oos_count: oos,
    }
}

/// The threshold of [`THRESHOLD_RULE`]: predictions change only at the decisions' confidences,
/// so those (and 0) are the candidates.
pub fn choose_threshold(expected: &[&str], decisions: &[Decision]) -> f64 {
    let mut candidates: Vec<f64> = decisions.iter().map(|d| d.confidence).collect();
    candidates.push(0.0);
    candidates.sort_by(f64::total_cmp);
    candidates.dedup();
    let mut best = (f64::MIN, 0.0);
    for t in candidates {
        let s = score(expected, decisions, t);
        let objective =
            s.in_scope_accuracy * s.in_scope_count as f64 + s.oos_recall * s.oos_count as f64;
        if objective > best.0 + 1e-12 {
            best = (objective, t);
        }
    }
    best.1
}

/// The figures at thresholds 0.1 … 0.9.
pub fn curve(expected: &[&str], decisions: &[Decision]) -> Vec<AtThreshold> {
    (1..=9)
        .map(|i| {
            let threshold = f64::from(i) / 10.0;
            AtThreshold {
                threshold,
                scores: score(expected, decisions, threshold),
            }
        })
        .collect()
}

/// The queries of a split and its out-of-scope companion (`val` + `oos_val`, `test` + `oos_test`).
pub fn queries<'a>(
    data: &'a Clinc150,
    path: &std::path::Path,
    split: &str,
) -> Result<Vec<(&'a str, &'a str)>, crate::eval::clinc150::Clinc150Error> {
    let in_scope = data.split(path, split)?;
    let oos = data.split(path, &format!("oos_{split}"))?;
    Ok(in_scope
        .iter()
        .chain(oos)
        .map(|(t, i)| (t.as_str(), i.as_str()))
        .collect())
}

/// Times of single decisions.
#[derive(Debug, Clone, Default)]
pub struct Timing {
    pub ms: Vec<f64>,
    pub cpu_seconds: f64,
}

impl Timing {
    pub fn mean_ms(&self) -> f64 {
        if self.ms.is_empty() {
            0.0
        } else {
            self.ms.iter().sum::<f64>() / self.ms.len() as f64
        }
    }

    pub fn p95_ms(&self) -> f64 {
        crate::eval::p95(&self.ms)
    }
}

/// Decides every query one at a time through `decide`, timing each; `failures` counts the
/// decisions that fell back (they predict out of scope, as the engine's fallback does).
pub async fn decide_all<F, Fut>(
    queries: &[(&str, &str)],
    mut decide: F,
    cpu_seconds: fn() -> f64,
    progress: &dyn Fn(usize),
) -> (Vec<Decision>, Timing, usize)
where
    F: FnMut(String) -> Fut,
    Fut: std::future::Future<Output = Option<Decision>>,
{
    let mut decisions = Vec::with_capacity(queries.len());
    let mut timing = Timing::default();
    let mut failures = 0;
    let cpu_start = cpu_seconds();
    for (i, (text, _)) in queries.iter().enumerate() {
        let started = Instant::now();
        let decision = decide((*text).to_owned()).await;
        timing.ms.push(started.elapsed().as_secs_f64() * 1000.0);
        decisions.push(decision.unwrap_or_else(|| {
            failures += 1;
            Decision {
                intent: None,
                confidence: 0.0,
            }
        }));
        progress(i + 1);
    }
    timing.cpu_seconds = cpu_seconds() - cpu_start;
    (decisions, timing, failures)
}

#[derive(Debug, Clone, Serialize)]
pub struct AtThreshold {
    pub threshold: f64,
    #[serde(flatten)]
    pub scores: Scores,
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub split: String,
    pub in_scope_accuracy: f64,
    pub oos_recall: f64,
    pub oos_precision: f64,
    pub ms_per_decision_mean: f64,
    pub ms_per_decision_p95: f64,
    pub cpu_ms_per_decision_mean: f64,
    pub in_scope_count: usize,
    pub oos_count: usize,
    /// Decisions that fell back (embeddings call failed): predicted out of scope.
    pub fallbacks: usize,
    pub threshold: f64,
    pub threshold_rule: &'static str,
    /// The chosen threshold's figures on `val` + `oos_val`.
    pub val: Scores,
    /// The split's figures at the configured router threshold (the seeds' 0.90 by default).
    pub at_router_threshold: AtThreshold,
    /// The split's figures at thresholds 0.1, 0.2, … 0.9: the trade-off an operator picks from.
    pub curve: Vec<AtThreshold>,
    pub intents: usize,
    pub domains: usize,
    pub examples: usize,
    /// Embedding (or loading from the cache) and fitting the examples.
    pub fit_seconds: f64,
}

impl Report {
    pub fn render(&self) -> String {
        let pct = |x: f64| 100.0 * x;
        format!(
            "CLINC150 `{split}`: {n} in-scope + {o} out-of-scope queries, {intents} intents in {domains} domains, {examples} examples (fitted in {fit:.0} s)\n\
             threshold {t:.4} ({rule})\n\
             \x20 in-scope accuracy {ia:.1} %   out-of-scope recall {or:.1} %   out-of-scope precision {op:.1} %\n\
             \x20 on val + oos_val at that threshold: in-scope {via:.1} %, out-of-scope recall {vor:.1} %\n\
             \x20 at the router threshold {rt:.2}: in-scope {ria:.1} %, out-of-scope recall {ror:.1} %\n\
             {curve}\
             fallbacks (embeddings call failed): {fb}\n\
             time per decision: mean {mean:.1} ms, p95 {p95:.1} ms, CPU {cpu:.2} ms (this process)\n",
            split = self.split,
            n = self.in_scope_count,
            o = self.oos_count,
            intents = self.intents,
            domains = self.domains,
            examples = self.examples,
            fit = self.fit_seconds,
            t = self.threshold,
            rule = self.threshold_rule,
            ia = pct(self.in_scope_accuracy),
            or = pct(self.oos_recall),
            op = pct(self.oos_precision),
            via = pct(self.val.in_scope_accuracy),
            vor = pct(self.val.oos_recall),
            rt = self.at_router_threshold.threshold,
            ria = pct(self.at_router_threshold.scores.in_scope_accuracy),
            ror = pct(self.at_router_threshold.scores.oos_recall),
            curve = self
                .curve
                .iter()
                .map(|c| format!(
                    "  at {:.1}: in-scope {:.1} %, out-of-scope recall {:.1} %\n",
                    c.threshold,
                    pct(c.scores.in_scope_accuracy),
                    pct(c.scores.oos_recall)
                ))
                .collect::<String>(),
            fb = self.fallbacks,
            mean = self.ms_per_decision_mean,
            p95 = self.ms_per_decision_p95,
            cpu = self.cpu_ms_per_decision_mean,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(intent: Option<&str>, confidence: f64) -> Decision {
        Decision {
            intent: intent.map(str::to_owned),
            confidence,
        }
    }

    #[test]
    fn an_out_of_scope_prediction_of_an_in_scope_query_is_wrong() {
        let expected = ["a", "a", "b", OOS, OOS];
        let decisions = [
            d(Some("a"), 0.95),
            d(Some("a"), 0.50), // below the threshold: predicted oos, wrong
            d(Some("a"), 0.99), // wrong intent
            d(Some("b"), 0.40), // below: oos, right
            d(None, 0.99),      // out-of-scope decision, right
        ];
        let s = score(&expected, &decisions, 0.9);
        assert_eq!((s.in_scope_count, s.oos_count), (3, 2));
        assert!((s.in_scope_accuracy - 1.0 / 3.0).abs() < 1e-9, "{s:?}");
        assert_eq!(s.oos_recall, 1.0);
        assert!((s.oos_precision - 2.0 / 3.0).abs() < 1e-9, "{s:?}");
    }

    #[test]
    fn the_threshold_maximises_accuracy_over_all_queries() {
        let expected = ["a", "b", "a", OOS, OOS];
        let decisions = [
            d(Some("a"), 0.8),
            d(Some("b"), 0.7),
            d(Some("a"), 0.65),
            d(Some("a"), 0.6),
            d(Some("b"), 0.75),
        ];
        // Right answers: 0 → 3 (all routed); 0.65 → 4 (one oos caught); 0.7 → 3; 0.75 → 2;
        // 0.8 → 3 (a, both oos).
        assert_eq!(choose_threshold(&expected, &decisions), 0.65);
        let clear = [
            d(Some("a"), 0.9),
            d(Some("b"), 0.9),
            d(Some("a"), 0.9),
            d(Some("a"), 0.3),
            d(None, 0.9),
        ];
        assert_eq!(choose_threshold(&expected, &clear), 0.9);
    }

    #[test]
    fn the_generated_configuration_is_a_valid_catalog() {
        let train: Split = vec![
            ("what's my balance".into(), "balance".into()),
            ("freeze my account".into(), "freeze_account".into()),
            ("how do i say hello in french".into(), "translate".into()),
        ];
        let oos: Split = vec![("how tall is mount everest".into(), OOS.into())];
        let domains = builtin_domains();
        assert_eq!(domains.len(), 10);
        assert_eq!(domains.values().map(Vec::len).sum::<usize>(), 150);
        let yaml = catalog_yaml(&train, &oos, &domains).expect("all intents have a domain");
        let catalog = crate::config::agents::parse_catalog(&yaml, "clinc150").expect("valid");
        let a = catalog.assistant(ASSISTANT).expect("assistant");
        assert_eq!(a.tools.len(), 3);
        assert_eq!(a.tools["balance"].agent, "banking");
        assert_eq!(a.tools["translate"].agent, "travel");
        assert_eq!(
            a.session_examples.out_of_scope.values().flatten().count(),
            1
        );

        let stray: Split = vec![("x".into(), "not_an_intent".into())];
        let e = catalog_yaml(&stray, &oos, &domains).expect_err("no domain");
        assert!(
            e.contains("not_an_intent") && e.contains("--domains"),
            "{e}"
        );
    }
}
