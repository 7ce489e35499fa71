//! CEP (Brazilian zip code): `01310-100`, `01310100`, `01.310-100`, canonical `"NNNNN-NNN"`.

/// `01310-100`, `01310100`, `01.310-100` → `01310-100`.
pub(super) fn cep_canonical(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let shaped = match b.len() {
        8 => b.iter().all(u8::is_ascii_digit),
        9 => b.iter().enumerate().all(|(i, c)| match i {
            5 => *c == b'-',
            _ => c.is_ascii_digit(),
        }),
        10 => b.iter().enumerate().all(|(i, c)| match i {
            2 => *c == b'.',
            6 => *c == b'-',
            _ => c.is_ascii_digit(),
        }),
        _ => false,
    };
    if !shaped {
        return None;
    }
    let digits: String = s.chars().filter(char::is_ascii_digit).collect();
    let (head, tail) = digits.split_at_checked(5)?;
    Some(format!("{head}-{tail}"))
}
