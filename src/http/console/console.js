// The flurry console: one page over the JSON API (docs/operations.md "The console"). No framework,
// no build step, no request to any other origin. Everything the server sends is put into the page
// with textContent / createElement, never parsed as HTML.
"use strict";
(function () {
  const REFRESH_MS = 2000;
  const TOKEN_KEY = "flurry.console.token";
  const MAX_EVENTS = 512;
  const SECTIONS = ["fleet", "node", "tags", "decode", "events"];
  const LEVELS = { info: 0, warning: 1, error: 2 };

  const $ = (id) => document.getElementById(id);

  // ---- small DOM helpers ----

  // An element with text content (a string, a number or null for "-") and attributes.
  function el(tag, text, attrs) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text === null ? "-" : String(text);
    if (attrs) {
      for (const [k, v] of Object.entries(attrs)) {
        if (k === "class") e.className = v;
        else if (k.startsWith("data-")) e.dataset[k.slice(5).replace(/-([a-z])/g, (_, c) => c.toUpperCase())] = v;
        else e.setAttribute(k, v);
      }
    }
    return e;
  }

  function setText(node, text) {
    const value = text === null || text === undefined ? "-" : String(text);
    if (node.textContent !== value) node.textContent = value;
  }

  function clear(node) {
    while (node.firstChild) node.removeChild(node.firstChild);
  }

  function showError(id, message) {
    const e = $(id);
    if (!e) return;
    e.hidden = !message;
    setText(e, message || "");
  }

  function seconds(ms) {
    if (ms === null || ms === undefined) return "-";
    if (ms < 10000) return (ms / 1000).toFixed(1) + " s";
    if (ms < 120000) return Math.round(ms / 1000) + " s";
    if (ms < 7200000) return Math.round(ms / 60000) + " min";
    return (ms / 3600000).toFixed(1) + " h";
  }

  // ---- the token ----

  function token() {
    try {
      return sessionStorage.getItem(TOKEN_KEY) || "";
    } catch (ignored) {
      return "";
    }
  }

  function showTokenState() {
    setText($("token-state"), token() ? "token set (this tab only)" : "no token");
  }

  // ---- requests ----

  // A failed HTTP exchange: `status` 0 when the server did not answer at all.
  class ApiError extends Error {
    constructor(status, message, body) {
      super(message);
      this.status = status;
      this.body = body || null;
    }
  }

  // The problem of an API error body as one line: "HTTP 401 UNAUTHENTICATED (TOKEN_MISSING): ...".
  function describe(status, body) {
    let text = "HTTP " + status;
    const e = body && body.error;
    if (e) {
      if (e.code) text += " " + e.code;
      if (e.reason) text += " (" + e.reason + ")";
      if (e.message) text += ": " + e.message;
    }
    if (status === 401 || status === 403) text += token() ? " [check the token]" : " [enter a token above]";
    return text;
  }

  let serverAnswered = false;  // in the current refresh round
  let serverSilent = false;

  async function api(path, options) {
    const headers = { Accept: "application/json" };
    const t = token();
    if (t) headers.Authorization = "Bearer " + t;
    const init = { cache: "no-store", headers, credentials: "omit", redirect: "error" };
    if (options && options.body !== undefined) {
      init.method = "POST";
      init.body = options.body;
      headers["Content-Type"] = "application/json";
    }
    let response;
    try {
      response = await fetch(path, init);
    } catch (e) {
      serverSilent = true;
      throw new ApiError(0, "the server is not answering");
    }
    serverAnswered = true;
    let body = null;
    try {
      body = await response.json();
    } catch (ignored) {
      body = null;
    }
    if (!response.ok) throw new ApiError(response.status, describe(response.status, body), body);
    if (body === null) throw new ApiError(response.status, "HTTP " + response.status + ": not JSON");
    return body;
  }

  function message(e) {
    return e instanceof ApiError ? e.message : "error: " + (e && e.message ? e.message : String(e));
  }

  // ---- sections (a nav of anchors: #fleet, #node, ...) ----

  function showSection() {
    const wanted = location.hash.slice(1);
    const current = SECTIONS.includes(wanted) ? wanted : "fleet";
    for (const name of SECTIONS) {
      $(name).hidden = name !== current;
      const tab = $("tab-" + name);
      if (name === current) tab.setAttribute("aria-current", "page");
      else tab.removeAttribute("aria-current");
    }
    document.body.dataset.section = current;
    if (current === "node" && lastActivity) drawChart(lastActivity);
  }

  // ---- live countdowns (lease remaining) ----

  // Elements showing a remaining time counted down from when the answer came:
  // data-deadline = performance.now() + remaining ms.
  function countdowns() {
    const now = performance.now();
    for (const e of document.querySelectorAll("[data-deadline]")) {
      const left = Math.max(0, Number(e.dataset.deadline) - now);
      e.dataset.remainingMs = String(Math.round(left));
      setText(e, left > 0 ? seconds(left) : "expired");
    }
  }

  function countdown(node, remainingMs, at) {
    node.dataset.deadline = String(at + remainingMs);
    const left = Math.max(0, remainingMs - (performance.now() - at));
    node.dataset.remainingMs = String(Math.round(left));
    setText(node, left > 0 ? seconds(left) : "expired");
  }

  // ---- Fleet ----

  async function refreshFleet() {
    let fleet;
    try {
      fleet = await api("/v1/nodes");
    } catch (e) {
      showError("fleet-error", message(e));
      if (e.status !== 0) clear($("fleet-rows"));
      throw e;
    }
    const at = performance.now();
    showError("fleet-error", "");
    setText($("fleet-registry"), fleet.registry + "  layout " + fleet.layout);
    const tbody = $("fleet-rows");
    clear(tbody);
    for (const n of fleet.nodes) {
      const tr = el("tr", undefined, { "data-node": String(n.node), "data-state": n.state });
      if (n.this_process) {
        tr.classList.add("this-process");
        tr.dataset.thisProcess = "true";
      }
      const node = el("td", undefined, { "data-field": "node" });
      node.appendChild(document.createTextNode(String(n.node)));
      if (n.this_process) {
        node.appendChild(document.createTextNode(" "));
        node.appendChild(el("span", "this process", { class: "badge", "data-marker": "this-process" }));
      }
      tr.appendChild(node);
      const state = el("td", undefined, { "data-field": "state" });
      state.appendChild(el("span", n.state, { class: "badge state-" + n.state }));
      tr.appendChild(state);
      tr.appendChild(el("td", n.owner || "-", { "data-field": "owner" }));
      tr.appendChild(el("td", n.token, { "data-field": "token", class: "num" }));
      const remaining = el("td", undefined, { "data-field": "remaining", class: "num" });
      if (n.state === "live" && n.lease_remaining_ms !== null && n.lease_remaining_ms !== undefined) {
        countdown(remaining, n.lease_remaining_ms, at);
        remaining.title = "expires " + n.lease_expires;
      } else {
        setText(remaining, n.state === "live" ? "never expires" : "free");
      }
      tr.appendChild(remaining);
      let horizon = "-";
      if (n.horizon_error) horizon = "unreadable: " + n.horizon_error;
      else if (n.horizon && n.horizon.time) horizon = n.horizon.time + (n.horizon.generation ? " (gen " + n.horizon.generation + ")" : "");
      else if (n.horizon) horizon = "unused";
      tr.appendChild(el("td", horizon, { "data-field": "horizon" }));
      tbody.appendChild(tr);
    }
  }

  // ---- This node ----

  let layout = null;  // GET /v1/layout, once

  function drawLayout(l) {
    const bar = $("layout-bar");
    clear(bar);
    const fields = l.fields.slice().sort((a, b) => b.shift - a.shift);
    const parts = [];
    if (l.bits < 64) parts.push({ name: "unused", bits: 64 - l.bits, kind: "unused" });
    for (const f of fields) parts.push(f);
    const names = [];
    for (const f of parts) {
      const div = el("div", undefined, { class: "f-" + f.kind, "data-field": f.name });
      div.style.flexGrow = String(f.bits);
      div.style.flexBasis = "0";
      div.appendChild(el("div", f.name));
      div.appendChild(el("div", f.bits + " bits"));
      div.title = f.name + ": " + f.bits + " bits";
      bar.appendChild(div);
      names.push(f.name + " " + f.bits + " bits");
    }
    bar.setAttribute("aria-label", "the 64 bits of an ID, from the top: " + names.join(", "));
    setText($("layout-text"), l.text);
  }

  let lastActivity = null;

  function drawChart(activity) {
    lastActivity = activity;
    const box = $("activity-chart");
    const series = activity.series || [];
    const perSecond = 1000 / (activity.interval_ms || 1000);
    const n = series.length ? series[0].ids.length : 0;
    const rates = series.map((s) => s.ids.map((v) => v * perSecond));
    let max = 0;
    for (const r of rates) for (const v of r) max = Math.max(max, v);
    // A round top for the y axis: 1, 2 or 5 times a power of ten.
    let top = 1;
    while (top < max) {
      const p = Math.pow(10, Math.floor(Math.log10(top)));
      top = top === p ? 2 * p : top === 2 * p ? 5 * p : 10 * p;
    }
    // Drawn in the box's own pixels (when shown), so that the labels keep their size on a phone.
    const W = Math.max(300, Math.min(760, Math.round(box.clientWidth) || 640));
    const H = 200, L = 56, R = 10, T = 10, B = 28;
    const NS = "http://www.w3.org/2000/svg";
    const svg = document.createElementNS(NS, "svg");
    svg.setAttribute("viewBox", "0 0 " + W + " " + H);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-labelledby", "activity-title");
    svg.setAttribute("aria-describedby", "activity-summary");
    const add = (name, attrs, text) => {
      const e = document.createElementNS(NS, name);
      for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, String(v));
      if (text !== undefined) e.textContent = text;
      svg.appendChild(e);
      return e;
    };
    const span = Math.max(1, n - 1);
    const x = (i) => L + (W - L - R) * (n <= 1 ? 1 : i / span);
    const y = (v) => T + (H - T - B) * (1 - v / top);
    for (const frac of [0, 0.5, 1]) {
      add("line", { x1: L, x2: W - R, y1: y(top * frac), y2: y(top * frac), class: frac === 0 ? "axis" : "grid" });
      add("text", { x: L - 6, y: y(top * frac) + 4, "text-anchor": "end" }, compact(top * frac));
    }
    add("line", { x1: L, x2: L, y1: T, y2: H - B, class: "axis" });
    const seconds = Math.round((n * (activity.interval_ms || 1000)) / 1000);
    add("text", { x: L, y: H - 8, "text-anchor": "start" }, n ? "-" + seconds + " s" : "");
    add("text", { x: W - R, y: H - 8, "text-anchor": "end" }, "now");
    add("text", { x: (L + W) / 2, y: H - 8, "text-anchor": "middle" }, "IDs/s");
    rates.forEach((r, k) => {
      if (!r.length) return;
      const points = r.map((v, i) => x(i).toFixed(1) + "," + y(v).toFixed(1)).join(" ");
      add("polyline", { points, class: "s" + (k % 3), "data-series": series[k].name });
    });
    clear(box);
    box.appendChild(svg);
    const legend = el("ul", undefined, { class: "legend" });
    const summary = [];
    rates.forEach((r, k) => {
      const last = r.length ? r[r.length - 1] : 0;
      const peak = r.reduce((a, b) => Math.max(a, b), 0);
      const total = series[k].ids.reduce((a, b) => a + b, 0);
      const li = el("li");
      li.appendChild(el("span", "", { class: "swatch s" + (k % 3), "aria-hidden": "true" }));
      li.appendChild(document.createTextNode(series[k].name + ": " + compact(last) + "/s now"));
      legend.appendChild(li);
      summary.push(series[k].name + " " + total + " IDs (peak " + compact(peak) + "/s, last " + compact(last) + "/s)");
    });
    box.appendChild(legend);
    setText($("activity-summary"), n ? "Over the last " + seconds + " s: " + summary.join("; ") + "." : "No samples yet.");
  }

  function compact(v) {
    if (v >= 1e6) return (v / 1e6).toFixed(v >= 1e7 ? 0 : 1) + "M";
    if (v >= 1e3) return (v / 1e3).toFixed(v >= 1e4 ? 0 : 1) + "k";
    return String(Math.round(v));
  }

  async function refreshNode() {
    let s;
    try {
      s = await api("/v1/status");
    } catch (e) {
      showError("node-error", message(e));
      throw e;
    }
    const at = performance.now();
    showError("node-error", "");
    const ready = $("readiness");
    ready.dataset.ready = s.ready ? "true" : "false";
    if (s.ready) {
      setText(ready, "ready");
    } else {
      const r = s.readiness || {};
      setText(ready, "NOT READY: " + (r.reason || r.code || "?") + (r.message ? ": " + r.message : ""));
    }
    if (s.layout && (!layout || layout.text !== s.layout.text)) {
      layout = s.layout;
      fillEncodings();
    }
    if (s.layout) drawLayout(s.layout);
    setText($("node-id"), s.node + " (token " + s.token + ")");
    setText($("node-owner"), s.owner);
    setText($("node-version"), s.version);
    setText($("node-uptime"), seconds(s.uptime_ms));
    const c = s.clock || {};
    const lead = Math.max(0, c.lead_ms || 0);
    const gauge = $("lead-gauge");
    gauge.max = c.max_lead_ms || 1;
    gauge.value = Math.min(lead, gauge.max);
    gauge.high = gauge.max * 0.75;
    setText($("lead-text"), lead.toFixed(1) + " ms of max_lead " + c.max_lead_ms + " ms (horizon " +
      Math.round(c.horizon_ahead_ms || 0) + " ms ahead; steps detected " + (c.steps_detected || 0) + ")");
    setText($("node-generation"), c.generation);
    setText($("node-rollback"), c.rollback + " (max wait " + c.max_wait_ms + " ms; waits " + c.rollback_waits +
      ", refusals " + c.rollback_failures + ", switches " + c.clock_switches + ")");
    const th = s.throttling || {};
    setText($("node-throttling"), (th.active ? "ACTIVE" : "no") + " (waits " + th.waits_total + ")");
    const lease = s.lease || {};
    const leaseNode = $("node-lease");
    clear(leaseNode);
    leaseNode.appendChild(document.createTextNode(lease.state + ", remaining "));
    const rem = el("span");
    if (lease.remaining_ms === null || lease.remaining_ms === undefined) setText(rem, "never expires");
    else countdown(rem, lease.remaining_ms, at);
    leaseNode.appendChild(rem);
    leaseNode.appendChild(document.createTextNode(" (ttl " + lease.ttl_ms + " ms, renewals " + lease.renewals +
      ", failures " + lease.renewal_failures + ")"));
    const seg = s.segments || {};
    setText($("node-segments"), seg.served ? "served: " + (seg.stores || []).join(", ") : "not served");
    setText($("stores"), seg.served ? (seg.stores || []).join(", ") : "segment mode is off");
    setText($("node-orders"), s.order_numbers && s.order_numbers.served ? "served" : "not served");
    if (s.activity) drawChart(s.activity);
  }

  // ---- Tags ----

  const TAG_FIELDS = ["tag", "description", "current", "next", "step", "remaining", "issued", "last_fetch", "fetch_ms", "errors"];
  const NUMERIC = new Set(["step", "remaining", "issued", "fetch_ms", "errors"]);

  function buffer(b) {
    return b ? b.start + ".." + b.end + " (" + b.remaining + " left)" : "-";
  }

  // The most recently fetched of the two buffers.
  function latest(state) {
    const a = state.current, b = state.next;
    if (a && b) return b.fetched_at > a.fetched_at ? b : a;
    return a || b || null;
  }

  function tagRow(tbody, tag) {
    for (const tr of tbody.rows) if (tr.dataset.tag === tag) return tr;
    const tr = el("tr", undefined, { "data-tag": tag });
    for (const f of TAG_FIELDS) {
      const cls = NUMERIC.has(f) ? "num" : f === "description" ? "wrap" : "";
      tr.appendChild(el("td", "", { "data-field": f, class: cls }));
    }
    return tr;
  }

  function cell(tr, field, text, title) {
    const td = tr.querySelector('td[data-field="' + field + '"]');
    setText(td, text);
    if (title !== undefined) td.title = title;
    return td;
  }

  async function refreshTags() {
    let states;
    try {
      const list = await api("/v1/segments");
      states = await Promise.all(list.tags.map((t) => api("/v1/segments/" + encodeURIComponent(t.tag)).then(
        (s) => ({ s, row: t }))));
    } catch (e) {
      if (e.status === 404) {
        // Segment mode is off: nothing to show, nothing failed.
        showError("tags-error", "segment mode is off on this server");
        clear($("tags-rows"));
        return;
      }
      showError("tags-error", message(e));
      throw e;
    }
    showError("tags-error", "");
    const tbody = $("tags-rows");
    const keep = new Set(states.map((x) => x.s.tag));
    for (const tr of Array.from(tbody.rows)) if (!keep.has(tr.dataset.tag)) tr.remove();
    for (const { s, row } of states) {
      const tr = tagRow(tbody, s.tag);
      const last = latest(s);
      const description = s.stored ? s.stored.description : row.description;
      cell(tr, "tag", s.tag);
      cell(tr, "description", description || "");
      cell(tr, "current", buffer(s.current), s.current ? s.current.store : "");
      cell(tr, "next", buffer(s.next), s.next ? s.next.store : s.fetching ? "fetching" : "");
      cell(tr, "step", s.step);
      cell(tr, "remaining", s.remaining);
      cell(tr, "issued", s.ids_issued);
      cell(tr, "last_fetch", last ? last.fetched_at : "-");
      cell(tr, "fetch_ms", last ? last.fetch_ms.toFixed(2) : "-");
      const errors = cell(tr, "errors", s.store_errors > 0 && s.last_error ? s.store_errors + ": " + s.last_error : s.store_errors);
      errors.classList.toggle("has-errors", s.store_errors > 0);
      errors.classList.toggle("wrap", s.store_errors > 0);
      tbody.appendChild(tr);  // in the list's order (by name)
    }
    $("tags-empty").hidden = states.length > 0;
  }

  async function createTag(event) {
    event.preventDefault();
    const out = $("create-result");
    out.className = "";
    const body = { tag: $("create-tag").value.trim() };
    for (const [key, id] of [["start", "create-start"], ["step", "create-step"]]) {
      const text = $(id).value.trim();
      if (!text) continue;
      if (!/^\d+$/.test(text)) {
        out.className = "error";
        setText(out, key + ": " + JSON.stringify(text) + " is not a whole number");
        return;
      }
      body[key] = Number(text);
    }
    const description = $("create-description").value;
    if (description) body.description = description;
    try {
      const row = await api("/v1/segments", { body: JSON.stringify(body) });
      setText(out, "created tag " + row.tag + " (starts at " + row.max_id + ", step " + row.step + ")");
      refreshTags().catch(() => {});
    } catch (e) {
      out.className = "error";
      setText(out, message(e));
    }
  }

  // ---- Decode ----

  function fillEncodings() {
    const select = $("decode-encoding");
    const chosen = select.value;
    while (select.options.length > 1) select.remove(1);
    for (const name of (layout && layout.encodings) || ["dec", "hex", "base32", "base62"]) {
      select.appendChild(el("option", name, { value: name }));
    }
    select.value = Array.from(select.options).some((o) => o.value === chosen) ? chosen : "auto";
  }

  // A table of a decoded ID's members in the answer's order: data-key "id", "time", "fields.node",
  // "encodings.hex", ... (an object's members one row each).
  function decodedTable(d) {
    const table = el("table", undefined, { class: "fields" });
    const tbody = el("tbody");
    const row = (key, value) => {
      const tr = el("tr", undefined, { "data-key": key });
      tr.appendChild(el("th", key, { scope: "row" }));
      tr.appendChild(el("td", value, { class: "mono", "data-key": key }));
      tbody.appendChild(tr);
    };
    for (const [key, value] of Object.entries(d)) {
      if (value !== null && typeof value === "object") {
        for (const [k, v] of Object.entries(value)) row(key + "." + k, v);
      } else {
        row(key, value);
      }
    }
    table.appendChild(tbody);
    return table;
  }

  function decodePath(text, encoding) {
    return "/v1/ids/" + encodeURIComponent(text) + (encoding === "dec" ? "" : "?encoding=" + encodeURIComponent(encoding));
  }

  async function decodeId(event) {
    event.preventDefault();
    const out = $("decode-result");
    clear(out);
    const text = $("decode-id").value.trim();
    const encoding = $("decode-encoding").value;
    out.dataset.state = "busy";
    try {
      let d, used = encoding, others = [];
      if (encoding === "auto") {
        // The server tries every encoding of its layout and says which one it read the text in
        // (the one whose canonical form the text is, else the wide form, else the first).
        const found = await api(decodePath(text, "auto"));
        used = found.encoding;
        others = found.also_valid_in;
        d = Object.assign({}, found);
        delete d.encoding;
        delete d.also_valid_in;
      } else {
        d = await api(decodePath(text, encoding));
      }
      const p = el("p", undefined, { class: "result" });
      p.appendChild(document.createTextNode("decoded as "));
      p.appendChild(el("strong", used, { id: "decode-used" }));
      if (encoding === "auto") {
        p.appendChild(document.createTextNode(others.length ? " (auto; also valid as " : " (auto; valid in no other encoding)"));
        if (others.length) {
          p.appendChild(el("span", others.join(", "), { id: "decode-others" }));
          p.appendChild(document.createTextNode(")"));
        }
      }
      out.appendChild(p);
      const scroll = el("div", undefined, { class: "scroll" });
      scroll.appendChild(decodedTable(d));
      out.appendChild(scroll);
      out.dataset.state = "ok";
    } catch (e) {
      out.appendChild(el("p", message(e), { class: "error" }));
      out.dataset.state = "error";
    }
  }

  async function decodeOrder(event) {
    event.preventDefault();
    const out = $("order-result");
    clear(out);
    const code = $("order-code").value.trim();
    const tag = $("order-tag").value.trim();
    out.dataset.state = "busy";
    try {
      const d = await api("/v1/order-numbers/" + encodeURIComponent(code) + (tag ? "?tag=" + encodeURIComponent(tag) : ""));
      const scroll = el("div", undefined, { class: "scroll" });
      scroll.appendChild(decodedTable(d));
      out.appendChild(scroll);
      out.dataset.state = "ok";
    } catch (e) {
      out.appendChild(el("p", message(e), { class: "error" }));
      const err = e.body && e.body.error;
      if (err && Number.isInteger(err.position) && err.position >= 1) {
        // The number as typed, the character at the error's 1-based position marked.
        const chars = Array.from(code);
        const p = el("p", undefined, { class: "typed", "aria-label": "the number, character " + err.position + " marked" });
        p.appendChild(document.createTextNode(chars.slice(0, err.position - 1).join("")));
        const mark = el("mark", chars[err.position - 1] !== undefined ? chars[err.position - 1] : "\u2423",
          { "data-position": String(err.position), title: "position " + err.position + (err.kind ? " (" + err.kind + ")" : "") });
        p.appendChild(mark);
        p.appendChild(document.createTextNode(chars.slice(err.position).join("")));
        out.appendChild(p);
      }
      out.dataset.state = "error";
    }
  }

  // ---- Events ----

  let events = [];  // oldest first
  let eventsSince = null;  // the last seq seen

  function detailsText(details) {
    if (!details || typeof details !== "object") return "";
    return Object.entries(details).map(([k, v]) => k + "=" + (typeof v === "string" ? v : JSON.stringify(v))).join(" ");
  }

  function renderEvents() {
    const min = $("events-level").value;
    const tbody = $("events-rows");
    clear(tbody);
    let shown = 0;
    for (let i = events.length - 1; i >= 0; --i) {
      const ev = events[i];
      if (min && (LEVELS[ev.level] || 0) < LEVELS[min]) continue;
      const tr = el("tr", undefined, { "data-seq": String(ev.seq), "data-kind": ev.kind, "data-level": ev.level });
      const level = el("td", undefined, { "data-field": "level" });
      level.appendChild(el("span", ev.level, { class: "badge level-" + ev.level }));
      tr.appendChild(level);
      tr.appendChild(el("td", ev.time, { "data-field": "time" }));
      tr.appendChild(el("td", ev.kind, { "data-field": "kind" }));
      tr.appendChild(el("td", ev.node, { "data-field": "node", class: "num" }));
      tr.appendChild(el("td", ev.message, { "data-field": "message", class: "wrap" }));
      tr.appendChild(el("td", detailsText(ev.details), { "data-field": "details", class: "wrap mono" }));
      tbody.appendChild(tr);
      ++shown;
    }
    setText($("events-count"), shown + " of " + events.length + " shown");
  }

  async function refreshEvents() {
    let r;
    try {
      r = await api("/v1/events" + (eventsSince === null ? "" : "?since=" + eventsSince));
    } catch (e) {
      showError("events-error", message(e));
      throw e;
    }
    showError("events-error", r.dropped ? r.dropped + " older events were pushed out of the server's ring" : "");
    if (eventsSince !== null && r.next_seq - 1 < eventsSince) events = [];  // the server restarted
    if (r.events.length) {
      events = events.concat(r.events).slice(-MAX_EVENTS);
      renderEvents();
    } else if (!events.length) {
      renderEvents();
    }
    eventsSince = r.next_seq - 1;
  }

  // ---- the refresh loop ----

  let lastOk = null;

  async function refresh() {
    serverAnswered = false;
    serverSilent = false;
    const results = await Promise.allSettled([refreshFleet(), refreshNode(), refreshTags(), refreshEvents()]);
    const status = $("status");
    if (serverSilent && !serverAnswered) {
      status.dataset.state = "error";
      setText(status, "error");
      setText($("status-message"), "stale: the server is not answering" +
        (lastOk ? "; what is shown is from " + lastOk : ""));
      for (const name of SECTIONS) $(name).classList.add("stale");
    } else {
      lastOk = new Date().toISOString();
      const failed = results.filter((r) => r.status === "rejected").length;
      status.dataset.state = "ok";
      setText(status, "ok");
      setText($("status-message"), failed ? failed + " of 4 reads failed (see the sections)" : "");
      setText($("updated"), lastOk);
      for (const name of SECTIONS) $(name).classList.remove("stale");
    }
  }

  async function loop() {
    try {
      await refresh();
    } catch (e) {
      setText($("status-message"), message(e));
    } finally {
      setTimeout(loop, REFRESH_MS);
    }
  }

  async function loadLayout() {
    try {
      layout = await api("/v1/layout");
      fillEncodings();
    } catch (ignored) {
      setTimeout(loadLayout, REFRESH_MS);
    }
  }

  function start() {
    showSection();
    window.addEventListener("hashchange", showSection);
    showTokenState();
    $("token-form").addEventListener("submit", (event) => {
      event.preventDefault();
      const value = $("token").value.trim();
      try {
        if (value) sessionStorage.setItem(TOKEN_KEY, value);
      } catch (ignored) { /* storage off: the token stays unused */ }
      $("token").value = "";
      showTokenState();
      refresh().catch(() => {});
    });
    $("forget").addEventListener("click", () => {
      try {
        sessionStorage.removeItem(TOKEN_KEY);
      } catch (ignored) { /* nothing kept */ }
      $("token").value = "";
      showTokenState();
    });
    $("create-form").addEventListener("submit", createTag);
    $("decode-form").addEventListener("submit", decodeId);
    $("order-form").addEventListener("submit", decodeOrder);
    $("events-filter").addEventListener("submit", (event) => event.preventDefault());
    $("events-level").addEventListener("change", renderEvents);
    fillEncodings();
    loadLayout();
    setInterval(countdowns, 250);
    loop();
  }

  start();
})();
