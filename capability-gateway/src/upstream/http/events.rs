//! The events of a `text/event-stream` body, read as its chunks come: the data of each event
//! that has any, each at most a bound long (an event longer is an error, and nothing more is
//! read).

/// The reader's state between chunks.
pub(crate) struct Events {
    limit: usize,
    /// The line being read.
    line: Vec<u8>,
    /// The data of the event being read (its lines joined by `\n`).
    data: Vec<u8>,
    has_data: bool,
    /// The last chunk ended with `\r`: a `\n` first in the next one ends no line.
    after_cr: bool,
}

impl Events {
    /// Events of at most `limit` bytes each.
    pub(crate) fn new(limit: usize) -> Events {
        Events {
            limit,
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            after_cr: false,
        }
    }

    /// Reads `chunk`: the data of each event it completes, in order, or why the stream cannot
    /// be read on (an event over the bound, data that is not UTF-8).
    pub(crate) fn feed(&mut self, mut chunk: &[u8]) -> Result<Vec<String>, String> {
        let mut complete = Vec::new();
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
            if let Some(data) = self.read_line(&line)? {
                complete.push(data);
            }
        }
        self.line.extend_from_slice(chunk);
        if self.line.len() + self.data.len() > self.limit {
            return Err(self.too_long());
        }
        Ok(complete)
    }

    fn too_long(&self) -> String {
        format!(
            "an event of the server's stream is longer than {} bytes (--max-message)",
            self.limit
        )
    }

    /// One line: the event's data when the line ends an event.
    fn read_line(&mut self, line: &[u8]) -> Result<Option<String>, String> {
        if line.is_empty() {
            if !self.has_data {
                return Ok(None);
            }
            self.has_data = false;
            let mut data = std::mem::take(&mut self.data);
            data.pop();
            // An event without data (a server's priming event, which only sets an id) holds
            // no message.
            if data.is_empty() {
                return Ok(None);
            }
            return String::from_utf8(data)
                .map(Some)
                .map_err(|_| "an event of the server's stream is not UTF-8".to_owned());
        }
        if line[0] == b':' {
            return Ok(None);
        }
        let (field, value) = match memchr::memchr(b':', line) {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        if field == b"data" {
            if self.data.len() + value.len() + 1 > self.limit {
                return Err(self.too_long());
            }
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
            self.has_data = true;
        }
        Ok(None)
    }
}

#[cfg(test)]
mod tests {
    use super::Events;

    fn all(limit: usize, chunks: &[&[u8]]) -> Result<Vec<String>, String> {
        let mut events = Events::new(limit);
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(events.feed(chunk)?);
        }
        Ok(out)
    }

    #[test]
    fn data_lines_are_joined_and_other_fields_ignored() {
        let got = all(
            100,
            &[b"event: message\nid: 1\ndata: {\"a\":\ndata:1}\n\n: comment\n\ndata: x\n\n"],
        );
        assert_eq!(got, Ok(vec!["{\"a\":\n1}".to_owned(), "x".to_owned()]));
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
    }

    #[test]
    fn an_event_with_empty_data_is_not_given() {
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
