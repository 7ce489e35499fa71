//! TLS and credentials against real servers (issue 25 item 4): a Kafka broker whose client
//! listener is SASL_SSL with SCRAM-SHA-512, and a Cassandra node with client encryption and
//! PasswordAuthenticator, both with certificates the JDK's keytool made at their first start
//! (`bash scripts/services.sh up kafka-secure cassandra-secure`; docs/services.md "Secure
//! instances").
//!
//! - the real `turnstile run` binary, configured only through the environment the Helm chart
//!   renders for TLS + SCRAM + CQL TLS + CQL password (the variable names and literal values of
//!   `helm/turnstile/ci/secure-env.json`, which `scripts/check-deploy.sh` asserts the chart
//!   renders), consumes a turn and produces its reply through the SASL_SSL listener and saves its
//!   checkpoint through CQL over TLS; the test then loads that checkpoint through TLS too;
//! - the checkpoint store refuses a wrong password, a plaintext connection to the TLS port and
//!   a CA that did not sign the node's certificate;
//! - the broker refuses a wrong SCRAM password (the tests prove what they think they prove).
//!
//! The secure services are opt-in: without their variables (`KAFKA_SECURE_*`, `CQL_SECURE_*`,
//! written by `scripts/services.sh env`) a test prints why and passes, unless
//! `TURNSTILE_REQUIRE_SECURE_SERVICES=1` (what `scripts/test.sh` sets): then it fails.

#![cfg(feature = "harness")]

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Child;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{FutureProducer, Producer};
use serde_json::{json, Value};

use turnstile::domain::decision::Skill;
use turnstile::domain::turn::Identity;
use turnstile::store::cql::{CqlConfig, CqlCredentials, CqlTls, ScyllaCheckpointStore};
use turnstile::testkit::bus;
use turnstile::testkit::model_server::{Behaviour, ModelServer};
use turnstile::testkit::tool_server::ToolServer;
use turnstile::testkit::worker_process::{self, WorkerEnv};
use turnstile::worker::topics::create_topics_with;

const HINT: &str = "run: bash scripts/services.sh up kafka-secure cassandra-secure";
const AGENT: &str = "retail-bot";
const OUTPUT_TIMEOUT: Duration = Duration::from_secs(120);

// ---------------------------------------------------------------------------------------------
// The secure services, from the environment
// ---------------------------------------------------------------------------------------------

struct KafkaSecure {
    brokers: String,
    username: String,
    password: String,
    ca: String,
}

struct CqlSecure {
    contact: String,
    ca: String,
}

/// `None` (the test then passes, saying why) when the service is not up and not required.
fn absent(what: &str, vars: &str) {
    let message = format!("{what} is not up ({vars} unset); {HINT}");
    if std::env::var("TURNSTILE_REQUIRE_SECURE_SERVICES").as_deref() == Ok("1") {
        panic!("{message} (TURNSTILE_REQUIRE_SECURE_SERVICES=1: required)");
    }
    eprintln!("SKIPPED: {message}");
}

fn kafka_secure() -> Option<KafkaSecure> {
    let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (
        get("KAFKA_SECURE_BROKERS"),
        get("KAFKA_SECURE_USERNAME"),
        get("KAFKA_SECURE_PASSWORD"),
        get("KAFKA_SECURE_CA"),
    ) {
        (Some(brokers), Some(username), Some(password), Some(ca)) => Some(KafkaSecure {
            brokers,
            username,
            password,
            ca,
        }),
        _ => {
            absent("the SASL_SSL broker (kafka-secure)", "KAFKA_SECURE_*");
            None
        }
    }
}

fn cql_secure() -> Option<CqlSecure> {
    let get = |k: &str| std::env::var(k).ok().filter(|v| !v.is_empty());
    match (
        get("CQL_SECURE_CONTACT"),
        get("CQL_SECURE_USERNAME"),
        get("CQL_SECURE_PASSWORD"),
        get("CQL_SECURE_CA"),
    ) {
        (Some(contact), Some(_), Some(_), Some(ca)) => Some(CqlSecure { contact, ca }),
        _ => {
            absent(
                "the TLS + password Cassandra node (cassandra-secure)",
                "CQL_SECURE_*",
            );
            None
        }
    }
}

impl KafkaSecure {
    /// librdkafka settings, named as the worker's `TURNSTILE_KAFKA_*` variables name them.
    fn settings(&self, password: &str) -> Vec<(String, String)> {
        let chart = chart_env();
        vec![
            (
                "security.protocol".into(),
                chart["TURNSTILE_KAFKA_SECURITY_PROTOCOL"].clone(),
            ),
            (
                "sasl.mechanisms".into(),
                chart["TURNSTILE_KAFKA_SASL_MECHANISMS"].clone(),
            ),
            ("sasl.username".into(), self.username.clone()),
            ("sasl.password".into(), password.to_owned()),
            ("ssl.ca.location".into(), self.ca.clone()),
        ]
    }

    fn client(&self, password: &str) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers);
        for (k, v) in self.settings(password) {
            c.set(k, v);
        }
        c
    }
}

impl CqlSecure {
    /// A store configuration for `keyspace` over TLS with the credentials of the
    /// `CQL_SECURE_USERNAME` / `CQL_SECURE_PASSWORD` variables (read by name, as in production).
    fn config(&self, keyspace: &str) -> CqlConfig {
        CqlConfig {
            contact_points: vec![self.contact.clone()],
            keyspace: keyspace.to_owned(),
            request_timeout_ms: 10_000,
            credentials: Some(CqlCredentials {
                username: std::env::var("CQL_SECURE_USERNAME").unwrap_or_default(),
                password: std::env::var("CQL_SECURE_PASSWORD").ok(),
            }),
            tls: Some(CqlTls {
                ca_file: PathBuf::from(&self.ca),
                cert_file: None,
                key_file: None,
                verify_hostname: true,
            }),
            ..CqlConfig::default()
        }
    }
}

/// What the chart renders for TLS + SCRAM + CQL TLS + CQL password
/// (`helm/turnstile/ci/secure-env.json`: variable names, with the literal values; secrets and
/// mounted paths as `null`). `scripts/check-deploy.sh` asserts the chart renders exactly this.
fn chart_env() -> HashMap<String, String> {
    let path = manifest("helm/turnstile/ci/secure-env.json");
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    v["env"]
        .as_object()
        .expect("secure-env.json: an `env` object")
        .iter()
        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
        .collect()
}

fn manifest(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn unix_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

fn test_keyspace() -> String {
    format!(
        "turnstile_test_{}_{}",
        unix_secs(),
        bus::unique_suffix()
            .chars()
            .rev()
            .take(8)
            .collect::<String>()
    )
}

async fn drop_keyspace(cql: &CqlSecure, keyspace: &str) {
    if let Ok(store) = ScyllaCheckpointStore::connect(&cql.config(keyspace)).await {
        let _ = store
            .session()
            .query_unpaged(format!("DROP KEYSPACE IF EXISTS {keyspace}"), ())
            .await;
    }
}

struct ChildWorker {
    child: Child,
    log: PathBuf,
}

impl Drop for ChildWorker {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            worker_process::kill(&mut self.child);
        }
        if !std::thread::panicking() {
            let _ = std::fs::remove_file(&self.log);
        }
    }
}

/// The first record on `topic` whose `turn_id` header is `turn_id`, read committed through the
/// SASL_SSL listener.
fn read_output(kafka: &KafkaSecure, topic: &str, turn_id: &str, child: &ChildWorker) -> Value {
    let consumer: BaseConsumer = kafka
        .client(&kafka.password)
        .set(
            "group.id",
            format!("secure-reader-{}", bus::unique_suffix()),
        )
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .set("isolation.level", "read_committed")
        .create()
        .expect("secure consumer");
    consumer.subscribe(&[topic]).expect("subscribe");
    let until = Instant::now() + OUTPUT_TIMEOUT;
    while Instant::now() < until {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(500)) {
            let header = m.headers().and_then(|h| {
                h.iter()
                    .find(|x| x.key == turnstile::message::HEADER_TURN_ID)
                    .and_then(|x| x.value)
                    .map(|v| String::from_utf8_lossy(v).into_owned())
            });
            if header.as_deref() == Some(turn_id) {
                return m
                    .payload()
                    .and_then(|p| serde_json::from_slice(p).ok())
                    .unwrap_or(Value::Null);
            }
        }
    }
    panic!(
        "no reply to {turn_id} on {topic} within {OUTPUT_TIMEOUT:?}; worker log {}:\n{}",
        child.log.display(),
        std::fs::read_to_string(&child.log).unwrap_or_default()
    );
}

// ---------------------------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------------------------

/// The worker, configured as the chart configures it, serves a turn end to end: consumed and
/// replied through SASL_SSL (SCRAM-SHA-512, the test CA), its checkpoint saved through CQL over
/// TLS with password authentication, and loaded back through TLS by the test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_worker_consumes_produces_and_checkpoints_through_tls_and_credentials() {
    let (Some(kafka), Some(cql)) = (kafka_secure(), cql_secure()) else {
        return;
    };
    let keyspace = test_keyspace();
    ScyllaCheckpointStore::migrate(&cql.config(&keyspace))
        .await
        .unwrap_or_else(|e| panic!("migrate {keyspace} over TLS: {e}; {HINT}"));
    let topics = bus::unique_topics("secure");
    let overrides = kafka.settings(&kafka.password);
    create_topics_with(&kafka.brokers, &overrides, &topics, 2)
        .await
        .unwrap_or_else(|e| panic!("create topics through SASL_SSL: {e}; {HINT}"));

    let model = ModelServer::start().await;
    model.set_default(
        Skill::Classifier,
        Behaviour::answer(json!({"decision": "ROUTE", "confidence": 0.96})),
    );
    model.set_default(
        Skill::Router,
        Behaviour::answer(json!({"out_of_scope": true, "confidence": 0.93})),
    );
    let tools = ToolServer::start().await.expect("tool server");

    // The child's environment: the harness's plaintext-free basics, then exactly the chart's
    // security variables (literal values from secure-env.json; secrets and paths filled in).
    let mut env = WorkerEnv {
        log_filter: "info".into(),
        config: manifest("config/agents.example.yaml"),
        profiles: manifest("config/profiles.example.yaml"),
        brokers: kafka.brokers.clone(),
        group_id: format!("secure-{}", bus::unique_suffix()),
        topics: topics.clone(),
        keyspace: keyspace.clone(),
        cql_contact: cql.contact.clone(),
        model_base_url: model.base_url(),
        tools_base_url: tools.base_url(),
        session_timeout_ms: 6_000,
        drain_budget_ms: 3_000,
        commit_interval_ms: None,
    }
    .vars()
    .expect("worker environment");
    let filled = |name: &str| -> String {
        match name {
            "TURNSTILE_KAFKA_SASL_USERNAME" => kafka.username.clone(),
            "TURNSTILE_KAFKA_SASL_PASSWORD" => kafka.password.clone(),
            "TURNSTILE_KAFKA_SSL_CA_LOCATION" => kafka.ca.clone(),
            "TURNSTILE_CQL_USERNAME" => std::env::var("CQL_SECURE_USERNAME").unwrap_or_default(),
            "TURNSTILE_CQL_PASSWORD" => std::env::var("CQL_SECURE_PASSWORD").unwrap_or_default(),
            "TURNSTILE_CQL_TLS_CA_FILE" => cql.ca.clone(),
            other => panic!("secure-env.json names {other}, which this test cannot fill in"),
        }
    };
    for (name, value) in chart_env() {
        let value = if value.is_empty() {
            filled(&name)
        } else {
            value
        };
        env.push((name, value));
    }
    env.push((
        "TURNSTILE_INSTANCE_ID".into(),
        format!("secure-{}", bus::unique_suffix()),
    ));
    env.push(("TURNSTILE_LISTEN".into(), "127.0.0.1:0".into()));
    let log = std::env::temp_dir().join(format!("turnstile-secure-{}.log", bus::unique_suffix()));
    let exe = PathBuf::from(env!("CARGO_BIN_EXE_turnstile"));
    let child = ChildWorker {
        child: worker_process::spawn(&exe, &env, &log, "secure worker").expect("spawn"),
        log,
    };

    // A turn in, through SASL_SSL.
    let producer: FutureProducer = kafka
        .client(&kafka.password)
        .set("enable.idempotence", "true")
        .create()
        .expect("secure producer");
    let session = format!("s-{}", bus::unique_suffix());
    let turn_id = format!("t-{}", bus::unique_suffix());
    let body = bus::turn_json(
        "acme",
        AGENT,
        &session,
        &turn_id,
        Some("what is the weather on mars"),
        None,
        "en",
        None,
    );
    bus::produce(
        &producer,
        &topics.inbound,
        &format!("acme/{AGENT}/{session}"),
        &body,
    )
    .await
    .unwrap_or_else(|e| panic!("produce through SASL_SSL: {e}"));
    let _ = producer.flush(Duration::from_secs(10));

    // Its reply out, committed, through SASL_SSL.
    let reply =
        tokio::task::block_in_place(|| read_output(&kafka, &topics.replies, &turn_id, &child));
    assert_eq!(reply["turn_id"], json!(turn_id), "reply: {reply}");

    // Its checkpoint, saved by the worker through CQL over TLS, loaded through TLS.
    let store = ScyllaCheckpointStore::connect(&cql.config(&keyspace))
        .await
        .unwrap_or_else(|e| panic!("connect over TLS: {e}"));
    let identity = Identity::new("acme", AGENT, &session);
    let row = store
        .load_row(&identity)
        .await
        .unwrap_or_else(|e| panic!("load over TLS: {e}"));
    assert!(
        row.is_some(),
        "no checkpoint for {} after the reply",
        identity.key()
    );
    let log_text = std::fs::read_to_string(&child.log).unwrap_or_default();
    assert!(
        log_text.contains("\"tls\":true") && log_text.contains("\"password_auth\":true"),
        "the worker's store connection log line should say tls and password_auth: {log_text}"
    );
    drop(child);
    drop_keyspace(&cql, &keyspace).await;
}

/// The node really demands what the worker gave it: a wrong password, a plaintext connection
/// and a CA that did not sign the node's certificate are all refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cql_store_refuses_a_wrong_password_plaintext_and_an_untrusted_ca() {
    let Some(cql) = cql_secure() else {
        return;
    };
    let keyspace = test_keyspace();
    ScyllaCheckpointStore::migrate(&cql.config(&keyspace))
        .await
        .unwrap_or_else(|e| panic!("migrate {keyspace} over TLS: {e}; {HINT}"));
    let good = cql.config(&keyspace);
    let connects =
        |cfg: CqlConfig| async move { ScyllaCheckpointStore::connect(&cfg).await.map(drop) };
    let ok = connects(good.clone()).await;
    assert!(ok.is_ok(), "TLS + password should connect: {ok:?}");

    let wrong_password = CqlConfig {
        credentials: good.credentials.clone().map(|c| CqlCredentials {
            password: Some("certainly-not-the-password".into()),
            ..c
        }),
        ..good.clone()
    };
    let r = connects(wrong_password).await;
    let text = format!("{r:?}").to_lowercase();
    assert!(
        r.is_err() && (text.contains("authenticat") || text.contains("credentials")),
        "a wrong password must be refused as such: {r:?}"
    );

    let plaintext = CqlConfig {
        tls: None,
        ..good.clone()
    };
    let r = connects(plaintext).await;
    assert!(r.is_err(), "plaintext to the TLS port must fail: {r:?}");

    let system_cas = PathBuf::from("/etc/ssl/certs/ca-certificates.crt");
    if system_cas.is_file() {
        let untrusted = CqlConfig {
            tls: Some(CqlTls {
                ca_file: system_cas,
                cert_file: None,
                key_file: None,
                verify_hostname: true,
            }),
            ..good.clone()
        };
        let r = connects(untrusted).await;
        assert!(
            r.is_err(),
            "a CA that did not sign the node's certificate must be refused: {r:?}"
        );
    }
    drop_keyspace(&cql, &keyspace).await;
}

/// The broker's client listener takes SCRAM credentials over TLS and refuses a wrong password:
/// the end-to-end test above did not pass through some open door.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sasl_ssl_listener_refuses_a_wrong_scram_password() {
    let Some(kafka) = kafka_secure() else {
        return;
    };
    let metadata = |password: &str| {
        let consumer: BaseConsumer = kafka
            .client(password)
            .create()
            .expect("secure metadata client");
        consumer
            .fetch_metadata(None, Duration::from_secs(10))
            .map(|m| m.brokers().len())
    };
    let good = tokio::task::block_in_place(|| metadata(&kafka.password));
    assert!(
        matches!(good, Ok(n) if n >= 1),
        "SCRAM over TLS with the right password: {good:?}"
    );
    let bad = tokio::task::block_in_place(|| metadata("not-the-password"));
    assert!(bad.is_err(), "a wrong SCRAM password must be refused");
}
