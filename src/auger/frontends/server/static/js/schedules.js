// The schedules, on the Tasks page: each with its cadence, next and last run, how many runs it fired and
// skipped, and what it runs; a member pauses, resumes or removes one, or adds one — a cadence (cron, or an
// interval), what a missed run becomes, and the task each run is (data only: the workers decide the rest).
// Read with the tasks, every few seconds; a prompt is drawn as text, like any other.

import { useRef, useState } from "../vendor/hooks.mjs";
import { api } from "./api.js";
import { ago, html, may, shortPath, Spinner, WorkerModeAndModel } from "./ui.js";

export function Schedules({ data, reload, onError }) {
  const [busy, setBusy] = useState(null);
  const act = async (schedule, action) => {
    setBusy(schedule.id);
    onError("");
    try {
      const path = `/api/fleet/schedules/${encodeURIComponent(schedule.id)}`;
      await api(action === "remove" ? path : `${path}/${action}`, { method: action === "remove" ? "DELETE" : "POST" });
      await reload();
    } catch (e) {
      onError(e.message);
    } finally {
      setBusy(null);
    }
  };
  const schedules = data?.schedules || [];
  return html`<section class="schedules" data-role="schedules">
    <h2>Schedules</h2>
    ${may("member") ? html`<${NewSchedule} onAdded=${reload} />` : null}
    ${schedules.length ? html`<ul class="tasks">
      ${schedules.map((s) => html`<${ScheduleRow} key=${s.id} schedule=${s} busy=${busy === s.id} act=${act} />`)}
    </ul>` : html`<p class="meta">No schedules yet.</p>`}
  </section>`;
}

function ScheduleRow({ schedule: s, busy, act }) {
  const spec = s.spec || {};
  const last = (s.recent_runs || [])[0];
  return html`<li class="task" data-role="schedule" data-schedule=${s.id} data-paused=${String(s.paused)}>
    <div class="task-head">
      <span class=${`pill ${s.paused ? "cancelled" : "running"}`}>${s.paused ? "paused" : "active"}</span>
      <span class="task-prompt" title=${spec.prompt || ""}>${spec.prompt || ""}</span>
    </div>
    <div class="task-meta meta">
      <span class="cadence" title=${`${s.cadence} (${s.tz}); missed runs: ${s.missed}`}>${s.cadence}</span>
      <span class="repo" title=${`${spec.repo} @ ${spec.ref}`}>${shortPath(spec.repo || "")} @ ${spec.ref}</span>
      ${s.next_run ? html`<span class="next" title=${new Date(s.next_run * 1000).toLocaleString()}>next
        ${new Date(s.next_run * 1000).toLocaleString()}</span>` : null}
      ${last ? html`<span class="last" title=${last.error || ""}>last ${ago(last.fired)}: ${last.state}${last.late
        ? " (late)" : ""}</span>` : null}
      <span>${s.runs} runs${s.skipped ? `, ${s.skipped} skipped` : ""}</span>
    </div>
    ${s.refusal ? html`<div class="task-error">${s.refusal}</div>` : null}
    ${last?.session_id ? html`<div class="row wrap"><a class="button small"
      href=${`#/s/${encodeURIComponent(last.session_id)}`}>Last run's session</a></div>` : null}
    ${may("member") ? html`<div class="row wrap">${busy ? html`<${Spinner} />` : html`
      ${s.paused
        ? html`<button class="small" data-action="resume" onClick=${() => act(s, "resume")}>Resume</button>`
        : html`<button class="small" data-action="pause" onClick=${() => act(s, "pause")}>Pause</button>`}
      <button class="small danger" data-action="remove" onClick=${() => act(s, "remove")}>Remove</button>`}
    </div>` : null}
  </li>`;
}

/** A new schedule: when (cron or an interval), what a missed run becomes, and the task each run is. */
function NewSchedule({ onAdded }) {
  const blank = { when: "cron", cadence: "", tz: "UTC", missed: "once", prompt: "", repo: "", ref: "HEAD", mode: "",
    model: "" };
  const [open, setOpen] = useState(false);
  const [form, setForm] = useState(blank);
  const [error, setError] = useState("");
  const [sending, setSending] = useState(false);
  const sent = useRef(false);
  if (!open) {
    return html`<div class="row"><button data-role="new-schedule" onClick=${() => setOpen(true)}>New schedule</button></div>`;
  }
  const set = (key) => (e) => setForm({ ...form, [key]: e.target.value });
  const send = async (e) => {
    e.preventDefault();
    if (sent.current) return;
    sent.current = true;
    setError("");
    setSending(true);
    const body = { [form.when]: form.cadence.trim(), missed: form.missed, prompt: form.prompt, repo: form.repo.trim(),
      ref: form.ref.trim() || "HEAD" };
    if (form.when === "cron" && form.tz.trim()) body.tz = form.tz.trim();
    if (form.mode) body.mode = form.mode;
    if (form.model.trim()) body.model = form.model.trim();
    try {
      await api("/api/fleet/schedules", { method: "POST", body });
      setForm(blank);
      setOpen(false);
      await onAdded();
    } catch (err) {
      setError(err.message);
    } finally {
      sent.current = false;
      setSending(false);
    }
  };
  return html`<form class="card stack new-task" data-role="schedule-form" onSubmit=${send}>
    <div class="row wrap">
      <label>Runs
        <select data-field="when" value=${form.when} onChange=${set("when")}>
          <option value="cron">on a cron schedule</option>
          <option value="every">every…</option>
        </select>
      </label>
      <label>${form.when === "cron" ? "Cron (minute hour day month weekday)" : "Interval (30s, 10m, 2h, 1d)"}
        <input data-field="cadence" type="text" required value=${form.cadence} onInput=${set("cadence")}
          placeholder=${form.when === "cron" ? "0 3 * * 1-5" : "1h"} />
      </label>
      ${form.when === "cron" ? html`<label>Time zone
        <input data-field="tz" type="text" value=${form.tz} onInput=${set("tz")} />
      </label>` : null}
      <label>A run missed while nothing ran
        <select data-field="missed" value=${form.missed} onChange=${set("missed")}>
          <option value="once">runs once, late</option>
          <option value="skip">is skipped</option>
        </select>
      </label>
    </div>
    <label>What should each run do?
      <textarea data-field="prompt" required value=${form.prompt} onInput=${set("prompt")} rows="3"></textarea>
    </label>
    <div class="row wrap">
      <label>Repository
        <input data-field="repo" type="text" required value=${form.repo} onInput=${set("repo")} />
      </label>
      <label>Base
        <input data-field="ref" type="text" value=${form.ref} onInput=${set("ref")} />
      </label>
      <${WorkerModeAndModel} form=${form} set=${set} />
    </div>
    ${error ? html`<div class="error" role="alert">${error}</div>` : null}
    <div class="row">
      <button type="submit" data-role="add-schedule" disabled=${sending}>${sending ? "Adding…" : "Add schedule"}</button>
      <button type="button" class="secondary" onClick=${() => setOpen(false)}>Cancel</button>
    </div>
  </form>`;
}
