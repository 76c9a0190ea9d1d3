//! The client's side of the engine: one client over standard input and output ([`stdio`]),
//! or any number over Streamable HTTP behind `capability-http`'s edge ([`http`]).

pub(crate) mod http;
pub(crate) mod stdio;
