// Building DOM without HTML strings: every piece of telemetry text goes in
// as a text node (textContent), so a span named <img onerror=…> is shown,
// never run. Nothing in the UI uses innerHTML.

const SVG_NS = 'http://www.w3.org/2000/svg';

function apply(el, props) {
  for (const [k, v] of Object.entries(props || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') el.setAttribute('class', Array.isArray(v) ? v.filter(Boolean).join(' ') : v);
    else if (k === 'dataset') Object.assign(el.dataset, v);
    else if (k === 'style') Object.assign(el.style, v);
    else if (k.startsWith('on') && typeof v === 'function') el.addEventListener(k.slice(2), v);
    else if (k === 'value' || k === 'checked' || k === 'selected') el[k] = v;
    else el.setAttribute(k, v === true ? '' : String(v));
  }
}

function append(el, children) {
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
}

/** An HTML element: h('a', {href}, 'text', child, [more]). */
export function h(tag, props, ...children) {
  const el = document.createElement(tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** An SVG element, the same way. */
export function s(tag, props, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  apply(el, props);
  append(el, children);
  return el;
}

/** Replaces the children of `el`. */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** A box saying what went wrong, with the API's own message. */
export function errorBox(err, what) {
  return h('div', { class: 'error-box', role: 'alert' },
    h('strong', {}, what || 'Could not load this view'),
    h('p', { class: 'error-message' }, err && err.message ? err.message : String(err)),
    err && err.code ? h('p', { class: 'muted' }, `${err.code}${err.status ? ` · HTTP ${err.status}` : ''}`) : null);
}

export function empty(text) {
  return h('div', { class: 'empty' }, text);
}

/** A card with a title, optional actions at the right, and a body. */
export function card(title, body, actions) {
  return h('section', { class: 'card' },
    h('div', { class: 'card-head' }, h('h2', {}, title), actions ? h('div', { class: 'card-actions' }, actions) : null),
    body);
}

/** Copies text to the clipboard; resolves to whether it worked. */
export async function copy(text) {
  try {
    await navigator.clipboard.writeText(text);
    return true;
  } catch {
    // Clipboard access needs a secure context or permission: fall back to
    // a selected textarea and the copy command.
    const t = h('textarea', { class: 'offscreen', readonly: true }, text);
    document.body.append(t);
    t.select();
    const ok = document.execCommand('copy');
    t.remove();
    return ok;
  }
}
