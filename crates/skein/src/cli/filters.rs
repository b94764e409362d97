//! Command-line filters and their API parameters. Values are checked here,
//! before any request, so a typo is a usage error (exit 2) that names the
//! flag; the server checks them again.

use clap::Args;
use skein_server::api::params::{parse_duration, parse_time};

use super::client::Params;

/// `500ms`, `2s`, `15m`, `1h`, `1h30m`: a duration with a unit (a bare `0`
/// is allowed). Kept as written; the server parses it the same way.
pub fn duration_arg(s: &str) -> Result<String, String> {
    let t = s.trim();
    if t.parse::<u64>().is_ok_and(|n| n != 0) {
        return Err(format!("{s:?} has no unit: write e.g. {t}ms, {t}s, {t}m or {t}h"));
    }
    parse_duration(t).map(|_| t.to_string())
}

/// Parses a duration flag to a `Duration` (for the client's own timers).
pub fn parse_duration_arg(s: &str) -> Result<std::time::Duration, String> {
    duration_arg(s).and_then(|t| parse_duration(&t))
}

/// A point in time: RFC 3339, Unix s/ms/µs/ns, or a duration ago (`15m`).
pub fn time_arg(s: &str) -> Result<String, String> {
    parse_time(s).map(|_| s.trim().to_string())
}

/// `KEY=VALUE` (a VALUE of `*` means "the attribute exists").
pub fn key_value_arg(s: &str) -> Result<String, String> {
    match s.split_once('=') {
        Some((k, _)) if !k.trim().is_empty() => Ok(s.to_string()),
        _ => Err(format!(
            "{s:?} is not KEY=VALUE (e.g. http.route=/cart, or KEY=* for \"exists\")"
        )),
    }
}

pub fn kind_arg(s: &str) -> Result<String, String> {
    skein_model::SpanKind::parse(s)
        .map(|k| k.as_str().to_string())
        .ok_or_else(|| format!("{s:?} is not a span kind: internal, server, client, producer or consumer"))
}

pub fn status_arg(s: &str) -> Result<String, String> {
    skein_model::StatusCode::parse(s)
        .map(|c| c.as_str().to_string())
        .ok_or_else(|| format!("{s:?} is not a status: unset, ok or error"))
}

pub fn severity_arg(s: &str) -> Result<String, String> {
    skein_model::log::parse_severity(s)
        .map(|_| s.to_string())
        .ok_or_else(|| format!("{s:?} is not a severity: trace, debug, info, warn, error, fatal, or 0-24"))
}

fn push(p: &mut Params, k: &str, v: Option<&String>) {
    if let Some(v) = v {
        p.push((k.to_string(), v.clone()));
    }
}

fn push_flag(p: &mut Params, k: &str, on: bool) {
    if on {
        p.push((k.to_string(), "true".into()));
    }
}

fn push_attrs(p: &mut Params, prefix: &str, kvs: &[String]) {
    for kv in kvs {
        if let Some((k, v)) = kv.split_once('=') {
            p.push((format!("{prefix}.{}", k.trim()), v.to_string()));
        }
    }
}

/// A time window: `--last`, or `--since`/`--until`.
#[derive(Args, Debug, Clone, Default)]
pub struct WindowArgs {
    /// Only the last DURATION, e.g. 15m, 1h.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, conflicts_with = "since")]
    pub last: Option<String>,
    /// From TIME: RFC 3339, Unix time (s/ms/ns), or a duration ago (2h).
    #[arg(long, value_name = "TIME", value_parser = time_arg)]
    pub since: Option<String>,
    /// Until TIME (same forms as --since).
    #[arg(long, value_name = "TIME", value_parser = time_arg)]
    pub until: Option<String>,
}

impl WindowArgs {
    pub fn params(&self, p: &mut Params) {
        push(p, "last", self.last.as_ref());
        push(p, "since", self.since.as_ref());
        push(p, "until", self.until.as_ref());
    }
}

/// `--explain`.
#[derive(Args, Debug, Clone, Default)]
pub struct ExplainArg {
    /// Add the engine's account of how it answered (`explain` in the JSON).
    #[arg(long)]
    pub explain: bool,
}

/// `--text QUERY`.
#[derive(Args, Debug, Clone, Default)]
pub struct TextArg {
    /// Full-text query: words, "phrases", prefix*, AND / OR / NOT, and
    /// body: name: message: payload: before a term (e.g. --text
    /// 'message:PoolTimeout AND NOT body:retry'). Hits carry `highlights`.
    #[arg(long, value_name = "QUERY")]
    pub text: Option<String>,
}

impl TextArg {
    pub fn params(&self, p: &mut Params) {
        push(p, "text", self.text.as_ref());
    }
}

/// `--payloads ref|inline`.
#[derive(Args, Debug, Clone, Default)]
pub struct PayloadsArg {
    /// Big values (prompts, completions, stack traces) as references
    /// (`ref`, the default: `{"$payload", "bytes", "preview"}`; fetch one
    /// with `skein get payload REF`) or in full (`inline`).
    #[arg(long, value_name = "MODE", value_parser = ["ref", "inline"])]
    pub payloads: Option<String>,
}

impl PayloadsArg {
    pub fn params(&self, p: &mut Params) {
        push(p, "payloads", self.payloads.as_ref());
    }
}

/// Paging: `--limit`, `--cursor`.
#[derive(Args, Debug, Clone, Default)]
pub struct PageArgs {
    /// At most N results (1-10000) [server default: 100].
    #[arg(long, value_name = "N")]
    pub limit: Option<usize>,
    /// The `next_cursor` of the previous page.
    #[arg(long, value_name = "CURSOR")]
    pub cursor: Option<String>,
}

impl PageArgs {
    pub fn params(&self, p: &mut Params) {
        push(p, "limit", self.limit.map(|l| l.to_string()).as_ref());
        push(p, "cursor", self.cursor.as_ref());
    }
}

/// Filters of spans (`query spans`, `query traces`).
#[derive(Args, Debug, Clone, Default)]
pub struct SpanFilters {
    /// Service name (resource attribute service.name).
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Exact span name.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Case-insensitive substring of the span name.
    #[arg(long, value_name = "TEXT")]
    pub name_contains: Option<String>,
    /// Span kind: internal, server, client, producer, consumer.
    #[arg(long, value_name = "KIND", value_parser = kind_arg)]
    pub kind: Option<String>,
    /// Status: unset, ok, error.
    #[arg(long, value_name = "STATUS", value_parser = status_arg)]
    pub status: Option<String>,
    /// At least this long, e.g. 250ms.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub min_duration: Option<String>,
    /// At most this long, e.g. 2s.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg)]
    pub max_duration: Option<String>,
    /// Span attribute KEY equals VALUE (repeatable; `200` matches the int and
    /// the string, `"200"` only the string, `*` means the key exists).
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = key_value_arg)]
    pub attr: Vec<String>,
    /// Resource attribute KEY equals VALUE (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value_arg)]
    pub resource: Vec<String>,
    /// An event of the span has attribute KEY equal to VALUE (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value_arg)]
    pub event: Vec<String>,
    /// Only spans of this trace (32 hex digits).
    #[arg(long, value_name = "ID")]
    pub trace_id: Option<String>,
    /// Only root spans (one per trace).
    #[arg(long)]
    pub root: bool,
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub page: PageArgs,
    #[command(flatten)]
    pub explain: ExplainArg,
    #[command(flatten)]
    pub payloads: PayloadsArg,
    #[command(flatten)]
    pub text: TextArg,
}

impl SpanFilters {
    pub fn params(&self) -> Params {
        let mut p = Params::new();
        push(&mut p, "service", self.service.as_ref());
        push(&mut p, "name", self.name.as_ref());
        push(&mut p, "name_contains", self.name_contains.as_ref());
        push(&mut p, "kind", self.kind.as_ref());
        push(&mut p, "status", self.status.as_ref());
        push(&mut p, "min_duration", self.min_duration.as_ref());
        push(&mut p, "max_duration", self.max_duration.as_ref());
        push_attrs(&mut p, "attr", &self.attr);
        push_attrs(&mut p, "resource", &self.resource);
        push_attrs(&mut p, "event", &self.event);
        push(&mut p, "trace_id", self.trace_id.as_ref());
        push_flag(&mut p, "root", self.root);
        self.window.params(&mut p);
        self.page.params(&mut p);
        push_flag(&mut p, "explain", self.explain.explain);
        self.payloads.params(&mut p);
        self.text.params(&mut p);
        p
    }
}

/// Filters of logs (`query logs`).
#[derive(Args, Debug, Clone, Default)]
pub struct LogFilters {
    /// Service name.
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Minimum severity: trace, debug, info, warn, error, fatal, or 0-24.
    #[arg(long, value_name = "LEVEL", value_parser = severity_arg)]
    pub severity: Option<String>,
    /// Case-insensitive substring of the body.
    #[arg(long, value_name = "TEXT")]
    pub body: Option<String>,
    /// Logs of this trace.
    #[arg(long, value_name = "ID")]
    pub trace_id: Option<String>,
    /// Logs of this span (16 hex digits).
    #[arg(long, value_name = "ID")]
    pub span_id: Option<String>,
    /// Log attribute KEY equals VALUE (repeatable).
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = key_value_arg)]
    pub attr: Vec<String>,
    /// Resource attribute KEY equals VALUE (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value_arg)]
    pub resource: Vec<String>,
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub page: PageArgs,
    #[command(flatten)]
    pub explain: ExplainArg,
    #[command(flatten)]
    pub payloads: PayloadsArg,
    #[command(flatten)]
    pub text: TextArg,
}

impl LogFilters {
    pub fn params(&self) -> Params {
        let mut p = Params::new();
        push(&mut p, "service", self.service.as_ref());
        push(&mut p, "severity", self.severity.as_ref());
        push(&mut p, "body_contains", self.body.as_ref());
        push(&mut p, "trace_id", self.trace_id.as_ref());
        push(&mut p, "span_id", self.span_id.as_ref());
        push_attrs(&mut p, "attr", &self.attr);
        push_attrs(&mut p, "resource", &self.resource);
        self.window.params(&mut p);
        self.page.params(&mut p);
        push_flag(&mut p, "explain", self.explain.explain);
        self.payloads.params(&mut p);
        self.text.params(&mut p);
        p
    }
}

/// Filters of metric points (`query metrics`).
#[derive(Args, Debug, Clone, Default)]
pub struct MetricFilters {
    /// A PromQL query, answered by the Prometheus API (`/prometheus`): an
    /// instant query at --until (default now), or with --step a range query
    /// over the window (default the last hour). Prometheus names: see
    /// docs/promql.md.
    #[arg(long, value_name = "QUERY")]
    pub promql: Option<String>,
    /// With --promql: a range query at this resolution, e.g. 1m.
    #[arg(long, value_name = "DURATION", value_parser = duration_arg, requires = "promql")]
    pub step: Option<String>,
    /// Metric name, e.g. http.server.duration.
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
    /// Service name.
    #[arg(long, value_name = "NAME")]
    pub service: Option<String>,
    /// Point attribute KEY equals VALUE (repeatable).
    #[arg(long = "attr", value_name = "KEY=VALUE", value_parser = key_value_arg)]
    pub attr: Vec<String>,
    /// Resource attribute KEY equals VALUE (repeatable).
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value_arg)]
    pub resource: Vec<String>,
    #[command(flatten)]
    pub window: WindowArgs,
    #[command(flatten)]
    pub page: PageArgs,
    #[command(flatten)]
    pub explain: ExplainArg,
}

impl MetricFilters {
    pub fn params(&self) -> Params {
        let mut p = Params::new();
        push(&mut p, "name", self.name.as_ref());
        push(&mut p, "service", self.service.as_ref());
        push_attrs(&mut p, "attr", &self.attr);
        push_attrs(&mut p, "resource", &self.resource);
        self.window.params(&mut p);
        self.page.params(&mut p);
        push_flag(&mut p, "explain", self.explain.explain);
        p
    }
}

pub fn params_with_explain(p: &mut Params, explain: bool) {
    push_flag(p, "explain", explain);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit() {
        assert_eq!(duration_arg("500ms").unwrap(), "500ms");
        assert_eq!(duration_arg("1h30m").unwrap(), "1h30m");
        assert_eq!(duration_arg("0").unwrap(), "0");
        assert!(duration_arg("5").unwrap_err().contains("no unit"));
        assert!(duration_arg("5parsecs").is_err());
        assert!(key_value_arg("a=b=c").is_ok());
        assert!(key_value_arg("=b").is_err());
        assert_eq!(kind_arg("SERVER").unwrap(), "server");
    }

    #[test]
    fn filters_become_api_parameters() {
        let f = SpanFilters {
            service: Some("checkout".into()),
            name_contains: Some("cart".into()),
            attr: vec!["http.status_code=502".into(), "user.tier=gold".into()],
            resource: vec!["host.name=a".into()],
            root: true,
            window: WindowArgs {
                last: Some("15m".into()),
                ..Default::default()
            },
            page: PageArgs {
                limit: Some(5),
                cursor: None,
            },
            ..Default::default()
        };
        let p: Vec<String> = f.params().iter().map(|(k, v)| format!("{k}={v}")).collect();
        assert_eq!(
            p,
            [
                "service=checkout",
                "name_contains=cart",
                "attr.http.status_code=502",
                "attr.user.tier=gold",
                "resource.host.name=a",
                "root=true",
                "last=15m",
                "limit=5"
            ]
        );
    }
}
