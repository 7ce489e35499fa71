//! `turnstile eval recogniser`: the PR-6 confirmation recogniser on real yes / no / maybe
//! answers (CLINC150's intents `yes`, `no`, `maybe`).
//!
//! A **polarity error** is an utterance decided against its meaning: a `no` or `maybe` read as
//! affirmation, a `yes` or `maybe` read as negation. Undecided is never an error — the turn
//! then follows the order of evaluation and the question is asked again — so the target is zero
//! polarity errors, then as much recall of `yes` and `no` as the lexicon reaches.

use serde::Serialize;

use crate::domain::confirmation::{recognise, Confirmation};

/// The CLINC150 intents this evaluation reads.
pub const INTENTS: [&str; 3] = ["yes", "no", "maybe"];

/// How one intent's utterances were read.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct IntentCounts {
    pub count: usize,
    pub affirm: usize,
    pub deny: usize,
    pub undecided: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Misread {
    pub text: String,
    pub expect: String,
    /// `affirm`, `deny` or `undecided`.
    pub got: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecogniserReport {
    pub split: String,
    pub locale: String,
    pub utterances: usize,
    pub polarity_errors: usize,
    pub yes_recall: f64,
    pub no_recall: f64,
    pub yes: IntentCounts,
    pub no: IntentCounts,
    pub maybe: IntentCounts,
    pub errors: Vec<Misread>,
    /// `yes` / `no` utterances left undecided (not errors; what more lexicon could reach).
    pub undecided: Vec<Misread>,
}

/// Reads every `yes` / `no` / `maybe` utterance of `split` with the recogniser.
pub fn evaluate<'a>(
    split_name: &str,
    locale: &str,
    utterances: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> RecogniserReport {
    let mut counts: [IntentCounts; 3] = Default::default();
    let mut errors = Vec::new();
    let mut undecided = Vec::new();
    for (text, intent) in utterances {
        let Some(index) = INTENTS.iter().position(|i| *i == intent) else {
            continue;
        };
        let got = recognise(text);
        let c = &mut counts[index];
        c.count += 1;
        match got {
            Some(Confirmation::Affirm) => c.affirm += 1,
            Some(Confirmation::Deny) => c.deny += 1,
            None => c.undecided += 1,
        }
        let misread = |got: &str| Misread {
            text: text.to_string(),
            expect: intent.to_string(),
            got: got.to_string(),
        };
        match (intent, got) {
            ("no" | "maybe", Some(Confirmation::Affirm)) => errors.push(misread("affirm")),
            ("yes" | "maybe", Some(Confirmation::Deny)) => errors.push(misread("deny")),
            ("yes" | "no", None) => undecided.push(misread("undecided")),
            _ => {}
        }
    }
    let [yes, no, maybe] = counts;
    RecogniserReport {
        split: split_name.to_string(),
        locale: locale.to_string(),
        utterances: yes.count + no.count + maybe.count,
        polarity_errors: errors.len(),
        yes_recall: ratio(yes.affirm, yes.count),
        no_recall: ratio(no.deny, no.count),
        yes,
        no,
        maybe,
        errors,
        undecided,
    }
}

fn ratio(part: usize, whole: usize) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 / whole as f64
    }
}

impl RecogniserReport {
    /// The human-readable report; `show_undecided` also lists the missed `yes` / `no`.
    pub fn render(&self, show_undecided: bool) -> String {
        let mut out = format!(
            "PR-6 recogniser on CLINC150 `{}` ({}): {} utterances\n",
            self.split, self.locale, self.utterances
        );
        for (name, c) in [("yes", &self.yes), ("no", &self.no), ("maybe", &self.maybe)] {
            out.push_str(&format!(
                "  {name:<5} {:>4}: {:>4} affirm, {:>4} deny, {:>4} undecided\n",
                c.count, c.affirm, c.deny, c.undecided
            ));
        }
        out.push_str(&format!(
            "yes recall {:.1} %, no recall {:.1} %\npolarity errors: {}\n",
            100.0 * self.yes_recall,
            100.0 * self.no_recall,
            self.polarity_errors
        ));
        for e in &self.errors {
            out.push_str(&format!("  {} read as {}: {:?}\n", e.expect, e.got, e.text));
        }
        if show_undecided {
            out.push_str(&format!("undecided yes/no: {}\n", self.undecided.len()));
            for u in &self.undecided {
                out.push_str(&format!("  {}: {:?}\n", u.expect, u.text));
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_polarity_errors_recall_and_ignores_other_intents() {
        // PR-6: a `maybe` read either way and a `no` read as yes are errors; undecided is not.
        let data = [
            ("yes", "yes"),
            ("that is correct", "yes"),
            ("yes, let me check first", "yes"),
            ("no", "no"),
            ("yes", "no"),
            ("maybe", "maybe"),
            ("nope", "maybe"),
            ("what time is it", "time"),
        ];
        let report = evaluate("train", "en", data);
        assert_eq!(report.utterances, 7);
        assert_eq!(report.polarity_errors, 2, "{:?}", report.errors);
        assert_eq!(
            report
                .errors
                .iter()
                .map(|e| e.text.as_str())
                .collect::<Vec<_>>(),
            ["yes", "nope"]
        );
        assert!((report.yes_recall - 2.0 / 3.0).abs() < 1e-9);
        assert!((report.no_recall - 0.5).abs() < 1e-9);
        assert_eq!(
            report.maybe,
            IntentCounts {
                count: 2,
                affirm: 0,
                deny: 1,
                undecided: 1
            }
        );
        assert_eq!(report.undecided.len(), 1);
        let text = report.render(true);
        assert!(text.contains("polarity errors: 2"), "{text}");
        assert!(text.contains("yes recall 66.7 %"), "{text}");
        assert!(text.contains("\"yes, let me check first\""), "{text}");
    }
}
