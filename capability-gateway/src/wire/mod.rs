//! The bytes on the pipes: a peer's lines read with a bound ([`lines`]), descriptors made
//! blocking for the threads that read and write them (`blocking.rs`), what is read of a
//! client's message without building it (`envelope.rs`), and the lines on their way to a stdio
//! client with the room they take (`outbox.rs`).

pub(crate) mod blocking;
pub(crate) mod envelope;
pub mod lines;
pub(crate) mod outbox;
