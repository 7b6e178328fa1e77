// The tether inbox: decisions sent in the background, live updates over SSE,
// edited JSON checked against the tool's schema, and keyboard shortcuts.
// Plain JavaScript served by the app itself: no framework, no build step.
// Every page works without it (forms post and redirect); this only makes it quicker.
(() => {
  "use strict";

  const meta = (name) => (document.querySelector(`meta[name="${name}"]`) || {}).content || "";
  const csrf = meta("csrf-token");
  const root = meta("root");
  const page = document.body.dataset.page;
  const WAITING = new Set(["paused", "needs-decision"]);

  // -- times: "3 min ago" ------------------------------------------------------------

  function ago(at) {
    const s = Date.now() / 1000 - at;
    if (s < 45) return "just now";
    if (s < 90) return "1 min ago";
    if (s < 3600) return `${Math.round(s / 60)} min ago`;
    if (s < 86400) return `${Math.round(s / 3600)} h ago`;
    return new Date(at * 1000).toLocaleString();
  }

  function times(scope) {
    for (const el of (scope || document).querySelectorAll("time[data-at]")) {
      const at = Number(el.dataset.at);
      el.title = new Date(at * 1000).toLocaleString();
      el.textContent = ago(at);
    }
  }

  // -- a JSON Schema check, enough for tool arguments ---------------------------------

  function isType(v, t) {
    switch (t) {
      case "object": return v !== null && typeof v === "object" && !Array.isArray(v);
      case "array": return Array.isArray(v);
      case "string": return typeof v === "string";
      case "integer": return Number.isInteger(v);
      case "number": return typeof v === "number" && Number.isFinite(v);
      case "boolean": return typeof v === "boolean";
      case "null": return v === null;
      default: return true;
    }
  }

  function resolve(schema, top) {
    if (schema && typeof schema.$ref === "string" && schema.$ref.startsWith("#/")) {
      return schema.$ref.slice(2).split("/").reduce((node, key) => (node || {})[key], top) || {};
    }
    return schema || {};
  }

  function problems(value, schema, top, path) {
    schema = resolve(schema, top);
    const where = path || "arguments";
    const out = [];
    const any = schema.anyOf || schema.oneOf;
    if (any) {
      if (!any.some((s) => problems(value, s, top, path).length === 0)) out.push(`${where}: does not fit any allowed form`);
      return out;
    }
    if (schema.enum && !schema.enum.some((v) => JSON.stringify(v) === JSON.stringify(value))) {
      out.push(`${where}: must be one of ${schema.enum.map((v) => JSON.stringify(v)).join(", ")}`);
    }
    if ("const" in schema && JSON.stringify(schema.const) !== JSON.stringify(value)) out.push(`${where}: must be ${JSON.stringify(schema.const)}`);
    if (schema.type) {
      const types = Array.isArray(schema.type) ? schema.type : [schema.type];
      if (!types.some((t) => isType(value, t))) return [...out, `${where}: must be ${types.join(" or ")}`];
    }
    const sub = (k) => (path ? `${path}.${k}` : k);
    if (isType(value, "object")) {
      for (const k of schema.required || []) if (!(k in value)) out.push(`${sub(k)}: is required`);
      const props = schema.properties || {};
      for (const [k, v] of Object.entries(value)) {
        if (k in props) out.push(...problems(v, props[k], top, sub(k)));
        else if (schema.additionalProperties === false) out.push(`${sub(k)}: is not a field of this tool`);
      }
    }
    if (Array.isArray(value) && schema.items) value.forEach((v, i) => out.push(...problems(v, schema.items, top, `${where}[${i}]`)));
    if (typeof value === "number") {
      if (schema.minimum !== undefined && value < schema.minimum) out.push(`${where}: must be at least ${schema.minimum}`);
      if (schema.maximum !== undefined && value > schema.maximum) out.push(`${where}: must be at most ${schema.maximum}`);
      if (schema.exclusiveMinimum !== undefined && value <= schema.exclusiveMinimum) out.push(`${where}: must be more than ${schema.exclusiveMinimum}`);
      if (schema.exclusiveMaximum !== undefined && value >= schema.exclusiveMaximum) out.push(`${where}: must be less than ${schema.exclusiveMaximum}`);
    }
    if (typeof value === "string") {
      if (schema.minLength !== undefined && value.length < schema.minLength) out.push(`${where}: is too short`);
      if (schema.maxLength !== undefined && value.length > schema.maxLength) out.push(`${where}: is too long`);
    }
    return out;
  }

  // The problems of a form's JSON field (none for fields that are plain text).
  function fieldProblems(area) {
    const json = area.name === "args" || area.dataset.json === "1";
    if (!json || !area.dataset.schema) return [];
    let value;
    try {
      value = JSON.parse(area.value);
    } catch (err) {
      return [`not JSON: ${err.message}`];
    }
    const schema = JSON.parse(area.dataset.schema);
    return problems(value, schema, schema, "");
  }

  // The arguments a schema-made edit form holds, read as the server reads them (see _forms.edited_args).
  function formArgs(form) {
    const args = {};
    const bad = [];
    for (const el of form.elements) {
      if (!el.name || !el.name.startsWith("arg:")) continue;
      const name = el.name.slice(4);
      const type = (form.elements[`type:${name}`] || {}).value || "text";
      const text = el.value;
      if (type !== "text" && text.trim() === "") continue;
      if (type === "integer" || type === "number") args[name] = Number(text);
      else if (type === "boolean") args[name] = text === "true";
      else if (type === "json") {
        try { args[name] = JSON.parse(text); } catch (err) { bad.push(`${name}: not JSON (${err.message})`); }
      } else args[name] = text;
    }
    return { args, bad };
  }

  function showFieldProblems(form) {
    const schema = JSON.parse(form.dataset.schema);
    const { args, bad } = formArgs(form);
    const found = [...bad, ...problems(args, schema, schema, "")];
    const box = form.querySelector(".problems");
    if (box) box.textContent = found.join("\n");
    for (const el of form.querySelectorAll("input[name^='arg:'], select, textarea")) {
      const name = el.name.slice(4);
      el.setAttribute("aria-invalid", found.some((p) => p.startsWith(`${name}:`)) ? "true" : "false");
    }
    for (const b of form.querySelectorAll("button")) b.disabled = found.length > 0;
    return found.length === 0;
  }

  function showProblems(form) {
    if (form.dataset.schema) return showFieldProblems(form);
    const area = form.querySelector("textarea[data-schema]");
    if (!area) return true;
    const box = form.querySelector(".problems");
    if (area.name === "answer" && !area.value.trim()) {
      if (box) box.textContent = "";
      return false;
    }
    const found = fieldProblems(area);
    if (box) box.textContent = found.join("\n");
    area.setAttribute("aria-invalid", found.length ? "true" : "false");
    for (const b of form.querySelectorAll("button")) b.disabled = found.length > 0;
    return found.length === 0;
  }

  // -- decisions sent in the background ----------------------------------------------

  function say(card, text, kind) {
    const out = card && card.querySelector(".outcome");
    if (!out) return;
    out.textContent = text;
    out.className = `outcome ${kind || ""}`;
  }

  function settle(card, text) {
    card.classList.add("settled");
    for (const el of card.querySelectorAll(".actions, details.more")) el.remove();
    say(card, text, "ok");
    setTimeout(() => {
      card.classList.add("leaving");
      setTimeout(() => { card.remove(); counted(); }, 250);
    }, 1400);
  }

  async function send(form, submitter) {
    const card = form.closest(".item");
    if (!showProblems(form)) return;
    const body = new URLSearchParams(new FormData(form, submitter));
    if (card) card.setAttribute("aria-busy", "true");
    let res;
    let data = {};
    try {
      res = await fetch(form.action, {
        method: "POST",
        body,
        credentials: "same-origin",
        headers: { Accept: "application/json", "X-CSRF-Token": csrf },
      });
      data = await res.json().catch(() => ({}));
    } catch (err) {
      say(card, `Could not reach the server (${err.message}); nothing was decided.`, "error");
      if (card) card.removeAttribute("aria-busy");
      return;
    }
    if (card) card.removeAttribute("aria-busy");
    if (res.ok) {
      if (page === "run") refreshRunPage();
      if (card) settle(card, data.notice || "Done.");
      return;
    }
    const message = (data.error && data.error.message) || `Refused (HTTP ${res.status}).`;
    say(card, res.status === 409 ? `Someone got there first: ${message}` : message, res.status === 409 ? "conflict" : "error");
    if (res.status === 409 && card) {
      card.classList.add("settled");
      setTimeout(() => refreshItems(card.dataset.run), 4000);
    }
  }

  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!form.classList.contains("decide")) return;
    event.preventDefault();
    send(form, event.submitter);
  });

  function checkInput(event) {
    const el = event.target;
    if (!el.form) return;
    if (el.matches("textarea[data-schema]") || el.form.dataset.schema) showProblems(el.form);
  }
  document.addEventListener("input", checkInput);
  document.addEventListener("change", checkInput);

  // -- live: the inbox -----------------------------------------------------------------

  function counted() {
    if (page !== "inbox") return;
    const list = document.getElementById("items");
    const elsewhere = Number((list && list.dataset.elsewhere) || 0);  // items on the other pages
    const n = document.querySelectorAll("#items .item:not(.settled)").length + elsewhere;
    const count = document.getElementById("count");
    if (count) count.textContent = n ? String(n) : "";
    const summary = document.getElementById("summary");
    if (summary) summary.textContent = n === 0 ? "no items" : `${n} item${n === 1 ? "" : "s"}`;
    const empty = document.getElementById("empty");
    if (empty) empty.hidden = n - elsewhere > 0 || !list;
    document.title = `${n ? `(${n}) ` : ""}Inbox · tether`;
  }

  function typingIn(card) {
    const el = document.activeElement;
    return card.contains(el) && el.matches("textarea, input") && el.value.trim() !== "";
  }

  async function refreshItems(runId) {
    const list = document.getElementById("items");
    if (!list) return;
    const res = await fetch(`${root}/fragments/items/${encodeURIComponent(runId)}?back=${encodeURIComponent(location.pathname.slice(root.length) || "/")}`, { credentials: "same-origin" });
    if (!res.ok) return;
    const tpl = document.createElement("template");
    tpl.innerHTML = await res.text();
    const fresh = new Map([...tpl.content.querySelectorAll(".item")].map((c) => [c.id, c]));
    for (const old of list.querySelectorAll(".item")) {
      if (old.dataset.run !== runId) continue;
      if (fresh.has(old.id)) {
        if (!typingIn(old) && !old.classList.contains("settled")) old.replaceWith(fresh.get(old.id));
        fresh.delete(old.id);
      } else if (!old.classList.contains("settled")) {
        old.classList.add("settled");
        say(old, "Decided elsewhere, or the run moved on.", "conflict");
        setTimeout(() => { old.remove(); counted(); }, 2500);
      }
    }
    for (const card of fresh.values()) insertByTime(list, card);
    times(list);
    counted();
  }

  function insertByTime(list, card) {
    const since = Number(card.dataset.since);
    const after = [...list.querySelectorAll(".item")].find((c) => Number(c.dataset.since) < since);
    list.insertBefore(card, after || null);
    card.classList.add("arriving");
  }

  const pending = new Map();
  function later(key, fn) {
    clearTimeout(pending.get(key));
    pending.set(key, setTimeout(() => { pending.delete(key); fn(); }, 200));
  }

  function stream(url, handlers) {
    const live = document.getElementById("live");
    const source = new EventSource(url, { withCredentials: true });
    if (live) live.hidden = false;
    source.onopen = () => { if (live) { live.textContent = "live"; live.classList.add("on"); } };
    source.onerror = () => { if (live) { live.textContent = "reconnecting"; live.classList.remove("on"); } };
    for (const [name, fn] of Object.entries(handlers)) source.addEventListener(name, fn);
    return source;
  }

  function liveInbox() {
    stream(`${root}/api/changes`, {
      run: (event) => {
        const d = JSON.parse(event.data);
        const shown = document.querySelector(`#items .item[data-run="${CSS.escape(d.run_id)}"]`);
        if (shown || WAITING.has(d.status)) later(d.run_id, () => refreshItems(d.run_id));
      },
    });
  }

  // -- live: one run -------------------------------------------------------------------

  async function refreshRunPage() {
    const head = document.getElementById("run");
    if (!head) return;
    const main = document.querySelector("main");
    if ([...main.querySelectorAll(".item")].some(typingIn)) return;
    const res = await fetch(`${root}/fragments/runs/${encodeURIComponent(head.dataset.run)}`, { credentials: "same-origin" });
    if (!res.ok) return;
    main.innerHTML = await res.text();
    times(main);
  }

  function liveRun() {
    const head = document.getElementById("run");
    const log = document.getElementById("events");
    if (!head || !log) return;
    const kinds = (log.dataset.kinds || "").split(" ").filter(Boolean);  // every kind a run's log holds, from the server
    const handlers = {};
    for (const kind of kinds) {
      handlers[kind] = (event) => {
        const li = document.createElement("li");
        const pos = document.createElement("span");
        pos.className = "pos";
        pos.textContent = event.lastEventId;
        const at = new Date().toISOString().slice(11, 19);
        li.append(pos, " ", Object.assign(document.createElement("time"), { className: "clock", textContent: at }), ` ${kind}`);
        (document.getElementById("events") || log).append(li);
        later("run", refreshRunPage);
      };
    }
    handlers.end = () => source.close();
    const source = stream(`${root}/api/runs/${encodeURIComponent(head.dataset.run)}/stream?after=${log.dataset.after}`, handlers);
  }

  // -- keyboard ------------------------------------------------------------------------

  function cards() {
    return [...document.querySelectorAll(".item:not(.settled)")];
  }

  function current() {
    const el = document.activeElement;
    return (el && el.closest && el.closest(".item")) || cards()[0] || null;
  }

  function move(step) {
    const all = cards();
    if (!all.length) return;
    const at = all.indexOf(document.activeElement && document.activeElement.closest ? document.activeElement.closest(".item") : null);
    const next = all[Math.max(0, Math.min(all.length - 1, at < 0 ? 0 : at + step))];
    next.focus();
    next.scrollIntoView({ block: "nearest" });
  }

  function openAndFocus(card, key) {
    const box = card.querySelector(`details[data-key="${key}"]`);
    if (!box) return false;
    box.open = true;
    const field = box.querySelector("input:not([type=hidden]), select, textarea") || box.querySelector("button");
    if (field) field.focus();
    return true;
  }

  function press(card, selector) {
    const button = card.querySelector(selector);
    if (button && button.form) button.form.requestSubmit(button);
  }

  const keys = {
    j: () => move(1),
    k: () => move(-1),
    a: (c) => press(c, 'form.decide:not(.edit) button[value="approve"]'),
    e: (c) => openAndFocus(c, "e"),
    d: (c) => openAndFocus(c, "d"),
    r: (c) => openAndFocus(c, "r"),
    s: (c) => press(c, 'form.keep button[value="skip"]'),
    n: (c) => { const f = c.querySelector('[data-key="n"]'); if (f) (f.matches("textarea") ? f : f.querySelector("button")).focus(); },
    t: (c) => { const box = c.querySelector("details.story-box"); if (box) box.open = !box.open; },
    o: (c) => { const link = c.querySelector(".meta a"); if (link) location.href = link.href; },
  };

  document.addEventListener("keydown", (event) => {
    const typing = event.target.closest && event.target.closest("input, textarea, select");
    if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && typing && event.target.form) {
      event.preventDefault();
      const form = event.target.form;
      form.requestSubmit(form.querySelector('button[name="verdict"], button[type="submit"]') || undefined);
      return;
    }
    if (event.key === "Escape" && !document.querySelector("dialog[open]")) {
      for (const box of document.querySelectorAll("details.more[open]")) box.open = false;
      const card = current();
      if (card && typing) card.focus();
      return;
    }
    if (typing || event.ctrlKey || event.metaKey || event.altKey) return;
    if (event.key === "?") {
      const help = document.getElementById("help");
      if (help && !help.open) help.showModal();
      return;
    }
    const action = keys[event.key];
    const card = current();
    if (!action || (!card && event.key !== "j" && event.key !== "k")) return;
    event.preventDefault();
    action(card);
  });

  // -- start ---------------------------------------------------------------------------

  times();
  setInterval(() => times(), 30000);
  for (const form of document.querySelectorAll("form.decide")) {
    if (form.dataset.schema || form.querySelector("textarea[data-schema]")) showProblems(form);
  }
  counted();
  if (page === "inbox") liveInbox();
  if (page === "run") liveRun();
})();
