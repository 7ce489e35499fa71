//! MG-4a (ids as customers type them) and MG-6 (correction forms) in `extract_clear_with`, on
//! the example domain's order, CEP and house number parameters.

use super::*;
use crate::domain::locale::Locale;
use serde_json::{json, Value};

struct Domain {
    order_id: ParameterKind,
    zip_code: ParameterKind,
    house_number: ParameterKind,
    order_labels: Vec<String>,
    zip_labels: Vec<String>,
    house_labels: Vec<String>,
}

fn domain() -> Domain {
    let strings = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    Domain {
        order_id: ParameterKind::Id {
            pattern: IdPattern::new("PED-[0-9]{4,}").expect("valid pattern"),
        },
        zip_code: ParameterKind::Cep,
        house_number: ParameterKind::Integer {
            min: Some(1),
            max: Some(99999),
        },
        order_labels: strings(&["order number", "número do pedido", "order", "pedido"]),
        zip_labels: strings(&["zip", "zip code", "cep"]),
        house_labels: strings(&["house number", "número da casa", "number", "número"]),
    }
}

/// The values read, as (name, value), with `asked` and corrections on or off.
fn read(text: &str, asked: Option<&str>, correction: bool) -> Vec<(String, Value)> {
    read_holding(text, asked, correction, None)
}

/// [`read`] with the values held now.
fn read_holding(
    text: &str,
    asked: Option<&str>,
    correction: bool,
    held: Option<&std::collections::BTreeMap<String, Value>>,
) -> Vec<(String, Value)> {
    let d = domain();
    let params = [
        LabelledParameter {
            name: "order_id",
            kind: &d.order_id,
            labels: &d.order_labels,
        },
        LabelledParameter {
            name: "zip_code",
            kind: &d.zip_code,
            labels: &d.zip_labels,
        },
        LabelledParameter {
            name: "house_number",
            kind: &d.house_number,
            labels: &d.house_labels,
        },
    ];
    let options = ClearOptions {
        asked,
        correction,
        held,
    };
    extract_clear_with(&params, text, Locale::En, options)
        .values
        .into_iter()
        .map(|v| (v.name, v.value))
        .collect()
}

fn one(name: &str, value: Value) -> Vec<(String, Value)> {
    vec![(name.to_string(), value)]
}

// MG-4a: the prefix in any case, with a space, another separator or none, is distinctive.
#[test]
fn mg4a_prefixed_ids_as_typed_are_distinctive_and_canonical() {
    for text in [
        "ped 1001",
        "Ped1001",
        "PED_1001",
        "ped.1001",
        "ped/1001",
        "PED#1001",
        "my order is ped 1001, I called twice",
    ] {
        assert_eq!(
            read(text, None, false),
            one("order_id", json!("PED-1001")),
            "{text}"
        );
    }
}

// MG-4a: `speed 1001` or `pedido1001` is not the prefix; the bare rest needs a reason.
// MG-4a: digits dictated in groups after the prefix (`ped 35 92 47`) are one id.
#[test]
fn mg4a_grouped_digits_after_the_prefix_are_one_id() {
    assert_eq!(
        read("ped 35 92 47", None, false),
        one("order_id", json!("PED-359247"))
    );
    assert_eq!(
        read(
            "o meu pedido ped 356 880 que até agora não chegou",
            None,
            false
        ),
        one("order_id", json!("PED-356880"))
    );
    // A whole id first stays whole; what follows it is another value.
    assert_eq!(
        read("ped 1001", None, false),
        one("order_id", json!("PED-1001"))
    );
    // Too few digits together is still a near-miss, explained.
    assert!(read("ped 3 5", None, false)
        .iter()
        .all(|(name, _)| name != "order_id"));
}

// MG-4a: the plain form dictated in groups (`pedido 382 406`) is one plain id: it fills the
// order number when asked for or after its label, never a part of a money literal.
#[test]
fn mg4a_grouped_digits_of_the_plain_form_are_one_id() {
    assert_eq!(
        read("agora o rastreio pedido 382 406", None, false),
        one("order_id", json!("PED-382406"))
    );
    assert_eq!(
        read("11 427", Some("order_id"), false),
        one("order_id", json!("PED-11427"))
    );
    // Too few digits together stays a near-miss.
    assert!(read("pedido 3 5", None, false)
        .iter()
        .all(|(name, _)| name != "order_id"));
    assert!(read("R$ 1 500", Some("order_id"), false)
        .iter()
        .all(|(name, _)| name != "order_id"));
}

// PR-1: coming back with the value looked up (`achei:`, `found it,`) is filler around it.
#[test]
fn found_it_before_the_values_is_filler() {
    let mut both = read("achei: 04538 133, numero 77", Some("zip_code"), false);
    both.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        both,
        vec![
            ("house_number".to_string(), json!(77)),
            ("zip_code".to_string(), json!("04538-133")),
        ]
    );
    assert_eq!(
        read("found it: 04538 133", Some("zip_code"), false),
        one("zip_code", json!("04538-133"))
    );
}

#[test]
fn mg4a_prefix_inside_a_word_is_not_an_id() {
    assert!(read("speed 1001 km and more", None, false).is_empty());
}

// MG-4a: the rest alone fills the parameter the last reply asked for, or after its label.
#[test]
fn mg4a_plain_form_fills_the_asked_parameter_or_after_its_label() {
    assert_eq!(
        read("1001", Some("order_id"), false),
        one("order_id", json!("PED-1001"))
    );
    assert_eq!(
        read("it's 1001 please", Some("order_id"), false),
        one("order_id", json!("PED-1001"))
    );
    assert_eq!(
        read("pedido 1001", None, false),
        one("order_id", json!("PED-1001"))
    );
    // Not asked for: the integer parameter that reads it takes it.
    assert_eq!(
        read("1001", Some("house_number"), false),
        one("house_number", json!(1001))
    );
    // Inside another sentence a plain form fills nothing (PR-1).
    assert!(read("I called 1001 times", Some("order_id"), false).is_empty());
    // A label typed with one letter dropped still names (five letters or more left).
    assert_eq!(
        read("pedio 1001", None, false),
        one("order_id", json!("PED-1001"))
    );
    assert!(read("pedi 1001", None, false)
        .iter()
        .all(|(name, _)| name != "order_id"));
}

// MG-6: correction forms with the new value, and the old one after a negation set aside.
#[test]
fn mg6_correction_forms_read_the_new_value() {
    for (text, value) in [
        ("make that 15, not 150", 15),
        ("not 150, 15", 15),
        ("I meant 45", 45),
        ("hmm, make it 210 instead", 210),
        ("actually 46", 46),
        ("wait, the number is 46, not 45", 46),
        ("yes, but the number is 210", 210),
        ("não é 20, é 22", 22),
        ("é 22, não 20", 22),
        ("na verdade 22", 22),
        ("quis dizer 22", 22),
    ] {
        assert_eq!(
            read(text, None, true),
            one("house_number", json!(value)),
            "{text}"
        );
    }
}

// MG-6: pt-BR texting writes `não` as `n`; in English `n` negates nothing.
#[test]
fn mg6_a_texted_negation_sets_the_old_value_aside_in_pt_br() {
    let d = domain();
    let params = [LabelledParameter {
        name: "house_number",
        kind: &d.house_number,
        labels: &d.house_labels,
    }];
    let options = ClearOptions {
        asked: None,
        correction: true,
        held: None,
    };
    let got = extract_clear_with(&params, "n é 45, é 450", Locale::PtBr, options);
    assert_eq!(got.value("house_number"), Some(&json!(450)));
    let got = extract_clear_with(&params, "n é 45, é 450", Locale::En, options);
    assert_eq!(got.value("house_number"), None);
}

// MG-6: without correction mode, the same messages are not clear (two numbers, markers).
#[test]
fn mg6_correction_forms_need_correction_mode() {
    assert!(read("make that 15, not 150", None, false).is_empty());
    assert!(read("não é 20, é 22", None, false).is_empty());
}

// MG-6 + MG-4a: in a correction an id's plain form fills the id when nothing else reads it.
#[test]
fn mg6_plain_id_in_a_correction_when_no_other_parameter_reads_it() {
    assert_eq!(
        read("oops, I meant PED-7102", None, true),
        one("order_id", json!("PED-7102"))
    );
    // 1002 is also a valid house number: not clear for the id without its label or the ask.
    assert_eq!(
        read("I meant 1002", None, true),
        one("house_number", json!(1002))
    );
    assert_eq!(
        read("I meant order 1002", None, true),
        one("order_id", json!("PED-1002"))
    );
}

// PR-1 still holds in correction mode: a number inside another request fills nothing.
#[test]
fn mg6_correction_mode_keeps_unrelated_sentences_unclear() {
    assert!(read("let me talk to a human, I have called 3 times", None, true).is_empty());
    assert!(read("no, I don't want 45 of them", None, true).is_empty());
}

// MG-6: a negation marks the old value only when it is the value held: typed without a comma,
// `wait no PED-1178` while PED-1187 is shown answers no and gives the new id, while `not
// PED-1187, PED-1178` still sets the held one aside.
#[test]
fn mg6_a_negated_value_that_is_not_held_is_the_new_one() {
    let held: std::collections::BTreeMap<String, Value> = [
        ("order_id".to_string(), json!("PED-1187")),
        ("house_number".to_string(), json!(402)),
    ]
    .into_iter()
    .collect();
    let at = |text: &str| read_holding(text, None, true, Some(&held));
    assert_eq!(at("wait no PED-1178"), one("order_id", json!("PED-1178")));
    assert_eq!(at("no PED-1178 sorry"), one("order_id", json!("PED-1178")));
    assert_eq!(
        at("not PED-1187, PED-1178"),
        one("order_id", json!("PED-1178"))
    );
    assert_eq!(at("não é 402, é 420"), one("house_number", json!(420)));
    assert_eq!(at("not 402"), vec![]);
    // `22` is also an invalid order id: that reading says nothing about what is held.
    assert_eq!(at("opa não 420"), one("house_number", json!(420)));
    // Beside another value for the same parameter, a negated one is an older value still.
    assert_eq!(
        at("não é PED-1001, é PED-2002"),
        one("order_id", json!("PED-2002"))
    );
    // Without what is held, the old reading stands: a negated value is the old one.
    assert_eq!(read("wait no PED-1178", None, true), vec![]);
}

// MG-6: `no it's 420 not 402` while 402 is held: the held value is the old one, so the other
// is the new one though a `no` stands before it with no comma (both were set aside before).
#[test]
fn mg6_beside_the_held_value_the_other_is_the_new_one() {
    let held: std::collections::BTreeMap<String, Value> =
        [("house_number".to_string(), json!(402))]
            .into_iter()
            .collect();
    let at = |text: &str| read_holding(text, None, true, Some(&held));
    assert_eq!(at("no it's 420 not 402"), one("house_number", json!(420)));
    assert_eq!(
        at("wait no it's 420 not 402 lol"),
        one("house_number", json!(420))
    );
    assert_eq!(at("não é 402 é 420"), one("house_number", json!(420)));
    // Neither held: both negated values are old ones, nothing new is read.
    assert_eq!(at("no it's 420 not 421"), vec![]);
}

// MG-6: `after all` / `afinal` say the customer went back on a value: `no sorry it was 5 after
// all` while 50 is held corrects to 5.
#[test]
fn mg6_after_all_marks_a_correction() {
    let held: std::collections::BTreeMap<String, Value> = [("house_number".to_string(), json!(50))]
        .into_iter()
        .collect();
    let at = |text: &str| read_holding(text, None, true, Some(&held));
    assert_eq!(
        at("no sorry it was 5 after all"),
        one("house_number", json!(5))
    );
    assert_eq!(at("afinal é 5 mesmo"), one("house_number", json!(5)));
    assert_eq!(at("não, afinal era 5"), one("house_number", json!(5)));
}

// MG-6: the confirming verb, `na vdd` and laughter stand around a correction as `yes`, `na
// verdade` and `sorry` do.
#[test]
fn mg6_confirming_verb_abbreviations_and_laughter_around_a_correction() {
    assert_eq!(
        read(
            "confirmo sim mas o número é 420, digitei errado",
            None,
            true
        ),
        one("house_number", json!(420))
    );
    assert_eq!(
        read("confirmed but the house number is 420", None, true),
        one("house_number", json!(420))
    );
    assert_eq!(
        read("na vdd é 420", None, true),
        one("house_number", json!(420))
    );
    assert_eq!(
        read("it's 420 haha", None, true),
        one("house_number", json!(420))
    );
    assert_eq!(
        read("é 420 kkkk", None, true),
        one("house_number", json!(420))
    );
    // Laughter is no value's label: alone it reads nothing.
    assert_eq!(read("kkkk", None, true), vec![]);
}

// MG-6: `except` introduces the correction in an affirm-and-correct.
#[test]
fn mg6_except_introduces_a_correction() {
    assert_eq!(
        read(
            "yep, except the house number should be 420, sorry",
            None,
            true
        ),
        one("house_number", json!(420))
    );
    assert_eq!(
        read("sim, exceto o número da casa, é 420", None, true),
        one("house_number", json!(420))
    );
}

// MG-6 inside one message: the value restated after a take-back word wins, in a first message
// (no correction pending) as in a correction, and the taken-back value leaves nothing unread.
#[test]
fn mg6_a_value_restated_in_the_same_message_replaces_the_one_before() {
    for (text, asked, correction, name, value) in [
        (
            "cancel my order PED-72644 please, er, I mean PED-72646",
            None,
            false,
            "order_id",
            json!("PED-72646"),
        ),
        (
            "onde tá meu pedido PED-75630? quer dizer, PED-75603",
            None,
            false,
            "order_id",
            json!("PED-75603"),
        ),
        (
            "PED-1001, sorry, PED-2002, no wait, PED-3003",
            None,
            false,
            "order_id",
            json!("PED-3003"),
        ),
        (
            "number 15, no sorry, 51",
            Some("house_number"),
            false,
            "house_number",
            json!(51),
        ),
        (
            "15 digo 51",
            Some("house_number"),
            false,
            "house_number",
            json!(51),
        ),
        (
            "PED-1001, no, PED-2002",
            None,
            false,
            "order_id",
            json!("PED-2002"),
        ),
    ] {
        assert_eq!(read(text, asked, correction), one(name, value), "{text}");
    }
}

// MG-6: a second value that adds, or a negated one, is no restatement: the first reading stands
// (`PED-1001 not PED-2002` negates the second; `and also` adds one).
#[test]
fn mg6_an_added_or_negated_second_value_restates_nothing() {
    for text in [
        "track PED-1001 and also PED-2002",
        "PED-1001 not PED-2002",
        "PED-1001 sorry to bother you but I also ordered PED-2002 last week",
    ] {
        assert_eq!(
            read(text, None, false),
            one("order_id", json!("PED-1001")),
            "{text}"
        );
    }
    // `no` is also the Portuguese `in the`: nothing is taken back.
    assert_eq!(
        read(
            "entregar o pedido PED-1001 no CEP 01310-100, número 120",
            None,
            false
        ),
        vec![
            ("order_id".to_string(), json!("PED-1001")),
            ("zip_code".to_string(), json!("01310-100")),
            ("house_number".to_string(), json!(120)),
        ]
    );
}

// MG-6: negating the held value makes the other reading of that parameter the correction,
// whatever else the message says; a question, or no negated held value, corrects nothing.
#[test]
fn mg6_negating_the_held_value_corrects_it_inside_a_longer_message() {
    let held: std::collections::BTreeMap<String, Value> =
        [("house_number".to_string(), json!(150))]
            .into_iter()
            .collect();
    let at = |text: &str| read_holding(text, None, true, Some(&held));
    assert_eq!(
        at("hmm wait, looking at it again it was 105, not 150"),
        one("house_number", json!(105))
    );
    assert_eq!(at("looking at it again it was 105"), vec![]);
    assert_eq!(at("looking at it again was it 105, not 150?"), vec![]);
    // A spaced dash parts clauses: the correction's clause is only the correction.
    assert_eq!(
        read("Terribly sorry, I misread it - it's 105", None, true),
        one("house_number", json!(105))
    );
}

// PR-1: the verbs customers hand a value over with, and `then`, are filler.
#[test]
fn pr1_a_value_handed_over_with_put_or_coloca_fills_the_asked_parameter() {
    for (text, value) in [
        ("righto, put 1 then", 1),
        ("coloca 12 então", 12),
        ("bota 7", 7),
    ] {
        assert_eq!(
            read(text, Some("house_number"), false),
            one("house_number", json!(value)),
            "{text}"
        );
    }
}
