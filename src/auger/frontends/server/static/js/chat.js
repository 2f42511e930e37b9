// One session's page: the header (title, connection, mode and model), the transcript, pending changes,
// the prompt. What it shows and does comes from its SessionController (session.js).

import { useEffect, useLayoutEffect, useMemo, useRef, useState } from "../vendor/hooks.mjs";
import { Entry } from "./entries.js";
import { ask, permission } from "./notify.js";
import { SessionController } from "./session.js";
import { ShareDialog } from "./share.js";
import { allowedModes, Bar, Composer, html, loadProviders, may, money, providers, serverInfo, shared, shortPath, Spinner } from "./ui.js";

// -- the view ------------------------------------------------------------------------------------------
// What an entry may offer, given where it stands: one shared object per combination, so an entry whose
// flags did not change is not drawn again.
const flagCache = new Map();
function flags(canEdit, last, idle, closing, member) {
  const key = `${canEdit}${last}${idle}${closing}${member}`;
  if (!flagCache.has(key)) flagCache.set(key, { canEdit, last, idle, closing, member });
  return flagCache.get(key);
}

/** A reply that ends what the agent said (no tool call follows it in its turn): it gets Copy. */
function closing(entries, i) {
  const next = entries[i + 1];
  return entries[i].kind === "agent" && (!next || !["tool", "approval", "reasoning", "agent", "plan"].includes(next.kind));
}

export function ChatView({ id, onMenu }) {
  const session = useMemo(() => new SessionController(id), [id]);
  useEffect(() => { session.start(); return () => session.stop(); }, [session]);
  const scroller = useRef(null);
  const sentinel = useRef(null);
  const stick = useRef(true);
  const anchor = useRef(null);
  const scrolledTo = useRef(null); // where the reader's last scroll left the transcript (null: never scrolled)
  session.tick.value; // redraw on every batch of changes
  const info = session.info.value;

  useLayoutEffect(() => { // keep the reader where they were: at the bottom, or on what they read
    const el = scroller.current;
    if (!el) return;
    const kept = anchor.current;
    // a scroll up whose event has not come yet (it comes on the next frame) while a change is drawn: the
    // reader has left the bottom, and is not pulled back to it
    if (scrolledTo.current !== null && el.scrollTop < scrolledTo.current - 1) stick.current = false;
    if (kept && kept.before !== session.t.nextBefore) { // the older page is drawn (not some other change)
      // at the very top the reader stays at the top and sees the older page, as the browser's own scroll
      // anchoring does; anywhere else they stay on what they read
      const top = scrolledTo.current;
      el.scrollTop = top === 0 ? 0 : (top ?? 0) + (el.scrollHeight - kept.height);
      anchor.current = null;
    } else if (!kept && stick.current) {
      el.scrollTop = el.scrollHeight;
    }
  });

  // The older page when the top comes into view. The observer is made again once each page is drawn: its
  // first report is the sentinel as it is then, so a top still in view (the reader at the very top, a short
  // page, a report missed while the page was busy) loads the next page, until the start of the session.
  useEffect(() => {
    const el = sentinel.current;
    if (!el || !scroller.current) return undefined;
    const observer = new IntersectionObserver(async ([seen]) => {
      const t = session.t;
      if (!seen.isIntersecting || session.olderLoading || t.nextBefore == null || !t.entries.length) return;
      stick.current = false;
      anchor.current = { height: scroller.current.scrollHeight, before: t.nextBefore };
      if (!(await session.loadOlder())) anchor.current = null;
    }, { root: scroller.current, rootMargin: "400px 0px 0px 0px" });
    observer.observe(el);
    return () => observer.disconnect();
  }, [session, info !== null, session.t.nextBefore]);

  const onScroll = (e) => {
    const el = e.currentTarget;
    scrolledTo.current = el.scrollTop;
    stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 80;
  };

  if (session.error.value && !info) {
    return html`<section class="chat"><${Bar} onMenu=${onMenu} title="Session" /><div class="empty">${session.error.value}</div></section>`;
  }
  if (!info) return html`<section class="chat"><${Bar} onMenu=${onMenu} title="Loading…" /><div class="empty"><${Spinner} /></div></section>`;

  const entries = session.t.entries;
  const idle = !info.running;
  const member = may("member"); // a viewer, or a share link, reads and follows; it sends nothing
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
          flags=${flags(member && entry.kind === "user" && Boolean(entry.turn || entry.seq), member && i === lastAgent, idle,
            closing(entries, i), member)} />`)}
        ${!entries.length && idle ? html`<div class="empty">Nothing here yet. Ask something below.</div>` : null}
        ${info.running ? html`<div class="working"><${Spinner} /> ${info.retrying
          || (entries.some((e) => e.kind === "approval" && !e.resolved) ? "Waiting for an answer" : "Working…")}</div>` : null}
      </div>
    </div>
    ${info.pendingChanges && member ? html`<${Pending} session=${session} />` : null}
    ${session.error.value ? html`<div class="error bar" role="alert">${session.error.value}
      <button class="link" onClick=${() => { session.error.value = ""; }}>Dismiss</button></div>` : null}
    ${session.ended.value ? html`<div class="error bar" role="alert" data-role="ended">This view has ended: ${
      session.ended.value.replace(/^access revoked: /, "")}.</div>` : null}
    ${member ? html`<${Composer} onSend=${(text) => { stick.current = true; return session.send(text); }}
      running=${Boolean(info.running)} onStop=${() => session.interrupt()} />`
      : html`<div class="read-only" data-role="read-only">${shared()
        ? `A read-only view of this session, shared with you until ${new Date(shared().expires * 1000).toLocaleString()}.`
        : "You can follow this session; your role does not let you send to it."}</div>`}
  </section>`;
}

function Header({ session, info, onMenu }) {
  const status = session.status.value;
  const [open, setOpen] = useState(false);
  const [sharing, setSharing] = useState(false);
  const modes = allowedModes(serverInfo.value?.mode || "safe");
  const member = may("member");
  return html`<${Bar} onMenu=${onMenu} title=${html`<span class="title-text">${info.title || "New session"}</span>
      <span class="sub">${shortPath(info.cwd)}${info.created_by
        ? html` · <span class="creator" title="who started it">${info.created_by}</span>` : null}</span>`}>
    <span class=${`dot ${status}`} title=${`events: ${status}`}></span>
    ${permission.value === "default" ? html`<button class="icon" data-role="notify" onClick=${() => ask()}
      title="Notify me when this session needs an answer or finishes a turn" aria-label="Notify me">🔔</button>` : null}
    ${member ? html`<button class="small ghost" data-role="share" aria-expanded=${sharing} onClick=${() => setSharing(!sharing)}
      title="A read-only link to this session">Share</button>` : null}
    ${sharing ? html`<div class="backdrop" onClick=${() => setSharing(false)}></div>
      <${ShareDialog} sessionId=${session.id} />` : null}
    ${member ? html`<button class="icon" aria-label="Session settings" aria-expanded=${open} onClick=${() => setOpen(!open)}>⋯</button>` : null}
    ${open ? html`<div class="backdrop" onClick=${() => setOpen(false)}></div>` : null}
    ${open ? html`<div class="popover">
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
