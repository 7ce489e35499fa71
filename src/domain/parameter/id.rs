//! Ids: a configured id pattern, matched in any case and stored in the pattern's case.

use std::fmt;

use regex::Regex;

/// Digits in groups of one to three separated by single spaces (`382 406`, `38 24 06`): an
/// id's plain form dictated in groups ([`IdPattern::canonical_plain_grouped`]).
pub static DIGIT_GROUPS: std::sync::LazyLock<Regex> = std::sync::LazyLock::new(|| {
    #[allow(clippy::expect_used)]
    Regex::new(r"\b[0-9]{1,3}(?: [0-9]{1,3})+\b").expect("static regex is valid")
});

/// A configured id pattern (e.g. `PED-[0-9]{4,}`).
///
/// Matching ignores case (`ped-1001` is an attempt at `PED-1001`); the stored value is put in
/// the pattern's case by [`IdPattern::canonical`] (MG-4).
#[derive(Debug, Clone)]
pub struct IdPattern {
    source: String,
    /// `^(?i:pattern)$`: whether a value given directly is a whole id, in any case.
    anchored: Regex,
    /// `^(?:pattern)$`: whether a value is already in the pattern's case.
    exact: Regex,
    /// `(?i:pattern)`: finds the id inside a sentence.
    pub(super) search: Regex,
    /// The pattern's literal prefix as configured (`PED-`), empty when there is none usable.
    pub(super) prefix: String,
    /// MG-4a: the prefix's letters with any separator or none before the rest (`ped 1001`,
    /// `Ped1001`, `PED_1001`): a distinctive form. `None` without a usable prefix.
    pub(super) loose: Option<Regex>,
    /// MG-4a: the rest alone (`^(?:[0-9]{4,})$`): a plain form, for a token.
    pub(super) plain: Option<Regex>,
    /// RP-4: the prefix's letters typed loosely before digits that are not the id's rest (`ped
    /// 211` for `PED-[0-9]{4,}`): a near-miss to explain.
    pub(super) loose_digits: Option<Box<Regex>>,
    /// MG-4a: the prefix's letters before digits in groups of one to three, as dictated or
    /// read aloud (`ped 35 92 47`, `ped 356 880`): the groups together are the rest.
    pub(super) grouped: Option<Box<Regex>>,
}

impl IdPattern {
    /// Compiles a pattern. Fails on an invalid regex or one that matches the empty string.
    pub fn new(pattern: &str) -> Result<IdPattern, String> {
        if pattern.trim().is_empty() {
            return Err("id pattern is empty".to_string());
        }
        Regex::new(pattern).map_err(|e| format!("invalid id pattern `{pattern}`: {e}"))?;
        let core = strip_anchors(pattern);
        let compile = |wrapped: String| {
            Regex::new(&wrapped).map_err(|e| format!("invalid id pattern `{pattern}`: {e}"))
        };
        let anchored = compile(format!("^(?i:{core})$"))?;
        let exact = compile(format!("^(?:{core})$"))?;
        let search = compile(format!("(?i:{core})"))?;
        if anchored.is_match("") {
            return Err(format!("id pattern `{pattern}` matches the empty string"));
        }
        let prefix = literal_prefix(core);
        let grouped = match loose_forms(core, &prefix) {
            Some((head, _)) => Some(Box::new(compile(format!(
                "(?i:{})[ \\-_./#]?[0-9]{{1,3}}(?: [0-9]{{1,3}})+\\b",
                regex::escape(&head)
            ))?)),
            None => None,
        };
        let (loose, plain, loose_digits) = match loose_forms(core, &prefix) {
            Some((head, rest)) => (
                Some(compile(format!(
                    "(?i:{})[ \\-_./#]?(?:{rest})",
                    regex::escape(&head)
                ))?),
                Some(compile(format!("^(?:{rest})$"))?),
                Some(Box::new(compile(format!(
                    "(?i:{})[ \\-_./#]?[0-9]+",
                    regex::escape(&head)
                ))?)),
            ),
            None => (None, None, None),
        };
        Ok(IdPattern {
            source: pattern.to_string(),
            anchored,
            exact,
            search,
            prefix,
            loose,
            plain,
            loose_digits,
            grouped,
        })
    }

    /// Byte ranges of the ids in `text`, in any case and in the loose distinctive forms
    /// (`ped 1001`, `Ped1001`; MG-4a), in order and not overlapping.
    pub fn find_in(&self, text: &str) -> Vec<std::ops::Range<usize>> {
        self.loose
            .as_ref()
            .unwrap_or(&self.search)
            .find_iter(text)
            .map(|m| m.range())
            .collect()
    }

    /// The pattern as configured.
    pub fn as_str(&self) -> &str {
        &self.source
    }

    /// Whether `value` (already trimmed) is a whole id, in any case (`ped-1001`).
    pub fn is_match(&self, value: &str) -> bool {
        self.anchored.is_match(value)
    }

    /// The id as stored (MG-4): `None` when `value` (already trimmed) is not a whole id in any
    /// case; otherwise the first of these that the pattern matches as configured: the value as
    /// typed, the value with its prefix in the pattern's case (`ped-1001` → `PED-1001`), all
    /// upper case, all lower case. When none does (a mixed-case pattern), the prefix-cased form.
    pub fn canonical(&self, value: &str) -> Option<String> {
        if !self.anchored.is_match(value) {
            return None;
        }
        let prefixed = self.with_prefix_case(value);
        [
            value.to_string(),
            prefixed.clone(),
            value.to_uppercase(),
            value.to_lowercase(),
        ]
        .into_iter()
        .find(|v| self.exact.is_match(v))
        .or(Some(prefixed))
    }

    /// `value` with its first characters replaced by the configured prefix when they are that
    /// prefix in another case.
    fn with_prefix_case(&self, value: &str) -> String {
        let n = self.prefix.chars().count();
        let head: String = value.chars().take(n).collect();
        if n == 0 || head.to_lowercase() != self.prefix.to_lowercase() {
            return value.to_string();
        }
        let tail: String = value.chars().skip(n).collect();
        format!("{}{tail}", self.prefix)
    }

    /// MG-4a: the canonical id of a loose distinctive form (`ped 1001` → `PED-1001`): the
    /// configured prefix, then the rest after the prefix's letters and one optional separator.
    pub(super) fn canonical_loose(&self, matched: &str) -> Option<String> {
        let head = prefix_head(&self.prefix);
        let n = head.chars().count();
        let lead: String = matched.chars().take(n).collect();
        if n == 0 || lead.to_lowercase() != head.to_lowercase() {
            return None;
        }
        let rest: String = matched.chars().skip(n).collect();
        let rest = rest.trim_start_matches([' ', '-', '_', '.', '/', '#']);
        self.canonical(&format!("{}{rest}", self.prefix))
    }

    /// MG-4a: the canonical id of a grouped form (`ped 35 92 47` → `PED-359247`).
    pub(super) fn canonical_grouped(&self, matched: &str) -> Option<String> {
        let head = prefix_head(&self.prefix);
        let lead: String = matched.chars().take(head.chars().count()).collect();
        let rest: String = matched
            .chars()
            .skip(head.chars().count())
            .filter(|c| c.is_ascii_digit())
            .collect();
        self.canonical_loose(&format!("{lead}{rest}"))
    }

    /// MG-4a: the canonical id of a plain form dictated in groups (`382 406` → `PED-382406`):
    /// the groups' digits together in the plain form. Only groups of one to three digits
    /// separated by single spaces, two groups or more.
    pub fn canonical_plain_grouped(&self, run: &str) -> Option<String> {
        let groups: Vec<&str> = run.split(' ').collect();
        let grouped = groups.len() >= 2
            && groups
                .iter()
                .all(|g| (1..=3).contains(&g.len()) && g.bytes().all(|b| b.is_ascii_digit()));
        if !grouped {
            return None;
        }
        self.canonical_plain(&groups.concat())
    }

    /// MG-4a: the prefix's letters before digits in groups (`ped 11 427`), as byte ranges with
    /// the canonical id each is.
    pub fn find_grouped_in(&self, text: &str) -> Vec<(std::ops::Range<usize>, String)> {
        self.grouped
            .iter()
            .flat_map(|g| g.find_iter(text))
            .filter_map(|m| Some((m.range(), self.canonical_grouped(m.as_str())?)))
            .collect()
    }

    /// MG-4a: the canonical id of a plain form (`1001` → `PED-1001`).
    pub fn canonical_plain(&self, token: &str) -> Option<String> {
        let plain = self.plain.as_ref()?;
        if !plain.is_match(token) {
            return None;
        }
        self.canonical(&format!("{}{token}", self.prefix))
    }

    /// Whether `token` starts with the pattern's literal prefix, in any case.
    pub(super) fn has_prefix(&self, token: &str) -> bool {
        let n = self.prefix.chars().count();
        let head: String = token.chars().take(n).collect();
        n > 0 && head.to_lowercase() == self.prefix.to_lowercase()
    }
}

impl PartialEq for IdPattern {
    fn eq(&self, other: &Self) -> bool {
        self.source == other.source
    }
}

impl Eq for IdPattern {}

impl fmt::Display for IdPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

/// Removes one leading `^`/`\A` and one trailing unescaped `$`/`\z`.
fn strip_anchors(pattern: &str) -> &str {
    let mut core = pattern;
    if let Some(rest) = core.strip_prefix('^') {
        core = rest;
    } else if let Some(rest) = core.strip_prefix("\\A") {
        core = rest;
    }
    for suffix in ["$", "\\z"] {
        if let Some(rest) = core.strip_suffix(suffix) {
            let backslashes = rest.chars().rev().take_while(|c| *c == '\\').count();
            if backslashes % 2 == 0 {
                core = rest;
                break;
            }
        }
    }
    core
}

/// The prefix without its trailing separators (`PED-` → `PED`).
fn prefix_head(prefix: &str) -> &str {
    prefix.trim_end_matches(['-', '_', '.', '/', '#', ':', ' '])
}

/// MG-4a: (the prefix's letters, the pattern after the prefix) when the pattern starts with its
/// prefix as plain text and the prefix has letters to recognise (`PED-[0-9]{4,}` →
/// (`PED`, `[0-9]{4,}`)); `None` otherwise (no loose forms are read).
fn loose_forms(core: &str, prefix: &str) -> Option<(String, String)> {
    let rest = core.strip_prefix(prefix)?;
    let head = prefix_head(prefix);
    if rest.is_empty() || !head.chars().any(char::is_alphabetic) {
        return None;
    }
    Some((head.to_owned(), rest.to_owned()))
}

/// The literal text every match starts with, as configured; empty when there is none usable.
pub(super) fn literal_prefix(core: &str) -> String {
    if core.contains('|') {
        return String::new();
    }
    let mut prefix: Vec<char> = Vec::new();
    let mut chars = core.chars();
    let mut stop = None;
    while let Some(c) = chars.next() {
        if c.is_alphanumeric() || matches!(c, '-' | '_' | ':' | '/' | '#' | '@') {
            prefix.push(c);
        } else if c == '\\' {
            match chars.next() {
                Some(n) if n.is_ascii_punctuation() => prefix.push(n),
                _ => break,
            }
        } else {
            stop = Some(c);
            break;
        }
    }
    if matches!(stop, Some('?' | '*' | '{')) {
        prefix.pop();
    }
    if prefix.len() < 2 {
        return String::new();
    }
    prefix.into_iter().collect::<String>()
}
