//! Why a server did not connect, in the words of what happened: it exited (with its status)
//! or closed its output before answering the MCP handshake, or it could not be reached (the
//! causes, innermost last: "Connection refused"), rather than rmcp's error as it prints itself
//! (its transport's type name, "when send discover request").

use std::error::Error;

use ::rmcp::service::ClientInitializeError;
use ::rmcp::transport::streamable_http_client::StreamableHttpError;

pub(crate) use crate::live::handshake_closed as closed;

/// The status `child` exited with, waiting for it as long as for any server whose output
/// closed ([`LEARN_WHY`](crate::process::LEARN_WHY)): `None` while it runs.
pub(crate) async fn ended(child: &mut tokio::process::Child) -> Option<String> {
    let status = tokio::time::timeout(crate::process::LEARN_WHY, child.wait())
        .await
        .ok()?;
    status.ok().map(|status| status.to_string())
}

/// Why the handshake failed: `ended` is the server's exit status, when it exited.
pub(crate) fn why(error: &ClientInitializeError, ended: Option<&str>) -> String {
    match (error, ended) {
        (_, Some(status)) if closed(error) => {
            format!("it exited ({status}) before answering the MCP handshake")
        }
        (ClientInitializeError::ConnectionClosed(_), None) => {
            "it closed the connection before answering the MCP handshake".to_owned()
        }
        (ClientInitializeError::TransportError { error, .. }, None) => {
            format!("it could not be reached: {}", causes(&*error.error))
        }
        (ClientInitializeError::LegacyFallbackFailed { fallback, .. }, None)
            if closed(fallback) =>
        {
            why(fallback, None)
        }
        (other, _) => crate::live::handshake_message(other),
    }
}

/// `error` and its sources, innermost last, each said once (a wrapper that repeats its source's
/// words is left out). rmcp's HTTP client error says its `reqwest` error without giving it as
/// its source: that error's own sources are said.
fn causes(error: &(dyn Error + 'static)) -> String {
    match error.downcast_ref::<StreamableHttpError<reqwest::Error>>() {
        Some(StreamableHttpError::Client(inner)) => chain(inner),
        _ => chain(error),
    }
}

/// `error` and its sources, innermost last; a source whose words its wrapper already ends
/// with is left out.
fn chain(error: &(dyn Error + 'static)) -> String {
    let mut said: Vec<String> = Vec::new();
    let mut next = Some(error);
    while let Some(error) = next {
        let text = error.to_string();
        if !said.last().is_some_and(|last| last.ends_with(&text)) {
            said.push(text);
        }
        next = error.source();
    }
    said.join(": ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);

    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn Error + 'static))
        }
    }

    #[test]
    fn causes_are_said_once_innermost_last() {
        let refused = Layer("Connection refused (os error 111)", None);
        let connect = Layer("tcp connect error", Some(Box::new(refused)));
        let request = Layer("client error (Connect)", Some(Box::new(connect)));
        // A wrapper that ends with its source's words.
        let wrapper = Layer("sending: client error (Connect)", Some(Box::new(request)));
        assert_eq!(
            causes(&wrapper),
            "sending: client error (Connect): tcp connect error: Connection refused (os error 111)"
        );
    }

    #[test]
    fn a_closed_connection_says_the_exit_status_when_there_is_one() {
        let closed = ClientInitializeError::ConnectionClosed("discover response".into());
        assert_eq!(
            why(&closed, Some("exit status: 3")),
            "it exited (exit status: 3) before answering the MCP handshake"
        );
        assert_eq!(
            why(&closed, None),
            "it closed the connection before answering the MCP handshake"
        );
        let rejected =
            ClientInitializeError::JsonRpcError(::rmcp::ErrorData::invalid_request("no", None));
        assert!(why(&rejected, Some("exit status: 0")).contains("rejected: no"));
    }
}
