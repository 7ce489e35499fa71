//! The languages a turn can arrive in: English and Brazilian Portuguese.

use serde::{Deserialize, Serialize};

/// A turn's language. Replies, number and date formats follow it.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize, PartialOrd, Ord,
)]
pub enum Locale {
    #[default]
    #[serde(rename = "en")]
    En,
    #[serde(rename = "pt-BR")]
    PtBr,
}

impl Locale {
    pub const ALL: [Locale; 2] = [Locale::En, Locale::PtBr];

    /// The BCP 47 tag used on the wire and in configuration.
    pub fn tag(self) -> &'static str {
        match self {
            Locale::En => "en",
            Locale::PtBr => "pt-BR",
        }
    }

    /// Parses a tag case-insensitively; `pt`, `pt-br`, `pt_BR` all mean Brazilian Portuguese.
    pub fn parse(tag: &str) -> Option<Locale> {
        let t = tag.trim().to_ascii_lowercase().replace('_', "-");
        match t.as_str() {
            "en" | "en-us" | "en-gb" => Some(Locale::En),
            "pt-br" | "pt" => Some(Locale::PtBr),
            _ => None,
        }
    }
}

impl std::fmt::Display for Locale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.tag())
    }
}
