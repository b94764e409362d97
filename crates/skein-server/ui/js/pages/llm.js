// `/llm`: LLM usage and cost grouped by model, provider, day, service or
// agent; tool calls; and the sessions (conversations), most recent first.

import { get } from '../api.js';
import { card, empty, h, mount } from '../dom.js';
import * as f from '../format.js';
import { link, query, update } from '../url.js';
import { current, picker } from '../window.js';

const GROUPS = ['model', 'provider', 'day', 'service', 'agent', 'user'];

export async function render(root, { signal }) {
  const q = query();
  const w = current('24h');
  const group = GROUPS.includes(q.get('group_by')) ? q.get('group_by') : 'model';
  const [usage, tools, sessions] = await Promise.all([
    get('/api/v1/llm/usage', { ...w.params, group_by: group }, signal),
    get('/api/v1/llm/tools', w.params, signal),
    get('/api/v1/sessions', { ...w.params, limit: 50, cursor: q.get('cursor') || undefined }, signal),
  ]);
  const t = usage.totals || {};
  mount(root,
    h('div', { class: 'page-head' }, h('h1', {}, 'LLM'), picker('24h')),
    h('div', { class: 'kpis' },
      tile('Calls', f.int(t.calls), `${f.int(t.errors)} errors`),
      tile('Cost', f.usd(t.cost_usd), t.unpriced_calls ? `${f.int(t.unpriced_calls)} calls unpriced` : 'all calls priced'),
      tile('Input tokens', f.num(t.input_tokens), `${f.num(t.cache_read_tokens)} cached`),
      tile('Output tokens', f.num(t.output_tokens), `${f.num(t.reasoning_tokens)} reasoning`),
      tile('Latency p50 / p95', `${f.duration(t.latency_p50_ns)} / ${f.duration(t.latency_p95_ns)}`, `TTFT p50 ${f.duration(t.ttft_p50_ns)}`),
      tile('Sessions', `${f.int(sessions.sessions.length)}${sessions.next_cursor ? '+' : ''}`)),
    card('Usage and cost', usageTable(usage.groups, group),
      h('div', { class: 'segmented' }, GROUPS.map((g) => h('button', { type: 'button', class: ['seg', g === group ? 'on' : ''], onclick: () => update({ group_by: g }, { replace: true }) }, `by ${g}`)))),
    h('div', { class: 'grid-2 llm-grid' },
      card('Sessions', sessionsTable(sessions)),
      card('Tool calls', toolsTable(tools.tools))));
}

function tile(label, value, sub) {
  return h('div', { class: 'kpi' }, h('div', { class: 'kpi-label' }, label), h('div', { class: 'kpi-value' }, value), sub ? h('div', { class: 'kpi-sub' }, sub) : null);
}

function usageTable(groups, group) {
  if (!groups.length) return empty('No LLM calls in this window.');
  const maxCost = Math.max(...groups.map((g) => g.cost_usd || 0), 1e-12);
  return h('table', { class: 'table usage' },
    h('thead', {}, h('tr', {}, h('th', {}, group), h('th', { class: 'num' }, 'Calls'), h('th', { class: 'num' }, 'Errors'), h('th', { class: 'num' }, 'Input'), h('th', { class: 'num' }, 'Output'), h('th', { class: 'num' }, 'p50'), h('th', { class: 'num' }, 'p95'), h('th', { class: 'dur' }, 'Cost'))),
    h('tbody', {}, groups.map((g) => h('tr', {},
      h('td', {}, g.key === null || g.key === '' ? h('span', { class: 'muted' }, '(none)') : g.key),
      h('td', { class: 'num' }, f.int(g.calls)),
      h('td', { class: ['num', g.errors ? 'bad' : ''] }, f.int(g.errors)),
      h('td', { class: 'num' }, f.num(g.input_tokens)),
      h('td', { class: 'num' }, f.num(g.output_tokens)),
      h('td', { class: 'num' }, f.duration(g.latency_p50_ns)),
      h('td', { class: 'num' }, f.duration(g.latency_p95_ns)),
      h('td', { class: 'dur' }, h('div', { class: 'dur-bar' }, h('div', { class: 'dur-fill cost', style: { width: `${Math.max(0.5, ((g.cost_usd || 0) / maxCost) * 100)}%` } })),
        h('span', { class: 'dur-text' }, f.usd(g.cost_usd), g.unpriced_calls ? h('span', { class: 'muted small', title: 'calls without a price' }, ` +${g.unpriced_calls}?`) : null))))));
}

function sessionsTable(page) {
  if (!page.sessions.length) return empty('No sessions in this window (spans with gen_ai.conversation.id or session.id).');
  return h('div', { class: 'flush' },
    h('table', { class: 'table sessions' },
      h('thead', {}, h('tr', {}, h('th', {}, 'Session'), h('th', {}, 'Last active'), h('th', { class: 'num' }, 'Calls'), h('th', { class: 'num' }, 'Tokens'), h('th', { class: 'num' }, 'Cost'))),
      h('tbody', {}, page.sessions.map((s) => {
        const href = `/sessions/${encodeURIComponent(s.session_id)}`;
        return h('tr', { 'data-row': '', tabindex: '0', 'data-href': href, class: s.errors ? 'has-error' : '' },
          h('td', {}, h('a', { href, class: 'session-link' }, s.session_id), h('div', { class: 'muted small' }, [...(s.models || []), ...(s.agents || [])].join(' · '))),
          h('td', { class: 'nowrap' }, f.ago(s.end_time_unix_nano), h('div', { class: 'muted small' }, f.duration(s.end_time_unix_nano - s.start_time_unix_nano))),
          h('td', { class: 'num' }, f.int(s.llm_calls), s.errors ? h('div', { class: 'bad small' }, `${s.errors} errors`) : null),
          h('td', { class: 'num' }, f.num(s.input_tokens + s.output_tokens)),
          h('td', { class: 'num' }, f.usd(s.cost_usd)));
      }))),
    page.next_cursor ? h('div', { class: 'pager' }, h('a', { class: 'button', href: link('/llm', { ...Object.fromEntries(query()), cursor: page.next_cursor }) }, 'More sessions →')) : null);
}

function toolsTable(tools) {
  if (!tools.length) return empty('No tool calls in this window.');
  return h('table', { class: 'table compact' },
    h('thead', {}, h('tr', {}, h('th', {}, 'Tool'), h('th', { class: 'num' }, 'Calls'), h('th', { class: 'num' }, 'Errors'), h('th', { class: 'num' }, 'p50'), h('th', { class: 'num' }, 'p95'))),
    h('tbody', {}, tools.map((t) => h('tr', {},
      h('td', { class: 'mono' }, t.tool),
      h('td', { class: 'num' }, f.int(t.calls)),
      h('td', { class: ['num', t.errors ? 'bad' : ''] }, f.int(t.errors)),
      h('td', { class: 'num' }, f.duration(t.p50_ns)),
      h('td', { class: 'num' }, f.duration(t.p95_ns))))));
}
