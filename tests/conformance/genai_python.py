#!/usr/bin/env python3
"""Conformance: real GenAI instrumentations of the OpenAI Python client
export to a running skein, which must read their conventions right.

One instrumentation per run (`--instrumentation`):
  otel           opentelemetry-instrumentation-openai-v2 (OTel GenAI conventions)
  openinference  openinference-instrumentation-openai (OpenInference)
  openllmetry    opentelemetry-instrumentation-openai (OpenLLMetry / traceloop)

A fake OpenAI-compatible server on loopback answers chat completions with
known usage (1200 input tokens of which 1000 cached, 300 output of which
120 reasoning) and, on the first call, a tool call. The script makes two
calls inside a session (each convention's way of naming one) and runs the
tool, then checks through skein's API: each LLM span's `llm` object (model,
provider, tokens by kind, cost, session), usage by model, the tool list,
the session list and the session's conversation (messages, tool call).

skein is started with --pricing naming a test price for gpt-4o, so the
expected cost does not depend on the built-in table.

Usage: genai_python.py --instrumentation NAME --http URL --api URL
Exits non-zero, listing every mismatch, when anything differs.
"""

import argparse
import json
import os
import sys
import threading
import time
import urllib.parse
import urllib.request
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer

for _k in list(os.environ):
    if _k.startswith("OTEL_"):
        del os.environ[_k]
for _k in ("no_proxy", "NO_PROXY"):
    os.environ[_k] = ",".join(x for x in (os.environ.get(_k, ""), "127.0.0.1,localhost,::1") if x)

# Test prices (USD per million tokens), the ones test_pricing.toml gives
# skein for gpt-4o.
INPUT, CACHE_READ, OUTPUT, REASONING = 2.0, 0.5, 8.0, 10.0


def completion(n):
    message = {"role": "assistant", "content": "It is sunny in Paris." if n else "Let me check the weather."}
    if n == 0:
        message["tool_calls"] = [{"id": "call_1", "type": "function",
                                  "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]
    return {
        "id": f"chatcmpl-{n}", "object": "chat.completion", "created": 1700000000, "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "finish_reason": "tool_calls" if n == 0 else "stop", "message": message}],
        "usage": {"prompt_tokens": 1200, "completion_tokens": 300, "total_tokens": 1500,
                  "prompt_tokens_details": {"cached_tokens": 1000},
                  "completion_tokens_details": {"reasoning_tokens": 120}},
    }


class FakeOpenAI(BaseHTTPRequestHandler):
    calls = 0

    def log_message(self, *a):
        pass

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps(completion(FakeOpenAI.calls)).encode()
        FakeOpenAI.calls += 1
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def get(api, path, **params):
    url = f"{api}{path}"
    if params:
        url += "?" + urllib.parse.urlencode(params)
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--instrumentation", required=True, choices=["otel", "openinference", "openllmetry"])
    ap.add_argument("--http", required=True)
    ap.add_argument("--api", required=True)
    ap.add_argument("--grpc")
    args = ap.parse_args()
    which = args.instrumentation
    if which == "otel":
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "SPAN_ONLY"
        os.environ["OTEL_SEMCONV_STABILITY_OPT_IN"] = "gen_ai_latest_experimental"
    else:
        os.environ["OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"] = "true"
        os.environ["TRACELOOP_TRACE_CONTENT"] = "true"

    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    service = f"genai-{which}-{uuid.uuid4().hex[:8]}"
    tp = TracerProvider(resource=Resource.create({"service.name": service}))
    tp.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(endpoint=f"{args.http}/v1/traces")))
    trace.set_tracer_provider(tp)
    if which == "otel":
        from opentelemetry.instrumentation.openai_v2 import OpenAIInstrumentor
    elif which == "openinference":
        from openinference.instrumentation.openai import OpenAIInstrumentor
    else:
        from opentelemetry.instrumentation.openai import OpenAIInstrumentor
    OpenAIInstrumentor().instrument(tracer_provider=tp)
    import openai

    srv = HTTPServer(("127.0.0.1", 0), FakeOpenAI)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{srv.server_port}/v1", api_key="test", max_retries=0)
    tracer = tp.get_tracer("genai-conformance")
    session = f"session-{uuid.uuid4().hex[:8]}"
    messages = [{"role": "system", "content": "You are a weather bot."},
                {"role": "user", "content": "Weather in Paris?"}]
    tools = [{"type": "function", "function": {"name": "get_weather",
              "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]

    def conversation():
        first = client.chat.completions.create(model="gpt-4o", messages=messages, tools=tools)
        call = first.choices[0].message.tool_calls[0]
        # The tool, as each convention marks a tool execution.
        if which == "openinference":
            tool_attrs = {"openinference.span.kind": "TOOL", "tool.name": "get_weather",
                          "input.value": call.function.arguments, "output.value": "sunny"}
        elif which == "openllmetry":
            tool_attrs = {"traceloop.span.kind": "tool", "traceloop.entity.name": "get_weather",
                          "traceloop.entity.input": call.function.arguments, "traceloop.entity.output": "sunny"}
        else:
            tool_attrs = {"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "get_weather",
                          "gen_ai.tool.call.id": call.id, "gen_ai.tool.call.arguments": call.function.arguments,
                          "gen_ai.tool.call.result": "sunny"}
        with tracer.start_as_current_span("execute_tool get_weather", attributes=tool_attrs):
            pass
        client.chat.completions.create(model="gpt-4o", messages=messages + [
            {"role": "assistant", "tool_calls": [call.model_dump()]},
            {"role": "tool", "tool_call_id": call.id, "content": "sunny"}])

    if which == "openinference":
        from openinference.instrumentation import using_session
        with using_session(session):
            with tracer.start_as_current_span("agent", attributes={"openinference.span.kind": "AGENT"}):
                conversation()
    elif which == "openllmetry":
        # traceloop-sdk puts association properties on every span; without
        # the SDK, the agent span carries it.
        with tracer.start_as_current_span("agent", attributes={
                "traceloop.span.kind": "agent", "traceloop.entity.name": "weather",
                "traceloop.association.properties.session_id": session}):
            conversation()
    else:
        # OTel GenAI: the conversation id on the agent span only.
        with tracer.start_as_current_span("invoke_agent weather", attributes={
                "gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "weather",
                "gen_ai.conversation.id": session}):
            conversation()
    tp.force_flush()
    srv.shutdown()

    problems = []

    def expect(what, got, want):
        if got != want:
            problems.append(f"{what}: expected {want!r}, got {got!r}")

    def expect_close(what, got, want):
        if got is None or abs(got - want) > 1e-9:
            problems.append(f"{what}: expected {want!r}, got {got!r}")

    deadline = time.time() + 20
    spans = []
    while time.time() < deadline:
        spans = get(args.api, "/api/v1/spans", service=service, limit=100)["spans"]
        if len(spans) >= 4:
            break
        time.sleep(0.2)
    llm_spans = [s for s in spans if s.get("llm", {}).get("kind") == "llm"]
    expect("LLM spans", len(llm_spans), 2)
    # Cached tokens inside input, reasoning inside output, each priced at its
    # own rate, never twice. The official instrumentation reports neither
    # (at the version pinned), so its call is priced as all fresh input.
    cached = 0 if which == "otel" else 1000
    reasoning = 0 if which == "otel" else 120
    want_cost = ((1200 - cached) * INPUT + cached * CACHE_READ + (300 - reasoning) * OUTPUT
                 + reasoning * REASONING) / 1e6
    for s in llm_spans:
        llm = s["llm"]
        expect("llm.model", llm["model"], "gpt-4o-2024-08-06")
        expect("llm.provider", llm["provider"], "openai")
        expect("llm.operation", llm["operation"], "chat")
        expect("llm.input_tokens", llm["input_tokens"], 1200)
        expect("llm.output_tokens", llm["output_tokens"], 300)
        expect("llm.cache_read_tokens", llm["cache_read_tokens"], cached or None)
        expect("llm.reasoning_tokens", llm["reasoning_tokens"], reasoning or None)
        expect("llm.cost_source", llm["cost_source"], "derived")
        expect_close("llm.cost_usd", llm["cost_usd"], want_cost)
        if which == "openinference":
            expect("llm.session_id", llm["session_id"], session)
    tool_spans = [s for s in spans if s.get("llm", {}).get("kind") == "tool"]
    expect("tool spans", [s["llm"]["tool_name"] for s in tool_spans], ["get_weather"])

    usage = get(args.api, "/api/v1/llm/usage", group_by="service")
    mine = [g for g in usage["groups"] if g["key"] == service]
    if len(mine) != 1:
        problems.append(f"usage by service: no group {service}: {usage['groups']}")
    else:
        g = mine[0]
        expect("usage.calls", g["calls"], 2)
        expect("usage.input_tokens", g["input_tokens"], 2400)
        expect("usage.cache_read_tokens", g["cache_read_tokens"], 2 * cached)
        expect("usage.reasoning_tokens", g["reasoning_tokens"], 2 * reasoning)
        expect("usage.unpriced_calls", g["unpriced_calls"], 0)
        expect_close("usage.cost_usd", g["cost_usd"], 2 * want_cost)
    tools_list = get(args.api, "/api/v1/llm/tools")["tools"]
    if not any(t["tool"] == "get_weather" and t["calls"] >= 1 for t in tools_list):
        problems.append(f"tools: get_weather missing: {tools_list}")

    listed = [s for s in get(args.api, "/api/v1/sessions", limit=1000)["sessions"] if s["session_id"] == session]
    if len(listed) != 1:
        problems.append(f"sessions: {session} not listed once")
    else:
        s = listed[0]
        expect("session.traces", s["traces"], 1)
        expect("session.spans", s["spans"], 4)
        expect("session.llm_calls", s["llm_calls"], 2)
        expect("session.input_tokens", s["input_tokens"], 2400)
        expect("session.models", s["models"], ["gpt-4o-2024-08-06"])
        expect_close("session.cost_usd", s["cost_usd"], 2 * want_cost)
    detail = get(args.api, f"/api/v1/sessions/{urllib.parse.quote(session)}", payloads="inline")
    kinds = [t["kind"] for t in detail["turns"]]
    expect("session turns", kinds, ["llm", "tool", "llm"])
    if kinds == ["llm", "tool", "llm"]:
        first_input = json.dumps(detail["turns"][0]["messages"]["input"])
        if "Weather in Paris?" not in first_input:
            problems.append(f"session turn 1 input lacks the user message: {first_input[:300]}")
        last_output = json.dumps(detail["turns"][2]["messages"]["output"])
        if "sunny in Paris" not in last_output:
            problems.append(f"session turn 3 output lacks the answer: {last_output[:300]}")
        tool = detail["turns"][1]["tool"]
        expect("tool.name", tool["name"], "get_weather")
        if "Paris" not in json.dumps(tool["arguments"]):
            problems.append(f"tool arguments: {tool['arguments']!r}")

    if problems:
        print(f"{which}: {len(problems)} mismatches", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        print(json.dumps(spans, indent=1)[:6000], file=sys.stderr)
        sys.exit(1)
    print(f"{which}: 2 LLM calls, 1 tool call, session {session}: model, tokens, cost and messages as sent")


if __name__ == "__main__":
    main()
