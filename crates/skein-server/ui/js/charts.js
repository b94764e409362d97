// Charts: tiny SVG sparklines and stacked bars drawn here, and line charts
// with the vendored uPlot (global `uPlot`, loaded by a classic script).

import { h, s } from './dom.js';
import { clock } from './format.js';

/** A sparkline of `values` (nulls are gaps), `kind` picks the colour. */
export function sparkline(values, { kind = 'rate', title = '', width = 88, height = 26 } = {}) {
  const vals = values.map((v) => (v === null || v === undefined || Number.isNaN(v) ? null : Number(v)));
  const max = Math.max(0, ...vals.filter((v) => v !== null));
  const n = vals.length;
  const x = (i) => (n <= 1 ? width / 2 : (i / (n - 1)) * (width - 2) + 1);
  const y = (v) => height - 2 - (max > 0 ? (v / max) * (height - 4) : 0);
  let line = '';
  let area = '';
  let open = false;
  vals.forEach((v, i) => {
    if (v === null) { open = false; return; }
    line += `${open ? 'L' : 'M'}${x(i).toFixed(1)},${y(v).toFixed(1)}`;
    open = true;
  });
  if (vals.some((v) => v !== null)) {
    const pts = vals.map((v, i) => (v === null ? null : `${x(i).toFixed(1)},${y(v).toFixed(1)}`)).filter(Boolean);
    const first = vals.findIndex((v) => v !== null);
    const last = n - 1 - [...vals].reverse().findIndex((v) => v !== null);
    area = `M${x(first).toFixed(1)},${height - 1} L${pts.join(' L')} L${x(last).toFixed(1)},${height - 1} Z`;
  }
  return s('svg', { class: ['spark', `spark-${kind}`], viewBox: `0 0 ${width} ${height}`, width, height, role: 'img', 'aria-label': title },
    s('title', {}, title),
    area ? s('path', { d: area, class: 'spark-area' }) : null,
    line ? s('path', { d: line, class: 'spark-line' }) : null);
}

/** Stacked bars: one bar per time, one layer per band (bottom first). */
export function stackedBars(times, layers, { height = 120, onPick, format = String } = {}) {
  const width = 1000;
  const n = times.length;
  const totals = times.map((_, i) => layers.reduce((a, l) => a + (l.values[i] || 0), 0));
  const max = Math.max(1, ...totals);
  const bw = width / Math.max(1, n);
  const svg = s('svg', { class: 'bars', viewBox: `0 0 ${width} ${height}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': 'Counts over time' });
  for (let i = 0; i < n; i++) {
    let y = height;
    const g = s('g', { class: 'bar', tabindex: onPick ? '0' : null });
    for (const l of layers) {
      const v = l.values[i] || 0;
      if (!v) continue;
      const bh = (v / max) * (height - 2);
      y -= bh;
      g.append(s('rect', { x: (i * bw + bw * 0.1).toFixed(2), y: y.toFixed(2), width: (bw * 0.8).toFixed(2), height: bh.toFixed(2), class: `band-${l.name}` }));
    }
    g.append(s('rect', { x: (i * bw).toFixed(2), y: 0, width: bw.toFixed(2), height, class: 'bar-hit' }));
    const detail = layers.filter((l) => l.values[i]).map((l) => `${l.name} ${format(l.values[i])}`).join(', ');
    g.append(s('title', {}, `${clock(times[i])}: ${detail || 'none'}`));
    if (onPick) {
      g.addEventListener('click', () => onPick(i));
      g.addEventListener('keydown', (e) => { if (e.key === 'Enter') onPick(i); });
    }
    svg.append(g);
  }
  const axis = h('div', { class: 'bars-axis' }, n ? [h('span', {}, clock(times[0])), h('span', {}, clock(times[Math.floor(n / 2)])), h('span', {}, clock(times[n - 1]))] : null);
  return h('div', { class: 'bars-wrap' }, svg, axis);
}

const PALETTE = ['#4f7cff', '#f59e0b', '#10b981', '#ef4444', '#8b5cf6', '#06b6d4', '#ec4899', '#84cc16', '#f97316', '#64748b'];

export function color(i) {
  return PALETTE[i % PALETTE.length];
}

function cssVar(name) {
  return getComputedStyle(document.documentElement).getPropertyValue(name).trim();
}

/** A uPlot line chart in `el`: times in ns, series [{label, values}]. */
export function lineChart(el, times, series, { yFormat = (v) => String(v), height = 300 } = {}) {
  if (typeof window.uPlot !== 'function') {
    el.append(h('div', { class: 'error-box' }, 'The chart library did not load.'));
    return null;
  }
  const axisColor = cssVar('--muted') || '#888';
  const grid = cssVar('--grid') || '#8882';
  const axis = { stroke: axisColor, grid: { stroke: grid, width: 1 }, ticks: { stroke: grid, width: 1 } };
  const opts = {
    width: Math.max(300, el.clientWidth || 800),
    height,
    cursor: { drag: { x: true, y: false } },
    legend: { live: true },
    scales: { x: { time: true } },
    axes: [axis, { ...axis, size: 70, values: (u, vals) => vals.map((v) => yFormat(v)) }],
    series: [{}, ...series.map((sr, i) => ({
      label: sr.label, stroke: color(i), width: 1.6, spanGaps: false,
      points: { show: sr.values.filter((v) => v !== null).length < 40 },
      value: (u, v) => (v === null || v === undefined ? '–' : yFormat(v)),
    }))],
  };
  const data = [times.map((t) => t / 1e9), ...series.map((sr) => sr.values)];
  const plot = new window.uPlot(opts, data, el);
  const ro = new ResizeObserver(() => plot.setSize({ width: Math.max(300, el.clientWidth), height }));
  ro.observe(el);
  return plot;
}
