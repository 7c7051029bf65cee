//! Logging set-up: tracing to stderr, as text, logfmt or JSON. Nothing logged carries a
//! token. logfmt is what the Prometheus exporters write (`--log.format=logfmt`), so a site's
//! log pipeline parses ours like theirs: one `key=value` line per event, values quoted when
//! they hold a space, a quote or an `=`.

use std::fmt::{self, Write as _};
use std::io::IsTerminal;

use anyhow::{Context, Result};
use tracing::field::{Field, Visit};
use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

use crate::cli::{LogArgs, LogFormat};

pub fn init(args: &LogArgs) -> Result<()> {
    let filter = EnvFilter::try_new(&args.log).context("invalid --log filter")?;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    match args.log_format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Logfmt => builder.with_ansi(false).event_format(Logfmt).try_init(),
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
    }
    .map_err(|e| anyhow::anyhow!("cannot install the logger: {e}"))
}

/// One logfmt line per event: `ts`, `level`, `target`, `msg`, then the event's fields and
/// those of the spans it is in, outermost first.
struct Logfmt;

impl<S, N> FormatEvent<S, N> for Logfmt
where
    S: tracing::Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut w: Writer<'_>,
        event: &tracing::Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Micros, true);
        let mut line = format!(
            "ts={now} level={} target={}",
            meta.level().as_str().to_ascii_lowercase(),
            quoted(meta.target())
        );
        let mut fields = Fields::default();
        event.record(&mut fields);
        if let Some(msg) = &fields.msg {
            write!(line, " msg={}", quoted(msg))?;
        }
        line.push_str(&fields.rest);
        if let Some(scope) = ctx.event_scope() {
            for span in scope.from_root() {
                if let Some(f) = span
                    .extensions()
                    .get::<tracing_subscriber::fmt::FormattedFields<N>>()
                {
                    // The span's fields as the default formatter wrote them (`k=v k=v`).
                    if !f.fields.is_empty() {
                        write!(line, " {}", f.fields)?;
                    }
                }
            }
        }
        writeln!(w, "{line}")
    }
}

/// An event's message and its other fields, each written ` key=value`.
#[derive(Default)]
struct Fields {
    msg: Option<String>,
    rest: String,
}

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.put(field, value.to_string());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.put(field, format!("{value:?}"));
    }
}

impl Fields {
    fn put(&mut self, field: &Field, value: String) {
        if field.name() == "message" {
            self.msg = Some(value);
        } else {
            let _ = write!(self.rest, " {}={}", field.name(), quoted(&value));
        }
    }
}

/// `value` as a logfmt value: bare when it can be, else quoted with `"` and `\` escaped.
fn quoted(value: &str) -> String {
    let bare = !value.is_empty()
        && !value
            .chars()
            .any(|c| c.is_whitespace() || c == '"' || c == '=' || c.is_control());
    if bare {
        return value.to_string();
    }
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::quoted;

    #[test]
    fn values_are_quoted_only_when_logfmt_needs_it() {
        assert_eq!(quoted("site-2411/alpha"), "site-2411/alpha");
        assert_eq!(quoted("scaling up 0 → 2"), "\"scaling up 0 → 2\"");
        assert_eq!(quoted("a=\"b\"\n"), "\"a=\\\"b\\\"\\n\"");
        assert_eq!(quoted(""), "\"\"");
    }
}
