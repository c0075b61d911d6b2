//! Logs on stderr through `tracing`, filtered by `TOOLHOST_LOG` (default:
//! warnings, and the MCP SDK's errors): as text, or with `--log-format json`
//! one JSON object a line (the CLI's own notes too), for log collectors.

use std::sync::OnceLock;

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, Layered, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer, Registry};

/// What the MCP SDK logs at ERROR when a client that closed its connection
/// normally could not be sent a last reply: routine, so shown at debug.
const CLIENT_GONE: &str = "failed to send pending response during drain";

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub(crate) enum Format {
    /// Text for people.
    #[default]
    Text,
    /// One JSON object a line: `timestamp`, `level`, `target`, `fields`
    /// (with `message`).
    Json,
}

/// The format chosen, for the notes the CLI writes itself.
static FORMAT: OnceLock<Format> = OnceLock::new();

pub(crate) fn init(format: Format) {
    let _ = FORMAT.set(format);
    let filter = EnvFilter::try_from_env("TOOLHOST_LOG")
        .unwrap_or_else(|_| EnvFilter::new("warn,rmcp=error"));
    let debug = filter.max_level_hint() >= Some(LevelFilter::DEBUG);
    let layer: Box<dyn Layer<Layered<EnvFilter, Registry>> + Send + Sync> = match format {
        Format::Text => tracing_subscriber::fmt::layer()
            .with_writer(std::io::stderr)
            .boxed(),
        Format::Json => tracing_subscriber::fmt::layer()
            .json()
            .with_writer(std::io::stderr)
            .boxed(),
    };
    // The level filter is the subscriber's own, not the layer's: what it
    // turns off (every span and debug event, by default) is then off at its
    // callsite and costs a call nothing, where a layer's filter would leave
    // the registry tracking each span only to drop it.
    tracing_subscriber::registry()
        .with(filter)
        .with(layer.with_filter(Routine { debug }))
        .init();
}

/// `text` as one JSON log line, if logs are JSON: at ERROR or WARN when it
/// says `error:` or `warning:` first, else INFO.
pub(crate) fn json_line(text: &str) -> Option<String> {
    if FORMAT.get() != Some(&Format::Json) {
        return None;
    }
    let level = if text.starts_with("error:") {
        "ERROR"
    } else if text.starts_with("warning:") {
        "WARN"
    } else {
        "INFO"
    };
    let line = serde_json::json!({
        "timestamp": humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string(),
        "level": level,
        "fields": {"message": text},
        "target": "toolhost",
    });
    Some(line.to_string())
}

/// Demotes the SDK's routine errors to debug: shown only when debug logs
/// are asked for.
struct Routine {
    debug: bool,
}

impl<S: Subscriber> Filter<S> for Routine {
    fn enabled(&self, _: &Metadata<'_>, _: &Context<'_, S>) -> bool {
        true
    }

    fn event_enabled(&self, event: &Event<'_>, _: &Context<'_, S>) -> bool {
        let meta = event.metadata();
        if self.debug || *meta.level() != Level::ERROR || !meta.target().starts_with("rmcp") {
            return true;
        }
        let mut message = Message(None);
        event.record(&mut message);
        message.0.as_deref() != Some(CLIENT_GONE)
    }
}

/// An event's message.
struct Message(Option<String>);

impl Visit for Message {
    fn record_str(&mut self, field: &Field, value: &str) {
        if field.name() == "message" {
            self.0 = Some(value.to_owned());
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.0 = Some(format!("{value:?}"));
        }
    }
}
