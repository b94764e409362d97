// `/logs`: a severity histogram over time, filters, the matching lines
// newest first (more by cursor), links to their traces, and a live tail
// over the SSE API.

import { events, get } from '../api.js';
import { stackedBars } from '../charts.js';
import { card, empty, h, mount } from '../dom.js';
import * as f from '../format.js';
import { attrParams, link, query, update } from '../url.js';
import { current, picker } from '../window.js';
import { bodyText, kv, sevBadge } from './trace.js';

const BANDS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'unspecified'];
const FIELDS = ['service', 'severity', 'text', 'q', 'trace_id', 'span_id'];
const LIVE_MAX = 500;

export async function render(root, { signal }) {
  const q = query();
  const w = current('1h');
  const filters = {};
  for (const k of FIELDS) if (q.get(k)) filters[k] = q.get(k);
  const attrs = attrParams(q);
  const [services, hist, page] = await Promise.all([
    // The service picker lists every service stored (as Jaeger's does),
    // answered from part statistics; a window that cuts through parts
    // would make the engine scan their spans for nothing but names.
    get('/api/v1/services', {}, signal).catch(() => ({ services: [] })),
    // The histogram counts what the list pages through: the same filters.
    get('/api/v1/series/logs', { ...w.params, ...filters, ...attrs, points: 60 }, signal),
    get('/api/v1/logs', { ...w.params, ...filters, ...attrs, limit: 200 }, signal),
  ]);
  const live = q.get('live') === '1';
  const list = h('tbody', {});
  appendRows(list, page.logs);
  const more = h('div', { class: 'pager' });
  const setMore = (cursor) => mount(more, cursor ? h('button', { type: 'button', class: 'button', onclick: async () => {
    const next = await get('/api/v1/logs', { ...w.params, ...filters, ...attrs, limit: 200, cursor }, signal);
    appendRows(list, next.logs);
    setMore(next.next_cursor);
  } }, 'Load more') : null);
  setMore(page.next_cursor);
  const liveNote = h('span', { class: 'muted small', 'aria-live': 'polite' });
  mount(root,
    h('div', { class: 'page-head' }, h('h1', {}, 'Logs'), picker('1h')),
    filterForm(q, services.services.map((s) => s.service)),
    card('Severity over time', histogram(hist), legend(hist)),
    card(live ? 'Live tail' : `Log lines${page.next_cursor ? '' : ` (${page.logs.length})`}`,
      page.logs.length || live ? h('table', { class: 'table logs' }, list) : empty('No log lines match.'),
      [liveNote, h('label', { class: 'toggle' }, h('input', { type: 'checkbox', checked: live, 'data-live-toggle': '', onchange: (e) => update({ live: e.target.checked ? '1' : '' }, { replace: true }) }), ' Live tail')]),
    live ? null : more);
  if (live) startTail(list, filters, liveNote, signal);
}

function filterForm(q, services) {
  const form = h('form', { class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    const d = new FormData(form);
    const ch = {};
    for (const k of FIELDS) ch[k] = (d.get(k) || '').toString().trim();
    update(ch);
  } },
  h('label', { class: 'field' }, h('span', {}, 'Service'), h('select', { name: 'service' }, h('option', { value: '' }, 'any'), services.map((s) => h('option', { value: s, selected: s === q.get('service') }, s)))),
  h('label', { class: 'field' }, h('span', {}, 'Severity at least'), h('select', { name: 'severity' }, h('option', { value: '' }, 'any'), BANDS.slice(0, 6).map((s) => h('option', { value: s, selected: s === q.get('severity') }, s)))),
  h('label', { class: 'field grow' }, h('span', {}, 'Text'), h('input', { name: 'text', value: q.get('text') || '', placeholder: 'connection AND refused', 'data-search': '' })),
  h('label', { class: 'field' }, h('span', {}, 'Body contains'), h('input', { name: 'q', value: q.get('q') || '', size: 14 })),
  h('label', { class: 'field' }, h('span', {}, 'Trace ID'), h('input', { name: 'trace_id', value: q.get('trace_id') || '', size: 34, class: 'mono' })),
  h('input', { type: 'hidden', name: 'span_id', value: q.get('span_id') || '' }),
  h('div', { class: 'field-actions' }, h('button', { type: 'submit', class: 'primary' }, 'Search'), h('a', { class: 'button', href: '/logs' }, 'Reset')));
  form.addEventListener('change', (e) => { if (e.target.tagName === 'SELECT') form.requestSubmit(); });
  return form;
}

function histogram(hist) {
  const layers = BANDS.filter((b) => hist.severities[b]).map((b) => ({ name: b, values: hist.severities[b] }));
  if (!layers.length) return empty('No logs in this window.');
  return stackedBars(hist.times_unix_nano, layers, {
    format: f.int,
    onPick: (i) => {
      const start = hist.times_unix_nano[i];
      const iso = (ns) => new Date(ns / 1e6).toISOString();
      update({ since: iso(start), until: iso(start + hist.step_ns), last: '' });
    },
  });
}

function legend(hist) {
  return h('div', { class: 'legend' }, BANDS.filter((b) => hist.severities[b]).map((b) => h('span', { class: 'legend-item' },
    h('span', { class: `swatch band-${b}` }), `${b} ${f.num(hist.severities[b].reduce((a, x) => a + x, 0))}`)));
}

function row(l) {
  // The attributes table is built on the first open: a page holds hundreds
  // of lines and few are opened.
  const detail = h('tr', { class: 'log-detail hidden' }, h('td', { colspan: '5' }));
  const toggle = () => {
    if (!detail.firstChild.firstChild) {
      mount(detail.firstChild, kv([...Object.entries(l.attributes || {}), ...Object.entries(l.resource || {}).map(([k, v]) => [`resource.${k}`, v])]));
    }
    detail.classList.toggle('hidden');
  };
  const tr = h('tr', { class: ['log-row', `sev-row-${l.severity}`], 'data-row': '', tabindex: '0', onclick: (e) => {
    if (!e.target.closest('a')) toggle();
  }, onkeydown: (e) => { if (e.key === 'Enter') toggle(); } },
  h('td', { class: 'mono nowrap muted', title: f.time(l.time_unix_nano) }, f.time(l.time_unix_nano).slice(5)),
  h('td', {}, sevBadge(l.severity)),
  h('td', { class: 'nowrap' }, l.service),
  h('td', { class: 'log-body' }, f.value(bodyText(l.body))),
  h('td', { class: 'nowrap' }, l.trace_id ? h('a', { href: link(`/traces/${l.trace_id}`, { span: l.span_id }), class: 'mono small trace-ref', title: 'Open the trace' }, `${l.trace_id.slice(0, 8)}…`) : null));
  return [tr, detail];
}

function appendRows(tbody, logs) {
  for (const l of logs) tbody.append(...row(l));
}

/** The live tail: the SSE stream of new lines, reconnecting after a drop. */
async function startTail(tbody, filters, note, signal) {
  const params = { signal: 'logs', service: filters.service, severity: filters.severity };
  note.textContent = 'connecting…';
  while (!signal.aborted) {
    try {
      for await (const e of events('/api/v1/tail', params, signal)) {
        if (e.event === 'open') note.textContent = 'live';
        else if (e.event === 'log') addTailLine(tbody, filters, e.data);
        else if (e.event === 'lagged') note.textContent = `skipped ${e.data} records (too many to show)`;
      }
    } catch (e) {
      if (signal.aborted || e.name === 'AbortError') return;
      note.textContent = e.status ? `tail: ${e.message}; retrying…` : 'reconnecting…';
    }
    await new Promise((done) => setTimeout(done, 1000));
  }
}

function addTailLine(tbody, filters, data) {
  let l;
  try { l = JSON.parse(data); } catch { return; }
  if (filters.trace_id && l.trace_id !== filters.trace_id) return;
  const [tr, detail] = row(l);
  tr.classList.add('fresh');
  tbody.prepend(tr, detail);
  while (tbody.children.length > LIVE_MAX * 2) tbody.lastElementChild.remove();
}
