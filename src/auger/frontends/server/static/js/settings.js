// Settings: the model providers and backend agents with their status (checked for real on request),
// enabling and disabling them, adding a custom ACP agent — all in the user's config.toml, through
// /api/providers — and pairing another device.

import { useEffect, useState } from "../vendor/hooks.mjs";
import { api } from "./api.js";
import { Bar, html, loadProviders, providers, Spinner } from "./ui.js";

export function SettingsView({ onMenu }) {
  const [error, setError] = useState("");
  const [busy, setBusy] = useState(null);
  useEffect(() => { loadProviders().catch((e) => setError(e.message)); }, []);
  const act = async (name, what) => {
    setBusy(name);
    setError("");
    try {
      await what();
      await loadProviders();
    } catch (e) {
      setError(e.message);
    } finally {
      setBusy(null);
    }
  };
  const rows = providers.value;
  const group = (kind) => (rows || []).filter((p) => p.kind === kind);
  return html`<section class="page">
    <${Bar} onMenu=${onMenu} title="Settings" />
    <div class="page-body">
      ${error ? html`<div class="error" role="alert">${error}</div>` : null}
      <h2>Model providers</h2>
      <p class="meta">Only available ones are offered when you pick a model. Changes go to your own config.toml.</p>
      ${rows ? html`<ul class="providers">${group("model").map((p) => html`<${ProviderRow} key=${p.name} p=${p} busy=${busy} act=${act} />`)}</ul>` : html`<${Spinner} />`}
      <h2>Agents</h2>
      <p class="meta">Other coding agents that can run a session's turns over ACP.</p>
      ${rows ? html`<ul class="providers">${group("agent").map((p) => html`<${ProviderRow} key=${p.name} p=${p} busy=${busy} act=${act} />`)}</ul>` : null}
      <${AddAgent} act=${act} />
      <h2>Another device</h2>
      <${Pair} />
    </div>
  </section>`;
}

function ProviderRow({ p, busy, act }) {
  return html`<li class="provider">
    <div class="provider-head">
      <span class="name">${p.label || p.name}</span>
      <span class=${`pill ${p.status.replace(/\s+/g, "-")}`}>${p.status}</span>
    </div>
    <div class="meta">${p.name}${p.detail ? ` — ${p.detail}` : ""}${p.checked != null ? ` · checked ${Math.round(p.checked)} s ago` : ""}</div>
    <div class="row">
      ${busy === p.name ? html`<${Spinner} />` : html`
        <button class="small" disabled=${p.status === "disabled"}
          onClick=${() => act(p.name, () => api(`/api/providers/${encodeURIComponent(p.name)}/probe`, { method: "POST", body: {} }))}>Check now</button>
        <button class="small ghost"
          onClick=${() => act(p.name, () => api(`/api/providers/${encodeURIComponent(p.name)}`, { method: "PATCH", body: { enabled: p.status === "disabled" } }))}>
          ${p.status === "disabled" ? "Enable" : "Disable"}</button>`}
    </div>
  </li>`;
}

function AddAgent({ act }) {
  const [form, setForm] = useState({ name: "", command: "", args: "", label: "" });
  const field = (key, label, placeholder) => html`<label>${label}
    <input type="text" value=${form[key]} placeholder=${placeholder} onInput=${(e) => setForm({ ...form, [key]: e.target.value })} /></label>`;
  const add = (e) => {
    e.preventDefault();
    const body = { command: form.command.trim(), args: form.args.trim() ? form.args.trim().split(/\s+/) : [] };
    if (form.label.trim()) body.label = form.label.trim();
    act(form.name, () => api(`/api/providers/${encodeURIComponent(form.name.trim())}`, { method: "PATCH", body }))
      .then(() => setForm({ name: "", command: "", args: "", label: "" }));
  };
  return html`<details class="card">
    <summary>Add a custom ACP agent</summary>
    <form class="stack" onSubmit=${add}>
      ${field("name", "Name", "my-agent")}
      ${field("command", "Command", "/usr/local/bin/my-agent")}
      ${field("args", "Arguments", "--acp")}
      ${field("label", "Label", "My agent")}
      <div class="row end"><button class="primary" disabled=${!form.name.trim() || !form.command.trim()}>Add</button></div>
    </form>
  </details>`;
}

function Pair() {
  const [link, setLink] = useState(null);
  const [error, setError] = useState("");
  const make = async () => {
    try {
      setLink(await api("/api/pair", { method: "POST", body: {} }));
    } catch (e) {
      setError(e.message);
    }
  };
  return html`<div class="card">
    <p class="meta">A one-use link that signs another browser in (a phone on the same network, when the server listens there).</p>
    ${link ? html`<div class="stack"><input type="text" readonly value=${link.url} onFocus=${(e) => e.target.select()} />
      <div class="meta">Works once, for ${Math.round(link.expires_in / 60)} minutes.</div></div>`
      : html`<button class="small" onClick=${make}>Make a pairing link</button>`}
    ${error ? html`<div class="error">${error}</div>` : null}
  </div>`;
}
