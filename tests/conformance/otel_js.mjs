#!/usr/bin/env node
// Conformance: the OpenTelemetry JS SDK talks OTLP/HTTP **JSON** to a running
// skein.
//
// Exports traces, logs and metrics with the SDK's own OTLP/HTTP JSON
// exporters, then reads every record back through skein's API and checks it
// against what the SDK put on the wire (the exact JSON request, re-made with
// the exporter's serializer from what it exported), plus hand-computed
// expectations:
//
// - traces: the tree view (/api/v1/traces/{id}), span search (/api/v1/spans)
//   and the OTLP/JSON view (?format=otlp), compared field by field with the
//   sent JSON after proto3-JSON normalisation (defaults omitted or not, 64-bit
//   integers as strings or numbers);
// - logs: /api/v1/logs; metrics: /api/v1/metrics.
//
// Usage: node otel_js.mjs --http http://127.0.0.1:4318 --api http://127.0.0.1:7700
// (or env SKEIN_OTLP_HTTP, SKEIN_API; --grpc is accepted and ignored).
// Exits non-zero, listing every mismatch (field, expected, got).

import { randomUUID } from 'node:crypto';

let api, logsApi, sdkTrace, traceExporter, logsExporter, sdkLogs, resources, sdkMetrics, metricsExporter, transformer;
try {
  api = await import('@opentelemetry/api');
  logsApi = await import('@opentelemetry/api-logs');
  sdkTrace = await import('@opentelemetry/sdk-trace-base');
  traceExporter = await import('@opentelemetry/exporter-trace-otlp-http');
  sdkLogs = await import('@opentelemetry/sdk-logs');
  logsExporter = await import('@opentelemetry/exporter-logs-otlp-http');
  resources = await import('@opentelemetry/resources');
  sdkMetrics = await import('@opentelemetry/sdk-metrics');
  metricsExporter = await import('@opentelemetry/exporter-metrics-otlp-http');
  transformer = await import('@opentelemetry/otlp-transformer');
} catch (e) {
  console.error(`MISSING CLIENT: the OpenTelemetry JS SDK is not installed (${e.message}); ` +
    'run: npm ci --prefix tests/conformance');
  process.exit(3);
}
const { trace, ROOT_CONTEXT, SpanKind, SpanStatusCode, ValueType } = api;
const { SeverityNumber } = logsApi;

// ------------------------------------------------------------ arguments

function parseArgs(argv) {
  const out = { grpc: process.env.SKEIN_OTLP_GRPC, http: process.env.SKEIN_OTLP_HTTP, api: process.env.SKEIN_API };
  for (let i = 0; i < argv.length; i++) {
    const m = /^--(grpc|http|api)(?:=(.*))?$/.exec(argv[i]);
    if (!m) throw new Error(`unknown argument ${argv[i]}`);
    out[m[1]] = m[2] ?? argv[++i];
  }
  if (!out.http || !out.api) {
    console.error('usage: otel_js.mjs --http URL --api URL (or SKEIN_OTLP_HTTP, SKEIN_API)');
    process.exit(2);
  }
  out.http = out.http.replace(/\/+$/, '');
  out.api = out.api.replace(/\/+$/, '');
  return out;
}

// ------------------------------------------------------------ lossless JSON

// skein's plain views write nanosecond times as JSON numbers (~1.8e18), past
// 2^53: JSON.parse would round them. This parser keeps integers that are not
// safe as BigInt.
function parseJson(text) {
  let i = 0;
  const ws = () => { while (i < text.length && ' \t\n\r'.includes(text[i])) i++; };
  const fail = (what) => { throw new Error(`bad JSON at ${i}: ${what}: ${text.slice(i, i + 40)}`); };
  function value() {
    ws();
    const ch = text[i];
    if (ch === '{') {
      i++; const o = {}; ws();
      if (text[i] === '}') { i++; return o; }
      for (;;) {
        ws(); if (text[i] !== '"') fail('expected key');
        const k = str(); ws(); if (text[i++] !== ':') fail('expected :');
        o[k] = value(); ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === '}') { i++; return o; }
        fail('expected , or }');
      }
    }
    if (ch === '[') {
      i++; const a = []; ws();
      if (text[i] === ']') { i++; return a; }
      for (;;) {
        a.push(value()); ws();
        if (text[i] === ',') { i++; continue; }
        if (text[i] === ']') { i++; return a; }
        fail('expected , or ]');
      }
    }
    if (ch === '"') return str();
    for (const [lit, v] of [['true', true], ['false', false], ['null', null]]) {
      if (text.startsWith(lit, i)) { i += lit.length; return v; }
    }
    const m = /^-?\d+(\.\d+)?([eE][+-]?\d+)?/.exec(text.slice(i, i + 400));
    if (!m) fail('unexpected token');
    i += m[0].length;
    if (m[1] === undefined && m[2] === undefined) {
      const n = Number(m[0]);
      return Number.isSafeInteger(n) ? n : BigInt(m[0]);
    }
    return Number(m[0]);
  }
  function str() {
    const start = i; i++;
    while (text[i] !== '"') { if (text[i] === '\\') i++; i++; if (i >= text.length) fail('open string'); }
    i++;
    return JSON.parse(text.slice(start, i));
  }
  const v = value(); ws();
  if (i !== text.length) fail('trailing data');
  return v;
}

// ------------------------------------------------------------ checking

const failures = [];
let checks = 0;
const MISSING = Symbol('missing');

const show = (v) => {
  if (v === MISSING) return '<missing>';
  const s = JSON.stringify(v, (_k, x) => (typeof x === 'bigint' ? `${x}n` : x));
  return s === undefined ? String(v) : (s.length > 300 ? `${s.slice(0, 300)}…` : s);
};
const fail = (where, expected, got) => failures.push(`${where}: expected ${show(expected)}, got ${show(got)}`);
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// Integers compare by value whether Number or BigInt; otherwise strictly.
function sameScalar(a, b) {
  const isInt = (x) => typeof x === 'bigint' || (typeof x === 'number' && Number.isInteger(x));
  if (isInt(a) && isInt(b)) return BigInt(a) === BigInt(b);
  if (typeof a === 'number' && typeof b === 'number' && Number.isNaN(a) && Number.isNaN(b)) return true;
  return a === b;
}

function* diff(e, g, path) {
  if (isObj(e) && isObj(g)) {
    for (const k of Object.keys(e)) {
      if (!(k in g)) yield [`${path}.${k}`, e[k], MISSING];
      else yield* diff(e[k], g[k], `${path}.${k}`);
    }
    for (const k of Object.keys(g)) if (!(k in e)) yield [`${path}.${k}`, MISSING, g[k]];
  } else if (Array.isArray(e) && Array.isArray(g)) {
    if (e.length !== g.length) yield [`${path} (length ${e.length} vs ${g.length})`, e, g];
    else for (let i = 0; i < e.length; i++) yield* diff(e[i], g[i], `${path}[${i}]`);
  } else if (!sameScalar(e, g)) {
    yield [path, e, g];
  }
}

function eq(where, expected, got) {
  checks++;
  for (const [p, e, g] of diff(expected, got, where)) fail(p, e, g);
}

function ok(where, cond, detail) {
  checks++;
  if (!cond) failures.push(`${where}: ${detail ?? 'check failed'}`);
}

// ------------------------------------------------------------ the API

async function apiGet(base, path, query) {
  const url = `${base}${path}${query ? `?${new URLSearchParams(query)}` : ''}`;
  const r = await fetch(url);
  const text = await r.text();
  if (!r.ok) throw new Error(`GET ${url}: HTTP ${r.status}: ${text.slice(0, 500)}`);
  return parseJson(text);
}

// Records are visible once acknowledged; polling briefly keeps the test from
// depending on the instant.
async function poll(fetchIt, ready, timeoutMs = 10_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const r = await fetchIt();
    if (ready(r) || Date.now() > deadline) return r;
    await new Promise((res) => setTimeout(res, 100));
  }
}

// ------------------------------------------------------------ tees

// Wraps an exporter: remembers what it exported and the result codes.
function tee(exporter) {
  const t = { sent: [], results: [] };
  const inner = exporter.export.bind(exporter);
  exporter.export = (items, cb) => inner(items, (res) => {
    t.sent.push(items);
    t.results.push(res);
    cb(res);
  });
  return t;
}

// ------------------------------------------------------------ OTLP/JSON

const INT64 = new Set(['timeUnixNano', 'startTimeUnixNano', 'endTimeUnixNano', 'observedTimeUnixNano',
  'intValue', 'asInt', 'count', 'bucketCounts']);
const ONEOF = new Set(['stringValue', 'boolValue', 'intValue', 'doubleValue', 'arrayValue', 'kvlistValue',
  'bytesValue', 'asInt', 'asDouble']);
const isDefault = (v) => v === null || v === undefined || v === 0 || v === '' || v === '0' || v === false ||
  (Array.isArray(v) && v.length === 0) || (isObj(v) && Object.keys(v).length === 0);

// proto3 JSON normalisation: fields equal to their default are dropped (a
// writer may or may not emit them), 64-bit integers become decimal strings.
function normalize(v, key) {
  if (Array.isArray(v)) return v.map((x) => normalize(x, INT64.has(key) ? key : undefined));
  if (isObj(v)) {
    const out = {};
    for (const [k, x] of Object.entries(v)) {
      const n = normalize(x, k);
      if (ONEOF.has(k) ? n === undefined : isDefault(n)) continue;
      out[k] = n;
    }
    return out;
  }
  if (INT64.has(key) && (typeof v === 'number' || typeof v === 'bigint' || typeof v === 'string') && v !== '') {
    try { return BigInt(v).toString(); } catch { return v; }
  }
  return v;
}

// Problems a strict proto3 JSON reader would have with skein's output.
function rawProblems(v, path, out) {
  if (Array.isArray(v)) v.forEach((x, i) => rawProblems(x, `${path}[${i}]`, out));
  else if (isObj(v)) {
    for (const [k, x] of Object.entries(v)) {
      if (INT64.has(k) && (typeof x === 'bigint' || (typeof x === 'number' && !Number.isSafeInteger(x)))) {
        out.push(`${path}.${k}: ${x} is a JSON number past 2^53 (proto3 JSON: a decimal string)`);
      }
      if (k === 'doubleValue' && x === null) out.push(`${path}.${k}: null (a double that reads back as no value)`);
      if (['traceId', 'spanId', 'parentSpanId'].includes(k) && typeof x === 'string' && !/^([0-9a-f]{16}|[0-9a-f]{32}|)$/.test(x)) {
        out.push(`${path}.${k}: ${show(x)} is not lowercase hex`);
      }
      rawProblems(x, `${path}.${k}`, out);
    }
  }
}

// spanId → {resource, resourceSchemaUrl, scope, scopeSchemaUrl, span}, normalised.
function flattenSpans(req) {
  const out = {};
  for (const rs of req.resourceSpans ?? []) {
    for (const ss of rs.scopeSpans ?? []) {
      for (const sp of ss.spans ?? []) {
        out[sp.spanId] = normalize({
          resource: rs.resource ?? {}, resourceSchemaUrl: rs.schemaUrl ?? '',
          scope: ss.scope ?? {}, scopeSchemaUrl: ss.schemaUrl ?? '', span: sp,
        });
      }
    }
  }
  return out;
}

// An OTLP/JSON AnyValue as skein's plain views show it.
function plain(av) {
  if (av === undefined || av === null) return null;
  if ('stringValue' in av) return av.stringValue;
  if ('boolValue' in av) return av.boolValue;
  if ('intValue' in av) { const b = BigInt(av.intValue); return Number.isSafeInteger(Number(b)) ? Number(b) : b; }
  if ('doubleValue' in av) return av.doubleValue;
  if ('bytesValue' in av) return av.bytesValue;
  if ('arrayValue' in av) return (av.arrayValue.values ?? []).map(plain);
  if ('kvlistValue' in av) return plainAttrs(av.kvlistValue.values);
  return null;
}
const plainAttrs = (kvs) => Object.fromEntries((kvs ?? []).map((kv) => [kv.key, plain(kv.value)]));
const nanos = (s) => (s === undefined ? 0n : BigInt(s));
const KINDS = ['unspecified', 'internal', 'server', 'client', 'producer', 'consumer'];
const STATUS = ['unset', 'ok', 'error'];

// ------------------------------------------------------------ times

// HrTimes with odd nanoseconds, relative to a recent second.
const T0_SEC = Math.floor(Date.now() / 1000) - 120;
const at = (offNs) => [T0_SEC + Math.floor(offNs / 1e9), offNs % 1e9];
const atNs = (offNs) => BigInt(T0_SEC) * 1_000_000_000n + BigInt(offNs);

// ------------------------------------------------------------ traces

// No NaN/Infinity (JSON.stringify writes null) and no huge doubles: the JS SDK
// sends every integral number as intValue, so 1.8e308 goes out as an int64
// that is out of range (skein then answers 400 for the whole request).
const SPAN_ATTRS = {
  'attr.str': 'hello', 'attr.str.empty': '', 'attr.str.unicode': 'naïve ☃ 🚀 "quoted" \\ \n',
  'attr.bool.true': true, 'attr.bool.false': false,
  'attr.int': 42, 'attr.int.zero': 0, 'attr.int.neg': -7, 'attr.int.maxsafe': Number.MAX_SAFE_INTEGER,
  'attr.float': 3.14159, 'attr.float.neg': -0.5, 'attr.float.tiny': 5e-324, 'attr.float.big': 123456789.125,
  'attr.arr.str': ['a', '', 'ünï'], 'attr.arr.bool': [true, false, true], 'attr.arr.int': [1, -2, 3],
  'attr.arr.float': [0.1, -2.5, 3.25],
};

function emitTraces(provider) {
  const tracer = provider.getTracer('conformance.js.tracer', '1.2.3', { schemaUrl: 'https://opentelemetry.io/schemas/1.26.0' });
  const root = tracer.startSpan('GET /checkout', { kind: SpanKind.SERVER, attributes: SPAN_ATTRS, startTime: at(1) }, ROOT_CONTEXT);
  root.addEvent('checkout.started', { 'cart.items': 3, 'cart.total': 99.5, vip: true, coupons: ['A', 'B'] }, at(1_001));
  root.addEvent('no.attributes', at(2_003));
  const inRoot = trace.setSpan(ROOT_CONTEXT, root);

  const db = tracer.startSpan('SELECT orders', { kind: SpanKind.CLIENT, attributes: { 'db.system': 'postgresql', 'db.rows': 0, 'db.timeout.s': 1.5 }, startTime: at(1_000_003) }, inRoot);
  db.addEvent('retry', { attempt: 2, 'backoff.ms': 12.5, fatal: false, codes: [500, 503] }, at(2_000_005));
  db.setStatus({ code: SpanStatusCode.ERROR, message: 'connection reset by peer' });
  db.end(at(5_000_011));

  const work = tracer.startSpan('compute total', { kind: SpanKind.INTERNAL, attributes: { items: [1, 2, 3], weights: [0.5, 0.25] }, startTime: at(6_000_013) }, inRoot);
  work.end(at(7_000_017));

  const prod = tracer.startSpan('orders publish', { kind: SpanKind.PRODUCER, attributes: { 'messaging.system': 'kafka', 'messaging.destination.name': 'orders' }, startTime: at(8_000_019) }, inRoot);
  prod.setStatus({ code: SpanStatusCode.OK });
  prod.end(at(9_000_023));
  root.setStatus({ code: SpanStatusCode.OK });
  root.end(at(50_000_029));

  const consumer = tracer.startSpan('orders process', {
    kind: SpanKind.CONSUMER,
    links: [
      { context: prod.spanContext(), attributes: { 'link.reason': 'follows_from', 'link.n': 1, 'link.ok': true, 'link.w': 0.5, 'link.tags': ['x', 'y'] } },
      { context: db.spanContext() },
    ],
    attributes: { 'messaging.batch.message_count': 1 },
    startTime: at(60_000_031),
  }, ROOT_CONTEXT);
  consumer.setStatus({ code: SpanStatusCode.ERROR, message: 'poison message: ünïcode' });
  consumer.end(at(61_000_037));
  return { root, db, work, prod, consumer };
}

// The plain view of a span, from the OTLP/JSON the SDK sent.
function expectedSpanView(f) {
  const s = f.span;
  const start = nanos(s.startTimeUnixNano);
  const end = nanos(s.endTimeUnixNano);
  const res = plainAttrs(f.resource.attributes);
  return {
    trace_id: s.traceId, span_id: s.spanId, parent_span_id: s.parentSpanId || null,
    name: s.name, kind: KINDS[s.kind ?? 0],
    start_time_unix_nano: start, end_time_unix_nano: end, duration_ns: end - start,
    status: { code: STATUS[s.status?.code ?? 0], message: s.status?.message || null },
    attributes: plainAttrs(s.attributes),
    events: (s.events ?? []).map((e) => ({ name: e.name, time_unix_nano: nanos(e.timeUnixNano), attributes: plainAttrs(e.attributes) })),
    links: (s.links ?? []).map((l) => ({ trace_id: l.traceId, span_id: l.spanId, attributes: plainAttrs(l.attributes) })),
    scope: { name: f.scope.name, version: f.scope.version || null },
    resource: res, service: res['service.name'],
  };
}

function checkSpanView(where, exp, got) {
  for (const [k, v] of Object.entries(exp)) eq(`${where}.${k}`, v, k in got ? got[k] : MISSING);
}

async function checkTraces(base, spans, t) {
  ok('traces export', t.results.length > 0 && t.results.every((r) => r.code === 0), `exporter results ${show(t.results.map((r) => [r.code, r.error?.message]))}`);
  const sentItems = t.sent.flat();
  eq('traces exported span count', 5, sentItems.length);
  const sentJson = parseJson(new TextDecoder().decode(transformer.JsonTraceSerializer.serializeRequest(sentItems)));
  const sent = flattenSpans(sentJson);
  // Hand-made expectations the SDK could get wrong on its own.
  const sid = (s) => s.spanContext().spanId;
  eq('root start time sent', atNs(1), nanos(sent[sid(spans.root)]?.span.startTimeUnixNano));
  eq('db parent sent', sid(spans.root), sent[sid(spans.db)]?.span.parentSpanId);
  const service = plainAttrs(Object.values(sent)[0].resource.attributes)['service.name'];
  const byTrace = {};
  for (const [id, f] of Object.entries(sent)) (byTrace[f.span.traceId] ??= {})[id] = f;
  for (const [tid, group] of Object.entries(byTrace)) {
    const where = `GET /api/v1/traces/${tid}`;
    const n = Object.keys(group).length;
    const view = await poll(() => apiGet(base, `/api/v1/traces/${tid}`), (v) => Number(v.span_count) === n);
    eq(`${where}.trace_id`, tid, view.trace_id);
    eq(`${where}.span_count`, n, view.span_count);
    eq(`${where}.error_count`, Object.values(group).filter((f) => f.span.status?.code === 2).length, view.error_count);
    eq(`${where}.services`, [service], view.services);
    const starts = Object.values(group).map((f) => nanos(f.span.startTimeUnixNano));
    const ends = Object.values(group).map((f) => nanos(f.span.endTimeUnixNano));
    eq(`${where}.start_time_unix_nano`, starts.reduce((a, b) => (a < b ? a : b)), view.start_time_unix_nano);
    eq(`${where}.end_time_unix_nano`, ends.reduce((a, b) => (a > b ? a : b)), view.end_time_unix_nano);
    const got = Object.fromEntries((view.spans ?? []).map((s) => [s.span_id, s]));
    for (const [id, f] of Object.entries(group)) {
      const w = `${where} span ${JSON.stringify(f.span.name)} (${id})`;
      if (!got[id]) { fail(w, 'present', MISSING); continue; }
      checkSpanView(w, expectedSpanView(f), got[id]);
      eq(`${w}.depth`, f.span.parentSpanId ? 1 : 0, got[id].depth);
    }
    // OTLP/JSON read-back against the request the exporter sent.
    const ow = `${where}?format=otlp`;
    const raw = await apiGet(base, `/api/v1/traces/${tid}`, { format: 'otlp' });
    const problems = [];
    rawProblems(raw, '$', problems);
    for (const p of problems) failures.push(`${ow}: ${p}`);
    const back = flattenSpans(raw);
    eq(`${ow} span ids`, Object.keys(group).sort(), Object.keys(back).sort());
    for (const [id, f] of Object.entries(group)) if (back[id]) eq(`${ow} span ${id}`, f, back[id]);
  }
  const where = `GET /api/v1/spans?service=${service}`;
  const r = await poll(() => apiGet(base, '/api/v1/spans', { service, limit: 100 }), (v) => (v.spans ?? []).length >= 5);
  const got = Object.fromEntries((r.spans ?? []).map((s) => [s.span_id, s]));
  eq(`${where} span ids`, Object.keys(sent).sort(), Object.keys(got).sort());
  for (const [id, f] of Object.entries(sent)) if (got[id]) checkSpanView(`${where} span ${JSON.stringify(f.span.name)}`, expectedSpanView(f), got[id]);
}

// ------------------------------------------------------------ logs

function emitLogs(provider, spans) {
  const logger = provider.getLogger('conformance.js.logger', '4.5.6', {
    schemaUrl: 'https://opentelemetry.io/schemas/1.26.0', attributes: { 'scope.attr': 'logger-scope' },
  });
  logger.emit({
    timestamp: at(3_000_041), observedTimestamp: at(3_000_043), context: trace.setSpan(ROOT_CONTEXT, spans.db),
    severityNumber: SeverityNumber.ERROR, severityText: 'ERROR', body: 'query failed: connection reset by peer',
    attributes: { 'db.statement': 'SELECT * FROM orders', retry: 2, final: false, ratio: 0.25, tags: ['x', 'y'], codes: [1, 2], flags: [true, false], weights: [0.5, 1.5] },
  });
  logger.emit({
    timestamp: at(4_000_047), observedTimestamp: at(4_000_049), context: trace.setSpan(ROOT_CONTEXT, spans.root),
    severityNumber: SeverityNumber.INFO, severityText: 'INFO', eventName: 'order.placed',
    body: { msg: 'order placed', order: { id: 123, items: ['a', 'b'], total: 9.99, paid: true } },
    attributes: { 'order.id': 123 },
  });
  logger.emit({
    timestamp: at(5_000_053), observedTimestamp: at(5_000_059), context: ROOT_CONTEXT,
    severityNumber: SeverityNumber.WARN, severityText: 'WARN', body: 'disk almost full', attributes: { 'disk.free.ratio': 0.05 },
  });
  logger.emit({
    timestamp: at(6_000_061), observedTimestamp: at(6_000_067), context: ROOT_CONTEXT,
    severityNumber: SeverityNumber.DEBUG2, severityText: 'debug-two', body: ['list', 1, 2.5, true],
  });
  logger.emit({
    timestamp: at(7_000_071), observedTimestamp: at(7_000_073), context: ROOT_CONTEXT,
    severityNumber: SeverityNumber.FATAL, severityText: 'FATAL', body: new Uint8Array([0, 1, 255]),
  });
  return 5;
}

async function checkLogs(base, spans, t, n) {
  ok('logs export', t.results.length > 0 && t.results.every((r) => r.code === 0), `exporter results ${show(t.results.map((r) => [r.code, r.error?.message]))}`);
  const sentJson = parseJson(new TextDecoder().decode(transformer.JsonLogsSerializer.serializeRequest(t.sent.flat())));
  const sent = [];
  for (const rl of sentJson.resourceLogs ?? []) {
    for (const sl of rl.scopeLogs ?? []) for (const l of sl.logRecords ?? []) sent.push({ res: rl.resource, scope: sl.scope, l });
  }
  eq('logs exported count', n, sent.length);
  // Hand-made: correlation ids and times the SDK should have sent.
  const first = sent.find((s) => s.l.severityNumber === 17);
  eq('error log trace id sent', spans.db.spanContext().traceId, first?.l.traceId);
  eq('error log time sent', atNs(3_000_041), nanos(first?.l.timeUnixNano));
  const service = plainAttrs(sent[0].res.attributes)['service.name'];
  const where = `GET /api/v1/logs?service=${service}`;
  const r = await poll(() => apiGet(base, '/api/v1/logs', { service, limit: 100 }), (v) => (v.logs ?? []).length >= n);
  const logs = r.logs ?? [];
  eq(`${where} count`, n, logs.length);
  const got = new Map(logs.map((l) => [BigInt(l.time_unix_nano).toString(), l]));
  for (const { res, scope, l } of sent) {
    const w = `${where} log ${show(plain(l.body)).slice(0, 40)}`;
    const g = got.get(nanos(l.timeUnixNano).toString());
    if (!g) { fail(w, `a record at ${l.timeUnixNano}`, MISSING); continue; }
    const resource = plainAttrs(res.attributes);
    const exp = {
      time_unix_nano: nanos(l.timeUnixNano), observed_time_unix_nano: nanos(l.observedTimeUnixNano),
      severity_number: l.severityNumber, severity_text: l.severityText || null,
      body: plain(l.body), attributes: plainAttrs(l.attributes),
      trace_id: l.traceId || null, span_id: l.spanId || null, event_name: l.eventName || null,
      scope: { name: scope.name, version: scope.version || null }, resource, service: resource['service.name'],
    };
    for (const [k, v] of Object.entries(exp)) eq(`${w}.${k}`, v, k in g ? g[k] : MISSING);
  }
}

// ------------------------------------------------------------ metrics

function emitMetrics(provider) {
  const meter = provider.getMeter('conformance.js.meter', '7.8.9');
  const requests = meter.createCounter('conformance.requests', { unit: '{request}', description: 'Requests handled', valueType: ValueType.INT });
  requests.add(5, { 'http.route': '/a', 'http.status_code': 200 });
  requests.add(3, { 'http.route': '/a', 'http.status_code': 200 });
  requests.add(1, { 'http.route': '/b', 'http.status_code': 500, retry: true });
  const bytes = meter.createCounter('conformance.bytes', { unit: 'By', description: 'Bytes sent' });
  bytes.add(1.5, { peer: 'x' });
  bytes.add(2.25, { peer: 'x' });
  const depth = meter.createUpDownCounter('conformance.queue.depth', { unit: '{item}', description: 'Queue depth', valueType: ValueType.INT });
  depth.add(10, { queue: 'q1' });
  depth.add(-3, { queue: 'q1' });
  depth.add(-2, { queue: 'q2' });
  const latency = meter.createHistogram('conformance.latency', { unit: 'ms', description: 'Latency', advice: { explicitBucketBoundaries: [0, 10, 100, 1000] } });
  for (const v of [5, 15, 150, 1500, 0.5, 10]) latency.record(v, { 'http.route': '/a' });
  latency.record(0, { 'http.route': '/zero' });
  const gauge = meter.createObservableGauge('conformance.temperature', { unit: 'Cel', description: 'Room temperature' });
  gauge.addCallback((r) => {
    r.observe(21.5, { room: 'kitchen', floor: 1 });
    r.observe(-3, { room: 'cellar', floor: -1 });
  });
  const key = (name, attrs) => `${name} ${JSON.stringify(Object.entries(attrs).sort())}`;
  const bounds = [0, 10, 100, 1000];
  return {
    key,
    values: {
      [key('conformance.requests', { 'http.route': '/a', 'http.status_code': 200 })]: { value: 8 },
      [key('conformance.requests', { 'http.route': '/b', 'http.status_code': 500, retry: true })]: { value: 1 },
      [key('conformance.bytes', { peer: 'x' })]: { value: 3.75 },
      [key('conformance.queue.depth', { queue: 'q1' })]: { value: 7 },
      [key('conformance.queue.depth', { queue: 'q2' })]: { value: -2 },
      [key('conformance.latency', { 'http.route': '/a' })]: { count: 6, sum: 1680.5, min: 0.5, max: 1500, bucket_counts: [0, 3, 1, 1, 1], explicit_bounds: bounds },
      [key('conformance.latency', { 'http.route': '/zero' })]: { count: 1, sum: 0, min: 0, max: 0, bucket_counts: [1, 0, 0, 0, 0], explicit_bounds: bounds },
      [key('conformance.temperature', { room: 'kitchen', floor: 1 })]: { value: 21.5 },
      [key('conformance.temperature', { room: 'cellar', floor: -1 })]: { value: -3 },
    },
  };
}

const SHAPES = {
  'conformance.requests': { type: 'sum', unit: '{request}', description: 'Requests handled', monotonic: true, temporality: 'cumulative' },
  'conformance.bytes': { type: 'sum', unit: 'By', description: 'Bytes sent', monotonic: true, temporality: 'cumulative' },
  'conformance.queue.depth': { type: 'sum', unit: '{item}', description: 'Queue depth', monotonic: false, temporality: 'cumulative' },
  'conformance.latency': { type: 'histogram', unit: 'ms', description: 'Latency', temporality: 'cumulative' },
  'conformance.temperature': { type: 'gauge', unit: 'Cel', description: 'Room temperature' },
};

async function checkMetrics(base, t, expected) {
  ok('metrics export', t.results.length > 0 && t.results.every((r) => r.code === 0), `exporter results ${show(t.results.map((r) => [r.code, r.error?.message]))}`);
  // Every point sent, from the exact JSON requests.
  const sent = [];
  let service;
  for (const batch of t.sent) {
    const req = parseJson(new TextDecoder().decode(transformer.JsonMetricsSerializer.serializeRequest(batch)));
    for (const rm of req.resourceMetrics ?? []) {
      const resource = plainAttrs(rm.resource?.attributes);
      service = resource['service.name'];
      for (const sm of rm.scopeMetrics ?? []) {
        for (const m of sm.metrics ?? []) {
          const data = m.sum ?? m.gauge ?? m.histogram;
          for (const p of data?.dataPoints ?? []) sent.push({ m, p, resource });
        }
      }
    }
  }
  eq('metrics sent series', Object.keys(expected.values).sort(),
    [...new Set(sent.map(({ m, p }) => expected.key(m.name, plainAttrs(p.attributes))))].sort());
  for (const [name, shape] of Object.entries(SHAPES)) {
    const where = `GET /api/v1/metrics?name=${name}&service=${service}`;
    const mine = sent.filter(({ m }) => m.name === name);
    const r = await poll(() => apiGet(base, '/api/v1/metrics', { name, service, limit: 1000 }), (v) => (v.points ?? []).length >= mine.length);
    const points = r.points ?? [];
    eq(`${where} point count`, mine.length, points.length);
    const got = new Map(points.map((p) => [`${expected.key(p.name, p.attributes ?? {})} @${BigInt(p.time_unix_nano)}`, p]));
    for (const { m, p, resource } of mine) {
      const attrs = plainAttrs(p.attributes);
      const k = expected.key(m.name, attrs);
      const w = `${where} point ${JSON.stringify(attrs)} @ ${p.timeUnixNano}`;
      const g = got.get(`${k} @${nanos(p.timeUnixNano)}`);
      if (!g) { fail(w, 'present', MISSING); continue; }
      const exp = { ...shape, name: m.name, service, attributes: attrs, resource, time_unix_nano: nanos(p.timeUnixNano) };
      if (shape.type !== 'gauge') exp.start_time_unix_nano = nanos(p.startTimeUnixNano);
      Object.assign(exp, expected.values[k] ?? {});
      for (const [f, v] of Object.entries(exp)) eq(`${w}.${f}`, v, f in g ? g[f] : MISSING);
    }
  }
}

// ------------------------------------------------------------ main

const args = parseArgs(process.argv.slice(2));
const runId = randomUUID().replace(/-/g, '').slice(0, 12);
const resource = resources.resourceFromAttributes({
  'service.name': `conformance-js-http-json-${runId}`,
  'service.namespace': 'conformance',
  'service.version': '0.0.1-test',
  'deployment.environment.name': 'ci',
  'custom.str': 'kept', 'custom.int': 42, 'custom.float': 2.5, 'custom.bool': false, 'custom.list': ['a', 'b'],
});

const spanExporter = new traceExporter.OTLPTraceExporter({ url: `${args.http}/v1/traces`, timeoutMillis: 10_000 });
const spanTee = tee(spanExporter);
const tracerProvider = new sdkTrace.BasicTracerProvider({
  resource, spanProcessors: [new sdkTrace.BatchSpanProcessor(spanExporter, { scheduledDelayMillis: 3_600_000 })],
});
const logExporter = new logsExporter.OTLPLogExporter({ url: `${args.http}/v1/logs`, timeoutMillis: 10_000 });
const logTee = tee(logExporter);
const loggerProvider = new sdkLogs.LoggerProvider({
  resource, processors: [new sdkLogs.BatchLogRecordProcessor({ exporter: logExporter, scheduledDelayMillis: 3_600_000 })],
});
const metricExporter = new metricsExporter.OTLPMetricExporter({ url: `${args.http}/v1/metrics`, timeoutMillis: 10_000 });
const metricTee = tee(metricExporter);
const meterProvider = new sdkMetrics.MeterProvider({
  resource, readers: [new sdkMetrics.PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 })],
});

try {
  const spans = emitTraces(tracerProvider);
  const nLogs = emitLogs(loggerProvider, spans);
  const expectedMetrics = emitMetrics(meterProvider);
  await tracerProvider.forceFlush();
  await loggerProvider.forceFlush();
  await meterProvider.forceFlush();
  await checkTraces(args.api, spans, spanTee);
  await checkLogs(args.api, spans, logTee, nLogs);
  await checkMetrics(args.api, metricTee, expectedMetrics);
  await Promise.all([tracerProvider.shutdown(), loggerProvider.shutdown(), meterProvider.shutdown()]);
} catch (e) {
  failures.push(`error: ${e.stack ?? e}${e.data ? `\n    response: ${e.data}` : ""}`);
}

if (failures.length) {
  console.error(`FAIL: ${failures.length} mismatch(es) between what the OpenTelemetry JS SDK sent (OTLP/HTTP JSON) and what skein returned (${checks} checks):`);
  for (const f of failures) console.error(`  - ${f}`);
  process.exit(1);
}
console.log(`ok: OpenTelemetry JS SDK over OTLP/HTTP JSON: traces, logs, metrics read back identical (${checks} checks)`);
process.exit(0);
