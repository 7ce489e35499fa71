//! A message's parts as the embeddings model reads them apart: sentences, comma clauses, the
//! last clause, and how many number-like tokens it holds.

/// Every sentence of a message, trimmed (split at `.`, `!`, `?`, `;` followed by a space or the
/// end, the mark left out).
fn sentence_parts(message: &str) -> Vec<&str> {
    crate::domain::parameter::parts(message, &['.', '!', '?', ';'])
}

/// The sentences of a message, those of two words or more; none when the message is one
/// sentence.
pub(super) fn sentences(message: &str) -> Vec<&str> {
    let mut out: Vec<&str> = sentence_parts(message)
        .into_iter()
        .filter(|s| s.split_whitespace().count() >= 2)
        .collect();
    if out.len() < 2 {
        out.clear();
    }
    out
}

/// The last sentence of a message of several, however short (`sorry! 82790` → `82790`).
pub(super) fn last_sentence(message: &str) -> Option<&str> {
    let parts = sentence_parts(message);
    (parts.len() >= 2).then(|| parts.last().copied()).flatten()
}

/// The sentences of a message of several (those of two words or more), else the comma clauses
/// of its one sentence (a comma followed by a space: `1.050,00` is one number); never the whole
/// message.
pub(super) fn segments(message: &str) -> Vec<&str> {
    let sentences = sentences(message);
    if !sentences.is_empty() {
        return sentences;
    }
    let trimmed = message.trim().trim_end_matches(['.', '!', '?', ';']);
    let mut clauses = Vec::new();
    let mut start = 0;
    for (i, _) in trimmed.match_indices(',') {
        if trimmed[i + 1..].starts_with(char::is_whitespace) {
            clauses.push(&trimmed[start..i]);
            start = i + 1;
        }
    }
    if clauses.is_empty() {
        return Vec::new();
    }
    clauses.push(&trimmed[start..]);
    clauses.into_iter().map(str::trim).collect()
}

/// Words that join a second request to a first (folded, lower case): `and`, `e`.
const JOINS: &[&str] = &[" and ", " e "];

/// Words that may open the second request after the join: `and also`, `e também`.
const ADDING: &[&str] = &["also ", "then ", "também ", "tambem ", "depois "];

/// The two parts of a message that joins two requests with `and` / `e` at its first such join
/// (`please cancel PED-73688 and tell me how much my bill is`), each of three words or more,
/// the second without its `also` / `também`.
pub(super) fn conjoined(message: &str) -> Option<(&str, &str)> {
    let lower = message.to_lowercase();
    // Offsets found in the lower case must hold in the message.
    if lower.len() != message.len() {
        return None;
    }
    let at = JOINS
        .iter()
        .filter_map(|j| lower.find(j).map(|i| (i, j.len())))
        .min_by_key(|(i, _)| *i)?;
    let first = message.get(..at.0)?.trim();
    let mut second = message.get(at.0 + at.1..)?.trim();
    let second_lower = second.to_lowercase();
    if let Some(add) = ADDING.iter().find(|a| second_lower.starts_with(**a)) {
        second = second.get(add.len()..)?.trim();
    }
    let words = |s: &str| s.split_whitespace().count();
    (words(first) >= 3 && words(second) >= 3).then_some((first, second))
}

/// Words that open a purpose clause: what follows says why, not what is asked.
const PURPOSES: &[&str] = &[
    " to make sure ",
    " to check ",
    " to see if ",
    " so that ",
    " so i can ",
    " just to ",
    " para ver se ",
    " pra ver se ",
    " para confirmar ",
    " pra confirmar ",
    " para garantir ",
    " pra garantir ",
    " para saber ",
    " pra saber ",
    " para ter certeza ",
    " pra ter certeza ",
];

/// A one-sentence message split where a purpose clause starts (`can I talk to a person to make
/// sure it's really refunded?` → the request and why), each part of two words or more.
pub(super) fn purpose_parts(message: &str) -> Option<(&str, &str)> {
    // ASCII lowering keeps every byte offset of the message.
    let lowered = message.to_ascii_lowercase();
    let at = PURPOSES.iter().filter_map(|p| lowered.find(p)).min()?;
    let (head, tail) = (message.get(..at)?.trim(), message.get(at..)?.trim());
    (two_words_or_more(&head) && two_words_or_more(&tail)).then_some((head, tail))
}

pub(super) fn two_words_or_more(segment: &&str) -> bool {
    segment.split_whitespace().count() >= 2
}

/// The last clause of a message of several (split at `,` `.` `!` `;`), however short.
pub(super) fn last_clause(message: &str) -> Option<&str> {
    let (head, tail) = message
        .trim()
        .trim_end_matches(['.', '!', ';', ','])
        .rsplit_once([',', '.', '!', ';'])?;
    let tail = tail.trim();
    (!head.trim().is_empty() && !tail.is_empty()).then_some(tail)
}

/// Where a closing would stand: the last clause (five words at most: `that will be all`, `tenha
/// uma boa tarde`), or in a message of three words or more typed without punctuation its last
/// two words and its last one (`tá bom
/// obrigado tchau` → `obrigado tchau`, `tchau`; `tá bom brigado era isso` → `era isso`, `isso`).
pub(super) fn closing_tails(message: &str) -> Vec<&str> {
    const SHORT: usize = 3;
    const CLAUSE: usize = 5;
    if let Some(last) = last_clause(message) {
        return if last.split_whitespace().count() <= CLAUSE {
            vec![last]
        } else {
            Vec::new()
        };
    }
    let trimmed = message.trim().trim_end_matches(['.', '!']);
    let starts: Vec<usize> = trimmed
        .split_whitespace()
        .map(|w| w.as_ptr() as usize - trimmed.as_ptr() as usize)
        .collect();
    if starts.len() < SHORT {
        return Vec::new();
    }
    starts
        .iter()
        .rev()
        .take(2)
        .rev()
        .filter_map(|&start| trimmed.get(start..))
        .collect()
}

/// A statement closed by a tag that asks for agreement (`então ele sai amanhã né`, `it ships
/// tomorrow, right`): a question, whatever its words.
pub(super) fn asks_for_agreement(message: &str) -> bool {
    let trimmed = message
        .trim()
        .trim_end_matches(['.', '!', ' '])
        .to_lowercase();
    let last = trimmed.rsplit(char::is_whitespace).next().unwrap_or("");
    matches!(last, "né" | "ne" | "neh") || trimmed.ends_with(", right")
}

/// Runs of digits (with the separators inside a number: `1.050,00`, `01310-100`, `PED-1001`
/// counts once) in a message.
pub(super) fn number_like_tokens(message: &str) -> usize {
    let mut count = 0;
    let mut in_token = false;
    let mut chars = message.chars().peekable();
    while let Some(c) = chars.next() {
        let joins = matches!(c, '.' | ',' | '-' | '/')
            && in_token
            && chars.peek().is_some_and(char::is_ascii_digit);
        if c.is_ascii_digit() {
            if !in_token {
                count += 1;
            }
            in_token = true;
        } else if !joins {
            in_token = false;
        }
    }
    count
}

/// The number-like token that ends a message (only punctuation, symbols or spaces after it).
pub(super) fn trailing_number(message: &str) -> Option<&str> {
    let end = message.trim_end_matches(|c: char| !c.is_alphanumeric());
    let start = end
        .char_indices()
        .rev()
        .take_while(|&(i, c)| {
            c.is_ascii_digit()
                || (matches!(c, '.' | ',' | '-' | '/')
                    && end[i + 1..].starts_with(|n: char| n.is_ascii_digit()))
        })
        .last()
        .map(|(i, _)| i)?;
    Some(&end[start..]).filter(|t| t.starts_with(|c: char| c.is_ascii_digit()))
}
