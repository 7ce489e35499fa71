//! The profile each skill uses, resolved once from the catalog, the settings and the profiles
//! file, with the API that answers it ([`SkillProfile`]): the classifier
//! (`ROUTE_STICKINESS_LLM_PROFILE`) and every assistant's router and interpreter. The model
//! adapters are built from a [`SkillProfiles`]; none of them looks a profile up by name or asks
//! which provider it names.

use crate::config::profiles::{Api, ModelProfile, Profiles};
use crate::domain::catalog::{Catalog, Settings};

/// A skill's profile and the API that answers it.
#[derive(Debug, Clone, PartialEq)]
pub enum SkillProfile {
    /// Chat completions (`oci_openai`, `openai_compatible`).
    Chat(ModelProfile),
    /// Embeddings; `escalate_to` is the chat profile asked when its answer is not confident
    /// (the cascade), resolved too.
    Embeddings {
        profile: ModelProfile,
        escalate_to: Option<ModelProfile>,
    },
}

/// A profile named somewhere that the profiles file does not define.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("profile `{profile}` (named by {used_by}) is not defined in the profiles file (fix: define it, or name one of: {known})")]
pub struct UnknownProfile {
    pub profile: String,
    /// Where it is named, e.g. `assistants.retail-bot.profiles.router`.
    pub used_by: String,
    /// Every defined profile's name, comma-separated.
    pub known: String,
}

impl SkillProfile {
    /// The profile `name` (named by `used_by`) with its API; an embeddings profile's
    /// `escalate_to` is resolved with it.
    pub fn resolve(
        name: &str,
        used_by: impl FnOnce() -> String,
        profiles: &Profiles,
    ) -> Result<SkillProfile, UnknownProfile> {
        let unknown = |profile: &str, used_by: String| UnknownProfile {
            profile: profile.to_owned(),
            used_by,
            known: profiles.names(),
        };
        let profile = profiles
            .get(name)
            .ok_or_else(|| unknown(name, used_by()))?
            .clone();
        match profile.provider.api() {
            Api::ChatCompletions => Ok(SkillProfile::Chat(profile)),
            Api::Embeddings => {
                let escalate_to =
                    match &profile.escalate_to {
                        None => None,
                        // Profiles validation makes it a chat profile of the same file.
                        Some(target) => Some(profiles.get(target).cloned().ok_or_else(|| {
                            unknown(target, format!("profiles.{name}.escalate_to"))
                        })?),
                    };
                Ok(SkillProfile::Embeddings {
                    profile,
                    escalate_to,
                })
            }
        }
    }

    pub fn profile(&self) -> &ModelProfile {
        match self {
            SkillProfile::Chat(p) | SkillProfile::Embeddings { profile: p, .. } => p,
        }
    }

    /// The chat profile that answers the skill: its own, or its escalation target.
    fn escalated(&self) -> SkillProfile {
        match self {
            SkillProfile::Embeddings {
                escalate_to: Some(target),
                ..
            } => SkillProfile::Chat(target.clone()),
            other => other.clone(),
        }
    }
}

/// Every profile the skills use, each resolved once.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SkillProfiles {
    /// `ROUTE_STICKINESS_LLM_PROFILE`'s; `None` only when stickiness is off and it is undefined
    /// (the classifier is then never called, SC-7).
    pub classifier: Option<SkillProfile>,
    /// The router and interpreter profiles of every assistant, by name, in the catalog's order.
    pub assistants: Vec<(String, SkillProfile)>,
}

impl SkillProfiles {
    /// Resolves the classifier profile and every assistant's router and interpreter profiles;
    /// the first one not defined is the error.
    pub fn resolve(
        catalog: &Catalog,
        settings: &Settings,
        profiles: &Profiles,
    ) -> Result<SkillProfiles, UnknownProfile> {
        let name = &settings.route_stickiness_llm_profile;
        let used_by = || crate::config::settings::ROUTE_STICKINESS_LLM_PROFILE.to_owned();
        let classifier = match SkillProfile::resolve(name, used_by, profiles) {
            Ok(c) => Some(c),
            Err(e) if e.profile == *name && !settings.enable_route_stickiness => None,
            Err(e) => return Err(e),
        };
        let mut assistants: Vec<(String, SkillProfile)> = Vec::new();
        for (id, assistant) in &catalog.assistants {
            for (role, name) in [
                ("router", &assistant.router_profile),
                ("interpreter", &assistant.interpreter_profile),
            ] {
                if assistants.iter().any(|(n, _)| n == name) {
                    continue;
                }
                let used_by = || format!("assistants.{id}.profiles.{role}");
                assistants.push((
                    name.clone(),
                    SkillProfile::resolve(name, used_by, profiles)?,
                ));
            }
        }
        Ok(SkillProfiles {
            classifier,
            assistants,
        })
    }

    /// The resolved router or interpreter profile `name`.
    pub fn assistant_profile(&self, name: &str) -> Option<&SkillProfile> {
        self.assistants
            .iter()
            .find_map(|(n, p)| (n == name).then_some(p))
    }

    /// The same skills with every escalating embeddings profile replaced by the chat profile it
    /// escalates to, under its own name: what the cascade's escalation model answers.
    pub fn escalated(&self) -> SkillProfiles {
        SkillProfiles {
            classifier: self.classifier.as_ref().map(SkillProfile::escalated),
            assistants: self
                .assistants
                .iter()
                .map(|(n, p)| (n.clone(), p.escalated()))
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::profiles::parse_profiles;

    const PROFILES: &str = "profiles:
  chat: {provider: openai_compatible, model: m, temperature: 0, max_tokens: 80, timeout_seconds: 5}
  e5: {provider: embeddings, model: e5, timeout_seconds: 5, escalate_to: chat}
";

    fn settings(profile: &str, stickiness: bool) -> Settings {
        Settings {
            route_stickiness_llm_profile: profile.into(),
            enable_route_stickiness: stickiness,
            ..Settings::default()
        }
    }

    #[test]
    fn each_profile_is_resolved_with_its_api_and_escalation() {
        let profiles = parse_profiles(PROFILES, "profiles.yaml").expect("valid");
        let skills = SkillProfiles::resolve(&Catalog::default(), &settings("e5", true), &profiles)
            .expect("resolved");
        let Some(SkillProfile::Embeddings {
            profile,
            escalate_to: Some(target),
        }) = &skills.classifier
        else {
            panic!("an escalating embeddings classifier: {skills:?}");
        };
        assert_eq!(
            (profile.name.as_str(), target.name.as_str()),
            ("e5", "chat")
        );
        let escalated = skills.escalated().classifier.expect("classifier");
        assert!(matches!(escalated, SkillProfile::Chat(p) if p.name == "chat"));
    }

    #[test]
    fn an_undefined_classifier_profile_matters_only_with_stickiness_on() {
        let profiles = parse_profiles(PROFILES, "profiles.yaml").expect("valid");
        let off = SkillProfiles::resolve(&Catalog::default(), &settings("nope", false), &profiles);
        assert_eq!(off.map(|s| s.classifier), Ok(None));
        let on = SkillProfiles::resolve(&Catalog::default(), &settings("nope", true), &profiles)
            .expect_err("undefined");
        assert_eq!(
            on.used_by,
            crate::config::settings::ROUTE_STICKINESS_LLM_PROFILE
        );
        assert_eq!(on.known, "chat, e5");
    }
}
