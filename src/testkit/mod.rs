//! What tests, benches and harnesses share: real local HTTP servers that speak the model and
//! tool protocols (scripted answers and faults; loopback only), Kafka and CQL helpers, and the
//! worker as a child process.

// Test harness, never in a release build: declared behind `#[cfg(feature = "harness")]`.
// Ungating it fails `cargo check --lib --bins` (no features; scripts/test.sh) here.
#[cfg(not(feature = "harness"))]
compile_error!(
    "src/testkit is test harness: keep its `mod` line behind #[cfg(feature = \"harness\")]"
);

pub mod bus;
pub mod cql;
pub mod model_server;
pub mod tool_server;
pub mod worker_process;
