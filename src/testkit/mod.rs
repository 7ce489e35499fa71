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

/// The multi-threaded runtime (two workers) a harness runs its test servers and store session on.
pub fn runtime() -> Result<tokio::runtime::Runtime, String> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))
}

/// The model and tool test servers, started on `rt` (each on a free loopback port).
pub fn start_servers(
    rt: &tokio::runtime::Runtime,
) -> Result<(model_server::ModelServer, tool_server::ToolServer), String> {
    let model = rt
        .block_on(model_server::ModelServer::try_start())
        .map_err(|e| format!("cannot start the model test server: {e}"))?;
    let tools = rt
        .block_on(tool_server::ToolServer::start())
        .map_err(|e| format!("cannot start the tool test server: {e}"))?;
    Ok((model, tools))
}
