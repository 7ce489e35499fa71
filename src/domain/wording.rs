//! How replies name things and show results (RP-1..RP-3): the per-locale phrases of tools,
//! parameters and agents, their grammatical gender, result templates, value maps and reason
//! texts. Pure data the configuration builds and `domain::reply` reads.

use std::collections::BTreeMap;

use crate::domain::catalog::Localized;
use crate::domain::locale::Locale;

/// A text per locale where a missing locale must NOT borrow another locale's text (RP-2): a
/// result template or a reason text absent in the reply's locale falls back to a generic
/// sentence, never to another language.
pub type PerLocale = BTreeMap<Locale, String>;

/// Grammatical gender of a noun phrase in pt-BR (English has none): the agreement of
/// participles and adjectives in templates, `{tool|concluído|concluída}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Gender {
    #[default]
    Masculine,
    Feminine,
}

impl Gender {
    pub fn as_str(self) -> &'static str {
        match self {
            Gender::Masculine => "masculine",
            Gender::Feminine => "feminine",
        }
    }
}

/// How a sentence names a tool, a parameter or an agent: a noun phrase with its article, per
/// locale (`the address change` / `a alteração de endereço`), and its pt-BR gender.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Phrase {
    pub text: Localized,
    pub gender: Gender,
}

impl Phrase {
    pub fn get(&self, locale: Locale) -> &str {
        self.text.get(locale)
    }
}

/// How a value is shown in the reply's locale (RP-3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueFormat {
    /// `R$ 120,00` (pt-BR), `R$120.00` (en), with the assistant's currency symbol.
    Money,
    /// `10/01/2026` (pt-BR), `Jan 10, 2026` (en), from an ISO date (`2026-01-10`).
    Date,
}

impl ValueFormat {
    pub const NAMES: [&'static str; 2] = ["money", "date"];

    pub fn parse(name: &str) -> Option<ValueFormat> {
        match name {
            "money" => Some(ValueFormat::Money),
            "date" => Some(ValueFormat::Date),
            _ => None,
        }
    }
}

/// What a tool says about one field of its response (`result_fields.<path>`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResultField {
    /// Its name in the field list of a reply without a template; none: the parameter's label
    /// when a parameter has this name, else the path with spaces.
    pub label: PerLocale,
    /// How its value is shown when a template does not say (`{amount:money}` does).
    pub format: Option<ValueFormat>,
    /// Codes the service returns and how each reads per locale (`processing` → `em
    /// preparação`).
    pub values: BTreeMap<String, PerLocale>,
}

/// Everything about a tool's replies besides the shared message templates.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ToolWording {
    pub phrase: Phrase,
    /// RP-1: per-locale result templates naming fields of the response.
    pub result: PerLocale,
    /// Labels, formats and value maps of response fields, by dotted path.
    pub result_fields: BTreeMap<String, ResultField>,
    /// RP-2: the language the tool's service writes its reasons and error texts in.
    pub service_locale: Locale,
    /// RP-2: per-locale texts by the `code` a refusal or an error carries.
    pub reasons: BTreeMap<String, PerLocale>,
}

/// Everything about a parameter's replies besides its label and example.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ParameterWording {
    pub phrase: Phrase,
    /// RP-4: the expected form in words (`a short sentence: why you contest the charge`),
    /// shown after an invalid value instead of the built-in description of the type.
    pub description: PerLocale,
}
