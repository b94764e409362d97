// The time window of a view: a preset (last=15m|1h|6h|24h) or a custom
// range (since, until), in the URL, turned into the API's parameters.

import { h } from './dom.js';
import { query, update } from './url.js';

export const PRESETS = ['15m', '1h', '6h', '24h'];

const UNIT_NS = { m: 60e9, h: 3600e9, d: 86400e9 };

/** The window of the URL (default `fallback`), as API parameters and ns. */
export function current(fallback = '1h') {
  const q = query();
  const since = q.get('since');
  const until = q.get('until');
  if (since || until) {
    const start = since ? Date.parse(since) * 1e6 : NaN;
    const end = until ? Date.parse(until) * 1e6 : Date.now() * 1e6;
    return { params: { since: since || undefined, until: until || undefined }, start, end, label: 'custom', lookback: null };
  }
  const last = q.get('last') || fallback;
  const m = /^(\d+)([mhd])$/.exec(last);
  const now = Date.now() * 1e6;
  const len = m ? Number(m[1]) * UNIT_NS[m[2]] : NaN;
  return { params: { last }, start: now - len, end: now, label: last, lookback: last };
}

function localInput(ns) {
  if (!Number.isFinite(ns)) return '';
  const d = new Date(ns / 1e6);
  const p = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${p(d.getMonth() + 1)}-${p(d.getDate())}T${p(d.getHours())}:${p(d.getMinutes())}`;
}

/** The picker: preset buttons and a custom range. */
export function picker(fallback = '1h') {
  const w = current(fallback);
  const from = h('input', { type: 'datetime-local', 'aria-label': 'From', value: localInput(w.start) });
  const to = h('input', { type: 'datetime-local', 'aria-label': 'To', value: localInput(w.end) });
  const custom = h('form', { class: ['custom-range', w.label === 'custom' ? '' : 'hidden'], onsubmit: (e) => {
    e.preventDefault();
    const iso = (v) => (v ? new Date(v).toISOString() : '');
    update({ since: iso(from.value), until: iso(to.value), last: '', cursor: '' });
  } }, from, '→', to, h('button', { type: 'submit' }, 'Apply'));
  const buttons = PRESETS.map((p) => h('button', {
    type: 'button', class: ['seg', w.label === p ? 'on' : ''], 'aria-pressed': String(w.label === p),
    onclick: () => update({ last: p, since: '', until: '', cursor: '' }),
  }, p));
  const customBtn = h('button', { type: 'button', class: ['seg', w.label === 'custom' ? 'on' : ''], onclick: () => custom.classList.toggle('hidden') }, 'Custom');
  return h('div', { class: 'window-picker' }, h('div', { class: 'segmented', role: 'group', 'aria-label': 'Time window' }, buttons, customBtn), custom);
}
