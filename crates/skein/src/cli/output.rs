//! Output: the API's JSON (pretty on a terminal, one compact line
//! otherwise), NDJSON for streams, `--fields` trimming, and aligned tables
//! with humanized durations, times and rates.

use std::io::{IsTerminal, Write};
use std::time::{Duration, UNIX_EPOCH};

use serde_json::{Map, Value};

use super::client::CliResult;

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The API's JSON object (NDJSON for streams).
    Json,
    /// Aligned columns for people (the default on a terminal).
    Table,
    /// OTLP/JSON (`get trace` only).
    Otlp,
}

/// How a command prints: resolved once from the global flags.
pub struct Out {
    pub format: Format,
    pub fields: Vec<String>,
    /// Stdout is a terminal: pretty JSON, table by default, live lines.
    pub tty: bool,
}

impl Out {
    pub fn new(format: Option<Format>, fields: Vec<String>) -> Out {
        let tty = std::io::stdout().is_terminal();
        let fields: Vec<String> = fields
            .into_iter()
            .map(|f| f.trim().to_string())
            .filter(|f| !f.is_empty())
            .collect();
        Out {
            format: format.unwrap_or(if tty { Format::Table } else { Format::Json }),
            fields,
            tty,
        }
    }

    pub fn table(&self) -> bool {
        self.format == Format::Table
    }

    /// Prints one JSON answer: pretty on a terminal, else one line.
    pub fn json(&self, v: &Value) -> CliResult<()> {
        let text = if self.tty {
            serde_json::to_string_pretty(v)
        } else {
            serde_json::to_string(v)
        }
        .unwrap_or_default();
        write_stdout(&text)
    }

    /// Prints one NDJSON line (a stream element), flushed at once.
    pub fn ndjson(&self, v: &Value) -> CliResult<()> {
        write_stdout(&serde_json::to_string(v).unwrap_or_default())
    }

    /// `--fields` applied to an answer: to each element of the list `main`
    /// when the answer has one, else to the object itself.
    pub fn trim(&self, mut v: Value, main: Option<&str>) -> Value {
        if self.fields.is_empty() {
            return v;
        }
        if let Some(list) = main.and_then(|k| v.get_mut(k)).and_then(Value::as_array_mut) {
            for item in list.iter_mut() {
                *item = pick(item, &self.fields);
            }
            return v;
        }
        pick(&v, &self.fields)
    }
}

/// Writes a line (or block) to stdout and flushes it; a closed pipe is
/// reported as such so the command can stop quietly.
pub fn write_stdout(text: &str) -> CliResult<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())?;
    if !text.ends_with('\n') {
        out.write_all(b"\n")?;
    }
    out.flush()?;
    Ok(())
}

/// The value at `path` in `v`: a key of the object, or `a.b.c` through
/// nested objects (keys may contain dots themselves: `attributes.http.route`).
pub fn lookup<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    let o = v.as_object()?;
    if let Some(x) = o.get(path) {
        return Some(x);
    }
    for (i, _) in path.match_indices('.') {
        if let Some(inner) = o.get(&path[..i])
            && let Some(x) = lookup(inner, &path[i + 1..])
        {
            return Some(x);
        }
    }
    None
}

/// An object with just `fields` (missing ones as null, so the shape is the
/// same for every element); a dotted path keeps its full name as the key.
pub fn pick(v: &Value, fields: &[String]) -> Value {
    let mut m = Map::new();
    for f in fields {
        m.insert(f.clone(), lookup(v, f).cloned().unwrap_or(Value::Null));
    }
    Value::Object(m)
}

/// A duration for people: `850ns`, `12.5µs`, `1.25ms`, `2.1s`, `3.5m`, `1.2h`.
pub fn human_duration(ns: f64) -> String {
    if !ns.is_finite() {
        return "-".into();
    }
    let units = [(3_600e9, "h"), (60e9, "m"), (1e9, "s"), (1e6, "ms"), (1e3, "µs")];
    for (scale, unit) in units {
        if ns.abs() >= scale {
            return format!("{}{unit}", sig3(ns / scale));
        }
    }
    format!("{}ns", ns.round())
}

/// Up to three significant digits, without trailing zeros: 1.25, 2.1, 150.
fn sig3(x: f64) -> String {
    let decimals = if x.abs() >= 100.0 {
        0
    } else if x.abs() >= 10.0 {
        1
    } else {
        2
    };
    let s = format!("{x:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A byte count for people: `512 B`, `1.5 KiB`, `64 MiB`.
pub fn human_bytes(b: f64) -> String {
    let units = [
        (1u64 << 40, "TiB"),
        (1 << 30, "GiB"),
        (1 << 20, "MiB"),
        (1 << 10, "KiB"),
    ];
    for (scale, unit) in units {
        if b >= scale as f64 {
            return format!("{} {unit}", sig3(b / scale as f64));
        }
    }
    format!("{b} B")
}

/// A time in ns since the epoch as RFC 3339 UTC, to the millisecond.
pub fn rfc3339(ns: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_nanos(ns)).to_string()
}

/// A ratio as a percentage: 0.0833 → `8.3%`.
pub fn percent(r: f64) -> String {
    format!("{:.1}%", r * 100.0)
}

fn is_time_key(key: &str) -> bool {
    key.ends_with("unix_nano")
}

fn is_duration_key(key: &str) -> bool {
    key.ends_with("_ns") && !is_time_key(key)
}

/// The text of one cell and whether it is right-aligned (numbers).
pub fn cell(row: &Value, key: &str) -> (String, bool) {
    let Some(v) = lookup(row, key) else {
        return ("-".into(), false);
    };
    let leaf = key.rsplit('.').next().unwrap_or(key);
    match v {
        Value::Null => ("-".into(), false),
        Value::Bool(b) => (b.to_string(), false),
        Value::Number(n) => {
            let x = n.as_f64().unwrap_or(0.0);
            let s = if is_time_key(leaf) {
                return (n.as_u64().map(rfc3339).unwrap_or_else(|| n.to_string()), false);
            } else if is_duration_key(leaf) {
                human_duration(x)
            } else if leaf == "error_rate" {
                percent(x)
            } else if leaf.ends_with("_usd") {
                format!("{x:.4}")
            } else if leaf.ends_with("_bytes") {
                human_bytes(x)
            } else if leaf.ends_with("_seconds") {
                human_duration(x * 1e9)
            } else if n.is_f64() {
                fmt_number(x)
            } else {
                n.to_string()
            };
            (s, true)
        }
        Value::String(s) => (clip(s, 80), false),
        Value::Array(a) => {
            let parts: Vec<String> = a
                .iter()
                .map(|x| match x {
                    Value::String(s) => s.clone(),
                    other => other.to_string(),
                })
                .collect();
            (clip(&parts.join(","), 80), false)
        }
        Value::Object(o) => {
            // A span status: its code, and the message when there is one.
            if let Some(Value::String(code)) = o.get("code") {
                return match o.get("message").and_then(Value::as_str) {
                    Some(m) if !m.is_empty() => (clip(&format!("{code}: {m}"), 80), false),
                    _ => (code.clone(), false),
                };
            }
            (clip(&v.to_string(), 80), false)
        }
    }
}

fn fmt_number(x: f64) -> String {
    if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.0}")
    } else {
        let s = format!("{x:.3}");
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// One line, at most `max` characters.
pub fn clip(s: &str, max: usize) -> String {
    let one_line: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    if one_line.chars().count() <= max {
        one_line
    } else {
        let mut t: String = one_line.chars().take(max - 1).collect();
        t.push('…');
        t
    }
}

/// A column header from a field: `p95_ns` → `P95`,
/// `start_time_unix_nano` → `START_TIME`, `error_rate` → `ERROR%`.
pub fn header(key: &str) -> String {
    let h = match key {
        "error_rate" => "error%",
        "rate_per_sec" => "rate/s",
        "time_unix_nano" => "time",
        "start_time_unix_nano" => "start",
        "end_time_unix_nano" => "end",
        k => k
            .strip_suffix("_unix_nano")
            .or_else(|| k.strip_suffix("_ns"))
            .unwrap_or(k),
    };
    h.to_uppercase()
}

pub fn display_width(s: &str) -> usize {
    s.chars().count()
}

/// Renders rows as aligned columns: `(key, header)` per column; numbers
/// right-aligned, two spaces between columns, no trailing spaces.
pub fn table(rows: &[Value], columns: &[(String, String)]) -> String {
    let cells: Vec<Vec<(String, bool)>> = rows
        .iter()
        .map(|r| columns.iter().map(|(k, _)| cell(r, k)).collect())
        .collect();
    let mut widths: Vec<usize> = columns.iter().map(|(_, h)| display_width(h)).collect();
    for row in &cells {
        for (i, (s, _)) in row.iter().enumerate() {
            widths[i] = widths[i].max(display_width(s));
        }
    }
    // A column is right-aligned when its values are numbers.
    let right: Vec<bool> = (0..columns.len())
        .map(|i| cells.iter().any(|r| r[i].1) && cells.iter().all(|r| r[i].1 || r[i].0 == "-"))
        .collect();
    let mut out = String::new();
    let line = |texts: Vec<&str>, out: &mut String| {
        let mut l = String::new();
        for (i, t) in texts.iter().enumerate() {
            if i > 0 {
                l.push_str("  ");
            }
            let pad = widths[i].saturating_sub(display_width(t));
            if right[i] {
                l.push_str(&" ".repeat(pad));
                l.push_str(t);
            } else {
                l.push_str(t);
                l.push_str(&" ".repeat(pad));
            }
        }
        out.push_str(l.trim_end());
        out.push('\n');
    };
    line(columns.iter().map(|(_, h)| h.as_str()).collect(), &mut out);
    for row in &cells {
        line(row.iter().map(|(s, _)| s.as_str()).collect(), &mut out);
    }
    out
}

/// Columns from `--fields` (when given) or the command's defaults.
pub fn columns(out: &Out, defaults: &[(&str, &str)]) -> Vec<(String, String)> {
    if out.fields.is_empty() {
        defaults.iter().map(|(k, h)| (k.to_string(), h.to_string())).collect()
    } else {
        out.fields.iter().map(|f| (f.clone(), header(f))).collect()
    }
}

/// Key/value lines for one object: `KEY  value`, keys aligned.
pub fn key_values(v: &Value, keys: &[(String, String)]) -> String {
    let width = keys.iter().map(|(_, h)| display_width(h)).max().unwrap_or(0);
    let mut out = String::new();
    for (k, h) in keys {
        let (text, _) = cell(v, k);
        out.push_str(&format!("{h:<width$}  {text}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn durations_bytes_and_times_are_humanized() {
        assert_eq!(human_duration(1_250_000.0), "1.25ms");
        assert_eq!(human_duration(2_100_000_000.0), "2.1s");
        assert_eq!(human_duration(10_000_000.0), "10ms");
        assert_eq!(human_duration(150_000_000.0), "150ms");
        assert_eq!(human_duration(850.0), "850ns");
        assert_eq!(human_duration(12_500.0), "12.5µs");
        assert_eq!(human_duration(90e9), "1.5m");
        assert_eq!(human_bytes(1536.0), "1.5 KiB");
        assert_eq!(human_bytes(100.0), "100 B");
        assert_eq!(rfc3339(1_700_000_000_123_456_789), "2023-11-14T22:13:20.123Z");
        assert_eq!(percent(1.0 / 12.0), "8.3%");
    }

    #[test]
    fn fields_pick_nested_and_dotted_keys() {
        let v = json!({"name": "a", "status": {"code": "error"}, "attributes": {"http.route": "/x"}});
        let f = |s: &[&str]| s.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        assert_eq!(
            pick(&v, &f(&["name", "status.code", "attributes.http.route", "nope"])),
            json!({"name": "a", "status.code": "error", "attributes.http.route": "/x", "nope": null})
        );
    }

    #[test]
    fn tables_align_numbers_right() {
        let rows = vec![
            json!({"service": "checkout", "spans": 4, "error_rate": 0.0, "p95_ns": 100_000_000}),
            json!({"service": "db", "spans": 12, "error_rate": 0.5, "p95_ns": 1_250_000}),
        ];
        let cols: Vec<(String, String)> = ["service", "spans", "error_rate", "p95_ns"]
            .iter()
            .map(|k| (k.to_string(), header(k)))
            .collect();
        assert_eq!(
            table(&rows, &cols),
            "SERVICE   SPANS  ERROR%     P95\ncheckout      4    0.0%   100ms\ndb           12   50.0%  1.25ms\n"
        );
    }
}
