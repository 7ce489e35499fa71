use std::ops::Range;

use super::id::literal_prefix;
use super::text::overlaps;
use super::*;
use crate::domain::locale::Locale;
use proptest::prelude::*;
use serde_json::{json, Value};

fn id(pattern: &str) -> ParameterKind {
    ParameterKind::Id {
        pattern: IdPattern::new(pattern).expect("valid pattern"),
    }
}

fn integer() -> ParameterKind {
    ParameterKind::Integer {
        min: None,
        max: None,
    }
}

fn payment() -> ParameterKind {
    ParameterKind::Enum {
        values: vec![
            EnumValue {
                value: "pix".to_string(),
                synonyms: vec![],
            },
            EnumValue {
                value: "credit_card".to_string(),
                synonyms: vec![
                    "cartão de crédito".to_string(),
                    "credit card".to_string(),
                    "cartão".to_string(),
                ],
            },
            EnumValue {
                value: "boleto".to_string(),
                synonyms: vec!["bank slip".to_string()],
            },
        ],
    }
}

fn one(kind: &ParameterKind, text: &str, locale: Locale) -> Option<Value> {
    extract(&[("p", kind)], text, locale).value("p").cloned()
}

fn reason(kind: &ParameterKind, raw: Value, locale: Locale) -> InvalidReason {
    match kind.validate(&raw, locale) {
        Ok(v) => panic!("{raw} was accepted as {v}"),
        Err(invalid) => invalid.reason,
    }
}

// --- IdPattern -------------------------------------------------------------------------

#[test]
fn id_pattern_compiles_and_keeps_its_source() {
    let p = IdPattern::new("PED-[0-9]{4,}").expect("valid");
    assert_eq!(p.as_str(), "PED-[0-9]{4,}");
    assert_eq!(p.to_string(), "PED-[0-9]{4,}");
    assert_eq!(p.prefix, "PED-");
    assert!(p.is_match("PED-1001"));
    assert!(!p.is_match("PED-100"));
    assert!(!p.is_match("xPED-1001"));
}

#[test]
fn id_pattern_rejects_bad_patterns() {
    assert!(IdPattern::new("").is_err());
    assert!(IdPattern::new("   ").is_err());
    assert!(IdPattern::new("PED-[0-9").is_err());
    assert!(IdPattern::new("a)(b").is_err());
    assert!(
        IdPattern::new("[0-9]*").is_err(),
        "matches the empty string"
    );
}

#[test]
fn id_pattern_anchors_are_ignored_when_searching() {
    // MG-4: the anchored form validates; the search form finds the id inside a sentence.
    let kind = id("^PED-[0-9]{4,}$");
    assert_eq!(
        one(&kind, "the order is PED-1001", Locale::En),
        Some(json!("PED-1001"))
    );
    assert_eq!(
        kind.validate(&json!("PED-1001"), Locale::En),
        Ok(json!("PED-1001"))
    );
}

#[test]
fn literal_prefixes() {
    assert_eq!(literal_prefix("PED-[0-9]{4,}"), "PED-");
    assert_eq!(literal_prefix(r"INC\-[0-9]+"), "INC-");
    assert_eq!(literal_prefix("ABC?[0-9]"), "AB");
    assert_eq!(literal_prefix("[0-9]{6}"), "");
    assert_eq!(literal_prefix("A[0-9]"), "");
    assert_eq!(literal_prefix("PED-[0-9]+|ORD-[0-9]+"), "");
}

// --- kinds -----------------------------------------------------------------------------

#[test]
fn type_names_and_typed() {
    // PR-1: free text never counts as a clear fill.
    let kinds = [
        (id("X-[0-9]+"), "id"),
        (integer(), "integer"),
        (ParameterKind::Number, "number"),
        (ParameterKind::Money, "money"),
        (ParameterKind::Date, "date"),
        (payment(), "enum"),
        (ParameterKind::Cep, "cep"),
        (ParameterKind::Text { max_len: 10 }, "text"),
    ];
    for (kind, name) in &kinds {
        assert_eq!(kind.type_name(), *name);
        assert_eq!(kind.is_typed(), *name != "text");
    }
}

#[test]
fn invalid_reason_serialises_snake_case() {
    assert_eq!(
        serde_json::to_value(InvalidReason::OutOfRange).expect("serialises"),
        json!("out_of_range")
    );
    assert_eq!(InvalidReason::WrongType.as_str(), "wrong_type");
    assert_eq!(InvalidReason::UnknownOption.to_string(), "unknown_option");
}

// --- validate (MG-4) -------------------------------------------------------------------

#[test]
fn validate_wrong_json_types() {
    // MG-4: bool, object, array, null are WrongType for every kind.
    let kinds = [
        id("PED-[0-9]{4,}"),
        integer(),
        ParameterKind::Number,
        ParameterKind::Money,
        ParameterKind::Date,
        payment(),
        ParameterKind::Cep,
        ParameterKind::Text { max_len: 100 },
    ];
    for kind in &kinds {
        for raw in [json!(true), json!({"a": 1}), json!([1, 2]), Value::Null] {
            let err = kind.validate(&raw, Locale::En).expect_err("wrong type");
            assert_eq!(err.reason, InvalidReason::WrongType, "{raw} for {kind:?}");
            assert_eq!(err.raw, raw.to_string());
        }
    }
    // Numbers are not accepted where the canonical value is a formatted string.
    for kind in [
        ParameterKind::Date,
        payment(),
        ParameterKind::Cep,
        ParameterKind::Text { max_len: 100 },
    ] {
        assert_eq!(
            reason(&kind, json!(1310100), Locale::En),
            InvalidReason::WrongType
        );
    }
    assert_eq!(
        reason(&id("[0-9]+"), json!(1.5), Locale::En),
        InvalidReason::WrongType
    );
}

#[test]
fn validate_empty_strings() {
    // MG-4
    for kind in [
        id("PED-[0-9]{4,}"),
        integer(),
        ParameterKind::Number,
        ParameterKind::Money,
        ParameterKind::Date,
        payment(),
        ParameterKind::Cep,
        ParameterKind::Text { max_len: 100 },
    ] {
        let err = kind.validate(&json!("  "), Locale::En).expect_err("empty");
        assert_eq!(err.reason, InvalidReason::Empty);
        assert_eq!(err.raw, "  ");
    }
}

#[test]
fn validate_id() {
    // MG-4: ids trimmed, anchored pattern, stored in the pattern's case.
    let kind = id("PED-[0-9]{4,}");
    assert_eq!(
        kind.validate(&json!("  PED-1001 "), Locale::En),
        Ok(json!("PED-1001"))
    );
    assert_eq!(
        reason(&kind, json!("PED-12"), Locale::En),
        InvalidReason::Format
    );
    for raw in ["ped-1001", "Ped-1001", " pEd-1001 "] {
        assert_eq!(
            kind.validate(&json!(raw), Locale::En),
            Ok(json!("PED-1001")),
            "{raw}"
        );
    }
    assert_eq!(
        reason(&kind, json!("the order is PED-1001"), Locale::En),
        InvalidReason::Format
    );
    let numeric = id("[0-9]{6}");
    assert_eq!(
        numeric.validate(&json!(123456), Locale::En),
        Ok(json!("123456"))
    );
    assert_eq!(
        reason(&numeric, json!(12345), Locale::En),
        InvalidReason::Format
    );
}

#[test]
fn validate_integer() {
    // MG-4: integers canonical as JSON numbers.
    let kind = ParameterKind::Integer {
        min: Some(1),
        max: Some(100),
    };
    assert_eq!(kind.validate(&json!("45"), Locale::En), Ok(json!(45)));
    assert_eq!(kind.validate(&json!(" 045 "), Locale::En), Ok(json!(45)));
    assert_eq!(kind.validate(&json!(45), Locale::En), Ok(json!(45)));
    assert_eq!(kind.validate(&json!(45.0), Locale::En), Ok(json!(45)));
    assert_eq!(kind.validate(&json!("+7"), Locale::En), Ok(json!(7)));
    assert_eq!(
        reason(&kind, json!(45.5), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!("4.5"), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!("abc"), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!(0), Locale::En),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!("101"), Locale::En),
        InvalidReason::OutOfRange
    );
    let open = integer();
    assert_eq!(open.validate(&json!("-3"), Locale::En), Ok(json!(-3)));
    assert_eq!(
        reason(&open, json!(u64::MAX), Locale::En),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&open, json!("99999999999999999999"), Locale::En),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&open, json!(1e300), Locale::En),
        InvalidReason::OutOfRange
    );
}

#[test]
fn validate_number() {
    // MG-4: pt-BR uses `,` as the decimal separator; canonical JSON numbers.
    let kind = ParameterKind::Number;
    assert_eq!(kind.validate(&json!("3,5"), Locale::PtBr), Ok(json!(3.5)));
    assert_eq!(kind.validate(&json!("3.5"), Locale::En), Ok(json!(3.5)));
    assert_eq!(kind.validate(&json!("3.5"), Locale::PtBr), Ok(json!(3.5)));
    assert_eq!(
        kind.validate(&json!("1.234,5"), Locale::PtBr),
        Ok(json!(1234.5))
    );
    assert_eq!(
        kind.validate(&json!("1,234.5"), Locale::En),
        Ok(json!(1234.5))
    );
    assert_eq!(
        kind.validate(&json!("1.500"), Locale::PtBr),
        Ok(json!(1500))
    );
    assert_eq!(kind.validate(&json!("1.500"), Locale::En), Ok(json!(1.5)));
    assert_eq!(
        kind.validate(&json!("-2,25"), Locale::PtBr),
        Ok(json!(-2.25))
    );
    assert_eq!(kind.validate(&json!("7"), Locale::En), Ok(json!(7)));
    assert_eq!(kind.validate(&json!(2.5), Locale::En), Ok(json!(2.5)));
    assert_eq!(kind.validate(&json!(3.0), Locale::En), Ok(json!(3)));
    assert_eq!(kind.validate(&json!(-4), Locale::En), Ok(json!(-4)));
    assert_eq!(
        reason(&kind, json!("3,5,1"), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!("1e3"), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!("abc"), Locale::En),
        InvalidReason::Format
    );
}

#[test]
fn validate_money_forms() {
    // MG-4: money canonical `1234.56`.
    let kind = ParameterKind::Money;
    let cases = [
        ("R$ 71,99", "71.99"),
        ("R$ 1.234,56", "1234.56"),
        ("R$ 71.99", "71.99"),
        ("71.99", "71.99"),
        ("$71.99", "71.99"),
        ("71,99", "71.99"),
        ("1,234.56", "1234.56"),
        ("R$71", "71.00"),
        ("R$ 1.234", "1234.00"),
        ("US$ 10", "10.00"),
        ("50", "50.00"),
        ("7,5", "7.50"),
        ("0,99", "0.99"),
        ("71,99 reais", "71.99"),
        ("10 dollars", "10.00"),
        ("1.234.567,89", "1234567.89"),
    ];
    for locale in Locale::ALL {
        for (raw, canonical) in cases {
            assert_eq!(
                kind.validate(&json!(raw), locale),
                Ok(json!(canonical)),
                "{raw} in {locale}"
            );
        }
    }
    assert_eq!(kind.validate(&json!(71.99), Locale::En), Ok(json!("71.99")));
    assert_eq!(kind.validate(&json!(71), Locale::En), Ok(json!("71.00")));
    assert_eq!(kind.validate(&json!(0.5), Locale::En), Ok(json!("0.50")));
    assert_eq!(kind.validate(&json!(-0.0), Locale::En), Ok(json!("0.00")));
    assert_eq!(
        reason(&kind, json!(71.999), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!(-5), Locale::En),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!(-5.5), Locale::En),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!("-5,00"), Locale::En),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!(1e20), Locale::En),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!("1.23.4"), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!("71,999,9"), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!("R$ abc"), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!("71.99 euros"), Locale::En),
        InvalidReason::Format
    );
}

#[test]
fn validate_date() {
    // MG-4: ISO; dd/mm/yyyy for pt-BR, mm/dd/yyyy for en; impossible dates rejected.
    let kind = ParameterKind::Date;
    for locale in Locale::ALL {
        assert_eq!(
            kind.validate(&json!("2026-12-01"), locale),
            Ok(json!("2026-12-01"))
        );
    }
    assert_eq!(
        kind.validate(&json!("01/12/2026"), Locale::PtBr),
        Ok(json!("2026-12-01"))
    );
    assert_eq!(
        kind.validate(&json!("01/12/2026"), Locale::En),
        Ok(json!("2026-01-12"))
    );
    assert_eq!(
        kind.validate(&json!("2/9/2026"), Locale::PtBr),
        Ok(json!("2026-09-02"))
    );
    assert_eq!(
        kind.validate(&json!("29/02/2028"), Locale::PtBr),
        Ok(json!("2028-02-29"))
    );
    assert_eq!(
        reason(&kind, json!("29/02/2026"), Locale::PtBr),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!("29/02/2100"), Locale::PtBr),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!("31/02/2026"), Locale::PtBr),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!("12/31/2026"), Locale::PtBr),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!("2026-13-01"), Locale::En),
        InvalidReason::OutOfRange
    );
    assert_eq!(
        reason(&kind, json!("01/12"), Locale::PtBr),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!("tomorrow"), Locale::En),
        InvalidReason::Format
    );
    assert_eq!(
        reason(&kind, json!("2026-1a-01"), Locale::En),
        InvalidReason::Format
    );
}

#[test]
fn validate_enum() {
    // MG-4: synonyms, case- and accent-insensitive; canonical value stored.
    let kind = payment();
    for raw in ["pix", "PIX", " Pix "] {
        assert_eq!(kind.validate(&json!(raw), Locale::En), Ok(json!("pix")));
    }
    for raw in [
        "Cartão de Crédito",
        "cartao de credito",
        "credit_card",
        "CARTÃO",
    ] {
        assert_eq!(
            kind.validate(&json!(raw), Locale::PtBr),
            Ok(json!("credit_card"))
        );
    }
    assert_eq!(
        reason(&kind, json!("dinheiro"), Locale::PtBr),
        InvalidReason::UnknownOption
    );
    assert_eq!(
        reason(&kind, json!("pix please"), Locale::En),
        InvalidReason::UnknownOption
    );
    assert_eq!(
        reason(&kind, json!("!!"), Locale::En),
        InvalidReason::UnknownOption
    );
}

#[test]
fn validate_cep() {
    // MG-4: CEP canonical `NNNNN-NNN`.
    let kind = ParameterKind::Cep;
    for raw in ["01310-100", "01310100", " 01310-100 ", "01.310-100"] {
        assert_eq!(
            kind.validate(&json!(raw), Locale::PtBr),
            Ok(json!("01310-100"))
        );
    }
    for raw in [
        "01310-10",
        "013101000",
        "0131-0100",
        "01310_100",
        "abcde-fgh",
        "０1310100",
    ] {
        assert_eq!(
            reason(&kind, json!(raw), Locale::PtBr),
            InvalidReason::Format
        );
    }
}

#[test]
fn validate_text() {
    // MG-4: free text trimmed; max_len counts characters.
    let kind = ParameterKind::Text { max_len: 5 };
    assert_eq!(
        kind.validate(&json!("  ação "), Locale::PtBr),
        Ok(json!("ação"))
    );
    assert_eq!(
        kind.validate(&json!("😀😀😀😀😀"), Locale::En),
        Ok(json!("😀😀😀😀😀"))
    );
    assert_eq!(
        reason(&kind, json!("abcdef"), Locale::En),
        InvalidReason::TooLong
    );
}

// --- extract: PR-1 single fills ----------------------------------------------------------

#[test]
fn extract_id_in_sentences() {
    // PR-1: a typed parser fills a pending id without a model.
    let kind = id("PED-[0-9]{4,}");
    for (text, locale) in [
        ("PED-1001", Locale::En),
        ("the order is PED-1001", Locale::En),
        ("o pedido é PED-1001", Locale::PtBr),
        ("  PED-1001.  ", Locale::En),
        ("(PED-1001)", Locale::En),
        ("pedido: PED-1001, obrigado", Locale::PtBr),
        ("é o PED-1001🙂", Locale::PtBr),
    ] {
        assert_eq!(one(&kind, text, locale), Some(json!("PED-1001")), "{text}");
    }
    let got = extract(&[("order", &kind)], "o pedido é PED-1001", Locale::PtBr);
    assert_eq!(
        got.values,
        vec![Extracted {
            name: "order".to_string(),
            value: json!("PED-1001"),
            span: 12..20,
        }]
    );
    assert!(got.rejected.is_empty());
}

#[test]
fn extract_id_needs_a_whole_token() {
    // MG-4: id matched as a whole token.
    let kind = id("PED-[0-9]{4,}");
    assert_eq!(one(&kind, "XPED-1001", Locale::En), None);
    assert_eq!(one(&kind, "PED-1001x", Locale::En), None);
    assert_eq!(one(&kind, "PED-1001-2", Locale::En), None);
}

#[test]
fn extract_money_forms() {
    // PR-1, MG-4: every listed money form, in a sentence, to its canonical string.
    let kind = ParameterKind::Money;
    let cases = [
        ("R$ 71,99", "71.99", "R$ 71,99"),
        ("R$ 1.234,56", "1234.56", "R$ 1.234,56"),
        ("R$ 71.99", "71.99", "R$ 71.99"),
        ("71.99", "71.99", "71.99"),
        ("$71.99", "71.99", "$71.99"),
        ("71,99", "71.99", "71,99"),
        ("1,234.56", "1234.56", "1,234.56"),
        ("R$71", "71.00", "R$71"),
        ("R$ 1.234", "1234.00", "R$ 1.234"),
        ("US$ 15", "15.00", "US$ 15"),
        ("r$ 7,5", "7.50", "r$ 7,5"),
        ("50 reais", "50.00", "50 reais"),
        ("20 dólares", "20.00", "20 dólares"),
    ];
    for locale in Locale::ALL {
        for (form, canonical, span_text) in cases {
            let text = format!("the amount is {form}.");
            let got = extract(&[("amount", &kind)], &text, locale);
            assert_eq!(got.value("amount"), Some(&json!(canonical)), "{text}");
            let span = got.values.first().map(|e| e.span.clone()).unwrap_or(0..0);
            assert_eq!(text.get(span), Some(span_text), "{text}");
        }
    }
    assert_eq!(
        one(&kind, "o valor é R$ 1.234,56", Locale::PtBr),
        Some(json!("1234.56"))
    );
    assert_eq!(
        one(&kind, "I paid 71.9", Locale::En),
        None,
        "one decimal needs a marker"
    );
    assert_eq!(
        one(&kind, "refund -71.99", Locale::En),
        None,
        "never negative"
    );
    assert_eq!(one(&kind, "refund R$ -71,99", Locale::PtBr), None);
}

#[test]
fn extract_bare_integer_money_only_without_integer_or_number_parameters() {
    // MG-4: `50` is money only when no integer/number parameter is being read.
    let money = ParameterKind::Money;
    assert_eq!(one(&money, "it was 50", Locale::En), Some(json!("50.00")));
    let qty = integer();
    let got = extract(
        &[("amount", &money), ("qty", &qty)],
        "it was 50",
        Locale::En,
    );
    assert_eq!(got.value("amount"), None);
    assert_eq!(got.value("qty"), Some(&json!(50)));
    let number = ParameterKind::Number;
    let got = extract(&[("amount", &money), ("weight", &number)], "50", Locale::En);
    assert_eq!(got.value("amount"), None);
    assert_eq!(got.value("weight"), Some(&json!(50)));
    // A marked amount is money even then, and is not read as the quantity.
    let got = extract(
        &[("amount", &money), ("qty", &qty)],
        "R$ 50 for 3 units",
        Locale::PtBr,
    );
    assert_eq!(got.value("amount"), Some(&json!("50.00")));
    assert_eq!(got.value("qty"), Some(&json!(3)));
    let got = extract(&[("qty", &qty)], "R$ 50", Locale::PtBr);
    assert_eq!(got.value("qty"), None, "a currency amount is not a count");
}

#[test]
fn extract_cep_forms() {
    // MG-4: CEP `NNNNN-NNN`, dash optional.
    let kind = ParameterKind::Cep;
    for text in [
        "01310-100",
        "01310100",
        "meu cep é 01310-100",
        "CEP:01310100.",
        "cep 01.310-100",
        // A space for the dash: labelled or alone, as the undashed form.
        "cep 01310 100",
        "01310 100",
        "CEP 01.310 100",
    ] {
        assert_eq!(
            one(&kind, text, Locale::PtBr),
            Some(json!("01310-100")),
            "{text}"
        );
    }

    assert_eq!(one(&kind, "013101000", Locale::PtBr), None);
    assert_eq!(one(&kind, "tel 11-01310100", Locale::PtBr), None);
}

#[test]
fn extract_dates() {
    // MG-4: ISO; dd/mm/yyyy (pt-BR); mm/dd/yyyy (en).
    let kind = ParameterKind::Date;
    assert_eq!(
        one(&kind, "on 2026-12-01 please", Locale::En),
        Some(json!("2026-12-01"))
    );
    assert_eq!(
        one(&kind, "para 01/12/2026", Locale::PtBr),
        Some(json!("2026-12-01"))
    );
    assert_eq!(
        one(&kind, "by 12/31/2026", Locale::En),
        Some(json!("2026-12-31"))
    );
    assert_eq!(one(&kind, "by 12/31", Locale::En), None);
}

#[test]
fn extract_enum_whole_words() {
    // MG-4: enum synonyms matched case- and accent-insensitively as whole words/phrases.
    let kind = payment();
    assert_eq!(
        one(&kind, "quero pagar com CARTAO DE CRÉDITO", Locale::PtBr),
        Some(json!("credit_card"))
    );
    assert_eq!(
        one(&kind, "pay by credit card please", Locale::En),
        Some(json!("credit_card"))
    );
    assert_eq!(
        one(&kind, "Pix, por favor", Locale::PtBr),
        Some(json!("pix"))
    );
    assert_eq!(one(&kind, "my pixel phone", Locale::En), None);
    assert_eq!(one(&kind, "bank slips", Locale::En), None);
    let got = extract(&[("pay", &kind)], "via cartão de crédito!", Locale::PtBr);
    let span = got.values.first().map(|e| e.span.clone()).unwrap_or(0..0);
    assert_eq!(
        "via cartão de crédito!".get(span),
        Some("cartão de crédito")
    );
    // Decomposed accents fold the same way.
    assert_eq!(
        one(&kind, "cartao de cre\u{301}dito", Locale::PtBr),
        Some(json!("credit_card"))
    );
}

#[test]
fn extract_integers_and_numbers() {
    // MG-4: integers plain digits; numbers by locale.
    let kind = integer();
    assert_eq!(one(&kind, "the number is 45", Locale::En), Some(json!(45)));
    assert_eq!(one(&kind, "o número é 45.", Locale::PtBr), Some(json!(45)));
    assert_eq!(one(&kind, "change it to -3", Locale::En), Some(json!(-3)));
    assert_eq!(one(&kind, "100km", Locale::En), None);
    assert_eq!(one(&kind, "4,5", Locale::PtBr), None);
    assert_eq!(one(&kind, "between 5-7", Locale::En), None);
    assert_eq!(one(&kind, "at 10:30", Locale::En), None);
    let number = ParameterKind::Number;
    assert_eq!(one(&number, "peso 3,5 kg", Locale::PtBr), Some(json!(3.5)));
    assert_eq!(one(&number, "weight 3.5 kg", Locale::En), Some(json!(3.5)));
    assert_eq!(
        one(&number, "1.500 unidades", Locale::PtBr),
        Some(json!(1500))
    );
    assert_eq!(one(&number, "1,500 units", Locale::En), Some(json!(1500)));
    assert_eq!(one(&number, "-2.5 degrees", Locale::En), Some(json!(-2.5)));
}

#[test]
fn extract_never_reads_free_text() {
    // PR-1: typed extraction never produces a value for a free-text parameter.
    let text_kind = ParameterKind::Text { max_len: 500 };
    let got = extract(
        &[("note", &text_kind)],
        "please leave it at the door",
        Locale::En,
    );
    assert_eq!(got, Extraction::default());
    assert!(got.is_empty());
}

// --- extract: specificity and spans (MG-4) ---------------------------------------------

#[test]
fn cep_span_is_not_read_again_as_a_house_number() {
    // MG-4: `01310-100` is a CEP, not the house number `100`.
    let cep = ParameterKind::Cep;
    let house = integer();
    let params = [("zip_code", &cep), ("house_number", &house)];
    let text = "my zip is 01310-100 and the number is 100";
    let got = extract(&params, text, Locale::En);
    assert_eq!(got.value("zip_code"), Some(&json!("01310-100")));
    assert_eq!(got.value("house_number"), Some(&json!(100)));
    let house_span = got
        .values
        .iter()
        .find(|e| e.name == "house_number")
        .map(|e| e.span.clone());
    assert_eq!(house_span, Some(38..41), "the second 100 only");
    assert!(got.rejected.is_empty());

    let got = extract(&params, "01310-100", Locale::En);
    assert_eq!(got.value("zip_code"), Some(&json!("01310-100")));
    assert_eq!(got.value("house_number"), None);
    assert_eq!(got.values.len(), 1);
}

#[test]
fn money_does_not_read_a_cep_or_id_digits() {
    // MG-4: money must not read a CEP or an id's digits.
    let cep = ParameterKind::Cep;
    let money = ParameterKind::Money;
    let order = id("PED-[0-9]{4,}");
    let got = extract(
        &[("amount", &money), ("zip", &cep)],
        "01310-100",
        Locale::PtBr,
    );
    assert_eq!(got.value("zip"), Some(&json!("01310-100")));
    assert_eq!(got.value("amount"), None);
    assert_eq!(one(&money, "01310-100", Locale::PtBr), None);
    assert_eq!(one(&money, "PED-1001", Locale::En), None);
    let got = extract(
        &[("amount", &money), ("order", &order)],
        "PED-1001 R$ 10",
        Locale::PtBr,
    );
    assert_eq!(got.value("order"), Some(&json!("PED-1001")));
    assert_eq!(got.value("amount"), Some(&json!("10.00")));
}

#[test]
fn id_digits_are_not_an_integer() {
    // MG-4: digits inside an id token are not read as an integer.
    let order = id("PED-[0-9]{4,}");
    let qty = integer();
    let got = extract(&[("order", &order), ("qty", &qty)], "PED-1001", Locale::En);
    assert_eq!(got.value("order"), Some(&json!("PED-1001")));
    assert_eq!(got.value("qty"), None);
    assert_eq!(one(&qty, "PED-1001", Locale::En), None);
    assert_eq!(one(&qty, "ped-1001", Locale::En), None);
}

#[test]
fn date_digits_are_not_integers() {
    // MG-4: a span taken by one parameter is not read again.
    let date = ParameterKind::Date;
    let qty = integer();
    let got = extract(
        &[("qty", &qty), ("when", &date)],
        "2026-12-01, 3 boxes",
        Locale::En,
    );
    assert_eq!(got.value("when"), Some(&json!("2026-12-01")));
    assert_eq!(got.value("qty"), Some(&json!(3)));
    assert_eq!(one(&qty, "01/12/2026", Locale::PtBr), None);
}

// --- extract: several values (MG-5) ----------------------------------------------------

#[test]
fn one_message_fills_several_parameters() {
    // MG-5: one message may fill several parameters, including ones not asked yet.
    let order = id("PED-[0-9]{4,}");
    let amount = ParameterKind::Money;
    let zip = ParameterKind::Cep;
    let when = ParameterKind::Date;
    let pay = payment();
    let qty = integer();
    let note = ParameterKind::Text { max_len: 100 };
    let params = [
        ("order", &order),
        ("amount", &amount),
        ("zip", &zip),
        ("when", &when),
        ("pay", &pay),
        ("qty", &qty),
        ("note", &note),
    ];
    let text = "o pedido é PED-1001, valor R$ 1.234,56, cep 01310100, entrega em 01/12/2026, \
                pagamento no cartão, 2 caixas";
    let got = extract(&params, text, Locale::PtBr);
    let names: Vec<&str> = got.values.iter().map(|e| e.name.as_str()).collect();
    assert_eq!(names, ["order", "amount", "zip", "when", "pay", "qty"]);
    assert_eq!(got.value("order"), Some(&json!("PED-1001")));
    assert_eq!(got.value("amount"), Some(&json!("1234.56")));
    assert_eq!(got.value("zip"), Some(&json!("01310-100")));
    assert_eq!(got.value("when"), Some(&json!("2026-12-01")));
    assert_eq!(got.value("pay"), Some(&json!("credit_card")));
    assert_eq!(got.value("qty"), Some(&json!(2)));
    assert!(got.rejected.is_empty());
    for e in &got.values {
        assert!(text.is_char_boundary(e.span.start) && text.is_char_boundary(e.span.end));
    }
}

#[test]
fn same_kind_parameters_take_matches_in_message_order() {
    // MG-5: several parameters of one kind, in the order given.
    let a = integer();
    let b = integer();
    let got = extract(&[("adults", &a), ("children", &b)], "45 and 10", Locale::En);
    assert_eq!(got.value("adults"), Some(&json!(45)));
    assert_eq!(got.value("children"), Some(&json!(10)));
    let from = id("PED-[0-9]{4,}");
    let to = id("PED-[0-9]{4,}");
    let got = extract(
        &[("from", &from), ("to", &to)],
        "move PED-1001 into PED-2002",
        Locale::En,
    );
    assert_eq!(got.value("from"), Some(&json!("PED-1001")));
    assert_eq!(got.value("to"), Some(&json!("PED-2002")));
    let first = ParameterKind::Date;
    let second = ParameterKind::Date;
    let got = extract(
        &[("check_in", &first), ("check_out", &second)],
        "de 01/12/2026 a 05/12/2026",
        Locale::PtBr,
    );
    assert_eq!(got.value("check_in"), Some(&json!("2026-12-01")));
    assert_eq!(got.value("check_out"), Some(&json!("2026-12-05")));
}

// --- extract: near-miss rejections (MG-4) ----------------------------------------------

#[test]
fn near_miss_id() {
    // MG-4: a token sharing the pattern's literal prefix but invalid is rejected.
    let kind = id("PED-[0-9]{4,}");
    let got = extract(&[("order", &kind)], "my order is PED-12.", Locale::En);
    assert!(got.values.is_empty());
    assert_eq!(
        got.rejected,
        vec![Rejected {
            name: "order".to_string(),
            invalid: Invalid {
                reason: InvalidReason::Format,
                raw: "PED-12".to_string(),
            },
            span: 12..18,
        }]
    );
    assert_eq!(
        extract(&[("order", &kind)], "é o ped-12", Locale::PtBr)
            .rejection("order")
            .map(|i| i.raw.as_str()),
        Some("ped-12"),
        "the prefix is recognised in any case"
    );
    // Words sharing the prefix without digits are not attempts.
    let inc = id("INC[0-9]{6}");
    assert!(extract(&[("ticket", &inc)], "include it", Locale::En).is_empty());
    // No rejection when a valid value was given in the same message.
    let got = extract(&[("order", &kind)], "PED-12, sorry, PED-1001", Locale::En);
    assert_eq!(got.value("order"), Some(&json!("PED-1001")));
    assert!(got.rejected.is_empty());
}

#[test]
fn near_miss_cep() {
    // MG-4: 7- or 9-digit CEP-looking tokens are rejected when a CEP is asked.
    let kind = ParameterKind::Cep;
    for (text, raw) in [
        ("cep 01310-10", "01310-10"),
        ("cep 01310-1000", "01310-1000"),
        ("cep 1310100", "1310100"),
        ("cep 013101000", "013101000"),
    ] {
        let got = extract(&[("zip", &kind)], text, Locale::PtBr);
        assert!(got.values.is_empty(), "{text}");
        assert_eq!(
            got.rejection("zip"),
            Some(&Invalid {
                reason: InvalidReason::Format,
                raw: raw.to_string(),
            }),
            "{text}"
        );
    }
    assert!(extract(&[("zip", &kind)], "cep 12345", Locale::PtBr).is_empty());
}

#[test]
fn near_miss_date_and_range() {
    // MG-4: impossible dates and out-of-range integers are rejected, not stored.
    let date = ParameterKind::Date;
    let got = extract(&[("when", &date)], "dia 31/02/2026", Locale::PtBr);
    assert!(got.values.is_empty());
    assert_eq!(
        got.rejection("when"),
        Some(&Invalid {
            reason: InvalidReason::OutOfRange,
            raw: "31/02/2026".to_string(),
        })
    );
    let guests = ParameterKind::Integer {
        min: Some(1),
        max: Some(10),
    };
    let got = extract(&[("guests", &guests)], "we are 45", Locale::En);
    assert!(got.values.is_empty());
    assert_eq!(
        got.rejection("guests").map(|i| i.reason),
        Some(InvalidReason::OutOfRange)
    );
    let got = extract(&[("guests", &guests)], "45, no, 4", Locale::En);
    assert_eq!(got.value("guests"), Some(&json!(4)));
    assert!(got.rejected.is_empty());
    let got = extract(&[("n", &integer())], "99999999999999999999", Locale::En);
    assert_eq!(
        got.rejection("n").map(|i| i.reason),
        Some(InvalidReason::OutOfRange)
    );
    let money = ParameterKind::Money;
    let got = extract(&[("amount", &money)], "R$ 1.23.4", Locale::PtBr);
    assert_eq!(
        got.rejection("amount").map(|i| i.reason),
        Some(InvalidReason::Format)
    );
}

#[test]
fn spans_survive_multibyte_text() {
    // MG-4: spans are byte ranges on char boundaries.
    let money = ParameterKind::Money;
    let text = "ação 😀 R$ 71,99 😀 ção";
    let got = extract(&[("amount", &money)], text, Locale::PtBr);
    let span = got.values.first().map(|e| e.span.clone()).unwrap_or(0..0);
    assert_eq!(text.get(span), Some("R$ 71,99"));
}

fn fragments() -> impl Strategy<Value = String> {
    let pieces = prop::sample::select(vec![
        "R$", "$", " ", "1", "0", "9", "12", "01310", "100", ".", ",", "-", "/", ":", "PED-",
        "ped-", "é", "ã", "😀", "\u{301}", "cartão", "de", "crédito", "pix", "reais", "2026", "31",
        "(", "_", "@", "\n", "٣", "１",
    ]);
    prop::collection::vec(pieces, 0..24).prop_map(|v| v.concat())
}

fn all_kinds() -> Vec<(&'static str, ParameterKind)> {
    vec![
        ("order", id("PED-[0-9]{4,}")),
        ("order2", id("[0-9]{3}")),
        ("zip", ParameterKind::Cep),
        ("amount", ParameterKind::Money),
        ("when", ParameterKind::Date),
        ("pay", payment()),
        ("weight", ParameterKind::Number),
        (
            "qty",
            ParameterKind::Integer {
                min: Some(0),
                max: Some(50),
            },
        ),
        ("note", ParameterKind::Text { max_len: 3 }),
    ]
}

fn check_extraction(text: &str) {
    let kinds = all_kinds();
    let subsets: [&[usize]; 4] = [&[0, 1, 2, 3, 4, 5, 6, 7, 8], &[3], &[7, 2], &[3, 5, 0]];
    for locale in Locale::ALL {
        for subset in subsets {
            let params: Vec<(&str, &ParameterKind)> = subset
                .iter()
                .filter_map(|i| kinds.get(*i).map(|(n, k)| (*n, k)))
                .collect();
            let got = extract(&params, text, locale);
            let mut spans: Vec<Range<usize>> = Vec::new();
            for e in &got.values {
                assert!(e.span.start < e.span.end && e.span.end <= text.len());
                assert!(text.is_char_boundary(e.span.start));
                assert!(text.is_char_boundary(e.span.end));
                assert!(!overlaps(&spans, &e.span), "spans used once");
                spans.push(e.span.clone());
                let kind = params
                    .iter()
                    .find(|(n, _)| *n == e.name)
                    .map(|(_, k)| *k)
                    .expect("known name");
                assert!(kind.is_typed());
                // Every extracted value is itself canonical and valid.
                let again = kind.validate(&e.value, locale);
                assert_eq!(again.as_ref(), Ok(&e.value), "{:?} {:?}", e, text);
            }
            for r in &got.rejected {
                assert!(got.value(&r.name).is_none());
                assert!(text.contains(&r.invalid.raw));
            }
        }
        for (_, kind) in &kinds {
            let _ = kind.validate(&Value::String(text.to_string()), locale);
        }
    }
}

proptest! {
    #[test]
    fn extract_never_panics_on_arbitrary_text(text in any::<String>()) {
        check_extraction(&text);
    }

    #[test]
    fn extract_never_panics_on_numeric_soup(text in fragments()) {
        check_extraction(&text);
    }

    #[test]
    fn validate_never_panics_on_numbers(f in any::<f64>(), i in any::<i64>(), u in any::<u64>()) {
        for (_, kind) in all_kinds() {
            for raw in [json!(f), json!(i), json!(u)] {
                let _ = kind.validate(&raw, Locale::En);
            }
        }
    }
}

// --- MG-4: space-grouped money, ids in any case ----------------------------------------------

#[test]
fn money_accepts_space_as_thousands_separator() {
    // MG-4: `.`, `,` and a space (also U+00A0, U+202F) group thousands; all read whole.
    let kind = ParameterKind::Money;
    let forms = [
        "R$ 1.234,56",
        "1,234.56",
        "R$ 1 234,56",
        "1 234,56",
        "R$\u{a0}1\u{a0}234,56",
        "1\u{202f}234,56",
        "1 234.56",
        "1 234,56 reais",
    ];
    for locale in Locale::ALL {
        for form in forms {
            assert_eq!(
                kind.validate(&json!(form), locale),
                Ok(json!("1234.56")),
                "validate {form:?}"
            );
            let text = format!("o valor é {form}");
            assert_eq!(one(&kind, &text, locale), Some(json!("1234.56")), "{text}");
        }
    }
    assert_eq!(
        kind.validate(&json!("R$ 1 234 567,89"), Locale::PtBr),
        Ok(json!("1234567.89"))
    );
    assert_eq!(
        one(&kind, "R$ 1 234", Locale::PtBr),
        Some(json!("1234.00")),
        "a currency marker makes a space-grouped integer one literal"
    );
    let got = extract(
        &[("amount", &kind)],
        "paguei R$ 1 234,56 ontem",
        Locale::PtBr,
    );
    let span = got.values.first().map(|e| e.span.clone()).unwrap_or(0..0);
    assert_eq!("paguei R$ 1 234,56 ontem".get(span), Some("R$ 1 234,56"));
    // A stray space elsewhere is still not a number.
    assert_eq!(
        reason(&kind, json!("12 34,56"), Locale::PtBr),
        InvalidReason::Format
    );
}

#[test]
fn a_space_grouped_number_is_never_read_in_part() {
    // MG-4: `1 234,56` is never `1.00`, `234,56`, the integer 1 or the id `234`.
    let house = ParameterKind::Integer {
        min: Some(1),
        max: Some(99999),
    };
    let short_id = id("[0-9]{3}");
    for text in [
        "1 234,56",
        "R$ 1 234,56",
        "o valor é 1 234,56",
        "R$ 1 234 567,89",
    ] {
        for kind in [&house, &ParameterKind::Money, &short_id, &integer()] {
            let got = extract(&[("p", kind)], text, Locale::PtBr);
            for e in &got.values {
                assert!(
                    !matches!(e.value.as_str(), Some("1.00" | "234.56" | "234")),
                    "{text}: partial read {e:?}"
                );
                assert_ne!(e.value, json!(1), "{text}");
            }
            if kind != &ParameterKind::Money {
                assert!(got.values.is_empty(), "{text} for {kind:?}: {got:?}");
            }
        }
    }
    // A whole space-grouped number that is not valid money reads as nothing, not as a part.
    let got = extract(
        &[("amount", &ParameterKind::Money)],
        "1 234,567",
        Locale::PtBr,
    );
    assert!(got.values.is_empty());
    // A number param reads it whole.
    assert_eq!(
        one(&ParameterKind::Number, "1 234,5", Locale::PtBr),
        Some(json!(1234.5))
    );
}

#[test]
fn ids_are_matched_in_any_case_and_stored_in_the_patterns_case() {
    // MG-4: `ped-1001` is `PED-1001`.
    let kind = id("PED-[0-9]{4,}");
    for text in ["ped-1001", "Ped-1001", "o pedido é pEd-1001.", "PED-1001"] {
        let got = extract(&[("order", &kind)], text, Locale::PtBr);
        assert_eq!(got.value("order"), Some(&json!("PED-1001")), "{text}");
        assert!(got.rejected.is_empty(), "{text}");
    }
    let lower = id("ord_[a-z]{3}[0-9]+");
    assert_eq!(
        lower.validate(&json!("ORD_ABC12"), Locale::En),
        Ok(json!("ord_abc12"))
    );
    let upper_tail = id("INC-[A-Z]{2}[0-9]+");
    assert_eq!(
        upper_tail.validate(&json!("inc-ab12"), Locale::En),
        Ok(json!("INC-AB12"))
    );
    let pattern = IdPattern::new("PED-[0-9]{4,}").expect("valid");
    assert!(pattern.is_match("ped-1001"));
    assert_eq!(pattern.canonical("ped-12"), None);
}
