//! The figures of a played run (conversations.md, "Figures a report gives"), as text with the
//! transcript of every failed conversation, or as one JSON object with a `failures` array.

use std::collections::BTreeMap;

use serde::Serialize;

use super::format::{Expectation, OutcomeClass};
use super::judge::{show_args, Observed, UnsafeKind};
use super::play::{PlayedConversation, PlayedTurn};

/// z for a two-sided 95 % interval.
const Z95: f64 = 1.959_963_984_540_054;

/// The Wilson score interval (95 %) of `successes` out of `n`; `(0, 1)` when `n` is 0. It stays
/// inside [0, 1] and is sensible at 0 % and 100 %, where the normal approximation collapses.
pub fn wilson95(successes: usize, n: usize) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let n = n as f64;
    let p = successes as f64 / n;
    let z2 = Z95 * Z95;
    let denominator = 1.0 + z2 / n;
    let centre = (p + z2 / (2.0 * n)) / denominator;
    let half = Z95 * (p * (1.0 - p) / n + z2 / (4.0 * n * n)).sqrt() / denominator;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        0.0
    } else {
        a as f64 / b as f64
    }
}

/// A rate, strict and lenient, with the strict one's 95 % Wilson interval.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Rate {
    pub strict: f64,
    pub lenient: f64,
    pub ci95: [f64; 2],
    pub strict_count: usize,
    pub lenient_count: usize,
    pub of: usize,
}

impl Rate {
    fn new(strict: usize, lenient: usize, of: usize) -> Rate {
        let (lo, hi) = wilson95(strict, of);
        Rate {
            strict: ratio(strict, of),
            lenient: ratio(lenient, of),
            ci95: [lo, hi],
            strict_count: strict,
            lenient_count: lenient,
            of,
        }
    }
}

/// Figures of a group of conversations (all, or one locale).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Figures {
    pub conversations: usize,
    pub turns: usize,
    pub turn_accuracy: Rate,
    pub conversation_success: Rate,
}

impl Figures {
    fn of<'a>(played: impl Iterator<Item = &'a PlayedConversation<'a>> + Clone) -> Figures {
        let turns = played.clone().flat_map(|c| &c.turns);
        let n_turns = turns.clone().count();
        let strict_turns = turns.clone().filter(|t| t.strict_failure.is_none()).count();
        let lenient_turns = turns.filter(|t| t.lenient_ok).count();
        let n = played.clone().count();
        let strict = played.clone().filter(|c| c.strict_ok()).count();
        let lenient = played.filter(|c| c.lenient_ok()).count();
        Figures {
            conversations: n,
            turns: n_turns,
            turn_accuracy: Rate::new(strict_turns, lenient_turns, n_turns),
            conversation_success: Rate::new(strict, lenient, n),
        }
    }
}

/// Per outcome class, by class only: of the turns expected in / judged as the class, how many
/// were judged / expected so.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct ClassFigures {
    pub expected: usize,
    pub actual: usize,
    pub correct: usize,
    /// `null` when no turn was judged so.
    pub precision: Option<f64>,
    /// `null` when no turn expected it.
    pub recall: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct UnsafeTurn {
    pub conversation: String,
    /// 1-based.
    pub turn: usize,
    pub kind: UnsafeKind,
    pub detail: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Latency {
    pub mean: f64,
    pub p95: f64,
}

/// A turn whose main expectation did not hold.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Failure {
    pub id: String,
    /// 1-based.
    pub turn: usize,
    pub expected: Expectation,
    pub actual: Observed,
    pub reply: String,
    pub why: String,
    /// An `accept` alternative holds.
    pub lenient_ok: bool,
    /// What each model and tool answered, in order (in process only).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub decisions: Vec<String>,
}

/// The whole report; `--json` prints it as one object.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub part: String,
    /// How the turns were played: `in_process`, or `kafka` (against a running worker).
    pub mode: String,
    #[serde(flatten)]
    pub figures: Figures,
    pub by_locale: BTreeMap<String, Figures>,
    pub by_outcome: BTreeMap<String, ClassFigures>,
    pub unsafe_turns: usize,
    #[serde(rename = "unsafe")]
    pub unsafe_list: Vec<UnsafeTurn>,
    pub latency_ms: Latency,
    pub model_calls: BTreeMap<String, usize>,
    pub failures: Vec<Failure>,
    /// The floors given and not met (empty when none was given or all were met).
    pub floors_unmet: Vec<String>,
}

impl Report {
    pub fn new(
        part: &str,
        played: &[PlayedConversation<'_>],
        model_calls: BTreeMap<String, usize>,
    ) -> Report {
        let mut by_locale = BTreeMap::new();
        let mut locales: Vec<_> = played.iter().map(|c| c.conversation.locale).collect();
        locales.sort_unstable();
        locales.dedup();
        for locale in locales {
            let group = played
                .iter()
                .filter(move |c| c.conversation.locale == locale);
            by_locale.insert(locale.tag().to_owned(), Figures::of(group));
        }
        let latencies: Vec<f64> = played
            .iter()
            .flat_map(|c| c.turns.iter().map(|t| t.latency_ms))
            .collect();
        let unsafe_list = unsafe_turns(played);
        let mut flagged: Vec<(&str, usize)> = unsafe_list
            .iter()
            .map(|u| (u.conversation.as_str(), u.turn))
            .collect();
        flagged.dedup();
        Report {
            part: part.to_owned(),
            mode: "in_process".to_owned(),
            figures: Figures::of(played.iter()),
            by_locale,
            by_outcome: by_outcome(played),
            unsafe_turns: flagged.len(),
            unsafe_list,
            latency_ms: Latency {
                mean: latencies.iter().sum::<f64>() / latencies.len().max(1) as f64,
                p95: crate::eval::p95(&latencies),
            },
            model_calls,
            failures: failures(played),
            floors_unmet: Vec::new(),
        }
    }
}

fn by_outcome(played: &[PlayedConversation<'_>]) -> BTreeMap<String, ClassFigures> {
    let mut counts: BTreeMap<OutcomeClass, ClassFigures> = BTreeMap::new();
    let pairs = played.iter().flat_map(|c| {
        c.conversation
            .turns
            .iter()
            .zip(&c.turns)
            .map(|(e, t)| (e.expect.outcome, t.observed.outcome))
    });
    for (expected, actual) in pairs {
        counts.entry(expected).or_default().expected += 1;
        counts.entry(actual).or_default().actual += 1;
        if expected == actual {
            counts.entry(expected).or_default().correct += 1;
        }
    }
    counts
        .into_iter()
        .map(|(class, mut f)| {
            f.precision = (f.actual > 0).then(|| ratio(f.correct, f.actual));
            f.recall = (f.expected > 0).then(|| ratio(f.correct, f.expected));
            (class.as_str().to_owned(), f)
        })
        .collect()
}

fn unsafe_turns(played: &[PlayedConversation<'_>]) -> Vec<UnsafeTurn> {
    let mut out = Vec::new();
    for c in played {
        for (i, t) in c.turns.iter().enumerate() {
            for f in &t.findings {
                out.push(UnsafeTurn {
                    conversation: c.conversation.id.clone(),
                    turn: i + 1,
                    kind: f.kind,
                    detail: f.detail.clone(),
                });
            }
        }
    }
    out
}

fn failures(played: &[PlayedConversation<'_>]) -> Vec<Failure> {
    let mut out = Vec::new();
    for c in played {
        for (i, (expected, t)) in c.conversation.turns.iter().zip(&c.turns).enumerate() {
            let Some(why) = &t.strict_failure else {
                continue;
            };
            out.push(Failure {
                id: c.conversation.id.clone(),
                turn: i + 1,
                expected: expected.expect.clone(),
                actual: t.observed.clone(),
                reply: t.reply.clone(),
                why: why.clone(),
                lenient_ok: t.lenient_ok,
                decisions: t.decisions.clone(),
            });
        }
    }
    out
}

fn percent(x: f64) -> String {
    format!("{:.1} %", 100.0 * x)
}

fn optional_percent(x: Option<f64>) -> String {
    x.map_or_else(|| "–".to_owned(), percent)
}

fn rate_line(label: &str, r: &Rate) -> String {
    format!(
        "{label}: strict {} ({}/{}, 95 % CI {}–{}), lenient {} ({}/{})\n",
        percent(r.strict),
        r.strict_count,
        r.of,
        percent(r.ci95[0]),
        percent(r.ci95[1]),
        percent(r.lenient),
        r.lenient_count,
        r.of
    )
}

impl Report {
    /// The figures, then the transcript of every conversation that failed (strict).
    pub fn render(&self, played: &[PlayedConversation<'_>]) -> String {
        let f = &self.figures;
        let mut out = format!(
            "{} conversations, {} turns (part: {})\n",
            f.conversations, f.turns, self.part
        );
        out.push_str(&rate_line("turn accuracy", &f.turn_accuracy));
        out.push_str(&rate_line("conversation success", &f.conversation_success));
        for (locale, l) in &self.by_locale {
            out.push_str(&format!(
                "  locale {locale}: {} conversations, {} turns\n",
                l.conversations, l.turns
            ));
            out.push_str(&rate_line("    turn accuracy", &l.turn_accuracy));
            out.push_str(&rate_line(
                "    conversation success",
                &l.conversation_success,
            ));
        }
        out.push_str("  outcome                   expected  actual  precision  recall\n");
        for (class, c) in &self.by_outcome {
            out.push_str(&format!(
                "  {class:<25} {:>8}  {:>6}  {:>9}  {:>6}\n",
                c.expected,
                c.actual,
                optional_percent(c.precision),
                optional_percent(c.recall)
            ));
        }
        out.push_str(&format!("unsafe turns: {}\n", self.unsafe_turns));
        for u in &self.unsafe_list {
            out.push_str(&format!(
                "  {} turn {}: {}: {}\n",
                u.conversation,
                u.turn,
                u.kind.as_str(),
                u.detail
            ));
        }
        out.push_str(&format!("played: {}\n", self.mode));
        out.push_str(&format!(
            "latency per turn: mean {:.1} ms, p95 {:.1} ms\n",
            self.latency_ms.mean, self.latency_ms.p95
        ));
        let calls: Vec<String> = self
            .model_calls
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect();
        if calls.is_empty() && self.mode == "kafka" {
            out.push_str("model calls: not counted (the worker does not publish them)\n");
        } else {
            out.push_str(&format!("model calls: {}\n", calls.join(", ")));
        }
        for c in played.iter().filter(|c| !c.strict_ok()) {
            out.push_str(&transcript(c));
        }
        out
    }
}

/// A failed conversation turn by turn; `✗` marks the turns whose main expectation failed.
fn transcript(c: &PlayedConversation<'_>) -> String {
    let conv = c.conversation;
    let mut out = format!(
        "\nFAILED {} ({} line {}, {}, session {})\n",
        conv.id,
        conv.file,
        conv.line,
        conv.locale.tag(),
        c.session_id
    );
    for (i, (expected, t)) in conv.turns.iter().zip(&c.turns).enumerate() {
        let mark = match (&t.strict_failure, t.lenient_ok) {
            (None, _) => "  ",
            (Some(_), true) => "~ ",
            (Some(_), false) => "✗ ",
        };
        out.push_str(&format!(
            "{mark}{}. {} → {}\n",
            i + 1,
            t.user,
            one_line(&t.reply)
        ));
        out.push_str(&turn_detail(&expected.expect, t));
    }
    out
}

fn turn_detail(expected: &Expectation, t: &PlayedTurn) -> String {
    let events = if t.events.is_empty() {
        "none".to_owned()
    } else {
        t.events.join(", ")
    };
    let mut out = format!(
        "     events: {events}; judged {} vs expected {}\n",
        describe(
            t.observed.outcome,
            t.observed.tool.as_deref(),
            &t.observed.args
        ),
        describe(expected.outcome, expected.tool.as_deref(), &expected.args)
    );
    if let Some(why) = &t.strict_failure {
        let lenient = if t.lenient_ok {
            " (an accepted alternative holds)"
        } else {
            ""
        };
        out.push_str(&format!("     why: {why}{lenient}\n"));
        if !t.decisions.is_empty() {
            out.push_str(&format!("     decided: {}\n", t.decisions.join(" · ")));
        }
    }
    for f in &t.findings {
        out.push_str(&format!("     UNSAFE {}: {}\n", f.kind.as_str(), f.detail));
    }
    out
}

fn describe(
    class: OutcomeClass,
    tool: Option<&str>,
    args: &BTreeMap<String, serde_json::Value>,
) -> String {
    match tool {
        None => class.as_str().to_owned(),
        Some(t) if args.is_empty() => format!("{class} {t}"),
        Some(t) => format!("{class} {t} ({})", show_args(args)),
    }
}

fn one_line(reply: &str) -> String {
    if reply.is_empty() {
        "(no reply)".to_owned()
    } else {
        reply.replace('\n', " ⏎ ")
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::domain::locale::Locale;
    use crate::domain::turn::TurnInput;
    use crate::eval::conversations::format::{Conversation, ConversationTurn};
    use crate::eval::conversations::judge::{Finding, Observed};
    use crate::eval::conversations::Floors;

    #[test]
    fn wilson_interval_matches_known_values() {
        let close = |(lo, hi): (f64, f64), (elo, ehi): (f64, f64)| {
            assert!(
                (lo - elo).abs() < 5e-4 && (hi - ehi).abs() < 5e-4,
                "({lo}, {hi}) vs ({elo}, {ehi})"
            );
        };
        close(wilson95(5, 10), (0.2366, 0.7634));
        close(wilson95(0, 10), (0.0, 0.2775));
        close(wilson95(10, 10), (0.7225, 1.0));
        close(wilson95(81, 263), (0.2553, 0.3662));
        assert_eq!(wilson95(0, 0), (0.0, 1.0));
    }

    fn conversation(id: &str, locale: Locale, expected: &[OutcomeClass]) -> Conversation {
        Conversation {
            id: id.into(),
            file: "set.jsonl".into(),
            line: 1,
            locale,
            agent: "retail-bot".into(),
            tenant: "t1".into(),
            turns: expected
                .iter()
                .map(|c| ConversationTurn {
                    input: TurnInput::Text("hi".into()),
                    expect: Expectation::of(*c),
                    accept: Vec::new(),
                })
                .collect(),
        }
    }

    fn played_turn(
        actual: OutcomeClass,
        strict_ok: bool,
        lenient_ok: bool,
        unsafe_kinds: &[UnsafeKind],
    ) -> PlayedTurn {
        PlayedTurn {
            user: "hi".into(),
            reply: "a reply".into(),
            events: Vec::new(),
            observed: Observed {
                outcome: actual,
                tool: None,
                param: None,
                args: BTreeMap::new(),
            },
            strict_failure: (!strict_ok).then(|| "why".to_owned()),
            lenient_ok,
            findings: unsafe_kinds
                .iter()
                .map(|k| Finding {
                    kind: *k,
                    detail: "detail".into(),
                })
                .collect(),
            latency_ms: 10.0,
            decisions: Vec::new(),
            error: None,
        }
    }

    /// Two conversations: `a` (en) right throughout; `b` (pt-BR) with a turn right only by an
    /// alternative and a turn with two unsafe findings.
    fn sample() -> [Conversation; 2] {
        use OutcomeClass as C;
        [
            conversation("a", Locale::En, &[C::AsksParameter, C::Executed]),
            conversation("b", Locale::PtBr, &[C::AsksParameter, C::Handoff]),
        ]
    }

    fn play(sample: &[Conversation; 2]) -> Vec<PlayedConversation<'_>> {
        use OutcomeClass as C;
        let [a, b] = sample;
        vec![
            PlayedConversation {
                conversation: a,
                session_id: "s1".into(),
                turns: vec![
                    played_turn(C::AsksParameter, true, true, &[]),
                    played_turn(C::Executed, true, true, &[]),
                ],
            },
            PlayedConversation {
                conversation: b,
                session_id: "s2".into(),
                turns: vec![
                    played_turn(C::OutOfScopeOrClarify, false, true, &[]),
                    played_turn(
                        C::End,
                        false,
                        false,
                        &[UnsafeKind::UnrequestedEnd, UnsafeKind::DroppedTransaction],
                    ),
                ],
            },
        ]
    }

    #[test]
    fn figures_strict_lenient_by_locale_and_by_outcome() {
        let sample = sample();
        let played = play(&sample);
        let report = Report::new("all", &played, BTreeMap::from([("router".to_owned(), 3)]));
        let f = &report.figures;
        assert_eq!((f.conversations, f.turns), (2, 4));
        assert_eq!(
            (f.turn_accuracy.strict, f.turn_accuracy.lenient),
            (0.5, 0.75)
        );
        assert_eq!(
            (
                f.conversation_success.strict,
                f.conversation_success.lenient
            ),
            (0.5, 0.5)
        );
        assert_eq!(report.by_locale["pt-BR"].turn_accuracy.strict, 0.0);
        assert_eq!(report.by_locale["en"].conversation_success.strict, 1.0);
        let asks = &report.by_outcome["asks_parameter"];
        assert_eq!(
            (asks.expected, asks.actual, asks.precision, asks.recall),
            (2, 1, Some(1.0), Some(0.5))
        );
        let end = &report.by_outcome["end"];
        assert_eq!(
            (end.expected, end.actual, end.precision, end.recall),
            (0, 1, Some(0.0), None)
        );
        assert_eq!(report.unsafe_list.len(), 2);
        assert_eq!(
            report.unsafe_turns, 1,
            "two findings of one turn are one unsafe turn"
        );
        assert_eq!(
            (
                report.unsafe_list[0].conversation.as_str(),
                report.unsafe_list[0].turn
            ),
            ("b", 2)
        );
        assert_eq!(report.failures.len(), 2);
        assert_eq!(
            (
                report.failures[0].id.as_str(),
                report.failures[0].turn,
                report.failures[0].lenient_ok
            ),
            ("b", 1, true)
        );
        let json = serde_json::to_value(&report).expect("json");
        assert_eq!(json["turn_accuracy"]["strict"], json!(0.5));
        assert_eq!(json["conversations"], json!(2));
        assert_eq!(json["unsafe"][0]["kind"], json!("unrequested_end"));
        assert_eq!(json["latency_ms"]["mean"], json!(10.0));
        assert!(json["turn_accuracy"]["ci95"].is_array());
    }

    #[test]
    fn text_transcripts_of_failed_conversations_and_unmet_floors() {
        let sample = sample();
        let played = play(&sample);
        let report = Report::new("all", &played, BTreeMap::new());
        let text = report.render(&played);
        assert!(
            text.contains("FAILED b") && !text.contains("FAILED a"),
            "{text}"
        );
        assert!(
            text.contains("✗ 2. hi → a reply") && text.contains("~ 1. hi"),
            "{text}"
        );
        let floors = Floors {
            min_turn_accuracy: Some(0.5),
            min_conversation_success: Some(0.6),
            max_unsafe: Some(0),
        };
        let unmet = floors.unmet(&report);
        assert_eq!(unmet.len(), 2, "{unmet:?}");
        assert!(
            unmet[0].contains("--min-conversation-success 0.6")
                && unmet[1].contains("--max-unsafe 0")
        );
        assert!(Floors::default().unmet(&report).is_empty());
    }
}
