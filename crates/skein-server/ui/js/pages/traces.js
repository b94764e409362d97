// `/traces`: search traces by service, operation, status, duration,
// attributes and full text; results newest first with duration bars,
// paged by the API's cursor (Back returns to the page before).

import { get } from '../api.js';
import { card, empty, h, mount } from '../dom.js';
import * as f from '../format.js';
import { attrParams, link, query, update } from '../url.js';
import { current, picker } from '../window.js';
import { svcColor } from './overview.js';

const FIELDS = ['service', 'name', 'status', 'min_duration', 'max_duration', 'text', 'root'];

export async function render(root, { signal }) {
  const q = query();
  const w = current('1h');
  const attrs = attrParams(q);
  const params = { ...w.params, ...attrs, limit: q.get('limit') || 50, cursor: q.get('cursor') || undefined };
  for (const k of FIELDS) if (q.get(k)) params[k] = q.get(k);
  const [services, page] = await Promise.all([
    // The service picker lists every service stored (as Jaeger's does),
    // answered from part statistics; a window that cuts through parts
    // would make the engine scan their spans for nothing but names.
    get('/api/v1/services', {}, signal).catch(() => ({ services: [] })),
    get('/api/v1/traces', params, signal),
  ]);
  let ops = [];
  if (q.get('service')) {
    ops = await get(`/api/v1/services/${encodeURIComponent(q.get('service'))}/operations`, w.params, signal)
      .then((r) => r.operations.map((o) => o.name)).catch(() => []);
  }
  mount(root,
    h('div', { class: 'page-head' }, h('h1', {}, 'Traces'), picker('1h')),
    filters(q, services.services.map((s) => s.service), ops, attrs),
    card(`${page.traces.length}${page.next_cursor ? '+' : ''} traces`, results(page.traces), pager(q, page.next_cursor)));
}

function filters(q, services, ops, attrs) {
  const sel = (name, label, options, value) => h('label', { class: 'field' }, h('span', {}, label),
    h('select', { name }, h('option', { value: '' }, 'any'), options.map((o) => h('option', { value: o, selected: o === value }, o))));
  const input = (name, label, placeholder, extra = {}) => h('label', { class: 'field' }, h('span', {}, label),
    h('input', { name, value: q.get(name) || '', placeholder, ...extra }));
  const attrText = Object.entries(attrs).map(([k, v]) => `${k.replace(/^attr\./, '')}=${v}`).join(' ');
  const form = h('form', { class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    const d = new FormData(form);
    const changes = { cursor: '' };
    for (const k of FIELDS) changes[k] = (d.get(k) || '').toString().trim();
    for (const k of Object.keys(attrs)) changes[k] = '';
    for (const pair of (d.get('attrs') || '').toString().split(/\s+/).filter(Boolean)) {
      const i = pair.indexOf('=');
      if (i > 0) {
        const key = pair.slice(0, i);
        changes[key.startsWith('resource.') ? key : `attr.${key}`] = pair.slice(i + 1);
      }
    }
    update(changes);
  } },
  sel('service', 'Service', services, q.get('service')),
  ops.length ? sel('name', 'Operation', ops, q.get('name')) : input('name', 'Operation', 'exact span name'),
  sel('status', 'Status', ['error', 'ok', 'unset'], q.get('status')),
  input('min_duration', 'Min duration', 'e.g. 250ms', { size: 8 }),
  input('max_duration', 'Max duration', 'e.g. 2s', { size: 8 }),
  h('label', { class: 'field grow' }, h('span', {}, 'Attributes'), h('input', { name: 'attrs', value: attrText, placeholder: 'http.status_code=500 resource.host.name=a' })),
  h('label', { class: 'field grow' }, h('span', {}, 'Text'), h('input', { name: 'text', value: q.get('text') || '', placeholder: 'timeout AND "connection refused"', 'data-search': '' })),
  h('div', { class: 'field-actions' }, h('button', { type: 'submit', class: 'primary' }, 'Search'),
    h('a', { href: '/traces', class: 'button' }, 'Reset')));
  // Changing a select searches at once.
  form.addEventListener('change', (e) => { if (e.target.tagName === 'SELECT') form.requestSubmit(); });
  return form;
}

function results(traces) {
  if (!traces.length) return empty('No traces match. Widen the window or loosen the filters.');
  const max = Math.max(...traces.map((t) => t.duration_ns), 1);
  return h('table', { class: 'table traces' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Started'), h('th', {}, 'Root'), h('th', {}, 'Services'), h('th', { class: 'num' }, 'Spans'), h('th', { class: 'dur' }, 'Duration'))),
    h('tbody', {}, traces.map((t) => {
      const href = `/traces/${t.trace_id}`;
      const r = t.root || {};
      return h('tr', { 'data-row': '', tabindex: '0', 'data-href': href, class: t.error_count ? 'has-error' : '' },
        h('td', { class: 'nowrap', title: f.time(t.start_time_unix_nano) }, f.clock(t.start_time_unix_nano), h('div', { class: 'muted small' }, f.ago(t.start_time_unix_nano))),
        h('td', {}, h('a', { href, class: 'trace-link' }, r.name || '(no root span)'), h('div', { class: 'muted small mono' }, t.trace_id)),
        h('td', {}, t.services.map((s) => h('span', { class: 'chip' }, h('span', { class: 'dot', style: { background: svcColor(s) } }), s))),
        h('td', { class: 'num' }, f.int(t.span_count), t.error_count ? h('div', { class: 'bad small' }, `${t.error_count} error${t.error_count > 1 ? 's' : ''}`) : null),
        h('td', { class: 'dur' }, h('div', { class: 'dur-bar' }, h('div', { class: ['dur-fill', t.error_count ? 'err' : ''], style: { width: `${Math.max(1, (t.duration_ns / max) * 100)}%` } })), h('span', { class: 'dur-text' }, f.duration(t.duration_ns))));
    })));
}

function pager(q, next) {
  return h('div', { class: 'pager' },
    q.get('cursor') ? h('a', { class: 'button', href: link(location.pathname, { ...Object.fromEntries(q), cursor: '' }) }, '⏮ First page') : null,
    next ? h('a', { class: 'button', href: link(location.pathname, { ...Object.fromEntries(q), cursor: next }), rel: 'next' }, 'Next page →') : null);
}
