//! Dates: `YYYY-MM-DD`, or day and month in the locale's order, canonical `"YYYY-MM-DD"`.

use crate::domain::locale::Locale;

use super::number::is_digits;
use super::InvalidReason;

/// Reads a date-shaped string: `None` if it is not date-shaped, otherwise the canonical date or
/// `OutOfRange` for an impossible one.
pub(super) fn parse_date(s: &str, locale: Locale) -> Option<Result<String, InvalidReason>> {
    let parts: Vec<&str> = s.split('-').collect();
    let (year, month, day) = match parts.as_slice() {
        [y, m, d] if y.len() == 4 && (1..=2).contains(&m.len()) && (1..=2).contains(&d.len()) => {
            (*y, *m, *d)
        }
        _ => {
            let parts: Vec<&str> = s.split('/').collect();
            match parts.as_slice() {
                [a, b, y]
                    if y.len() == 4 && (1..=2).contains(&a.len()) && (1..=2).contains(&b.len()) =>
                {
                    match locale {
                        Locale::PtBr => (*y, *b, *a),
                        Locale::En => (*y, *a, *b),
                    }
                }
                _ => return None,
            }
        }
    };
    if !(is_digits(year) && is_digits(month) && is_digits(day)) {
        return None;
    }
    let (Ok(y), Ok(m), Ok(d)) = (
        year.parse::<u32>(),
        month.parse::<u32>(),
        day.parse::<u32>(),
    ) else {
        return None;
    };
    if y == 0 || !(1..=12).contains(&m) || d == 0 || d > days_in_month(y, m) {
        return Some(Err(InvalidReason::OutOfRange));
    }
    Some(Ok(format!("{y:04}-{m:02}-{d:02}")))
}

fn days_in_month(year: u32, month: u32) -> u32 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if divisible(year, 4) && (!divisible(year, 100) || divisible(year, 400)) => 29,
        2 => 28,
        _ => 0,
    }
}

fn divisible(n: u32, by: u32) -> bool {
    n.checked_rem(by) == Some(0)
}
