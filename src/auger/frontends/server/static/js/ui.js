// What every view shares: `html` (htm bound to Preact's h), the hash route, what the server and its
// providers are, formatting, the page's top bar and the prompt box.

import { useEffect, useLayoutEffect, useRef, useState } from "../vendor/hooks.mjs";
import { h } from "../vendor/preact.mjs";
import htm from "../vendor/htm.mjs";
import { signal } from "../vendor/signals.mjs";
import { api } from "./api.js";

export const html = htm.bind(h);

/** The route from the location's hash: {view: "home" | "new" | "session" | "settings" | "tasks", id?}. */
export const route = signal(parseRoute());
window.addEventListener("hashchange", () => { route.value = parseRoute(); });

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "s" && parts[1]) return { view: "session", id: parts[1] };
  if (parts[0] === "settings") return { view: "settings" };
  if (parts[0] === "tasks") return { view: "tasks" };
  if (parts[0] === "new") return { view: "new" };
  return { view: "home" };
}

export function go(path) {
  location.hash = path;
}

/** What `/api/server` says: roots, mode, model, provider (null until it answered). */
export const serverInfo = signal(null);

const ROLES = ["viewer", "member", "approver", "admin"];

/** Whether the signed-in user's role includes `role`'s rights (the server decides; this only hides what it
 * would refuse). */
export function may(role) {
  const mine = serverInfo.value?.user?.role;
  return mine ? ROLES.indexOf(mine) >= ROLES.indexOf(role) : false;
}

/** The share link this page was opened with ({session, expires}), or null: then it shows that one session,
 * read-only, and nothing else. */
export const shared = () => serverInfo.value?.share || null;

/** Providers and agents, as /api/providers lists them (shared with the settings page). */
export const providers = signal(null);

export async function loadProviders() {
  providers.value = (await api("/api/providers")).providers;
}

/** A phone or tablet: Enter makes a new line there, the send button sends. */
export const touch = () => window.matchMedia("(pointer: coarse)").matches;

export function money(value) {
  if (value === null || value === undefined) return "cost unknown";
  return value < 0.01 && value > 0 ? `$${value.toFixed(4)}` : `$${value.toFixed(2)}`;
}

export function ago(seconds) {
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 60) return "now";
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return new Date(seconds * 1000).toLocaleDateString();
}

/** The last one or two parts of a path: what tells projects apart in a narrow list. */
export function shortPath(path) {
  const parts = String(path || "").split("/").filter(Boolean);
  return parts.slice(-2).join("/") || "/";
}

const MODES = ["plan", "safe", "auto"];

/** The modes a client may choose: up to the server's. */
export function allowedModes(ceiling) {
  return MODES.slice(0, MODES.indexOf(ceiling) + 1 || 1);
}

/** A fleet task's (or schedule's) mode, up to auto and else the worker's own, and model: the task and schedule forms. */
export function WorkerModeAndModel({ form, set }) {
  return html`<label>Mode
      <select data-field="mode" value=${form.mode} onChange=${set("mode")}>
        <option value="">the worker's</option>
        ${allowedModes("auto").map((m) => html`<option value=${m}>${m}</option>`)}
      </select>
    </label>
    <label>Model (optional)
      <input data-field="model" type="text" value=${form.model} onInput=${set("model")} />
    </label>`;
}

export function Spinner() {
  return html`<span class="spinner" aria-hidden="true"></span>`;
}

export function Bar({ onMenu, title, children }) {
  return html`<header class="bar">
    ${onMenu ? html`<button class="icon menu" onClick=${onMenu} aria-label="Sessions">☰</button>` : null}
    <div class="bar-title">${title}</div>
    ${children}
  </header>`;
}

/** The prompt box: Enter sends on a computer; on a phone Enter is a new line and the button sends. */
export function Composer({ onSend, running = false, onStop = null, placeholder = "Ask auger…", autofocus = false }) {
  const [text, setText] = useState("");
  const [busy, setBusy] = useState(false);
  const box = useRef(null);
  useEffect(() => { if (autofocus && !touch()) box.current?.focus(); }, []);
  useLayoutEffect(() => { // grow with the text, up to a third of the screen
    const el = box.current;
    if (!el) return;
    el.style.height = "auto";
    el.style.height = `${Math.min(el.scrollHeight, window.innerHeight / 3)}px`;
  }, [text]);
  const send = async () => {
    const value = text.trim();
    if (!value || busy) return;
    setBusy(true);
    try {
      await onSend(value);
      setText("");
    } catch { /* the page says why; the text stays to send again */ } finally {
      setBusy(false);
    }
  };
  const onKey = (e) => {
    if (e.key === "Enter" && !e.shiftKey && !e.isComposing && !touch()) {
      e.preventDefault();
      send();
    }
  };
  return html`<form class="composer" onSubmit=${(e) => { e.preventDefault(); send(); }}>
    <textarea ref=${box} data-role="prompt" rows="1" placeholder=${placeholder} value=${text}
      onInput=${(e) => setText(e.target.value)} onKeyDown=${onKey} aria-label="Prompt"></textarea>
    ${running && onStop ? html`<button type="button" class="ghost stop" onClick=${onStop} title="Stop the turn">Stop</button>` : null}
    <button type="submit" class="primary send" data-role="send" disabled=${busy || !text.trim()} aria-label="Send">Send</button>
  </form>`;
}
