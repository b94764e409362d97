// `/`: what is happening now. Per-service RED (rate, errors, p95) with
// sparklines, the operations failing most, and what the diagnosis found,
// each linking to the traces that show it.

import { get } from '../api.js';
import { sparkline } from '../charts.js';
import { card, empty, errorBox, h, mount } from '../dom.js';
import * as f from '../format.js';
import { link, query, update } from '../url.js';
import { current, picker } from '../window.js';

const SORTS = { service: (a) => a.service, rate: (a) => -a.rate_per_sec, errors: (a) => -a.error_rate, p95: (a) => -a.p95_ns, spans: (a) => -a.spans };

export async function render(root, { signal }) {
  const w = current('1h');
  const q = query();
  const sort = SORTS[q.get('sort')] ? q.get('sort') : 'rate';
  const windowParams = w.params;
  // The diagnosis looks back over the window (its last 31 days at most).
  const anomalyParams = w.lookback ? { lookback: w.lookback } : { lookback: diagLookback(w), until: w.params.until };
  const [summary, services, series, anomalies] = await Promise.allSettled([
    // Its findings would repeat the anomalies call below.
    get('/api/v1/summary', { ...windowParams, findings: 'false' }, signal),
    get('/api/v1/services', windowParams, signal),
    get('/api/v1/series/services', { ...windowParams, points: 40 }, signal),
    get('/api/v1/anomalies', { ...anomalyParams, limit: 8 }, signal),
  ]);
  if (summary.status === 'rejected') throw summary.reason;
  if (services.status === 'rejected') throw services.reason;
  const s = summary.value;
  mount(root,
    h('div', { class: 'page-head' }, h('h1', {}, 'Overview'), picker('1h')),
    kpis(s),
    h('div', { class: 'grid-2' },
      card('Services', servicesTable(services.value.services, series, sort), h('span', { class: 'muted' }, `${services.value.services.length} services`)),
      h('div', { class: 'stack' },
        card('Top failing operations', failing(s.top_error_operations, windowParams)),
        card('Diagnosis', findings(anomalies)))));
}

function diagLookback(w) {
  const ms = Math.max(60e3, Math.min(31 * 86400e3, (w.end - w.start) / 1e6));
  return `${Math.round(ms / 60e3)}m`;
}

function kpis(s) {
  const tile = (label, value, sub, cls) => h('div', { class: ['kpi', cls] }, h('div', { class: 'kpi-label' }, label), h('div', { class: 'kpi-value' }, value), sub ? h('div', { class: 'kpi-sub' }, sub) : null);
  const sev = s.logs_by_severity || {};
  return h('div', { class: 'kpis' },
    tile('Spans', f.num(s.spans), `${f.num(s.traces)} traces`),
    tile('Error rate', f.pct(s.error_rate), `${f.num(s.error_spans)} error spans`, s.error_rate > 0.05 ? 'bad' : ''),
    tile('p50 / p95', `${f.duration(s.latency.p50_ns)} / ${f.duration(s.latency.p95_ns)}`, `p99 ${f.duration(s.latency.p99_ns)}`),
    tile('Services', f.int(s.services)),
    tile('Logs', f.num(s.logs), `${f.num((sev.error || 0) + (sev.fatal || 0))} error or fatal`),
    tile('Metric series', f.num(s.metric_series), `${f.num(s.metric_points)} points`));
}

function servicesTable(list, seriesResult, sort) {
  if (!list.length) return empty('No spans in this window. Send OTLP to the OTLP ports, or pick a wider window.');
  const series = seriesResult.status === 'fulfilled' ? seriesResult.value : null;
  const bySvc = new Map((series ? series.services : []).map((x) => [x.service, x]));
  const stepSec = series ? series.step_ns / 1e9 : 60;
  // The bucket still filling (it ends after now) would read as a drop.
  const now = Date.now() * 1e6;
  const full = series ? series.times_unix_nano.filter((t) => t + series.step_ns <= now).length : 0;
  const cut = (v) => v.slice(0, Math.max(1, full));
  const rows = [...list].sort((a, b) => {
    const k = SORTS[sort];
    const x = k(a);
    const y = k(b);
    return x < y ? -1 : x > y ? 1 : a.service.localeCompare(b.service);
  });
  const th = (key, label, cls) => h('th', { class: cls },
    h('button', { type: 'button', class: ['sort', sort === key ? 'on' : ''], onclick: () => update({ sort: key }, { replace: true }) }, label));
  return h('table', { class: 'table services' },
    h('thead', {}, h('tr', {}, th('service', 'Service'), th('rate', 'Rate', 'num'), th('errors', 'Errors', 'num'), th('p95', 'p95', 'num'), th('spans', 'Spans', 'num'))),
    h('tbody', {}, rows.map((sv) => {
      const ts = bySvc.get(sv.service);
      const rate = ts ? cut(ts.spans.map((n) => n / stepSec)) : [];
      const err = ts ? cut(ts.spans.map((n, i) => (n ? ts.errors[i] / n : null))) : [];
      const p95 = ts ? cut(ts.p95_ns.map((v, i) => (ts.spans[i] ? v : null))) : [];
      const href = link('/traces', { service: sv.service });
      return h('tr', { 'data-row': '', tabindex: '0', 'data-href': href },
        h('td', {}, h('a', { href, class: 'svc' }, h('span', { class: 'dot', style: { background: svcColor(sv.service) } }), sv.service)),
        h('td', { class: 'num' }, h('div', { class: 'cell-spark' }, sparkline(rate, { kind: 'rate', title: `${sv.service} spans/s` }), h('span', {}, f.rate(sv.rate_per_sec)))),
        h('td', { class: 'num' }, h('div', { class: 'cell-spark' }, sparkline(err, { kind: 'error', title: `${sv.service} error rate` }), h('span', { class: sv.error_rate > 0.05 ? 'bad' : '' }, f.pct(sv.error_rate)))),
        h('td', { class: 'num' }, h('div', { class: 'cell-spark' }, sparkline(p95, { kind: 'latency', title: `${sv.service} p95` }), h('span', {}, f.duration(sv.p95_ns)))),
        h('td', { class: 'num' }, f.num(sv.spans)));
    })));
}

function failing(ops, windowParams) {
  if (!ops || !ops.length) return empty('No failing operations in this window.');
  return h('table', { class: 'table compact' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Operation'), h('th', { class: 'num' }, 'Errors'), h('th', { class: 'num' }, 'Rate'), h('th', { class: 'num' }, 'p95'))),
    h('tbody', {}, ops.map((o) => {
      const href = link('/traces', { service: o.service, name: o.name, status: 'error', ...windowParams });
      return h('tr', { 'data-row': '', tabindex: '0', 'data-href': href, class: 'failing-op' },
        h('td', {}, h('a', { href }, h('span', { class: 'muted' }, `${o.service} · `), o.name)),
        h('td', { class: 'num bad' }, f.int(o.errors)),
        h('td', { class: 'num' }, f.pct(o.error_rate)),
        h('td', { class: 'num' }, f.duration(o.p95_ns)));
    })));
}

function findings(result) {
  if (result.status === 'rejected') return errorBox(result.reason, 'The diagnosis failed');
  const list = result.value.findings || [];
  if (!list.length) return empty(`Nothing changed: ${f.int(result.value.operations_examined || 0)} operations examined.`);
  return h('ul', { class: 'findings' }, list.map((x) => h('li', { class: ['finding', x.role === 'cause' ? 'cause' : ''] },
    h('div', { class: 'finding-head' },
      h('span', { class: ['badge', x.kind === 'errors' || x.kind === 'error_rate' ? 'b-error' : 'b-warn'] }, x.kind),
      x.role ? h('span', { class: 'badge b-muted' }, x.role) : null,
      h('a', { href: link('/traces', { service: x.service, name: x.operation }) }, h('span', { class: 'muted' }, `${x.service} · `), x.operation)),
    h('p', {}, x.message),
    x.exemplar_trace_ids && x.exemplar_trace_ids.length
      ? h('div', { class: 'exemplars' }, 'Exemplars: ', x.exemplar_trace_ids.slice(0, 4).map((t) => h('a', { href: `/traces/${t}`, class: 'mono' }, t.slice(0, 12))))
      : null)));
}

/** A stable colour per service name. */
export function svcColor(name) {
  let hash = 0;
  for (const c of name) hash = (hash * 31 + c.charCodeAt(0)) | 0;
  return `hsl(${Math.abs(hash) % 360} 62% 52%)`;
}
