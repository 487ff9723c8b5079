// The /segments page in Debian's headless Chromium, driven by puppeteer-core (no browser
// download: the system's /usr/bin/chromium). Run by segments_page.py, which starts the server and
// creates the tags; this script talks to that server and the page only.
//
// Usage: node segments_page.mjs BASE_URL SERVED_TAG IDLE_TAG SCREENSHOT.png
//
// Checks, in order:
//   1. the page loads, asks nothing of any other origin and logs no error;
//   2. it lists both tags: SERVED_TAG with its buffers, IDLE_TAG (never served) with "-";
//   3. after IDs of SERVED_TAG are taken (here, over HTTP), its "issued" number grows by at
//      least as many and its "remaining" number changes, without a reload;
//   4. writes SCREENSHOT.png, prints "phase1 ok" and waits for a line on stdin (the caller stops
//      the server meanwhile); then the status must turn to "error" (the page says it is stale
//      instead of showing old numbers as current).
import { createInterface } from 'node:readline';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer from 'puppeteer-core';

const [base, servedTag, idleTag, screenshot] = process.argv.slice(2);
if (!screenshot) {
  console.error('usage: node segments_page.mjs BASE_URL SERVED_TAG IDLE_TAG SCREENSHOT.png');
  process.exit(2);
}
const origin = new URL(base).origin;
const chromium = process.env.CHROMIUM || '/usr/bin/chromium';

function fail(message) {
  throw new Error(message);
}

// The text of one cell of a tag's row, or null when the row or cell is missing.
async function cell(page, tag, field) {
  return page.evaluate(
    (t, f) => {
      const row = [...document.querySelectorAll('#tags tr[data-tag]')].find((r) => r.dataset.tag === t);
      const c = row && row.querySelector(`[data-field="${f}"]`);
      return c ? c.textContent.trim() : null;
    },
    tag,
    field,
  );
}

async function number(page, tag, field) {
  const text = await cell(page, tag, field);
  if (text === null || !/^\d+$/.test(text)) fail(`${tag} ${field}: expected a plain number, got ${JSON.stringify(text)}`);
  return Number(text);
}

// Polls `predicate` (async) every 100 ms until it is true or `ms` pass.
async function until(what, ms, predicate) {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await predicate()) return;
    if (Date.now() > deadline) fail(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function takeIds(count) {
  const res = await fetch(`${base}/v1/segments/${servedTag}/ids?count=${count}`);
  if (res.status !== 200) fail(`GET ids: status ${res.status}: ${await res.text()}`);
  const body = await res.json();
  if (!Array.isArray(body.ids) || body.ids.length !== count) fail(`GET ids: ${JSON.stringify(body).slice(0, 200)}`);
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
  const page = await browser.newPage();
  await page.setViewport({ width: 1280, height: 600 });
  const problems = [];
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.on('console', (m) => {
    if (m.type() === 'error') problems.push(`console error: ${m.text()}`);
  });
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith('data:') && new URL(url).origin !== origin) problems.push(`request to another origin: ${url}`);
  });
  page.on('requestfailed', (r) => problems.push(`request failed: ${r.url()} ${r.failure()?.errorText}`));
  page.on('response', (r) => {
    if (r.status() >= 400) problems.push(`HTTP ${r.status()} for ${r.url()}`);
  });

  const res = await page.goto(`${base}/segments`, { waitUntil: 'load' });
  if (res.status() !== 200) fail(`GET /segments: status ${res.status()}`);
  if (!/text\/html/.test(res.headers()['content-type'] || '')) fail(`GET /segments: content-type ${res.headers()['content-type']}`);

  await until(`the rows of ${servedTag} and ${idleTag}`, 10000, async () =>
    (await cell(page, servedTag, 'tag')) === servedTag && (await cell(page, idleTag, 'tag')) === idleTag);
  await until('status ok', 5000, async () => (await page.$eval('#status', (e) => e.dataset.state)) === 'ok');

  const idleCurrent = await cell(page, idleTag, 'current');
  if (idleCurrent !== '-') fail(`${idleTag} was never served, yet its current buffer shows ${JSON.stringify(idleCurrent)}`);
  if ((await number(page, idleTag, 'issued')) !== 0) fail(`${idleTag}: issued is not 0`);

  // Wait for the served tag to show its buffer and a settled count (the caller took some IDs).
  await until(`${servedTag} current buffer`, 10000, async () => (await cell(page, servedTag, 'current')) !== '-');
  const issuedBefore = await number(page, servedTag, 'issued');
  const remainingBefore = await number(page, servedTag, 'remaining');
  const take = 250;
  await takeIds(take);
  await until(`${servedTag} issued to reach ${issuedBefore + take}`, 10000, async () =>
    (await number(page, servedTag, 'issued')) >= issuedBefore + take);
  await until(`${servedTag} remaining to move from ${remainingBefore}`, 10000, async () =>
    (await number(page, servedTag, 'remaining')) !== remainingBefore);
  const issuedAfter = await number(page, servedTag, 'issued');
  const remainingAfter = await number(page, servedTag, 'remaining');
  const step = await cell(page, servedTag, 'step');
  if (!/^\d+$/.test(step || '')) fail(`${servedTag} step: ${JSON.stringify(step)}`);
  if (!(await cell(page, servedTag, 'last_fetch'))) fail(`${servedTag}: no last fetch shown`);

  if (problems.length) fail(problems.join('\n'));
  await page.screenshot({ path: screenshot, fullPage: true });
  console.log(`issued ${issuedBefore} -> ${issuedAfter}, remaining ${remainingBefore} -> ${remainingAfter}, step ${step}`);
  console.log('phase1 ok');

  // Phase 2: the caller stops the server; the page must say so.
  const rl = createInterface({ input: process.stdin });
  await new Promise((resolve) => rl.once('line', resolve));
  rl.close();
  await until('status error after the server stopped', 10000, async () =>
    (await page.$eval('#status', (e) => e.dataset.state)) === 'error');
  console.log('phase2 ok');
} catch (e) {
  console.error(`FAIL: ${e.message}`);
  process.exitCode = 1;
} finally {
  if (browser) await browser.close();
  rmSync(profile, { recursive: true, force: true });
}
