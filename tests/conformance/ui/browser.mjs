// Drives Skein's web UI in headless Chromium (playwright-core with the
// system's /usr/bin/chromium):
//
//   node browser.mjs check --api URL --otlp URL        load the fixture, check every page
//   node browser.mjs screenshots --api URL --otlp URL --out docs/ui
//   node browser.mjs timings --api URL [--runs N]       per-view render times as JSON
//   node browser.mjs auth --api URL --otlp URL --token READ --ingest-token INGEST
//                                                      a server with tokens: the page asks once
//
// `check` fails (exit 1) on any console error, page error, dialog (a
// script that ran from telemetry text), missing data or broken click
// path. `--assets DIR` serves /ui/ from DIR instead of the binary (for
// working on the UI without rebuilding).

import { readFileSync } from 'node:fs';
import { mkdirSync } from 'node:fs';
import { join, extname } from 'node:path';
import { chromium } from 'playwright-core';
import { SESSION, XSS, load, sendLog, useIngestToken } from './fixture.mjs';

const [mode, ...rest] = process.argv.slice(2);
const opt = {};
for (let i = 0; i < rest.length; i += 2) opt[rest[i].replace(/^--/, '')] = rest[i + 1];
const API = opt.api;
if (!API || !['check', 'screenshots', 'timings', 'auth'].includes(mode)) {
  console.error('usage: browser.mjs check|screenshots|timings|auth --api URL [--otlp URL] [--out DIR] [--assets DIR] [--runs N] [--token T --ingest-token T]');
  process.exit(2);
}
const CHROMIUM = opt.chromium || process.env.SKEIN_CHROMIUM || '/usr/bin/chromium';

const problems = [];
function fail(what) {
  problems.push(what);
  console.error(`FAIL: ${what}`);
}
function expect(cond, what) {
  if (!cond) fail(what);
  return cond;
}

const TYPES = { '.js': 'text/javascript', '.css': 'text/css', '.html': 'text/html', '.svg': 'image/svg+xml' };

async function newPage(browser, { colorScheme = 'light', answer = null } = {}) {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 }, colorScheme, deviceScaleFactor: 1 });
  if (opt.assets) {
    await context.route('**/ui/**', (route) => {
      const path = new URL(route.request().url()).pathname.replace(/^\/ui\//, '');
      route.fulfill({ body: readFileSync(join(opt.assets, path)), contentType: TYPES[extname(path)] || 'application/octet-stream' });
    });
  }
  const page = await context.newPage();
  // An error answer the test asked for (a 404, a 400) is logged by the
  // browser as a failed resource; `page.allowHttpErrors` says one is due.
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (page.allowHttpErrors && /Failed to load resource: the server responded with a status of 4\d\d/.test(m.text())) return;
    fail(`console error on ${page.url()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => fail(`page error on ${page.url()}: ${e.message}`));
  // `answer`: the token prompt of a server with tokens is expected, and
  // answered with it (counted in page.prompts); any other dialog fails.
  page.prompts = 0;
  page.on('dialog', async (d) => {
    if (answer !== null && d.type() === 'prompt') {
      page.prompts += 1;
      await d.accept(answer);
      return;
    }
    fail(`a dialog opened (${d.type()}: ${d.message()}): telemetry text ran as script`);
    await d.dismiss();
  });
  return page;
}

/** Waits until the app says the view has its data; its render time. */
async function ready(page, view) {
  await page.waitForFunction((v) => document.documentElement.dataset.ready === v, view, { timeout: 15000 });
  return page.evaluate(() => window.__skein.timings.at(-1).ms);
}

async function visit(page, path, view) {
  await page.goto(`${API}${path}`);
  return ready(page, view);
}

async function text(page, selector) {
  return (await page.locator(selector).allTextContents()).join('\n');
}

/** The gzipped bytes of everything the index page loads. */
async function firstLoadBytes(browser) {
  const page = await newPage(browser);
  const urls = new Set();
  page.on('request', (r) => { if (r.url().startsWith(API)) urls.add(r.url()); });
  await visit(page, '/', 'overview');
  let total = 0;
  const sizes = {};
  for (const u of urls) {
    const path = new URL(u).pathname;
    if (path.startsWith('/api/')) continue;
    const r = await fetch(u, { headers: { 'accept-encoding': 'gzip' } });
    const raw = Number(r.headers.get('content-length'));
    expect(r.headers.get('content-encoding') === 'gzip', `${path} is served gzipped`);
    sizes[path] = raw;
    total += raw;
  }
  await page.context().close();
  return { total, sizes };
}

async function check(browser) {
  // Headers of the shell: CSP without inline script or eval.
  const shell = await fetch(`${API}/`, { headers: { accept: 'text/html' } });
  const csp = shell.headers.get('content-security-policy') || '';
  expect(shell.status === 200 && (shell.headers.get('content-type') || '').startsWith('text/html'), '/ is HTML');
  expect(csp.includes("script-src 'self'") && !csp.includes('unsafe-inline') && !csp.includes('unsafe-eval'), `CSP forbids inline script and eval: ${csp}`);

  const size = await firstLoadBytes(browser);
  console.log(`first load: ${size.total} bytes gzipped over ${Object.keys(size.sizes).length} files`);
  expect(size.total > 0 && size.total <= 300 * 1024, `first load ${size.total} bytes gzipped is at most 300 KB`);

  const page = await newPage(browser);
  // Overview: services with sparklines, failing operations, findings.
  await visit(page, '/', 'overview');
  const services = await text(page, '.services tbody');
  for (const s of ['frontend', 'checkout', 'payments', 'inventory', 'postgres']) expect(services.includes(s), `overview lists service ${s}`);
  expect(await page.locator('.services svg.spark').count() >= 15, 'overview draws rate, error and p95 sparklines');
  expect((await text(page, '.failing-op')).includes('POST /charge'), 'overview lists POST /charge among failing operations');
  expect((await text(page, '.findings')).includes('payments'), 'the diagnosis finds the payments change');
  expect(await page.locator('.exemplars a').count() > 0, 'findings link exemplar traces');
  // The window is in the URL.
  await page.click('.window-picker button:has-text("6h")');
  await ready(page, 'overview');
  expect(page.url().includes('last=6h'), 'the window preset is in the URL');

  // Click path: failing operation → its traces → a trace → its log.
  await page.click('.failing-op a:has-text("POST /charge")');
  await ready(page, 'traces');
  expect(page.url().includes('status=error'), 'the failing operation opens its error traces');
  const traceRows = await page.locator('.traces tbody tr').count();
  expect(traceRows > 0, `traces page shows traces (${traceRows})`);
  expect(await page.locator('.dur-fill').count() === traceRows, 'every trace has a duration bar');
  await page.locator('.trace-link').first().click();
  await ready(page, 'trace');
  const rows = await page.locator('.wf-row').count();
  expect(rows === 6, `the waterfall shows the trace's 6 spans (${rows})`);
  expect(await page.locator('.wf-row.err').count() >= 1, 'errors are marked in the waterfall');
  expect(await page.locator('.wf-row.crit').count() >= 2, 'the critical path is highlighted');
  expect((await text(page, '.trace-facts')).includes('Spans6'), 'the header shows the span count');
  expect((await text(page, '.logs-inline')).includes('charge failed'), "the trace's logs are inline");
  // Collapse the root: its descendants hide, and the URL keeps it.
  await page.locator('.wf-row').first().locator('.twisty').click();
  expect(await page.locator('.wf-row').count() === 1, 'collapsing the root hides its spans');
  expect(page.url().includes('collapsed='), 'collapsed spans are in the URL');
  await page.locator('.wf-row').first().locator('.twisty').click();
  // Span details: attributes, events, status.
  await page.locator('.wf-row', { hasText: 'POST /charge' }).click();
  const details = await text(page, '.span-details');
  expect(details.includes('card processor timeout') && details.includes('payment.provider') && details.includes('retry'), 'span details show status, attributes and events');
  expect(page.url().includes('span='), 'the selected span is in the URL');
  // Zoom by dragging on the axis.
  // Selecting a row can scroll the ruler out of view, and mouse events at
  // coordinates outside the viewport reach nothing: bring it back first,
  // then measure. The zoom's redraw is then waited for, not assumed.
  const track = page.locator('.wf-ruler-track');
  await track.scrollIntoViewIfNeeded();
  const box = await track.boundingBox();
  await page.mouse.move(box.x + box.width * 0.2, box.y + box.height / 2);
  await page.mouse.down();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2, { steps: 4 });
  await page.mouse.up();
  await page.waitForFunction(() => location.search.includes('from=') && [...document.querySelectorAll('.wf-ruler button')].some((b) => b.textContent === 'Reset zoom'), null, { timeout: 10000 })
    .catch(() => fail('dragging the axis zooms'));
  await page.click('[data-copy-cli]');
  await page.waitForFunction(() => document.querySelector('.copied').textContent.length > 0);
  await page.click('text=Open in Logs →');
  await ready(page, 'logs');
  expect((await text(page, '.logs tbody')).includes('charge failed'), 'the trace log opens in the logs page');

  // Logs: histogram, lines, links to traces, live tail.
  await visit(page, '/logs', 'logs');
  expect(await page.locator('.bars rect[class^="band-"]').count() > 10, 'the severity histogram has bars');
  expect((await text(page, '.legend')).includes('error'), 'the histogram legend names the bands');
  expect(await page.locator('.logs .log-row').count() >= 100, 'the logs page lists log lines');
  expect(await page.locator('.logs a.trace-ref').count() > 0, 'log lines link to their traces');
  await visit(page, '/logs?severity=error', 'logs');
  const errLines = await text(page, '.logs tbody');
  expect(errLines.includes('charge failed') && !errLines.includes('order placed'), 'the severity filter applies');
  await visit(page, '/logs?service=checkout', 'logs');
  await page.click('[data-live-toggle]');
  await ready(page, 'logs');
  await page.waitForFunction(() => document.querySelector('.card-actions [aria-live]').textContent === 'live', null, { timeout: 10000 });
  const marker = `live tail marker ${Date.now()}`;
  await sendLog(opt.otlp, 'checkout', marker);
  await page.waitForSelector(`.logs td:has-text("${marker}")`, { timeout: 10000 }).catch(() => fail('the live tail shows a new log line'));

  // Metrics (the browser asks for HTML at /metrics): charts of each kind.
  await visit(page, '/metrics?name=http.server.requests', 'metrics');
  expect(await page.locator('.chart .uplot canvas').count() === 1, 'the counter is charted');
  expect((await text(page, '.u-legend')).includes('/charge'), 'the chart has one series per label set');
  await page.click('.labels button.chip:has-text("/charge")');
  await ready(page, 'metrics');
  expect(page.url().includes('attr.http.route=%2Fcharge') || page.url().includes('attr.http.route=/charge'), 'a label filter is in the URL');
  await visit(page, '/metrics?name=http.server.duration&q=0.99', 'metrics');
  expect(await page.locator('.chart .uplot').count() === 1, 'the histogram quantile is charted');
  await visit(page, '/metrics?name=queue.depth', 'metrics');
  expect((await text(page, '.u-legend')).includes('payments'), 'the gauge is charted per service');

  // LLM usage and a session.
  await visit(page, '/llm', 'llm');
  const usage = await text(page, '.usage');
  expect(usage.includes('gpt-4o') && usage.includes('claude-sonnet-4'), 'usage by model');
  await page.click('.segmented button:has-text("by day")');
  await ready(page, 'llm');
  expect(page.url().includes('group_by=day'), 'the grouping is in the URL');
  expect((await text(page, '.sessions')).includes(SESSION), 'the session list');
  await page.click(`.session-link:has-text("${SESSION}")`);
  await ready(page, 'session');
  expect(await page.locator('.turn').count() === 3, 'the conversation has its three turns');
  const convo = await text(page, '.conversation');
  expect(convo.includes('refund order 1042') && convo.includes('search_orders') && convo.includes('started the refund'), 'messages, tool call and answer are shown');

  // Telemetry that is HTML renders as text.
  const xss = await (await fetch(`${API}/api/v1/traces?name=${encodeURIComponent(XSS)}`)).json();
  const xssId = xss.traces[0] && xss.traces[0].trace_id;
  if (expect(xssId, 'the fixture has the HTML-named span')) {
    await visit(page, `/traces/${xssId}`, 'trace');
    expect((await text(page, '.wf-op')).includes(XSS), 'the span name shows as text');
    expect(await page.locator('.waterfall img, .span-details img, .logs-inline img').count() === 0, 'no element was made from telemetry text');
    await visit(page, '/logs?service=frontend', 'logs');
    expect((await text(page, '.logs')).includes(XSS) && (await page.locator('.logs img').count()) === 0, 'a log body that is HTML shows as text');
  }

  // Errors: the API's message in the page, never a blank one.
  page.allowHttpErrors = true;
  await visit(page, '/traces/0123456789abcdef0123456789abcdef', 'trace');
  expect((await text(page, '.error-box')).includes('not found'), "an unknown trace shows the API's not-found message");
  await visit(page, '/traces?status=bogus', 'traces');
  expect((await text(page, '.error-box')).includes('status'), 'a bad parameter shows the API message naming it');
  await visit(page, '/nowhere', 'notfound');
  expect(await page.locator('.error-box').count() === 1, 'an unknown page says so');
  const off = await newPage(browser);
  await off.route('**/api/v1/**', (r) => r.abort('connectionrefused'));
  // The failed fetches log network errors to the console, as expected here.
  off.removeAllListeners('console');
  await visit(off, '/', 'overview');
  expect((await text(off, '.error-box')).includes('unreachable'), 'an unreachable API is said so in the page');
  await off.context().close();

  page.allowHttpErrors = false;

  // Keyboard and theme.
  await visit(page, '/traces', 'traces');
  await page.keyboard.press('t');
  expect(await page.evaluate(() => document.documentElement.dataset.theme) === 'dark', 't switches to the dark theme');
  await page.keyboard.press('g');
  await page.keyboard.press('l');
  await ready(page, 'logs');
  expect(new URL(page.url()).pathname === '/logs', 'g l goes to the logs page');
  await page.context().close();
}

/** The pages, with a path that has data in the fixture (or any store). */
async function pages(page) {
  const traces = await (await fetch(`${API}/api/v1/traces?status=error&limit=1&last=1h`)).json();
  const tid = (traces.traces[0] || {}).trace_id;
  const sessions = await (await fetch(`${API}/api/v1/sessions?limit=50&last=24h`)).json();
  const sid = (sessions.sessions.find((s) => s.session_id === SESSION) || sessions.sessions[0] || {}).session_id;
  const metric = (await (await fetch(`${API}/api/v1/metrics/names?last=1h`)).json()).metrics;
  const mname = (metric.find((m) => m.name === 'http.server.duration') || metric[0] || {}).name;
  const out = [
    ['overview', '/', 'overview'],
    ['traces', '/traces', 'traces'],
    ['logs', '/logs', 'logs'],
    ['llm', '/llm', 'llm'],
  ];
  if (tid) out.splice(2, 0, ['trace', `/traces/${tid}`, 'trace']);
  if (mname) out.push(['metrics', `/metrics?name=${encodeURIComponent(mname)}`, 'metrics']);
  if (sid) out.push(['session', `/sessions/${encodeURIComponent(sid)}`, 'session']);
  return out;
}

async function screenshots(browser) {
  const out = opt.out || 'docs/ui';
  mkdirSync(out, { recursive: true });
  for (const scheme of ['light', 'dark']) {
    const page = await newPage(browser, { colorScheme: scheme });
    for (const [name, path, view] of await pages(page)) {
      if (scheme === 'dark' && !['overview', 'trace'].includes(name)) continue;
      await visit(page, path, view);
      if (name === 'trace') await page.locator('.wf-row.err').last().click();
      await page.waitForTimeout(150);
      const file = join(out, scheme === 'dark' ? `${name}-dark.png` : `${name}.png`);
      await page.screenshot({ path: file, fullPage: false });
      console.log(`wrote ${file}`);
    }
    await page.context().close();
  }
}

/**
 * A server with tokens: the first API call asks for a token (once per
 * tab), every view and the live tail then use it; a wrong token shows the
 * API's refusal in the page.
 */
async function auth(browser) {
  const page = await newPage(browser, { answer: opt.token });
  // The page refuses the API's 401s as failed resources before the prompt.
  page.allowHttpErrors = true;
  await visit(page, '/', 'overview');
  expect(page.prompts === 1, `the page asked for a token once (asked ${page.prompts} times)`);
  expect((await text(page, '.services tbody')).includes('payments'), 'with the token, the overview shows the services');
  await visit(page, '/traces?service=payments', 'traces');
  expect(await page.locator('.traces tbody tr').count() > 0, 'with the token, traces are listed');
  await visit(page, '/logs?service=checkout&live=1', 'logs');
  await page.waitForFunction(() => document.querySelector('.card-actions [aria-live]').textContent === 'live', null, { timeout: 10000 })
    .catch(() => fail('the live tail connects with the token'));
  const marker = `tail with a token ${Date.now()}`;
  await sendLog(opt.otlp, 'checkout', marker);
  await page.waitForSelector(`.logs td:has-text("${marker}")`, { timeout: 10000 }).catch(() => fail('the live tail with a token shows a new log line'));
  expect(page.prompts === 1, `the token is kept for the tab (asked ${page.prompts} times)`);
  await page.context().close();

  const wrong = await newPage(browser, { answer: 'not-a-token' });
  wrong.allowHttpErrors = true;
  await visit(wrong, '/', 'overview');
  const shown = await text(wrong, '.error-box');
  expect(/token/i.test(shown) && shown.includes('401'), `a wrong token shows the API's refusal: ${shown}`);
  await wrong.context().close();
}

/** Each view loaded `runs` times from scratch: the median render time. */
async function timings(browser) {
  const runs = Number(opt.runs || 5);
  const page = await newPage(browser);
  const result = {};
  for (const [name, path, view] of await pages(page)) {
    const ms = [];
    const api = [];
    for (let i = 0; i < runs; i++) {
      ms.push(await visit(page, path, view));
      // The slowest API fetch of this load (Resource Timing: request start
      // to the last byte), which tells server time from browser time.
      api.push(await page.evaluate(() => Math.max(0, ...performance.getEntriesByType('resource')
        .filter((e) => e.name.includes('/api/')).map((e) => e.responseEnd - e.startTime))));
    }
    ms.sort((a, b) => a - b);
    api.sort((a, b) => a - b);
    result[name] = { path, median_ms: ms[Math.floor(ms.length / 2)], max_ms: ms.at(-1), slowest_api_median_ms: api[Math.floor(api.length / 2)], runs };
  }
  await page.context().close();
  console.log(`UI-TIMINGS ${JSON.stringify(result)}`);
}

const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage'] });
try {
  useIngestToken(opt['ingest-token']);
  if (opt.otlp && mode !== 'timings' && !opt['skip-load']) {
    const n = await load(opt.otlp);
    console.log(`fixture: ${JSON.stringify(n)}`);
    // Stored records become searchable at once, but wait for the
    // aggregates to see every span.
    await new Promise((r) => setTimeout(r, 300));
  }
  if (mode === 'check') await check(browser);
  else if (mode === 'screenshots') await screenshots(browser);
  else if (mode === 'auth') await auth(browser);
  else await timings(browser);
} catch (e) {
  fail(`${mode} stopped: ${e.stack || e}`);
} finally {
  await browser.close();
}
if (problems.length) {
  console.error(`${problems.length} problem(s)`);
  process.exit(1);
}
console.log(`${mode}: ok`);
