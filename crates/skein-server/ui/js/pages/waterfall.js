// A trace's waterfall: the span tree (collapsible), one bar per span on the
// trace's time axis (zoomable by dragging on the ruler), the critical path
// highlighted and errors marked. State (collapsed spans, zoom, the selected
// span) is written to the URL without reloading the page.

import { h, mount } from '../dom.js';
import * as f from '../format.js';
import { svcColor } from './overview.js';

/** The spans on the critical path: from the root, the child that finished
 * last, then the one that finished last before that one started, … */
export function criticalPath(spans) {
  const kids = childrenOf(spans);
  const path = new Set();
  const walk = (s, bound) => {
    path.add(s.span_id);
    let t = Math.min(Number(s.end_time_unix_nano), bound);
    const ks = (kids.get(s.span_id) || []).slice().sort((a, b) => b.end_time_unix_nano - a.end_time_unix_nano);
    for (const k of ks) {
      if (Number(k.start_time_unix_nano) >= t) continue;
      walk(k, t);
      t = Number(k.start_time_unix_nano);
    }
  };
  for (const s of spans) if (s.depth === 0) walk(s, Infinity);
  return path;
}

export function childrenOf(spans) {
  const ids = new Set(spans.map((s) => s.span_id));
  const kids = new Map();
  for (const s of spans) {
    if (s.parent_span_id && ids.has(s.parent_span_id)) {
      if (!kids.has(s.parent_span_id)) kids.set(s.parent_span_id, []);
      kids.get(s.parent_span_id).push(s);
    }
  }
  return kids;
}

/**
 * state: {collapsed: Set, from, to (0..1), selected}; onChange(state) is
 * called after every change (to write the URL and show the details).
 */
export function waterfall(trace, state, onChange) {
  const spans = trace.spans;
  const kids = childrenOf(spans);
  const critical = criticalPath(spans);
  const t0 = Number(trace.start_time_unix_nano);
  const total = Math.max(1, Number(trace.duration_ns));
  const el = h('div', { class: 'waterfall', role: 'tree', 'aria-label': 'Spans' });

  const draw = () => {
    const from = t0 + state.from * total;
    const span = Math.max(1, (state.to - state.from) * total);
    const pos = (t) => ((Number(t) - from) / span) * 100;
    const rows = [];
    let hideDeeper = Infinity;
    for (const s of spans) {
      if (s.depth > hideDeeper) continue;
      hideDeeper = state.collapsed.has(s.span_id) ? s.depth : Infinity;
      const hasKids = kids.has(s.span_id);
      const isErr = s.status && s.status.code === 'error';
      const left = pos(s.start_time_unix_nano);
      const right = pos(s.end_time_unix_nano);
      const barLeft = Math.max(0, Math.min(100, left));
      const barWidth = Math.max(0.15, Math.min(100, right) - barLeft);
      const outside = right < 0 || left > 100;
      const select = () => { state.selected = s.span_id; onChange(state); };
      const toggle = (e) => {
        if (e) e.stopPropagation();
        if (state.collapsed.has(s.span_id)) state.collapsed.delete(s.span_id);
        else state.collapsed.add(s.span_id);
        onChange(state);
        draw();
      };
      const row = h('div', {
        class: ['wf-row', isErr ? 'err' : '', critical.has(s.span_id) ? 'crit' : '', state.selected === s.span_id ? 'sel' : ''],
        role: 'treeitem', tabindex: '0', 'data-row': '', 'data-span-id': s.span_id,
        'aria-expanded': hasKids ? String(!state.collapsed.has(s.span_id)) : null,
        onclick: select,
        onkeydown: (e) => {
          if (e.key === 'Enter' || e.key === ' ') { e.preventDefault(); select(); }
          else if (hasKids && ((e.key === 'ArrowLeft' && !state.collapsed.has(s.span_id)) || (e.key === 'ArrowRight' && state.collapsed.has(s.span_id)))) toggle();
        },
      },
      h('div', { class: 'wf-name', style: { paddingLeft: `${6 + s.depth * 14}px` } },
        hasKids ? h('button', { type: 'button', class: 'twisty', 'aria-label': 'Collapse or expand', tabindex: '-1', onclick: toggle }, state.collapsed.has(s.span_id) ? '▸' : '▾') : h('span', { class: 'twisty' }),
        h('span', { class: 'dot', style: { background: svcColor(s.service) } }),
        h('span', { class: 'wf-svc' }, s.service),
        h('span', { class: 'wf-op' }, s.name),
        isErr ? h('span', { class: 'err-mark', title: (s.status && s.status.message) || 'error' }, '!') : null,
        state.collapsed.has(s.span_id) ? h('span', { class: 'muted small' }, ` +${countBelow(s, kids)}`) : null),
      h('div', { class: 'wf-track' },
        outside ? null : h('div', { class: 'wf-bar', style: { left: `${barLeft}%`, width: `${barWidth}%`, background: isErr ? null : svcColor(s.service) } }),
        durLabel(s, outside ? 0 : barLeft, outside ? 0 : barWidth)));
      rows.push(row);
    }
    mount(el, ruler(from, span, state, total, t0, () => { onChange(state); draw(); }), h('div', { class: 'wf-rows' }, rows));
  };
  draw();
  return el;
}

/** The duration beside its bar, or inside it when the bar reaches the end. */
function durLabel(s, left, width) {
  const end = left + width;
  if (end > 82 && width >= 12) return h('span', { class: 'wf-dur inside', style: { right: `${Math.max(0, 100 - end)}%` } }, f.duration(s.duration_ns));
  if (end > 82) return h('span', { class: 'wf-dur before', style: { right: `${Math.max(0, 100 - left)}%` } }, f.duration(s.duration_ns));
  return h('span', { class: 'wf-dur', style: { left: `${end}%` } }, f.duration(s.duration_ns));
}

function countBelow(s, kids) {
  let n = 0;
  const stack = [...(kids.get(s.span_id) || [])];
  while (stack.length) {
    const k = stack.pop();
    n++;
    stack.push(...(kids.get(k.span_id) || []));
  }
  return n;
}

/** The time axis: ticks, and a drag to zoom into a range. */
function ruler(from, span, state, total, t0, redraw) {
  const ticks = [0, 0.25, 0.5, 0.75, 1].map((x) => h('span', { class: ['tick', x === 0 ? 'tick-start' : '', x === 1 ? 'tick-end' : ''], style: { left: `${x * 100}%` } }, f.duration(from - t0 + x * span)));
  const sel = h('div', { class: 'zoom-sel hidden' });
  const track = h('div', { class: 'wf-ruler-track', title: 'Drag to zoom' }, ticks, sel);
  let startX = null;
  const frac = (e) => {
    const r = track.getBoundingClientRect();
    return Math.max(0, Math.min(1, (e.clientX - r.left) / r.width));
  };
  track.addEventListener('pointerdown', (e) => {
    startX = frac(e);
    track.setPointerCapture(e.pointerId);
    sel.classList.remove('hidden');
    Object.assign(sel.style, { left: `${startX * 100}%`, width: '0%' });
  });
  track.addEventListener('pointermove', (e) => {
    if (startX === null) return;
    const x = frac(e);
    Object.assign(sel.style, { left: `${Math.min(x, startX) * 100}%`, width: `${Math.abs(x - startX) * 100}%` });
  });
  track.addEventListener('pointerup', (e) => {
    if (startX === null) return;
    const x = frac(e);
    const [a, b] = [Math.min(x, startX), Math.max(x, startX)];
    startX = null;
    sel.classList.add('hidden');
    if (b - a < 0.01) return;
    const width = state.to - state.from;
    [state.from, state.to] = [state.from + a * width, state.from + b * width];
    redraw();
  });
  const zoomed = state.from > 0 || state.to < 1;
  return h('div', { class: 'wf-ruler' },
    h('div', { class: 'wf-name wf-ruler-label' }, zoomed
      ? h('button', { type: 'button', class: 'small-btn', onclick: () => { state.from = 0; state.to = 1; redraw(); } }, 'Reset zoom')
      : h('span', { class: 'muted small' }, `${f.duration(total)} · drag the axis to zoom`)),
    track);
}
