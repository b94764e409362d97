"""Skein's SQL (POST /api/v1/sql, DataFusion) against DuckDB over the same data.

Driven by crates/skein/tests/sql.rs, in phases:

  ingest API PART   send half PART (1 or 2) of a deterministic corpus of
                    spans, logs and metric points to Skein as OTLP/JSON
  compare API DIR   write the whole corpus to Parquet in DIR with DuckDB,
                    then ask every query of QUERIES of both and compare

The test restarts Skein between the halves, so the first half is read from
Parquet parts and the second from the hot tier.

Answers must be equal: the same rows (in order when the query orders them
completely, else as multisets), numbers equal to a relative 1e-9, times
equal to the microsecond; approximate percentiles within 5% of the exact
ones DuckDB computes. Exits non-zero, naming the query, on any difference.
"""

import datetime
import json
import math
import os
import sys
import urllib.error
import urllib.request

import duckdb  # a missing DuckDB fails the test: never skipped

BASE_S = 1_767_225_600  # 2026-01-01T00:00:00Z
SERVICES = ["frontend", "cart", "payments", "search"]
ROUTES = ["/", "/cart", "/checkout", "/search", "/item/{id}"]
ENVS = ["prod", "staging"]
TRACES = 240
LEVELS = [(9, "INFO"), (13, "WARN"), (17, "ERROR"), (5, "DEBUG")]


def hexid(n, width):
    return format(n, "0{}x".format(width))


def corpus():
    """Deterministic spans, logs and metric points (times in whole µs,
    DuckDB's resolution)."""
    spans, logs, points = [], [], []
    for t in range(TRACES):
        trace_id = hexid(0x5EED0000 + t * 7919, 32)
        start_us = BASE_S * 1_000_000 + t * 7_300_000 + (t * 37) % 1000
        n_spans = 2 + t % 4
        for i in range(n_spans):
            sid = hexid(t * 16 + i + 1, 16)
            service = SERVICES[(t + i) % len(SERVICES)]
            s_us = start_us + i * 1_500 + (t * i) % 97
            dur_us = 200 + ((t * 131 + i * 977) % 5000) + (30_000 if (t + i) % 17 == 0 else 0)
            spans.append({
                "trace_id": trace_id,
                "span_id": sid,
                "parent_span_id": None if i == 0 else hexid(t * 16 + 1, 16),
                "service_name": service,
                "env": ENVS[t % 2],
                "name": "op-{}".format((t + 3 * i) % 6),
                "kind": 2 if i == 0 else 3,
                "start_us": s_us,
                "duration_ns": dur_us * 1000,
                "status_code": 2 if (t * 3 + i) % 11 == 0 else (1 if i == 0 else 0),
                "route": ROUTES[(t + i) % len(ROUTES)],
                "http_status": 500 if (t * 3 + i) % 11 == 0 else 200,
            })
            if (t + i) % 3 == 0:
                sev, text = LEVELS[(t + i) % 4]
                logs.append({
                    "ts_us": s_us + 10,
                    "service_name": service,
                    "severity_number": sev,
                    "severity_text": text,
                    "body": "request {} of trace {} {}".format(i, t, ["ok", "slow", "failed"][(t // 3 + i) % 3]),
                    "trace_id": trace_id,
                    "span_id": sid,
                    "user": "u{}".format(t % 5),
                })
    for m in range(120):
        for j, name in enumerate(["cpu.utilization", "queue.depth"]):
            points.append({
                "ts_us": BASE_S * 1_000_000 + m * 15_000_000,
                "service_name": SERVICES[(m + j) % len(SERVICES)],
                "metric_name": name,
                "value": round(((m * 37 + j * 11) % 100) / 7.0, 6),
                "host": "h{}".format(m % 3),
            })
    return spans, logs, points


def attr(k, v):
    if isinstance(v, int):
        return {"key": k, "value": {"intValue": str(v)}}
    return {"key": k, "value": {"stringValue": v}}


def resource(service, env=None):
    attrs = [attr("service.name", service)]
    if env:
        attrs.append(attr("deployment.environment", env))
    return {"attributes": attrs}


def post(url, body):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"content-type": "application/json"})
    with urllib.request.urlopen(req, timeout=60) as r:
        return r.status, r.read()


def half(rows, part):
    return [r for k, r in enumerate(rows) if (k % 2 == 0) == (part == 1)]


def ingest(api, part):
    spans, logs, points = corpus()
    spans, logs, points = half(spans, part), half(logs, part), half(points, part)
    rs = []
    for s in spans:
        span = {
            "traceId": s["trace_id"], "spanId": s["span_id"], "name": s["name"], "kind": s["kind"],
            "startTimeUnixNano": str(s["start_us"] * 1000),
            "endTimeUnixNano": str(s["start_us"] * 1000 + s["duration_ns"]),
            "attributes": [attr("http.route", s["route"]), attr("http.status_code", s["http_status"])],
            "status": {"code": s["status_code"]},
        }
        if s["parent_span_id"]:
            span["parentSpanId"] = s["parent_span_id"]
        rs.append({"resource": resource(s["service_name"], s["env"]), "scopeSpans": [{"scope": {"name": "sql-test"}, "spans": [span]}]})
    status, body = post(api + "/v1/traces", {"resourceSpans": rs})
    assert status == 200, body
    rl = []
    for l in logs:
        rl.append({"resource": resource(l["service_name"]), "scopeLogs": [{"scope": {"name": "sql-test"}, "logRecords": [{
            "timeUnixNano": str(l["ts_us"] * 1000), "observedTimeUnixNano": str(l["ts_us"] * 1000 + 5),
            "severityNumber": l["severity_number"], "severityText": l["severity_text"],
            "body": {"stringValue": l["body"]}, "traceId": l["trace_id"], "spanId": l["span_id"],
            "attributes": [attr("user.id", l["user"])],
        }]}]})
    status, body = post(api + "/v1/logs", {"resourceLogs": rl})
    assert status == 200, body
    rm = []
    for p in points:
        rm.append({"resource": resource(p["service_name"]), "scopeMetrics": [{"scope": {"name": "sql-test"}, "metrics": [{
            "name": p["metric_name"], "unit": "1",
            "gauge": {"dataPoints": [{"timeUnixNano": str(p["ts_us"] * 1000), "asDouble": p["value"], "attributes": [attr("host", p["host"])]}]},
        }]}]})
    status, body = post(api + "/v1/metrics", {"resourceMetrics": rm})
    assert status == 200, body
    print("ingested half {}: {} spans, {} logs, {} points".format(part, len(spans), len(logs), len(points)))


def ts(us):
    return datetime.datetime(1970, 1, 1) + datetime.timedelta(microseconds=us)


def export_parquet(con, out_dir):
    """The corpus as DuckDB tables with Skein's columns, written to Parquet
    and read back from it."""
    spans, logs, points = corpus()
    con.execute("SET TimeZone = 'UTC'")
    con.execute("""CREATE TABLE spans_src (trace_id VARCHAR, span_id VARCHAR, parent_span_id VARCHAR, service_name VARCHAR,
        name VARCHAR, kind TINYINT, start_time_unix_nano TIMESTAMP, duration_ns BIGINT, status_code TINYINT,
        attributes MAP(VARCHAR, VARCHAR), resource_attributes MAP(VARCHAR, VARCHAR))""")
    con.executemany("INSERT INTO spans_src VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, MAP(?, ?), MAP(?, ?))", [
        (s["trace_id"], s["span_id"], s["parent_span_id"], s["service_name"], s["name"], s["kind"], ts(s["start_us"]),
         s["duration_ns"], s["status_code"], ["http.route", "http.status_code"], [s["route"], str(s["http_status"])],
         ["service.name", "deployment.environment"], [s["service_name"], s["env"]])
        for s in spans])
    con.execute("""CREATE TABLE logs_src ("timestamp" TIMESTAMP, service_name VARCHAR, severity_number TINYINT,
        severity_text VARCHAR, body VARCHAR, trace_id VARCHAR, span_id VARCHAR, attributes MAP(VARCHAR, VARCHAR))""")
    con.executemany("INSERT INTO logs_src VALUES (?, ?, ?, ?, ?, ?, ?, MAP(?, ?))", [
        (ts(l["ts_us"]), l["service_name"], l["severity_number"], l["severity_text"], l["body"], l["trace_id"],
         l["span_id"], ["user.id"], [l["user"]]) for l in logs])
    con.execute("""CREATE TABLE points_src (time_unix_nano TIMESTAMP, service_name VARCHAR, metric_name VARCHAR,
        value_double DOUBLE, attributes MAP(VARCHAR, VARCHAR))""")
    con.executemany("INSERT INTO points_src VALUES (?, ?, ?, ?, MAP(?, ?))", [
        (ts(p["ts_us"]), p["service_name"], p["metric_name"], p["value"], ["host"], [p["host"]]) for p in points])
    for table, src in [("spans", "spans_src"), ("logs", "logs_src"), ("metric_points", "points_src")]:
        path = os.path.join(out_dir, table + ".parquet")
        con.execute("COPY {} TO '{}' (FORMAT parquet)".format(src, path))
        con.execute("CREATE VIEW {} AS SELECT * FROM read_parquet('{}')".format(table, path))
    return spans


# (name, Skein SQL, DuckDB SQL or None for the same text, how to compare)
# compare: "ordered" (the query orders completely), "bag" (any order),
# "approx" (ordered; floats within 5%), "interpolated" (ordered; 1e-6).
QUERIES = [
    ("count", "SELECT count(*) FROM spans", None, "ordered"),
    ("group by service", "SELECT service_name, count(*) AS n, sum(duration_ns) AS total, min(duration_ns), max(duration_ns) FROM spans GROUP BY service_name ORDER BY service_name", None, "ordered"),
    ("group by two keys, having", "SELECT service_name, name, count(*) AS n, avg(duration_ns) AS mean FROM spans GROUP BY service_name, name HAVING count(*) > 3 ORDER BY service_name, name", None, "ordered"),
    ("errors with FILTER", "SELECT service_name, count(*) FILTER (WHERE status_code = 2) AS errors, count(*) AS n FROM spans GROUP BY service_name ORDER BY service_name", None, "ordered"),
    ("exact percentiles", "SELECT service_name, median(CAST(duration_ns AS DOUBLE)) AS p50, percentile_cont(0.9) WITHIN GROUP (ORDER BY CAST(duration_ns AS DOUBLE)) AS p90 FROM spans GROUP BY service_name ORDER BY service_name", None, "interpolated"),
    ("approximate percentile", "SELECT service_name, approx_percentile_cont(CAST(duration_ns AS DOUBLE), 0.5) AS p50 FROM spans GROUP BY service_name ORDER BY service_name",
     "SELECT service_name, quantile_cont(CAST(duration_ns AS DOUBLE), 0.5) AS p50 FROM spans GROUP BY service_name ORDER BY service_name", "approx"),
    ("join spans and logs by trace and span", "SELECT s.service_name, l.severity_text, count(*) AS n FROM spans s JOIN logs l ON s.trace_id = l.trace_id AND s.span_id = l.span_id GROUP BY s.service_name, l.severity_text ORDER BY 1, 2", None, "ordered"),
    ("join: traces with errors logged", "SELECT count(DISTINCT s.trace_id) AS traces, count(*) AS pairs FROM spans s JOIN logs l ON s.trace_id = l.trace_id WHERE l.severity_number >= 17", None, "ordered"),
    ("left join: spans without logs", "SELECT s.service_name, count(*) AS n FROM spans s LEFT JOIN logs l ON s.span_id = l.span_id AND s.trace_id = l.trace_id WHERE l.span_id IS NULL GROUP BY 1 ORDER BY 1", None, "ordered"),
    ("window: row_number per trace", "SELECT trace_id, span_id, row_number() OVER (PARTITION BY trace_id ORDER BY start_time_unix_nano, span_id) AS rn FROM spans", None, "bag"),
    ("window: top 3 slowest per service", "SELECT service_name, span_id, duration_ns, r FROM (SELECT service_name, span_id, duration_ns, rank() OVER (PARTITION BY service_name ORDER BY duration_ns DESC, span_id) AS r FROM spans) t WHERE r <= 3 ORDER BY service_name, r", None, "ordered"),
    ("window: running total", "SELECT span_id, sum(duration_ns) OVER (PARTITION BY service_name ORDER BY start_time_unix_nano, span_id ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS running FROM spans", None, "bag"),
    ("window: lag", "SELECT trace_id, span_id, duration_ns - lag(duration_ns) OVER (PARTITION BY trace_id ORDER BY span_id) AS delta FROM spans", None, "bag"),
    ("time bucketing: date_trunc", "SELECT date_trunc('minute', start_time_unix_nano) AS minute, count(*) AS n, max(duration_ns) AS slowest FROM spans GROUP BY 1 ORDER BY 1", None, "ordered"),
    ("time bucketing: date_bin", "SELECT date_bin(INTERVAL '5 minutes', start_time_unix_nano) AS bucket, service_name, count(*) AS n FROM spans GROUP BY 1, 2 ORDER BY 1, 2",
     "SELECT time_bucket(INTERVAL '5 minutes', start_time_unix_nano, TIMESTAMP '1970-01-01 00:00:00') AS bucket, service_name, count(*) AS n FROM spans GROUP BY 1, 2 ORDER BY 1, 2", "ordered"),
    ("time range", "SELECT count(*), min(start_time_unix_nano), max(start_time_unix_nano) FROM spans WHERE start_time_unix_nano >= TIMESTAMP '2026-01-01 00:05:00' AND start_time_unix_nano < TIMESTAMP '2026-01-01 00:20:00'", None, "ordered"),
    ("attribute map", "SELECT attributes['http.route'] AS route, count(*) AS n FROM spans GROUP BY 1 ORDER BY 1", None, "ordered"),
    ("attribute equality with service", "SELECT count(*) FROM spans WHERE attributes['http.route'] = '/checkout' AND service_name = 'payments'", None, "ordered"),
    ("numeric attribute as text", "SELECT service_name, count(*) FROM spans WHERE attributes['http.status_code'] = '500' GROUP BY 1 ORDER BY 1", None, "ordered"),
    ("resource attributes", "SELECT resource_attributes['deployment.environment'] AS env, count(*) AS n, count(DISTINCT trace_id) AS traces FROM spans GROUP BY 1 ORDER BY 1", None, "ordered"),
    ("one trace", "SELECT span_id, parent_span_id, name, duration_ns FROM spans WHERE trace_id = '{trace}' ORDER BY span_id", None, "ordered"),
    ("CTE", "WITH t AS (SELECT trace_id, count(*) AS spans, sum(duration_ns) AS total FROM spans GROUP BY trace_id) SELECT spans, count(*) AS traces, max(total) AS longest FROM t GROUP BY spans ORDER BY spans", None, "ordered"),
    ("logs by severity", "SELECT severity_number, severity_text, count(*) AS n FROM logs GROUP BY 1, 2 ORDER BY 1", None, "ordered"),
    ("logs: LIKE and map", "SELECT attributes['user.id'] AS user_id, count(*) AS n FROM logs WHERE body LIKE '%failed' GROUP BY 1 ORDER BY 1", None, "ordered"),
    ("metrics per name", "SELECT metric_name, count(*) AS n, avg(value_double) AS mean, max(value_double) AS top FROM metric_points GROUP BY 1 ORDER BY 1", None, "ordered"),
    ("metrics bucketed by host", "SELECT date_trunc('hour', time_unix_nano) AS hour, attributes['host'] AS host, sum(value_double) AS total FROM metric_points WHERE metric_name = 'cpu.utilization' GROUP BY 1, 2 ORDER BY 1, 2", None, "ordered"),
]


def to_us(v):
    """A time from either side as µs since the epoch."""
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        d = v - datetime.datetime(1970, 1, 1)
        return (d.days * 86_400 + d.seconds) * 1_000_000 + d.microseconds
    # Skein prints RFC 3339 with up to 9 fractional digits.
    s = v.rstrip("Z")
    for suffix in ("+00:00",):
        if s.endswith(suffix):
            s = s[: -len(suffix)]
    date, _, frac = s.partition(".")
    whole = datetime.datetime.fromisoformat(date)
    ns = int((frac + "000000000")[:9]) if frac else 0
    return to_us(whole) + ns // 1000


def norm(v, is_time):
    if v is None:
        return None
    if is_time:
        return ("time", to_us(v))
    if hasattr(v, "as_integer_ratio") or isinstance(v, int):
        return float(v)
    try:
        import decimal
        if isinstance(v, decimal.Decimal):
            return float(v)
    except ImportError:
        pass
    return v


def close(a, b, rel):
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b or abs(a - b) <= rel * max(abs(a), abs(b))
    return a == b


def rows_equal(a, b, rel):
    return len(a) == len(b) and all(len(x) == len(y) and all(close(p, q, rel) for p, q in zip(x, y)) for x, y in zip(a, b))


def skein_sql(api, query):
    req = urllib.request.Request(api + "/api/v1/sql", data=json.dumps({"query": query}).encode(),
                                 headers={"content-type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=120) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise SystemExit("Skein refused {!r}: {} {}".format(query, e.code, e.read().decode()))


def compare(api, out_dir):
    con = duckdb.connect()
    spans = export_parquet(con, out_dir)
    trace = spans[5]["trace_id"]
    failures = []
    for name, ours, theirs, how in QUERIES:
        ours = ours.replace("{trace}", trace)
        theirs = (theirs or ours).replace("{trace}", trace)
        answer = skein_sql(api, ours)
        assert answer["truncated"] is False, name
        times = [c["type"].startswith("TIMESTAMP") for c in answer["columns"]]
        got = [[norm(v, t) for v, t in zip(r, times)] for r in answer["rows"]]
        cur = con.execute(theirs)
        duck_times = [str(d[1]).upper().startswith("TIMESTAMP") for d in cur.description]
        want = [[norm(v, t) for v, t in zip(r, duck_times)] for r in cur.fetchall()]
        if times != duck_times:
            failures.append("{}: time columns differ: skein {} duckdb {}".format(name, times, duck_times))
            continue
        # DataFusion interpolates percentile_cont with ~1e-9 relative float
        # error (5041599.994 for DuckDB's 5041600): "interpolated" allows 1e-6.
        rel = {"approx": 0.05, "interpolated": 1e-6}.get(how, 1e-9)
        if how == "bag":
            key = lambda r: json.dumps(r, sort_keys=True, default=str)
            got, want = sorted(got, key=key), sorted(want, key=key)
        if not want:
            failures.append("{}: DuckDB's answer is empty, so the query tests nothing".format(name))
        elif not rows_equal(got, want, rel):
            failures.append("{}:\n  query   {}\n  skein   {}\n  duckdb  {}".format(name, ours, got[:10], want[:10]))
        else:
            print("ok  {:40} {} rows".format(name, len(want)))
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print("{} queries agree with DuckDB {}".format(len(QUERIES), duckdb.__version__))


if __name__ == "__main__":
    phase = sys.argv[1]
    if phase == "ingest":
        ingest(sys.argv[2], int(sys.argv[3]))
    elif phase == "compare":
        compare(sys.argv[2], sys.argv[3])
    else:
        raise SystemExit("usage: sql_duckdb.py ingest API PART | compare API DIR")
