// The fleet's tasks, on a server whose store is PostgreSQL: the queue's numbers and the latest tasks from
// /api/fleet, read again every few seconds while the page is visible (workers on other machines write
// tasks straight to the database, so there is no event to wait for). Each task links to its session —
// streamed from the store like any other — and a queued or running one can be cancelled, a failed or
// cancelled one retried. A prompt is whatever its submitter wrote: drawn as text, like model text.

import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { signal } from "../vendor/signals.mjs";
import { api } from "./api.js";
import { ago, Bar, html, money, shortPath, Spinner } from "./ui.js";

const POLL_MS = 3000;
const LIMIT = 50;

/** Whether this server has a fleet (its /api/fleet answers; a SQLite store's is 404): null until asked. */
export const hasFleet = signal(null);

export async function probeFleet() {
  try {
    await api("/api/fleet?limit=1");
    hasFleet.value = true;
  } catch {
    hasFleet.value = false;
  }
}

/** `load` now, then every POLL_MS while the page is visible, and at once when it becomes visible again. */
function usePoll(load) {
  useEffect(() => {
    const visible = () => document.visibilityState === "visible";
    const onVisibility = () => { if (visible()) load(); };
    load();
    const timer = setInterval(onVisibility, POLL_MS);
    document.addEventListener("visibilitychange", onVisibility);
    return () => {
      clearInterval(timer);
      document.removeEventListener("visibilitychange", onVisibility);
    };
  }, []);
}

export function TasksView({ onMenu }) {
  const [fleet, setFleet] = useState(null);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(null);
  const inFlight = useRef(null);
  const load = () => { // one read at a time: a slow answer is never overtaken by an older one
    inFlight.current ||= api(`/api/fleet?limit=${LIMIT}`)
      .then((data) => { setFleet(data); setError(""); })
      .catch((e) => setError(e.message))
      .finally(() => { inFlight.current = null; });
    return inFlight.current;
  };
  usePoll(load);
  const act = async (task, action) => {
    setBusy(task.id);
    setError("");
    try {
      await api(`/api/fleet/tasks/${encodeURIComponent(task.id)}/${action}`, { method: "POST", body: {} });
      await inFlight.current;
      await load();
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(null);
    }
  };
  return html`<section class="page">
    <${Bar} onMenu=${onMenu} title="Tasks" />
    <div class="page-body">
      ${error ? html`<div class="error" role="alert">${error}</div>` : null}
      ${fleet ? html`<${Stats} stats=${fleet.stats} />
        <h2>Latest tasks</h2>
        ${fleet.tasks.length ? html`<ul class="tasks">
          ${fleet.tasks.map((t) => html`<${TaskRow} key=${t.id} task=${t} busy=${busy === t.id} act=${act} />`)}
        </ul>` : html`<p class="meta">No tasks yet: <code>auger submit</code> queues one.</p>`}`
        : error ? null : html`<div class="empty"><${Spinner} /></div>`}
    </div>
  </section>`;
}

function Stats({ stats }) {
  const tile = (name, label, value, wide = false) => html`<div class=${wide ? "stat wide" : "stat"} data-stat=${name}>
    <span class="stat-value">${value}</span><span class="stat-label">${label}</span></div>`;
  const { tokens } = stats;
  const times = [stats.avg_wait_s != null ? `waited ${seconds(stats.avg_wait_s)}` : "",
    stats.avg_run_s != null ? `ran ${seconds(stats.avg_run_s)}` : ""].filter(Boolean).join(", ");
  return html`<div class="stats">
      ${tile("queued", "queued", stats.queued)}
      ${tile("running", "running", stats.running)}
      ${tile("done", "done", stats.done)}
      ${tile("failed", "failed", stats.failed)}
      ${tile("cancelled", "cancelled", stats.cancelled)}
      ${tile("retried", "retried", stats.retried)}
      ${tile("tokens", "tokens in / out", `${count(tokens.input)} / ${count(tokens.output)}`, true)}
      ${tile("cost", "cost", stats.cost == null ? "unknown" : money(stats.cost), true)}
    </div>
    ${times ? html`<p class="meta">Finished tasks ${times} on average.</p>` : null}`;
}

function TaskRow({ task: t, busy, act }) {
  const { spec } = t;
  const stopping = t.state === "running" && t.cancel_requested;
  return html`<li class="task" data-role="task" data-state=${t.state} data-task=${t.id}>
    <div class="task-head">
      <span class=${`pill ${t.state}`}>${stopping ? "cancelling" : t.state}</span>
      <span class="task-prompt" title=${spec.prompt}>${spec.prompt}</span>
    </div>
    <div class="task-meta meta">
      <span class="repo" title=${`${spec.repo} @ ${spec.ref}`}>${shortPath(spec.repo)} @ ${spec.ref}</span>
      <span>attempt ${t.attempts}/${t.max_attempts}</span>
      ${t.worker ? html`<span class="worker" title=${t.worker}>${t.worker}</span>` : null}
      <span title=${new Date(t.created * 1000).toLocaleString()}>${ago(t.created)}</span>
      ${typeof t.cost === "number" ? html`<span class="cost">${money(t.cost)}</span>` : null}
    </div>
    ${t.error ? html`<div class="task-error">${t.error}</div>` : null}
    <div class="row wrap">
      ${t.session_id ? html`<a class="button small" href=${`#/s/${encodeURIComponent(t.session_id)}`}>Session</a>` : null}
      ${busy ? html`<${Spinner} />` : html`
        ${["queued", "running"].includes(t.state) && !stopping
          ? html`<button class="small danger" data-action="cancel" onClick=${() => act(t, "cancel")}>Cancel</button>` : null}
        ${["failed", "cancelled"].includes(t.state)
          ? html`<button class="small" data-action="retry" onClick=${() => act(t, "retry")}>Retry</button>` : null}`}
    </div>
  </li>`;
}

function count(n) {
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n);
}

function seconds(s) {
  return s < 90 ? `${s.toFixed(1)} s` : `${(s / 60).toFixed(1)} min`;
}
