// Fixture telemetry for the web UI's browser tests and screenshots, sent
// over OTLP/HTTP JSON like any SDK would: an hour of a small shop (frontend
// → checkout → inventory, payments → postgres) whose payments start failing
// ten minutes ago, logs linked to their spans, metrics (a gauge, a counter,
// a histogram), LLM sessions with tool calls, and a span and a log line
// whose text is HTML that must never run.

export const XSS = '<img src=x onerror=alert(1)>';
export const SESSION = 'sess-refund-7f3a';

// A fixed-seed generator: the same fixture every run.
function rng(seed) {
  let s = seed >>> 0;
  return () => {
    s = (s * 1664525 + 1013904223) >>> 0;
    return s / 2 ** 32;
  };
}

const hex = (r, n) => Array.from({ length: n }, () => Math.floor(r() * 16).toString(16)).join('');
const str = (v) => ({ stringValue: String(v) });
const attrs = (o) => Object.entries(o).map(([key, v]) => ({
  key,
  value: typeof v === 'number' ? (Number.isInteger(v) ? { intValue: String(v) } : { doubleValue: v }) : typeof v === 'boolean' ? { boolValue: v } : str(v),
}));
const resource = (service) => ({ attributes: attrs({ 'service.name': service, 'host.name': `${service}-1`, 'deployment.environment': 'prod' }) });
const ns = (ms) => String(BigInt(Math.round(ms)) * 1000000n);

const KIND = { internal: 1, server: 2, client: 3 };

export function build(nowMs = Date.now()) {
  const r = rng(20);
  const spans = []; // [service, span]
  const logs = []; // [service, record]
  const span = (service, traceId, parent, name, kind, startMs, durMs, extra = {}) => {
    const id = hex(r, 16);
    spans.push([service, {
      traceId, spanId: id, parentSpanId: parent || '', name, kind: KIND[kind],
      startTimeUnixNano: ns(startMs), endTimeUnixNano: ns(startMs + durMs),
      attributes: attrs(extra.attributes || {}), events: extra.events || [],
      status: extra.error ? { code: 2, message: extra.error } : { code: 1 },
    }]);
    return id;
  };
  const log = (service, timeMs, sev, text, body, traceId, spanId, a = {}) => logs.push([service, {
    timeUnixNano: ns(timeMs), observedTimeUnixNano: ns(timeMs), severityNumber: sev, severityText: text,
    body: str(body), traceId: traceId || '', spanId: spanId || '', attributes: attrs(a),
  }]);

  // An hour of checkouts, six a minute; payments fail in the last ten.
  for (let minute = 60; minute >= 1; minute--) {
    for (let k = 0; k < 6; k++) {
      const t = nowMs - minute * 60000 + k * 9000 + r() * 3000;
      const tid = hex(r, 32);
      const failing = minute <= 10 && k % 2 === 0;
      const chargeMs = failing ? 900 + r() * 400 : 40 + r() * 30;
      const total = 30 + chargeMs + 60;
      const root = span('frontend', tid, null, 'GET /checkout', 'server', t, total, { attributes: { 'http.request.method': 'GET', 'http.route': '/checkout', 'http.response.status_code': failing ? 502 : 200 }, error: failing ? 'HTTP 502' : null });
      const order = span('checkout', tid, root, 'POST /orders', 'server', t + 5, total - 10, { attributes: { 'http.route': '/orders', 'order.items': 1 + Math.floor(r() * 4) }, error: failing ? 'payment failed' : null });
      const inv = span('inventory', tid, order, 'reserve', 'internal', t + 8, 20, { attributes: { 'inventory.sku': `sku-${Math.floor(r() * 50)}` } });
      span('postgres', tid, inv, 'UPDATE stock', 'client', t + 10, 8 + r() * 5, { attributes: { 'db.system': 'postgresql', 'db.statement': 'UPDATE stock SET n = n - $1 WHERE sku = $2' } });
      const pay = span('payments', tid, order, 'POST /charge', 'server', t + 30, chargeMs, {
        attributes: { 'http.route': '/charge', 'payment.provider': failing ? 'acme-pay-eu' : 'acme-pay', 'http.response.status_code': failing ? 504 : 200 },
        error: failing ? 'card processor timeout after 900ms' : null,
        events: failing ? [{ name: 'retry', timeUnixNano: ns(t + 30 + chargeMs / 2), attributes: attrs({ attempt: 2 }) }] : [],
      });
      span('postgres', tid, pay, 'INSERT payments', 'client', t + 32 + chargeMs - 12, 6, { attributes: { 'db.system': 'postgresql' } });
      log('checkout', t + 6, 9, 'INFO', `order placed for trace ${tid.slice(0, 8)}`, tid, order, { 'order.items': 2 });
      if (failing) log('payments', t + 30 + chargeMs, 17, 'ERROR', 'charge failed: card processor timeout after 900ms', tid, pay, { 'payment.provider': 'acme-pay-eu' });
      else if (k === 3) log('payments', t + 35, 13, 'WARN', 'charge slow: retrying idempotency check', tid, pay);
    }
  }
  // Text that is HTML: shown as text, never run.
  const xt = hex(r, 32);
  const xr = span('frontend', xt, null, XSS, 'server', nowMs - 120000, 42, { attributes: { 'note': XSS } });
  log('frontend', nowMs - 119990, 13, 'WARN', `rendered ${XSS}`, xt, xr);

  // LLM sessions: a model call, a tool call, a model call.
  const sessions = [[SESSION, 'refund order 1042'], ['sess-shipping-2b19', 'where is my parcel'], ['sess-faq-93c0', 'opening hours']];
  sessions.forEach(([sid, ask], i) => {
    const t = nowMs - (40 - i * 12) * 60000;
    const tid = hex(r, 32);
    const agent = span('assistant', tid, null, 'invoke_agent support', 'internal', t, 5200, { attributes: { 'gen_ai.operation.name': 'invoke_agent', 'gen_ai.agent.name': 'support', 'gen_ai.conversation.id': sid } });
    const llm = (name, startMs, durMs, input, output, inTok, outTok, model) => span('assistant', tid, agent, name, 'client', startMs, durMs, {
      attributes: {
        'gen_ai.operation.name': 'chat', 'gen_ai.provider.name': model.startsWith('claude') ? 'anthropic' : 'openai', 'gen_ai.request.model': model,
        'gen_ai.response.model': model, 'gen_ai.usage.input_tokens': inTok, 'gen_ai.usage.output_tokens': outTok, 'gen_ai.conversation.id': sid,
        'gen_ai.input.messages': JSON.stringify(input), 'gen_ai.output.messages': JSON.stringify(output),
      },
    });
    const model = i === 2 ? 'claude-sonnet-4' : 'gpt-4o';
    llm(`chat ${model}`, t + 50, 1800, [{ role: 'system', parts: [{ type: 'text', content: 'You are the shop\'s support agent.' }] }, { role: 'user', parts: [{ type: 'text', content: ask }] }],
      [{ role: 'assistant', parts: [{ type: 'tool_call', id: 'call_1', name: 'search_orders', arguments: { query: ask } }], finish_reason: 'tool_call' }], 820 + i * 40, 64, model);
    span('assistant', tid, agent, 'execute_tool search_orders', 'internal', t + 1900, 350, {
      attributes: { 'gen_ai.operation.name': 'execute_tool', 'gen_ai.tool.name': 'search_orders', 'gen_ai.tool.call.id': 'call_1', 'gen_ai.conversation.id': sid,
        'gen_ai.tool.call.arguments': JSON.stringify({ query: ask }), 'gen_ai.tool.call.result': JSON.stringify({ orders: [{ id: 1042, status: 'delivered' }] }) },
    });
    llm(`chat ${model}`, t + 2300, 2600, [{ role: 'user', parts: [{ type: 'text', content: ask }] }, { role: 'tool', parts: [{ type: 'tool_call_response', id: 'call_1', response: { orders: [{ id: 1042 }] } }] }],
      [{ role: 'assistant', parts: [{ type: 'text', content: 'Order 1042 was delivered on Tuesday; I have started the refund.' }], finish_reason: 'stop' }], 1460 + i * 50, 210, model);
  });

  // Metrics every minute: a gauge, a cumulative counter, a histogram (ms).
  const metrics = [];
  const start = nowMs - 61 * 60000;
  let counters = { '/checkout': 0, '/charge': 0 };
  const hist = { '/charge': [0, 0, 0, 0, 0, 0] };
  const bounds = [25, 50, 100, 250, 1000];
  for (let minute = 60; minute >= 1; minute--) {
    const t = nowMs - minute * 60000 + 30000;
    const bad = minute <= 10;
    counters['/checkout'] += 6;
    counters['/charge'] += 6;
    const h = hist['/charge'];
    if (bad) { h[2] += 3; h[5] += 3; } else { h[1] += 4; h[2] += 2; }
    for (const svc of ['checkout', 'payments']) {
      metrics.push([svc, { name: 'queue.depth', unit: '{jobs}', gauge: { dataPoints: [{ timeUnixNano: ns(t), asDouble: (svc === 'payments' && bad ? 40 : 4) + r() * 5, attributes: attrs({ queue: 'default' }) }] } }]);
    }
    metrics.push(['frontend', { name: 'http.server.requests', unit: '{request}', sum: { aggregationTemporality: 2, isMonotonic: true, dataPoints: Object.entries(counters).map(([route, v]) => ({ startTimeUnixNano: ns(start), timeUnixNano: ns(t), asInt: String(v), attributes: attrs({ 'http.route': route }) })) } }]);
    metrics.push(['payments', { name: 'http.server.duration', unit: 'ms', histogram: { aggregationTemporality: 2, dataPoints: [{ startTimeUnixNano: ns(start), timeUnixNano: ns(t), count: String(h.reduce((a, b) => a + b, 0)), sum: h[1] * 40 + h[2] * 80 + h[5] * 1100, bucketCounts: h.map(String), explicitBounds: bounds, attributes: attrs({ 'http.route': '/charge' }) }] } }]);
  }
  return { spans, logs, metrics };
}

function group(list) {
  const by = new Map();
  for (const [svc, rec] of list) {
    if (!by.has(svc)) by.set(svc, []);
    by.get(svc).push(rec);
  }
  return [...by];
}

// The ingest token sent with every request (a server with tokens).
let ingestToken = null;

export function useIngestToken(token) {
  ingestToken = token || null;
}

async function post(url, body) {
  const headers = { 'content-type': 'application/json' };
  if (ingestToken) headers.authorization = `Bearer ${ingestToken}`;
  const r = await fetch(url, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await r.text();
  if (!r.ok) throw new Error(`POST ${url}: ${r.status} ${text}`);
  const v = text ? JSON.parse(text) : {};
  if (v.partialSuccess && (v.partialSuccess.rejectedSpans > 0 || v.partialSuccess.rejectedLogRecords > 0 || v.partialSuccess.rejectedDataPoints > 0)) {
    throw new Error(`POST ${url}: rejected ${JSON.stringify(v.partialSuccess)}`);
  }
}

/** Sends the fixture to an OTLP/HTTP endpoint (e.g. http://127.0.0.1:4318). */
export async function load(otlp, nowMs = Date.now()) {
  const f = build(nowMs);
  await post(`${otlp}/v1/traces`, { resourceSpans: group(f.spans).map(([svc, spans]) => ({ resource: resource(svc), scopeSpans: [{ scope: { name: 'shop' }, spans }] })) });
  await post(`${otlp}/v1/logs`, { resourceLogs: group(f.logs).map(([svc, logRecords]) => ({ resource: resource(svc), scopeLogs: [{ scope: { name: 'shop' }, logRecords }] })) });
  await post(`${otlp}/v1/metrics`, { resourceMetrics: group(f.metrics).map(([svc, metrics]) => ({ resource: resource(svc), scopeMetrics: [{ scope: { name: 'shop' }, metrics }] })) });
  return { spans: f.spans.length, logs: f.logs.length, metrics: f.metrics.length };
}

/** A log line sent now, for the live tail. */
export async function sendLog(otlp, service, body) {
  await post(`${otlp}/v1/logs`, { resourceLogs: [{ resource: resource(service), scopeLogs: [{ scope: { name: 'shop' }, logRecords: [{ timeUnixNano: ns(Date.now()), severityNumber: 9, severityText: 'INFO', body: str(body) }] }] }] });
}
