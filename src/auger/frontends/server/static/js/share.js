// Share: a read-only link to this session, from this server (POST /api/sessions/{id}/shares). Whoever opens
// it sees the transcript, the diffs and the live events, and nothing else, until it expires or is revoked
// here — which ends its open views at once. Nothing is uploaded: the link is this server's own address.

import { useEffect, useState } from "../vendor/hooks.mjs";
import { api, sessionPath } from "./api.js";
import { html } from "./ui.js";

const DURATIONS = [["1 hour", 3600], ["1 day", 86400], ["7 days", 7 * 86400], ["30 days", 30 * 86400]];

export function ShareDialog({ sessionId }) {
  const [expires, setExpires] = useState(86400);
  const [made, setMade] = useState(null);
  const [shares, setShares] = useState([]);
  const [error, setError] = useState("");
  const load = () => api(`/api/shares?session=${encodeURIComponent(sessionId)}`)
    .then((answer) => setShares(answer.shares.filter((s) => s.live))).catch((e) => setError(e.message));
  useEffect(() => { load(); }, [sessionId]);
  const create = async () => {
    setError("");
    try {
      setMade(await api(sessionPath(sessionId, "/shares"), { method: "POST", body: { expires_in: expires } }));
      load();
    } catch (e) {
      setError(e.message);
    }
  };
  const revoke = async (id) => {
    setError("");
    try {
      await api(`/api/shares/${encodeURIComponent(id)}/revoke`, { method: "POST", body: {} });
      if (made?.id === id) setMade(null);
      load();
    } catch (e) {
      setError(e.message);
    }
  };
  return html`<div class="popover share" data-role="share-dialog">
    <div class="meta">A read-only link: the transcript, diffs and live events of this session — no answers, no
      prompts, no files. It points at this server; revoke it to end every open view at once.</div>
    <div class="row">
      <select value=${expires} onChange=${(e) => setExpires(Number(e.target.value))} aria-label="Works for">
        ${DURATIONS.map(([label, seconds]) => html`<option value=${seconds}>for ${label}</option>`)}
      </select>
      <button class="primary" data-role="share-create" onClick=${create}>Create link</button>
    </div>
    ${made ? html`<div class="stack">
      <input type="text" readonly data-role="share-link" value=${made.url} onFocus=${(e) => e.target.select()} />
      <div class="row end">
        <button class="small" onClick=${() => navigator.clipboard?.writeText(made.url)}>Copy</button>
      </div>
    </div>` : null}
    ${shares.length ? html`<ul class="shares">${shares.map((s) => html`<li key=${s.id} data-share=${s.id}>
      <span>until ${new Date(s.expires * 1000).toLocaleString()}${s.created_by ? ` · by ${s.created_by}` : ""}</span>
      <button class="small danger" data-role="share-revoke" onClick=${() => revoke(s.id)}>Revoke</button>
    </li>`)}</ul>` : null}
    ${error ? html`<div class="error" role="alert">${error}</div>` : null}
  </div>`;
}
