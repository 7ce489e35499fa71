//! Helpers every wire format shares: strict JSON parsing, RFC 3339 times, ids, bounded text.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer};
use time::format_description::well_known::Rfc3339;
use time::OffsetDateTime;

pub(crate) use crate::message::rejection::truncate_chars;
use crate::message::rejection::{DeadLetterReason, Rejection};

/// Parses `bytes` as one JSON document of type `T`, telling apart the three ways it can fail:
/// not UTF-8, not JSON, and JSON of the wrong shape (the path of the offending field is named).
pub(crate) fn parse_json<T: DeserializeOwned>(
    bytes: &[u8],
    schema_file: &str,
) -> Result<T, Rejection> {
    let text = std::str::from_utf8(bytes).map_err(|e| {
        Rejection::new(
            DeadLetterReason::InvalidUtf8,
            format!(
                "payload is not UTF-8 (first bad byte at {}); encode the JSON as UTF-8 ({schema_file})",
                e.valid_up_to()
            ),
        )
    })?;
    // Two passes: into a JSON tree first, so "not JSON" (including lone surrogate escapes) is
    // told apart from "wrong shape" — a typed pass alone stops at the first unknown field and
    // would report a document broken further on as a schema violation. The tree also gives the
    // same view a schema validator has (a repeated field: the last one wins), and serde_json's
    // recursion limit bounds the nesting depth.
    let tree: serde_json::Value = serde_json::from_str(text).map_err(|e| {
        Rejection::new(
            DeadLetterReason::Undecodable,
            format!("payload is not JSON: {e}; send one JSON object ({schema_file})"),
        )
    })?;
    let value = serde_path_to_error::deserialize(tree).map_err(|e| {
        let path = e.path().to_string();
        Rejection::new(
            DeadLetterReason::SchemaViolation,
            format!(
                "at `{path}`: {}; send a message matching {schema_file}",
                e.into_inner()
            ),
        )
    })?;
    Ok(value)
}

/// `deserialize_with` for an optional field that, when present, must not be `null`: the schemas
/// say e.g. `"locale": {"enum": ["en", "pt-BR"]}`, which `null` does not match, and serde's
/// `Option` would otherwise read `null` as absent. Pair with `#[serde(default)]`.
pub(crate) fn present<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(d).map(Some)
}

/// `deserialize_with` for a required field that may be `null` (`"type": ["string", "null"]`):
/// using `deserialize_with` turns off serde's "missing `Option` is `None`", so absence is an error.
pub(crate) fn nullable<'de, D, T>(d: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    Option::<T>::deserialize(d)
}

/// Milliseconds since the Unix epoch of an RFC 3339 date-time (`2026-01-01T10:00:00.5-03:00`).
///
/// The `time` parser accepts any character between date and time; RFC 3339 (and JSON Schema's
/// `date-time`) allow only `T` or `t`, so that is checked first to agree with the schema.
pub(crate) fn parse_rfc3339_ms(text: &str) -> Option<i64> {
    if !matches!(text.as_bytes().get(10), Some(b'T' | b't')) {
        return None;
    }
    let at = OffsetDateTime::parse(text, &Rfc3339).ok()?;
    // Floor division so a time before 1970 with a fraction rounds toward the past, like the rest.
    i64::try_from(at.unix_timestamp_nanos().div_euclid(1_000_000)).ok()
}

/// The latest instant [`format_rfc3339_ms`] can write: 9999-12-31T23:59:59.999Z.
const MAX_FORMATTABLE_MS: i64 = 253_402_300_799_999;

/// `created_at` / `time` of outputs: UTC with exactly three fraction digits
/// (`2026-01-01T00:00:00.000Z`), so every message has the same shape. A wall clock before 1970
/// or past year 9999 is clamped rather than failing the turn.
pub fn format_rfc3339_ms(ms: i64) -> String {
    let ms = ms.clamp(0, MAX_FORMATTABLE_MS);
    let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000)
        .unwrap_or(OffsetDateTime::UNIX_EPOCH);
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        at.year(),
        u8::from(at.month()),
        at.day(),
        at.hour(),
        at.minute(),
        at.second(),
        at.millisecond()
    )
}

/// Checks one part of the conversation identity: non-empty, at most `max` characters (code
/// points, as JSON Schema counts them), no `/` (the key separator, so the key is unambiguous).
pub(crate) fn check_identity_part(field: &str, value: &str, max: usize) -> Result<(), String> {
    check_length(field, value, 1, max)?;
    if value.contains('/') {
        return Err(format!(
            "`{field}` contains \"/\", the key separator; use an id without \"/\""
        ));
    }
    Ok(())
}

/// Checks a string's length in code points against `min..=max`.
pub(crate) fn check_length(field: &str, value: &str, min: usize, max: usize) -> Result<(), String> {
    let n = value.chars().count();
    if n < min {
        return Err(format!("`{field}` is empty; send a non-empty value"));
    }
    if n > max {
        return Err(format!(
            "`{field}` has {n} characters, more than the {max} allowed; shorten it"
        ));
    }
    Ok(())
}

pub(crate) fn check_time(field: &str, value: &str) -> Result<i64, String> {
    parse_rfc3339_ms(value).ok_or_else(|| {
        format!(
            "`{field}` is not an RFC 3339 date-time; send e.g. \"2026-01-01T10:00:00Z\" or \
             \"2026-01-01T07:00:00.250-03:00\""
        )
    })
}

/// Lower-case hyphenated UUID, the only form outputs carry (`uuid::Uuid` also parses braced,
/// URN and simple forms, which the schemas' pattern rejects).
pub(crate) fn check_uuid(field: &str, value: &str) -> Result<(), String> {
    let ok = value.len() == 36
        && value.bytes().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => b == b'-',
            _ => b.is_ascii_digit() || (b'a'..=b'f').contains(&b),
        });
    if ok {
        Ok(())
    } else {
        Err(format!("`{field}` is not a lower-case hyphenated UUID"))
    }
}

/// The namespace of every id this module derives. Changing it changes every output id, which
/// breaks deduplication across a deploy: never change it.
const OUTPUT_NAMESPACE: uuid::Uuid =
    uuid::Uuid::from_u128(0x3c6e_2a1f_8d4b_5e07_a9c2_71f0_4b8d_e613);

/// A UUIDv5 of the parts. Each part is length-prefixed, so no choice of part contents (a turn id
/// may hold any character) can make two different part lists collide.
pub(crate) fn derive_id(parts: &[&[u8]]) -> String {
    let mut name = Vec::with_capacity(parts.iter().map(|p| p.len() + 8).sum());
    for part in parts {
        name.extend_from_slice(part.len().to_string().as_bytes());
        name.push(b':');
        name.extend_from_slice(part);
    }
    uuid::Uuid::new_v5(&OUTPUT_NAMESPACE, &name).to_string()
}

/// The longest prefix of `bytes` of at most `max` bytes.
pub(crate) fn cap(bytes: &[u8], max: usize) -> (&[u8], bool) {
    if bytes.len() > max {
        (&bytes[..max], true)
    } else {
        (bytes, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_millisecond_precision_and_clamps() {
        assert_eq!(format_rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            format_rfc3339_ms(1_767_225_600_123),
            "2026-01-01T00:00:00.123Z"
        );
        assert_eq!(format_rfc3339_ms(-5), "1970-01-01T00:00:00.000Z");
        assert_eq!(format_rfc3339_ms(i64::MAX), "9999-12-31T23:59:59.999Z");
    }

    #[test]
    fn parses_rfc3339_forms_and_rejects_other_separators() {
        assert_eq!(
            parse_rfc3339_ms("2026-01-01T00:00:00Z"),
            Some(1_767_225_600_000)
        );
        assert_eq!(
            parse_rfc3339_ms("2025-12-31t21:00:00.5-03:00"),
            Some(1_767_225_600_500)
        );
        assert_eq!(parse_rfc3339_ms("2026-01-01 00:00:00Z"), None);
        assert_eq!(parse_rfc3339_ms("2026-01-01"), None);
        assert_eq!(parse_rfc3339_ms("1969-12-31T23:59:59.9995Z"), Some(-1));
        assert_eq!(parse_rfc3339_ms("é"), None);
    }

    #[test]
    fn derived_ids_are_injective_over_part_boundaries() {
        assert_ne!(derive_id(&[b"ab", b"c"]), derive_id(&[b"a", b"bc"]));
        assert_eq!(derive_id(&[b"x"]), derive_id(&[b"x"]));
        assert!(check_uuid("id", &derive_id(&[b"x"])).is_ok());
    }

    #[test]
    fn truncation_counts_characters() {
        assert_eq!(truncate_chars("ação", 10), "ação");
        assert_eq!(truncate_chars("ação", 3), "aç…");
        assert_eq!(truncate_chars("abc", 0), "");
    }
}
