//! The events of a `text/event-stream` body, read as its chunks come, each at most a bound
//! long (an event longer is an error, and nothing more is read). Both readers of a server's
//! stream use it: the lane ([`super::Reach`]), which wants each event's data, and the POST
//! rmcp's client makes ([`super::post`]), which wants the whole event as
//! [`sse_stream::Sse`] (its `id` and `retry` are how rmcp resumes a stream, its `event` name
//! what rmcp takes for a message).
//!
//! The bound is counted as rmcp's own reader counts it (`client_side_sse.rs`,
//! `SseEventSizeLimiter`): the bytes of an event's lines but its comments, each line with its
//! end, and the line being read. Fields are read as the HTML standard says (an unknown field
//! or a line without a colon is ignored, the last `id` or `event` wins, a `retry` that is not
//! digits is ignored, an `id` holding NUL is ignored); an event is given when it set any field,
//! so a server's priming event (an `id`, empty data) is given too.

use sse_stream::Sse;

/// The reader's state between chunks.
pub(crate) struct Events {
    limit: usize,
    /// The line being read.
    line: Vec<u8>,
    /// The bytes counted against the bound so far for the event being read.
    size: usize,
    /// The data of the event being read (its lines joined by `\n`, each ended by one).
    data: Vec<u8>,
    has_data: bool,
    /// The event's other fields, and whether any field was read.
    event: Sse,
    any: bool,
    /// The last chunk ended with `\r`: a `\n` first in the next one ends no line.
    after_cr: bool,
    /// No line was read yet (a byte order mark first is skipped).
    first: bool,
}

impl Events {
    /// Events of at most `limit` bytes each.
    pub(crate) fn new(limit: usize) -> Events {
        Events {
            limit,
            line: Vec::new(),
            size: 0,
            data: Vec::new(),
            has_data: false,
            event: Sse::default(),
            any: false,
            after_cr: false,
            first: true,
        }
    }

    /// Reads `chunk`: each event it completes goes to `complete`, in order, until the stream
    /// cannot be read on (an event over the bound, a field that is not UTF-8): then why,
    /// after the events completed before.
    pub(crate) fn feed(&mut self, mut chunk: &[u8], complete: &mut Vec<Sse>) -> Result<(), String> {
        if self.after_cr && chunk.first() == Some(&b'\n') {
            chunk = &chunk[1..];
        }
        self.after_cr = false;
        while let Some(end) = memchr::memchr2(b'\n', b'\r', chunk) {
            self.line.extend_from_slice(&chunk[..end]);
            if chunk[end] == b'\r' {
                match chunk.get(end + 1) {
                    Some(b'\n') => chunk = &chunk[end + 2..],
                    Some(_) => chunk = &chunk[end + 1..],
                    None => {
                        self.after_cr = true;
                        chunk = &[];
                    }
                }
            } else {
                chunk = &chunk[end + 1..];
            }
            let line = std::mem::take(&mut self.line);
            self.bound(line.len())?;
            if let Some(event) = self.read_line(&line)? {
                complete.push(event);
            }
            self.bound(0)?;
            self.line = line;
            self.line.clear();
        }
        self.line.extend_from_slice(chunk);
        self.bound(self.line.len())
    }

    /// The data of each event `chunk` completes that has any (what the lane reads), and why
    /// the stream cannot be read on if it cannot, after them.
    pub(crate) fn feed_data(&mut self, chunk: &[u8]) -> (Vec<String>, Option<String>) {
        let mut events = Vec::new();
        let failed = self.feed(chunk, &mut events).err();
        let data = events
            .into_iter()
            .filter_map(|event| event.data.filter(|data| !data.is_empty()))
            .collect();
        (data, failed)
    }

    fn bound(&self, line: usize) -> Result<(), String> {
        if self.size.saturating_add(line) > self.limit {
            return Err(format!(
                "an event of the server's stream is longer than {} bytes (--max-message)",
                self.limit
            ));
        }
        Ok(())
    }

    /// One line: the event when the line ends one.
    fn read_line(&mut self, mut line: &[u8]) -> Result<Option<Sse>, String> {
        if std::mem::take(&mut self.first) {
            line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        }
        if line.is_empty() {
            self.size = 0;
            if !std::mem::take(&mut self.any) {
                return Ok(None);
            }
            let mut event = std::mem::take(&mut self.event);
            if std::mem::take(&mut self.has_data) {
                let mut data = std::mem::take(&mut self.data);
                data.pop();
                event.data = Some(utf8(data)?);
            }
            return Ok(Some(event));
        }
        if line[0] == b':' {
            return Ok(None);
        }
        self.size += line.len() + 1;
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                self.data.extend_from_slice(value);
                self.data.push(b'\n');
                self.has_data = true;
            }
            b"event" => self.event.event = Some(utf8(value.to_vec())?),
            b"id" if !value.contains(&0) => self.event.id = Some(utf8(value.to_vec())?),
            b"retry" if !value.is_empty() && value.iter().all(u8::is_ascii_digit) => {
                // Digits that overflow are no delay a server could mean.
                match std::str::from_utf8(value).ok().and_then(|v| v.parse().ok()) {
                    Some(retry) => self.event.retry = Some(retry),
                    None => return Ok(None),
                }
            }
            _ => return Ok(None),
        }
        self.any = true;
        Ok(None)
    }
}

fn utf8(bytes: Vec<u8>) -> Result<String, String> {
    String::from_utf8(bytes).map_err(|_| "an event of the server's stream is not UTF-8".to_owned())
}

#[cfg(test)]
mod tests {
    use super::{Events, Sse};

    fn all(limit: usize, chunks: &[&[u8]]) -> Result<Vec<String>, String> {
        let mut events = Events::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            let (data, failed) = events.feed_data(chunk);
            out.extend(data);
            if let Some(why) = failed {
                return Err(why);
            }
        }
        Ok(out)
    }

    fn whole(limit: usize, chunks: &[&[u8]]) -> Result<Vec<Sse>, String> {
        let mut events = Events::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            events.feed(chunk, &mut out)?;
        }
        Ok(out)
    }

    #[test]
    fn data_lines_are_joined_and_comments_ignored() {
        let got = all(
            100,
            &[b"event: message\nid: 1\ndata: {\"a\":\ndata:1}\n\n: comment\n\ndata: x\n\n"],
        );
        assert_eq!(got, Ok(vec!["{\"a\":\n1}".to_owned(), "x".to_owned()]));
    }

    #[test]
    fn an_events_id_retry_and_name_are_kept_and_a_priming_event_is_given() {
        let got = whole(
            100,
            &[b"\xEF\xBB\xBFid: 7\nretry: 1500\ndata:\n\nevent: message\nid: 8\ndata: m\n\n"],
        );
        let priming = Sse {
            id: Some("7".into()),
            retry: Some(1500),
            data: Some(String::new()),
            event: None,
        };
        let message = Sse {
            id: Some("8".into()),
            event: Some("message".into()),
            data: Some("m".into()),
            retry: None,
        };
        assert_eq!(got, Ok(vec![priming, message]));
        // What the standard says to ignore is ignored: not digits, NUL in an id, unknown
        // fields, a line without a colon.
        let got = whole(100, &[b"retry: 1s\nid: a\0b\nfoo: 1\nbar\ndata: d\n\n"]);
        assert_eq!(got, Ok(vec![Sse::default().data("d")]));
        assert_eq!(whole(100, &[b"foo: 1\n\n: c\n\n"]), Ok(vec![]));
    }

    #[test]
    fn any_line_ending_and_any_split_between_chunks() {
        let text = b"data: one\r\n\r\ndata: two\r\rdata: three\n\n";
        let whole = all(100, &[text]).unwrap();
        assert_eq!(whole, vec!["one", "two", "three"]);
        for at in 0..text.len() {
            let (a, b) = text.split_at(at);
            assert_eq!(all(100, &[a, b]).unwrap(), whole, "split at {at}");
        }
    }

    #[test]
    fn an_event_longer_than_the_bound_is_an_error() {
        let error = all(16, &[b"data: 0123456789\n", b"data: 0123456789\n\n"]).unwrap_err();
        assert!(error.contains("longer than 16 bytes"), "{error}");
        let error = all(16, &[b"data: 0123456789", b"0123456789"]).unwrap_err();
        assert!(error.contains("longer than 16 bytes"), "{error}");
        // Every line of an event counts, its ends too, as rmcp counts them: 16 bytes in all.
        assert_eq!(
            all(16, &[b"id: 1\ndata: abc\n\n"]),
            Ok(vec!["abc".to_owned()])
        );
        let error = all(16, &[b"id: 12\ndata: abc\n\n"]).unwrap_err();
        assert!(error.contains("longer than 16 bytes"), "{error}");
        // A long comment counts while it is read; a blank line starts the count afresh.
        assert!(all(16, &[b": 0123456789abcdef\n"]).is_err());
        let many = b"data: 0123456\n\n".repeat(10);
        assert_eq!(all(16, &[&many]).map(|d| d.len()), Ok(10));
        // The events completed before one over the bound are given, then why.
        let mut events = Events::new(16);
        let (data, failed) = events.feed_data(b"data: a\n\ndata: 0123456789\n\ndata: b\n\n");
        assert_eq!(data, ["a"]);
        assert!(failed.is_some_and(|why| why.contains("longer than 16 bytes")));
    }

    #[test]
    fn an_event_with_empty_data_is_not_given_as_data() {
        assert_eq!(
            all(100, &[b"id: 7\ndata: \n\ndata: m\n\n"]),
            Ok(vec!["m".to_owned()])
        );
    }

    #[test]
    fn an_unfinished_event_is_not_given() {
        assert_eq!(all(100, &[b"data: half\n"]), Ok(vec![]));
    }
}
