//! `ExampleIndex`: one assistant's example utterances (tools, session labels, cancel, out of
//! scope) as a fitted [`LinearHead`], built at start-up through the embeddings endpoint and
//! cached on disk by content hash — a restart with the same examples, model and prefix neither
//! re-embeds nor refits.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::domain::catalog::{Assistant, Examples};
use crate::model::embedding::client::{EmbeddingsClient, EmbeddingsError};
use crate::model::embedding::head::{FitOptions, LinearHead, FIT_VERSION};

/// Texts per embeddings call while building.
const BATCH: usize = 32;

/// What an example stands for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind", content = "name")]
pub enum Label {
    Tool(String),
    HumanHandoff,
    EndSession,
    /// Abandoning the transaction in flight without naming a new request.
    Cancel,
    /// A request the assistant does not serve.
    OutOfScope,
    /// Not a request: a question about a tool (`tool` set, PR-3a) or a conversational intent
    /// (SC-9), answered with its configured text.
    Topic {
        tool: Option<String>,
        name: String,
    },
}

#[derive(Debug, thiserror::Error)]
pub enum IndexError {
    #[error("assistant `{assistant}`: cannot embed its examples: {source} (fix: start the embeddings server, e.g. `bash scripts/services.sh up`, or check the profile's base_url)")]
    Embed {
        assistant: String,
        source: EmbeddingsError,
    },
    #[error("assistant `{0}` has no example utterances (fix: add `examples:` to its tools)")]
    Empty(String),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExampleIndex {
    pub labels: Vec<Label>,
    pub head: LinearHead,
    /// Example count per label, in `labels` order (for reports).
    pub counts: Vec<usize>,
}

/// The labelled texts of one assistant, in a fixed order.
pub fn labelled_examples(assistant: &Assistant) -> Vec<(Label, String)> {
    let mut out = Vec::new();
    let mut push = |label: Label, examples: &Examples| {
        for texts in examples.values() {
            out.extend(texts.iter().map(|t| (label.clone(), t.clone())));
        }
    };
    for (name, tool) in &assistant.tools {
        push(Label::Tool(name.clone()), &tool.examples);
        for q in &tool.questions {
            let label = Label::Topic {
                tool: Some(name.clone()),
                name: q.name.clone(),
            };
            push(label, &q.examples);
        }
    }
    for intent in &assistant.conversation {
        let label = Label::Topic {
            tool: None,
            name: intent.name.clone(),
        };
        push(label, &intent.examples);
    }
    let s = &assistant.session_examples;
    push(Label::HumanHandoff, &s.human_handoff);
    push(Label::EndSession, &s.end_session);
    push(Label::Cancel, &s.cancel);
    push(Label::OutOfScope, &s.out_of_scope);
    out
}

impl ExampleIndex {
    /// Embeds and fits (or loads both from `cache_dir`).
    pub async fn build(
        client: &EmbeddingsClient,
        assistant_id: &str,
        examples: &[(Label, String)],
        cache_dir: Option<&Path>,
        options: FitOptions,
    ) -> Result<ExampleIndex, IndexError> {
        if examples.is_empty() {
            return Err(IndexError::Empty(assistant_id.to_owned()));
        }
        let texts_key = content_key(client.space(), examples, None);
        let head_key = content_key(client.space(), examples, Some(options));
        let head_path = cache_dir.map(|d| d.join(format!("head-{head_key}.json")));
        if let Some(index) = head_path.as_deref().and_then(read_head) {
            tracing::info!(assistant = assistant_id, cache = %head_path.as_deref().map(Path::display).map(|d| d.to_string()).unwrap_or_default(), "Example head loaded from the cache.");
            return Ok(index);
        }
        let vectors_path = cache_dir.map(|d| d.join(format!("vectors-{texts_key}.bin")));
        let vectors = match vectors_path
            .as_deref()
            .and_then(|p| read_vectors(p, examples.len()))
        {
            Some(v) => v,
            None => {
                let texts: Vec<&str> = examples.iter().map(|(_, t)| t.as_str()).collect();
                let v = embed_all(client, &texts)
                    .await
                    .map_err(|source| IndexError::Embed {
                        assistant: assistant_id.to_owned(),
                        source,
                    })?;
                if let Some(p) = &vectors_path {
                    write_cache(p, &encode_vectors(&v));
                }
                v
            }
        };
        let index = ExampleIndex::fit(examples, &vectors, options);
        if let Some(p) = &head_path {
            if let Ok(json) = serde_json::to_vec(&index) {
                write_cache(p, &json);
            }
        }
        Ok(index)
    }

    /// Fits on already embedded examples (`vectors[i]` is `examples[i]`'s).
    pub fn fit(
        examples: &[(Label, String)],
        vectors: &[Vec<f32>],
        options: FitOptions,
    ) -> ExampleIndex {
        let mut labels: Vec<Label> = examples.iter().map(|(l, _)| l.clone()).collect();
        labels.sort();
        labels.dedup();
        let positions: BTreeMap<&Label, usize> =
            labels.iter().enumerate().map(|(i, l)| (l, i)).collect();
        let ys: Vec<usize> = examples.iter().map(|(l, _)| positions[l]).collect();
        let mut counts = vec![0; labels.len()];
        ys.iter().for_each(|&y| counts[y] += 1);
        // Topics are not calibrated on: see `LinearHead::fit_calibrating`.
        let topics: Vec<usize> = labels
            .iter()
            .enumerate()
            .filter(|(_, l)| matches!(l, Label::Topic { .. }))
            .map(|(i, _)| i)
            .collect();
        let head = LinearHead::fit_calibrating(vectors, &ys, labels.len(), options, &topics);
        ExampleIndex {
            labels,
            head,
            counts,
        }
    }

    /// Each label with its probability for the message vector `x`, most probable first.
    pub fn rank(&self, x: &[f32]) -> Vec<(&Label, f32)> {
        let mut ranked: Vec<(&Label, f32)> =
            self.labels.iter().zip(self.head.probabilities(x)).collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
        ranked
    }

    pub fn dim(&self) -> usize {
        self.head.dim
    }
}

pub async fn embed_all(
    client: &EmbeddingsClient,
    texts: &[&str],
) -> Result<Vec<Vec<f32>>, EmbeddingsError> {
    let mut out = Vec::with_capacity(texts.len());
    for chunk in texts.chunks(BATCH) {
        let vectors = client.embed_batch(chunk).await?;
        if let (Some(first), Some(v)) = (out.first().map(Vec::len), vectors.first()) {
            if v.len() != first {
                return Err(EmbeddingsError::Dimension {
                    expected: first,
                    got: v.len(),
                });
            }
        }
        out.extend(vectors);
    }
    Ok(out)
}

/// A content hash (UUID v5, SHA-1 based) of the vector space, the labelled texts and, for a
/// head, the fit options and arithmetic version.
fn content_key(
    space: &str,
    examples: &[(Label, String)],
    options: Option<FitOptions>,
) -> uuid::Uuid {
    let mut bytes = space.as_bytes().to_vec();
    for (label, text) in examples {
        bytes.extend_from_slice(format!("\n{label:?}\t{text}").as_bytes());
    }
    if let Some(o) = options {
        bytes.extend_from_slice(format!("\n{o:?} v{FIT_VERSION}").as_bytes());
    }
    uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, &bytes)
}

fn read_head(path: &Path) -> Option<ExampleIndex> {
    serde_json::from_slice(&std::fs::read(path).ok()?).ok()
}

/// `[count u32][dim u32][count × dim f32]`, little-endian.
fn encode_vectors(vectors: &[Vec<f32>]) -> Vec<u8> {
    let dim = vectors.first().map_or(0, Vec::len);
    let mut out = Vec::with_capacity(8 + vectors.len() * dim * 4);
    out.extend_from_slice(&(vectors.len() as u32).to_le_bytes());
    out.extend_from_slice(&(dim as u32).to_le_bytes());
    for v in vectors {
        for x in v {
            out.extend_from_slice(&x.to_le_bytes());
        }
    }
    out
}

fn read_vectors(path: &Path, expected: usize) -> Option<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path).ok()?;
    let word = |i: usize| -> Option<u32> {
        Some(u32::from_le_bytes(bytes.get(i..i + 4)?.try_into().ok()?))
    };
    let (count, dim) = (word(0)? as usize, word(4)? as usize);
    if count != expected || dim == 0 || bytes.len() != 8 + count * dim * 4 {
        return None;
    }
    let floats: Vec<f32> = bytes[8..]
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect();
    Some(floats.chunks(dim).map(<[f32]>::to_vec).collect())
}

/// Best effort: a cache that cannot be written only costs the next start its embedding time.
fn write_cache(path: &PathBuf, bytes: &[u8]) {
    let result = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| {
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, bytes)?;
            std::fs::rename(&tmp, path)
        });
    if let Err(e) = result {
        tracing::warn!(path = %path.display(), error = %e, "Cannot write the embeddings cache; the next start embeds again.");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vectors_round_trip_and_a_wrong_count_is_a_miss() {
        let dir = std::env::temp_dir().join(format!("turnstile-vec-{}", std::process::id()));
        let path = dir.join("v.bin");
        let vectors = vec![vec![0.5, -1.0], vec![2.0, 0.25]];
        write_cache(&path, &encode_vectors(&vectors));
        assert_eq!(read_vectors(&path, 2), Some(vectors));
        assert_eq!(read_vectors(&path, 3), None);
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn content_key_changes_with_any_text_label_or_option() {
        let a = vec![(Label::Cancel, "forget it".to_string())];
        let b = vec![(Label::OutOfScope, "forget it".to_string())];
        let c = vec![(Label::Cancel, "forget it!".to_string())];
        let k = |e: &[(Label, String)], o| content_key("space", e, o);
        assert_ne!(k(&a, None), k(&b, None));
        assert_ne!(k(&a, None), k(&c, None));
        assert_ne!(k(&a, None), k(&a, Some(FitOptions::default())));
        assert_ne!(k(&a, None), content_key("other", &a, None));
        assert_eq!(k(&a, None), k(&a, None));
    }
}
