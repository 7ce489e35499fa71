//! The overlap guard of the whole-conversation set (`tests/data/conversations/README.md`): no
//! configured example utterance and no recogniser or parser lexicon entry may (nearly) repeat a
//! sentence of the held-out TEST part, so the figures reported on that part are not measured on
//! the texts the decisions were tuned with.
//!
//! **The measure.**
//! - The *words* of a text: `turnstile::domain::parameter::folded_words`, the folding every
//!   reader of the engine compares words with — lowercased, accents folded (`á` → `a`, `ç` → `c`,
//!   combining marks dropped), split on every character that is not alphanumeric (`PED-1001` is
//!   `ped` `1001`, `that's` is `that` `s`); taken as a set (a repeated word counts once).
//! - A *test sentence*: the `text` of one customer turn (turns given as an `action` have none) of
//!   a conversation whose id is in the test part (`turnstile::eval::conversations::is_test_part`:
//!   FNV-1a 64 of the id, mod 3 == 0), in every `tests/data/conversations/*.jsonl`. A turn is
//!   taken whole: a message of two sentences is one test sentence.
//! - *Shared* = |E ∩ S| / max(|E|, |S|), E the entry's word set and S the test sentence's: the
//!   share of the longer one's words that both have, so a near-copy of a sentence offends while
//!   a short generic request inside a long message (`cancel my order` in `hi, cancel my order,
//!   it never shipped and I'm tired of waiting`) does not.
//! - An entry counts only when E has at least 3 words: one- and two-word entries (`yes`,
//!   `pode sim`, `cancel it`) are unavoidably in customers' answers.
//! - A pair (entry, test sentence) *offends* when shared >= 0.8 (compared exactly, as
//!   `5 * |E ∩ S| >= 4 * max(|E|, |S|)`).
//!
//! **The entries.** Every list of example texts the configuration loader
//! (`turnstile::config::agents::load_catalog`) gives for `config/agents.example.yaml`, of every
//! assistant: each tool's `examples`, `action_verbs` and `questions.*.examples`, the four
//! `session_examples` lists and the assistant's `conversation.*.examples`, in every locale. The
//! catalog structs are destructured without `..`, so a new field there fails to compile here
//! until it is listed or set aside. Then the confirmation recogniser's lexicon
//! (`turnstile::domain::confirmation::lexicon_phrases`, PR-6), the farewell phrases
//! (`farewell_phrases`, SC-10) and the parameter module's
//! `CORRECTION_MARKERS`, `FILLER_*` lists and `FILLER_PHRASES` (`turnstile::domain::parameter`).
//!
//! The test prints every offending pair (the entry, where it is configured, the test sentence,
//! the conversation id and turn) and fails if there is any: reword or drop the entry (tune on the
//! dev part only).

use std::collections::BTreeSet;
use std::path::Path;

use turnstile::config::agents::load_catalog;
use turnstile::domain::catalog::{Assistant, Catalog, Examples, SessionExamples, Tool, Topic};
use turnstile::domain::confirmation::{farewell_phrases, lexicon_phrases};
use turnstile::domain::parameter::{
    folded_words, CORRECTION_MARKERS, FILLER_ARTICLES, FILLER_CONJUNCTIONS, FILLER_DISCOURSE,
    FILLER_PHRASES, FILLER_POLITENESS, FILLER_PRONOUNS, FILLER_TO_BE,
};
use turnstile::domain::turn::TurnInput;
use turnstile::eval::conversations::{is_test_part, parse_conversations};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const CONFIG: &str = "config/agents.example.yaml";
const DATA_DIR: &str = "tests/data/conversations";

/// An entry counts only with at least this many words.
const MIN_WORDS: usize = 3;

/// A configured text and where it is configured.
#[derive(Debug, Clone)]
struct Entry {
    text: String,
    source: String,
}

/// One customer turn of a test-part conversation.
#[derive(Debug, Clone)]
struct Sentence {
    text: String,
    conversation: String,
    /// 1-based.
    turn: usize,
}

/// An offending pair.
#[derive(Debug, Clone)]
struct Offence {
    entry: Entry,
    sentence: Sentence,
    shared: usize,
    of: usize,
}

impl std::fmt::Display for Offence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{:?} ({}) shares {}/{} of its words with {:?} ({} turn {})",
            self.entry.text,
            self.entry.source,
            self.shared,
            self.of,
            self.sentence.text,
            self.sentence.conversation,
            self.sentence.turn
        )
    }
}

// ---- the measure ------------------------------------------------------------------------------

/// The word set of `text` (see the module doc).
fn words(text: &str) -> BTreeSet<String> {
    folded_words(text).into_iter().collect()
}

/// `(|E ∩ S|, max(|E|, |S|))` when E has at least [`MIN_WORDS`] words and shares 80 % or more
/// of the longer of the two word sets.
fn offends(entry: &BTreeSet<String>, sentence: &BTreeSet<String>) -> Option<(usize, usize)> {
    if entry.len() < MIN_WORDS {
        return None;
    }
    let of = entry.len().max(sentence.len());
    let shared = entry.intersection(sentence).count();
    (5 * shared >= 4 * of).then_some((shared, of))
}

fn offences(entries: &[Entry], sentences: &[Sentence]) -> Vec<Offence> {
    let sentence_words: Vec<BTreeSet<String>> = sentences.iter().map(|s| words(&s.text)).collect();
    let mut out = Vec::new();
    for entry in entries {
        let e = words(&entry.text);
        for (sentence, s) in sentences.iter().zip(&sentence_words) {
            if let Some((shared, of)) = offends(&e, s) {
                out.push(Offence {
                    entry: entry.clone(),
                    sentence: sentence.clone(),
                    shared,
                    of,
                });
            }
        }
    }
    out
}

// ---- the entries ------------------------------------------------------------------------------

fn push_examples(out: &mut Vec<Entry>, examples: &Examples, at: &str) {
    for (locale, texts) in examples {
        for (i, text) in texts.iter().enumerate() {
            out.push(Entry {
                text: text.clone(),
                source: format!("{CONFIG}: {at}.{}[{i}]", locale.tag()),
            });
        }
    }
}

fn push_topics(out: &mut Vec<Entry>, topics: &[Topic], at: &str) {
    for topic in topics {
        let Topic {
            name,
            examples,
            reply: _,
            out_of_scope: _,
            ends_session: _,
        } = topic;
        push_examples(out, examples, &format!("{at}.{name}.examples"));
    }
}

/// Every example list of every assistant of `catalog`. Destructured without `..`: a list added
/// to the catalog does not compile here until it is taken or set aside.
fn configured_entries(catalog: &Catalog) -> Vec<Entry> {
    let mut out = Vec::new();
    for (id, assistant) in &catalog.assistants {
        let Assistant {
            agent_id: _,
            tenants: _,
            agents: _, // names and descriptions of domain agents, not utterances
            tools,
            messages: _, // what the bot says, not the customer
            default_locale: _,
            router_profile: _,
            interpreter_profile: _,
            session_examples,
            conversation,
            currency_symbol: _,
        } = assistant;
        let at = format!("assistants.{id}");
        for (name, tool) in tools {
            let Tool {
                name: _,
                agent: _,
                description: _,
                title: _,
                parameters: _, // labels and synonyms name a parameter; they are not utterances
                confirmation: _,
                pre_validation: _,
                max_attempts: _,
                on_attempts_exhausted: _,
                endpoint: _,
                pre_validation_endpoint: _,
                examples,
                action_verbs,
                questions,
                wording: _,
            } = tool;
            let at = format!("{at}.tools.{name}");
            push_examples(&mut out, examples, &format!("{at}.examples"));
            push_examples(&mut out, action_verbs, &format!("{at}.action_verbs"));
            push_topics(&mut out, questions, &format!("{at}.questions"));
        }
        let SessionExamples {
            human_handoff,
            end_session,
            cancel,
            out_of_scope,
        } = session_examples;
        for (key, examples) in [
            ("human_handoff", human_handoff),
            ("end_session", end_session),
            ("cancel", cancel),
            ("out_of_scope", out_of_scope),
        ] {
            push_examples(&mut out, examples, &format!("{at}.session_examples.{key}"));
        }
        push_topics(&mut out, conversation, &format!("{at}.conversation"));
    }
    out
}

/// The recogniser's lexicon and the parameter module's word lists.
fn lexicon_entries() -> Vec<Entry> {
    let mut out: Vec<Entry> = lexicon_phrases()
        .map(|p| Entry {
            text: p.to_owned(),
            source: "src/domain/confirmation.rs LEXICON".into(),
        })
        .collect();
    out.extend(farewell_phrases().map(|text| Entry {
        text,
        source: "src/domain/confirmation.rs FAREWELL_PHRASES".into(),
    }));
    let lists: [(&str, &[&str]); 7] = [
        ("CORRECTION_MARKERS", CORRECTION_MARKERS),
        ("FILLER_ARTICLES", FILLER_ARTICLES),
        ("FILLER_PRONOUNS", FILLER_PRONOUNS),
        ("FILLER_TO_BE", FILLER_TO_BE),
        ("FILLER_POLITENESS", FILLER_POLITENESS),
        ("FILLER_CONJUNCTIONS", FILLER_CONJUNCTIONS),
        ("FILLER_DISCOURSE", FILLER_DISCOURSE),
    ];
    for (name, list) in lists {
        out.extend(list.iter().map(|w| Entry {
            text: (*w).to_owned(),
            source: format!("turnstile::domain::parameter::{name}"),
        }));
    }
    out.extend(FILLER_PHRASES.iter().map(|p| Entry {
        text: p.join(" "),
        source: "turnstile::domain::parameter::FILLER_PHRASES".into(),
    }));
    out
}

// ---- the test sentences -----------------------------------------------------------------------

/// Every text turn of the test part of every set in [`DATA_DIR`], and the number of test-part
/// conversations.
fn test_sentences(catalog: &Catalog) -> (Vec<Sentence>, usize) {
    let dir = Path::new(ROOT).join(DATA_DIR);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no *.jsonl in {}", dir.display());
    let mut sentences = Vec::new();
    let mut conversations = 0;
    for file in &files {
        let label = format!(
            "{DATA_DIR}/{}",
            file.file_name().unwrap_or_default().to_string_lossy()
        );
        let text = std::fs::read_to_string(file).unwrap_or_else(|e| panic!("{label}: {e}"));
        let set = parse_conversations(&text, &label, catalog).unwrap_or_else(|e| panic!("{e}"));
        for c in set.iter().filter(|c| is_test_part(&c.id)) {
            conversations += 1;
            for (i, turn) in c.turns.iter().enumerate() {
                if let TurnInput::Text(t) = &turn.input {
                    sentences.push(Sentence {
                        text: t.clone(),
                        conversation: c.id.clone(),
                        turn: i + 1,
                    });
                }
            }
        }
    }
    (sentences, conversations)
}

fn example_catalog() -> Catalog {
    load_catalog(&Path::new(ROOT).join(CONFIG)).unwrap_or_else(|e| panic!("{CONFIG}:\n{e}"))
}

// ---- the tests --------------------------------------------------------------------------------

#[test]
fn no_configured_example_or_lexicon_entry_repeats_a_test_sentence() {
    let catalog = example_catalog();
    let (sentences, conversations) = test_sentences(&catalog);
    let mut entries = configured_entries(&catalog);
    let configured = entries.len();
    entries.extend(lexicon_entries());
    let counted = entries
        .iter()
        .filter(|e| words(&e.text).len() >= MIN_WORDS)
        .count();
    let found = offences(&entries, &sentences);
    eprintln!(
        "overlap guard: {} entries ({configured} configured, {} lexicon), {counted} of at least \
         {MIN_WORDS} words, against {} test sentences of {conversations} test-part conversations: \
         {} offending pairs",
        entries.len(),
        entries.len() - configured,
        sentences.len(),
        found.len()
    );
    // The inputs are really there (a broken loader or an empty part would pass vacuously).
    assert!(configured > 100, "only {configured} configured examples");
    assert!(
        conversations > 30,
        "only {conversations} test-part conversations"
    );
    assert!(
        found.is_empty(),
        "{} configured example or lexicon entries share 80 % or more of their words with a \
         sentence of the test part (reword or drop the entry; tune on the dev part only):\n{}",
        found.len(),
        found
            .iter()
            .map(|o| format!("  {o}"))
            .collect::<Vec<_>>()
            .join("\n")
    );
}

#[test]
fn the_guard_finds_a_test_sentence_copied_into_the_examples() {
    let mut catalog = example_catalog();
    let (sentences, _) = test_sentences(&catalog);
    // A test sentence copied in another case and punctuation, its last word dropped: all of the
    // copy's words are still the sentence's.
    let altered = |text: &str| {
        let mut kept: Vec<&str> = text.split_whitespace().collect();
        kept.pop();
        format!("{}!!", kept.join(" ").to_uppercase())
    };
    let copied = sentences
        .iter()
        .find(|s| words(&altered(&s.text)).len() >= MIN_WORDS)
        .expect("a long enough test sentence")
        .clone();
    let example = altered(&copied.text);
    let assistant = catalog
        .assistants
        .values_mut()
        .next()
        .expect("an assistant");
    let tool = assistant.tools.values_mut().next().expect("a tool");
    let list = tool.examples.values_mut().next().expect("an example list");
    list.push(example.clone());
    let found = offences(&configured_entries(&catalog), &sentences);
    assert!(
        found.iter().any(|o| o.entry.text == example
            && o.entry.source.contains(".examples.")
            && o.sentence.conversation == copied.conversation
            && o.sentence.turn == copied.turn),
        "{example:?}, copied from {:?} ({} turn {}), was not found: {found:?}",
        copied.text,
        copied.conversation,
        copied.turn
    );
}

#[test]
fn the_measure_folds_splits_and_needs_three_words() {
    let w = |t: &str| words(t).into_iter().collect::<Vec<_>>();
    assert_eq!(
        w("Não, é o PED-1001! Não."),
        ["1001", "e", "nao", "o", "ped"]
    );
    assert_eq!(w("that's CANCELLED"), ["cancelled", "s", "that"]);
    assert_eq!(
        w("na\u{303}o"),
        ["nao"],
        "a combining accent is folded, not a split"
    );
    let e = words("cancel my order please");
    assert_eq!(
        offends(&e, &words("hey can you cancel my order")),
        None,
        "3 of 4 = 75 %"
    );
    assert_eq!(
        offends(&e, &words("pls cancel my order, please!")),
        Some((4, 5)),
        "4 of the longer one's 5 = 80 %"
    );
    assert_eq!(
        offends(
            &e,
            &words("hi, please cancel my order, it never shipped and I am tired")
        ),
        None,
        "a short entry inside a long message is no copy of it"
    );
    assert_eq!(
        offends(
            &words("quero cancelar meu pedido agora"),
            &words("quero cancelar meu pedido")
        ),
        Some((4, 5)),
        "4 of 5 = 80 % counts"
    );
    assert_eq!(
        offends(&words("pode sim"), &words("pode sim")),
        None,
        "two-word entries are not checked"
    );
    assert_eq!(
        offends(&words("yes yes yes"), &words("yes")),
        None,
        "a set: one word"
    );
}
