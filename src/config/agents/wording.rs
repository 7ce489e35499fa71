//! The keys of what the customer reads (RP-1..RP-4): phrases and genders of tools, parameters
//! and agents, result templates and fields, service locales, reason texts, the currency symbol,
//! and the checks of every message template (syntax, placeholders per key, optional values, no
//! article before a phrase that carries its own).

use std::collections::BTreeMap;

use crate::domain::catalog::Localized;
use crate::domain::locale::Locale;
use crate::domain::reply::format::DEFAULT_CURRENCY_SYMBOL;
use crate::domain::reply::template::{render, Resolve, Template};
use crate::domain::reply::{placeholders, MAY_BE_ABSENT, PHRASE_PLACEHOLDERS};
use crate::domain::wording::{
    Gender, ParameterWording, PerLocale, Phrase, ResultField, ToolWording, ValueFormat,
};

use super::load::Validator;
use super::schema::{RawGender, RawLocalized, RawResultField, RawTool};

/// First words of a pt-BR noun phrase that tell its gender (articles, possessives,
/// demonstratives).
const PT_MASCULINE: &[&str] = &[
    "o", "os", "um", "uns", "seu", "seus", "meu", "meus", "nosso", "este", "esse", "aquele",
];
const PT_FEMININE: &[&str] = &[
    "a", "as", "uma", "umas", "sua", "suas", "minha", "minhas", "nossa", "esta", "essa", "aquela",
];
/// Words that must not stand right before `{tool}` / `{param}` (they carry their own article):
/// articles, possessives, and pt-BR contractions of a preposition with an article.
const ARTICLES: &[&str] = &[
    "the", "a", "an", "your", "my", "our", "this", "that", "o", "os", "as", "um", "uma", "seu",
    "sua", "seus", "suas", "do", "da", "dos", "das", "no", "na", "nos", "nas", "ao", "à", "aos",
    "às", "pelo", "pela",
];

/// The tool keys of this file, raw (taken out of a [`RawTool`]).
pub(super) struct RawToolWording {
    pub(super) phrase: Option<RawLocalized>,
    pub(super) gender: Option<RawGender>,
    pub(super) result: Option<RawLocalized>,
    pub(super) result_fields: BTreeMap<String, RawResultField>,
    pub(super) service_locale: Option<String>,
    pub(super) reasons: BTreeMap<String, RawLocalized>,
}

impl RawToolWording {
    pub(super) fn take(raw: &mut RawTool) -> RawToolWording {
        RawToolWording {
            phrase: raw.phrase.take(),
            gender: raw.gender.take(),
            result: raw.result.take(),
            result_fields: std::mem::take(&mut raw.result_fields),
            service_locale: raw.service_locale.take(),
            reasons: std::mem::take(&mut raw.reasons),
        }
    }
}

struct NoValues;

impl Resolve for NoValues {
    fn value(&self, _: &str, _: Option<&str>) -> Option<String> {
        None
    }
    fn gender(&self, _: &str) -> Option<Gender> {
        None
    }
}

impl Validator<'_> {
    /// RP-3: `currency_symbol`, default `R$`.
    pub(super) fn currency_symbol(&mut self, key: &str, raw: Option<String>) -> String {
        match raw.map(|s| s.trim().to_owned()) {
            None => DEFAULT_CURRENCY_SYMBOL.to_owned(),
            Some(s) if s.is_empty() => {
                self.err(
                    key,
                    "the currency symbol is empty",
                    format!("give the symbol, e.g. `{DEFAULT_CURRENCY_SYMBOL}`, or remove the key"),
                );
                DEFAULT_CURRENCY_SYMBOL.to_owned()
            }
            Some(s) => s,
        }
    }

    /// A phrase with its article per locale: configured, or `the <label>` / `o <label>` (`a
    /// <label>` when feminine). The gender is `gender:`, else told by the first word of the
    /// configured pt-BR phrase, else masculine.
    pub(super) fn phrase(
        &mut self,
        key: &str,
        raw: Option<RawLocalized>,
        gender: Option<RawGender>,
        label: &Localized,
    ) -> Phrase {
        let raw = raw.unwrap_or_default();
        let mut configured = |locale: Locale, text: Option<String>| {
            let text = text?;
            let text = text.trim().to_owned();
            if text.is_empty() {
                self.err(
                    format!("{key}.phrase.{}", locale.tag()),
                    "the phrase is empty",
                    "write how a sentence names it, with its article, or remove the key",
                );
                return None;
            }
            Some(text)
        };
        let en = configured(Locale::En, raw.en);
        let pt = configured(Locale::PtBr, raw.pt_br);
        let explicit = gender.map(|g| match g {
            RawGender::Masculine => Gender::Masculine,
            RawGender::Feminine => Gender::Feminine,
        });
        let told = pt.as_deref().and_then(gender_of);
        let gender = match (explicit, told, pt.as_deref()) {
            (Some(g), Some(t), Some(p)) if g != t => {
                self.err(
                    format!("{key}.gender"),
                    format!(
                        "gender is {} but the pt-BR phrase `{p}` starts with a {} word",
                        g.as_str(),
                        t.as_str()
                    ),
                    "make the phrase's article and `gender` agree",
                );
                g
            }
            (Some(g), _, _) => g,
            (None, Some(t), _) => t,
            (None, None, Some(p)) => {
                self.err(
                    format!("{key}.phrase.pt-BR"),
                    format!("cannot tell the gender of `{p}`"),
                    "start the phrase with its article (`o ...`, `a ...`), or add `gender: \
                     masculine` or `gender: feminine`",
                );
                Gender::Masculine
            }
            (None, None, None) => Gender::Masculine,
        };
        let article = match gender {
            Gender::Masculine => "o",
            Gender::Feminine => "a",
        };
        Phrase {
            text: Localized {
                en: en.unwrap_or_else(|| format!("the {}", label.en)),
                pt_br: pt.unwrap_or_else(|| format!("{article} {}", label.pt_br)),
            },
            gender,
        }
    }

    pub(super) fn parameter_wording(
        &mut self,
        key: &str,
        phrase: Option<RawLocalized>,
        gender: Option<RawGender>,
        description: Option<RawLocalized>,
        label: &Localized,
    ) -> ParameterWording {
        ParameterWording {
            phrase: self.phrase(key, phrase, gender, label),
            description: self.per_locale(&format!("{key}.description"), description),
        }
    }

    pub(super) fn tool_wording(
        &mut self,
        key: &str,
        raw: RawToolWording,
        title: &Localized,
        default_locale: Locale,
    ) -> ToolWording {
        let phrase = self.phrase(key, raw.phrase, raw.gender, title);
        let result = self.per_locale(&format!("{key}.result"), raw.result);
        for (locale, text) in &result {
            self.result_template(&format!("{key}.result.{}", locale.tag()), text);
        }
        let mut result_fields = BTreeMap::new();
        for (path, field) in raw.result_fields {
            let fkey = format!("{key}.result_fields.{path}");
            if path.split('.').any(|p| p.trim().is_empty()) {
                self.err(
                    &fkey,
                    "the field path is empty or has an empty part",
                    "name a field of the response, with `.` between nested names",
                );
            }
            result_fields.insert(path, self.result_field(&fkey, field));
        }
        let service_locale = match raw.service_locale {
            None => default_locale,
            Some(tag) => self
                .locale(&format!("{key}.service_locale"), &tag)
                .unwrap_or(default_locale),
        };
        let mut reasons = BTreeMap::new();
        for (code, texts) in raw.reasons {
            let rkey = format!("{key}.reasons.{code}");
            if code.trim().is_empty() {
                self.err(
                    &rkey,
                    "the reason code is empty",
                    "use the code the service sends",
                );
            }
            let texts = self.per_locale(&rkey, Some(texts));
            if texts.is_empty() {
                self.err(
                    &rkey,
                    "the reason has no text",
                    "give the text per locale, e.g. `{en: ..., pt-BR: ...}`",
                );
            }
            reasons.insert(code.trim().to_owned(), texts);
        }
        ToolWording {
            phrase,
            result,
            result_fields,
            service_locale,
            reasons,
        }
    }

    /// Texts per locale, trimmed; an empty one is an error. No locale borrows another's (RP-2).
    pub(super) fn per_locale(&mut self, key: &str, raw: Option<RawLocalized>) -> PerLocale {
        let raw = raw.unwrap_or_default();
        let mut out = PerLocale::new();
        for (locale, text) in [(Locale::En, raw.en), (Locale::PtBr, raw.pt_br)] {
            let Some(text) = text else { continue };
            let text = text.trim().to_owned();
            if text.is_empty() {
                self.err(
                    format!("{key}.{}", locale.tag()),
                    "the text is empty",
                    "write the text, or remove the locale's key",
                );
            } else {
                out.insert(locale, text);
            }
        }
        out
    }

    fn result_field(&mut self, key: &str, raw: RawResultField) -> ResultField {
        let format = raw.format.and_then(|f| match ValueFormat::parse(f.trim()) {
            Some(v) => Some(v),
            None => {
                self.err(
                    format!("{key}.format"),
                    format!("unknown format `{f}`"),
                    format!("use one of: {}", ValueFormat::NAMES.join(", ")),
                );
                None
            }
        });
        let mut values = BTreeMap::new();
        for (code, texts) in raw.values {
            let vkey = format!("{key}.values.{code}");
            values.insert(code.trim().to_owned(), self.per_locale(&vkey, Some(texts)));
        }
        ResultField {
            label: self.per_locale(&format!("{key}.label"), raw.label),
            format,
            values,
        }
    }

    fn result_template(&mut self, key: &str, text: &str) {
        let template = match Template::parse(text) {
            Ok(t) => t,
            Err(e) => {
                self.err(key, e, TEMPLATE_SYNTAX_FIX);
                return;
            }
        };
        for (slot, _) in template.slots() {
            if slot.forms.is_some() {
                self.err(
                    key,
                    format!("`{{{}|...}}`: a result has no gender choice", slot.name),
                    "write the form the sentence needs",
                );
            }
            if let Some(f) = slot.format.as_deref() {
                if ValueFormat::parse(f).is_none() {
                    self.err(
                        key,
                        format!("`{{{}:{f}}}`: unknown format `{f}`", slot.name),
                        format!("use one of: {}", ValueFormat::NAMES.join(", ")),
                    );
                }
            }
        }
    }

    /// Checks a message template for `name` (`messages.<locale>.<name>`); returns the text to
    /// store: a template with no placeholder allowed is rendered once here (its escapes).
    pub(super) fn message_template(&mut self, key: &str, name: &str, text: String) -> String {
        if text.trim().is_empty() {
            self.err(
                key,
                "the message is empty",
                "write the reply text, or remove the key to keep the default",
            );
            return text;
        }
        let template = match Template::parse(&text) {
            Ok(t) => t,
            Err(e) => {
                self.err(key, e, TEMPLATE_SYNTAX_FIX);
                return text;
            }
        };
        self.check_message_slots(key, name, &template);
        self.check_no_article_before_phrases(key, &template);
        if placeholders(name).is_empty() {
            return render(&text, &NoValues).text;
        }
        text
    }

    /// Each placeholder is one `name` allows, takes no format, has a gender when a form is
    /// chosen by it, and stands in `[...]` when it may have no value.
    fn check_message_slots(&mut self, key: &str, name: &str, template: &Template) {
        let allowed = placeholders(name);
        for (slot, optional) in template.slots() {
            let n = slot.name.as_str();
            if !allowed.contains(&n) {
                let fix = if allowed.is_empty() {
                    "this message takes no placeholder; write `{{` for a literal `{`".to_owned()
                } else {
                    format!(
                        "use only {}",
                        allowed
                            .iter()
                            .map(|p| format!("{{{p}}}"))
                            .collect::<Vec<_>>()
                            .join(" ")
                    )
                };
                self.err(key, format!("unknown placeholder `{{{n}}}`"), fix);
                continue;
            }
            if slot.format.is_some() {
                self.err(
                    key,
                    format!("`{{{n}:...}}`: a message placeholder takes no format"),
                    "remove the `:format` (values come in the locale's format already)",
                );
            }
            if slot.forms.is_some() && !PHRASE_PLACEHOLDERS.contains(&n) {
                self.err(
                    key,
                    format!("`{{{n}|...}}`: `{n}` has no gender"),
                    "choose a form by `{tool|...}` or `{param|...}`",
                );
            }
            if MAY_BE_ABSENT.contains(&n) && !optional {
                self.err(
                    key,
                    format!("`{{{n}}}` may have no value but stands outside `[...]`"),
                    format!(
                        "put it in an optional segment, e.g. `[: {{{n}}}]` (RP-2: a reason in \
                         another language is not shown; a text parameter has no example)"
                    ),
                );
            }
        }
    }

    /// RP-3: `{tool}` and `{param}` carry their own article; none may stand right before them.
    fn check_no_article_before_phrases(&mut self, key: &str, template: &Template) {
        for (slot, before) in template.text_before_slots() {
            let word = before
                .split_whitespace()
                .last()
                .unwrap_or("")
                .to_lowercase();
            if slot.forms.is_none()
                && PHRASE_PLACEHOLDERS.contains(&slot.name.as_str())
                && ARTICLES.contains(&word.as_str())
            {
                self.err(
                    key,
                    format!(
                        "`{word} {{{}}}`: the phrase already carries its article (RP-3)",
                        slot.name
                    ),
                    format!(
                        "remove `{word}`, reword to avoid a contraction, or use `{{{}}}` for \
                         the bare name",
                        if slot.name.to_lowercase().starts_with("tool") {
                            "tool_title"
                        } else {
                            "label"
                        }
                    ),
                );
            }
        }
    }
}

const TEMPLATE_SYNTAX_FIX: &str = "write `{name}` for a value and `[...]` around an optional \
                                   part; `{{`, `}}`, `[[`, `]]` are the literal characters";

/// The gender a pt-BR phrase's first word tells, if it tells one.
fn gender_of(phrase: &str) -> Option<Gender> {
    let first = phrase.split_whitespace().next()?.to_lowercase();
    if PT_MASCULINE.contains(&first.as_str()) {
        Some(Gender::Masculine)
    } else if PT_FEMININE.contains(&first.as_str()) {
        Some(Gender::Feminine)
    } else {
        None
    }
}
