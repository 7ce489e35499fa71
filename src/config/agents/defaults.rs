//! Defaults of the agents file: limits, profile names, built-in reply messages, examples.

use crate::domain::catalog::{
    MessageSet, DEFAULT_END_SESSION_MESSAGE, DEFAULT_HUMAN_HANDOFF_MESSAGE,
};
use crate::domain::locale::Locale;
use crate::domain::parameter::ParameterKind;

use super::validate::valid_in_some_locale;

/// Failed attempts before a tool's `on_attempts_exhausted` applies, when not configured (MG-4).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;
/// `max_length` of a `text` parameter when not configured, in characters.
pub const DEFAULT_TEXT_MAX_LENGTH: usize = 500;
/// Model profile names an assistant uses when its `profiles:` key is absent.
pub const DEFAULT_ROUTER_PROFILE: &str = "router";
pub const DEFAULT_INTERPRETER_PROFILE: &str = "interpreter";
/// Appended to a tool's `endpoint` when `pre_validation_endpoint` is not given.
pub const PRE_VALIDATION_PATH_SUFFIX: &str = "/pre-validate";
/// Upper bound of `tool_http.max_attempts`: more would hold a conversation's partition for long.
pub const MAX_TOOL_HTTP_ATTEMPTS: u32 = 10;

/// Route names the engine reserves for session control (SC-5, SC-6); no domain agent may use them.
pub(super) const RESERVED_AGENT_NAMES: &[&str] = &["human_handoff", "end_session"];

/// The built-in reply templates of `locale` (the seed's texts for handoff and end of session).
/// `{tool}` and `{param}` carry their own article (RP-3); `[...]` is left out when a value in
/// it is missing (`domain::reply::template`).
pub fn default_messages(locale: Locale) -> MessageSet {
    match locale {
        Locale::En => MessageSet {
            ask_parameters: "To continue with {tool}, please send {params}.".into(),
            invalid_value: "\"{value}\" is not a valid {label}: {expected}. Please send it \
                            again."
                .into(),
            attempts_exhausted: "I still could not get a valid {label}: {expected}. Please \
                                 check it and send it again, or ask to talk to a person."
                .into(),
            confirm: "Please confirm {tool}[ — {arguments}]. Reply yes or no.".into(),
            completed: "Done! {Tool} is complete.".into(),
            failed: "Sorry, I could not complete {tool}[: {reason}].".into(),
            cancelled: "OK, I won't go ahead with {tool}.".into(),
            declined: "OK, I won't go ahead with {tool}. Is there anything else I can help \
                       you with?"
                .into(),
            interrupted: "I stopped {tool} so we can take care of this.".into(),
            expired: "{Tool} you started was closed after a period of inactivity.".into(),
            not_eligible: "Sorry, {tool} is not possible[: {reason}].".into(),
            not_offered: "Sorry, {tool} is not available for your account.".into(),
            out_of_scope: "Sorry, I can't help with that here.".into(),
            clarify: "Sorry, I didn't understand that.".into(),
            routed: "Sure, I can help with {agent}. What would you like to do?".into(),
            nothing_to_confirm: "There is nothing waiting for your confirmation right now.".into(),
            nothing_to_cancel: "There is nothing to cancel right now.".into(),
            human_handoff: DEFAULT_HUMAN_HANDOFF_MESSAGE.into(),
            handoff_pending: "Your request is with our team. A person will answer you shortly."
                .into(),
            handback: "You are chatting with the virtual assistant again.".into(),
            hold_on: "Sure, take your time.".into(),
            keeps_helping: "Alright, I'll keep helping you here.".into(),
            end_session: DEFAULT_END_SESSION_MESSAGE.into(),
            pre_validation_unavailable: "Sorry, I could not check {tool} right now. Nothing \
                                         was changed; please try again later."
                .into(),
            not_done: "{Tool} was not done.".into(),
            result_fields: "Details — {fields}.".into(),
        },
        Locale::PtBr => MessageSet {
            ask_parameters: "Para continuar com {tool}, por favor envie {params}.".into(),
            invalid_value: "\"{value}\" não é válido para {param}: {expected}. Por favor, \
                            envie novamente."
                .into(),
            attempts_exhausted: "Ainda não consegui entender {param}: {expected}. \
                                 Confira e envie novamente, ou peça para falar com um atendente."
                .into(),
            confirm: "Por favor, confirme {tool}[ — {arguments}]. Responda sim ou não.".into(),
            completed: "Pronto! {Tool} foi {tool|concluído|concluída}.".into(),
            failed: "Desculpe, não foi possível concluir {tool}[: {reason}].".into(),
            cancelled: "Tudo bem, não vou seguir com {tool}.".into(),
            declined: "Tudo bem, não vou seguir com {tool}. Posso ajudar em mais alguma coisa?"
                .into(),
            interrupted: "Interrompi {tool} para cuidarmos disso.".into(),
            expired: "{Tool} que você começou foi {tool|encerrado|encerrada} por inatividade."
                .into(),
            not_eligible: "Desculpe, {tool} não é possível[: {reason}].".into(),
            not_offered: "Desculpe, {tool} não está disponível para a sua conta.".into(),
            out_of_scope: "Desculpe, não consigo ajudar com isso por aqui.".into(),
            clarify: "Desculpe, não entendi.".into(),
            routed: "Claro, posso ajudar com {agent}. O que você gostaria de fazer?".into(),
            nothing_to_confirm: "Não há nada aguardando a sua confirmação no momento.".into(),
            nothing_to_cancel: "Não há nada para cancelar no momento.".into(),
            human_handoff: "Vou transferir sua solicitação para um atendente.".into(),
            handoff_pending: "Sua solicitação está com a nossa equipe. Um atendente vai \
                              responder em breve."
                .into(),
            handback: "Você está falando novamente com o assistente virtual.".into(),
            hold_on: "Claro, fique à vontade.".into(),
            keeps_helping: "Tudo bem, sigo te ajudando por aqui.".into(),
            end_session: "O atendimento foi encerrado. Obrigado pelo contato.".into(),
            pre_validation_unavailable: "Desculpe, não consegui verificar {tool} agora. \
                                         Nada foi alterado; tente novamente mais tarde."
                .into(),
            not_done: "{Tool} não foi {tool|feito|feita}.".into(),
            result_fields: "Detalhes — {fields}.".into(),
        },
    }
}

/// The pre-validation endpoint of a tool that configures none: `<endpoint>/pre-validate`.
pub fn default_pre_validation_endpoint(endpoint: &str) -> String {
    format!(
        "{}{PRE_VALIDATION_PATH_SUFFIX}",
        endpoint.trim_end_matches('/')
    )
}

/// An example for replies when the file gives none (ids must give one; free text has none).
pub(super) fn default_example(kind: &ParameterKind) -> Option<String> {
    let candidate = match kind {
        ParameterKind::Id { .. } | ParameterKind::Text { .. } => return None,
        ParameterKind::Integer { min, max } => {
            let v = match (min, max) {
                (Some(lo), _) if *lo > 0 => *lo,
                (_, Some(hi)) if *hi < 1 => *hi,
                _ => 1,
            };
            v.to_string()
        }
        ParameterKind::Number => "2.5".to_owned(),
        ParameterKind::Money => "71.99".to_owned(),
        ParameterKind::Date => "2025-12-31".to_owned(),
        ParameterKind::Enum { values } => values.first()?.value.clone(),
        ParameterKind::Cep => "01310-100".to_owned(),
    };
    valid_in_some_locale(kind, &candidate).then_some(candidate)
}
