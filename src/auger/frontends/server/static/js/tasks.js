// The fleet's tasks, on a server whose store is PostgreSQL: the queue's numbers and the latest tasks from
// /api/fleet, read again every few seconds while the page is visible (workers on other machines write
// tasks straight to the database, so there is no event to wait for). Each task links to its session —
// streamed from the store like any other — a queued or running one can be cancelled, a failed or
// cancelled one retried, and a waiting one (parked at an approval) answered here; "New task" submits one.
// The schedules that start tasks are listed above them (schedules.js), read with them.
// A prompt is whatever its submitter wrote: drawn as text, like model text. What a button does is offered
// only to a role that may do it (the server refuses the rest anyway).

import { useEffect, useRef, useState } from "../vendor/hooks.mjs";
import { computed } from "../vendor/signals.mjs";
import { api, submissionId } from "./api.js";
import { Schedules } from "./schedules.js";
import { ago, Bar, html, may, money, serverInfo, shortPath, Spinner, WorkerModeAndModel } from "./ui.js";

const POLL_MS = 3000;
const LIMIT = 50;
const OPTION_LABELS = { approve: "Approve", approve_session: "Approve for the session", deny: "Deny", abort: "Abort" };

/** Whether this server has a fleet: what /api/server says (a SQLite store has none, and is never asked). */
export const hasFleet = computed(() => Boolean(serverInfo.value?.fleet));

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
  const [schedules, setSchedules] = useState(null);
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(null);
  const inFlight = useRef(null);
  const load = () => { // one read at a time: a slow answer is never overtaken by an older one
    inFlight.current ||= Promise.all([api(`/api/fleet?limit=${LIMIT}`), api("/api/fleet/schedules")])
      .then(([data, timed]) => { setFleet(data); setSchedules(timed); setError(""); })
      .catch((e) => setError(e.message))
      .finally(() => { inFlight.current = null; });
    return inFlight.current;
  };
  usePoll(load);
  const act = async (task, action, body = {}) => {
    setBusy(task.id);
    setError("");
    try {
      await api(`/api/fleet/tasks/${encodeURIComponent(task.id)}/${action}`, { method: "POST", body });
      await inFlight.current;
      await load();
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(null);
    }
  };
  const answer = (task, decision, feedback) => act(task, "answer", {
    request_id: task.waiting_for.request_id, decision, ...(feedback ? { feedback } : {}) });
  return html`<section class="page">
    <${Bar} onMenu=${onMenu} title="Tasks" />
    <div class="page-body">
      ${may("member") ? html`<${NewTask} onQueued=${load} />` : null}
      ${error ? html`<div class="error" role="alert">${error}</div>` : null}
      ${fleet ? html`<${Stats} stats=${fleet.stats} />
        <${Schedules} data=${schedules} reload=${async () => { await inFlight.current; await load(); }}
          onError=${setError} />
        <h2>Latest tasks</h2>
        ${fleet.tasks.length ? html`<ul class="tasks">
          ${fleet.tasks.map((t) => html`<${TaskRow} key=${t.id} task=${t} busy=${busy === t.id} act=${act}
            answer=${answer} />`)}
        </ul>` : html`<p class="meta">No tasks yet.</p>`}`
        : error ? null : html`<div class="empty"><${Spinner} /></div>`}
    </div>
  </section>`;
}

/** A new task: data only (prompt, repository and ref, mode, model, labels); the workers decide the rest. */
function NewTask({ onQueued }) {
  const [open, setOpen] = useState(false);
  const [form, setForm] = useState({ prompt: "", repo: "", ref: "HEAD", mode: "", model: "", labels: "", wait: "" });
  const [error, setError] = useState("");
  const [sending, setSending] = useState(false);
  const id = useRef(submissionId());
  if (!open) {
    return html`<div class="row"><button data-role="new-task" onClick=${() => setOpen(true)}>New task</button></div>`;
  }
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  const send = async (e) => {
    e.preventDefault();
    setError("");
    setSending(true);
    const body = { prompt: form.prompt, repo: form.repo.trim(), ref: form.ref.trim() || "HEAD",
      labels: form.labels.split(/[\s,]+/).filter(Boolean), submission_id: id.current };
    if (form.mode) body.mode = form.mode;
    if (form.model.trim()) body.model = form.model.trim();
    if (form.wait.trim()) body.approval_timeout_s = Number(form.wait.trim());
    try {
      await api("/api/fleet/tasks", { method: "POST", body });
      id.current = submissionId();
      setForm({ ...form, prompt: "" });
      setOpen(false);
      await onQueued();
    } catch (err) {
      setError(err.message);
    } finally {
      setSending(false);
    }
  };
  return html`<form class="card stack new-task" data-role="task-form" onSubmit=${send}>
    <label>What should the task do?
      <textarea data-field="prompt" required value=${form.prompt} onInput=${set("prompt")} rows="3"></textarea>
    </label>
    <label>Repository (a git URL, or a path on the workers' machines)
      <input data-field="repo" type="text" required value=${form.repo} onInput=${set("repo")} />
    </label>
    <div class="row wrap">
      <label>Base (branch, tag or commit)
        <input data-field="ref" type="text" value=${form.ref} onInput=${set("ref")} />
      </label>
      <${WorkerModeAndModel} form=${form} set=${set} />
      <label>Labels (optional)
        <input data-field="labels" type="text" value=${form.labels} onInput=${set("labels")} placeholder="ci, nightly" />
      </label>
      <label>Park after (seconds an approval may hold a worker)
        <input data-field="approval_timeout" type="number" min="1" value=${form.wait} onInput=${set("wait")}
          placeholder="600" />
      </label>
    </div>
    ${error ? html`<div class="error" role="alert">${error}</div>` : null}
    <div class="row">
      <button type="submit" data-role="submit-task" disabled=${sending}>${sending ? "Queueing…" : "Queue task"}</button>
      <button type="button" class="secondary" onClick=${() => setOpen(false)}>Cancel</button>
    </div>
  </form>`;
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
      ${tile("waiting", "waiting", stats.waiting ?? 0)}
      ${tile("done", "done", stats.done)}
      ${tile("failed", "failed", stats.failed)}
      ${tile("cancelled", "cancelled", stats.cancelled)}
      ${tile("retried", "retried", stats.retried)}
      ${tile("tokens", "tokens in / out", `${count(tokens.input)} / ${count(tokens.output)}`, true)}
      ${tile("cost", "cost", stats.cost == null ? "unknown" : money(stats.cost), true)}
    </div>
    ${times ? html`<p class="meta">Finished tasks ${times} on average.</p>` : null}`;
}

function TaskRow({ task: t, busy, act, answer }) {
  const { spec } = t;
  const stopping = t.state === "running" && t.cancel_requested;
  const member = may("member");
  return html`<li class="task" data-role="task" data-state=${t.state} data-task=${t.id}>
    <div class="task-head">
      <span class=${`pill ${t.state}`}>${stopping ? "cancelling" : t.state}</span>
      <span class="task-prompt" title=${spec.prompt}>${spec.prompt}</span>
    </div>
    <div class="task-meta meta">
      <span class="repo" title=${`${spec.repo} @ ${spec.ref}`}>${shortPath(spec.repo)} @ ${spec.ref}</span>
      <span>attempt ${t.attempts}/${t.max_attempts}</span>
      ${t.worker ? html`<span class="worker" title=${t.worker}>${t.worker}</span>` : null}
      ${t.submitted_by ? html`<span class="submitter" title="submitted by">by ${t.submitted_by}</span>` : null}
      <span title=${new Date(t.created * 1000).toLocaleString()}>${ago(t.created)}</span>
      ${typeof t.cost === "number" ? html`<span class="cost">${money(t.cost)}</span>` : null}
    </div>
    ${t.error ? html`<div class="task-error">${t.error}</div>` : null}
    ${t.state === "waiting" && t.waiting_for ? html`<${Waiting} request=${t.waiting_for} busy=${busy}
      onAnswer=${(decision, feedback) => answer(t, decision, feedback)} />` : null}
    <div class="row wrap">
      ${t.session_id ? html`<a class="button small" href=${`#/s/${encodeURIComponent(t.session_id)}`}>Session</a>` : null}
      ${busy ? html`<${Spinner} />` : html`
        ${member && ["queued", "running", "waiting"].includes(t.state) && !stopping
          ? html`<button class="small danger" data-action="cancel" onClick=${() => act(t, "cancel")}>Cancel</button>` : null}
        ${member && ["failed", "cancelled"].includes(t.state)
          ? html`<button class="small" data-action="retry" onClick=${() => act(t, "retry")}>Retry</button>` : null}`}
    </div>
  </li>`;
}

/** The approval a parked task waits for: what it asks, and — for an approver — its answers. */
function Waiting({ request, busy, onAnswer }) {
  const [note, setNote] = useState("");
  const e = request.details;
  return html`<div class="card approval waiting" data-role="task-approval" data-request=${request.request_id}>
    <div class="approval-message">${request.message}</div>
    ${e?.diff ? html`<pre class="diff">${e.diff}</pre>` : null}
    ${may("approver") ? html`
      <input class="feedback" type="text" placeholder="A note to the agent (optional)" value=${note}
        onInput=${(ev) => setNote(ev.target.value)} />
      <div class="row wrap">${(request.options || []).map((option) => html`<button class="small" data-option=${option}
        disabled=${busy} onClick=${() => onAnswer(option, note.trim())}>${OPTION_LABELS[option] || option}</button>`)}
      </div>` : html`<div class="meta">Waiting for an approver.</div>`}
  </div>`;
}

function count(n) {
  return n >= 1e6 ? `${(n / 1e6).toFixed(1)}M` : n >= 1e3 ? `${(n / 1e3).toFixed(1)}k` : String(n);
}

function seconds(s) {
  return s < 90 ? `${s.toFixed(1)} s` : `${(s / 60).toFixed(1)} min`;
}
