// `/sessions/{id}`: one conversation, turn by turn: the messages of each
// model call, the tool calls with their arguments and results, and the
// tokens, cost and latency of every turn.

import { get } from '../api.js';
import { empty, h, mount } from '../dom.js';
import * as f from '../format.js';
import { link } from '../url.js';
import { valueCell } from './trace.js';

export async function render(root, { args, signal }) {
  const id = args[0];
  const s = await get(`/api/v1/sessions/${encodeURIComponent(id)}`, {}, signal);
  mount(root,
    h('div', { class: 'page-head' },
      h('div', {}, h('div', { class: 'crumbs' }, h('a', { href: '/llm' }, 'LLM'), ' / sessions'), h('h1', {}, 'Session ', h('span', { class: 'mono' }, s.session_id))),
      h('div', { class: 'trace-facts' },
        fact('Turns', f.int(s.turns.length)), fact('LLM calls', f.int(s.llm_calls)),
        fact('Tokens in / out', `${f.num(s.input_tokens)} / ${f.num(s.output_tokens)}`),
        fact('Cost', f.usd(s.cost_usd)), fact('Errors', f.int(s.errors), s.errors ? 'bad' : ''),
        fact('Duration', f.duration(s.end_time_unix_nano - s.start_time_unix_nano)))),
    h('div', { class: 'conversation' }, s.turns.length ? s.turns.map((t, i) => turn(t, i, signal)) : empty('No model or tool calls in this session.')));
}

function fact(label, value, cls) {
  return h('div', { class: 'fact' }, h('div', { class: 'kpi-label' }, label), h('div', { class: ['fact-value', cls] }, value));
}

function turn(t, i, signal) {
  const llm = t.llm || {};
  const isTool = t.kind === 'tool' || !!t.tool;
  const meta = h('div', { class: 'turn-meta' },
    h('span', { class: 'turn-no' }, `#${i + 1}`),
    h('span', { class: ['badge', isTool ? 'b-tool' : 'b-llm'] }, isTool ? 'tool' : (llm.operation || 'chat')),
    h('strong', {}, isTool ? (t.tool && t.tool.name) || t.name : llm.model || t.name),
    t.status === 'error' ? h('span', { class: 'badge b-error' }, 'error') : null,
    h('span', { class: 'spacer' }),
    isTool ? null : h('span', { class: 'muted small' }, `${f.int(llm.input_tokens)} in · ${f.int(llm.output_tokens)} out · ${f.usd(llm.cost_usd)}`),
    h('span', { class: 'muted small' }, `${isTool ? '' : ' · '}${f.duration(t.duration_ns)} · `),
    h('a', { href: link(`/traces/${t.trace_id}`, { span: t.span_id }), class: 'small' }, 'span'));
  const body = isTool ? toolBody(t.tool || {}, signal) : messagesBody(t.messages || {}, signal);
  return h('article', { class: ['turn', isTool ? 'turn-tool' : 'turn-llm', t.status === 'error' ? 'err' : ''] }, meta, body);
}

function toolBody(tool, signal) {
  return h('div', { class: 'turn-body' },
    h('div', { class: 'msg msg-tool' }, h('div', { class: 'role' }, 'arguments'), content(tool.arguments, signal)),
    h('div', { class: 'msg msg-tool' }, h('div', { class: 'role' }, 'result'), content(tool.result, signal)));
}

function messagesBody(m, signal) {
  const out = [];
  if (m.system) out.push(message({ role: 'system', content: m.system }, signal));
  for (const x of asList(m.input)) out.push(message(x, signal));
  for (const x of asList(m.output)) out.push(message({ role: 'assistant', ...asObject(x) }, signal));
  return h('div', { class: 'turn-body' }, out.length ? out : h('div', { class: 'muted small' }, 'No messages recorded (content capture may be off).'));
}

function asList(v) {
  if (v === null || v === undefined) return [];
  return Array.isArray(v) ? v : [v];
}

function asObject(x) {
  return x && typeof x === 'object' && !Array.isArray(x) && !x.$payload ? x : { content: x };
}

/** One message: its role and its parts (text, tool calls, tool results). */
function message(raw, signal) {
  const m = asObject(raw);
  const role = m.role || 'message';
  const parts = [];
  if (Array.isArray(m.parts)) {
    for (const p of m.parts) {
      if (p.type === 'text') parts.push(h('div', { class: 'msg-text' }, f.value(p.content)));
      else if (p.type === 'tool_call') parts.push(h('div', { class: 'tool-call' }, h('span', { class: 'badge b-tool' }, 'calls'), ' ', h('strong', { class: 'mono' }, p.name || ''), content(p.arguments, signal)));
      else if (p.type === 'tool_call_response') parts.push(h('div', { class: 'tool-call' }, h('span', { class: 'badge b-tool' }, 'tool result'), content(p.response ?? p.result, signal)));
      else parts.push(content(p, signal));
    }
  }
  if (m.content !== undefined && m.content !== null) parts.push(typeof m.content === 'string' ? h('div', { class: 'msg-text' }, m.content) : content(m.content, signal));
  if (Array.isArray(m.tool_calls)) for (const c of m.tool_calls) parts.push(h('div', { class: 'tool-call' }, h('span', { class: 'badge b-tool' }, 'calls'), ' ', h('strong', { class: 'mono' }, (c.function && c.function.name) || c.name || ''), content((c.function && c.function.arguments) || c.arguments, signal)));
  if (!parts.length) parts.push(content(m, signal));
  return h('div', { class: ['msg', `msg-${role}`] }, h('div', { class: 'role' }, role), parts);
}

function content(v, signal) {
  if (v === null || v === undefined) return h('span', { class: 'muted small' }, '–');
  if (typeof v === 'string') {
    let parsed = null;
    try { parsed = JSON.parse(v); } catch { /* plain text */ }
    return parsed && typeof parsed === 'object' ? h('pre', { class: 'value-pre' }, JSON.stringify(parsed, null, 2)) : h('div', { class: 'msg-text' }, v);
  }
  if (f.isPayload(v)) return valueCell(v, signal);
  return h('pre', { class: 'value-pre' }, JSON.stringify(v, null, 2));
}
