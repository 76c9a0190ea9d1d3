//! What the libraries report, on standard error: their `tracing` events at `warn` and above
//! (targets `capability*`: the HTTP edge's accept loop) and the engine's notes to its operator
//! (`capability_gateway`, `info`), each as one line `capability <command>: <message>`, as
//! the command's own notes are written.
//!
//! The filter is `tracing-subscriber`'s `Targets`, whose interest is decided once per callsite:
//! the `info` events of the audit path (one per record) cost nothing here.

use std::fmt::Write as _;
use std::io::Write as _;

use tracing::field::{Field, Visit};
use tracing_subscriber::Layer;
use tracing_subscriber::filter::Targets;
use tracing_subscriber::layer::{Context, SubscriberExt};

/// The layer writing the libraries' warnings and errors as `{who}: {message}` lines
/// (`who`: `capability gateway`, say).
pub fn layer<S>(who: &'static str) -> impl Layer<S> + Send + Sync
where
    S: tracing::Subscriber + for<'a> tracing_subscriber::registry::LookupSpan<'a>,
{
    Stderr { who }.with_filter(
        Targets::new()
            .with_target("capability", tracing::Level::WARN)
            // The engine's notes to its operator.
            .with_target("capability_gateway", tracing::Level::INFO),
    )
}

/// Installs [`layer`] as the process's subscriber (when nothing else is: `--otlp` installs its
/// own, with this layer in it). Said when it cannot be.
pub fn install(who: &'static str) {
    let subscriber = tracing_subscriber::registry().with(layer(who));
    // Already installed (a second command in one process, a test): that one reports.
    let _ = tracing::subscriber::set_global_default(subscriber);
}

struct Stderr {
    who: &'static str,
}

impl<S: tracing::Subscriber> Layer<S> for Stderr {
    fn on_event(&self, event: &tracing::Event<'_>, _: Context<'_, S>) {
        let mut line = Line::default();
        event.record(&mut line);
        let Line(message, fields) = line;
        let fields = if fields.is_empty() {
            String::new()
        } else {
            format!(" ({fields})")
        };
        let _ = writeln!(std::io::stderr().lock(), "{}: {message}{fields}", self.who);
    }
}

/// An event's message, then its other fields as ` (name: value, ...)`.
#[derive(Default)]
struct Line(String, String);

impl Visit for Line {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0.push_str(value);
        } else {
            self.field(field, format_args!("{value}"));
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        } else {
            self.field(field, format_args!("{value:?}"));
        }
    }
}

impl Line {
    fn field(&mut self, field: &Field, value: std::fmt::Arguments<'_>) {
        let comma = if self.1.is_empty() { "" } else { ", " };
        let _ = write!(self.1, "{comma}{}: {value}", field.name());
    }
}
