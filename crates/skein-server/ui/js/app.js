// The app shell: routes the URL to a page, follows links without reloads,
// themes, keyboard shortcuts, and records how long each view took to show
// its data (window.__skein.timings, read by the browser tests).

import { errorBox, h, mount } from './dom.js';
import { onNavigate } from './url.js';

const ROUTES = [
  [/^\/$/, 'overview', () => import('./pages/overview.js')],
  [/^\/traces\/?$/, 'traces', () => import('./pages/traces.js')],
  [/^\/traces\/([^/]+)\/?$/, 'trace', () => import('./pages/trace.js')],
  [/^\/logs\/?$/, 'logs', () => import('./pages/logs.js')],
  [/^\/metrics\/?$/, 'metrics', () => import('./pages/metrics.js')],
  [/^\/llm\/?$/, 'llm', () => import('./pages/llm.js')],
  [/^\/sessions\/([^/]+)\/?$/, 'session', () => import('./pages/session.js')],
];

const NAV_OF = { trace: 'traces', session: 'llm' };

const view = document.getElementById('view');
const timings = [];
window.__skein = { timings };
let current = null;
let firstLoad = true;

function decode(s) {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

async function render() {
  if (current) current.abort();
  const ctrl = new AbortController();
  current = ctrl;
  // The first view counts from navigation start (it includes loading the
  // UI); later ones from the click.
  const started = firstLoad ? 0 : performance.now();
  firstLoad = false;
  delete document.documentElement.dataset.ready;
  const path = location.pathname;
  const route = ROUTES.find(([re]) => re.test(path));
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.classList.toggle('active', route && a.dataset.nav === (NAV_OF[route[1]] || route[1]));
  }
  if (!route) {
    mount(view, errorBox({ message: `No page at ${path}. Pages: /, /traces, /logs, /metrics, /llm.` }, 'Not found'));
    timings.push({ view: 'notfound', path, ms: performance.now() - started });
    document.documentElement.dataset.ready = 'notfound';
    return;
  }
  const [re, name, load] = route;
  const args = re.exec(path).slice(1).map(decode);
  const root = h('div', { class: `page page-${name}` });
  mount(view, root);
  try {
    const page = await load();
    await page.render(root, { args, signal: ctrl.signal });
  } catch (e) {
    if (e.name === 'AbortError' || ctrl.signal.aborted) return;
    console.warn('view failed:', e.message);
    mount(root, errorBox(e));
  }
  if (ctrl.signal.aborted) return;
  const ms = performance.now() - started;
  timings.push({ view: name, path: location.pathname + location.search, ms });
  document.documentElement.dataset.ready = name;
}

onNavigate(render);
window.addEventListener('popstate', render);

// Same-origin links to pages navigate in place; API links, downloads,
// modified clicks and new tabs are left to the browser.
document.addEventListener('click', (e) => {
  const row = e.target.closest && e.target.closest('[data-href]');
  if (row && !e.target.closest('a, button, input, select, summary') && e.button === 0 && !getSelection().toString()) {
    history.pushState(null, '', row.dataset.href);
    render();
    return;
  }
  const a = e.target.closest && e.target.closest('a[href]');
  if (!a || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  if (a.target || a.hasAttribute('download')) return;
  const url = new URL(a.href, location.href);
  if (url.origin !== location.origin || url.pathname.startsWith('/api/') || url.pathname.startsWith('/ui/')) return;
  e.preventDefault();
  if (url.href !== location.href) history.pushState(null, '', url.href);
  render();
});

// Themes: the system's unless chosen; the choice is kept in this browser.
function applyTheme(t) {
  document.documentElement.dataset.theme = t;
}
const saved = localStorage.getItem('skein.theme');
applyTheme(saved || (matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light'));
function toggleTheme() {
  const next = document.documentElement.dataset.theme === 'dark' ? 'light' : 'dark';
  localStorage.setItem('skein.theme', next);
  applyTheme(next);
  render();
}
document.getElementById('theme').addEventListener('click', toggleTheme);

// Keyboard: / focuses the page's search, g + letter goes to a page,
// t toggles the theme, ? shows the keys, Escape leaves a field.
const GO = { o: '/', t: '/traces', l: '/logs', m: '/metrics', a: '/llm' };
let pendingG = false;
function help() {
  const rows = [['/', 'focus the search or filter field'], ['g o · g t · g l · g m · g a', 'overview, traces, logs, metrics, LLM'], ['t', 'light or dark theme'], ['j / k', 'next or previous row'], ['Enter', 'open the row'], ['Esc', 'leave a field, close this']];
  const dlg = h('dialog', { class: 'help' }, h('h2', {}, 'Keyboard'),
    h('table', {}, rows.map(([k, v]) => h('tr', {}, h('td', {}, h('kbd', {}, k)), h('td', {}, v)))),
    h('form', { method: 'dialog' }, h('button', {}, 'Close')));
  document.body.append(dlg);
  dlg.addEventListener('close', () => dlg.remove());
  dlg.showModal();
}
document.addEventListener('keydown', (e) => {
  const t = e.target;
  const typing = t && (t.tagName === 'INPUT' || t.tagName === 'TEXTAREA' || t.tagName === 'SELECT' || t.isContentEditable);
  if (typing) {
    if (e.key === 'Escape') t.blur();
    return;
  }
  if (e.metaKey || e.ctrlKey || e.altKey) return;
  if (pendingG) {
    pendingG = false;
    if (GO[e.key]) {
      e.preventDefault();
      history.pushState(null, '', GO[e.key]);
      render();
    }
    return;
  }
  if (e.key === 'Enter' && t && t.dataset && t.dataset.href) {
    history.pushState(null, '', t.dataset.href);
    render();
  } else if (e.key === 'g') pendingG = true;
  else if (e.key === 't') toggleTheme();
  else if (e.key === '?') help();
  else if (e.key === '/') {
    const f = view.querySelector('[data-search]');
    if (f) { e.preventDefault(); f.focus(); }
  } else if (e.key === 'j' || e.key === 'k') {
    const rows = [...view.querySelectorAll('[data-row]')];
    if (!rows.length) return;
    const i = rows.indexOf(document.activeElement);
    const next = rows[Math.min(rows.length - 1, Math.max(0, i + (e.key === 'j' ? 1 : -1)))] || rows[0];
    next.focus();
  }
});

render();
