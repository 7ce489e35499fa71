//! What tests, benches and harnesses share: real local HTTP servers that speak the model and
//! tool protocols (scripted answers and faults; loopback only), Kafka and CQL helpers, and the
//! worker as a child process.

pub mod bus;
pub mod cql;
pub mod model_server;
pub mod tool_server;
pub mod worker_process;
