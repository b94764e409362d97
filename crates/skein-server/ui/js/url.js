// Each view's state lives in its URL (path and query), so a link shows
// someone else the same thing. Pages read it with `query()` and change it
// with `update()`, which navigates (a history entry; Back undoes it).

let navigateHook = () => {};

/** Set by the app: how to show a new URL. */
export function onNavigate(f) {
  navigateHook = f;
}

export function query() {
  return new URLSearchParams(location.search);
}

/** A path with query parameters, empty ones left out. */
export function link(path, params) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v === undefined || v === null || v === '' || v === false) continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, one);
  }
  const s = q.toString();
  return s ? `${path}?${s}` : path;
}

export function navigate(href, { replace = false } = {}) {
  if (replace) history.replaceState(null, '', href);
  else history.pushState(null, '', href);
  navigateHook();
}

/** Sets (or, with '' / null, removes) query parameters and navigates. */
export function update(changes, { replace = false, keep = true } = {}) {
  const q = keep ? query() : new URLSearchParams();
  for (const [k, v] of Object.entries(changes)) {
    q.delete(k);
    if (v === undefined || v === null || v === '' || v === false) continue;
    for (const one of Array.isArray(v) ? v : [v]) q.append(k, one);
  }
  const s = q.toString();
  navigate(s ? `${location.pathname}?${s}` : location.pathname, { replace });
}

/** The `attr.KEY=value` pairs of the URL, as API parameters. */
export function attrParams(q) {
  const out = {};
  for (const [k, v] of q) {
    if (k.startsWith('attr.') || k.startsWith('resource.')) out[k] = v;
  }
  return out;
}
