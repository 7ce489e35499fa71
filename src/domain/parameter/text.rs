//! Text normalisation: folded words (case and accents ignored), tokens and spans of a message.

use std::ops::Range;

/// Lowercases and removes accents (`Cartão` → `cartao`).
pub(super) fn fold(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        fold_into(c, &mut out);
    }
    out
}

fn fold_into(c: char, out: &mut String) {
    for lc in c.to_lowercase() {
        if is_combining(lc) {
            continue;
        }
        out.push(strip_accent(lc));
    }
}

fn is_combining(c: char) -> bool {
    ('\u{300}'..='\u{36f}').contains(&c)
}

fn strip_accent(c: char) -> char {
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ă' | 'ą' => 'a',
        'ç' | 'ć' | 'č' => 'c',
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ė' | 'ę' | 'ě' => 'e',
        'ì' | 'í' | 'î' | 'ï' | 'ī' | 'į' => 'i',
        'ñ' | 'ń' | 'ň' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ō' | 'ő' => 'o',
        'ù' | 'ú' | 'û' | 'ü' | 'ū' | 'ů' | 'ű' => 'u',
        'ý' | 'ÿ' => 'y',
        other => other,
    }
}

/// Words of a text (runs of letters and digits), folded, with their byte ranges.
pub(super) fn words(text: &str) -> Vec<(Range<usize>, String)> {
    let mut out = Vec::new();
    let mut current: Option<(usize, String)> = None;
    for (i, c) in text.char_indices() {
        if c.is_alphanumeric() || is_combining(c) {
            let (_, word) = current.get_or_insert_with(|| (i, String::new()));
            fold_into(c, word);
        } else if let Some((start, word)) = current.take() {
            out.push((start..i, word));
        }
    }
    if let Some((start, word)) = current {
        out.push((start..text.len(), word));
    }
    out.retain(|(_, w)| !w.is_empty());
    out
}

pub(super) fn phrase(text: &str) -> Vec<String> {
    words(text).into_iter().map(|(_, w)| w).collect()
}

pub(super) fn is_inline_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\u{a0}' | '\u{202f}')
}

/// Whitespace-separated tokens with punctuation trimmed from both ends.
pub(super) fn tokens(text: &str) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let mut start = None;
    let push = |s: usize, e: usize, out: &mut Vec<Range<usize>>| {
        let raw = text.get(s..e).unwrap_or("");
        let front = raw.trim_start_matches(|c: char| !c.is_alphanumeric());
        let both = front.trim_end_matches(|c: char| !c.is_alphanumeric());
        if !both.is_empty() {
            let ts = s + (raw.len() - front.len());
            out.push(ts..ts + both.len());
        }
    };
    for (i, c) in text.char_indices() {
        if c.is_whitespace() {
            if let Some(s) = start.take() {
                push(s, i, &mut out);
            }
        } else if start.is_none() {
            start = Some(i);
        }
    }
    if let Some(s) = start {
        push(s, text.len(), &mut out);
    }
    out
}

pub(super) fn overlaps(taken: &[Range<usize>], span: &Range<usize>) -> bool {
    taken
        .iter()
        .any(|t| t.start < span.end && span.start < t.end)
}

pub(super) fn slice(text: &str, span: &Range<usize>) -> String {
    text.get(span.clone()).unwrap_or("").to_string()
}
