// `/traces/{trace_id}`: the waterfall, the selected span's details
// (attributes, resource, events, links, payloads on demand), the trace's
// logs inline, and the CLI command that shows the same trace.

import { get, payloadText } from '../api.js';
import { card, copy, empty, errorBox, h, mount } from '../dom.js';
import * as f from '../format.js';
import { link, query } from '../url.js';
import { waterfall } from './waterfall.js';

export async function render(root, { args, signal }) {
  const id = args[0];
  const [trace, logs] = await Promise.all([
    get(`/api/v1/traces/${encodeURIComponent(id)}`, {}, signal),
    get('/api/v1/logs', { trace_id: id, limit: 1000 }, signal).catch((e) => ({ error: e })),
  ]);
  const q = query();
  const state = {
    collapsed: new Set((q.get('collapsed') || '').split(',').filter(Boolean)),
    from: clamp(Number(q.get('from') || 0)),
    to: clamp(Number(q.get('to') || 1)) || 1,
    selected: q.get('span') || (trace.root && trace.root.span_id) || (trace.spans[0] && trace.spans[0].span_id),
  };
  if (state.to <= state.from) [state.from, state.to] = [0, 1];
  const details = h('div', { class: 'span-details' });
  const showDetails = () => mount(details, spanDetails(trace, state.selected, logs.logs || [], signal));
  const onChange = () => {
    writeState(state);
    showDetails();
    for (const r of root.querySelectorAll('.wf-row')) r.classList.toggle('sel', r.dataset.spanId === state.selected);
  };
  showDetails();
  mount(root,
    header(trace),
    h('div', { class: 'trace-body' },
      h('section', { class: 'card wf-card' }, waterfall(trace, state, onChange)),
      details),
    card(`Logs of this trace (${logs.logs ? logs.logs.length : 0})`, traceLogs(trace, logs, state, onChange),
      h('a', { class: 'button', href: logsLink(trace) }, 'Open in Logs →')));
}

function clamp(x) {
  return Number.isFinite(x) ? Math.max(0, Math.min(1, x)) : 0;
}

/** The waterfall's state into the URL, without a new history entry. */
function writeState(state) {
  const q = query();
  const set = (k, v) => (v ? q.set(k, v) : q.delete(k));
  set('span', state.selected);
  set('collapsed', [...state.collapsed].join(','));
  set('from', state.from > 0 ? state.from.toFixed(4) : '');
  set('to', state.to < 1 ? state.to.toFixed(4) : '');
  history.replaceState(null, '', `${location.pathname}?${q}`);
}

export function cliCommand(traceId) {
  const server = location.origin === 'http://127.0.0.1:7700' ? '' : ` --server ${location.origin}`;
  return `skein get trace ${traceId}${server} --format table`;
}

function header(t) {
  const r = t.root || {};
  const status = h('span', { class: 'copied muted small', 'aria-live': 'polite' });
  return h('div', { class: 'page-head trace-head' },
    h('div', {},
      h('div', { class: 'crumbs' }, h('a', { href: '/traces' }, 'Traces'), ' / ', h('span', { class: 'mono' }, t.trace_id)),
      h('h1', {}, r.service ? h('span', { class: 'muted' }, `${r.service}: `) : null, r.name || '(no root span)')),
    h('div', { class: 'trace-facts' },
      fact('Duration', f.duration(t.duration_ns)),
      fact('Spans', f.int(t.span_count)),
      fact('Errors', f.int(t.error_count), t.error_count ? 'bad' : ''),
      fact('Services', f.int(t.services.length)),
      fact('Started', f.time(t.start_time_unix_nano)),
      h('div', { class: 'trace-actions' },
        h('button', { type: 'button', class: 'button', 'data-copy-cli': '', onclick: async () => {
          status.textContent = (await copy(cliCommand(t.trace_id))) ? 'Copied' : 'Copy failed';
        } }, 'Copy as CLI command'),
        h('a', { class: 'button', href: `/api/v1/traces/${t.trace_id}`, target: '_blank', rel: 'noopener' }, 'JSON'),
        status)));
}

function fact(label, value, cls) {
  return h('div', { class: 'fact' }, h('div', { class: 'kpi-label' }, label), h('div', { class: ['fact-value', cls] }, value));
}

function logsLink(t) {
  const iso = (ns) => new Date(ns / 1e6).toISOString();
  return link('/logs', { trace_id: t.trace_id, since: iso(Number(t.start_time_unix_nano) - 60e9), until: iso(Number(t.end_time_unix_nano) + 60e9) });
}

function spanDetails(trace, id, logs, signal) {
  const s = trace.spans.find((x) => x.span_id === id);
  if (!s) return empty('Select a span.');
  const t0 = Number(trace.start_time_unix_nano);
  const isErr = s.status.code === 'error';
  const mine = logs.filter((l) => l.span_id === s.span_id);
  return h('div', { class: 'card details-card' },
    h('div', { class: 'card-head' }, h('h2', {}, s.name), h('span', { class: ['badge', isErr ? 'b-error' : 'b-muted'] }, s.status.code)),
    s.status.message ? h('p', { class: 'status-message bad' }, s.status.message) : null,
    kv([
      ['Service', s.service], ['Kind', s.kind], ['Duration', f.duration(s.duration_ns)],
      ['Starts at', `+${f.duration(Number(s.start_time_unix_nano) - t0)}`], ['Span ID', s.span_id],
      ['Parent', s.parent_span_id || '(root)'], ['Scope', [s.scope.name, s.scope.version].filter(Boolean).join(' ') || '–'],
    ], signal),
    s.llm ? section('LLM call', kv([
      ['Model', s.llm.model], ['Provider', s.llm.provider], ['Operation', s.llm.operation],
      ['Tokens in / out', `${f.int(s.llm.input_tokens)} / ${f.int(s.llm.output_tokens)}`], ['Cost', f.usd(s.llm.cost_usd)],
      ['Session', s.llm.session_id ? h('a', { href: `/sessions/${encodeURIComponent(s.llm.session_id)}` }, s.llm.session_id) : null],
    ].filter(([, v]) => v !== null && v !== undefined), signal)) : null,
    section(`Attributes (${Object.keys(s.attributes).length})`, kv(Object.entries(s.attributes), signal)),
    section(`Resource (${Object.keys(s.resource).length})`, kv(Object.entries(s.resource), signal), true),
    s.events.length ? section(`Events (${s.events.length})`, h('ul', { class: 'events' }, s.events.map((e) => h('li', {},
      h('div', {}, h('span', { class: 'mono muted' }, `+${f.duration(Number(e.time_unix_nano) - t0)} `), h('strong', {}, e.name)),
      Object.keys(e.attributes).length ? kv(Object.entries(e.attributes), signal) : null)))) : null,
    s.links.length ? section(`Links (${s.links.length})`, h('ul', { class: 'links' }, s.links.map((l) => h('li', {},
      h('a', { href: link(`/traces/${l.trace_id}`, { span: l.span_id }), class: 'mono' }, `${l.trace_id.slice(0, 16)}… / ${l.span_id}`),
      Object.keys(l.attributes).length ? kv(Object.entries(l.attributes), signal) : null)))) : null,
    mine.length ? section(`Logs of this span (${mine.length})`, h('ul', { class: 'events' }, mine.map((l) => h('li', {}, sevBadge(l.severity), ' ', f.value(bodyText(l.body)))))) : null);
}

function section(title, body, closed) {
  return h('details', { class: 'section', open: !closed }, h('summary', {}, title), body);
}

/** A key/value table; payload references get a button that loads them. */
export function kv(pairs, signal) {
  if (!pairs.length) return h('div', { class: 'muted small' }, 'none');
  return h('div', { class: 'kv-wrap' }, h('table', { class: 'kv' }, h('tbody', {}, pairs.map(([k, v]) => h('tr', {}, h('th', {}, k), h('td', {}, valueCell(v, signal)))))));
}

export function valueCell(v, signal) {
  if (v instanceof Node) return v;
  if (f.isPayload(v)) return payloadCell(v, signal);
  const text = f.value(v);
  return text.length > 300 || text.includes('\n') ? h('pre', { class: 'value-pre' }, text) : h('span', { class: 'value' }, text);
}

function payloadCell(v, signal) {
  const out = h('div', { class: 'payload' });
  const load = h('button', { type: 'button', class: 'small-btn', onclick: async () => {
    load.disabled = true;
    load.textContent = 'Loading…';
    try {
      const text = await payloadText(v.$payload, signal);
      let shown = text;
      try { shown = JSON.stringify(JSON.parse(text), null, 2); } catch { /* not JSON */ }
      mount(out, h('pre', { class: 'value-pre' }, shown));
    } catch (e) {
      mount(out, errorBox(e, 'Could not load the payload'));
    }
  } }, `Load full value (${f.bytes(v.bytes || 0)})`);
  mount(out, h('pre', { class: 'value-pre preview' }, `${v.preview || ''}…`), load);
  return out;
}

export function bodyText(b) {
  if (f.isPayload(b)) return b.preview || '(payload)';
  return b;
}

export function sevBadge(sev) {
  return h('span', { class: ['sev', `sev-${sev}`] }, sev);
}

function traceLogs(trace, logs, state, onChange) {
  if (logs.error) return errorBox(logs.error, 'Could not load the logs');
  if (!logs.logs.length) return empty('No logs carry this trace id.');
  const t0 = Number(trace.start_time_unix_nano);
  return h('table', { class: 'table compact logs-inline' }, h('tbody', {}, logs.logs.slice().reverse().map((l) => h('tr', {
    class: 'log-row', 'data-row': '', tabindex: '0',
    title: l.span_id ? 'Show the span that wrote this' : '',
    onclick: () => { if (l.span_id) { state.selected = l.span_id; onChange(state); } },
  },
  h('td', { class: 'mono muted nowrap' }, `+${f.duration(Number(l.time_unix_nano) - t0)}`),
  h('td', {}, sevBadge(l.severity)),
  h('td', { class: 'nowrap' }, l.service),
  h('td', { class: 'log-body' }, f.value(bodyText(l.body)))))));
}
