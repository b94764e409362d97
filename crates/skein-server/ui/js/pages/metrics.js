// `/metrics` (for browsers; scrapers get Prometheus text): pick a metric
// and labels, see it over time, one line per series: gauges as they are,
// monotonic sums as rates, histograms and summaries as a quantile.

import { get } from '../api.js';
import { lineChart } from '../charts.js';
import { card, empty, h, mount } from '../dom.js';
import * as f from '../format.js';
import { attrParams, query, update } from '../url.js';
import { current, picker } from '../window.js';

/** Series on one chart at most (the busiest). */
const MAX_SERIES = 12;
/** Points read for one chart at most (pages of 10,000). */
const MAX_POINTS = 50000;

export async function render(root, { signal }) {
  const q = query();
  const w = current('1h');
  const names = await get('/api/v1/metrics/names', w.params, signal);
  const name = q.get('name') || (names.metrics[0] && names.metrics[0].name);
  const head = h('div', { class: 'page-head' }, h('h1', {}, 'Metrics'), picker('1h'));
  if (!name) {
    mount(root, head, card('Metrics', empty('No metric points in this window.')));
    return;
  }
  const attrs = attrParams(q);
  const service = q.get('service') || '';
  const points = [];
  let cursor;
  do {
    const page = await get('/api/v1/metrics', { ...w.params, ...attrs, name, service, limit: 10000, cursor }, signal);
    points.push(...page.points);
    cursor = page.next_cursor;
  } while (cursor && points.length < MAX_POINTS);
  const quantile = Number(q.get('q') || 0.95);
  const chartEl = h('div', { class: 'chart', 'data-chart': name });
  const series = toSeries(points, quantile);
  const kind = points[0] ? describe(points[0]) : '';
  mount(root, head,
    h('div', { class: 'metrics-layout' },
      h('aside', { class: 'card metric-list' },
        h('input', { type: 'search', placeholder: 'Filter metrics', 'data-search': '', class: 'metric-filter', oninput: (e) => {
          const t = e.target.value.toLowerCase();
          for (const li of e.target.parentElement.querySelectorAll('li')) li.classList.toggle('hidden', !li.dataset.name.toLowerCase().includes(t));
        } }),
        h('ul', {}, names.metrics.map((m) => h('li', { 'data-name': m.name, class: m.name === name ? 'on' : '' },
          h('a', { href: `/metrics?${new URLSearchParams({ ...w.params, name: m.name })}` }, m.name, h('span', { class: 'muted small' }, f.num(m.points))))))),
      h('div', { class: 'stack' },
        card(h('span', {}, name, h('span', { class: 'muted small' }, ` ${kind}`)), h('div', {}, chartEl, series.note ? h('p', { class: 'muted small' }, series.note) : null), controls(points, quantile, attrs, service)),
        card('Labels', labels(points, attrs, service)))));
  if (!series.lines.length) {
    mount(chartEl, empty('No points of this metric match.'));
    return;
  }
  lineChart(chartEl, series.times, series.lines, { yFormat: series.format });
}

function describe(p) {
  const unit = p.unit ? ` (${p.unit})` : '';
  if (p.type === 'sum') return `${p.monotonic ? 'counter, shown as rate per second' : 'sum'}${unit}`;
  if (p.type === 'histogram' || p.type === 'exponential_histogram' || p.type === 'summary') return `${p.type.replace('_', ' ')}${unit}`;
  return `${p.type}${unit}`;
}

function controls(points, quantile, attrs, service) {
  const t = points[0] && points[0].type;
  const quantiles = t === 'histogram' || t === 'exponential_histogram' || t === 'summary';
  return h('div', { class: 'row-gap' },
    quantiles ? h('div', { class: 'segmented' }, [0.5, 0.9, 0.95, 0.99].map((x) => h('button', { type: 'button', class: ['seg', x === quantile ? 'on' : ''], onclick: () => update({ q: String(x) }, { replace: true }) }, `p${Math.round(x * 100)}`))) : null,
    Object.keys(attrs).length || service ? h('button', { type: 'button', class: 'small-btn', onclick: () => {
      const ch = { service: '' };
      for (const k of Object.keys(attrs)) ch[k] = '';
      update(ch);
    } }, 'Clear label filters') : null);
}

/** Label keys with their values; clicking one filters on it. */
function labels(points, attrs, service) {
  const keys = new Map();
  const add = (k, v) => {
    if (!keys.has(k)) keys.set(k, new Map());
    const m = keys.get(k);
    m.set(v, (m.get(v) || 0) + 1);
  };
  for (const p of points) {
    add('service', p.service);
    for (const [k, v] of Object.entries(p.attributes)) add(`attr.${k}`, f.value(v));
  }
  if (!keys.size) return empty('No labels.');
  return h('div', { class: 'labels' }, [...keys].map(([k, vals]) => h('div', { class: 'label-key' },
    h('div', { class: 'muted small' }, k.replace(/^attr\./, '')),
    h('div', { class: 'chips' }, [...vals].sort((a, b) => b[1] - a[1]).slice(0, 30).map(([v]) => {
      const on = k === 'service' ? service === v : attrs[k] === v;
      return h('button', { type: 'button', class: ['chip', on ? 'on' : ''], onclick: () => update({ [k]: on ? '' : v }) }, v);
    })))));
}

function seriesKey(p) {
  const a = Object.entries(p.attributes).sort(([x], [y]) => (x < y ? -1 : 1)).map(([k, v]) => `${k}=${f.value(v)}`);
  return [p.service, ...a].join(', ');
}

/** Points to chart lines on one shared time axis. */
export function toSeries(points, quantile) {
  const groups = new Map();
  for (const p of points) {
    const k = seriesKey(p);
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(p);
  }
  let lines = [];
  let format = (v) => f.num(v);
  for (const [label, ps] of groups) {
    ps.sort((a, b) => a.time_unix_nano - b.time_unix_nano);
    const vals = valuesOf(ps, quantile);
    if (vals.length) lines.push({ label, pts: vals });
    const t = ps[0];
    if (t.type === 'histogram' || t.type === 'exponential_histogram' || t.type === 'summary') format = unitFormat(t.unit);
    else if (t.unit) format = unitFormat(t.unit);
  }
  let note = '';
  if (lines.length > MAX_SERIES) {
    lines.sort((a, b) => b.pts.length - a.pts.length);
    note = `Showing ${MAX_SERIES} of ${lines.length} series; filter by a label to see others.`;
    lines = lines.slice(0, MAX_SERIES);
  }
  const times = [...new Set(lines.flatMap((l) => l.pts.map(([t]) => t)))].sort((a, b) => a - b);
  const index = new Map(times.map((t, i) => [t, i]));
  return {
    times,
    format,
    note,
    lines: lines.map((l) => {
      const values = new Array(times.length).fill(null);
      for (const [t, v] of l.pts) values[index.get(t)] = v;
      return { label: l.label, values };
    }),
  };
}

function unitFormat(unit) {
  if (unit === 's') return (v) => f.duration(v * 1e9);
  if (unit === 'ms') return (v) => f.duration(v * 1e6);
  if (unit === 'us' || unit === 'µs') return (v) => f.duration(v * 1e3);
  if (unit === 'ns') return (v) => f.duration(v);
  if (unit === 'By') return (v) => f.bytes(v);
  return (v) => f.num(v);
}

/** [time, value] per point: the value, a rate, or a quantile. */
function valuesOf(ps, quantile) {
  const t = ps[0];
  if (t.type === 'gauge' || (t.type === 'sum' && !t.monotonic)) return ps.map((p) => [p.time_unix_nano, num(p.value)]);
  if (t.type === 'sum') {
    if (t.temporality === 'delta') return ps.map((p) => [p.time_unix_nano, num(p.value) / Math.max(1e-9, (p.time_unix_nano - p.start_time_unix_nano) / 1e9)]);
    const out = [];
    for (let i = 1; i < ps.length; i++) {
      const dv = num(ps[i].value) - num(ps[i - 1].value);
      const dt = (ps[i].time_unix_nano - ps[i - 1].time_unix_nano) / 1e9;
      // A counter that went down was reset: its new value is the increase.
      if (dt > 0) out.push([ps[i].time_unix_nano, (dv >= 0 ? dv : num(ps[i].value)) / dt]);
    }
    return out;
  }
  if (t.type === 'summary') {
    return ps.map((p) => {
      const hit = (p.quantiles || []).find((x) => Math.abs(x.quantile - quantile) < 1e-9);
      return [p.time_unix_nano, hit ? hit.value : p.count ? p.sum / p.count : null];
    });
  }
  if (t.type === 'histogram' || t.type === 'exponential_histogram') {
    const out = [];
    for (let i = 0; i < ps.length; i++) {
      const p = ps[i];
      const prev = t.temporality === 'cumulative' ? ps[i - 1] : null;
      if (t.temporality === 'cumulative' && !prev) continue;
      const { bounds, counts } = buckets(p);
      let c = counts;
      if (prev) {
        const pc = buckets(prev).counts;
        const d = counts.map((x, j) => x - (pc[j] || 0));
        c = d.some((x) => x < 0) ? counts : d;
      }
      out.push([p.time_unix_nano, histQuantile(bounds, c, quantile)]);
    }
    return out;
  }
  return [];
}

function num(v) {
  return v === null || v === undefined ? null : Number(v);
}

/** Upper bounds and counts of a point's buckets (the last bound +Inf). */
function buckets(p) {
  if (p.type === 'histogram') return { bounds: [...p.explicit_bounds, Infinity], counts: p.bucket_counts.map(Number) };
  const base = 2 ** (2 ** -p.scale);
  const pos = p.positive || { offset: 0, bucket_counts: [] };
  const bounds = [0];
  const counts = [p.zero_count || 0];
  pos.bucket_counts.forEach((c, i) => {
    bounds.push(base ** (pos.offset + i + 1));
    counts.push(Number(c));
  });
  return { bounds, counts };
}

/** The quantile by linear interpolation inside its bucket. */
export function histQuantile(bounds, counts, q) {
  const total = counts.reduce((a, b) => a + b, 0);
  if (!total) return null;
  const rank = q * total;
  let seen = 0;
  for (let i = 0; i < counts.length; i++) {
    if (seen + counts[i] >= rank && counts[i] > 0) {
      const lo = i === 0 ? 0 : bounds[i - 1];
      const hi = bounds[i];
      if (!Number.isFinite(hi)) return lo;
      return lo + (hi - lo) * ((rank - seen) / counts[i]);
    }
    seen += counts[i];
  }
  return bounds[bounds.length - 2] || null;
}
