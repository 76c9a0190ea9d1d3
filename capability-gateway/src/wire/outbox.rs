//! The lines on their way to a stdio client, and how many bytes of them wait: the room a
//! client that reads slower than it is written to leaves, and the requests in flight that
//! hold room for their answers.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::value::RawValue;
use tokio::sync::{Notify, mpsc};

use crate::wire::envelope::{Cancelled, Envelope};

/// The most bytes waiting for the client before those who can wait for room do: lines queued
/// for its writer ([`Outbox::room`]: a server's output and rmcp's lines stop being read), and
/// those lines with the room its requests in flight hold ([`Outbox::room_to_read`]: the
/// client's next line is not read).
const ROOM_BYTES: usize = 8 * 1024 * 1024;

/// The lines on their way to the client, in order, and how many bytes of them wait.
#[derive(Clone)]
pub(crate) struct Outbox {
    lines: mpsc::UnboundedSender<Vec<u8>>,
    pub(crate) waiting: Arc<Waiting>,
    /// The client's output, written from threads (the gateway's stdio lane), when it is.
    direct: Option<Arc<Direct>>,
}

/// The client's output written in place by the thread that has a line for it (the lane's
/// answers and progress, on the thread that read them from the server), one whole line at a
/// time, waiting while the client does not read. The queued lines ([`Outbox::send`]) go
/// through it too, written by a thread of their own.
pub(crate) struct Direct(Mutex<Option<Box<dyn std::io::Write + Send>>>);

impl Direct {
    /// Writes to `output` (blocking).
    pub(crate) fn new(output: impl std::io::Write + Send + 'static) -> Arc<Direct> {
        Arc::new(Direct(Mutex::new(Some(Box::new(output)))))
    }

    /// Writes `line` whole and flushes it; once a write fails (the client is gone), every
    /// write after it is refused.
    pub(crate) fn write(&self, line: &[u8]) -> Result<(), Gone> {
        let mut output = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let written = match output.as_mut() {
            Some(out) => out.write_all(line).and_then(|()| out.flush()),
            None => return Err(Gone),
        };
        written.map_err(|_| {
            *output = None;
            Gone
        })
    }
}

/// The bytes waiting, shared by the senders and the writer.
#[derive(Default)]
pub(crate) struct Waiting {
    /// Of lines queued for the writer.
    queued: AtomicUsize,
    /// Of lines queued and of room held for answers to come.
    total: AtomicUsize,
    drained: Notify,
}

/// The client's writer is gone: the line was not sent.
#[derive(Debug)]
pub(crate) struct Gone;

impl Outbox {
    /// An outbox and the receiving end its writer reads.
    pub(crate) fn new() -> (Outbox, mpsc::UnboundedReceiver<Vec<u8>>) {
        let (lines, receiver) = mpsc::unbounded_channel();
        let outbox = Outbox {
            lines,
            waiting: Arc::default(),
            direct: None,
        };
        (outbox, receiver)
    }

    /// An outbox whose lines are written through `direct`: [`write_now`](Outbox::write_now)
    /// writes in place, and the queued lines are the receiver's to write through it.
    pub(crate) fn with_direct(direct: Arc<Direct>) -> (Outbox, mpsc::UnboundedReceiver<Vec<u8>>) {
        let (mut outbox, receiver) = Outbox::new();
        outbox.direct = Some(direct);
        (outbox, receiver)
    }

    /// Writes `line` (whole lines, each with its newline) to the client now, after the lines
    /// this thread wrote before it, waiting while the client does not read: the answers and
    /// progress of the gateway's lane, which stay in order because one thread writes them all.
    /// Without a direct writer (the runtime's front), it is queued as [`send`](Outbox::send)
    /// queues it.
    pub(crate) fn write_now(&self, line: &[u8]) -> Result<(), Gone> {
        match &self.direct {
            Some(direct) => direct.write(line),
            None => self.send(line.to_vec()),
        }
    }

    /// Whether the client's next line may be read at once (no wait for
    /// [`room_to_read`](Outbox::room_to_read)).
    pub(crate) fn may_read(&self) -> bool {
        self.waiting.total.load(Ordering::SeqCst) <= ROOM_BYTES || self.lines.is_closed()
    }

    /// Queues `line` (whole lines, each with its newline) for the client; it never waits.
    pub(crate) fn send(&self, line: Vec<u8>) -> Result<(), Gone> {
        let bytes = line.len();
        self.waiting.queued.fetch_add(bytes, Ordering::SeqCst);
        self.waiting.total.fetch_add(bytes, Ordering::SeqCst);
        self.lines.send(line).map_err(|_| {
            self.waiting.written(bytes);
            Gone
        })
    }

    /// Counts `bytes` against the client's reading until the [`Held`] is dropped: a request in
    /// flight, whose answer is still to come, takes room as its answer will. Held room does not
    /// hold back the servers' output, which its answers come in.
    fn hold(&self, bytes: usize) -> Held {
        self.waiting.total.fetch_add(bytes, Ordering::SeqCst);
        Held {
            waiting: self.waiting.clone(),
            bytes,
        }
    }

    /// Holds room for the answer to a request of `bytes` in flight: its size, at least
    /// [`ROOM_PER_REQUEST`] ([`Outbox::hold`]).
    pub(crate) fn hold_request(&self, bytes: usize) -> Held {
        self.hold(bytes.max(ROOM_PER_REQUEST))
    }

    /// Waits while more than [`ROOM_BYTES`] of lines are queued (at once if the writer is gone).
    pub(crate) async fn room(&self) {
        self.wait_while(&self.waiting.queued).await;
    }

    /// Waits while more than [`ROOM_BYTES`] of lines are queued or held for answers to come.
    pub(crate) async fn room_to_read(&self) {
        self.wait_while(&self.waiting.total).await;
    }

    /// Waits until no line waits for the client and no request of its holds room for an answer
    /// to come (or the client's writer is gone), for at most `within`: whether that came. The
    /// engine waits for it before it ends, so that the answers to the calls its servers' end
    /// failed reach the client before the process exits. A request that will not be answered
    /// is not waited for: its room goes with the [`InFlight`] holding it, once the client's
    /// input and rmcp's output have both ended (rmcp drains its answers for 5 s once its input
    /// ends, then drops the rest). It looks every few milliseconds: it is waited for once, and
    /// the answers' path notifies no one when the bytes reach nought.
    pub(crate) async fn flushed(&self, within: std::time::Duration) -> bool {
        const LOOK: std::time::Duration = std::time::Duration::from_millis(5);
        let pending = || self.waiting.total.load(Ordering::SeqCst) > 0 && !self.lines.is_closed();
        let looking = async {
            while pending() {
                tokio::time::sleep(LOOK).await;
            }
        };
        tokio::time::timeout(within, looking).await.is_ok()
    }

    async fn wait_while(&self, bytes: &AtomicUsize) {
        loop {
            let drained = self.waiting.drained.notified();
            let mut drained = std::pin::pin!(drained);
            // Listening before looking: a drain between the two is not missed.
            drained.as_mut().enable();
            if bytes.load(Ordering::SeqCst) <= ROOM_BYTES || self.lines.is_closed() {
                return;
            }
            drained.await;
        }
    }
}

/// Room taken in an [`Outbox`] until dropped ([`Outbox::hold`]).
pub(crate) struct Held {
    waiting: Arc<Waiting>,
    bytes: usize,
}

impl Drop for Held {
    fn drop(&mut self) {
        if less(&self.waiting.total, self.bytes) {
            self.waiting.drained.notify_waiters();
        }
    }
}

/// Takes `bytes` off `counter`: whether that made room.
fn less(counter: &AtomicUsize, bytes: usize) -> bool {
    let before = counter.fetch_sub(bytes, Ordering::SeqCst);
    before > ROOM_BYTES && before - bytes <= ROOM_BYTES
}

impl Waiting {
    /// `bytes` were written: those waiting for room are woken once it opens.
    pub(crate) fn written(&self, bytes: usize) {
        // Both, whatever the first says.
        let queued = less(&self.queued, bytes);
        if less(&self.total, bytes) || queued {
            self.drained.notify_waiters();
        }
    }

    /// Nothing more is written: no one waits for room any longer.
    pub(crate) fn ended(&self) {
        self.drained.notify_waiters();
    }
}

/// The least room a request in flight holds (its length if longer), the lane's or rmcp's: a
/// client that sends requests and does not read their answers is read no further once about
/// 2,000 small ones wait.
const ROOM_PER_REQUEST: usize = 4096;

/// The client's requests passed to rmcp and not yet answered, each holding room for its answer
/// ([`Outbox::hold`]) until rmcp writes one under its id, or the client cancels it. Keyed by the
/// id as rmcp writes it again (`1` and `"a"` stay as they are), a list per id: a client that
/// sends one id twice holds room twice.
#[derive(Default)]
pub(crate) struct InFlight(Mutex<HashMap<String, Vec<Held>>>);

/// The id rmcp would write for `raw`, if it is one rmcp takes (a number or a string).
fn key(raw: &RawValue) -> Option<String> {
    let id: ::rmcp::model::RequestId = serde_json::from_str(raw.get()).ok()?;
    serde_json::to_string(&id).ok()
}

impl InFlight {
    /// The client's `line` (JSON) goes to rmcp: a request holds room in `out` until answered; a
    /// cancellation lets go of the room its request held.
    pub(crate) fn sent(&self, line: &[u8], out: &Outbox) {
        let Ok(envelope) = serde_json::from_slice::<Envelope<'_>>(line) else {
            return;
        };
        match (envelope.method.as_deref(), envelope.id) {
            (Some("notifications/cancelled"), None) => {
                let cancelled = envelope
                    .params
                    .and_then(|p| serde_json::from_str::<Cancelled<'_>>(p.get()).ok());
                if let Some(key) = cancelled.and_then(|c| key(c.request_id)) {
                    drop(self.answered(&key));
                }
            }
            (Some(_), Some(id)) => {
                if let Some(key) = key(id) {
                    let held = out.hold_request(line.len());
                    self.map().entry(key).or_default().push(held);
                }
            }
            _ => {}
        }
    }

    /// rmcp wrote `line` to the client: an answer lets go of the room its request held, once
    /// the [`Held`] returned is dropped.
    #[must_use = "the room is let go of when the `Held` is dropped"]
    pub(crate) fn wrote(&self, line: &[u8]) -> Option<Held> {
        if self.map().is_empty() {
            return None;
        }
        let Ok(Envelope {
            id: Some(id),
            method: None,
            ..
        }) = serde_json::from_slice::<Envelope<'_>>(line)
        else {
            return None;
        };
        self.answered(&key(id)?)
    }

    /// The room held by a request of `key`, taken out (the last one sent with that id).
    fn answered(&self, key: &str) -> Option<Held> {
        let mut map = self.map();
        let held = map.get_mut(key)?;
        let last = held.pop();
        if held.is_empty() {
            map.remove(key);
        }
        last
    }

    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<String, Vec<Held>>> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn total(out: &Outbox) -> usize {
        out.waiting.total.load(Ordering::SeqCst)
    }

    #[test]
    fn a_request_holds_room_until_its_answer_or_its_cancellation() {
        let (out, _lines) = Outbox::new();
        let flight = InFlight::default();
        flight.sent(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#, &out);
        flight.sent(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#, &out);
        flight.sent(br#"{"jsonrpc":"2.0","id":"a","method":"ping"}"#, &out);
        assert_eq!(
            total(&out),
            3 * ROOM_PER_REQUEST,
            "one id twice holds twice"
        );
        // Not requests: a notification, a response to the server, an id rmcp does not take.
        flight.sent(
            br#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            &out,
        );
        flight.sent(br#"{"jsonrpc":"2.0","id":7,"result":{}}"#, &out);
        flight.sent(br#"{"jsonrpc":"2.0","id":{"x":1},"method":"ping"}"#, &out);
        assert_eq!(total(&out), 3 * ROOM_PER_REQUEST);

        // rmcp's answer, however it spaces it; a notification of rmcp's lets go of nothing.
        drop(
            flight.wrote(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/progress\",\"id\":1}\n"),
        );
        assert_eq!(total(&out), 3 * ROOM_PER_REQUEST);
        drop(flight.wrote(b"{\"jsonrpc\": \"2.0\", \"id\": 1, \"result\": {}}\n"));
        assert_eq!(total(&out), 2 * ROOM_PER_REQUEST);
        drop(flight.wrote(br#"{"jsonrpc":"2.0","id":"a","error":{"code":1,"message":"m"}}"#));
        assert_eq!(total(&out), ROOM_PER_REQUEST);
        // A cancellation, whether or not rmcp answers after it.
        flight.sent(
            br#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}"#,
            &out,
        );
        assert_eq!(total(&out), 0);
        drop(flight.wrote(br#"{"jsonrpc":"2.0","id":"a","result":{}}"#));
        assert_eq!(total(&out), 0);
    }

    #[test]
    fn a_long_request_holds_its_length() {
        let (out, _lines) = Outbox::new();
        let flight = InFlight::default();
        let long = format!(
            r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"p":"{}"}}}}"#,
            "x".repeat(10_000)
        );
        flight.sent(long.as_bytes(), &out);
        assert_eq!(total(&out), long.len());
    }

    #[tokio::test(flavor = "current_thread")]
    async fn held_room_stops_only_the_clients_reading() {
        let (out, mut lines) = Outbox::new();
        let held = out.hold(ROOM_BYTES + 1);
        // The servers' output is read on: nothing is queued.
        tokio::time::timeout(std::time::Duration::from_secs(1), out.room())
            .await
            .expect("room for the servers' output");
        let reading =
            tokio::time::timeout(std::time::Duration::from_millis(50), out.room_to_read());
        assert!(reading.await.is_err(), "the client's next line waits");
        let waiting = tokio::spawn({
            let out = out.clone();
            async move { out.room_to_read().await }
        });
        drop(held);
        tokio::time::timeout(std::time::Duration::from_secs(1), waiting)
            .await
            .expect("woken once the room is let go of")
            .expect("ran");
        // Queued lines stop both, until written.
        out.send(vec![b'x'; ROOM_BYTES + 1]).expect("sent");
        let queued = tokio::time::timeout(std::time::Duration::from_millis(50), out.room());
        assert!(queued.await.is_err(), "the servers' output waits");
        let line = lines.recv().await.expect("a line");
        out.waiting.written(line.len());
        tokio::time::timeout(std::time::Duration::from_secs(1), out.room())
            .await
            .expect("room once written");
    }

    /// The engine's last wait: an answer on its way (its request's room released only once
    /// it is queued) and then queued keeps `flushed` waiting, to its bound, until it is
    /// written; a request unanswered keeps it waiting while its `InFlight` lives, not once it
    /// is dropped; a writer that is gone ends the wait, with a line still queued.
    #[tokio::test(flavor = "current_thread")]
    async fn flushed_waits_for_every_answer_to_be_written() {
        use std::time::Duration;
        let (out, mut lines) = Outbox::new();
        let flight = InFlight::default();
        assert!(
            out.flushed(Duration::from_millis(50)).await,
            "nothing waits"
        );
        flight.sent(br#"{"jsonrpc":"2.0","id":1,"method":"tools/call"}"#, &out);
        assert!(
            !out.flushed(Duration::from_millis(50)).await,
            "a request waits for its answer"
        );
        let answer = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#.to_vec();
        let released = flight.wrote(&answer);
        assert_eq!(
            total(&out),
            ROOM_PER_REQUEST,
            "held until the answer is queued"
        );
        out.send(answer).expect("queued");
        drop(released);
        assert!(
            !out.flushed(Duration::from_millis(50)).await,
            "the answer waits for its writer"
        );
        let writer = tokio::spawn(async move {
            let line = lines.recv().await.expect("a line");
            out.waiting.written(line.len());
            (out, lines)
        });
        let (out, lines) = writer.await.expect("wrote");
        assert!(out.flushed(Duration::from_secs(5)).await, "written");
        assert!(out.flushed(Duration::MAX).await, "no bound is no panic");
        // A request taken and never answered is waited for while its `InFlight` holds it.
        flight.sent(br#"{"jsonrpc":"2.0","id":2,"method":"ping"}"#, &out);
        assert!(!out.flushed(Duration::from_millis(50)).await, "rmcp serves");
        drop(flight);
        assert!(
            out.flushed(Duration::from_secs(5)).await,
            "the client's input and rmcp's output ended"
        );
        out.send(b"{}\n".to_vec()).expect("queued");
        drop(lines);
        assert!(
            out.flushed(Duration::from_secs(5)).await,
            "a writer that is gone waits for nothing"
        );
    }
}
