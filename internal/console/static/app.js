// eve console: vanilla JavaScript over eve's public HTTP API (docs/http-api.md),
// on the API's own origin. The key lives in sessionStorage and goes out only
// as an Authorization header; streams are read with fetch(), never
// EventSource, so the key never enters a URL. Nothing here writes HTML from
// data: every text goes through textContent.

const KEY = "eve.console.key";
const PAGE_SIZE = 50; // inbox turns per page (the API's limit is 1000)
let config = { open: false, temporalUIWorkflowURL: "" };
let key = sessionStorage.getItem(KEY) || "";
let hints = null; // the inbox events stream
const hintListeners = new Set();

// ---------- DOM helpers ----------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") el.className = v;
    else if (k === "text") el.textContent = v;
    else if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "dataset") Object.assign(el.dataset, v);
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}
const $ = (sel, root = document) => root.querySelector(sel);
let uid = 0;
const nextId = (p) => `${p}-${++uid}`;

function announce(text) {
  const live = $("#live");
  live.textContent = "";
  live.textContent = text;
}

// json shows a value: on one line when short, else indented.
function json(v) {
  try {
    const one = JSON.stringify(v);
    return one && one.length <= 80 ? one : JSON.stringify(v, null, 2);
  } catch { return String(v); }
}

// ---------- time ----------

function ago(t) {
  const s = Math.max(0, Math.round((Date.now() - new Date(t).getTime()) / 1000));
  if (s < 60) return `${s}s ago`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s ago`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m ago`;
  return `${Math.floor(s / 86400)}d ago`;
}
// remaining never shows more time than is left: whole seconds, rounded down.
function remaining(t) {
  const s = Math.floor((new Date(t).getTime() - Date.now()) / 1000);
  if (s <= 0) return "expired";
  const d = Math.floor(s / 86400), hh = Math.floor((s % 86400) / 3600), m = Math.floor((s % 3600) / 60), ss = s % 60;
  if (d > 0) return `${d}d ${hh}h left`;
  if (hh > 0) return `${hh}h ${m}m left`;
  if (m > 0) return `${m}m ${ss}s left`;
  return `${ss}s left`;
}
// One clock for every age and countdown on the page (display only; no
// request is made on it).
function timeEl(kind, t) {
  const el = h("time", { datetime: t, class: kind, dataset: { clock: kind, at: t } });
  paintTime(el);
  return el;
}
function paintTime(el) {
  const t = el.dataset.at;
  if (el.dataset.clock === "deadline") {
    el.textContent = remaining(t);
    el.classList.toggle("soon", new Date(t).getTime() - Date.now() < 5 * 60 * 1000);
  } else {
    el.textContent = ago(t);
  }
  el.title = new Date(t).toLocaleString();
}
setInterval(() => document.querySelectorAll("[data-clock]").forEach(paintTime), 1000);

// ---------- the API ----------

class APIError extends Error {
  constructor(status, body) {
    super(body?.error || `HTTP ${status}`);
    this.status = status;
    this.code = body?.code || "";
    this.field = body?.field || "";
  }
}

function headers(extra) {
  const hd = new Headers(extra || {});
  if (key) hd.set("Authorization", "Bearer " + key);
  return hd;
}

async function api(path, { method = "GET", body, signal } = {}) {
  const opts = { method, headers: headers(), signal, cache: "no-store" };
  if (body !== undefined) {
    opts.headers.set("Content-Type", "application/json");
    opts.body = JSON.stringify(body);
  }
  const res = await fetch(path, opts);
  const text = await res.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { data = null; }
  if (!res.ok) {
    if (res.status === 401 && !config.open) signOut("Your key was refused: sign in again.");
    throw new APIError(res.status, data || { error: text.slice(0, 300) });
  }
  return data;
}

// lines reads a streaming response line by line until it ends or signal aborts.
async function lines(res, onLine) {
  const reader = res.body.getReader();
  const dec = new TextDecoder();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += dec.decode(value, { stream: true });
    let i;
    while ((i = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, i).replace(/\r$/, "");
      buf = buf.slice(i + 1);
      onLine(line);
    }
  }
  if (buf) onLine(buf);
}

const backoff = (n) => Math.min(10000, 500 * 2 ** Math.min(n, 5));
const wait = (ms, signal) => new Promise((done) => {
  const t = setTimeout(done, ms);
  signal?.addEventListener("abort", () => { clearTimeout(t); done(); }, { once: true });
});

// The inbox events stream (GET /eve/v1/inbox/events, text/event-stream)
// tells every page that sessions changed: a hint to re-read, so nothing
// polls per request.
function startHints() {
  if (hints) return;
  const ctl = new AbortController();
  hints = ctl;
  (async () => {
    let failures = 0;
    while (!ctl.signal.aborted) {
      try {
        const res = await fetch("/eve/v1/inbox/events", { headers: headers({ Accept: "text/event-stream" }), signal: ctl.signal, cache: "no-store" });
        if (!res.ok) throw new APIError(res.status, await res.json().catch(() => null));
        failures = 0;
        let event = "", data = "";
        await lines(res, (line) => {
          if (line === "") {
            if (event === "inbox") {
              let hint = {};
              try { hint = JSON.parse(data); } catch { /* a hint for everything */ }
              for (const fn of hintListeners) fn(hint);
            }
            event = ""; data = "";
          } else if (line.startsWith("event:")) event = line.slice(6).trim();
          else if (line.startsWith("data:")) data += line.slice(5).trim();
        });
      } catch (e) {
        if (ctl.signal.aborted) return;
        if (e instanceof APIError && e.status === 401) return;
        failures++;
      }
      await wait(backoff(failures), ctl.signal);
    }
  })();
}
function onHint(fn) {
  hintListeners.add(fn);
  return () => hintListeners.delete(fn);
}
// debounce runs fn once per burst of calls.
function debounce(fn, ms) {
  let t = null;
  return (...args) => { clearTimeout(t); t = setTimeout(() => fn(...args), ms); };
}

// ---------- sign-in ----------

function signOut(message) {
  key = "";
  sessionStorage.removeItem(KEY);
  hints?.abort();
  hints = null;
  route.cleanup?.();
  showSignin(message || "");
}

function showSignin(message) {
  $("#nav").hidden = true;
  $("#signout").hidden = true;
  $("#who").textContent = "";
  $("#page").replaceChildren();
  $("#signin").hidden = false;
  $("#signin-error").textContent = message;
  $("#key").focus();
}

async function signIn(candidate) {
  const before = key;
  key = candidate;
  try {
    const info = await fetch("/eve/v1/info", { headers: headers(), cache: "no-store" });
    if (info.status === 401 || info.status === 403) {
      const body = await info.json().catch(() => ({}));
      key = before;
      return `The key was refused (${info.status}${body.error ? ": " + body.error : ""}).`;
    }
    if (!info.ok) {
      key = before;
      return `The server answered ${info.status}; try again.`;
    }
    const data = await info.json();
    if (candidate) sessionStorage.setItem(KEY, candidate);
    signedIn(data);
    return "";
  } catch (e) {
    key = before;
    return "Could not reach the server: " + e.message;
  }
}

function signedIn(info) {
  $("#signin").hidden = true;
  $("#nav").hidden = false;
  $("#signout").hidden = config.open;
  $("#who").textContent = `agent ${info.agent?.name || "?"}${config.open ? " · open server (this machine only)" : ""}`;
  startHints();
  onRoute();
}

// ---------- routing ----------

const route = { cleanup: null };
const pages = { inbox: inboxPage, sessions: sessionsPage, session: sessionPage, jobs: jobsPage, decisions: decisionsPage };

function onRoute() {
  if (!key && !config.open) return;
  route.cleanup?.();
  route.cleanup = null;
  const [hashPath, hashQuery = ""] = (location.hash || "#/inbox").split("?");
  const [, name = "inbox", ...rest] = hashPath.split("/");
  const page = pages[name] ? name : "inbox";
  document.querySelectorAll("#nav a").forEach((a) => {
    const cur = a.dataset.page === page || (page === "session" && a.dataset.page === "sessions");
    if (cur) a.setAttribute("aria-current", "page"); else a.removeAttribute("aria-current");
  });
  const root = h("div", { class: "page", dataset: { page, state: "loading" } });
  $("#page").replaceChildren(root);
  const ctl = new AbortController();
  const cleanups = [() => ctl.abort()];
  route.cleanup = () => cleanups.forEach((f) => f());
  pages[page](root, { signal: ctl.signal, onCleanup: (f) => cleanups.push(f), args: rest.map(decodeURIComponent), params: new URLSearchParams(hashQuery) });
}

function setState(root, state) { root.dataset.state = state; }

function errorBox(e) {
  return h("p", { class: "error", role: "alert", text: e.status ? `${e.message} (${e.status}${e.code ? " " + e.code : ""})` : e.message });
}

// pager keeps the cursors of the pages before this one.
function pager(state, reload) {
  const prev = h("button", { type: "button", disabled: state.stack.length === 0, onclick: () => { state.cursor = state.stack.pop() || ""; reload(); } }, "← Previous page");
  const next = h("button", { type: "button", disabled: !state.next, onclick: () => { state.stack.push(state.cursor); state.cursor = state.next; reload(); } }, "Next page →");
  return h("nav", { class: "pager", "aria-label": "Pages of results" }, prev, h("span", { class: "muted small", text: `page ${state.stack.length + 1}` }), next);
}

function field(labelText, control) {
  const id = control.id || nextId("f");
  control.id = id;
  return h("div", {}, h("label", { for: id, text: labelText }), control);
}

function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== "" && v !== undefined && v !== null) u.set(k, v);
  const s = u.toString();
  return s ? "?" + s : "";
}

// ---------- schema forms ----------

// schemaFields lists a tool input's top-level fields: from its schema when
// known, else from the input itself.
function schemaFields(schema, input) {
  const props = schema?.properties || {};
  const names = Object.keys(props);
  for (const k of Object.keys(input || {})) if (!names.includes(k)) names.push(k);
  return names.map((name) => ({ name, schema: props[name] || {}, required: (schema?.required || []).includes(name) }));
}

function typeOf(s) {
  const t = Array.isArray(s.type) ? s.type.find((x) => x !== "null") : s.type;
  if (s.enum) return "enum";
  return t || "json";
}

function inputFields(schema, input) {
  const dl = h("dl", { class: "fields" });
  for (const f of schemaFields(schema, input)) {
    const v = input?.[f.name];
    dl.append(h("dt", { text: f.schema.title || f.name }), h("dd", { class: typeof v === "object" ? "mono" : "" , text: v === undefined ? "—" : typeof v === "object" ? JSON.stringify(v) : String(v) }));
  }
  return dl;
}

// editForm builds a form from the input schema. The page checks what a form
// can (required fields, types, enums) beside each field; the server checks
// the whole schema and its 422 names the field, shown beside it too.
function editForm(schema, input, onSubmit, onCancel) {
  const controls = {};
  const errors = {};
  const form = h("form", { class: "editor", novalidate: true, "aria-label": "Edit the input" });
  const fields = schemaFields(schema, input);
  for (const f of fields) {
    const id = nextId("edit");
    const errId = id + "-err";
    const t = typeOf(f.schema);
    const v = input?.[f.name];
    let c;
    if (t === "boolean") {
      c = h("input", { id, type: "checkbox", name: f.name, "aria-describedby": errId });
      c.checked = !!v;
    } else if (t === "enum") {
      c = h("select", { id, name: f.name, "aria-describedby": errId }, h("option", { value: "", text: "—" }), ...f.schema.enum.map((e) => h("option", { value: JSON.stringify(e), text: String(e) })));
      c.value = v === undefined ? "" : JSON.stringify(v);
    } else if (t === "number" || t === "integer") {
      c = h("input", { id, type: "text", inputmode: "decimal", name: f.name, "aria-describedby": errId });
      c.value = v === undefined ? "" : String(v);
    } else if (t === "string") {
      c = h("input", { id, type: "text", name: f.name, "aria-describedby": errId });
      c.value = v === undefined ? "" : String(v);
    } else {
      c = h("textarea", { id, name: f.name, class: "mono", "aria-describedby": errId });
      c.value = v === undefined ? "" : JSON.stringify(v, null, 2);
    }
    controls[f.name] = { c, t, f };
    errors[f.name] = h("p", { class: "field-error", id: errId, role: "alert" });
    const label = h("label", { for: id }, f.schema.title || f.name, f.required ? " *" : "");
    form.append(h("div", { class: "edit-field", dataset: { field: f.name } }, label,
      f.schema.description ? h("div", { class: "muted small", text: f.schema.description }) : null, c, errors[f.name]));
  }
  const general = h("p", { class: "error", role: "alert" });
  form.append(general, h("div", { class: "row" },
    h("button", { type: "submit", class: "primary" }, "Approve with these changes"),
    h("button", { type: "button", onclick: onCancel }, "Cancel edit")));

  const setError = (name, msg) => {
    const e = errors[name];
    if (e) {
      e.textContent = msg;
      controls[name].c.setAttribute("aria-invalid", msg ? "true" : "false");
    }
  };
  const read = () => {
    const out = {};
    let ok = true;
    for (const [name, { c, t, f }] of Object.entries(controls)) {
      setError(name, "");
      const raw = c.type === "checkbox" ? c.checked : c.value.trim();
      if (raw === "" && t !== "boolean") {
        if (f.required) { setError(name, `${name} is required`); ok = false; }
        continue;
      }
      if (t === "number" || t === "integer") {
        const n = Number(raw);
        if (!Number.isFinite(n) || (t === "integer" && !Number.isInteger(n))) { setError(name, `${name} must be ${t === "integer" ? "an integer" : "a number"}`); ok = false; continue; }
        out[name] = n;
      } else if (t === "enum") out[name] = JSON.parse(raw);
      else if (t === "string") out[name] = raw;
      else if (t === "boolean") out[name] = raw;
      else {
        try { out[name] = JSON.parse(raw); } catch { setError(name, `${name} must be JSON`); ok = false; }
      }
    }
    return ok ? out : null;
  };
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    general.textContent = "";
    const value = read();
    if (!value) { form.querySelector('[aria-invalid="true"]')?.focus(); return; }
    try {
      await onSubmit(value);
    } catch (e) {
      const name = (e.field || "").replace(/^\//, "").split("/")[0];
      const status = `${e.status || ""}${e.code ? " " + e.code : ""}`;
      if (name && errors[name]) {
        // The server's message beside the field it names.
        setError(name, e.message);
        controls[name].c.focus();
        general.textContent = `The server refused the edit (${status}): see ${name} above.`;
      } else {
        general.textContent = `The server refused the edit (${status}): ${e.message}`;
      }
    }
  });
  return form;
}

// ---------- answering a request (inbox and transcript) ----------

// answerControls renders the ways to settle one request. send(answer)
// posts {optionId, text, input}; it throws an APIError on refusal.
function answerControls(req, { editable, schema, send, done }) {
  const box = h("div", { class: "answer" });
  const error = h("p", { class: "error", role: "alert" });
  const run = async (answer, button) => {
    error.textContent = "";
    box.querySelectorAll("button").forEach((b) => (b.disabled = true));
    try {
      await send(answer);
      announce("Answer sent");
      done?.(answer);
    } catch (e) {
      error.textContent = `${e.message}${e.status ? ` (${e.status}${e.code ? " " + e.code : ""})` : ""}`;
      box.querySelectorAll("button").forEach((b) => (b.disabled = false));
      button?.focus();
    }
  };
  const options = req.options || [];
  if (req.kind === "tool-approval") {
    const approve = options.find((o) => o.id === "approve") || options.find((o) => o.style === "primary") || { id: "approve", label: "Approve" };
    const deny = options.find((o) => o.id === "cancel" || o.id === "deny") || options.find((o) => o.style === "danger") || { id: "cancel", label: "Deny" };
    const noteId = nextId("note");
    const note = h("textarea", { id: noteId, name: "note", placeholder: "Why (sent with a denial; the model reads it)" });
    const row = h("div", { class: "row" });
    const approveBtn = h("button", { type: "button", class: "primary", onclick: () => run({ optionId: approve.id }, approveBtn) }, approve.label && approve.label !== "approve" ? approve.label : "Approve");
    const denyBtn = h("button", { type: "button", class: "danger", onclick: () => run({ optionId: deny.id, text: note.value.trim() || undefined }, denyBtn) }, "Deny");
    row.append(approveBtn, denyBtn);
    if (editable) {
      const editBtn = h("button", { type: "button", "aria-expanded": "false", onclick: () => {
        const open = editBtn.getAttribute("aria-expanded") === "true";
        editBtn.setAttribute("aria-expanded", String(!open));
        slot.replaceChildren();
        if (!open) {
          const form = editForm(schema, req.action?.input, (input) => send({ optionId: approve.id, input }).then(() => { announce("Approved with edits"); done?.({ optionId: approve.id, input }); }),
            () => { editBtn.click(); editBtn.focus(); });
          slot.append(form);
          form.querySelector("input, select, textarea")?.focus();
        }
      } }, "Edit input…");
      row.append(editBtn);
    }
    const slot = h("div");
    box.append(h("label", { for: noteId, text: "Note" }), note, row, slot, error);
  } else {
    const row = h("div", { class: "row", role: "group", "aria-label": "Options" });
    for (const o of options) {
      const b = h("button", { type: "button", class: o.style === "primary" ? "primary" : o.style === "danger" ? "danger" : "", title: o.description || "", onclick: () => run({ optionId: o.id }, b) }, o.label || o.id);
      row.append(b);
    }
    if (options.length) box.append(row);
    if (req.allowFreeform || !options.length || req.display === "text") {
      const id = nextId("free");
      const text = h("input", { id, type: "text", name: "text", autocomplete: "off" });
      const form = h("form", { class: "row", novalidate: true, onsubmit: (ev) => { ev.preventDefault(); if (text.value.trim()) run({ text: text.value.trim() }, sendBtn); } });
      const sendBtn = h("button", { type: "submit" }, "Send answer");
      form.append(text, sendBtn);
      box.append(h("label", { for: id, text: options.length ? "Or answer in your own words" : "Your answer" }), form);
    }
    box.append(error);
  }
  return box;
}

// ---------- Inbox ----------

function inboxPage(root, { signal, onCleanup, params }) {
  // #/inbox?limit=N reads N turns a page (1 to 1000; default PAGE_SIZE).
  const limit = Math.min(1000, Math.max(1, Number(params.get("limit")) || PAGE_SIZE));
  const state = { cursor: "", stack: [], next: "", filters: { tool: "", kind: "", requester: "" } };
  const tool = h("input", { type: "text", name: "tool", autocomplete: "off" });
  const requester = h("input", { type: "text", name: "requester", autocomplete: "off" });
  const kind = h("select", { name: "kind" }, h("option", { value: "", text: "any" }), h("option", { value: "tool-approval", text: "approval" }),
    h("option", { value: "question", text: "question" }), h("option", { value: "session-limit", text: "session limit" }));
  const filters = h("form", { class: "filters", role: "search", "aria-label": "Filter the inbox", onsubmit: (ev) => {
    ev.preventDefault();
    state.filters = { tool: tool.value.trim(), kind: kind.value, requester: requester.value.trim() };
    state.cursor = ""; state.stack = [];
    load();
  } }, field("Tool", tool), field("Kind", kind), field("Requester", requester),
  h("div", { class: "actions" }, h("button", { type: "submit" }, "Filter")));
  const list = h("div", { class: "items", "aria-label": "Open requests", role: "list" });
  const status = h("p", { class: "muted small", role: "status" });
  const pagerSlot = h("div");
  root.append(h("div", { class: "spread" }, h("h1", { text: "Inbox" }), h("span", { class: "muted small", text: "Updates live" })), filters, status, list, pagerSlot);

  let seq = 0;
  const load = async () => {
    const my = ++seq;
    try {
      const page = await api("/eve/v1/inbox" + qs({ ...state.filters, limit, cursor: state.cursor }), { signal });
      if (my !== seq) return;
      state.next = page.nextCursor || "";
      render(page.items);
      setState(root, "loaded");
    } catch (e) {
      if (signal.aborted) return;
      list.replaceChildren(errorBox(e));
      setState(root, "error");
    }
  };
  const render = (items) => {
    // Replace only what changed, and never a card someone is working in
    // (typed a note, opened the editor, or has focus in).
    const old = new Map([...list.children].map((c) => [c.dataset.id, c]));
    const busy = (c) => c.contains(document.activeElement) || [...c.querySelectorAll("textarea, input")].some((el) => el.value) || c.querySelector(".editor");
    const cards = items.map((it) => {
      const prev = old.get(it.id);
      return prev && (prev.dataset.sig === sig(it) || busy(prev)) ? prev : inboxCard(it, load);
    });
    // Move nothing that stays in order: moving an element drops its focus.
    cards.forEach((c, i) => { if (list.children[i] !== c) list.insertBefore(c, list.children[i] || null); });
    while (list.children.length > cards.length) list.lastElementChild.remove();
    status.textContent = items.length ? `${items.length} open request${items.length === 1 ? "" : "s"} on this page` : "No open requests.";
    if (state.stack.length === 0) $("#inbox-count").textContent = items.length ? String(items.length) + (state.next ? "+" : "") : "";
    pagerSlot.replaceChildren(state.stack.length || state.next ? pager(state, load) : "");
  };
  onCleanup(onHint(debounce(load, 150)));
  load();
}

const sig = (it) => JSON.stringify([it.id, it.deadline, it.escalatedAt, it.editable]);

function inboxCard(it, reload) {
  const req = it.request || {};
  const input = req.action?.input;
  const requester = it.requesterPrincipalId ? `${it.requesterPrincipalId}${it.requesterPrincipalType ? ` (${it.requesterPrincipalType})` : ""}` : "anonymous";
  const card = h("article", { class: "card item", role: "listitem", dataset: { id: it.id, sig: sig(it), kind: it.kind }, "aria-label": `${it.toolName || it.kind}: ${req.prompt || ""}` });
  card.append(
    h("div", { class: "spread" },
      h("h2", {}, it.toolName || (it.kind === "question" ? "Question" : it.kind)),
      h("span", { class: `badge ${it.kind}`, text: it.kind === "tool-approval" ? "approval" : it.kind })),
    h("p", { class: "prompt", text: req.prompt || "" }),
    h("div", { class: "meta" },
      h("span", {}, "requested by ", h("strong", { text: requester })),
      h("span", {}, "opened ", timeEl("age", it.openedAt)),
      it.deadline ? h("span", {}, "deadline ", timeEl("deadline", it.deadline)) : h("span", { text: "no deadline" }),
      it.escalatedAt ? h("span", { class: "badge", text: "escalated" }) : null,
      h("a", { href: `#/session/${encodeURIComponent(it.sessionId)}` }, "session")),
  );
  if (it.rootSessionId) card.append(originLine(it));
  if (input !== undefined && req.kind === "tool-approval") {
    card.append(h("h3", { text: "Input" }), inputFields(it.inputSchema, input),
      h("details", {}, h("summary", {}, "Input as JSON"), h("pre", { text: json(input) })));
  }
  card.append(answerControls(req, {
    editable: !!it.editable, schema: it.inputSchema,
    send: (a) => api(`/eve/v1/inbox/${encodeURIComponent(it.id)}`, { method: "POST", body: a }),
    done: () => { card.replaceChildren(h("p", { class: "ok", role: "status", text: "Answered." })); card.dataset.answered = "true"; reload(); },
  }));
  return card;
}

// ---------- Sessions ----------

const STATUSES = ["idle", "running", "waiting-input", "waiting-tasks", "closed"];

function sessionsPage(root, { signal, onCleanup }) {
  const state = { cursor: "", stack: [], next: "", filters: { status: "", owner: "", tool: "" } };
  const status = h("select", { name: "status" }, h("option", { value: "", text: "any" }), ...STATUSES.map((s) => h("option", { value: s, text: s })));
  const owner = h("input", { type: "text", name: "owner", autocomplete: "off" });
  const tool = h("input", { type: "text", name: "tool", autocomplete: "off" });
  const filters = h("form", { class: "filters", role: "search", "aria-label": "Filter sessions", onsubmit: (ev) => {
    ev.preventDefault();
    state.filters = { status: status.value, owner: owner.value.trim(), tool: tool.value.trim() };
    state.cursor = ""; state.stack = [];
    load();
  } }, field("Status", status), field("Owner", owner), field("Tool", tool), h("div", { class: "actions" }, h("button", { type: "submit" }, "Filter")));
  const msgId = nextId("new");
  const msg = h("textarea", { id: msgId, name: "message", placeholder: "e.g. what's the weather in Paris" });
  const newErr = h("p", { class: "error", role: "alert" });
  const start = h("form", { class: "card", "aria-label": "Start a session", onsubmit: async (ev) => {
    ev.preventDefault();
    newErr.textContent = "";
    if (!msg.value.trim()) { newErr.textContent = "Write a first message."; msg.focus(); return; }
    try {
      const acc = await api("/eve/v1/session", { method: "POST", body: { message: msg.value.trim() } });
      location.hash = `#/session/${encodeURIComponent(acc.sessionId)}`;
    } catch (e) { newErr.textContent = e.message; }
  } }, h("h2", { text: "Start a session" }), h("label", { for: msgId, text: "First message" }), h("div", { class: "composer" }, msg, h("button", { type: "submit", class: "primary" }, "Start")), newErr);
  const body = h("div");
  const pagerSlot = h("div");
  root.append(h("h1", { text: "Sessions" }), start, filters, body, pagerSlot);
  let seq = 0;
  const load = async () => {
    const my = ++seq;
    try {
      const page = await api("/eve/v1/sessions" + qs({ ...state.filters, limit: 25, cursor: state.cursor }), { signal });
      if (my !== seq) return;
      state.next = page.nextCursor || "";
      const rows = page.items.map((s) => h("tr", { dataset: { id: s.sessionId } },
        h("td", {}, h("a", { href: `#/session/${encodeURIComponent(s.sessionId)}`, class: "mono", text: s.sessionId })),
        h("td", {}, s.status ? h("span", { class: `badge ${s.status}`, text: s.status }) : "—"),
        h("td", { text: s.owner ? s.owner.id : "—" }),
        h("td", { class: "hide-sm", text: (s.tools || []).join(", ") || "—" }),
        h("td", { class: "hide-sm" }, timeEl("age", s.startedAt))));
      body.replaceChildren(rows.length ? h("div", { class: "table-wrap" }, h("table", {},
        h("caption", { class: "live", text: "Sessions, newest first" }),
        h("thead", {}, h("tr", {}, h("th", { scope: "col", text: "Session" }), h("th", { scope: "col", text: "Status" }), h("th", { scope: "col", text: "Owner" }),
          h("th", { scope: "col", class: "hide-sm", text: "Waiting on" }), h("th", { scope: "col", class: "hide-sm", text: "Started" }))),
        h("tbody", {}, rows))) : h("p", { class: "muted", role: "status", text: "No sessions." }));
      pagerSlot.replaceChildren(state.stack.length || state.next ? pager(state, load) : "");
      setState(root, "loaded");
    } catch (e) {
      if (signal.aborted) return;
      body.replaceChildren(errorBox(e));
      setState(root, "error");
    }
  };
  onCleanup(onHint(debounce(load, 300)));
  load();
}

function workflowLink(sessionId, turnId) {
  if (!config.temporalUIWorkflowURL || !turnId) return null;
  return h("a", { href: `${config.temporalUIWorkflowURL}/${encodeURIComponent(sessionId + "/" + turnId)}`, target: "_blank", rel: "noopener noreferrer" }, "workflow in Temporal UI ↗");
}

// childLink links a workflow or Nexus tool's call (its task.started) to its
// child workflow, whose id is the task id <session>/<turn>/tool/<call>
// (signals.WorkflowToolID); a delegated job's task id is its action id: no
// link (the jobs page lists those).
function childLink(sessionId, d) {
  if (!config.temporalUIWorkflowURL || !d.taskId || d.taskId !== `${sessionId}/${d.turnId}/tool/${d.callId}`) return null;
  return h("a", { class: "child-link", href: `${config.temporalUIWorkflowURL}/${encodeURIComponent(d.taskId)}`, target: "_blank", rel: "noopener noreferrer" }, "child workflow in Temporal UI ↗");
}

// originLine says where a subagent's request or decision sits: its root
// session and the chain of subagents down to it (rootSessionId, path,
// depth of an inbox item or a decision).
function originLine(x) {
  const names = (x.path || []).map((p) => p.agent).join(" → ");
  return h("p", { class: "small origin", dataset: { root: x.rootSessionId, depth: String(x.depth || 0) } },
    `subagent ${names} (depth ${x.depth || 0}) of `,
    h("a", { class: "mono", href: `#/session/${encodeURIComponent(x.rootSessionId)}`, text: x.rootSessionId }));
}

// followStream reads a session's stream (ndjson) with fetch, live, and
// reconnects from its cursor; on.open runs when a read starts, on.fatal on
// a refusal (4xx but 429), which ends it.
async function followStream(id, signal, handle, on = {}) {
  let next = 0, failures = 0;
  while (!signal.aborted) {
    try {
      const res = await fetch(`/eve/v1/session/${encodeURIComponent(id)}/stream?startIndex=${next}&streamControlVersion=1`, { headers: headers(), signal, cache: "no-store" });
      if (!res.ok) {
        const body = await res.json().catch(() => null);
        throw new APIError(res.status, body);
      }
      on.open?.();
      failures = 0;
      await lines(res, (line) => {
        if (!line.trim()) return;
        let ev;
        try { ev = JSON.parse(line); } catch { return; }
        if (ev.$eve) return; // stream control (lease ended): reconnect
        next++;
        handle(ev);
      });
    } catch (e) {
      if (signal.aborted) return;
      if (e instanceof APIError && e.status >= 400 && e.status < 500 && e.status !== 429) {
        on.fatal?.(e);
        return;
      }
      failures++;
      on.retry?.();
    }
    await wait(backoff(failures), signal);
  }
}

// childStatus is what a child's event says of it in the tree (null: no
// change).
function childStatus(type, d) {
  switch (type) {
    case "turn.started": return "working";
    case "turn.waiting": return d.on === "input" ? "waiting for input" : "working";
    case "input.resolved": return "working";
    case "turn.completed": return "idle";
    case "turn.failed": return "failed";
    case "turn.cancelled": return "cancelled";
    case "session.completed": return "ended";
  }
  return null;
}

// childrenTree shows session id's subagents' child sessions as a tree
// (docs/subagents.md): a node per agent.started, each child's own children
// from its stream, all followed live; each links to its live transcript
// (which links back to its parent).
function childrenTree(id, signal) {
  const head = nextId("children");
  const top = h("ul", { class: "tree", role: "tree", "aria-labelledby": head });
  const panel = h("section", { class: "card children-panel", "aria-labelledby": head, hidden: true }, h("h2", { id: head, text: "Subagents" }), top);
  const seen = new Set();
  const add = (list, d, depth, parent) => {
    if (!d.sessionId || seen.has(d.sessionId)) return;
    seen.add(d.sessionId);
    panel.hidden = false;
    const status = h("span", { class: "badge", text: "started" });
    const kids = h("ul", { role: "group" });
    const li = h("li", { role: "treeitem", dataset: { session: d.sessionId, agent: d.name || "", depth: String(depth), status: "started" } },
      h("a", { href: `#/session/${encodeURIComponent(d.sessionId)}${qs({ parent, agent: d.name })}` }, h("strong", { text: d.name || "subagent" })), " ",
      h("span", { class: "mono small muted", text: d.sessionId }), " ", status, kids);
    list.append(li);
    followStream(d.sessionId, signal, (ev) => {
      const x = ev.data || {};
      if (ev.type === "agent.started") add(kids, x, depth + 1, d.sessionId);
      const s = childStatus(ev.type, x);
      if (s) { status.textContent = s; li.dataset.status = s; }
    }, { fatal: (e) => { status.textContent = `unreadable (${e.status})`; li.dataset.status = "unreadable"; } });
  };
  return { panel, started: (d) => add(top, d, 1, id) };
}

function sessionPage(root, { signal, args, params }) {
  const id = args[0] || "";
  // Opened from a parent's tree of subagents: a link back up.
  const parent = params?.get("parent") || "";
  const up = parent ? h("p", { class: "small parent-link" }, `subagent ${params.get("agent") || ""} of `,
    h("a", { class: "mono", href: `#/session/${encodeURIComponent(parent)}`, text: parent })) : "";
  const transcript = h("div", { class: "transcript", role: "log", "aria-label": "Transcript", "aria-live": "polite" });
  const err = h("p", { class: "error", role: "alert" });
  const control = (what) => async () => {
    err.textContent = "";
    try { await api(`/eve/v1/session/${encodeURIComponent(id)}/${what}`, { method: "POST", body: {} }); announce(`${what} sent`); } catch (e) { err.textContent = e.message; }
  };
  const msgId = nextId("msg");
  const msg = h("textarea", { id: msgId, name: "message", placeholder: "Message" });
  const composer = h("form", { class: "composer", "aria-label": "Send a message", onsubmit: async (ev) => {
    ev.preventDefault();
    if (!msg.value.trim()) return;
    err.textContent = "";
    try { await api(`/eve/v1/session/${encodeURIComponent(id)}`, { method: "POST", body: { message: msg.value.trim() } }); msg.value = ""; } catch (e) { err.textContent = e.message; }
  } }, h("label", { for: msgId, class: "live", text: "Message" }), msg, h("button", { type: "submit", class: "primary" }, "Send"));
  const streamState = h("span", { class: "muted small", role: "status", text: "connecting…" });

  // The session's tasks: what the stream says (task.started, task.settled)
  // merged with GET …/tasks (the running turn's, with progress, or the idle
  // resumable ones kept between turns). A working one can be cancelled.
  const tasks = new Map(); // taskId → {taskId, name, status, turnId, reason, progress}
  const tasksHead = nextId("tasks");
  const tasksBody = h("div");
  const tasksPanel = h("section", { class: "card tasks-panel", "aria-labelledby": tasksHead, hidden: true },
    h("h2", { id: tasksHead, text: "Tasks" }), tasksBody);
  const progressText = (p) => {
    if (!p) return "";
    const n = p.total ? `${p.progress}/${p.total}` : `${p.progress}`;
    return p.message ? `${n} · ${p.message}` : n;
  };
  const renderTasks = () => {
    tasksPanel.hidden = tasks.size === 0;
    const rows = [...tasks.values()].map((t) => {
      const cancel = t.status === "working" ? h("button", { type: "button", class: "danger", "aria-label": `Cancel task ${t.taskId}`, onclick: async () => {
        err.textContent = "";
        cancel.disabled = true;
        try {
          await api(`/eve/v1/session/${encodeURIComponent(id)}/tasks/${encodeURIComponent(t.taskId)}/cancel`, { method: "POST", body: {} });
          announce(`Task ${t.taskId} cancelled`);
          loadTasks();
        } catch (e) { err.textContent = e.message; cancel.disabled = false; }
      } }, "Cancel") : null;
      const status = t.reason ? `${t.status} (${t.reason})` : t.status;
      return h("tr", { dataset: { task: t.taskId, status: t.status } },
        h("td", {}, h("strong", { text: t.name }), h("div", { class: "mono small muted", text: t.taskId })),
        h("td", {}, h("span", { class: `badge task-${t.status}`, text: status })),
        h("td", { class: "progress small", text: t.status === "working" ? progressText(t.progress) : "" }),
        h("td", { class: "hide-sm mono small", text: t.turnId || "" }),
        h("td", {}, cancel));
    });
    tasksBody.replaceChildren(h("div", { class: "table-wrap" }, h("table", {},
      h("thead", {}, h("tr", {}, ...["Task", "Status", "Progress"].map((x) => h("th", { scope: "col", text: x })),
        h("th", { scope: "col", class: "hide-sm", text: "Turn" }), h("th", { scope: "col" }, h("span", { class: "live", text: "Actions" })))),
      h("tbody", {}, rows))));
  };
  const taskEvent = (type, d) => {
    // A delegated job's or workflow tool's call reports task events too,
    // with its action id (a/b/…): those are the turn's calls, not tasks.
    if (!d.taskId || d.taskId.includes("/")) return;
    const t = tasks.get(d.taskId) || { taskId: d.taskId, name: d.name };
    t.name = d.name || t.name;
    t.turnId = d.turnId;
    if (type === "task.started") { t.status = "working"; t.reason = ""; t.progress = null; }
    else { t.status = d.status; t.reason = d.cancel?.reason || ""; t.progress = null; }
    tasks.set(d.taskId, t);
  };
  let taskSeq = 0, taskTimer = 0;
  const loadTasks = async () => {
    const my = ++taskSeq;
    clearTimeout(taskTimer);
    try {
      const got = await api(`/eve/v1/session/${encodeURIComponent(id)}/tasks`, { signal });
      if (my !== taskSeq) return;
      for (const x of got.tasks || []) {
        const t = tasks.get(x.taskId) || { taskId: x.taskId };
        Object.assign(t, { name: x.name, status: x.status, turnId: x.turnId || t.turnId, progress: x.progress || null });
        if (x.status !== "cancelled") t.reason = "";
        tasks.set(x.taskId, t);
      }
      renderTasks();
      // Progress moves while tasks work: look again in a while.
      if ((got.tasks || []).some((x) => x.status === "working")) taskTimer = setTimeout(loadTasks, 2000);
    } catch (e) {
      if (!signal.aborted && !(e instanceof APIError && e.status === 403)) taskTimer = setTimeout(loadTasks, 5000);
    }
  };
  const reloadTasks = debounce(loadTasks, 300);
  const tree = childrenTree(id, signal);
  signal.addEventListener("abort", () => clearTimeout(taskTimer));
  root.append(
    h("div", { class: "spread" }, h("h1", {}, "Session ", h("span", { class: "mono", text: id })),
      h("div", { class: "row" }, h("button", { type: "button", onclick: control("compact") }, "Compact"), h("button", { type: "button", class: "danger", onclick: control("cancel") }, "Cancel turn"))),
    h("p", {}, h("a", { href: "#/sessions" }, "← all sessions"), " · ", streamState), up, err, tasksPanel, tree.panel, transcript, composer);

  const assistants = new Map(); // turn/step → message element
  const calls = new Map(); // callId → card
  const requests = new Map(); // requestId → card
  const add = (el) => transcript.append(el);
  const handle = (ev) => {
    const d = ev.data || {};
    switch (ev.type) {
      case "message.received":
        add(h("div", { class: "msg user", dataset: { role: "user" }, text: d.message }));
        break;
      case "message.appended": {
        const k = `${d.turnId}/${d.stepIndex ?? d.step ?? ""}`;
        let el = assistants.get(k);
        if (!el) { el = h("div", { class: "msg assistant streaming", dataset: { role: "assistant" } }); assistants.set(k, el); add(el); }
        el.textContent += d.messageDelta || "";
        el.dataset.deltas = String(Number(el.dataset.deltas || 0) + 1);
        break;
      }
      case "message.completed": {
        const k = `${d.turnId}/${d.stepIndex ?? d.step ?? ""}`;
        let el = assistants.get(k);
        if (!el) { el = h("div", { class: "msg assistant", dataset: { role: "assistant" } }); assistants.set(k, el); add(el); }
        el.classList.remove("streaming");
        el.dataset.completed = "true";
        el.textContent = d.message || el.textContent;
        break;
      }
      case "actions.requested":
        for (const a of d.actions || []) {
          const out = h("div", { class: "out" });
          const card = h("div", { class: "call", dataset: { call: a.callId } }, h("strong", { text: a.toolName }), " ", h("span", { class: "muted small", text: "tool call" }),
            h("pre", { text: json(a.input) }), out);
          calls.set(a.callId, { card, out });
          add(card);
        }
        break;
      case "action.result": {
        const r = d.result || {};
        const c = calls.get(r.callId);
        const body = d.error ? h("div", { class: "error", text: `${d.error.code || "error"}: ${d.error.message || ""}` }) : h("pre", { text: json(r.output) });
        if (c) { c.out.replaceChildren(h("span", { class: "muted small", text: `result (${d.status})` }), body); if (d.status === "failed") c.card.classList.add("failed"); }
        break;
      }
      case "task.settled":
        taskEvent(ev.type, d);
        renderTasks();
        reloadTasks();
        break;
      case "task.started": {
        taskEvent(ev.type, d);
        renderTasks();
        reloadTasks();
        const c = calls.get(d.callId);
        const link = childLink(id, d);
        if (c && link && !c.card.querySelector(".child-link")) c.out.before(h("p", { class: "small" }, link));
        break;
      }
      case "agent.started":
        tree.started(d);
        break;
      case "input.requested":
        for (const rq of d.requests || []) {
          const card = h("div", { class: "card inline-request", dataset: { request: rq.requestId } },
            h("span", { class: `badge ${rq.kind}`, text: rq.kind === "tool-approval" ? "approval" : rq.kind }), " ", h("strong", { text: rq.action?.toolName || "" }),
            h("p", { class: "prompt", text: rq.prompt }));
          card.append(answerControls(rq, {
            editable: false,
            send: (a) => api(`/eve/v1/session/${encodeURIComponent(id)}`, { method: "POST", body: { inputResponses: [{ requestId: rq.requestId, ...a }] } }),
          }));
          requests.set(rq.requestId, card);
          add(card);
        }
        break;
      case "input.resolved":
        for (const r of d.resolutions || []) {
          const card = requests.get(r.requestId);
          if (!card) continue;
          card.querySelector(".answer")?.remove();
          const said = r.response?.optionId || r.response?.text || "";
          card.append(h("p", { class: r.outcome === "approved" || r.outcome === "answered" ? "ok" : "muted", dataset: { outcome: r.outcome }, text: `${r.outcome}${said ? ` (${said})` : ""}` }));
          if (r.originalInput !== undefined) {
            // Approved with an edit: the input that ran, and the model's.
            card.append(h("p", { class: "small", dataset: { edited: "true" } }, `edited by ${r.editedBy?.id || "someone"}: `,
              h("code", { text: JSON.stringify(r.response?.input) }), " instead of ", h("code", { text: JSON.stringify(r.originalInput) })));
          }
        }
        break;
      case "turn.started":
        add(h("div", { class: "turn-line", dataset: { turn: d.turnId } }, h("span", { text: `turn ${d.turnId} started` }), workflowLink(id, d.turnId)));
        break;
      case "turn.completed": case "turn.failed": case "turn.cancelled":
        add(h("div", { class: "turn-line", dataset: { turnEnd: ev.type } }, h("span", { text: `${ev.type.replace("turn.", "turn ")}` })));
        break;
      case "compaction.completed":
        add(h("div", { class: "turn-line", text: "context compacted" }));
        break;
    }
  };

  loadTasks();

  // The session's own stream: the transcript, live.
  followStream(id, signal, handle, {
    open: () => { streamState.textContent = "live"; setState(root, "loaded"); },
    retry: () => { streamState.textContent = "reconnecting…"; },
    fatal: (e) => { streamState.textContent = ""; err.textContent = `${e.message} (${e.status})`; setState(root, "error"); },
  });
}

// ---------- Delegated jobs ----------

function jobsPage(root, { signal, onCleanup }) {
  const state = { cursor: "", stack: [], next: "" };
  const body = h("div");
  const pagerSlot = h("div");
  const err = h("p", { class: "error", role: "alert" });
  root.append(h("div", { class: "spread" }, h("h1", { text: "Delegated jobs" }), h("button", { type: "button", onclick: () => load() }, "Refresh")),
    h("p", { class: "muted small", text: "External jobs that running turns wait on. Cancelling one cancels its turn: every job of that turn stops (its heartbeat answers cancelRequested), and the model is not called again." }),
    err, body, pagerSlot);
  let seq = 0;
  const load = async () => {
    const my = ++seq;
    try {
      const page = await api("/eve/v1/jobs" + qs({ limit: 50, cursor: state.cursor }), { signal });
      if (my !== seq) return;
      state.next = page.nextCursor || "";
      const rows = page.items.map((j) => {
        const cancel = h("button", { type: "button", class: "danger", "aria-label": `Cancel ${j.toolName} job ${j.actionId}`, onclick: async () => {
          err.textContent = "";
          cancel.disabled = true;
          try {
            await api(`/eve/v1/session/${encodeURIComponent(j.sessionId)}/cancel`, { method: "POST", body: {} });
            announce("Cancel sent");
            load();
          } catch (e) { err.textContent = e.message; cancel.disabled = false; }
        } }, "Cancel");
        return h("tr", { dataset: { id: j.actionId } },
          h("td", {}, h("strong", { text: j.toolName }), h("div", { class: "mono small muted", text: j.actionId })),
          h("td", {}, h("a", { href: `#/session/${encodeURIComponent(j.sessionId)}`, class: "mono", text: j.sessionId }), " ", workflowLink(j.sessionId, j.turnId)),
          h("td", {}, timeEl("deadline", j.deadline)),
          h("td", { class: "heartbeat" }, j.lastHeartbeatAt ? timeEl("age", j.lastHeartbeatAt) : h("span", { class: "muted", text: "none yet" }),
            j.heartbeatDetails !== undefined ? h("div", { class: "mono small", text: JSON.stringify(j.heartbeatDetails) }) : null),
          h("td", { class: "hide-sm", text: j.state }),
          h("td", {}, cancel));
      });
      body.replaceChildren(rows.length ? h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, ...["Tool", "Session", "Deadline", "Last heartbeat"].map((t) => h("th", { scope: "col", text: t })),
          h("th", { scope: "col", class: "hide-sm", text: "State" }), h("th", { scope: "col" }, h("span", { class: "live", text: "Actions" })))),
        h("tbody", {}, rows))) : h("p", { class: "muted", role: "status", text: "No pending delegated jobs." }));
      pagerSlot.replaceChildren(state.stack.length || state.next ? pager(state, load) : "");
      setState(root, "loaded");
    } catch (e) {
      if (signal.aborted) return;
      body.replaceChildren(errorBox(e));
      setState(root, "error");
    }
  };
  onCleanup(onHint(debounce(load, 300)));
  load();
}

// ---------- Decisions ----------

const OUTCOMES = ["approved", "denied", "answered", "expired", "cancelled", "ignored"];

function decisionsPage(root, { signal }) {
  const local = (d) => new Date(d.getTime() - d.getTimezoneOffset() * 60000).toISOString().slice(0, 16);
  const session = h("input", { type: "text", name: "session", autocomplete: "off" });
  const since = h("input", { type: "datetime-local", name: "since", value: local(new Date(Date.now() - 24 * 3600 * 1000)) });
  const until = h("input", { type: "datetime-local", name: "until" });
  const tool = h("input", { type: "text", name: "tool", autocomplete: "off" });
  const principal = h("input", { type: "text", name: "principal", autocomplete: "off" });
  const outcome = h("select", { name: "outcome" }, h("option", { value: "", text: "any" }), ...OUTCOMES.map((o) => h("option", { value: o, text: o })));
  const download = h("button", { type: "button", disabled: true }, "Download JSON lines");
  const params = () => {
    const iso = (el) => (el.value ? new Date(el.value).toISOString() : "");
    return qs({ session: session.value.trim(), since: session.value.trim() ? "" : iso(since), until: iso(until), tool: tool.value.trim(), principal: principal.value.trim(), outcome: outcome.value });
  };
  const body = h("div");
  let lastText = "";
  const form = h("form", { class: "filters", role: "search", "aria-label": "Filter decisions", onsubmit: (ev) => { ev.preventDefault(); load(); } },
    field("Session", session), field("Since", since), field("Until", until), field("Tool", tool), field("Principal", principal), field("Outcome", outcome),
    h("div", { class: "actions" }, h("button", { type: "submit" }, "Show"), download));
  root.append(h("h1", { text: "Decisions" }), form, body);
  download.addEventListener("click", () => {
    const url = URL.createObjectURL(new Blob([lastText], { type: "application/x-ndjson" }));
    const a = h("a", { href: url, download: `decisions-${new Date().toISOString().replace(/[:.]/g, "-")}.jsonl` });
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10000);
  });
  const load = async () => {
    download.disabled = true;
    try {
      const res = await fetch("/eve/v1/decisions" + params(), { headers: headers(), signal, cache: "no-store" });
      const text = await res.text();
      if (!res.ok) {
        let b = null;
        try { b = JSON.parse(text); } catch { /* not JSON */ }
        throw new APIError(res.status, b || { error: text.slice(0, 200) });
      }
      lastText = text;
      const all = text.split("\n").filter((l) => l.trim()).map((l) => JSON.parse(l));
      // A last {"incomplete":true,…} line names sessions that did not answer.
      const incomplete = all.find((d) => d.incomplete);
      const rows = all.filter((d) => !d.incomplete);
      download.disabled = rows.length === 0;
      body.replaceChildren(incomplete ? h("p", { class: "error", role: "alert", text: `Incomplete: ${incomplete.error || ""} (${(incomplete.unreadableSessions || []).join(", ")})` }) : "",
        rows.length ? h("div", { class: "table-wrap" }, h("table", {},
        h("thead", {}, h("tr", {}, ...["Decided", "Tool", "Outcome", "Requester", "Decider", "Note"].map((t, i) => h("th", { scope: "col", class: i > 3 ? "hide-sm" : "", text: t })))),
        h("tbody", {}, rows.map((d) => h("tr", {},
          h("td", {}, d.decidedAt ? timeEl("age", d.decidedAt) : "—"),
          h("td", {}, h("strong", { text: d.toolName || d.kind || "" }), h("div", { class: "small muted", text: d.prompt || "" }),
            d.sessionId ? h("a", { class: "small", href: `#/session/${encodeURIComponent(d.sessionId)}`, text: "session" }) : null,
            d.rootSessionId ? originLine(d) : null),
          h("td", {}, h("span", { class: "badge", text: d.outcome || "" }), d.editedInput ? h("div", { class: "small", text: "edited" }) : null),
          h("td", { text: d.requester?.id || "—" }),
          h("td", { class: "hide-sm", text: d.decider?.id || "—" }),
          h("td", { class: "hide-sm", text: d.note || d.text || "" })))))) : h("p", { class: "muted", role: "status", text: "No decisions in this range." }));
      setState(root, "loaded");
    } catch (e) {
      if (signal.aborted) return;
      body.replaceChildren(e.status === 404 ? h("p", { class: "error", role: "alert", text: "This server has no decision record (GET /eve/v1/decisions answered 404)." }) : errorBox(e));
      setState(root, "error");
    }
  };
  load();
}

// ---------- start ----------

async function main() {
  try {
    const res = await fetch("/console/config.json", { cache: "no-store" });
    if (res.ok) config = await res.json();
  } catch { /* defaults */ }
  $("#signin-form").addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const v = $("#key").value.trim();
    if (!v) { $("#signin-error").textContent = "Enter your API key."; return; }
    $("#signin-error").textContent = "";
    const msg = await signIn(v);
    if (msg) { $("#signin-error").textContent = msg; $("#key").select(); } else $("#key").value = "";
  });
  $("#signout").addEventListener("click", () => signOut(""));
  window.addEventListener("hashchange", onRoute);
  if (config.open) {
    const msg = await signIn("");
    if (msg) showSignin(msg);
  } else if (key) {
    const msg = await signIn(key);
    if (msg) { sessionStorage.removeItem(KEY); key = ""; showSignin(msg); }
  } else showSignin("");
}

main();
