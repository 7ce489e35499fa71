//! PR-1 "clearly fills" (`extract_clear`) on the example domain's parameters
//! (`config/agents.example.yaml`), and its MG-4 readings.

use super::filler::{all_filler, is_filler, FILLER_LISTS};
use super::text::{fold, phrase};
use super::*;
use crate::domain::locale::Locale;
use proptest::prelude::*;
use serde_json::{json, Value};

/// The example domain's parameters, with the labels the engine passes (the name is added by
/// the reader itself).
struct Domain {
    order_id: ParameterKind,
    zip_code: ParameterKind,
    house_number: ParameterKind,
    subject: ParameterKind,
    amount: ParameterKind,
    order_labels: Vec<String>,
    zip_labels: Vec<String>,
    house_labels: Vec<String>,
    subject_labels: Vec<String>,
    amount_labels: Vec<String>,
}

fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn domain() -> Domain {
    Domain {
        order_id: ParameterKind::Id {
            pattern: IdPattern::new("PED-[0-9]{4,}").expect("valid pattern"),
        },
        zip_code: ParameterKind::Cep,
        house_number: ParameterKind::Integer {
            min: Some(1),
            max: Some(99999),
        },
        subject: ParameterKind::Text { max_len: 200 },
        amount: ParameterKind::Money,
        order_labels: strings(&["order number", "número do pedido"]),
        zip_labels: strings(&["ZIP code (CEP)", "CEP"]),
        house_labels: strings(&["house number", "número da casa"]),
        subject_labels: strings(&["reason for the contestation", "motivo da contestação"]),
        amount_labels: strings(&["amount", "valor"]),
    }
}

impl Domain {
    fn param(&self, name: &str) -> LabelledParameter<'_> {
        let (kind, labels) = match name {
            "order_id" => (&self.order_id, &self.order_labels),
            "zip_code" => (&self.zip_code, &self.zip_labels),
            "house_number" => (&self.house_number, &self.house_labels),
            "subject" => (&self.subject, &self.subject_labels),
            _ => (&self.amount, &self.amount_labels),
        };
        LabelledParameter {
            name: match name {
                "order_id" => "order_id",
                "zip_code" => "zip_code",
                "house_number" => "house_number",
                "subject" => "subject",
                _ => "amount",
            },
            kind,
            labels,
        }
    }

    fn params(&self, names: &[&str]) -> Vec<LabelledParameter<'_>> {
        names.iter().map(|n| self.param(n)).collect()
    }

    /// Every parameter of the example domain.
    fn all(&self) -> Vec<LabelledParameter<'_>> {
        self.params(&["order_id", "zip_code", "house_number", "subject", "amount"])
    }
}

fn clear(d: &Domain, names: &[&str], text: &str, locale: Locale) -> Extraction {
    extract_clear(&d.params(names), text, locale)
}

fn values(got: &Extraction) -> Vec<(&str, &Value)> {
    got.values
        .iter()
        .map(|e| (e.name.as_str(), &e.value))
        .collect()
}

// --- plain numbers inside other sentences fill nothing ----------------------------------------

#[test]
fn a_plain_number_inside_a_sentence_fills_nothing() {
    // PR-1: `let me talk to a human, I have called 3 times` while amount / house_number is
    // pending is not an answer; the turn goes on to the classifier.
    let d = domain();
    for (text, locale) in [
        (
            "let me talk to a human, I have called 3 times already",
            Locale::En,
        ),
        ("let me talk to a human, I have called 3 times", Locale::En),
        (
            "quero falar com um atendente, já liguei 3 vezes",
            Locale::PtBr,
        ),
        ("I need 2 more days", Locale::En),
        ("não é 45", Locale::PtBr),
    ] {
        for pending in [
            &["amount"][..],
            &["house_number"],
            &["zip_code", "house_number"],
        ] {
            let got = clear(&d, pending, text, locale);
            assert_eq!(got, Extraction::default(), "{text} with {pending:?}");
        }
        let got = extract_clear(&d.all(), text, locale);
        assert_eq!(got, Extraction::default(), "{text} with every parameter");
    }
    // The liberal reader still reads them (MG-5 uses it), which is what PR-1 must not do.
    let got = extract(
        &[("house_number", &d.house_number)],
        "quero falar com um atendente, já liguei 3 vezes",
        Locale::PtBr,
    );
    assert_eq!(got.value("house_number"), Some(&json!(3)));
}

#[test]
fn a_label_qualified_as_new_still_introduces_its_value() {
    // PR-1: `o cep novo é 04538133` — an undashed CEP needs its label; `novo` between them
    // does not hide it.
    let d = domain();
    for (text, locale) in [
        (
            "queria mudar o endereço do pedido PED-64107 o cep novo é 04538133 e o número é 250 obrigado",
            Locale::PtBr,
        ),
        ("the new zip code is 04538133, number 250", Locale::En),
    ] {
        let got = extract_clear(&d.all(), text, locale);
        assert_eq!(got.value("zip_code"), Some(&json!("04538-133")), "{text}");
        assert_eq!(got.value("house_number"), Some(&json!(250)), "{text}");
    }
    // A word that is not a qualifier still breaks the label (`o cep da minha mãe é …`).
    let got = extract_clear(&d.all(), "o cep da loja velha era 04538133", Locale::PtBr);
    assert_eq!(got.value("zip_code"), None);
}

#[test]
fn a_distinctive_value_fills_anywhere_but_an_unrelated_number_does_not() {
    // PR-1: `PED-1001, I called 3 times` fills order_id only.
    let d = domain();
    let all = d.all();
    for (text, locale) in [
        ("PED-1001, I called 3 times", Locale::En),
        ("I called 3 times about PED-1001", Locale::En),
        ("PED-1001, já liguei 3 vezes", Locale::PtBr),
        ("ped-1001, já liguei 3 vezes", Locale::PtBr),
    ] {
        let got = extract_clear(&all, text, locale);
        assert_eq!(
            values(&got),
            vec![("order_id", &json!("PED-1001"))],
            "{text}"
        );
        assert!(got.rejected.is_empty(), "{text}");
    }
    let got = extract_clear(&all, "entrega no 01310-100, liguei 3 vezes", Locale::PtBr);
    assert_eq!(values(&got), vec![("zip_code", &json!("01310-100"))]);
    let got = extract_clear(&all, "cep 01.310-100 por favor", Locale::PtBr);
    assert_eq!(values(&got), vec![("zip_code", &json!("01310-100"))]);
    // A value put in question is not the one given when another is.
    let got = extract_clear(
        &all,
        "R$ 80?? não, quero contestar a cobrança de 45,50",
        Locale::PtBr,
    );
    assert_eq!(values(&got), vec![("amount", &json!("45.50"))]);
    let got = extract_clear(&all, "is it PED-1001? it should be PED-2002", Locale::En);
    assert_eq!(values(&got), vec![("order_id", &json!("PED-2002"))]);
    // A spaced CEP is as distinctive as a dashed one: words around it do not hide it.
    let got = extract_clear(&all, "new one is 70040 010, block B", Locale::En);
    assert_eq!(values(&got), vec![("zip_code", &json!("70040-010"))]);
    // A spaced CEP and a labelled number in capitals: both read, the CEP's digits not the number.
    let got = extract_clear(&all, "CEP 40140 110 NUMERO 33", Locale::PtBr);
    assert_eq!(
        values(&got),
        vec![
            ("zip_code", &json!("40140-110")),
            ("house_number", &json!(33))
        ]
    );
    // Inside another sentence with no label, as the undashed form: no CEP.
    let got = extract_clear(&all, "liguei 12310 100 vezes pra vocês", Locale::PtBr);
    assert!(values(&got).iter().all(|(n, _)| *n != "zip_code"));
    for (text, locale) in [
        (
            "I was charged R$ 71,99 twice, 3 times this year",
            Locale::En,
        ),
        ("me cobraram 71,99 reais 2 vezes", Locale::PtBr),
        ("they took $71.99 from me 2 times", Locale::En),
    ] {
        let got = extract_clear(&all, text, locale);
        assert_eq!(values(&got), vec![("amount", &json!("71.99"))], "{text}");
    }
}

// --- plain values alone or with filler ----------------------------------------------------------

#[test]
fn a_plain_value_with_only_filler_around_fills() {
    // PR-1 (a): `45`, `it's 45`, `45, please`, `71.99`.
    let d = domain();
    for (text, locale) in [
        ("45", Locale::En),
        ("it's 45", Locale::En),
        ("it’s 45", Locale::En),
        ("45, please", Locale::En),
        ("45, thanks!", Locale::En),
        ("sorry, it is 45", Locale::En),
        ("ok, 45", Locale::En),
        ("é 45", Locale::PtBr),
        ("45, por favor", Locale::PtBr),
        ("é o 45, obrigado", Locale::PtBr),
        ("sim, é 45", Locale::PtBr),
        ("na verdade é 45", Locale::PtBr),
        // Hedged: still the answer.
        ("I think it's 45", Locale::En),
        ("acho que é 45", Locale::PtBr),
    ] {
        let got = clear(&d, &["house_number"], text, locale);
        assert_eq!(got.value("house_number"), Some(&json!(45)), "{text}");
        let got = extract_clear(&d.all(), text, locale);
        assert_eq!(
            values(&got),
            vec![("house_number", &json!(45))],
            "{text} with every parameter"
        );
    }
    for (text, locale, canonical) in [
        ("71.99", Locale::En, "71.99"),
        ("it's 71.99", Locale::En, "71.99"),
        ("71,99", Locale::PtBr, "71.99"),
        ("é 1.234,56, obrigado", Locale::PtBr, "1234.56"),
        ("50", Locale::En, "50.00"),
    ] {
        let got = clear(&d, &["amount"], text, locale);
        assert_eq!(got.value("amount"), Some(&json!(canonical)), "{text}");
    }
    for text in ["01310100", "é 01310100", "01310100, por favor"] {
        let got = clear(&d, &["zip_code", "house_number"], text, Locale::PtBr);
        assert_eq!(
            values(&got),
            vec![("zip_code", &json!("01310-100"))],
            "{text}"
        );
    }
}

#[test]
fn several_values_fill_when_the_rest_is_filler() {
    // PR-1: `01310-100, 45` fills both when a CEP and an integer are asked.
    let d = domain();
    let pending = ["zip_code", "house_number"];
    for (text, locale) in [
        ("01310-100, 45", Locale::En),
        ("01310-100 and 45", Locale::En),
        ("01310-100 e 45", Locale::PtBr),
        ("é 01310-100 e o número é 45", Locale::PtBr),
        ("my zip is 01310-100 and the number is 45", Locale::En),
        ("meu cep é 01310-100 e o número é 45", Locale::PtBr),
        ("the number is 45 and my zip is 01310100", Locale::En),
    ] {
        let got = clear(&d, &pending, text, locale);
        assert_eq!(
            values(&got),
            vec![
                ("zip_code", &json!("01310-100")),
                ("house_number", &json!(45))
            ],
            "{text}"
        );
    }
    // The house number next to an unrelated number is not clear; the CEP still is.
    let got = clear(&d, &pending, "01310-100, 45, liguei 3 vezes", Locale::PtBr);
    assert_eq!(values(&got), vec![("zip_code", &json!("01310-100"))]);
    // Two numbers for one integer parameter: which one is meant is not clear.
    let got = clear(&d, &["house_number"], "45 and 10", Locale::En);
    assert_eq!(got, Extraction::default());
    // Two integer parameters take them in message order (MG-5).
    let adults = ParameterKind::Integer {
        min: None,
        max: None,
    };
    let children = adults.clone();
    let params = [
        LabelledParameter {
            name: "adults",
            kind: &adults,
            labels: &[],
        },
        LabelledParameter {
            name: "children",
            kind: &children,
            labels: &[],
        },
    ];
    let got = extract_clear(&params, "45 and 10", Locale::En);
    assert_eq!(
        values(&got),
        vec![("adults", &json!(45)), ("children", &json!(10))]
    );
    let got = extract_clear(&params, "children 2, adults 3", Locale::En);
    assert_eq!(
        values(&got),
        vec![("adults", &json!(3)), ("children", &json!(2))],
        "labels beat message order"
    );
}

// --- label-introduced values ------------------------------------------------------------------

#[test]
fn a_label_introduces_a_plain_value_even_in_a_longer_sentence() {
    // PR-1 (b): `number 45`, `the number is 45`, `o número é 45`, `number: 45`.
    let d = domain();
    for (text, locale) in [
        ("number 45", Locale::En),
        ("the number is 45", Locale::En),
        ("number: 45", Locale::En),
        ("house number 45", Locale::En),
        ("my house number is 45", Locale::En),
        ("HOUSE NUMBER IS 45", Locale::En),
        ("o número é 45", Locale::PtBr),
        ("o numero e 45", Locale::PtBr),
        ("o número da casa é 45", Locale::PtBr),
        ("I called 3 times, the number is 45", Locale::En),
        ("já liguei 3 vezes, o número é 45", Locale::PtBr),
        ("sorry, I moved, the new house number is 45", Locale::En),
    ] {
        let got = clear(&d, &["house_number"], text, locale);
        assert_eq!(values(&got), vec![("house_number", &json!(45))], "{text}");
        let got = extract_clear(&d.all(), text, locale);
        assert_eq!(
            values(&got),
            vec![("house_number", &json!(45))],
            "{text} with every parameter"
        );
    }
}

#[test]
fn a_label_introduces_each_plain_type() {
    // PR-1 (b) for CEP without dash, money without marker, date, number, enum.
    let d = domain();
    for (text, locale) in [
        ("my zip is 01310100", Locale::En),
        ("zip code: 01310100", Locale::En),
        ("I told you twice, the CEP is 01310100", Locale::En),
        ("meu cep é 01310100, já falei 2 vezes", Locale::PtBr),
    ] {
        let got = extract_clear(&d.all(), text, locale);
        assert_eq!(
            values(&got),
            vec![("zip_code", &json!("01310-100"))],
            "{text}"
        );
    }
    for (text, locale) in [
        ("I called twice, the amount is 71.99", Locale::En),
        ("liguei 2 vezes, o valor é 71,99", Locale::PtBr),
        ("amount: 1 234,56", Locale::PtBr),
    ] {
        let got = extract_clear(&d.all(), text, locale);
        let want = if text.contains("1 234") {
            "1234.56"
        } else {
            "71.99"
        };
        assert_eq!(values(&got), vec![("amount", &json!(want))], "{text}");
    }
    // A whole number is money only after its label while an integer parameter is also asked.
    for (text, locale) in [("valor 45", Locale::PtBr), ("the amount is 50", Locale::En)] {
        let got = extract_clear(&d.all(), text, locale);
        let want = if text.contains("45") {
            "45.00"
        } else {
            "50.00"
        };
        assert_eq!(values(&got), vec![("amount", &json!(want))], "{text}");
    }
    let got = extract_clear(&d.all(), "it was 50", Locale::En);
    assert_eq!(values(&got), vec![("house_number", &json!(50))]);
    let date = ParameterKind::Date;
    let weight = ParameterKind::Number;
    let pay = ParameterKind::Enum {
        values: vec![
            EnumValue {
                value: "pix".to_string(),
                synonyms: vec![],
            },
            EnumValue {
                value: "credit_card".to_string(),
                synonyms: vec!["cartão de crédito".to_string(), "credit card".to_string()],
            },
        ],
    };
    let date_labels = strings(&["delivery date", "data de entrega"]);
    let weight_labels = strings(&["weight", "peso"]);
    let pay_labels = strings(&["payment method", "forma de pagamento"]);
    let params = [
        LabelledParameter {
            name: "delivery_date",
            kind: &date,
            labels: &date_labels,
        },
        LabelledParameter {
            name: "weight",
            kind: &weight,
            labels: &weight_labels,
        },
        LabelledParameter {
            name: "payment_method",
            kind: &pay,
            labels: &pay_labels,
        },
    ];
    for (text, locale, name, want) in [
        (
            "I want it fast, delivery date 12/01/2026",
            Locale::En,
            "delivery_date",
            json!("2026-12-01"),
        ),
        (
            "quero rápido, a data de entrega é 01/12/2026",
            Locale::PtBr,
            "delivery_date",
            json!("2026-12-01"),
        ),
        (
            "12/01/2026 please",
            Locale::En,
            "delivery_date",
            json!("2026-12-01"),
        ),
        (
            "it was heavy, the weight is 3.5",
            Locale::En,
            "weight",
            json!(3.5),
        ),
        ("era pesado, peso 3,5", Locale::PtBr, "weight", json!(3.5)),
        ("3,5", Locale::PtBr, "weight", json!(3.5)),
        (
            "I changed my mind, payment method: pix",
            Locale::En,
            "payment_method",
            json!("pix"),
        ),
        ("pix, please", Locale::En, "payment_method", json!("pix")),
        (
            "cartão de crédito",
            Locale::PtBr,
            "payment_method",
            json!("credit_card"),
        ),
    ] {
        let got = extract_clear(&params, text, locale);
        assert_eq!(values(&got), vec![(name, &want)], "{text}");
    }
    for text in [
        "I need it before 12/01/2026 or I cancel",
        "I told my friend about pix",
        "it weighs 3.5 more than the other",
    ] {
        assert_eq!(
            extract_clear(&params, text, Locale::En),
            Extraction::default(),
            "{text}"
        );
    }
}

#[test]
fn another_parameters_label_does_not_introduce_a_value() {
    // PR-1 (b): `order number is 45` names the order, not the house number.
    let d = domain();
    for (text, locale) in [
        ("the order number is 45", Locale::En),
        ("o número do pedido é 45", Locale::PtBr),
        ("the amount is 45", Locale::En),
    ] {
        let got = clear(&d, &["order_id", "house_number"], text, locale);
        assert!(got.value("house_number").is_none(), "{text}: {got:?}");
    }
    // A label that names two integer parameters equally is not clear for either.
    let floor = ParameterKind::Integer {
        min: None,
        max: None,
    };
    let floor_labels = strings(&["floor number"]);
    let house_labels = strings(&["house number"]);
    let params = [
        LabelledParameter {
            name: "house_number",
            kind: &d.house_number,
            labels: &house_labels,
        },
        LabelledParameter {
            name: "floor",
            kind: &floor,
            labels: &floor_labels,
        },
    ];
    assert_eq!(
        extract_clear(&params, "I called twice, the number is 45", Locale::En),
        Extraction::default()
    );
    let got = extract_clear(&params, "I called twice, the floor number is 4", Locale::En);
    assert_eq!(values(&got), vec![("floor", &json!(4))]);
}

#[test]
fn an_amount_hangs_off_its_label_by_of_or_de_and_no_other_value_does() {
    // PR-1 (b) for money: `a charge of 20`, `valor de 20` — `of` / `de` link the label.
    let mut d = domain();
    d.amount_labels = strings(&["amount", "valor", "charge", "cobrança"]);
    for (text, locale) in [
        ("there is a charge of 35 that I never made", Locale::En),
        ("the amount of 35 is wrong", Locale::En),
        (
            "tem uma cobrança de 35 de um serviço que nao usei",
            Locale::PtBr,
        ),
        ("valor de 35, quero contestar", Locale::PtBr),
    ] {
        let got = clear(&d, &["subject", "amount"], text, locale);
        assert_eq!(
            got.value("amount"),
            Some(&json!("35.00")),
            "{text}: {got:?}"
        );
    }
    // Not a label before the preposition, or not money: nothing.
    let got = clear(
        &d,
        &["subject", "amount"],
        "the difference of 35 is wrong",
        Locale::En,
    );
    assert!(got.value("amount").is_none(), "{got:?}");
    d.house_labels = strings(&["house number", "número", "casa"]);
    let got = clear(
        &d,
        &["house_number"],
        "moro numa casa de 2 andares",
        Locale::PtBr,
    );
    assert!(got.value("house_number").is_none(), "{got:?}");
}

// --- near-misses --------------------------------------------------------------------------------

#[test]
fn a_near_miss_with_only_filler_or_its_label_around_is_reported() {
    // PR-1, MG-4: `01310-10`, `the zip is 0131-10`, `o pedido é PED-12` are explained as invalid.
    let d = domain();
    let all = d.all();
    for (text, locale, name, raw, reason) in [
        (
            "01310-10",
            Locale::PtBr,
            "zip_code",
            "01310-10",
            InvalidReason::Format,
        ),
        (
            "the zip is 0131-10",
            Locale::En,
            "zip_code",
            "0131-10",
            InvalidReason::Format,
        ),
        (
            "o cep é 0131-10",
            Locale::PtBr,
            "zip_code",
            "0131-10",
            InvalidReason::Format,
        ),
        (
            "PED-12",
            Locale::En,
            "order_id",
            "PED-12",
            InvalidReason::Format,
        ),
        (
            "acho que é PED-12",
            Locale::PtBr,
            "order_id",
            "PED-12",
            InvalidReason::Format,
        ),
        (
            "o pedido é PED-12",
            Locale::PtBr,
            "order_id",
            "PED-12",
            InvalidReason::Format,
        ),
        (
            "I called twice, my order number is PED-12",
            Locale::En,
            "order_id",
            "PED-12",
            InvalidReason::Format,
        ),
        (
            "0",
            Locale::En,
            "house_number",
            "0",
            InvalidReason::OutOfRange,
        ),
        (
            "the house number is 0",
            Locale::En,
            "house_number",
            "0",
            InvalidReason::OutOfRange,
        ),
        (
            "R$ 1.23.4",
            Locale::PtBr,
            "amount",
            "R$ 1.23.4",
            InvalidReason::Format,
        ),
        // An address with no number (`s/n`, `sem número`) where the house number goes.
        (
            "s/n",
            Locale::PtBr,
            "house_number",
            "s/n",
            InvalidReason::Format,
        ),
        (
            "é S/N",
            Locale::PtBr,
            "house_number",
            "S/N",
            InvalidReason::Format,
        ),
        (
            "é sem número",
            Locale::PtBr,
            "house_number",
            "sem número",
            InvalidReason::Format,
        ),
    ] {
        let got = extract_clear(&all, text, locale);
        assert!(got.values.is_empty(), "{text}: {got:?}");
        assert_eq!(got.rejected.len(), 1, "{text}: {got:?}");
        let r = got.rejected.first().expect("one rejection");
        assert_eq!(r.name, name, "{text}");
        assert_eq!(
            r.invalid,
            Invalid {
                reason,
                raw: raw.to_string()
            },
            "{text}"
        );
        assert_eq!(text.get(r.span.clone()), Some(raw), "{text}: span");
    }
    let date = ParameterKind::Date;
    let params = [LabelledParameter {
        name: "delivery_date",
        kind: &date,
        labels: &[],
    }];
    for text in ["31/02/2026", "the delivery date is 31/02/2026"] {
        let got = extract_clear(&params, text, Locale::PtBr);
        assert_eq!(
            got.rejection("delivery_date").map(|i| i.reason),
            Some(InvalidReason::OutOfRange),
            "{text}"
        );
    }
    // Valid and invalid together: the CEP fills and the bad house number is explained.
    let got = clear(
        &d,
        &["zip_code", "house_number"],
        "01310-100, 0",
        Locale::PtBr,
    );
    assert_eq!(values(&got), vec![("zip_code", &json!("01310-100"))]);
    assert_eq!(
        got.rejection("house_number").map(|i| i.reason),
        Some(InvalidReason::OutOfRange)
    );
}

#[test]
fn a_near_miss_inside_an_unrelated_sentence_is_not_reported() {
    // PR-1: `esquece, me liga no 98765-4321` is not an invalid CEP; the classifier decides.
    let d = domain();
    for (text, locale) in [
        ("esquece, me liga no 98765-4321", Locale::PtBr),
        ("forget it, call me at 98765-4321", Locale::En),
        (
            "I wrote PED-12 by mistake yesterday, let me talk to a human",
            Locale::En,
        ),
        ("the number changed 0 times", Locale::En),
        ("we booked it on 31/02/2026, talk to a human", Locale::En),
    ] {
        for pending in [&["zip_code"][..], &["order_id"], &["house_number"]] {
            let got = clear(&d, pending, text, locale);
            assert_eq!(got, Extraction::default(), "{text} with {pending:?}");
        }
        assert_eq!(
            extract_clear(&d.all(), text, locale),
            Extraction::default(),
            "{text}"
        );
    }
    // The liberal reader reports it (what made the engine answer "not a valid CEP").
    let got = extract(
        &[("zip_code", &d.zip_code)],
        "esquece, me liga no 98765-4321",
        Locale::PtBr,
    );
    assert!(got.rejection("zip_code").is_some());
}

// --- MG-4 inside PR-1 ---------------------------------------------------------------------------

#[test]
fn space_grouped_money_is_read_whole_by_the_clear_reader() {
    // MG-4: `R$ 1 234,56` and `1 234,56` are 1234.56; never a partial integer.
    let d = domain();
    for (text, pending) in [
        ("R$ 1 234,56", &["amount"][..]),
        ("1 234,56", &["amount"]),
        ("R$ 1 234,56", &["amount", "house_number"]),
        ("1 234,56", &["amount", "house_number"]),
        ("é 1 234,56", &["amount", "house_number"]),
        ("paguei R$ 1 234,56 duas vezes", &["amount", "house_number"]),
    ] {
        let got = clear(&d, pending, text, Locale::PtBr);
        assert_eq!(values(&got), vec![("amount", &json!("1234.56"))], "{text}");
        assert!(got.rejected.is_empty(), "{text}");
    }
    for text in ["1 234,56", "R$ 1 234,56", "1 234,56 reais"] {
        let got = clear(&d, &["house_number"], text, Locale::PtBr);
        assert_eq!(got, Extraction::default(), "{text}: no partial read");
    }
}

#[test]
fn ids_in_any_case_clearly_fill_in_the_patterns_case() {
    // MG-4, PR-1: `ped-1001` is `PED-1001`.
    let d = domain();
    for text in [
        "ped-1001",
        "Ped-1001",
        "o pedido é ped-1001",
        "the order is pEd-1001 thanks",
    ] {
        let got = clear(&d, &["order_id"], text, Locale::En);
        assert_eq!(
            values(&got),
            vec![("order_id", &json!("PED-1001"))],
            "{text}"
        );
    }
}

#[test]
fn specificity_and_spans_still_apply() {
    // MG-4: `01310-100` is a CEP, not the house number 100; text parameters never fill.
    let d = domain();
    let got = clear(&d, &["zip_code", "house_number"], "01310-100", Locale::PtBr);
    assert_eq!(values(&got), vec![("zip_code", &json!("01310-100"))]);
    let got = clear(&d, &["zip_code", "house_number"], "01310100", Locale::PtBr);
    assert_eq!(values(&got), vec![("zip_code", &json!("01310-100"))]);
    let got = clear(&d, &["subject"], "I never bought this", Locale::En);
    assert_eq!(got, Extraction::default());
    let got = clear(
        &d,
        &["subject", "amount"],
        "R$ 71,99 I never bought this",
        Locale::PtBr,
    );
    assert_eq!(values(&got), vec![("amount", &json!("71.99"))]);
    let got = clear(&d, &["order_id"], "PED-1001", Locale::En);
    assert_eq!(got.values.first().map(|e| e.span.clone()), Some(0..8));
}

#[test]
fn filler_lists_hold_folded_words_and_no_negation_or_verb() {
    // PR-1: the lists are compared with folded words; negations and the verbs/nouns of the
    // contract's examples are not filler.
    for list in FILLER_LISTS.iter().chain(FILLER_PHRASES.iter()) {
        for word in *list {
            assert_eq!(fold(word), *word, "{word} is folded");
            assert_eq!(phrase(word), vec![word.to_string()], "{word} is one word");
        }
    }
    for word in [
        "no",
        "not",
        "nao",
        "call",
        "called",
        "talk",
        "times",
        "liguei",
        "vezes",
        "human",
        "atendente",
        "liga",
        "esquece",
        "number",
        "numero",
        "por",
        "to",
        "no",
    ] {
        assert!(!is_filler(word), "{word}");
    }
    assert!(all_filler(&["por", "favor", "e", "obrigado"]));
    assert!(!all_filler(&["por"]));
}

// --- properties ---------------------------------------------------------------------------------

fn text_pieces() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "R$", "$", " ", "1", "0", "9", "45", "01310", "100", ".", ",", "-", "/", ":", "PED-",
        "ped-", "é", "😀", "\u{301}", "the", "number", "is", "o", "número", "cep", "zip", "my",
        "called", "times", "please", "reais", "2026", "31", "\u{a0}", "234", "order", "valor",
        "amount", "house", "casa", "da", "it's", "ok", "e", "and",
    ]);
    prop::collection::vec(pieces, 0..20).prop_map(|v| v.concat())
}

/// (i): never panics; every value is also one of the labelled liberal reader's, and, with no
/// labels, one of `extract`'s.
fn check_subset(text: &str) {
    let d = domain();
    let all = d.all();
    for locale in Locale::ALL {
        let clear = extract_clear(&all, text, locale);
        let liberal = extract_labelled(&all, text, locale);
        for e in &clear.values {
            assert!(
                liberal.values.contains(e),
                "{e:?} not in {liberal:?} for {text:?}"
            );
        }
        for r in &clear.rejected {
            assert!(clear.value(&r.name).is_none());
            assert_eq!(text.get(r.span.clone()), Some(r.invalid.raw.as_str()));
        }
        let bare: Vec<LabelledParameter<'_>> = all
            .iter()
            .map(|p| LabelledParameter { labels: &[], ..*p })
            .collect();
        let pairs: Vec<(&str, &ParameterKind)> = all.iter().map(|p| (p.name, p.kind)).collect();
        let clear = extract_clear(&bare, text, locale);
        let liberal = extract(&pairs, text, locale);
        for e in &clear.values {
            assert!(
                liberal.values.contains(e),
                "{e:?} not in {liberal:?} for {text:?}"
            );
        }
    }
}

/// Words that are neither filler nor a label word of the example domain.
fn sentence_words() -> impl Strategy<Value = Vec<&'static str>> {
    let words = prop::sample::select(vec![
        "let",
        "talk",
        "human",
        "called",
        "times",
        "already",
        "quero",
        "falar",
        "atendente",
        "liguei",
        "vezes",
        "esquece",
        "liga",
        "call",
        "waiting",
        "minutes",
        "minutos",
        "since",
        "yesterday",
        "ontem",
        "help",
        "agent",
        "cancel",
        "forget",
        "twice",
        "more",
        "days",
    ]);
    prop::collection::vec(words, 1..8)
}

/// A plain-form value as a customer writes it: integer, unmarked money, CEP without dash, date.
fn plain_value() -> impl Strategy<Value = String> {
    prop_oneof![
        (0u32..100_000).prop_map(|n| n.to_string()),
        (0u32..100_000, 0u32..100).prop_map(|(a, b)| format!("{a},{b:02}")),
        (0u32..100_000, 0u32..100).prop_map(|(a, b)| format!("{a}.{b:02}")),
        (0u32..100_000_000).prop_map(|n| format!("{n:08}")),
        (1u32..29, 1u32..13, 2000u32..2100).prop_map(|(d, m, y)| format!("{d:02}/{m:02}/{y}")),
        (1u32..1000, 0u32..1000, 0u32..100).prop_map(|(a, b, c)| format!("{a} {b:03},{c:02}")),
    ]
}

/// A valid value of one example-domain parameter: (name, rendered, canonical).
fn valid_value() -> impl Strategy<Value = (&'static str, String, Value)> {
    prop_oneof![
        (1000u32..10_000_000, any::<bool>()).prop_map(|(n, lower)| {
            let raw = if lower {
                format!("ped-{n}")
            } else {
                format!("PED-{n}")
            };
            ("order_id", raw, json!(format!("PED-{n}")))
        }),
        (0u32..100_000_000, any::<bool>()).prop_map(|(n, dash)| {
            let digits = format!("{n:08}");
            let (head, tail) = digits.split_at(5);
            let raw = if dash {
                format!("{head}-{tail}")
            } else {
                digits.clone()
            };
            ("zip_code", raw, json!(format!("{head}-{tail}")))
        }),
        (1i64..100_000).prop_map(|n| ("house_number", n.to_string(), json!(n))),
        (0u64..10_000_000, 0u64..100, 0usize..5).prop_map(|(int, cents, form)| {
            let canonical = json!(format!("{int}.{cents:02}"));
            let raw = match form {
                0 => format!("{int}.{cents:02}"),
                1 => format!("{int},{cents:02}"),
                2 => format!("R$ {int},{cents:02}"),
                3 => format!("${int}.{cents:02}"),
                _ => format!("{int},{cents:02} reais"),
            };
            ("amount", raw, canonical)
        }),
    ]
}

fn label_for(d: &Domain, name: &str, pick: usize) -> String {
    let p = d.param(name);
    let mut labels: Vec<String> = vec![name.replace('_', " ")];
    labels.extend(p.labels.iter().cloned());
    labels.get(pick % labels.len()).cloned().unwrap_or_default()
}

proptest! {
    #[test]
    fn clear_values_are_a_subset_of_the_liberal_ones(text in any::<String>()) {
        check_subset(&text);
    }

    #[test]
    fn clear_values_are_a_subset_on_numeric_soup(text in text_pieces()) {
        check_subset(&text);
    }

    #[test]
    fn a_plain_number_in_a_sentence_of_non_filler_words_never_fills(
        words in sentence_words(),
        value in plain_value(),
        at in 0usize..8,
        comma in any::<bool>(),
    ) {
        // PR-1 (ii)
        let d = domain();
        let mut parts: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        let at = at.min(parts.len());
        parts.insert(at, if comma { format!("{value},") } else { value.clone() });
        let text = parts.join(" ");
        let date = ParameterKind::Date;
        let weight = ParameterKind::Number;
        let mut params = d.params(&["zip_code", "house_number", "amount"]);
        params.push(LabelledParameter { name: "delivery_date", kind: &date, labels: &[] });
        params.push(LabelledParameter { name: "weight", kind: &weight, labels: &[] });
        // An amount written with its cents is distinctive for a tool that reads no other decimal
        // or date (see `an_amount_written_with_its_cents_…`): not plain for money alone.
        let cents = super::extraction::written_with_cents(&value);
        for locale in Locale::ALL {
            for (k, subset) in [&params[..], &params[1..2], &params[2..3], &params[3..]].into_iter().enumerate() {
                if cents && k == 2 {
                    continue;
                }
                let got = extract_clear(subset, &text, locale);
                prop_assert!(got.is_empty(), "{text:?}: {got:?}");
            }
        }
    }

    #[test]
    fn a_valid_value_alone_or_after_its_label_always_fills(
        (name, raw, canonical) in valid_value(),
        template in 0usize..9,
        pick in 0usize..3,
    ) {
        // PR-1 (iii)
        let d = domain();
        let label = label_for(&d, name, pick);
        let text = match template {
            0 => raw.clone(),
            1 => format!("{label} {raw}"),
            2 => format!("the {label} is {raw}"),
            3 => format!("o {label} é {raw}"),
            4 => format!("{label}: {raw}"),
            5 => format!("it's {raw}"),
            6 => format!("{raw}, please"),
            7 => format!("ok, {raw}"),
            _ => format!("my {label} is {raw}, obrigado"),
        };
        for locale in Locale::ALL {
            let got = extract_clear(&d.all(), &text, locale);
            prop_assert_eq!(got.value(name), Some(&canonical), "{:?}: {:?}", text, got);
            let got = extract_clear(&d.params(&[name]), &text, locale);
            prop_assert_eq!(got.value(name), Some(&canonical), "{:?} alone: {:?}", text, got);
        }
    }
}

#[test]
fn long_messages_of_repeated_values() {
    // PR-1 on the longest text a turn may carry (IO-3: 4000 characters): many numbers are not
    // a clear answer; the first labelled one is. (A label run is bounded by the longest label, so
    // these stay linear; an unbounded run made them cubic.)
    let d = domain();
    let all = d.all();
    let pairs: Vec<(&str, &ParameterKind)> = all.iter().map(|p| (p.name, p.kind)).collect();
    let repeated = "1 ".repeat(2000);
    assert_eq!(
        extract_clear(&all, &repeated, Locale::PtBr),
        Extraction::default()
    );
    assert_eq!(
        extract(&pairs, &repeated, Locale::PtBr).value("house_number"),
        Some(&json!(1))
    );
    let labelled = "number 7 ".repeat(450);
    let got = extract_clear(&all, &labelled, Locale::En);
    assert_eq!(values(&got), vec![("house_number", &json!(7))]);
    assert_eq!(got.values.first().map(|e| e.span.clone()), Some(7..8));
    for text in ["PED-1 ".repeat(650), "01310-10 ".repeat(440)] {
        assert_eq!(
            extract_clear(&all, &text, Locale::PtBr),
            Extraction::default()
        );
    }
}

#[test]
fn an_amount_written_with_its_cents_fills_money_anywhere_unless_a_number_or_date_could_read_it() {
    let d = domain();
    for (text, locale, want) in [
        ("contest 49,90 pls", Locale::En, "49.90"),
        (
            "ok I want to dispute the 39,90 for streaming plus",
            Locale::En,
            "39.90",
        ),
        (
            "contestar a cobrança 1.050,00 da loja",
            Locale::PtBr,
            "1050.00",
        ),
    ] {
        let got = clear(&d, &["subject", "amount"], text, locale);
        assert_eq!(got.value("amount"), Some(&json!(want)), "{text}");
    }
    // Without its cents a number inside a sentence is no clear amount (PR-1).
    let got = clear(
        &d,
        &["amount"],
        "I want to dispute the 39 for streaming",
        Locale::En,
    );
    assert_eq!(got.value("amount"), None);
    // A tool that also reads a plain number or a date: the cents are not telling.
    let weight = ParameterKind::Number;
    let both = [
        LabelledParameter {
            name: "amount",
            kind: &d.amount,
            labels: &[],
        },
        LabelledParameter {
            name: "weight",
            kind: &weight,
            labels: &[],
        },
    ];
    let got = extract_clear(
        &both,
        "I want to dispute the 39,90 for streaming",
        Locale::En,
    );
    assert_eq!(got.value("amount"), None);
}
#[test]
fn the_prefix_typed_loosely_before_too_few_digits_is_a_near_miss() {
    // RP-4: `is ped 211` while the order number is asked is explained with the expected form,
    // as `PED-211` is; the digits are not read apart from their prefix.
    let d = domain();
    let asked = ClearOptions {
        asked: Some("order_id"),
        ..Default::default()
    };
    for (text, raw) in [
        ("is ped 211", "ped 211"),
        ("ped211", "ped211"),
        ("Ped-12", "Ped-12"),
        ("PED-211", "PED-211"),
    ] {
        let got = extract_clear_with(&d.params(&["order_id"]), text, Locale::En, asked);
        assert!(got.values.is_empty(), "{text}");
        assert_eq!(got.rejected.len(), 1, "{text}: {got:?}");
        assert_eq!(got.rejected[0].invalid.raw, raw, "{text}");
    }
    // A valid loose id, and a word that only contains the prefix, are no near-miss.
    let got = extract_clear_with(&d.params(&["order_id"]), "ped 2110", Locale::En, asked);
    assert_eq!(got.value("order_id"), Some(&json!("PED-2110")));
    let got = extract_clear_with(&d.params(&["order_id"]), "speed 20", Locale::En, asked);
    assert!(
        got.rejected.iter().all(|r| r.invalid.raw != "ped 20"),
        "{got:?}"
    );
}
