// The web UI of `auger serve`: the session list beside the page the hash names — the home page (a
// prompt box: the first message starts a session in the first root, in the server's mode), a new
// session with options, a session, the settings, the fleet's tasks.

import { render } from "../vendor/preact.mjs";
import { useEffect, useState } from "../vendor/hooks.mjs";
import { api } from "./api.js";
import { ChatView } from "./chat.js";
import { handoff } from "./session.js";
import { SettingsView } from "./settings.js";
import { Sidebar } from "./sidebar.js";
import { TasksView } from "./tasks.js";
import { allowedModes, Bar, Composer, go, html, loadProviders, providers, route, serverInfo, shared, shortPath } from "./ui.js";

/** Create a session and hand it its first prompt (sent once its page has loaded). */
async function start(body, prompt) {
  const snap = await api("/api/sessions", { method: "POST", body });
  handoff.set(snap.id, { prompt });
  go(`/s/${encodeURIComponent(snap.id)}`);
}

function Home({ onMenu }) {
  const info = serverInfo.value;
  return html`<section class="page home">
    <${Bar} onMenu=${onMenu} title="auger" />
    <div class="home-body">
      <h1>What should we work on?</h1>
      ${info ? html`<p class="meta">A new session in <strong title=${info.roots[0]}>${shortPath(info.roots[0])}</strong>${
        `, ${info.mode} mode, ${info.model || "the default model"}. `}<a href="#/new">Other options</a></p>` : null}
      <${Composer} autofocus=${true} placeholder="Describe a task…" onSend=${(text) => start({ cwd: info.roots[0] }, text)} />
    </div>
  </section>`;
}

function NewSession({ onMenu }) {
  const info = serverInfo.value;
  const [root, setRoot] = useState(info?.roots[0] || "");
  const [sub, setSub] = useState("");
  const [mode, setMode] = useState(info?.mode || "safe");
  const [model, setModel] = useState("");
  const [error, setError] = useState("");
  useEffect(() => { if (!providers.value) loadProviders().catch(() => {}); }, []);
  if (!info) return null;
  const models = (providers.value || []).filter((p) => p.kind === "model" && p.status === "available");
  const create = async (text) => {
    setError("");
    const body = { cwd: sub.trim() ? `${root.replace(/\/$/, "")}/${sub.trim().replace(/^\/+/, "")}` : root, mode };
    if (model) { const [provider, ...name] = model.split(":"); body.provider = provider; body.model = name.join(":"); }
    try {
      await start(body, text);
    } catch (e) {
      setError(e.message);
      throw e;
    }
  };
  return html`<section class="page">
    <${Bar} onMenu=${onMenu} title="New session" />
    <div class="page-body stack">
      <label>Project
        <select value=${root} onChange=${(e) => setRoot(e.target.value)}>
          ${info.roots.map((r) => html`<option value=${r}>${r}</option>`)}
        </select>
      </label>
      <label>Folder inside it (optional)
        <input type="text" value=${sub} placeholder="e.g. services/api" onInput=${(e) => setSub(e.target.value)} />
      </label>
      <label>Mode
        <select value=${mode} onChange=${(e) => setMode(e.target.value)}>
          ${allowedModes(info.mode).map((m) => html`<option value=${m}>${m}</option>`)}
        </select>
      </label>
      <label>Model
        <select value=${model} onChange=${(e) => setModel(e.target.value)}>
          <option value="">${info.model || "default"} (the server's)</option>
          ${models.map((p) => html`<optgroup label=${p.label || p.name}>
            ${(p.models || []).map((m) => html`<option value=${`${p.name}:${m}`}>${m}</option>`)}
          </optgroup>`)}
        </select>
      </label>
      ${error ? html`<div class="error" role="alert">${error}</div>` : null}
      <${Composer} placeholder="First message…" onSend=${create} />
    </div>
  </section>`;
}

function App() {
  const [menu, setMenu] = useState(false);
  const [failure, setFailure] = useState("");
  useEffect(() => {
    api("/api/server").then((info) => { serverInfo.value = info; }).catch((e) => setFailure(e.status === 401
      ? "This browser is not paired with the server (or the share link it was opened with was revoked or has expired). Open the pairing link `auger serve` printed (or make one on a paired device, under Settings)."
      : e.message));
  }, []);
  const r = route.value;
  const toggle = () => setMenu(!menu);
  const close = () => setMenu(false);
  const share = shared();
  let view;
  if (failure) view = html`<section class="page"><${Bar} onMenu=${toggle} title="auger" /><div class="empty">${failure}</div></section>`;
  else if (!serverInfo.value) view = null; // who this is (their role) decides what each page offers
  else if (share) view = html`<${ChatView} key=${share.session} id=${share.session} onMenu=${null} />`; // the one it shows
  else if (r.view === "session") view = html`<${ChatView} key=${r.id} id=${r.id} onMenu=${toggle} />`;
  else if (r.view === "settings") view = html`<${SettingsView} onMenu=${toggle} />`;
  else if (r.view === "tasks") view = html`<${TasksView} onMenu=${toggle} />`;
  else if (r.view === "new") view = html`<${NewSession} onMenu=${toggle} />`;
  else view = html`<${Home} onMenu=${toggle} />`;
  return html`<div class=${share ? "app alone" : "app"}>
    ${failure || share ? null : html`<${Sidebar} open=${menu} onClose=${close} />`}
    ${menu ? html`<div class="scrim" onClick=${close}></div>` : null}
    <main>${view}</main>
  </div>`;
}

render(html`<${App} />`, document.getElementById("app"));
