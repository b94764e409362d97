//! The waterfall of a trace (`get trace --format table`): one line per span
//! in tree order, `service name` indented by depth, its duration, and a bar
//! placed by its offset and length within the trace.

use serde_json::Value;

use super::output::{clip, display_width, human_duration};

/// Columns of the bar.
pub const WIDTH: usize = 40;

/// The `[from, to)` columns of a span's bar: at least one column wide.
pub fn bar_span(start: u64, end: u64, trace_start: u64, trace_end: u64, width: usize) -> (usize, usize) {
    let total = trace_end.saturating_sub(trace_start) as u128;
    if total == 0 || width == 0 {
        return (0, width.max(1));
    }
    let w = width as u128;
    let offset = |t: u64| (t.saturating_sub(trace_start) as u128).min(total) * w;
    let from = ((offset(start) / total) as usize).min(width - 1);
    let to = (offset(end).div_ceil(total) as usize).clamp(from + 1, width);
    (from, to)
}

fn bar(from: usize, to: usize, width: usize) -> String {
    let mut s = String::with_capacity(width * 3 + 2);
    s.push('|');
    for i in 0..width {
        s.push(if i >= from && i < to { '█' } else { ' ' });
    }
    s.push('|');
    s
}

/// Renders a trace object of the API (`{trace_id, spans: [{depth, …}], …}`).
pub fn render(trace: &Value, width: usize) -> String {
    let u = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64).unwrap_or(0);
    let spans = trace["spans"].as_array().cloned().unwrap_or_default();
    let (t0, t1) = (u(trace, "start_time_unix_nano"), u(trace, "end_time_unix_nano"));
    let services: Vec<&str> = trace["services"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let errors = u(trace, "error_count");
    let mut out = format!(
        "TRACE {}  {}  {} spans  {} error{}  services: {}\n",
        trace["trace_id"].as_str().unwrap_or("?"),
        human_duration(u(trace, "duration_ns") as f64),
        spans.len(),
        errors,
        if errors == 1 { "" } else { "s" },
        services.join(", ")
    );
    let rows: Vec<(String, String, &str, String)> = spans
        .iter()
        .map(|s| {
            let depth = u(s, "depth") as usize;
            let label = clip(
                &format!(
                    "{}{} {}",
                    "  ".repeat(depth),
                    s["service"].as_str().unwrap_or("?"),
                    s["name"].as_str().unwrap_or("?")
                ),
                72,
            );
            let status = match s["status"]["code"].as_str() {
                Some("error") => "error",
                _ => "",
            };
            let (from, to) = bar_span(u(s, "start_time_unix_nano"), u(s, "end_time_unix_nano"), t0, t1, width);
            (
                label,
                human_duration(u(s, "duration_ns") as f64),
                status,
                bar(from, to, width),
            )
        })
        .collect();
    let lw = rows.iter().map(|r| display_width(&r.0)).max().unwrap_or(0).max(4);
    let dw = rows.iter().map(|r| display_width(&r.1)).max().unwrap_or(0).max(8);
    let sw = if rows.iter().any(|r| !r.2.is_empty()) { 6 } else { 0 };
    let timeline = format!("0 → {}", human_duration(t1.saturating_sub(t0) as f64));
    let head = format!(
        "{:<lw$}  {:>dw$}  {:<sw$}{}|{timeline:<w$}|",
        "SPAN",
        "DURATION",
        if sw > 0 { "STATUS" } else { "" },
        if sw > 0 { "  " } else { "" },
        w = width
    );
    out.push_str(&head);
    out.push('\n');
    for (label, dur, status, bar) in rows {
        let pad_l = lw - display_width(&label);
        let pad_d = dw - display_width(&dur);
        out.push_str(&label);
        out.push_str(&" ".repeat(pad_l + 2 + pad_d));
        out.push_str(&dur);
        out.push_str("  ");
        if sw > 0 {
            out.push_str(&format!("{status:<sw$}  "));
        }
        out.push_str(&bar);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bars_are_placed_by_offset_and_length() {
        assert_eq!(bar_span(0, 100, 0, 100, 40), (0, 40));
        assert_eq!(bar_span(50, 100, 0, 100, 40), (20, 40));
        assert_eq!(bar_span(10, 20, 0, 100, 40), (4, 8));
        // Too short to see: still one column.
        assert_eq!(bar_span(99, 99, 0, 100, 40), (39, 40));
        assert_eq!(bar_span(5, 5, 5, 5, 40), (0, 40));
    }

    #[test]
    fn the_tree_is_indented_with_bars() {
        let t = json!({
            "trace_id": "ab", "start_time_unix_nano": 0, "end_time_unix_nano": 100_000_000,
            "duration_ns": 100_000_000, "error_count": 1, "services": ["a", "b"],
            "spans": [
                {"service": "a", "name": "root", "depth": 0, "start_time_unix_nano": 0, "end_time_unix_nano": 100_000_000,
                 "duration_ns": 100_000_000, "status": {"code": "ok"}},
                {"service": "b", "name": "child", "depth": 1, "start_time_unix_nano": 50_000_000,
                 "end_time_unix_nano": 100_000_000, "duration_ns": 50_000_000, "status": {"code": "error"}},
            ]
        });
        let text = render(&t, 10);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], "TRACE ab  100ms  2 spans  1 error  services: a, b");
        assert_eq!(lines[1], "SPAN       DURATION  STATUS  |0 → 100ms |");
        assert_eq!(lines[2], "a root        100ms          |██████████|");
        assert_eq!(lines[3], "  b child      50ms  error   |     █████|");
    }
}
