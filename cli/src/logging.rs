//! Logs on stderr through `tracing`, filtered by `TOOLHOST_LOG` (default:
//! warnings, and the MCP SDK's errors).

use tracing::field::{Field, Visit};
use tracing::level_filters::LevelFilter;
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::layer::{Context, Filter, SubscriberExt as _};
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// What the MCP SDK logs at ERROR when a client that closed its connection
/// normally could not be sent a last reply: routine, so shown at debug.
const CLIENT_GONE: &str = "failed to send pending response during drain";

pub(crate) fn init() {
    let filter = EnvFilter::try_from_env("TOOLHOST_LOG")
        .unwrap_or_else(|_| EnvFilter::new("warn,rmcp=error"));
    let debug = filter.max_level_hint() >= Some(LevelFilter::DEBUG);
    let layer = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(filter)
        .with_filter(Routine { debug });
    tracing_subscriber::registry().with(layer).init();
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
