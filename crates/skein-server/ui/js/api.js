// The UI's only way to data: the public API under /api/v1, as any client
// sees it. Errors carry the API's own message ({"error": {"code",
// "message"}}) so the page can show it.

export class ApiError extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** The URL of an API path with query parameters (empty ones left out). */
export function apiUrl(path, params) {
  const url = new URL(path, location.origin);
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === '') continue;
    for (const one of Array.isArray(v) ? v : [v]) url.searchParams.append(k, one);
  }
  return url;
}

// A server started with tokens answers 401: the page asks for one (read
// scope) and keeps it in session storage, for this tab only.
const TOKEN_KEY = 'skein.token';

async function request(path, params, signal, asked = false, accept = 'application/json') {
  const url = apiUrl(path, params);
  const sent = sessionStorage.getItem(TOKEN_KEY);
  let r;
  try {
    r = await fetch(url, { signal, headers: { accept, ...(sent ? { authorization: `Bearer ${sent}` } : {}) } });
  } catch (e) {
    if (e.name === 'AbortError') throw e;
    throw new ApiError(`The Skein API at ${location.origin} is unreachable (${e.message}). Is skein running?`, 0, 'unreachable');
  }
  if (r.status === 401 && !asked) {
    // A view's requests go out together: the first refused asks, the
    // others find its answer and try that.
    const now = sessionStorage.getItem(TOKEN_KEY);
    if (now && now !== sent) return request(path, params, signal, true, accept);
    const t = window.prompt('This Skein server needs a token with the read scope:');
    if (t) {
      sessionStorage.setItem(TOKEN_KEY, t.trim());
      return request(path, params, signal, true, accept);
    }
  }
  return r;
}

/** GET a JSON answer. */
export async function get(path, params, signal) {
  const r = await request(path, params, signal);
  const text = await r.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = null;
  }
  if (!r.ok) {
    const e = body && body.error;
    throw new ApiError(e && e.message ? e.message : `HTTP ${r.status} from ${path}: ${text.slice(0, 200)}`, r.status, e && e.code ? e.code : 'http');
  }
  if (body === null) throw new ApiError(`${path} answered something that is not JSON`, r.status, 'bad_response');
  return body;
}

/** GET a payload's bytes as text. */
export async function payloadText(ref, signal) {
  const r = await request(`/api/v1/payloads/${encodeURIComponent(ref)}`, {}, signal);
  const text = await r.text();
  if (!r.ok) {
    let msg = text;
    try { msg = JSON.parse(text).error.message; } catch { /* plain text */ }
    throw new ApiError(msg, r.status, 'payload');
  }
  return text;
}

/**
 * The server-sent events of `path`, as {event, data} objects (the first
 * {event: 'open'} once the stream is open), until the
 * stream ends or `signal` aborts. Read with fetch rather than EventSource,
 * which cannot send the token header.
 */
export async function* events(path, params, signal) {
  const r = await request(path, params, signal, false, 'text/event-stream');
  if (!r.ok) {
    let msg = `HTTP ${r.status} from ${path}`;
    try { msg = JSON.parse(await r.text()).error.message; } catch { /* not JSON */ }
    throw new ApiError(msg, r.status, 'stream');
  }
  // First a pseudo-event for the stream being open (headers in), as
  // EventSource's `open`.
  yield { event: 'open', data: '' };
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n?/g, '\n');
    let end;
    while ((end = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let event = 'message';
      const data = [];
      for (const line of block.split('\n')) {
        if (line.startsWith(':')) continue;
        const i = line.indexOf(':');
        const field = i < 0 ? line : line.slice(0, i);
        const v = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
        if (field === 'event') event = v;
        else if (field === 'data') data.push(v);
      }
      if (data.length) yield { event, data: data.join('\n') };
    }
  }
}
