//! What both readers of a server's answer read a body with (the lane, [`super::Reach`], and the
//! POST made for rmcp's client, [`super::post`]): a body read whole within a bound, and the
//! JSON texts of a JSON body, one after another.

use serde_json::value::RawValue;

/// Why a body could not be read whole.
pub(super) enum Unread {
    /// It is longer than the bound (by its `Content-Length`, or as read).
    TooLong,
    /// Reading it failed.
    Failed(reqwest::Error),
}

/// The whole body of `response`, of at most `limit` bytes. A `Content-Length` over the bound
/// refuses it before a byte is read; the bytes are counted as they come either way.
pub(super) async fn read_bounded(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, Unread> {
    if response
        .content_length()
        .is_some_and(|length| length > limit as u64)
    {
        return Err(Unread::TooLong);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(Unread::Failed)? {
        if chunk.len() > limit - body.len() {
            return Err(Unread::TooLong);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

/// At most the first `limit` bytes of `response`'s body (a diagnostic, never parsed as a
/// message); the rest is not read.
pub(super) async fn read_prefix(
    response: &mut reqwest::Response,
    limit: usize,
) -> Result<Vec<u8>, reqwest::Error> {
    let mut body = Vec::new();
    while body.len() < limit {
        let Some(chunk) = response.chunk().await? else {
            break;
        };
        let count = chunk.len().min(limit - body.len());
        body.extend_from_slice(&chunk[..count]);
    }
    Ok(body)
}

/// The JSON texts of `text`, one after another, each as written. One text is what Streamable
/// HTTP puts in a JSON body; a server that writes its notifications before the answer, one per
/// line, puts several. JSON texts delimit themselves, so where one ends is read, not guessed;
/// anything but whitespace between them is an error.
pub(super) fn json_texts(text: &str) -> impl Iterator<Item = Result<&str, serde_json::Error>> {
    serde_json::Deserializer::from_str(text)
        .into_iter::<&RawValue>()
        .map(|text| text.map(RawValue::get))
}

#[cfg(test)]
mod tests {
    use super::json_texts;

    #[test]
    fn texts_one_after_another_are_read_as_written() {
        let texts: Vec<&str> = json_texts("{\"a\": 1}\n{\"b\":\n2}  [3]\r\n")
            .collect::<Result<_, _>>()
            .expect("JSON");
        assert_eq!(texts, ["{\"a\": 1}", "{\"b\":\n2}", "[3]"]);
        assert_eq!(json_texts(" \n").count(), 0);
        let broken: Vec<_> = json_texts("{\"a\":1}\nnot JSON").collect();
        assert!(broken[0].is_ok() && broken[1].is_err(), "{broken:?}");
    }
}
