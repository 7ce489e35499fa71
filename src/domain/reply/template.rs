//! The reply template language, one for the message templates and the tools' result templates.
//!
//! - `{name}` is a value: `{tool}`, `{order_id}`, a dotted path into a tool's response
//!   (`{address.zip_code}`); `{name:format}` shows it in the locale's format (`{amount:money}`,
//!   `{due_date:date}`).
//! - `{name|masculine form|feminine form}` agrees with the gender of what `name` names (pt-BR:
//!   `{tool|concluído|concluída}`).
//! - `[...]` is an optional segment: it is left out, brackets and all, when any value inside it
//!   is missing or empty (`[: {reason}]`, `[ It ships within {estimated_shipping}.]`). Segments
//!   do not nest.
//! - `{{`, `}}`, `[[`, `]]` are the literal characters.
//!
//! A value missing outside an optional segment renders as nothing and is reported in
//! [`Rendered::missing`], so a caller can fall back (a result template whose field is absent)
//! instead of showing a raw `{x}`.

use crate::domain::wording::Gender;

/// One `{...}`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Slot {
    pub name: String,
    /// `{name:format}`.
    pub format: Option<String>,
    /// `{name|masculine|feminine}`.
    pub forms: Option<(String, String)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Piece {
    Text(String),
    Slot(Slot),
    Optional(Vec<Piece>),
}

/// A parsed template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    pieces: Vec<Piece>,
}

/// What rendering gave: the text, and the values that were missing outside optional segments.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rendered {
    pub text: String,
    pub missing: Vec<String>,
}

/// Where a template's values come from.
pub trait Resolve {
    /// The value of `name` shown with `format`; `None` when there is none.
    fn value(&self, name: &str, format: Option<&str>) -> Option<String>;
    /// The gender of what `name` names, for `{name|m|f}`.
    fn gender(&self, name: &str) -> Option<Gender>;
}

impl Template {
    /// Parses `text`; the error says what is wrong and where, for a configuration error.
    pub fn parse(text: &str) -> Result<Template, String> {
        let mut top: Vec<Piece> = Vec::new();
        let mut optional: Option<Vec<Piece>> = None;
        let mut literal = String::new();
        let mut chars = text.char_indices().peekable();
        while let Some((at, c)) = chars.next() {
            let doubled = chars.peek().is_some_and(|&(_, n)| n == c);
            match c {
                '{' | '}' | '[' | ']' if doubled => {
                    chars.next();
                    literal.push(c);
                }
                '{' => {
                    let mut inner = String::new();
                    let mut closed = false;
                    for (_, n) in chars.by_ref() {
                        if n == '}' {
                            closed = true;
                            break;
                        }
                        if n == '{' {
                            return Err(format!("`{{` inside a placeholder at character {at}"));
                        }
                        inner.push(n);
                    }
                    if !closed {
                        return Err(format!("`{{` at character {at} is never closed by `}}`"));
                    }
                    let slot = parse_slot(&inner).map_err(|e| format!("`{{{inner}}}`: {e}"))?;
                    let target = optional.as_mut().unwrap_or(&mut top);
                    flush(&mut literal, target);
                    target.push(Piece::Slot(slot));
                }
                '}' => {
                    return Err(format!(
                        "`}}` at character {at} closes nothing (write `}}}}` for a literal `}}`)"
                    ))
                }
                '[' => {
                    if optional.is_some() {
                        return Err(format!(
                            "`[` at character {at} opens a segment inside a segment (they do not \
                             nest; write `[[` for a literal `[`)"
                        ));
                    }
                    flush(&mut literal, &mut top);
                    optional = Some(Vec::new());
                }
                ']' => {
                    let Some(mut inner) = optional.take() else {
                        return Err(format!(
                            "`]` at character {at} closes nothing (write `]]` for a literal `]`)"
                        ));
                    };
                    flush(&mut literal, &mut inner);
                    top.push(Piece::Optional(inner));
                }
                _ => literal.push(c),
            }
        }
        if optional.is_some() {
            return Err("a `[` segment is never closed by `]`".into());
        }
        flush(&mut literal, &mut top);
        Ok(Template { pieces: top })
    }

    /// Every slot, with whether it stands inside an optional segment.
    pub fn slots(&self) -> Vec<(&Slot, bool)> {
        let mut out = Vec::new();
        for piece in &self.pieces {
            match piece {
                Piece::Slot(s) => out.push((s, false)),
                Piece::Optional(inner) => {
                    for p in inner {
                        if let Piece::Slot(s) = p {
                            out.push((s, true));
                        }
                    }
                }
                Piece::Text(_) => {}
            }
        }
        out
    }

    /// The literal text right before each slot outside and inside segments (for the
    /// configuration's "article before a phrase" check).
    pub fn text_before_slots(&self) -> Vec<(&Slot, String)> {
        let mut out = Vec::new();
        let mut before = String::new();
        walk(&self.pieces, &mut before, &mut out);
        out
    }

    pub fn render(&self, values: &dyn Resolve) -> Rendered {
        let mut out = Rendered::default();
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.text.push_str(t),
                Piece::Slot(s) => match resolve(s, values) {
                    Some(v) => out.text.push_str(&v),
                    None => out.missing.push(s.name.clone()),
                },
                Piece::Optional(inner) => {
                    let mut segment = String::new();
                    let complete = inner.iter().all(|p| match p {
                        Piece::Text(t) => {
                            segment.push_str(t);
                            true
                        }
                        Piece::Slot(s) => {
                            resolve(s, values).map(|v| segment.push_str(&v)).is_some()
                        }
                        Piece::Optional(_) => unreachable!("segments do not nest"),
                    });
                    if complete {
                        out.text.push_str(&segment);
                    }
                }
            }
        }
        out
    }
}

/// Parses and renders in one go; a template that does not parse is shown as written (the
/// configuration check refuses such templates, so this is for hand-built catalogs only).
pub fn render(template: &str, values: &dyn Resolve) -> Rendered {
    match Template::parse(template) {
        Ok(t) => t.render(values),
        Err(_) => Rendered {
            text: template.to_owned(),
            missing: Vec::new(),
        },
    }
}

fn walk<'t>(pieces: &'t [Piece], before: &mut String, out: &mut Vec<(&'t Slot, String)>) {
    for piece in pieces {
        match piece {
            Piece::Text(t) => before.push_str(t),
            Piece::Slot(s) => {
                out.push((s, std::mem::take(before)));
            }
            Piece::Optional(inner) => walk(inner, before, out),
        }
    }
}

/// A slot's value: gender forms pick by the named thing's gender (masculine when unknown), a
/// value must be present and not blank.
fn resolve(slot: &Slot, values: &dyn Resolve) -> Option<String> {
    if let Some((m, f)) = &slot.forms {
        return Some(match values.gender(&slot.name) {
            Some(Gender::Feminine) => f.clone(),
            _ => m.clone(),
        });
    }
    values
        .value(&slot.name, slot.format.as_deref())
        .filter(|v| !v.trim().is_empty())
}

fn flush(literal: &mut String, target: &mut Vec<Piece>) {
    if !literal.is_empty() {
        target.push(Piece::Text(std::mem::take(literal)));
    }
}

fn parse_slot(inner: &str) -> Result<Slot, String> {
    let is_name = |s: &str| {
        !s.is_empty()
            && s.split('.').all(|part| {
                !part.is_empty()
                    && part
                        .chars()
                        .all(|c| c.is_alphanumeric() || c == '_' || c == '-')
            })
    };
    if let Some((name, forms)) = inner.split_once('|') {
        let name = name.trim();
        let Some((m, f)) = forms.split_once('|') else {
            return Err("a gender choice needs two forms: `{name|masculine|feminine}`".into());
        };
        if f.contains('|') {
            return Err(
                "a gender choice has exactly two forms: `{name|masculine|feminine}`".into(),
            );
        }
        if !is_name(name) {
            return Err("the placeholder has no name".into());
        }
        return Ok(Slot {
            name: name.to_owned(),
            format: None,
            forms: Some((m.to_owned(), f.to_owned())),
        });
    }
    let (name, format) = match inner.split_once(':') {
        Some((n, f)) => (n.trim(), Some(f.trim().to_owned())),
        None => (inner.trim(), None),
    };
    if !is_name(name) {
        return Err(if name.is_empty() {
            "the placeholder has no name".into()
        } else {
            "a name has letters, digits, `_`, `-` and `.` between path parts only".into()
        });
    }
    if format.as_deref() == Some("") {
        return Err("`:` is followed by no format".into());
    }
    Ok(Slot {
        name: name.to_owned(),
        format,
        forms: None,
    })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    struct Map(BTreeMap<&'static str, &'static str>, Option<Gender>);

    impl Resolve for Map {
        fn value(&self, name: &str, format: Option<&str>) -> Option<String> {
            self.0.get(name).map(|v| match format {
                Some(f) => format!("{v}<{f}>"),
                None => (*v).to_owned(),
            })
        }
        fn gender(&self, _: &str) -> Option<Gender> {
            self.1
        }
    }

    fn values(pairs: &[(&'static str, &'static str)]) -> Map {
        Map(pairs.iter().copied().collect(), None)
    }

    // RP-1: names, dotted paths and formats; a missing value outside a segment is reported.
    #[test]
    fn rp1_values_paths_formats_and_missing() {
        let t = Template::parse("Order {order_id} to {address.zip_code}: {amount:money}.").unwrap();
        let r = t.render(&values(&[
            ("order_id", "PED-1"),
            ("address.zip_code", "01310-100"),
        ]));
        assert_eq!(r.text, "Order PED-1 to 01310-100: .");
        assert_eq!(r.missing, vec!["amount".to_owned()]);
        let r = t.render(&values(&[
            ("order_id", "PED-1"),
            ("address.zip_code", "01310-100"),
            ("amount", "1"),
        ]));
        assert_eq!(r.text, "Order PED-1 to 01310-100: 1<money>.");
        assert!(r.missing.is_empty());
    }

    // RP-1, RP-2: an optional segment is left out when a value inside it is missing or blank.
    #[test]
    fn rp1_rp2_optional_segments() {
        let t = Template::parse("Sorry, not possible[: {reason}].").unwrap();
        assert_eq!(t.render(&values(&[])).text, "Sorry, not possible.");
        assert_eq!(
            t.render(&values(&[("reason", "  ")])).text,
            "Sorry, not possible."
        );
        assert_eq!(
            t.render(&values(&[("reason", "shipped")])).text,
            "Sorry, not possible: shipped."
        );
        assert!(t.render(&values(&[])).missing.is_empty());
    }

    // RP-3: gender agreement picks a form by the named thing's gender.
    #[test]
    fn rp3_gender_forms() {
        let t = Template::parse("{Tool} foi {tool|concluído|concluída}.").unwrap();
        let mut v = values(&[("Tool", "A fatura")]);
        v.1 = Some(Gender::Feminine);
        assert_eq!(t.render(&v).text, "A fatura foi concluída.");
        v.1 = Some(Gender::Masculine);
        assert_eq!(t.render(&v).text, "A fatura foi concluído.");
    }

    #[test]
    fn escapes_are_literal() {
        let t = Template::parse("{{x}} [[y]] {a}").unwrap();
        assert_eq!(t.render(&values(&[("a", "1")])).text, "{x} [y] 1");
        assert!(t.slots().len() == 1);
    }

    #[test]
    fn syntax_errors_say_what_is_wrong() {
        for (bad, needle) in [
            ("{a", "never closed"),
            ("a}", "closes nothing"),
            ("[a [b]]", "inside a segment"),
            ("[a", "never closed"),
            ("a]", "closes nothing"),
            ("{}", "no name"),
            ("{a|b}", "two forms"),
            ("{a:}", "no format"),
            ("{a b}", "letters"),
        ] {
            let e = Template::parse(bad).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }

    #[test]
    fn text_before_slots_sees_through_segments() {
        let t = Template::parse("Confirm the {tool}[ with {x}]").unwrap();
        let before: Vec<String> = t.text_before_slots().into_iter().map(|(_, b)| b).collect();
        assert_eq!(before, vec!["Confirm the ".to_owned(), " with ".to_owned()]);
    }
}
