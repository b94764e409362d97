//! The OpenAPI 3.1 document of the API, served at `/api/v1/openapi.json`.
//! A test checks that its paths are exactly the router's (`super::ROUTES`).

use axum::Json;
use serde_json::{Value, json};

fn param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "query", "required": false, "description": description, "schema": {"type": "string"}})
}

fn path_param(name: &str, description: &str) -> Value {
    json!({"name": name, "in": "path", "required": true, "description": description, "schema": {"type": "string"}})
}

fn window() -> Vec<Value> {
    vec![
        param("last", "Window ending now, e.g. 15m, 1h."),
        param("since", "Start: RFC 3339, Unix s/ms/ns, or a duration ago."),
        param("until", "End: RFC 3339, Unix s/ms/ns, or a duration ago."),
    ]
}

fn attr_params() -> Vec<Value> {
    vec![
        param(
            "attr.KEY",
            "Record attribute KEY equals the value (typed loosely: 200 matches the int, double and string; \"200\" only the string; * means exists).",
        ),
        param("resource.KEY", "Resource attribute KEY equals the value."),
        param(
            "event.KEY",
            "An event of the span has attribute KEY equal to the value.",
        ),
    ]
}

fn paging() -> Vec<Value> {
    vec![
        param("limit", "Maximum results (1-10000, default 100)."),
        param("cursor", "The next_cursor of the previous page."),
        param("explain", "true adds how the engine answered."),
    ]
}

fn span_filters() -> Vec<Value> {
    let mut v = vec![
        param("service", "Service name (resource service.name)."),
        param("name", "Exact span name."),
        param("name_contains", "Case-insensitive substring of the span name."),
        param("kind", "internal, server, client, producer or consumer."),
        param("status", "unset, ok or error."),
        param("min_duration", "At least this long, e.g. 250ms."),
        param("max_duration", "At most this long."),
        param("trace_id", "Only spans of this trace."),
        param("root", "true: only root spans."),
    ];
    v.extend(window());
    v.extend(attr_params());
    v.extend(paging());
    v
}

/// The parameters of the `/api/v1/series/*` routes.
fn series_params() -> Vec<Value> {
    let mut v = window();
    v.push(param(
        "points",
        "Buckets at most (1-360, default 60); each is a whole number of minutes.",
    ));
    v.push(param("service", "Only this service."));
    v.push(param("explain", "true adds how the engine answered."));
    v
}

fn op(summary: &str, params: Vec<Value>, response: &str) -> Value {
    json!({
        "summary": summary,
        "parameters": params,
        "responses": {
            "200": {"description": response, "content": {"application/json": {"schema": {"type": "object"}}}},
            "400": {"description": "Bad request: {\"error\": {\"code\", \"message\"}}."},
            "503": {"description": "Starting or shutting down; retry."},
        }
    })
}

/// `text=`, on the span and log searches.
fn text_param() -> Value {
    param(
        "text",
        "Full-text query: words, \"phrases\", prefix*, AND / OR / NOT, parentheses, and body: name: message: payload: before a term. Hits carry highlights. A syntax error is a 400 naming its position.",
    )
}

/// `payloads=`, on the routes that return records.
fn payloads_param() -> Value {
    param(
        "payloads",
        "ref (default: big values as {\"$payload\": \"blake3:<hex>\", \"bytes\", \"preview\"}) or inline (the values themselves).",
    )
}

pub fn spec() -> Value {
    let logs = {
        let mut v = vec![
            param("service", "Service name."),
            param(
                "severity",
                "Minimum severity: trace, debug, info, warn, error, fatal, or 0-24.",
            ),
            param("trace_id", "Logs of this trace."),
            param("span_id", "Logs of this span."),
            param("body_contains", "Case-insensitive substring of the body."),
            param("q", "Alias of body_contains."),
        ];
        v.extend(window());
        v.extend(attr_params());
        v.extend(paging());
        v.push(payloads_param());
        v.push(text_param());
        v
    };
    let metrics = {
        let mut v = vec![param("name", "Metric name."), param("service", "Service name.")];
        v.extend(window());
        v.extend(attr_params());
        v.extend(paging());
        v
    };
    let mut agg = window();
    agg.push(param("explain", "true adds how the engine answered."));
    let mut summary = agg.clone();
    summary.push(param("service", "Only this service."));
    let mut trace = vec![path_param("trace_id", "32 hex digits.")];
    trace.push(param("format", "skein (default, a tree) or otlp (OTLP/JSON)."));
    trace.push(param("explain", "true adds how the engine answered."));
    trace.push(payloads_param());
    let spans = {
        let mut v = span_filters();
        v.push(payloads_param());
        v.push(text_param());
        v
    };
    let traces = {
        let mut v = span_filters();
        v.push(text_param());
        v
    };
    let export = {
        let mut v = vec![
            param("signal", "spans (default) or logs."),
            param("limit", "At most this many records (default: all)."),
            payloads_param(),
        ];
        v.extend(span_filters().into_iter().filter(|p| p["name"] != "limit"));
        v
    };
    // Its own value: one more entry in the document below passes the
    // json! macro's recursion limit.
    let sql = json!({"post": {"summary": "Read-only SQL (DataFusion) over the tables spans, logs and metric_points (see docs/sql.md): {query, format: json|ndjson|csv|arrow}. JSON (below) holds at most --sql-max-rows rows; ndjson (application/x-ndjson), csv (text/csv) and arrow (application/vnd.apache.arrow.stream) stream every row.",
                "requestBody": {"required": true, "content": {"application/json": {"schema": {"type": "object", "required": ["query"],
                    "properties": {"query": {"type": "string"}, "format": {"type": "string", "enum": ["json", "ndjson", "csv", "arrow"]}}}}}},
                "responses": {"200": {"description": "{columns: [{name, type}], rows: [[...]], truncated}"},
                              "400": {"description": "A bad or refused query (DataFusion's message; code bad_request), one past --sql-memory (too_large) or --sql-timeout (timeout)."}}}});
    json!({
        "openapi": "3.1.0",
        "info": {"title": "Skein API", "version": env!("CARGO_PKG_VERSION"),
                 "description": "Query telemetry stored by Skein. Errors are {\"error\": {\"code\", \"message\"}}; unknown parameters are refused by name."},
        "paths": {
            "/api/v1/traces": {"get": op("Traces with a span matching the filters, newest first.", traces, "{traces: [...], next_cursor}")},
            "/api/v1/traces/{trace_id}": {"get": op("One trace: spans in tree order with depth, root, duration, services, error count.", trace, "{trace_id, root, duration_ns, services, span_count, error_count, spans}")},
            "/api/v1/spans": {
                "get": op("Search spans, newest first.", spans, "{spans: [...], next_cursor}"),
                "post": {"summary": "Ingest spans as simple JSON (array or {spans: [...]}).",
                         "requestBody": {"content": {"application/json": {"schema": {"type": "array"}}}},
                         "responses": {"200": {"description": "{accepted, rejected, errors}"}, "400": {"description": "Nothing valid."},
                                       "503": {"description": "Starting, at capacity, or unable to store (a fault: see /readyz); retry after Retry-After."}}},
            },
            "/api/v1/logs": {"get": op("Search logs, newest first.", logs, "{logs: [...], next_cursor}")},
            "/api/v1/metrics": {"get": op("Search metric points, newest first.", metrics, "{points: [...], next_cursor}")},
            "/api/v1/metrics/names": {"get": op("The metric names with points in the window, and how many points each (from part statistics: a part that straddles the window counts whole).", window(), "{window, metrics: [{name, points}]}")},
            "/api/v1/series/services": {"get": op("Per service, spans, errors and p95 duration in whole-minute buckets over the window (default last=1h): for rate, error-rate and latency charts.", series_params(), "{window, step_ns, times_unix_nano: [...], services: [{service, spans: [...], errors: [...], p95_ns: [...]}]}")},
            "/api/v1/series/logs": {"get": op("Log counts per severity band in whole-minute buckets over the window (default last=1h): a severity histogram of the logs that a search with the same filters finds (service, severity, trace_id, span_id, body_contains or q, attributes, text).", {
                let mut v = series_params();
                v.extend([
                    param("severity", "Minimum severity: trace, debug, info, warn, error, fatal, or 0-24."),
                    param("trace_id", "Logs of this trace."),
                    param("span_id", "Logs of this span."),
                    param("body_contains", "Case-insensitive substring of the body."),
                    param("q", "Alias of body_contains."),
                    text_param(),
                ]);
                v.extend(attr_params());
                v
            }, "{window, step_ns, times_unix_nano: [...], severities: {band: [count per bucket]}}")},
            "/api/v1/services": {"get": op("Every service: spans, traces, errors, error rate, p50/p95/p99, rate.", agg.clone(), "{window, services: [...]}")},
            "/api/v1/services/{service}/operations": {"get": op("RED metrics per operation of a service.", {
                let mut v = vec![path_param("service", "Service name.")];
                v.extend(agg.clone());
                v
            }, "{service, window, operations: [...]}")},
            "/api/v1/summary": {"get": op("What happened in a window (default last=1h), with the top findings of a diagnosis (findings=false leaves them out).", summary, "{spans, traces, error_spans, latency, top_services, top_error_operations, logs_by_severity, metric_series, ...}")},
            "/api/v1/anomalies": {"get": op("Diagnosis: per operation, and per service for a change spread over its operations (operation null), where error rate or latency changed within the look-back, the cause (own time grew, errors begin there) before the operations that only inherited it, and the evidence (error templates, attribute values that came with the change, exemplar traces), ranked by impact.", vec![
                param("lookback", "How far back to search for a change point, default 1h (at most 31d)."),
                param("until", "End of the look-back, default now."),
                param("service", "Only this service's operations."),
                param("limit", "Findings at most, default 10, max 100."),
                param("last", "Fixed-split form: the current window (default 5m); not with lookback."),
                param("baseline", "Fixed-split form: the baseline before it (default 30m)."),
                param("explain", "true says how each finding was reached, and how the engine answered."),
            ], "{window, mode, bucket_seconds, operations_examined, services_examined, changes_found, findings: [{service, operation, kind, role, caused_by, started_at_unix_nano, before, after, impact, impact_unit, error_origin, error_templates, changed_attributes, exemplar_trace_ids, message}]}")},
            "/api/v1/correlate/{trace_id}": {"get": op("A trace, its logs, and its services' metrics around it.", vec![path_param("trace_id", "32 hex digits."), payloads_param()], "{trace, logs, metrics, metrics_window}")},
            "/api/v1/payloads/{ref}": {"get": {"summary": "A payload's bytes (a prompt, completion, tool result or big value stored once by content), with Range support.",
                "parameters": [path_param("ref", "blake3:<64 hex digits>, as in a {\"$payload\"} reference.")],
                "responses": {"200": {"description": "The bytes: application/json, text/plain or application/octet-stream."},
                              "206": {"description": "The requested byte range."},
                              "400": {"description": "Malformed reference."},
                              "404": {"description": "No payload has this reference."},
                              "416": {"description": "The range lies past the end."}}}},
            "/api/v1/backups": {"post": {"summary": "A consistent backup while ingest goes on (admin scope): body {to: \"DIR\" | \"s3://BUCKET/PREFIX\"}, an empty place; a directory on the server's machine, a bucket reached with the server's --s3-* settings. Answers when complete.",
                "requestBody": {"content": {"application/json": {"schema": {"type": "object", "required": ["to"], "properties": {"to": {"type": "string"}}}}}},
                "responses": {"200": {"description": "{location, files, bytes, seconds, covers_seq, created_unix_ms}", "content": {"application/json": {"schema": {"type": "object"}}}},
                              "400": {"description": "A destination that is not empty, or a bad body: {\"error\": {\"code\", \"message\"}}."},
                              "403": {"description": "The token lacks the admin scope."}}}},
            "/api/v1/stats": {"get": op("Records, parts, payloads, bytes on disk, WAL bytes, memory, uptime, faults, retention (policy, rounds, parts dropped and rewritten, free disk).", vec![], "{records, spans, logs, metric_points, parts, payloads, payload_bytes, payload_logical_bytes, bytes_on_disk, wal_bytes, faults, retention, retention_policy, disk_free_bytes, min_free_disk_bytes, ...}")},
            "/api/v1/llm/usage": {"get": op("LLM calls grouped: calls, errors, tokens by kind, cost (reported, else derived from the price table; unpriced counted), latency and time-to-first-token percentiles.", {
                let mut v = vec![param("group_by", "model (default), provider, service, session, agent, user or day."),
                                 param("include", "scores: each group (and the totals) gets scores: {name: {mean, count}}, the numeric scores of its calls' traces.")];
                v.extend(agg.clone());
                v
            }, "{window, group_by, groups: [{key, calls, errors, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, reasoning_tokens, cost_usd, unpriced_calls, latency_p50_ns, latency_p95_ns, ttft_p50_ns}], totals}")},
            "/api/v1/llm/tools": {"get": op("Tool executions per tool: calls, errors, p50/p95.", agg.clone(), "{window, tools: [{tool, calls, errors, error_rate, p50_ns, p95_ns}]}")},
            "/api/v1/sessions": {"get": op("Sessions (conversations), most recent first.", {
                let mut v = agg.clone();
                v.push(param("limit", "Sessions per page (default 50, at most 1000)."));
                v.push(param("cursor", "next_cursor of the previous page."));
                v
            }, "{sessions: [{session_id, traces, spans, llm_calls, input_tokens, output_tokens, cost_usd, errors, models, agents, start_time_unix_nano, end_time_unix_nano}], next_cursor}")},
            "/api/v1/sessions/{id}": {"get": op("One session: its summary, traces, and each model and tool call in time order with messages, tool calls, tokens and cost.", {
                let mut v = vec![path_param("id", "The session id.")];
                v.extend(window());
                v.push(payloads_param());
                v
            }, "{session_id, ..., traces: [...], turns: [{trace_id, span_id, kind, llm, messages | tool}]}")},
            "/api/v1/export": {"get": {"summary": "Every span or log matching a search, as NDJSON (one record per line, the shapes of /api/v1/spans and /api/v1/logs), streamed with bounded memory; the last line is {\"export_complete\": true, \"count\": N}.",
                "parameters": export,
                "responses": {"200": {"description": "application/x-ndjson"}, "400": {"description": "A bad filter, named."}}}},
            "/api/v1/scores": {
                "get": op("Scores (gen_ai.evaluation.result events: posted, sent as log events, or inside the trace's spans), oldest first.", vec![
                    param("trace_id", "Scores of this trace."), param("session_id", "Scores of this session."),
                    param("name", "Scores with this name."), param("limit", "At most N (default 1000)."),
                ], "{scores: [{id, trace_id, span_id, session_id, name, value, comment, source, time_unix_nano}]}"),
                "post": {"summary": "Score a trace, span or session, without changing the span: {trace_id, span_id?, session_id?, name, value: number|string|bool, comment?, source: human|eval|agent|api}.",
                         "parameters": [param("allow_unknown_trace", "true: accept a score of a trace not stored (else 404).")],
                         "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
                         "responses": {"200": {"description": "{id}"}, "400": {"description": "A malformed score, naming the field."},
                                       "404": {"description": "No such trace."}}},
            },
            "/api/v1/tail": {"get": {"summary": "New spans and logs as server-sent events (span, log, lagged).",
                "parameters": [param("signal", "spans, logs or all (default)."), param("service", "Service name."),
                               param("status", "unset, ok or error."), param("severity", "Minimum log severity.")],
                "responses": {"200": {"description": "text/event-stream"}}}},
            "/api/v1/sql": sql,
            "/api/v1/openapi.json": {"get": {"summary": "This document.", "responses": {"200": {"description": "OpenAPI 3.1"}}}},
            "/api/v1/audit": {"get": op("The audit log (admin): admin actions, oldest first.", vec![
                    param("limit", "The last N entries (default 100, at most 10000)."),
                ], "{path, entries: [{time, who, client, action, summary, outcome, status}]}")},
            "/api/v1/erasures": {"post": {"summary": "Erase (admin) every record matching all the criteria given: {trace_id?, session_id?, attributes?: {KEY: VALUE}, since?, until?} from every file (parts, payloads, full-text index, WAL). Answers once done.",
                "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
                "responses": {"200": {"description": "{id, status, counts: {spans, logs, metrics}}"}, "400": {"description": "Bad or missing criteria, named."}}}},
            "/api/v1/erasures/{id}": {"get": op("The receipt of an erasure (admin): criteria (values as keyed hashes), counts, files rewritten, started and completed times, digest.",
                vec![path_param("id", "The erasure id.")],
                "{id, status, criteria, counts, files_rewritten: [{removed, written, blake3}], payloads_removed, payload_packs_rewritten, requested_at, started_at, completed_at, digest}")},
        }
    })
}

pub async fn document() -> Json<Value> {
    Json(spec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn document_lists_exactly_the_routes() {
        let spec = spec();
        let mut documented = Vec::new();
        for (path, ops) in spec["paths"].as_object().unwrap() {
            for method in ops.as_object().unwrap().keys() {
                documented.push((method.to_uppercase(), path.clone()));
            }
        }
        documented.sort();
        let mut routes: Vec<(String, String)> = super::super::ROUTES
            .iter()
            .map(|(m, p)| (m.to_string(), p.to_string()))
            .collect();
        routes.sort();
        assert_eq!(documented, routes);
    }
}
