//! `turnstile eval`: check decisions on real utterances before shipping a configuration.
//!
//! - `eval recogniser PATH [--split train|val|test] [--locale en] [--json] [--show-undecided]`:
//!   the PR-6 confirmation recogniser on CLINC150's `yes` / `no` / `maybe` utterances.
//!
//! Exit codes: 0 when the evaluation ran (whatever its figures), 64 when it could not (a file
//! that cannot be read or is not in the expected format, a split that is not in it).

use std::path::PathBuf;

use crate::domain::locale::Locale;
use crate::eval::clinc150::Clinc150;
use crate::eval::recogniser;

pub const EXIT_CONFIG: u8 = 64;

#[derive(Debug, Clone, clap::Subcommand)]
pub enum Command {
    /// The confirmation recogniser (PR-6) on CLINC150's yes / no / maybe utterances: polarity
    /// errors (with the utterances) and the recall of yes and no.
    Recogniser(RecogniserArgs),
}

#[derive(Debug, Clone, clap::Args)]
pub struct RecogniserArgs {
    /// CLINC150 JSON file in its own format (e.g. ../shared/data/clinc150/data_train_val.json).
    pub path: PathBuf,
    /// Split to read.
    #[arg(long, default_value = "train", value_parser = ["train", "val", "test"])]
    pub split: String,
    /// Language of the utterances (CLINC150 is English). The recogniser has one lexicon for both
    /// locales, so this labels the report.
    #[arg(long, default_value = "en")]
    pub locale: String,
    /// Print one JSON object instead of the text report.
    #[arg(long)]
    pub json: bool,
    /// Also list the yes / no utterances left undecided.
    #[arg(long)]
    pub show_undecided: bool,
}

pub fn run(command: Command) -> u8 {
    match command {
        Command::Recogniser(args) => run_recogniser(args),
    }
}

fn run_recogniser(args: RecogniserArgs) -> u8 {
    let Some(locale) = Locale::parse(&args.locale) else {
        eprintln!(
            "turnstile eval recogniser: unknown locale `{}`; use `en` or `pt-BR`",
            args.locale
        );
        return EXIT_CONFIG;
    };
    let split = Clinc150::load(&args.path).and_then(|data| {
        let split = data.split(&args.path, &args.split)?;
        Ok(recogniser::evaluate(
            &args.split,
            locale.tag(),
            split.iter().map(|(t, i)| (t.as_str(), i.as_str())),
        ))
    });
    match split {
        Ok(report) if args.json => match serde_json::to_string(&report) {
            Ok(json) => {
                println!("{json}");
                0
            }
            Err(e) => {
                eprintln!("turnstile eval recogniser: cannot encode the report: {e}");
                EXIT_CONFIG
            }
        },
        Ok(report) => {
            print!("{}", report.render(args.show_undecided));
            0
        }
        Err(e) => {
            eprintln!("turnstile eval recogniser: {e}");
            EXIT_CONFIG
        }
    }
}
