//! CLINC150 (Larson et al., EMNLP-IJCNLP 2019, CC BY 3.0) in its own JSON format:
//! `{"train": [[text, intent], ...], "val": [...], "test": [...], "oos_train": [...], ...}`.
//! The project's copy (`tests/data/clinc150/data_train_val.json`) holds `train` and `val`;
//! CLINC's full file (`data_full.json`) also holds `test`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// One split: `(text, intent)` pairs in file order.
pub type Split = Vec<(String, String)>;

/// Every split of one file, by name.
#[derive(Debug, Clone, Default)]
pub struct Clinc150 {
    pub splits: BTreeMap<String, Split>,
}

#[derive(Debug, thiserror::Error)]
pub enum Clinc150Error {
    #[error("cannot read {}: {source}; pass the path of CLINC150's JSON file (e.g. tests/data/clinc150/data_train_val.json)", path.display())]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{} is not CLINC150's JSON format at `{at}`: {message}; expected {{\"train\": [[text, intent], ...], \"val\": [...], ...}}", path.display())]
    Format {
        path: PathBuf,
        at: String,
        message: String,
    },
    #[error("{} has no split `{split}` (it has: {}); the held-out `test` split is only in CLINC's full file, data_full.json", path.display(), have.join(", "))]
    MissingSplit {
        path: PathBuf,
        split: String,
        have: Vec<String>,
    },
}

impl Clinc150 {
    pub fn load(path: &Path) -> Result<Clinc150, Clinc150Error> {
        let bytes = std::fs::read(path).map_err(|source| Clinc150Error::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Clinc150::parse(path, &bytes)
    }

    /// `path` only names the source in errors.
    pub fn parse(path: &Path, bytes: &[u8]) -> Result<Clinc150, Clinc150Error> {
        let mut de = serde_json::Deserializer::from_slice(bytes);
        let splits: BTreeMap<String, Split> =
            serde_path_to_error::deserialize(&mut de).map_err(|e| Clinc150Error::Format {
                path: path.to_path_buf(),
                at: e.path().to_string(),
                message: e.inner().to_string(),
            })?;
        Ok(Clinc150 { splits })
    }

    pub fn split(&self, path: &Path, name: &str) -> Result<&Split, Clinc150Error> {
        self.splits
            .get(name)
            .ok_or_else(|| Clinc150Error::MissingSplit {
                path: path.to_path_buf(),
                split: name.to_string(),
                have: self.splits.keys().cloned().collect(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_clinc_format_and_names_what_is_wrong() {
        let path = Path::new("f.json");
        let data = Clinc150::parse(path, br#"{"train": [["yes please", "yes"]], "val": []}"#)
            .expect("valid");
        assert_eq!(
            data.split(path, "train").expect("train")[0],
            ("yes please".to_string(), "yes".to_string())
        );
        let missing = data
            .split(path, "test")
            .expect_err("no test split")
            .to_string();
        assert!(
            missing.contains("no split `test`") && missing.contains("train, val"),
            "{missing}"
        );

        let bad = Clinc150::parse(path, br#"{"train": [["only text"]]}"#)
            .expect_err("pairs")
            .to_string();
        assert!(bad.contains("`train[0]`"), "{bad}");
        let not_json = Clinc150::parse(path, b"{").expect_err("json").to_string();
        assert!(
            not_json.contains("not CLINC150's JSON format"),
            "{not_json}"
        );
    }
}
