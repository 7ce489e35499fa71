//! Real local HTTP servers that speak the model and tool protocols, with scripted answers and
//! faults: for tests, the HTTP scenario mode and the end-to-end runner. Loopback only.

pub mod bus;
pub mod cql;
pub mod model_server;
pub mod tool_server;
