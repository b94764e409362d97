#!/usr/bin/env python3
"""Conformance: the OpenTelemetry Python SDK's own OTLP exporters (gRPC and
HTTP/protobuf) against a skein that requires tokens. Each exporter sends the
token the way users configure it (the `headers` the SDK also reads from
OTEL_EXPORTER_OTLP_HEADERS): the ingest token is accepted, the read token and
none are refused, and what was accepted is readable with the read token.

Usage: auth_python.py --grpc URL --http URL --api URL --ingest SECRET --read SECRET
"""

import argparse
import json
import os
import sys
import urllib.error
import urllib.request

for _k in list(os.environ):
    if _k.startswith("OTEL_"):
        del os.environ[_k]
for _k in ("no_proxy", "NO_PROXY"):
    os.environ[_k] = ",".join(x for x in (os.environ.get(_k, ""), "127.0.0.1,localhost,::1") if x)

from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExportResult
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def spans(name):
    memory = InMemorySpanExporter()
    provider = TracerProvider(resource=Resource.create({"service.name": "auth-conformance"}))
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with provider.get_tracer("auth").start_as_current_span(name):
        pass
    return memory.get_finished_spans()


def main():
    p = argparse.ArgumentParser()
    for a in ("grpc", "http", "api", "ingest", "read"):
        p.add_argument("--" + a, required=True)
    a = p.parse_args()
    failures = []

    def export(kind, token, want):
        headers = {"authorization": f"Bearer {token}"} if token else {}
        name = f"{kind}-{'none' if token is None else token}"
        if kind == "grpc":
            exp = GrpcExporter(endpoint=a.grpc, insecure=True, headers=headers, timeout=5)
        else:
            exp = HttpExporter(endpoint=a.http.rstrip("/") + "/v1/traces", headers=headers, timeout=5)
        got = exp.export(spans(name))
        exp.shutdown()
        if got != want:
            failures.append(f"{kind} export with token {token!r}: {got}, want {want}")

    for kind in ("grpc", "http"):
        export(kind, a.ingest, SpanExportResult.SUCCESS)
        export(kind, a.read, SpanExportResult.FAILURE)
        export(kind, None, SpanExportResult.FAILURE)

    req = urllib.request.Request(
        a.api.rstrip("/") + "/api/v1/spans?service=auth-conformance&last=1h&limit=100",
        headers={"Authorization": f"Bearer {a.read}"},
    )
    body = json.load(urllib.request.urlopen(req, timeout=10))
    names = sorted(s["name"] for s in body.get("spans", []))
    want = sorted([f"grpc-{a.ingest}", f"http-{a.ingest}"])
    if names != want:
        failures.append(f"stored spans {names}, want {want}")
    try:
        urllib.request.urlopen(a.api.rstrip("/") + "/api/v1/spans?last=1h", timeout=10)
        failures.append("reading without a token succeeded")
    except urllib.error.HTTPError as e:
        if e.code != 401:
            failures.append(f"reading without a token: {e.code}, want 401")

    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print("auth conformance: ok")


if __name__ == "__main__":
    main()
