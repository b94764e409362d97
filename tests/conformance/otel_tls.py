#!/usr/bin/env python3
"""TLS conformance: the OpenTelemetry Python SDK exports one span over
OTLP/gRPC and one over OTLP/HTTP (protobuf) to a skein serving TLS, trusting
only the test's self-signed certificate.

Usage: otel_tls.py --grpc https://127.0.0.1:P --http https://127.0.0.1:Q
       --ca cert.pem --service NAME
Exits non-zero when an export fails (the SDK reports FAILURE, e.g. on a
handshake or certificate error).
"""

import argparse
import os
import sys

for _k in list(os.environ):
    if _k.startswith("OTEL_"):
        del os.environ[_k]
for _k in ("no_proxy", "NO_PROXY"):
    os.environ[_k] = ",".join(x for x in (os.environ.get(_k, ""), "127.0.0.1,localhost,::1") if x)

import grpc
from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpanExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpSpanExporter
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult


class Checked(SpanExporter):
    """Remembers whether every export succeeded."""

    def __init__(self, inner, name):
        self.inner, self.name, self.failures = inner, name, []

    def export(self, spans):
        r = self.inner.export(spans)
        if r != SpanExportResult.SUCCESS:
            self.failures.append(f"{self.name}: export returned {r}")
        return r

    def shutdown(self):
        self.inner.shutdown()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grpc", required=True)
    ap.add_argument("--http", required=True)
    ap.add_argument("--ca", required=True)
    ap.add_argument("--service", required=True)
    a = ap.parse_args()
    # requests (the HTTP exporter's client) prefers a CA bundle named in the
    # environment over the exporter's certificate_file: name ours there too.
    os.environ["REQUESTS_CA_BUNDLE"] = a.ca
    os.environ["CURL_CA_BUNDLE"] = a.ca
    ca = open(a.ca, "rb").read()
    exporters = [
        Checked(
            GrpcSpanExporter(
                endpoint=a.grpc,
                insecure=False,
                credentials=grpc.ssl_channel_credentials(root_certificates=ca),
                timeout=20,
            ),
            "grpc",
        ),
        Checked(HttpSpanExporter(endpoint=a.http + "/v1/traces", certificate_file=a.ca, timeout=20), "http"),
    ]
    for e in exporters:
        provider = TracerProvider(resource=Resource.create({"service.name": a.service}))
        provider.add_span_processor(SimpleSpanProcessor(e))
        with provider.get_tracer("tls-test").start_as_current_span(f"over-{e.name}"):
            pass
        provider.shutdown()
    failures = [f for e in exporters for f in e.failures]
    if failures:
        print("\n".join(failures), file=sys.stderr)
        sys.exit(1)
    print("exported over grpc and http with TLS")


if __name__ == "__main__":
    main()
