// Numbers, times and durations as people read them.

export function duration(ns) {
  if (ns === null || ns === undefined || Number.isNaN(ns)) return '–';
  const n = Number(ns);
  if (n < 1e3) return `${n.toFixed(0)} ns`;
  if (n < 1e6) return `${trim(n / 1e3)} µs`;
  if (n < 1e9) return `${trim(n / 1e6)} ms`;
  if (n < 60e9) return `${trim(n / 1e9)} s`;
  if (n < 3600e9) return `${Math.floor(n / 60e9)}m ${Math.round((n % 60e9) / 1e9)}s`;
  return `${Math.floor(n / 3600e9)}h ${Math.round((n % 3600e9) / 60e9)}m`;
}

function trim(v) {
  return v >= 100 ? v.toFixed(0) : v >= 10 ? v.toFixed(1) : v.toFixed(2);
}

export function num(v) {
  if (v === null || v === undefined) return '–';
  const n = Number(v);
  if (Math.abs(n) >= 1e9) return `${trim(n / 1e9)}G`;
  if (Math.abs(n) >= 1e6) return `${trim(n / 1e6)}M`;
  if (Math.abs(n) >= 1e4) return `${trim(n / 1e3)}k`;
  return Number.isInteger(n) ? n.toLocaleString('en-US') : trim(n);
}

export function int(v) {
  return v === null || v === undefined ? '–' : Number(v).toLocaleString('en-US');
}

export function pct(ratio) {
  if (ratio === null || ratio === undefined) return '–';
  const p = ratio * 100;
  return p === 0 ? '0%' : p < 0.1 ? '<0.1%' : `${p < 10 ? p.toFixed(1) : p.toFixed(0)}%`;
}

export function rate(perSec) {
  if (!perSec) return '0/s';
  return perSec >= 1 ? `${trim(perSec)}/s` : `${trim(perSec * 60)}/min`;
}

export function usd(v) {
  if (v === null || v === undefined) return '–';
  if (v === 0) return '$0';
  return v < 0.01 ? `$${v.toFixed(4)}` : `$${v.toFixed(2)}`;
}

const pad = (n, w = 2) => String(n).padStart(w, '0');

/** A Unix time in ns as local date and time, to the millisecond. */
export function time(ns) {
  if (!ns) return '–';
  const d = new Date(Number(ns) / 1e6);
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}.${pad(d.getMilliseconds(), 3)}`;
}

/** A short time of day, for axes and dense tables. */
export function clock(ns) {
  const d = new Date(Number(ns) / 1e6);
  return `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

export function ago(ns) {
  const s = (Date.now() - Number(ns) / 1e6) / 1000;
  if (s < 60) return `${Math.max(0, Math.round(s))}s ago`;
  if (s < 3600) return `${Math.round(s / 60)}m ago`;
  if (s < 86400) return `${Math.round(s / 3600)}h ago`;
  return `${Math.round(s / 86400)}d ago`;
}

/** Any attribute value as one line of text. */
export function value(v) {
  if (v === null || v === undefined) return '';
  if (typeof v === 'string') return v;
  return JSON.stringify(v);
}

/** Whether a value is a payload reference ({"$payload": "blake3:…"}). */
export function isPayload(v) {
  return v && typeof v === 'object' && typeof v.$payload === 'string';
}

export function bytes(n) {
  if (n < 1024) return `${n} B`;
  if (n < 1048576) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1048576).toFixed(1)} MiB`;
}
