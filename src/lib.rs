//! turnstile: a Kafka-native worker that keeps multi-turn customer-service transactions correct.
//!
//! # Layout
//!
//! Data flows one way: decode → load → decide → execute effects → save → publish → commit.
//!
//! ```text
//!   inbound turn ──► [pipeline] ── load ──► ports::CheckpointStore
//!                        │
//!                        ├── step ──► domain::engine (pure: state + turn + answers → request | outcome)
//!                        │              ▲        │ Request::{Classify, Route, Interpret,
//!                        │              │ Answer │          PreValidate, PersistExecuting, Execute}
//!                        │              └────────┘
//!                        ├── answers ◄── ports::DecisionModel / ports::ToolGateway
//!                        └── save, publish replies + events ──► worker::committer (one Kafka transaction:
//!                                                                 outputs + consumed offset)
//!   feedback: committed marks prune the checkpoint's outbox; the write-ahead (EXECUTING) row lets a
//!   restarted worker finish an execution; unpublished outbox entries are republished on load
//! ```
//!
//! | module | what it is |
//! |---|---|
//! | [`domain`] | the pure core: [`domain::state`] (`AgentState`, ST), [`domain::transaction`] (lifecycle table, LC), [`domain::parameter`] (typed parsers, MG-4), [`domain::confirmation`] (PR-6 recogniser), [`domain::engine`] (order of evaluation, PR/SC/EV), [`domain::effect`] (requests, answers, events), [`domain::catalog`] (assistants, tools, settings) |
//! | [`config`] | YAML configuration: agents and tools, session-control settings (seed names), model profiles; validation errors that name file, key and fix |
//! | [`ports`] | the traits the pipeline needs from outside: `DecisionModel`, `ToolGateway`, `CheckpointStore` |
//! | [`model`] | model-backed decisions: prompts, defensive output parsing, `OpenAiCompatibleModel` (HTTP chat), [`model::embedding`] (`EmbeddingModel`: example utterances, fitted head, `/v1/embeddings` client), [`model::configured`] (per-skill provider and the cascade), `ScriptedModel` |
//! | [`tool`] | domain tool endpoints: `HttpToolGateway` (webhooks, retries, idempotency keys, evidence), `ScriptedTools` |
//! | [`store`] | checkpoint stores: `ScyllaCheckpointStore` (CQL, fencing by lease epoch), `InMemoryCheckpointStore` |
//! | [`pipeline`] | drives one turn through the engine, performing each request with the ports |
//! | [`message`] | wire formats: inbound turn decoding (IO-3), replies, CloudEvents, dead-letter records |
//! | [`testkit`] | real loopback HTTP servers speaking the model and tool protocols, scripted, with faults |
//! | [`cli`] | subcommands of the binary (`classify`, `eval`, …) |
//! | [`eval`] | offline evaluations on real utterances (`turnstile eval`): CLINC150's format and benchmark ([`eval::intent_benchmark`]), first-turn decisions, the PR-6 recogniser report |
//! | [`chaos`] | the fault harness behind `turnstile chaos` (SIGKILL, rebalance, outages, hostile input) |
//! | [`worker`] | the Kafka worker: consumer thread, key-ordered dispatch, offsets, transactional committer |
//! | [`telemetry`] | the metric catalogue (names, labels, buckets) and JSON logging |
//! | [`clock`] | the wall clock, read only at the edges |
//! | [`scenario`] | the conversation-scenario format (`../shared/spec/scenarios.md`) and its runner |
//!
//! Contract requirement IDs (ST-1, PR-3, …) are cited in the code and tests that implement them.

#![forbid(unsafe_code)]

pub mod chaos;
pub mod cli;
pub mod clock;
pub mod config;
pub mod domain;
pub mod eval;
pub mod message;
pub mod model;
pub mod pipeline;
pub mod ports;
pub mod scenario;
pub mod store;
pub mod telemetry;
pub mod testkit;
pub mod tool;
pub mod worker;
