#!/usr/bin/env python3
"""Conformance: the OpenTelemetry Python SDK talks to a running skein.

Exports traces, logs and metrics with the SDK's own OTLP exporters, once over
gRPC and once over HTTP/protobuf (six exporters in all; gRPC metrics and
HTTP logs gzip-compressed), then reads every record back through skein's API and checks every field against what the SDK
sent:

- traces through the tree view (`/api/v1/traces/{id}`), span search
  (`/api/v1/spans`) and the OTLP/JSON view (`?format=otlp`), which is parsed
  with protobuf's own proto3 JSON parser (strictly: unknown fields fail) and
  compared message for message with what the SDK's encoder puts on the wire;
- logs through `/api/v1/logs`;
- metrics through `/api/v1/metrics`.

Usage: otel_python.py --grpc http://127.0.0.1:4317 --http http://127.0.0.1:4318
       --api http://127.0.0.1:7700
(or env SKEIN_OTLP_GRPC, SKEIN_OTLP_HTTP, SKEIN_API). Exits non-zero, listing
every mismatch (field, expected, got), when anything differs.
"""

import argparse
import base64
import json
import math
import os
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid

# Hermetic: no OTEL_* settings from the caller's environment, no proxies for
# loopback (both the HTTP exporter and gRPC honour *_proxy variables).
for _k in list(os.environ):
    if _k.startswith("OTEL_"):
        del os.environ[_k]
for _k in ("no_proxy", "NO_PROXY"):
    os.environ[_k] = ",".join(x for x in (os.environ.get(_k, ""), "127.0.0.1,localhost,::1") if x)
os.environ["OTEL_METRICS_EXEMPLAR_FILTER"] = "always_off"

try:
    from google.protobuf import json_format
    from opentelemetry import trace as trace_api
    from opentelemetry._logs import SeverityNumber
    from opentelemetry.context import Context
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogExporter
    from opentelemetry.exporter.otlp.proto.grpc.exporter import Compression as GrpcCompression
    from opentelemetry.exporter.otlp.proto.http import Compression as HttpCompression
    from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter as GrpcMetricExporter
    from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter as HttpLogExporter
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter as HttpMetricExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
    from opentelemetry.metrics import Observation
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import BatchLogRecordProcessor, LogRecordExporter, LogRecordExportResult
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricExporter, MetricExportResult, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
    from opentelemetry.trace import Link, SpanKind, Status, StatusCode
except ImportError as e:  # pragma: no cover - reported, not tested
    print(f"MISSING CLIENT: the OpenTelemetry Python SDK is not installed ({e}); "
          "run: python3 -m pip install -r tests/requirements.txt", file=sys.stderr)
    sys.exit(3)


# ---------------------------------------------------------------- checking

class Checks:
    """Collects mismatches; values compare strictly (1 != 1.0 != True)."""

    def __init__(self):
        self.failures = []
        self.count = 0

    def fail(self, where, expected, got):
        self.failures.append(f"{where}: expected {short(expected)}, got {short(got)}")

    def eq(self, where, expected, got):
        self.count += 1
        for path, e, g in diff(expected, got, where):
            self.fail(path, e, g)

    def true(self, where, cond, detail=""):
        self.count += 1
        if not cond:
            self.failures.append(f"{where}: {detail or 'check failed'}")


class _Missing:
    def __repr__(self):
        return "<missing>"


MISSING = _Missing()  # a field skein did not return at all


def short(v):
    s = repr(v) if v is MISSING else json.dumps(v, sort_keys=True, default=repr)
    return s if len(s) <= 300 else s[:300] + "…"


def same_scalar(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def diff(e, g, path):
    """Yields (path, expected, got) for every difference between e and g."""
    if isinstance(e, dict) and isinstance(g, dict):
        for k in e:
            if k not in g:
                yield f"{path}.{k}", e[k], MISSING
            else:
                yield from diff(e[k], g[k], f"{path}.{k}")
        for k in g:
            if k not in e:
                yield f"{path}.{k}", MISSING, g[k]
    elif isinstance(e, list) and isinstance(g, list):
        if len(e) != len(g):
            yield f"{path} (length {len(e)} vs {len(g)})", e, g
        else:
            for i, (a, b) in enumerate(zip(e, g)):
                yield from diff(a, b, f"{path}[{i}]")
    elif not same_scalar(e, g):
        yield path, e, g


# ---------------------------------------------------------------- the API

NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def api_get(api, path, query=None):
    url = api + path + ("?" + urllib.parse.urlencode(query) if query else "")
    try:
        with NO_PROXY.open(url, timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise RuntimeError(f"GET {url}: HTTP {e.code}: {e.read()[:500]!r}") from None


def poll(fetch, ready, timeout=10.0):
    """Fetches until `ready(result)` (records become visible once acknowledged,
    but do not rely on the instant), returning the last result either way."""
    deadline = time.monotonic() + timeout
    while True:
        r = fetch()
        if ready(r) or time.monotonic() > deadline:
            return r
        time.sleep(0.1)


# ---------------------------------------------------------------- tees

class TeeSpanExporter(SpanExporter):
    """The real exporter, remembering what it sent and how that went."""

    def __init__(self, inner):
        self.inner, self.sent, self.results = inner, [], []

    def export(self, spans):
        r = self.inner.export(spans)
        self.sent.extend(spans)
        self.results.append(r)
        return r

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return self.inner.force_flush(timeout_millis)


class TeeLogExporter(LogRecordExporter):
    def __init__(self, inner):
        self.inner, self.sent, self.results = inner, [], []

    def export(self, batch):
        r = self.inner.export(batch)
        self.sent.extend(batch)
        self.results.append(r)
        return r

    def shutdown(self):
        self.inner.shutdown()

    def force_flush(self, timeout_millis=30000):
        return self.inner.force_flush(timeout_millis)


class TeeMetricExporter(MetricExporter):
    def __init__(self, inner):
        super().__init__(preferred_temporality=inner._preferred_temporality,
                         preferred_aggregation=inner._preferred_aggregation)
        self.inner, self.sent, self.results = inner, [], []

    def export(self, metrics_data, timeout_millis=10_000, **kwargs):
        r = self.inner.export(metrics_data, timeout_millis=timeout_millis, **kwargs)
        self.sent.append(metrics_data)
        self.results.append(r)
        return r

    def shutdown(self, timeout_millis=30_000, **kwargs):
        self.inner.shutdown(timeout_millis=timeout_millis, **kwargs)

    def force_flush(self, timeout_millis=10_000):
        return self.inner.force_flush(timeout_millis)


# ---------------------------------------------------------------- data

INT_BIG = 2**62 + 1  # not a double: catches ints squeezed through f64
SPAN_ATTRS = {
    "attr.str": "hello",
    "attr.str.empty": "",
    "attr.str.unicode": "naïve ☃ 🚀 \"quoted\" \\ \n",
    "attr.bool.true": True,
    "attr.bool.false": False,
    "attr.int": 42,
    "attr.int.zero": 0,
    "attr.int.neg": -7,
    "attr.int.big": INT_BIG,
    "attr.int.max": 2**63 - 1,
    "attr.int.min": -(2**63),
    "attr.float": 3.14159,
    "attr.float.whole": 2.0,
    "attr.float.neg": -0.5,
    "attr.float.tiny": 5e-324,
    "attr.float.huge": 1.7976931348623157e308,
    "attr.float.inf": math.inf,
    "attr.float.ninf": -math.inf,
    "attr.float.nan": math.nan,
    "attr.arr.str": ["a", "", "ünï"],
    "attr.arr.bool": [True, False, True],
    "attr.arr.int": [1, -2, INT_BIG],
    "attr.arr.float": [0.1, -2.5, 3.0],
}


def plain(v):
    """An SDK attribute value as skein's plain-JSON views show it (after a
    JSON round trip): tuples are lists, non-finite doubles are strings."""
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        return {k: plain(x) for k, x in v.items()}
    if isinstance(v, float) and not math.isfinite(v):
        return "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
    if isinstance(v, bytes):
        return base64.b64encode(v).decode()
    return v


def plain_attrs(attrs):
    return {k: plain(v) for k, v in (attrs or {}).items()}


def hexid(n, width):
    return format(n, f"0{width}x")


KIND_NAMES = {SpanKind.INTERNAL: "internal", SpanKind.SERVER: "server", SpanKind.CLIENT: "client",
              SpanKind.PRODUCER: "producer", SpanKind.CONSUMER: "consumer"}
STATUS_NAMES = {StatusCode.UNSET: "unset", StatusCode.OK: "ok", StatusCode.ERROR: "error"}


# ---------------------------------------------------------------- traces

def emit_traces(tp, t0):
    """Two traces: a checkout (server → client/internal/producer) and a
    consumer linked to it. Every time is explicit, with odd nanoseconds."""
    tracer = tp.get_tracer("conformance.python.tracer", "1.2.3",
                           schema_url="https://opentelemetry.io/schemas/1.26.0",
                           attributes={"scope.attr": "tracer-scope", "scope.n": 7})
    root = tracer.start_span("GET /checkout", kind=SpanKind.SERVER, attributes=SPAN_ATTRS, start_time=t0 + 1)
    root.add_event("checkout.started", attributes={"cart.items": 3, "cart.total": 99.5, "vip": True,
                                                   "coupons": ["A", "B"]}, timestamp=t0 + 1_001)
    root.add_event("no.attributes", timestamp=t0 + 2_003)
    in_root = trace_api.set_span_in_context(root)

    db = tracer.start_span("SELECT orders", context=in_root, kind=SpanKind.CLIENT,
                           attributes={"db.system": "postgresql", "db.rows": 0, "db.timeout.s": 1.5},
                           start_time=t0 + 1_000_003)
    db.add_event("retry", attributes={"attempt": 2, "backoff.ms": 12.5, "fatal": False,
                                      "codes": [500, 503]}, timestamp=t0 + 2_000_005)
    db.set_status(Status(StatusCode.ERROR, "connection reset by peer"))
    db.end(end_time=t0 + 5_000_011)

    work = tracer.start_span("compute total", context=in_root, kind=SpanKind.INTERNAL,
                             attributes={"items": [1, 2, 3], "weights": [0.5, 0.25]},
                             start_time=t0 + 6_000_013)
    work.end(end_time=t0 + 7_000_017)  # status stays unset

    prod = tracer.start_span("orders publish", context=in_root, kind=SpanKind.PRODUCER,
                             attributes={"messaging.system": "kafka", "messaging.destination.name": "orders"},
                             start_time=t0 + 8_000_019)
    prod.set_status(Status(StatusCode.OK))
    prod.end(end_time=t0 + 9_000_023)
    root.set_status(Status(StatusCode.OK))
    root.end(end_time=t0 + 50_000_029)

    consumer = tracer.start_span(
        "orders process", context=Context(), kind=SpanKind.CONSUMER,
        links=[Link(prod.get_span_context(), {"link.reason": "follows_from", "link.n": 1, "link.ok": True,
                                              "link.w": 0.5, "link.tags": ["x", "y"]}),
               Link(db.get_span_context())],
        attributes={"messaging.batch.message_count": 1}, start_time=t0 + 60_000_031)
    consumer.set_status(Status(StatusCode.ERROR, "poison message: ünïcode"))
    consumer.end(end_time=t0 + 61_000_037)
    return [root, db, work, prod, consumer], tracer


def expected_span(s):
    ctx = s.get_span_context()
    return {
        "trace_id": hexid(ctx.trace_id, 32),
        "span_id": hexid(ctx.span_id, 16),
        "parent_span_id": hexid(s.parent.span_id, 16) if s.parent else None,
        "name": s.name,
        "kind": KIND_NAMES[s.kind],
        "start_time_unix_nano": s.start_time,
        "end_time_unix_nano": s.end_time,
        "duration_ns": s.end_time - s.start_time,
        "status": {"code": STATUS_NAMES[s.status.status_code],
                   "message": s.status.description or None},
        "attributes": plain_attrs(s.attributes),
        "events": [{"name": e.name, "time_unix_nano": e.timestamp, "attributes": plain_attrs(e.attributes)}
                   for e in s.events],
        "links": [{"trace_id": hexid(l.context.trace_id, 32), "span_id": hexid(l.context.span_id, 16),
                   "attributes": plain_attrs(l.attributes)} for l in s.links],
        "scope": {"name": s.instrumentation_scope.name, "version": s.instrumentation_scope.version},
        "resource": plain_attrs(s.resource.attributes),
        "service": s.resource.attributes["service.name"],
    }


def check_span_view(c, where, exp, got):
    for k, v in exp.items():
        c.eq(f"{where}.{k}", v, got.get(k, MISSING))


def check_traces(c, api, label, spans, tee):
    c.true(f"{label} traces export", tee.results and all(r == SpanExportResult.SUCCESS for r in tee.results),
           f"exporter results {tee.results}")
    c.eq(f"{label} traces exported span count", len(spans), len(tee.sent))
    service = spans[0].resource.attributes["service.name"]
    by_trace = {}
    for s in tee.sent:
        by_trace.setdefault(s.get_span_context().trace_id, []).append(s)
    # The tree view of each trace.
    for tid, sent in by_trace.items():
        tid_hex = hexid(tid, 32)
        where = f"{label} GET /api/v1/traces/{tid_hex}"
        view = poll(lambda: api_get(api, f"/api/v1/traces/{tid_hex}"),
                    lambda v: v.get("span_count") == len(sent))
        c.eq(f"{where}.trace_id", tid_hex, view.get("trace_id"))
        c.eq(f"{where}.span_count", len(sent), view.get("span_count"))
        c.eq(f"{where}.error_count", sum(1 for s in sent if s.status.status_code == StatusCode.ERROR),
             view.get("error_count"))
        c.eq(f"{where}.services", [service], view.get("services"))
        c.eq(f"{where}.start_time_unix_nano", min(s.start_time for s in sent), view.get("start_time_unix_nano"))
        c.eq(f"{where}.end_time_unix_nano", max(s.end_time for s in sent), view.get("end_time_unix_nano"))
        got = {v.get("span_id"): v for v in view.get("spans", [])}
        roots = [s for s in sent if s.parent is None]
        c.eq(f"{where}.root.span_id", hexid(roots[0].get_span_context().span_id, 16),
             (view.get("root") or {}).get("span_id"))
        for s in sent:
            sid = hexid(s.get_span_context().span_id, 16)
            w = f"{where} span {s.name!r} ({sid})"
            if sid not in got:
                c.fail(w, "present", MISSING)
                continue
            check_span_view(c, w, expected_span(s), got[sid])
            c.eq(f"{w}.depth", 0 if s.parent is None else 1, got[sid].get("depth"))
        check_otlp_trace(c, api, label, tid_hex, sent)
    # Span search by service.
    where = f"{label} GET /api/v1/spans?service={service}"
    r = poll(lambda: api_get(api, "/api/v1/spans", {"service": service, "limit": 100}),
             lambda v: len(v.get("spans", [])) >= len(tee.sent))
    got = {v.get("span_id"): v for v in r.get("spans", [])}
    c.eq(f"{where} span ids", sorted(hexid(s.get_span_context().span_id, 16) for s in tee.sent), sorted(got))
    for s in tee.sent:
        sid = hexid(s.get_span_context().span_id, 16)
        if sid in got:
            check_span_view(c, f"{where} span {s.name!r}", expected_span(s), got[sid])


# OTLP/JSON: protobuf's own proto3 JSON parser, after turning OTLP's hex ids
# (its one deviation from proto3 JSON for these messages) into base64.
ID_FIELDS = {"traceId", "spanId", "parentSpanId", "trace_id", "span_id", "parent_span_id"}


def hex_ids_to_base64(v, path, problems):
    if isinstance(v, dict):
        out = {}
        for k, x in v.items():
            if k in ID_FIELDS and isinstance(x, str):
                try:
                    out[k] = base64.b64encode(bytes.fromhex(x)).decode()
                except ValueError:
                    problems.append(f"{path}.{k}: {x!r} is not hex")
                    out[k] = x
                if x != x.lower():
                    problems.append(f"{path}.{k}: {x!r} is not lowercase hex")
            else:
                out[k] = hex_ids_to_base64(x, f"{path}.{k}", problems)
        return out
    if isinstance(v, list):
        return [hex_ids_to_base64(x, f"{path}[{i}]", problems) for i, x in enumerate(v)]
    return v


INT64_FIELDS = {"startTimeUnixNano", "endTimeUnixNano", "timeUnixNano", "intValue"}


def raw_json_problems(v, path, out):
    """What a proto3 JSON parser would silently misread: 64-bit integers as
    JSON numbers past 2^53 (they lose precision in JavaScript and other
    double-based parsers; proto3 JSON writes decimal strings) and doubles as
    null (NaN and the infinities are the strings "NaN", "Infinity",
    "-Infinity"; null means "not set", so the value is lost)."""
    if isinstance(v, dict):
        for k, x in v.items():
            if k in INT64_FIELDS and isinstance(x, int) and not isinstance(x, bool) and abs(x) > 2**53:
                out.append(f"{path}.{k}: {x} is a JSON number past 2^53 (proto3 JSON: a decimal string)")
            if k == "doubleValue" and x is None:
                out.append(f"{path}.{k}: null (proto3 JSON writes NaN/Infinity/-Infinity as strings; "
                           "null reads back as no value)")
            raw_json_problems(x, f"{path}.{k}", out)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            raw_json_problems(x, f"{path}[{i}]", out)


def to_hex_ids(d):
    """MessageToDict output with base64 ids shown as hex, for readable diffs."""
    if isinstance(d, dict):
        return {k: (base64.b64decode(x).hex() if k in ID_FIELDS and isinstance(x, str) else to_hex_ids(x))
                for k, x in d.items()}
    if isinstance(d, list):
        return [to_hex_ids(x) for x in d]
    return d


def flatten_spans(req):
    """(span_id hex) → dict of resource, scope and span, proto3-normalised."""
    out = {}
    for rs in req.resource_spans:
        for ss in rs.scope_spans:
            for sp in ss.spans:
                sp = type(sp).FromString(sp.SerializeToString())
                if sp.HasField("status") and sp.status.code == 0 and not sp.status.message:
                    sp.ClearField("status")  # an empty Status is the default
                out[sp.span_id.hex()] = {
                    "resource": to_hex_ids(json_format.MessageToDict(rs.resource)),
                    "resource_schema_url": rs.schema_url,
                    "scope": to_hex_ids(json_format.MessageToDict(ss.scope)),
                    "scope_schema_url": ss.schema_url,
                    "span": to_hex_ids(json_format.MessageToDict(sp)),
                }
    return out


def check_otlp_trace(c, api, label, tid_hex, sent):
    where = f"{label} GET /api/v1/traces/{tid_hex}?format=otlp"
    raw = api_get(api, f"/api/v1/traces/{tid_hex}", {"format": "otlp"})
    problems = []
    converted = hex_ids_to_base64(raw, "$", problems)
    raw_json_problems(raw, "$", problems)
    for p in problems:
        c.failures.append(f"{where}: {p}")
    got_req = ExportTraceServiceRequest()
    try:
        json_format.ParseDict(converted, got_req, ignore_unknown_fields=False)
    except json_format.ParseError as e:
        c.fail(f"{where} (proto3 JSON parse)", "a valid ExportTraceServiceRequest", str(e))
        return
    c.count += 1
    expected = flatten_spans(encode_spans(sent))
    got = flatten_spans(got_req)
    c.eq(f"{where} span ids", sorted(expected), sorted(got))
    for sid, e in expected.items():
        if sid in got:
            c.eq(f"{where} span {sid}", e, got[sid])


# ---------------------------------------------------------------- logs

def emit_logs(lp, spans, t0):
    root, db = spans[0], spans[1]
    logger = lp.get_logger("conformance.python.logger", "4.5.6",
                           schema_url="https://opentelemetry.io/schemas/1.26.0",
                           attributes={"scope.attr": "logger-scope"})
    logger.emit(timestamp=t0 + 3_000_041, observed_timestamp=t0 + 3_000_043,
                context=trace_api.set_span_in_context(db),
                severity_number=SeverityNumber.ERROR, severity_text="ERROR",
                body="query failed: connection reset by peer",
                attributes={"db.statement": "SELECT * FROM orders", "retry": 2, "final": False,
                            "ratio": 0.25, "int.big": INT_BIG, "tags": ["x", "y"], "codes": [1, 2],
                            "flags": [True, False], "weights": [0.5, 1.5]})
    logger.emit(timestamp=t0 + 4_000_047, observed_timestamp=t0 + 4_000_049,
                context=trace_api.set_span_in_context(root),
                severity_number=SeverityNumber.INFO, severity_text="INFO",
                body={"msg": "order placed", "order": {"id": 123, "items": ["a", "b"], "total": 9.99,
                                                       "paid": True, "note": None}},
                attributes={"order.id": 123}, event_name="order.placed")
    logger.emit(timestamp=t0 + 5_000_053, observed_timestamp=t0 + 5_000_059, context=Context(),
                severity_number=SeverityNumber.WARN, severity_text="WARN", body="disk almost full",
                attributes={"disk.free.ratio": 0.05})
    logger.emit(timestamp=t0 + 6_000_061, observed_timestamp=t0 + 6_000_067, context=Context(),
                severity_number=SeverityNumber.DEBUG2, severity_text="debug-two",
                body=["list", 1, 2.5, True], attributes={})
    logger.emit(timestamp=t0 + 7_000_071, observed_timestamp=t0 + 7_000_073, context=Context(),
                severity_number=SeverityNumber.FATAL, severity_text="FATAL", body=INT_BIG)
    return logger


def expected_log(rw):
    r = rw.log_record
    correlated = r.trace_id not in (None, 0)
    return {
        "time_unix_nano": r.timestamp,
        "observed_time_unix_nano": r.observed_timestamp,
        "severity_number": int(r.severity_number.value),
        "severity_text": r.severity_text,
        "body": plain(r.body),
        "attributes": plain_attrs(r.attributes),
        "trace_id": hexid(r.trace_id, 32) if correlated else None,
        "span_id": hexid(r.span_id, 16) if correlated and r.span_id else None,
        "event_name": r.event_name or None,
        "scope": {"name": rw.instrumentation_scope.name, "version": rw.instrumentation_scope.version},
        "resource": plain_attrs(rw.resource.attributes),
        "service": rw.resource.attributes["service.name"],
    }


def check_logs(c, api, label, tee, resource, n):
    c.true(f"{label} logs export", tee.results and all(r == LogRecordExportResult.SUCCESS for r in tee.results),
           f"exporter results {tee.results}")
    c.eq(f"{label} logs exported count", n, len(tee.sent))
    service = resource.attributes["service.name"]
    where = f"{label} GET /api/v1/logs?service={service}"
    r = poll(lambda: api_get(api, "/api/v1/logs", {"service": service, "limit": 100}),
             lambda v: len(v.get("logs", [])) >= n)
    got = {l.get("time_unix_nano"): l for l in r.get("logs", [])}
    c.eq(f"{where} count", n, len(r.get("logs", [])))
    for rw in tee.sent:
        rec = rw.log_record
        w = f"{where} log {short(plain(rec.body))[:40]}"
        g = got.get(rec.timestamp)
        if g is None:
            c.fail(w, f"a record at {rec.timestamp}", MISSING)
            continue
        for k, v in expected_log(rw).items():
            c.eq(f"{w}.{k}", v, g.get(k, MISSING))


# ---------------------------------------------------------------- metrics

def emit_metrics(mp):
    meter = mp.get_meter("conformance.python.meter", "7.8.9")
    requests = meter.create_counter("conformance.requests", unit="{request}", description="Requests handled")
    requests.add(5, {"http.route": "/a", "http.status_code": 200})
    requests.add(3, {"http.route": "/a", "http.status_code": 200})
    requests.add(1, {"http.route": "/b", "http.status_code": 500, "retry": True})
    sent_bytes = meter.create_counter("conformance.bytes", unit="By", description="Bytes sent")
    sent_bytes.add(1.5, {"peer": "x"})
    sent_bytes.add(2.25, {"peer": "x"})
    depth = meter.create_up_down_counter("conformance.queue.depth", unit="{item}", description="Queue depth")
    depth.add(10, {"queue": "q1"})
    depth.add(-3, {"queue": "q1"})
    depth.add(-2, {"queue": "q2"})
    latency = meter.create_histogram("conformance.latency", unit="ms", description="Latency",
                                     explicit_bucket_boundaries_advisory=[0.0, 10.0, 100.0, 1000.0])
    for v in (5, 15, 150, 1500, 0.5, 10):
        latency.record(v, {"http.route": "/a"})
    latency.record(0, {"http.route": "/zero"})  # on the first bound: bucket (-inf, 0]

    def temperature(_options):
        yield Observation(21.5, {"room": "kitchen", "floor": 1})
        yield Observation(-3, {"room": "cellar", "floor": -1})

    meter.create_observable_gauge("conformance.temperature", callbacks=[temperature], unit="Cel",
                                  description="Room temperature")
    # Hand-computed expectations (not just what the SDK computed).
    return {
        ("conformance.requests", (("http.route", "/a"), ("http.status_code", 200))): {"value": 8},
        ("conformance.requests", (("http.route", "/b"), ("http.status_code", 500), ("retry", True))): {"value": 1},
        ("conformance.bytes", (("peer", "x"),)): {"value": 3.75},
        ("conformance.queue.depth", (("queue", "q1"),)): {"value": 7},
        ("conformance.queue.depth", (("queue", "q2"),)): {"value": -2},
        ("conformance.latency", (("http.route", "/a"),)): {
            "count": 6, "sum": 1680.5, "min": 0.5, "max": 1500.0,
            "bucket_counts": [0, 3, 1, 1, 1], "explicit_bounds": [0.0, 10.0, 100.0, 1000.0]},
        ("conformance.latency", (("http.route", "/zero"),)): {
            "count": 1, "sum": 0.0, "min": 0.0, "max": 0.0,
            "bucket_counts": [1, 0, 0, 0, 0], "explicit_bounds": [0.0, 10.0, 100.0, 1000.0]},
        ("conformance.temperature", (("floor", 1), ("room", "kitchen"))): {"value": 21.5},
        ("conformance.temperature", (("floor", -1), ("room", "cellar"))): {"value": -3},
    }


METRIC_SHAPES = {
    "conformance.requests": {"type": "sum", "unit": "{request}", "description": "Requests handled",
                             "monotonic": True, "temporality": "cumulative"},
    "conformance.bytes": {"type": "sum", "unit": "By", "description": "Bytes sent",
                          "monotonic": True, "temporality": "cumulative"},
    "conformance.queue.depth": {"type": "sum", "unit": "{item}", "description": "Queue depth",
                                "monotonic": False, "temporality": "cumulative"},
    "conformance.latency": {"type": "histogram", "unit": "ms", "description": "Latency",
                            "temporality": "cumulative"},
    "conformance.temperature": {"type": "gauge", "unit": "Cel", "description": "Room temperature"},
}


def attr_key(attrs):
    return tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in attrs.items()))


def check_metrics(c, api, label, tee, resource, expected):
    c.true(f"{label} metrics export", tee.results and all(r == MetricExportResult.SUCCESS for r in tee.results),
           f"exporter results {tee.results}")
    service = resource.attributes["service.name"]
    # Every point the SDK sent, by (name, attributes).
    sent = {}
    for md in tee.sent:
        for rm in md.resource_metrics:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    for p in m.data.data_points:
                        sent.setdefault((m.name, attr_key(dict(p.attributes))), []).append(p)
    c.eq(f"{label} metrics sent series", sorted(map(repr, expected)), sorted(map(repr, sent)))
    for name, shape in METRIC_SHAPES.items():
        where = f"{label} GET /api/v1/metrics?name={name}&service={service}"
        want = sum(len(v) for (n, _), v in sent.items() if n == name)
        r = poll(lambda: api_get(api, "/api/v1/metrics", {"name": name, "service": service, "limit": 1000}),
                 lambda v: len(v.get("points", [])) >= want)
        points = r.get("points", [])
        c.eq(f"{where} point count", want, len(points))
        got = {}
        for p in points:
            got.setdefault((p.get("name"), attr_key(p.get("attributes") or {}), p.get("time_unix_nano")), p)
        for (n, attrs), sent_points in sent.items():
            if n != name:
                continue
            for sp in sent_points:
                w = f"{where} point {dict(attrs)} @ {sp.time_unix_nano}"
                g = got.get((n, attrs, sp.time_unix_nano))
                if g is None:
                    c.fail(w, "present", MISSING)
                    continue
                exp = dict(shape)
                exp.update({"name": n, "service": service, "attributes": plain_attrs(dict(sp.attributes)),
                            "resource": plain_attrs(resource.attributes), "time_unix_nano": sp.time_unix_nano})
                if shape["type"] != "gauge":  # gauges carry no meaningful start time
                    exp["start_time_unix_nano"] = sp.start_time_unix_nano
                exp.update(expected.get((n, attrs), {}))
                for k, v in exp.items():
                    c.eq(f"{w}.{k}", v, g.get(k, MISSING))


# ---------------------------------------------------------------- main

def run_transport(c, label, api, span_exporter, log_exporter, metric_exporter, t0, run_id):
    resource = Resource.create({
        "service.name": f"conformance-python-{label}-{run_id}",
        "service.namespace": "conformance",
        "service.version": "0.0.1-test",
        "deployment.environment.name": "ci",
        "custom.str": "kept",
        "custom.int": 42,
        "custom.int.big": INT_BIG,
        "custom.float": 2.5,
        "custom.bool": False,
        "custom.list": ["a", "b"],
    })
    tee_spans = TeeSpanExporter(span_exporter)
    tp = TracerProvider(resource=resource)
    tp.add_span_processor(BatchSpanProcessor(tee_spans, schedule_delay_millis=3_600_000))
    tee_logs = TeeLogExporter(log_exporter)
    lp = LoggerProvider(resource=resource)
    lp.add_log_record_processor(BatchLogRecordProcessor(tee_logs, schedule_delay_millis=3_600_000))
    tee_metrics = TeeMetricExporter(metric_exporter)
    mp = MeterProvider(resource=resource, metric_readers=[
        PeriodicExportingMetricReader(tee_metrics, export_interval_millis=3_600_000)])

    spans, _ = emit_traces(tp, t0)
    emit_logs(lp, spans, t0)
    expected_metrics = emit_metrics(mp)
    c.true(f"{label} tracer provider force_flush", tp.force_flush(30_000))
    c.true(f"{label} logger provider force_flush", lp.force_flush(30_000))
    c.true(f"{label} meter provider force_flush", mp.force_flush(30_000))

    check_traces(c, api, label, spans, tee_spans)
    check_logs(c, api, label, tee_logs, resource, 5)
    check_metrics(c, api, label, tee_metrics, resource, expected_metrics)
    for p in (tp, lp):
        p.shutdown()
    mp.shutdown(timeout_millis=30_000)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--grpc", default=os.environ.get("SKEIN_OTLP_GRPC"), help="OTLP/gRPC URL, http://host:port")
    ap.add_argument("--http", default=os.environ.get("SKEIN_OTLP_HTTP"), help="OTLP/HTTP base URL")
    ap.add_argument("--api", default=os.environ.get("SKEIN_API"), help="skein API base URL")
    a = ap.parse_args()
    if not (a.grpc and a.http and a.api):
        ap.error("--grpc, --http and --api (or SKEIN_OTLP_GRPC, SKEIN_OTLP_HTTP, SKEIN_API) are required")
    grpc, http, api = (u.rstrip("/") for u in (a.grpc, a.http, a.api))
    if "://" not in grpc:
        grpc = "http://" + grpc
    run_id = uuid.uuid4().hex[:12]
    # Recent, on a microsecond boundary plus odd nanoseconds per record.
    t0 = (time.time_ns() - 120 * 10**9) // 1000 * 1000
    c = Checks()
    run_transport(c, "grpc", api,
                  GrpcSpanExporter(endpoint=grpc, insecure=True, timeout=10),
                  GrpcLogExporter(endpoint=grpc, insecure=True, timeout=10),
                  GrpcMetricExporter(endpoint=grpc, insecure=True, timeout=10, compression=GrpcCompression.Gzip),
                  t0, run_id)
    run_transport(c, "http", api,
                  HttpSpanExporter(endpoint=f"{http}/v1/traces", timeout=10),
                  HttpLogExporter(endpoint=f"{http}/v1/logs", timeout=10, compression=HttpCompression.Gzip),
                  HttpMetricExporter(endpoint=f"{http}/v1/metrics", timeout=10),
                  t0 + 10**9, run_id)
    if c.failures:
        print(f"FAIL: {len(c.failures)} mismatch(es) between what the OpenTelemetry Python SDK sent "
              f"and what skein returned ({c.count} checks):", file=sys.stderr)
        for f in c.failures:
            print("  - " + f, file=sys.stderr)
        sys.exit(1)
    print(f"ok: OpenTelemetry Python SDK over gRPC and HTTP/protobuf: traces, logs, metrics "
          f"read back identical ({c.count} checks)")


if __name__ == "__main__":
    main()
