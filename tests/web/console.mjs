// The console in Debian's headless Chromium, driven by puppeteer-core (no browser download: the
// system's chromium). Run by console.py, which starts the servers; this script asks it for each
// server-side step by printing "@STEP" and waiting for a line on stdin.
//
// Usage: node console.mjs CONFIG_JSON   ({a, c, token, node_a, node_b, served, idle, xss,
//                                        screenshots}, written by console.py)
//
// Checks, in order (numbers as in the test's description in docs/architecture.md):
//   2. Fleet on A lists A and B, A marked "this process"; after @kill-b, B's lease remaining
//      counts down (two readings, falling) and B turns free, without a reload;
//   3. after @step-c, C's console shows a clock_step event;
//   4. the decode tool gives the fields of GET /v1/ids/{id}?encoding=X for 20 fresh IDs in every
//      encoding the layout has, with "auto" (which must name X) and with X chosen; an order
//      number decodes with the token, a mistyped one marks the character at the error's position;
//   5. the tag description with <img src=x onerror=alert(1)> shows as text, no <img>, no dialog;
//   6. the Tags form creates a tag with the token and shows the 401 without it;
//   7. every input and select is labelled, the sections are reachable by Tab and Enter, and
//      axe-core finds no serious or critical violation in any section;
//   8. at 375x800 nothing overflows the document;
//   9. throughout: no console error, page error, dialog, request to another origin or failed
//      request except those the test provokes; screenshots of every section, wide and narrow;
//  10. after @stop-a, the status line says error / stale.
import { createInterface } from 'node:readline';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const config = JSON.parse(process.argv[2] || '{}');
if (!config.a) {
  console.error('usage: node console.mjs CONFIG_JSON');
  process.exit(2);
}
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';
// axe-core from npm, run inside the page (given to it through the DevTools protocol: the page's
// Content-Security-Policy refuses a script tag with inline code, as it should).
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const SECTIONS = ['fleet', 'node', 'tags', 'decode', 'events'];

function fail(message) {
  throw new Error(message);
}

const lines = createInterface({ input: process.stdin })[Symbol.asyncIterator]();
// Asks console.py for a server-side step and waits until it is done.
async function step(name) {
  console.log(`@${name}`);
  const { done } = await lines.next();
  if (done) fail(`stdin closed during @${name}`);
}

// Polls `predicate` (async) every 100 ms until it returns something true, which is returned.
async function until(what, ms, predicate) {
  const deadline = Date.now() + ms;
  for (;;) {
    const v = await predicate();
    if (v) return v;
    if (Date.now() > deadline) fail(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function getJson(url, headers) {
  const res = await fetch(url, { headers: headers || {} });
  const body = await res.json();
  return { status: res.status, body };
}

// Requests the test provokes (a failed "auto" try, a create without token, a mistyped order
// number, the stopped server): [method, path regex, status (0: no answer)].
const provoked = [];
const problems = [];
let stopped = false;  // A stopped: its requests may fail

function isProvoked(method, url, status) {
  const u = new URL(url);
  const path = u.pathname + u.search;
  if (stopped && u.origin === config.a) return true;
  return provoked.some(([m, re, s]) => (m === '*' || m === method) && re.test(path) && s === status);
}

// A page of `base` whose every problem is recorded.
async function watchedPage(browser, base) {
  const origin = new URL(base).origin;
  const page = await browser.newPage();
  const methods = new Map();
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('dialog', async (d) => {
    problems.push(`dialog opened: ${d.type()} ${d.message()}`);
    await d.dismiss();
  });
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    const url = (m.location() && m.location().url) || '';
    const status = /status of (\d+)/.exec(m.text());
    if (url && status && isProvoked(methods.get(url) || 'GET', url, Number(status[1]))) return;
    if (url && /ERR_CONNECTION_REFUSED|ERR_EMPTY_RESPONSE|ERR_CONNECTION_RESET/.test(m.text()) && isProvoked('GET', url, 0)) return;
    problems.push(`console error: ${m.text()} (${url})`);
  });
  page.on('request', (r) => {
    const url = r.url();
    methods.set(url, r.method());
    if (!url.startsWith('data:') && new URL(url).origin !== origin) problems.push(`request to another origin: ${url}`);
  });
  page.on('requestfailed', (r) => {
    if (!isProvoked(r.method(), r.url(), 0)) problems.push(`request failed: ${r.method()} ${r.url()} ${r.failure()?.errorText}`);
  });
  page.on('response', (r) => {
    if (r.status() >= 400 && !isProvoked(r.request().method(), r.url(), r.status())) {
      problems.push(`HTTP ${r.status()} for ${r.request().method()} ${r.url()}`);
    }
  });
  return page;
}

function checkProblems(where) {
  if (problems.length) fail(`${where}:\n  ${problems.join('\n  ')}`);
}

async function show(page, section) {
  await page.evaluate((s) => { location.hash = s; }, section);
  await until(`section ${section} shown`, 3000, () => page.$eval(`#${section}`, (e) => !e.hidden));
}

const shots = [];
async function screenshot(page, name) {
  const path = join(config.screenshots, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  shots.push(path);
}

// ---- 2. the fleet ----
async function fleet(page) {
  await show(page, 'fleet');
  const row = (node) => page.evaluate((n) => {
    const tr = document.querySelector(`#fleet-rows tr[data-node="${n}"]`);
    if (!tr) return null;
    const cell = (f) => tr.querySelector(`[data-field="${f}"]`);
    return { state: tr.dataset.state, thisProcess: tr.dataset.thisProcess === 'true',
             marked: !!cell('node').querySelector('[data-marker="this-process"]'),
             remaining: cell('remaining').dataset.remainingMs, remainingText: cell('remaining').textContent,
             owner: cell('owner').textContent, token: cell('token').textContent };
  }, node);
  await until('A and B in the fleet', 10000, async () => {
    const a = await row(config.node_a);
    const b = await row(config.node_b);
    return a && b && a.state === 'live' && b.state === 'live';
  });
  const a = await row(config.node_a);
  const b = await row(config.node_b);
  if (!a.thisProcess || !a.marked) fail(`A (node ${config.node_a}) is not marked this process`);
  if (b.thisProcess || b.marked) fail(`B (node ${config.node_b}) is marked this process`);
  if (!/:\d+$/.test(a.owner) || !/^\d+$/.test(a.token)) fail(`A's owner/token: ${a.owner} ${a.token}`);
  await screenshot(page, 'wide-fleet');
  await step('kill-b');
  // Counting down: two readings of B's remaining time while it is live, the second lower.
  const live = async () => {
    const r = await row(config.node_b);
    return r && r.state === 'live' && r.remaining !== undefined ? Number(r.remaining) : null;
  };
  const first = await live();
  if (first === null) fail('B is not live with a remaining time after the kill');
  const second = await until('B\'s lease remaining to count down', 5000, async () => {
    const now = await live();
    if (now === null) fail('B turned free before its remaining time was seen counting down');
    return now < first - 200 ? now : null;
  });
  console.log(`B's lease remaining counted down ${first} -> ${second} ms`);
  await until('B to turn free', 10000, async () => {
    const r = await row(config.node_b);
    return r && r.state === 'free' && r.remainingText === 'free';
  });
  if ((await row(config.node_a)).state !== 'live') fail('A is not live');
  console.log('fleet ok');
}

// ---- 3. the clock step on C ----
async function clockStep(browser) {
  const page = await watchedPage(browser, config.c);
  await page.setViewport({ width: 1280, height: 900 });
  await page.goto(`${config.c}/console#events`, { waitUntil: 'load' });
  await until('C\'s lease_claimed event', 10000, () => page.$('#events-rows tr[data-kind="lease_claimed"]'));
  await step('step-c');
  await until('C\'s clock_step event on the page', 10000, () => page.$('#events-rows tr[data-kind="clock_step"]'));
  const ev = await page.$eval('#events-rows tr[data-kind="clock_step"]', (tr) => ({
    level: tr.dataset.level,
    message: tr.querySelector('[data-field="message"]').textContent,
    details: tr.querySelector('[data-field="details"]').textContent,
  }));
  if (ev.level !== 'warning' || !/step_ms=-\d+/.test(ev.details)) fail(`clock_step row: ${JSON.stringify(ev)}`);
  // Newest first.
  const kinds = await page.$$eval('#events-rows tr', (rows) => rows.map((r) => Number(r.dataset.seq)));
  if (kinds.some((s, i) => i > 0 && s > kinds[i - 1])) fail(`events not newest first: ${kinds}`);
  await screenshot(page, 'wide-events-c-clock-step');
  await page.close();
  console.log(`clock step ok: ${ev.message}`);
}

// ---- 4. decode ----
function flatten(d) {
  const out = {};
  for (const [k, v] of Object.entries(d)) {
    if (v && typeof v === 'object') for (const [k2, v2] of Object.entries(v)) out[`${k}.${k2}`] = String(v2);
    else out[k] = String(v);
  }
  return out;
}

// Types `text` into the decode tool, chooses `encoding` and submits (Enter in the field does the
// same); returns the table shown ({key: text}) and the encoding the page says it used.
async function decodeOne(page, text, encoding) {
  await page.evaluate((t, enc) => {
    document.getElementById('decode-id').value = t;
    document.getElementById('decode-encoding').value = enc;
    delete document.getElementById('decode-result').dataset.state;
    document.getElementById('decode-form').requestSubmit();
  }, text, encoding);
  await page.waitForSelector('#decode-result[data-state="ok"], #decode-result[data-state="error"]', { timeout: 5000 });
  const shown = await page.evaluate(() => ({
    state: document.getElementById('decode-result').dataset.state,
    text: document.getElementById('decode-result').textContent,
    used: document.getElementById('decode-used')?.textContent,
    fields: Object.fromEntries([...document.querySelectorAll('#decode-result td[data-key]')].map((c) => [c.dataset.key, c.textContent])),
  }));
  if (shown.state !== 'ok') fail(`decoding ${text} as ${encoding}: ${shown.text}`);
  return shown;
}

async function decode(page) {
  await show(page, 'decode');
  const layout = (await getJson(`${config.a}/v1/layout`)).body;
  const encodings = layout.encodings;
  if (!encodings.includes('uuidv7') || !encodings.includes('ulid')) fail(`layout encodings: ${encodings}`);
  const options = await page.$$eval('#decode-encoding option', (os) => os.map((o) => o.value));
  if (JSON.stringify(options) !== JSON.stringify(['auto', ...encodings])) fail(`encoding choices ${options}`);
  let checked = 0;
  for (const encoding of encodings) {
    const { body } = await getJson(`${config.a}/v1/ids?count=20&encoding=${encoding}`);
    for (const text of body.ids) {
      const q = encoding === 'dec' ? '' : `?encoding=${encoding}`;
      const expected = flatten((await getJson(`${config.a}/v1/ids/${encodeURIComponent(text)}${q}`)).body);
      for (const choice of ['auto', encoding]) {
        const { fields, used } = await decodeOne(page, text, choice);
        if (JSON.stringify(fields) !== JSON.stringify(expected)) {
          fail(`${text} (${choice}): shown ${JSON.stringify(fields)}\n expected ${JSON.stringify(expected)}`);
        }
        if (used !== encoding) fail(`${text} (${choice}): decoded as ${used}, not ${encoding}`);
        ++checked;
      }
    }
  }
  console.log(`decode: ${checked} decodes in ${encodings.join(', ')} match /v1/ids/{id}`);
  await screenshot(page, 'wide-decode');

  // An order number, with the token (set in the token field).
  await page.$eval('#token', (e, t) => { e.value = t; }, config.token);
  await page.click('#token-form button[type="submit"]');
  const code = (await getJson(`${config.a}/v1/order-numbers?count=1`)).body.order_numbers[0];
  const auth = { Authorization: `Bearer ${config.token}` };
  const truth = (await getJson(`${config.a}/v1/order-numbers/${code}`, auth)).body;
  const order = async (text) => {
    await page.$eval('#order-code', (e, t) => { e.value = t; }, text);
    await page.$eval('#order-result', (e) => { delete e.dataset.state; });
    await page.click('#order-form button[type="submit"]');
    return until(`order number ${text}`, 5000, () => page.$eval('#order-result', (e) =>
      (e.dataset.state === 'ok' || e.dataset.state === 'error' ? e.dataset.state : null)));
  };
  if ((await order(code)) !== 'ok') fail(`order number ${code}: ${await page.$eval('#order-result', (e) => e.textContent)}`);
  const shown = await page.$$eval('#order-result td[data-key]', (cells) =>
    Object.fromEntries(cells.map((c) => [c.dataset.key, c.textContent])));
  if (shown.id !== truth.id || shown['fields.node'] !== String(truth.fields.node) || shown.time !== truth.time) {
    fail(`order number ${code} shows ${JSON.stringify(shown)}, the route says ${JSON.stringify(truth)}`);
  }
  provoked.push(['GET', /^\/v1\/order-numbers\/[^/?]+$/, 400]);
  // A changed character: a letter (the error names its position) and a changed digit (the check
  // character does not match: the server names the check character's position).
  const letter = code.slice(0, 5) + 'x' + code.slice(6);
  const digit = code.slice(0, 3) + ((Number(code[3]) + 1) % 10) + code.slice(4);
  for (const bad of [letter, digit]) {
    const expected = (await getJson(`${config.a}/v1/order-numbers/${bad}`, auth)).body.error;
    if ((await order(bad)) !== 'error') fail(`the mistyped ${bad} decoded`);
    const mark = await page.$eval('#order-result mark', (m) => ({ position: Number(m.dataset.position), text: m.textContent }));
    const message = await page.$eval('#order-result .error', (e) => e.textContent);
    if (mark.position !== expected.position || mark.text !== bad[expected.position - 1] || !message.includes(expected.message)) {
      fail(`mistyped ${bad}: marked ${JSON.stringify(mark)} with ${message}; the server says ${JSON.stringify(expected)}`);
    }
  }
  if (letter[5] !== 'x') fail('the letter was not put at position 6');
  await screenshot(page, 'wide-decode-order-error');
  console.log('order numbers ok');
}

// ---- 5. and the Tags section: the description shows as text; 6. create a tag ----
async function tags(page) {
  await show(page, 'tags');
  const description = () => page.evaluate((tag) => {
    const tr = [...document.querySelectorAll('#tags-rows tr')].find((r) => r.dataset.tag === tag);
    return tr ? tr.querySelector('[data-field="description"]').textContent : null;
  }, config.served);
  await until('the described tag', 10000, async () => (await description()) === config.xss);
  if ((await page.$$('img')).length) fail('an <img> element is in the document');
  const issued = () => page.evaluate((tag) => {
    const tr = [...document.querySelectorAll('#tags-rows tr')].find((r) => r.dataset.tag === tag);
    return tr ? Number(tr.querySelector('[data-field="issued"]').textContent) : NaN;
  }, config.served);
  // Issued grows without a reload.
  const before = await issued();
  const res = await fetch(`${config.a}/v1/segments/${config.served}/ids?count=250`);
  if (res.status !== 200) fail(`taking IDs: ${res.status}`);
  await until(`issued to grow from ${before} by 250`, 6000, async () => (await issued()) >= before + 250);
  await screenshot(page, 'wide-tags');

  const create = async (tag) => {
    await page.$eval('#create-tag', (e, t) => { e.value = t; }, tag);
    await page.$eval('#create-step', (e) => { e.value = '10'; });
    await page.$eval('#create-description', (e) => { e.value = 'made from the console'; });
    await page.$eval('#create-result', (e) => { e.textContent = ''; });
    await page.click('#create-form button[type="submit"]');
    return until(`the answer to creating ${tag}`, 5000, () => page.$eval('#create-result', (e) => e.textContent));
  };
  await page.click('#forget');
  provoked.push(['POST', /^\/v1\/segments$/, 401]);
  const refused = await create('web-refused');
  if (!/HTTP 401/.test(refused) || !/token/.test(refused)) fail(`create without a token: ${refused}`);
  provoked.pop();
  await page.$eval('#token', (e, t) => { e.value = t; }, config.token);
  await page.click('#token-form button[type="submit"]');
  const made = await create('web-made');
  if (!/created tag web-made/.test(made)) fail(`create with the token: ${made}`);
  const { status } = await getJson(`${config.a}/v1/segments/web-made`);
  if (status !== 200) fail(`the created tag: ${status}`);
  const { status: refusedStatus } = await getJson(`${config.a}/v1/segments/web-refused`);
  if (refusedStatus !== 404) fail(`the refused tag exists: ${refusedStatus}`);
  await until('the created tag in the table', 6000, () => page.$('#tags-rows tr[data-tag="web-made"]'));
  console.log(`tags ok: ${refused}`);
}

// ---- 7. accessibility ----
async function accessibility(page) {
  const unlabelled = await page.$$eval('input, select, textarea, button', (els) => els.filter((e) => {
    if (e.tagName === 'BUTTON') return !e.textContent.trim() && !e.getAttribute('aria-label');
    return !(e.labels && e.labels.length) && !e.getAttribute('aria-label') && !e.getAttribute('aria-labelledby');
  }).map((e) => e.id || e.outerHTML));
  if (unlabelled.length) fail(`unlabelled controls: ${unlabelled}`);
  // From the top of the page, Tab to the Events tab and press Enter.
  await show(page, 'fleet');
  await page.evaluate(() => { document.activeElement && document.activeElement.blur(); window.scrollTo(0, 0); });
  let reached = false;
  for (let i = 0; i < 30 && !reached; ++i) {
    await page.keyboard.press('Tab');
    reached = await page.evaluate(() => document.activeElement && document.activeElement.id === 'tab-events');
  }
  if (!reached) fail('the Events tab is not reachable with Tab');
  await page.keyboard.press('Enter');
  await until('Enter on the Events tab to show Events', 3000, () =>
    page.evaluate(() => !document.getElementById('events').hidden && document.getElementById('fleet').hidden &&
      document.getElementById('tab-events').getAttribute('aria-current') === 'page'));
  await page.evaluate(axeSource);
  for (const section of SECTIONS) {
    await show(page, section);
    const result = await page.evaluate(() => window.axe.run(document, { resultTypes: ['violations'] }));
    const bad = result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
    if (bad.length) {
      fail(`axe-core in ${section}: ` + bad.map((v) => `${v.id} (${v.impact}): ${v.help} at ` +
        v.nodes.map((n) => n.target.join(' ')).slice(0, 3).join(', ')).join('; '));
    }
  }
  console.log(`accessibility ok (axe-core ${await page.evaluate(() => window.axe.version)}: no serious or critical violation)`);
}

// ---- 8. narrow, 9. screenshots of every section ----
async function screens(page) {
  for (const section of SECTIONS) {
    await show(page, section);
    await new Promise((r) => setTimeout(r, 150));
    await screenshot(page, `wide-${section}`);
  }
  await page.setViewport({ width: 375, height: 800 });
  for (const section of SECTIONS) {
    await show(page, section);
    await new Promise((r) => setTimeout(r, 150));
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    if (width > 375) fail(`${section} at 375 px: the document is ${width} px wide`);
    await screenshot(page, `narrow-${section}`);
  }
  await page.setViewport({ width: 1280, height: 900 });
  console.log('narrow ok');
}

const profile = mkdtempSync(join(tmpdir(), 'flurry-chromium-'));
let browser;
try {
  browser = await puppeteer.launch({
    executablePath: chromium,
    headless: true,
    userDataDir: profile,
    // No sandbox (tests may run as root); no background traffic (this machine has no network).
    args: [
      '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
      '--disable-background-networking', '--disable-component-update', '--disable-sync',
      '--disable-dev-shm-usage',
    ],
  });
  const page = await watchedPage(browser, config.a);
  await page.setViewport({ width: 1280, height: 900 });
  const res = await page.goto(`${config.a}/console`, { waitUntil: 'load' });
  if (res.status() !== 200) fail(`GET /console: ${res.status()}`);
  const csp = res.headers()['content-security-policy'] || '';
  if (!csp.includes("script-src 'self'")) fail(`Content-Security-Policy: ${csp}`);
  await until('status ok', 5000, () => page.$eval('#status', (e) => e.dataset.state === 'ok'));

  await fleet(page);
  checkProblems('fleet');
  await clockStep(browser);
  checkProblems('clock step');
  await tags(page);
  checkProblems('tags');
  await decode(page);
  checkProblems('decode');
  await accessibility(page);
  await screens(page);
  checkProblems('screens');

  // ---- 10. A stops: the page says so ----
  await show(page, 'fleet');
  stopped = true;
  await step('stop-a');
  await until('the status line to say stale', 8000, () => page.$eval('#status', (e) => e.dataset.state === 'error'));
  const line = await page.$eval('.status-line', (e) => e.textContent);
  if (!/stale/.test(line)) fail(`status line after the stop: ${line}`);
  await screenshot(page, 'wide-stale');
  checkProblems('the stop');
  console.log(`status after the stop: ${line.replace(/\s+/g, ' ').trim()}`);
  for (const s of shots) console.log(`screenshot ${s}`);
  console.log('console ok');
} catch (e) {
  console.log(`FAIL: ${e.message}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  rmSync(profile, { recursive: true, force: true });
  process.exit();
}
