//! RP-1: a completed tool's result in the reply, and RP-2: a tool's own words only in the
//! reply's locale.
//!
//! A tool's result template for the reply's locale names fields of the response (dotted paths
//! into nested objects), shown through the tool's value map (`processing` → `em preparação`)
//! or in the locale's format (`{amount:money}`, `{due_date:date}`, or the field's configured
//! `format`). When the template names a field the response lacks outside an optional segment,
//! or the tool has no template for the locale, the reply is the `completed` sentence followed
//! by `result_fields`: the response's scalar fields with their names (nested ones by path), or,
//! when the response has none, the arguments the tool was called with, so a look-up always
//! shows what it looked up.

use std::cell::Cell;
use std::collections::BTreeMap;

use serde_json::Value;

use super::template::{render, Resolve};
use super::{format, About, Replies};
use crate::domain::catalog::Tool;
use crate::domain::locale::Locale;
use crate::domain::parameter::ParameterKind;
use crate::domain::wording::{Gender, ValueFormat};

/// At most this many fields are listed when a result has no template.
const LISTED_FIELDS_MAX: usize = 12;
/// Nested objects are listed down to this depth (`address.zip_code` is depth 2).
const LISTED_DEPTH_MAX: usize = 3;

/// How a completed tool's result was rendered (`turnstile_tool_results_rendered_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ResultRendering {
    /// The tool's template for the locale, every value shown as configured.
    Template,
    /// The template, but a value had no entry in its field's value map (shown as it came).
    UnmappedValue,
    /// No template for the locale: the field list.
    NoTemplate,
    /// The template named a field the response lacks: the field list instead.
    MissingField,
    /// A follow-up on the last look-up (`when's it due again?`) answered from its recorded
    /// result, with no new call.
    Restated,
}

impl ResultRendering {
    pub const ALL: [ResultRendering; 5] = [
        ResultRendering::Template,
        ResultRendering::UnmappedValue,
        ResultRendering::NoTemplate,
        ResultRendering::MissingField,
        ResultRendering::Restated,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ResultRendering::Template => "template",
            ResultRendering::UnmappedValue => "unmapped_value",
            ResultRendering::NoTemplate => "no_template",
            ResultRendering::MissingField => "missing_field",
            ResultRendering::Restated => "restated",
        }
    }
}

pub(super) fn completed(
    r: &Replies<'_>,
    tool: &Tool,
    arguments: &BTreeMap<String, Value>,
    data: &Value,
) -> (String, ResultRendering) {
    let fields = Fields {
        r,
        tool,
        data,
        unmapped: Cell::new(false),
    };
    let how = match tool.wording.result.get(&r.locale) {
        Some(template) => {
            let rendered = render(template, &fields);
            if rendered.missing.is_empty() {
                let how = if fields.unmapped.get() {
                    ResultRendering::UnmappedValue
                } else {
                    ResultRendering::Template
                };
                return (rendered.text, how);
            }
            ResultRendering::MissingField
        }
        None => ResultRendering::NoTemplate,
    };
    let mut listed: Vec<String> = Vec::new();
    let mut flat = Vec::new();
    flatten(data, "", 1, &mut flat);
    for (path, value) in flat.into_iter().take(LISTED_FIELDS_MAX) {
        if let Some(raw) = format::scalar(value, r.locale) {
            let shown = fields.shown(&path, raw, None);
            listed.push(format!("{}: {shown}", fields.label(&path)));
        }
    }
    if listed.is_empty() {
        listed = tool
            .parameters
            .iter()
            .filter_map(|p| {
                let v = arguments.get(&p.name)?;
                Some(format!("{}: {}", p.label.get(r.locale), r.argument(p, v)))
            })
            .collect();
    }
    let mut text = r.about(About::Completed, tool);
    if !listed.is_empty() {
        let mut vars = r.tool_vars(tool);
        vars.set("fields", listed.join("; "));
        let details = render(&r.msgs.result_fields, &vars).text;
        if !details.is_empty() {
            text = format!("{text} {details}");
        }
    }
    (text, how)
}

/// RP-2: the text for a refusal or an error in `locale`: the tool's text for `code` in that
/// locale, else what the service said when it writes in that locale, else none (the template's
/// generic sentence).
pub(super) fn reason_in_locale(
    tool: &Tool,
    locale: Locale,
    code: Option<&str>,
    said: Option<&str>,
) -> Option<String> {
    if let Some(text) = code
        .and_then(|c| tool.wording.reasons.get(c.trim()))
        .and_then(|per| per.get(&locale))
    {
        return Some(text.clone());
    }
    said.map(str::trim)
        .filter(|s| !s.is_empty() && locale == tool.wording.service_locale)
        .map(str::to_owned)
}

/// The response's fields as a template sees them.
struct Fields<'r> {
    r: &'r Replies<'r>,
    tool: &'r Tool,
    data: &'r Value,
    unmapped: Cell<bool>,
}

impl Fields<'_> {
    /// The field's configured label, the label of the parameter of the same name (the last
    /// path part), else the path in words.
    fn label(&self, path: &str) -> String {
        let locale = self.r.locale;
        if let Some(l) = self
            .tool
            .wording
            .result_fields
            .get(path)
            .and_then(|f| f.label.get(&locale))
        {
            return l.clone();
        }
        let last = path.rsplit('.').next().unwrap_or(path);
        match self.tool.parameter(last) {
            Some(p) => p.label.get(locale).to_owned(),
            None => path.replace(['_', '.'], " "),
        }
    }

    fn shown(&self, path: &str, raw: String, format: Option<&str>) -> String {
        let locale = self.r.locale;
        let field = self.tool.wording.result_fields.get(path);
        if let Some(f) = field.filter(|f| !f.values.is_empty()) {
            match f.values.get(raw.trim()).and_then(|per| per.get(&locale)) {
                Some(text) => return text.clone(),
                None => self.unmapped.set(true),
            }
        }
        let last = path.rsplit('.').next().unwrap_or(path);
        let kind = self.tool.parameter(last).map(|p| &p.kind);
        if format.is_none() && matches!(kind, Some(ParameterKind::Text { .. })) {
            // The customer's own words, echoed: quoted.
            return format::quoted(&raw, super::QUOTED_VALUE_MAX_CHARS);
        }
        let by_kind = kind.and_then(|k| match k {
            ParameterKind::Money => Some(ValueFormat::Money),
            ParameterKind::Date => Some(ValueFormat::Date),
            _ => None,
        });
        let format = format
            .and_then(ValueFormat::parse)
            .or(field.and_then(|f| f.format))
            .or(by_kind);
        match format {
            Some(ValueFormat::Money) => {
                format::money(&raw, locale, self.r.currency()).unwrap_or(raw)
            }
            Some(ValueFormat::Date) => format::date(&raw, locale).unwrap_or(raw),
            None => raw,
        }
    }
}

impl Resolve for Fields<'_> {
    fn value(&self, name: &str, format: Option<&str>) -> Option<String> {
        let mut at = self.data;
        for part in name.split('.') {
            at = at.get(part)?;
        }
        let raw = format::scalar(at, self.r.locale)?;
        Some(self.shown(name, raw, format))
    }

    fn gender(&self, _: &str) -> Option<Gender> {
        None
    }
}

/// The scalar leaves of `value` by dotted path, in key order, down to `LISTED_DEPTH_MAX`.
fn flatten<'v>(value: &'v Value, prefix: &str, depth: usize, out: &mut Vec<(String, &'v Value)>) {
    let Value::Object(map) = value else {
        return;
    };
    for (k, v) in map {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(_) if depth < LISTED_DEPTH_MAX => flatten(v, &path, depth + 1, out),
            Value::Object(_) | Value::Array(_) | Value::Null => {}
            _ => out.push((path, v)),
        }
    }
}
