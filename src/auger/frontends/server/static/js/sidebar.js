// The session list: a page of stored sessions (more on request), kept live by `/api/events` — new and
// opened sessions, titles, running turns, approvals waiting, costs after each turn. The stream is not
// numbered: after a reconnect the list is read again. Below it, the way to the settings and, when the
// server has a fleet, to its tasks.

import { useEffect } from "../vendor/hooks.mjs";
import { signal } from "../vendor/signals.mjs";
import { api, sessionPath } from "./api.js";
import { Follower } from "./stream.js";
import { hasFleet } from "./tasks.js";
import { ago, html, money, route, shortPath } from "./ui.js";

const sessions = signal([]); // rows: {id, title, cwd, updated, cost, open, running, waiting}
const cursor = signal(null);
const failed = signal("");
let follower = null;

async function list() {
  try {
    const page = await api("/api/sessions?limit=30");
    const known = new Map(sessions.value.map((s) => [s.id, s]));
    sessions.value = page.sessions.map((s) => ({ ...known.get(s.id), ...s }));
    cursor.value = page.next_cursor;
    failed.value = "";
  } catch (error) {
    failed.value = error.message;
  }
}

async function more() {
  const page = await api(`/api/sessions?limit=30&cursor=${encodeURIComponent(cursor.value)}`);
  const shown = new Set(sessions.value.map((s) => s.id));
  sessions.value = [...sessions.value, ...page.sessions.filter((s) => !shown.has(s.id))];
  cursor.value = page.next_cursor;
}

function update(id, fields, { top = false } = {}) {
  const rows = sessions.value;
  const at = rows.findIndex((s) => s.id === id);
  if (at < 0) return false;
  const row = { ...rows[at], ...fields };
  sessions.value = top ? [row, ...rows.slice(0, at), ...rows.slice(at + 1)] : rows.map((s, i) => (i === at ? row : s));
  return true;
}

async function refresh(id, extra = {}) {
  try {
    const snap = await api(sessionPath(id));
    const fields = { id, title: snap.title, cwd: snap.cwd, updated: snap.updated, cost: snap.cost,
      open: snap.state.open, running: Boolean(snap.state.running_turn), ...extra };
    if (!update(id, fields)) sessions.value = [fields, ...sessions.value];
  } catch { /* outside the roots, or gone */ }
}

function onEvent(e) {
  if (!e || !e.session_id) return;
  const id = e.session_id;
  const now = Date.now() / 1000;
  switch (e.type) {
    case "session_created":
    case "session_opened":
      if (!update(id, { open: true, title: e.title || undefined }, { top: true })) refresh(id);
      break;
    case "session_updated":
      if (!update(id, Object.fromEntries(Object.entries({ title: e.title, updated: e.updated, open: e.open })
        .filter(([, v]) => v !== undefined)))) refresh(id);
      break;
    case "turn_started":
      update(id, { running: true, updated: now }, { top: true });
      break;
    case "turn_ended":
      update(id, { running: false, waiting: 0 });
      refresh(id); // its cost
      break;
    case "approval_waiting":
      update(id, { waiting: (sessions.value.find((s) => s.id === id)?.waiting || 0) + 1 });
      break;
    case "approval_resolved":
      update(id, { waiting: Math.max(0, (sessions.value.find((s) => s.id === id)?.waiting || 1) - 1) });
      break;
    case "session_closed":
      update(id, { open: false, running: false, waiting: 0 });
      break;
    default:
      break;
  }
}

function state(s) {
  if (s.waiting) return html`<span class="badge warn" title="An approval is waiting">needs you</span>`;
  if (s.running) return html`<span class="badge live">running</span>`;
  return s.open ? html`<span class="badge">open</span>` : null;
}

export function Sidebar({ open, onClose }) {
  useEffect(() => {
    list();
    follower = new Follower({ url: () => "/api/events", onEvent, onReopen: list });
    follower.open();
    return () => follower.close();
  }, []);
  const current = route.value.view === "session" ? route.value.id : null;
  return html`<aside class=${`sidebar ${open ? "open" : ""}`} aria-label="Sessions">
    <div class="brand row">
      <a href="#/" class="logo" onClick=${onClose}>auger</a>
      <button class="icon close" onClick=${onClose} aria-label="Close">✕</button>
    </div>
    <a class="button primary new" href="#/" onClick=${onClose}>New session</a>
    <nav class="list">
      ${sessions.value.map((s) => html`<a key=${s.id} href=${`#/s/${encodeURIComponent(s.id)}`} onClick=${onClose}
          class=${`session ${s.id === current ? "current" : ""}`} aria-current=${s.id === current ? "page" : undefined}>
        <span class="session-title">${s.title || "Untitled"}</span>
        <span class="session-meta">
          <span class="project" title=${s.cwd}>${shortPath(s.cwd)}</span>
          ${state(s)}
          <span class="cost">${s.cost ? money(s.cost) : ""}</span>
          <span class="when">${s.updated ? ago(s.updated) : ""}</span>
        </span>
      </a>`)}
      ${failed.value ? html`<div class="error">${failed.value}</div>` : null}
      ${!sessions.value.length && !failed.value ? html`<div class="meta pad">No sessions yet.</div>` : null}
      ${cursor.value ? html`<button class="ghost more" onClick=${more}>Older sessions</button>` : null}
    </nav>
    <div class="foot row">
      <a href="#/settings" onClick=${onClose}>Settings</a>
      ${hasFleet.value ? html`<a href="#/tasks" onClick=${onClose} data-role="tasks-link">Tasks</a>` : null}
      <a href="#/new" onClick=${onClose}>New with options</a>
    </div>
  </aside>`;
}
