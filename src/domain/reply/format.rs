//! Values in the reply's locale (RP-3): money, dates, numbers, yes/no, lists.

use serde_json::Value;

use crate::domain::locale::Locale;

/// The currency symbol when an assistant configures none (the example domain is in BRL).
pub const DEFAULT_CURRENCY_SYMBOL: &str = "R$";

const MONTHS_EN: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

/// A scalar as text (`null`, objects and arrays have none); booleans in the locale.
pub fn scalar(value: &Value, locale: Locale) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(
            match (b, locale) {
                (true, Locale::En) => "yes",
                (false, Locale::En) => "no",
                (true, Locale::PtBr) => "sim",
                (false, Locale::PtBr) => "não",
            }
            .to_owned(),
        ),
        _ => None,
    }
}

/// `R$ 1.234,56` (pt-BR) or `R$1,234.56` (en) from a canonical amount (`1234.56`), a number, or
/// a text with a currency marker and either decimal separator (`R$ 120.00`, `120,00`). `None`
/// when `raw` is not an amount.
pub fn money(raw: &str, locale: Locale, symbol: &str) -> Option<String> {
    let (negative, units, cents) = parse_amount(raw)?;
    let (group, decimal, space) = match locale {
        Locale::En => (',', '.', ""),
        Locale::PtBr => ('.', ',', " "),
    };
    let sign = if negative { "-" } else { "" };
    Some(format!(
        "{sign}{symbol}{space}{}{decimal}{cents:02}",
        grouped(units, group)
    ))
}

/// `10/01/2026` (pt-BR) or `Jan 10, 2026` (en) from an ISO date, or a date-time whose first ten
/// characters are one. `None` when `raw` is not a real date.
pub fn date(raw: &str, locale: Locale) -> Option<String> {
    let t = raw.trim();
    let head = t.get(..10)?;
    let rest = &t[10..];
    if !(rest.is_empty() || rest.starts_with('T') || rest.starts_with(' ')) {
        return None;
    }
    let mut parts = head.split('-');
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    if y.len() != 4 || m.len() != 2 || d.len() != 2 {
        return None;
    }
    let (y, m, d): (i32, u32, u32) = (y.parse().ok()?, m.parse().ok()?, d.parse().ok()?);
    if !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return None;
    }
    Some(match locale {
        Locale::En => format!("{} {d}, {y}", MONTHS_EN[(m - 1) as usize]),
        Locale::PtBr => format!("{d:02}/{m:02}/{y}"),
    })
}

/// A decimal number with the locale's decimal separator (`2,5` in pt-BR).
pub fn number(raw: &str, locale: Locale) -> String {
    match locale {
        Locale::En => raw.to_owned(),
        Locale::PtBr if raw.parse::<f64>().is_ok() => raw.replace('.', ","),
        Locale::PtBr => raw.to_owned(),
    }
}

/// `a`, `a and b`, `a, b and c` (`e` in pt-BR).
pub fn join_and(items: &[String], locale: Locale) -> String {
    let and = match locale {
        Locale::En => " and ",
        Locale::PtBr => " e ",
    };
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{}{and}{last}", init.join(", ")),
    }
}

/// The first letter upper-cased (`the bill` → `The bill`).
pub fn capitalised(text: &str) -> String {
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().chain(chars).collect(),
        None => String::new(),
    }
}

/// A customer's text cut at `max_chars` (with `…` when it was longer).
pub fn cut(text: &str, max_chars: usize) -> String {
    let mut out: String = text.chars().take(max_chars).collect();
    if text.chars().count() > max_chars {
        out.push('…');
    }
    out
}

/// A customer's text in quotation marks, cut at `max_chars`.
pub fn quoted(text: &str, max_chars: usize) -> String {
    format!("“{}”", cut(text, max_chars))
}

fn days_in_month(y: i32, m: u32) -> u32 {
    match m {
        2 if (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// `(negative, units, cents)` of an amount text, rounding half up beyond two decimals.
fn parse_amount(raw: &str) -> Option<(bool, u128, u32)> {
    let mut t = raw.trim();
    let negative = t.starts_with('-');
    t = t.trim_start_matches('-').trim();
    // A currency marker before or after the number: letters and symbols, not digits.
    t = t.trim_matches(|c: char| !(c.is_ascii_digit() || c == '.' || c == ',' || c == '-'));
    let t = t.trim_start_matches('-');
    let t: String = t
        .chars()
        .filter(|c| !matches!(c, ' ' | '\u{a0}' | '\u{202f}'))
        .collect();
    if t.is_empty()
        || !t
            .chars()
            .all(|c| c.is_ascii_digit() || c == '.' || c == ',')
    {
        return None;
    }
    // The decimal separator: with both `.` and `,` the last one; with one kind, a lone one
    // not followed by exactly three digits (`1.234` and `1,234,567` are thousands groups).
    let mixed = t.contains('.') && t.contains(',');
    let (int_part, frac) = match t.rfind(['.', ',']) {
        Some(i) => {
            let tail = &t[i + 1..];
            let lone = t.matches(['.', ',']).count() == 1;
            if mixed || (lone && tail.len() != 3) {
                (&t[..i], tail)
            } else {
                (t.as_str(), "")
            }
        }
        None => (t.as_str(), ""),
    };
    if frac.contains(['.', ',']) {
        return None;
    }
    let digits: String = int_part.chars().filter(char::is_ascii_digit).collect();
    if digits.is_empty() && frac.is_empty() {
        return None;
    }
    let units: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().ok()?
    };
    let f: Vec<u32> = frac.chars().filter_map(|c| c.to_digit(10)).collect();
    let mut cents = f.first().copied().unwrap_or(0) * 10 + f.get(1).copied().unwrap_or(0);
    let mut units = units;
    if f.get(2).is_some_and(|&d| d >= 5) {
        cents += 1;
        if cents == 100 {
            cents = 0;
            units += 1;
        }
    }
    Some((negative, units, cents))
}

fn grouped(units: u128, sep: char) -> String {
    let digits = units.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(sep);
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    // RP-3: money in the locale's format, from every form a value arrives in.
    #[test]
    fn rp3_money_in_both_locales() {
        for (raw, en, pt) in [
            ("120.00", "R$120.00", "R$ 120,00"),
            ("R$ 120.00", "R$120.00", "R$ 120,00"),
            ("R$ 71,99", "R$71.99", "R$ 71,99"),
            ("71.99", "R$71.99", "R$ 71,99"),
            ("1234.56", "R$1,234.56", "R$ 1.234,56"),
            ("R$ 1.234,56", "R$1,234.56", "R$ 1.234,56"),
            ("1,234.56", "R$1,234.56", "R$ 1.234,56"),
            ("1.234", "R$1,234.00", "R$ 1.234,00"),
            ("120", "R$120.00", "R$ 120,00"),
            ("0.5", "R$0.50", "R$ 0,50"),
            ("9.999", "R$9,999.00", "R$ 9.999,00"),
            ("1000000", "R$1,000,000.00", "R$ 1.000.000,00"),
            ("-10.5", "-R$10.50", "-R$ 10,50"),
        ] {
            assert_eq!(money(raw, Locale::En, "R$").as_deref(), Some(en), "{raw}");
            assert_eq!(money(raw, Locale::PtBr, "R$").as_deref(), Some(pt), "{raw}");
        }
        for bad in ["", "abc", "R$", "1-2"] {
            assert_eq!(money(bad, Locale::En, "R$"), None, "{bad}");
        }
        assert_eq!(money("10", Locale::En, "US$").as_deref(), Some("US$10.00"));
    }

    // RP-3: dates in the locale's format; anything else is not a date.
    #[test]
    fn rp3_dates_in_both_locales() {
        assert_eq!(
            date("2026-01-10", Locale::En).as_deref(),
            Some("Jan 10, 2026")
        );
        assert_eq!(
            date("2026-01-10", Locale::PtBr).as_deref(),
            Some("10/01/2026")
        );
        assert_eq!(
            date("2024-02-29T10:00:00Z", Locale::PtBr).as_deref(),
            Some("29/02/2024")
        );
        for bad in [
            "2026-02-30",
            "2026-13-01",
            "10/01/2026",
            "2026-1-10",
            "2026-01-10x",
        ] {
            assert_eq!(date(bad, Locale::En), None, "{bad}");
        }
    }

    #[test]
    fn scalars_lists_and_quotes() {
        assert_eq!(
            scalar(&Value::Bool(true), Locale::PtBr).as_deref(),
            Some("sim")
        );
        assert_eq!(scalar(&Value::Null, Locale::En), None);
        assert_eq!(number("2.5", Locale::PtBr), "2,5");
        let items = ["a".to_owned(), "b".to_owned(), "c".to_owned()];
        assert_eq!(join_and(&items, Locale::PtBr), "a, b e c");
        assert_eq!(capitalised("a fatura"), "A fatura");
        assert_eq!(quoted("abcdef", 3), "“abc…”");
    }
}
