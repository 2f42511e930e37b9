// One session's page: its controller (load the newest items, follow the envelopes after them, act
// through ops) and its view (header with mode and model, the transcript, pending changes, the prompt).
//
// Loading: the snapshot first (its `last_seq`, and where a running turn started), then the newest page
// of items, then the events after the snapshot's cursor — from just before the running turn's start,
// so a reply streaming as the page loads is drawn whole. Older pages come as the user scrolls up.

import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "../vendor/hooks.mjs";
import { signal } from "../vendor/signals.mjs";
import { api, ApiError, sessionPath, submissionId, submit } from "./api.js";
import { Entry } from "./entries.js";
import { Follower } from "./stream.js";
import { Transcript } from "./transcript.js";
import { allowedModes, go, html, money, serverInfo, shortPath, Spinner, touch } from "./ui.js";

const PAGE = 80; // items per page: what is drawn at first, and each time the user scrolls to the top

/** A session this page just created (the home page, a fork), and its first prompt: its page follows its
 * events from the first, so what the session said as it opened (a warning) is shown too. */
export const handoff = new Map();

/** Providers and agents, as /api/providers lists them (shared with the settings page). */
export const providers = signal(null);

export async function loadProviders() {
  providers.value = (await api("/api/providers")).providers;
}

export class SessionController {
  constructor(id) {
    this.id = id;
    this.t = new Transcript();
    this.tick = signal(0);
    this.info = signal(null); // the snapshot's record and state, kept current by the envelopes
    this.status = signal("connecting");
    this.error = signal("");
    this.pendingFiles = signal(null);
    this.olderLoading = false;
    this.scheduled = 0;
    this.filling = false;
    this.t.changed = (e) => this.changed(e);
  }

  async start() {
    try {
      const snap = await api(sessionPath(this.id));
      this.info.value = flatten(snap);
      const startedAt = snap.state.turn_started_seq;
      const live = startedAt ? snap.state.running_turn : null;
      const page = await api(sessionPath(this.id, `/items?limit=${PAGE}`));
      const handed = handoff.get(this.id);
      handoff.delete(this.id);
      this.t.lastSeq = handed ? 0 : startedAt ? startedAt - 1 : snap.state.last_seq;
      this.t.prepend(page, { liveTurn: live });
      if (!live) this.t.waiting(snap.state.pending_approvals);
      this.redraw();
      this.follower = new Follower({
        url: () => sessionPath(this.id, `/events?after_seq=${this.t.lastSeq}`),
        onEvent: (e) => this.t.apply(e),
        onState: (s) => this.onState(s),
        onStatus: (s) => { this.status.value = s; },
      });
      this.follower.open();
      if (snap.state.pending_changes) this.loadPending();
      if (handed?.prompt) await this.send(handed.prompt);
    } catch (error) {
      this.error.value = error.status === 404 ? "No such session here." : error.message;
    }
  }

  stop() {
    this.follower?.close();
    cancelAnimationFrame(this.scheduled);
  }

  /** The `state` event a stream starts with: the session as it is now. */
  onState(snap) {
    if (!snap || !snap.state) return;
    const fresh = flatten(snap);
    this.info.value = { ...this.info.value, ...fresh, title: fresh.title || this.info.value?.title || "" };
    // approvals the cursor has passed (those after it come with the events)
    this.t.waiting(snap.state.pending_approvals.filter((e) => e.seq <= this.t.lastSeq));
  }

  changed(e) {
    if (e) this.follow(e);
    if (!this.scheduled) this.scheduled = requestAnimationFrame(() => { this.scheduled = 0; this.redraw(); });
  }

  redraw() {
    this.tick.value++;
  }

  /** What the session-level parts of the page learn from an envelope. */
  follow(e) {
    const info = this.info.value;
    if (!info || e.parent_call_id) return;
    const set = (fields) => { this.info.value = { ...this.info.value, ...fields }; };
    switch (e.type) {
      case "session_configured": set({ open: true, mode: e.mode, model: e.model, provider: e.provider }); break;
      case "session_title": set({ title: e.title }); break;
      case "mode_changed": set({ mode: e.mode }); break;
      case "model_changed": set({ model: e.model, provider: e.provider }); break;
      case "backend_changed": set({ backend: e.backend }); break;
      case "turn_started": set({ running: e.turn_id, retrying: "" }); break;
      case "turn_ended": set({ running: null, retrying: "" }); break;
      case "retrying": set({ retrying: `retrying (${e.attempt}/${e.max_attempts}): ${e.reason}` }); break;
      case "token_usage": set({ cost: e.session_cost, contextLeft: e.context_left_percent, retrying: "" }); break;
      case "pending_changed": set({ pendingChanges: e.count }); this.loadPending(); break;
      case "shutdown_complete": set({ open: false, running: null }); break;
      default: break;
    }
    if (this.t.missingUser.has(e.turn_id) && e.type !== "turn_started" && !this.filling) this.fillUsers();
  }

  async fillUsers() {
    this.filling = true;
    try {
      this.t.fillUsers((await api(sessionPath(this.id, "/items?limit=20"))).items);
      if (!this.info.value.title) this.info.value = { ...this.info.value, title: (await api(sessionPath(this.id))).title };
    } catch { /* the message shows on the next load */ } finally {
      this.filling = false;
    }
  }

  async loadOlder() {
    if (this.olderLoading || this.t.nextBefore == null) return false;
    this.olderLoading = true;
    try {
      const page = await api(sessionPath(this.id, `/items?limit=${PAGE}&before=${this.t.nextBefore}`));
      this.t.prepend(page);
      this.redraw();
      return true;
    } finally {
      this.olderLoading = false;
    }
  }

  // -- actions ---------------------------------------------------------------------------------------
  async op(op) {
    this.error.value = "";
    try {
      return await submit(this.id, op);
    } catch (error) {
      this.error.value = error.message;
      throw error;
    }
  }

  async send(text) {
    const id = submissionId();
    if (!this.info.value.title) this.info.value = { ...this.info.value, title: text.split(/\s+/).join(" ").slice(0, 80).trim() };
    const entry = this.t.sent(text, id);
    try {
      await submit(this.id, { type: "user_turn", text }, id);
    } catch (error) {
      this.t.touch(entry, { pending: false, failed: true });
      this.error.value = `Not sent: ${error.message}`;
      this.redraw();
      throw error;
    }
  }

  interrupt() { return this.op({ type: "interrupt", reason: "stopped from the web UI" }); }

  /** Answer an approval; the card says it is being sent, and why it was refused (409: someone else answered). */
  async decide(entry, decision, feedback) {
    const op = { type: "approval_decision", request_id: entry.requestId, decision };
    if (feedback) op.feedback = feedback;
    this.t.touch(entry, { sending: true, failure: "" });
    this.redraw();
    try {
      await submit(this.id, op);
      this.t.touch(entry, { sending: false });
    } catch (error) {
      this.t.touch(entry, { sending: false, failure: error.message });
    }
    this.redraw();
  }

  async regenerate() {
    const last = this.t.lastExchange();
    if (!last) return;
    await this.op({ type: "rollback", turns: 1 });
    await this.send(last.text);
  }

  async editAndResend(entry, text) {
    try {
      const before = entry.seq ?? (await this.findSeq(entry));
      const fork = await api("/api/sessions", { method: "POST", body: { fork: this.id, before } });
      handoff.set(fork.id, { prompt: text });
      go(`/s/${encodeURIComponent(fork.id)}`);
    } catch (error) {
      this.error.value = `Could not fork: ${error.message}`;
    }
  }

  /** The item seq of a message this page only saw as it was sent: looked up in the stored items. */
  async findSeq(entry) {
    let before = null;
    for (;;) {
      const page = await api(sessionPath(this.id, `/items?limit=200${before ? `&before=${before}` : ""}`));
      const found = page.items.filter((i) => i.item.type === "user_message" && i.turn_id === entry.turn && i.item.text === entry.text);
      if (found.length) return found[0].seq;
      if (page.next_before == null) throw new ApiError(404, "that message is not stored yet");
      before = page.next_before;
    }
  }

  undo(entry, redo) {
    return this.op(redo ? { type: "redo" } : { type: "undo", turn_id: entry.turn });
  }

  setMode(mode) { return this.op({ type: "set_mode", mode }); }

  setModel(provider, model) { return this.op({ type: "set_model", model, provider }); }

  setBackend(name) { return this.op({ type: "set_backend", name }); }

  async loadPending() {
    try {
      this.pendingFiles.value = (await api(sessionPath(this.id, "/pending"))).files;
    } catch (error) {
      this.error.value = error.message;
    }
  }

  pending(kind, paths) { return this.op({ type: kind, paths }); }
}

function flatten(snap) {
  const s = snap.state;
  return { id: snap.id, title: snap.title, cwd: snap.cwd, cost: snap.cost, open: s.open, running: s.running_turn,
    mode: s.mode, model: s.model, provider: s.provider, backend: s.backend, pendingChanges: s.pending_changes,
    retrying: "", contextLeft: null };
}

// -- the view ------------------------------------------------------------------------------------------
const flagCache = new Map();
function flags(canEdit, last, idle) {
  const key = `${canEdit}${last}${idle}`;
  if (!flagCache.has(key)) flagCache.set(key, { canEdit, last, idle });
  return flagCache.get(key);
}

export function ChatView({ id, onMenu }) {
  const session = useMemo(() => new SessionController(id), [id]);
  useEffect(() => { session.start(); return () => session.stop(); }, [session]);
  const scroller = useRef(null);
  const sentinel = useRef(null);
  const stick = useRef(true);
  const anchor = useRef(null);
  session.tick.value; // redraw on every batch of changes
  const info = session.info.value;

  useLayoutEffect(() => { // keep the reader where they were: at the bottom, or on what they read
    const el = scroller.current;
    if (!el) return;
    if (anchor.current) {
      el.scrollTop = anchor.current.top + (el.scrollHeight - anchor.current.height);
      anchor.current = null;
    } else if (stick.current) {
      el.scrollTop = el.scrollHeight;
    }
  });

  useEffect(() => { // the older page when the top comes into view
    const el = sentinel.current;
    if (!el || !scroller.current) return undefined;
    const observer = new IntersectionObserver(async ([seen]) => {
      if (!seen.isIntersecting || session.t.nextBefore == null || !session.t.entries.length) return;
      const box = scroller.current;
      const before = { top: box.scrollTop, height: box.scrollHeight };
      stick.current = false;
      anchor.current = before;
      if (!(await session.loadOlder())) anchor.current = null;
    }, { root: scroller.current, rootMargin: "400px 0px 0px 0px" });
    observer.observe(el);
    return () => observer.disconnect();
  }, [session, info !== null]);

  const onScroll = (e) => {
    const el = e.currentTarget;
    stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  };

  if (session.error.value && !info) {
    return html`<section class="chat"><${Bar} onMenu=${onMenu} title="Session" /><div class="empty">${session.error.value}</div></section>`;
  }
  if (!info) return html`<section class="chat"><${Bar} onMenu=${onMenu} title="Loading…" /><div class="empty"><${Spinner} /></div></section>`;

  const entries = session.t.entries;
  const idle = !info.running;
  let lastAgent = -1;
  for (let i = entries.length - 1; i >= 0; i--) {
    if (entries[i].kind === "user") break;
    if (entries[i].kind === "agent" && !entries[i].rolledBack) { lastAgent = i; break; }
  }
  return html`<section class="chat">
    <${Header} session=${session} info=${info} onMenu=${onMenu} />
    <div class="scroller" ref=${scroller} onScroll=${onScroll}>
      <div class="transcript">
        <div ref=${sentinel} class="older">${session.t.nextBefore != null ? html`<${Spinner} />` : entries.length ? html`<span>Start of the session</span>` : null}</div>
        ${entries.map((entry, i) => html`<${Entry} key=${entry.key} entry=${entry} v=${entry.v} actions=${session}
          flags=${flags(entry.kind === "user" && Boolean(entry.turn || entry.seq), i === lastAgent, idle)} />`)}
        ${!entries.length && idle ? html`<div class="empty">Nothing here yet. Ask something below.</div>` : null}
        ${info.running ? html`<div class="working"><${Spinner} /> ${info.retrying
          || (entries.some((e) => e.kind === "approval" && !e.resolved) ? "Waiting for an answer" : "Working…")}</div>` : null}
      </div>
    </div>
    ${info.pendingChanges ? html`<${Pending} session=${session} />` : null}
    ${session.error.value ? html`<div class="error bar" role="alert">${session.error.value}
      <button class="link" onClick=${() => { session.error.value = ""; }}>Dismiss</button></div>` : null}
    <${Composer} onSend=${(text) => { stick.current = true; return session.send(text); }}
      running=${Boolean(info.running)} onStop=${() => session.interrupt()} />
  </section>`;
}

export function Bar({ onMenu, title, children }) {
  return html`<header class="bar">
    <button class="icon menu" onClick=${onMenu} aria-label="Sessions">☰</button>
    <div class="bar-title">${title}</div>
    ${children}
  </header>`;
}

function Header({ session, info, onMenu }) {
  const status = session.status.value;
  const [open, setOpen] = useState(false);
  const modes = allowedModes(serverInfo.value?.mode || "safe");
  return html`<${Bar} onMenu=${onMenu} title=${html`<span class="title-text">${info.title || "New session"}</span>
      <span class="sub">${shortPath(info.cwd)}</span>`}>
    <span class=${`dot ${status}`} title=${`events: ${status}`}></span>
    <button class="icon" aria-label="Session settings" aria-expanded=${open} onClick=${() => setOpen(!open)}>⋯</button>
    ${open ? html`<div class="popover" onClick=${(e) => e.stopPropagation()}>
      <label>Mode
        <select value=${info.mode} onChange=${(e) => session.setMode(e.target.value)}>
          ${[...new Set([...modes, info.mode])].map((m) => html`<option value=${m}>${m}</option>`)}
        </select>
      </label>
      <${ModelPicker} info=${info} session=${session} />
      <div class="meta">${money(info.cost)}${info.contextLeft != null ? ` · ${Math.round(info.contextLeft)}% context left` : ""}</div>
      <div class="meta">${info.cwd}</div>
    </div>` : null}
  </${Bar}>`;
}

/** Models of the providers that can be used now, and the agents that can run turns. */
function ModelPicker({ info, session }) {
  useEffect(() => { if (!providers.value) loadProviders().catch(() => {}); }, []);
  const rows = (providers.value || []).filter((p) => p.status === "available");
  const current = info.backend ? `agent:${info.backend}` : `model:${info.provider}:${info.model}`;
  const choose = (value) => {
    const [kind, a, ...rest] = value.split(":");
    if (kind === "agent") session.setBackend(a);
    else if (info.backend) session.setBackend("").then(() => session.setModel(a, rest.join(":")));
    else session.setModel(a, rest.join(":"));
  };
  return html`<label>Model
    <select value=${current} onChange=${(e) => choose(e.target.value)}>
      ${!rows.some((p) => p.name === info.provider && p.models?.includes(info.model)) && !info.backend
        ? html`<option value=${current}>${info.model} (${info.provider})</option>` : null}
      ${rows.filter((p) => p.kind === "model").map((p) => html`<optgroup label=${p.label || p.name}>
        ${(p.models?.length ? p.models : [info.model]).map((m) => html`<option value=${`model:${p.name}:${m}`}>${m}</option>`)}
      </optgroup>`)}
      ${rows.some((p) => p.kind === "agent") ? html`<optgroup label="Agents">
        ${rows.filter((p) => p.kind === "agent").map((p) => html`<option value=${`agent:${p.name}`}>${p.label || p.name}</option>`)}
      </optgroup>` : null}
    </select>
  </label>`;
}

function Pending({ session }) {
  const files = session.pendingFiles.value || [];
  const paths = (f) => (f ? [f.path] : []);
  return html`<details class="pending">
    <summary>${session.info.value.pendingChanges} pending change${session.info.value.pendingChanges === 1 ? "" : "s"} — not yet in your files</summary>
    <ul>${files.map((f) => html`<li>
      <span class="kind">${f.kind}</span> <span class="path">${f.path}</span> <span class="add">+${f.added}</span> <span class="del">−${f.removed}</span>
      <span class="row">
        <button class="small" onClick=${() => session.pending("pending_apply", paths(f))}>Apply</button>
        <button class="small ghost" onClick=${() => session.pending("pending_discard", paths(f))}>Discard</button>
      </span></li>`)}</ul>
    <div class="row end">
      <button class="ghost" onClick=${() => session.pending("pending_discard", [])}>Discard all</button>
      <button class="primary" onClick=${() => session.pending("pending_apply", [])}>Apply all</button>
    </div>
  </details>`;
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
