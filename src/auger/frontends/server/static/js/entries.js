// How each kind of transcript entry looks: messages, reasoning, tool calls (folded, with their live
// output and the sub-agents they started), approval cards, a turn's diff, the plan, notices.
// Everything from the model or a tool is drawn as text (markdown.js builds vnodes, never HTML).

import { Component } from "../vendor/preact.mjs";
import { useState } from "../vendor/hooks.mjs";
import { markdown } from "./markdown.js";
import { html, may, Spinner } from "./ui.js";

/** One entry; redrawn only when its `v` (or what the session can do with it) changed. */
export class Entry extends Component {
  shouldComponentUpdate(next) {
    return next.v !== this.props.v || next.entry !== this.props.entry || next.flags !== this.props.flags;
  }

  render({ entry, actions, flags }) {
    const View = VIEWS[entry.kind];
    // The role is read here, not in the views: a view that reads a signal is redrawn only when its props
    // change, and an entry changes in place.
    return View ? html`<${View} entry=${entry} actions=${actions} flags=${flags} answers=${may("approver")} />` : null;
  }
}

const VIEWS = {
  user: UserMessage,
  agent: AgentMessage,
  reasoning: Reasoning,
  tool: ToolCall,
  approval: Approval,
  diff: TurnDiff,
  plan: Plan,
  notice: ({ entry }) => html`<div class="notice ${entry.level}">${entry.text}</div>`,
  rollback: () => html`<div class="notice info">The answer above was taken back and asked again.</div>`,
};

function UserMessage({ entry, actions, flags }) {
  const [editing, setEditing] = useState(null);
  if (editing !== null) {
    return html`<div class="msg user editing">
      <textarea class="edit" rows="3" value=${editing} onInput=${(e) => setEditing(e.target.value)}
        aria-label="Edited message"></textarea>
      <div class="row end">
        <button class="ghost" onClick=${() => setEditing(null)}>Cancel</button>
        <button class="primary" disabled=${!editing.trim()} onClick=${() => actions.editAndResend(entry, editing)}
          title="A new session with the conversation before this message, then this text">Send in a fork</button>
      </div>
    </div>`;
  }
  return html`<div class="msg user ${entry.rolledBack ? "rolled" : ""} ${entry.pending ? "pending" : ""}">
    <div class="text">${entry.text}</div>
    ${entry.images?.length ? html`<div class="meta">${entry.images.length} image(s)</div>` : null}
    ${flags.canEdit && !entry.injected ? html`<div class="actions">
      <button class="link" onClick=${() => setEditing(entry.text)} title="Edit and send again, as a fork">Edit</button>
    </div>` : null}
  </div>`;
}

function AgentMessage({ entry, actions, flags }) {
  return html`<div class="msg agent ${entry.rolledBack ? "rolled" : ""}" data-role="agent-message"
      data-streaming=${entry.streaming ? "true" : "false"}>
    <div class="md">${markdown(entry.text)}${entry.streaming ? html`<span class="caret"></span>` : null}</div>
    ${!entry.streaming && flags.closing ? html`<div class="actions">
      <button class="link" onClick=${() => navigator.clipboard?.writeText(entry.text)}>Copy</button>
      ${flags.last && flags.idle ? html`<button class="link" onClick=${() => actions.regenerate()}
        title="Take this answer back and ask again">Regenerate</button>` : null}
    </div>` : null}
  </div>`;
}

function Reasoning({ entry }) {
  return html`<details class="reasoning">
    <summary>${entry.streaming ? html`<${Spinner} /> Thinking…` : "Thought"}</summary>
    <div class="md">${markdown(entry.text)}</div>
  </details>`;
}

/** What a tool call is about, in one line: the command, the path, the pattern, the task. */
function subject(name, args) {
  if (typeof args === "string") return args.slice(0, 200);
  if (!args || typeof args !== "object") return "";
  const first = (...keys) => keys.map((k) => args[k]).find((v) => typeof v === "string" && v);
  if (name === "apply_patch") {
    const m = /\*\*\* (?:Add|Update|Delete) File: (.+)/.exec(first("input", "patch") || "");
    return m ? m[1] : "patch";
  }
  return first("command", "path", "pattern", "prompt", "query", "name", "id", "text") || "";
}

function ToolCall({ entry, actions, flags }) {
  const status = !entry.done ? "running" : entry.denied ? "denied" : entry.ok ? "ok" : "failed";
  const tail = entry.live ? entry.live.split("\n").slice(-8).join("\n") : "";
  const agent = entry.name === "spawn_agent";
  const problems = entry.diagnostics?.length ? html`<${Diagnostics} list=${entry.diagnostics} />` : null;
  return html`<div class="tool-call">${ToolDetails({ entry, status, tail, agent, actions })}${problems}</div>`;
}

/** What the language servers found that a call's change broke, under the call, visible while it is folded. */
function Diagnostics({ list }) {
  return html`<ul class="diagnostics" aria-label="Problems this change introduced">
    ${list.map((d) => html`<li class=${d.severity}>
      <span class="where">${d.path}:${d.line}:${d.column}</span>
      <span class="message">${d.message}</span>
      ${d.source ? html`<span class="source">${d.source}${d.code ? ` ${d.code}` : ""}</span>` : null}
    </li>`)}
  </ul>`;
}

function ToolDetails({ entry, status, tail, agent, actions }) {
  return html`<details class="tool ${status}" open=${entry.children.length && !entry.done ? true : undefined}>
    <summary>
      <span class="tool-icon" aria-hidden="true">${agent ? "◆" : "›"}</span>
      <span class="tool-name">${agent ? (entry.args?.agent || "agent") : entry.name}</span>
      <span class="tool-subject">${subject(entry.name, entry.args)}</span>
      <span class="tool-status">${status === "running" ? html`<${Spinner} />` : statusLabel(entry)}</span>
    </summary>
    <div class="tool-body">
      ${typeof entry.args === "object" && Object.keys(entry.args || {}).length ? html`<pre class="args">${JSON.stringify(entry.args, null, 2)}</pre>`
        : typeof entry.args === "string" ? html`<pre class="args">${entry.args}</pre>` : null}
      ${entry.children.length ? html`<div class="children">
        ${entry.children.map((child) => html`<${Entry} key=${child.key} entry=${child} v=${child.v} actions=${actions} flags=${NO_FLAGS} />`)}
      </div>` : null}
      ${entry.done ? html`<pre class="output">${entry.output || "(no output)"}</pre>`
        : entry.live ? html`<pre class="output live">${entry.live}</pre>` : null}
    </div>
    ${!entry.done && tail && !entry.children.length ? html`<pre class="output tail">${tail}</pre>` : null}
  </details>`;
}

const NO_FLAGS = {};

function statusLabel(entry) {
  if (entry.denied) return `not run (${entry.denied})`;
  const time = entry.ms ? ` ${entry.ms < 1000 ? `${entry.ms} ms` : `${(entry.ms / 1000).toFixed(1)} s`}` : "";
  return entry.ok ? `done${time}` : `failed${time}`;
}

const OPTION_LABELS = {
  approve: "Approve", approve_session: "Approve for this session", approve_always: "Always approve",
  approve_writable_root: "Approve, and allow writes beneath the directory for this session",
  deny: "Deny", abort: "Deny and stop", continue: "Continue", stop: "Stop", accept: "Accept",
  decline: "Decline", cancel: "Cancel",
};
const PRIMARY = new Set(["approve", "continue", "accept"]);
const ANSWERED = {
  approve: "Approved", approve_session: "Approved for the session", approve_always: "Always approved",
  approve_writable_root: "Approved, with writes beneath the directory for the session",
  deny: "Denied", abort: "Denied and stopped", continue: "Continued", stop: "Stopped", accept: "Accepted",
  decline: "Declined", cancel: "Cancelled",
};

// No local state here: an answer racing the session's own word on it (another client answered, the turn
// ended) would leave a component with a pending state update drawing the card as it was. What is being sent
// and what failed live on the entry, like everything else the card shows.
function Approval({ entry, actions, answers }) {
  const d = entry.details;
  const answer = (option, button) => {
    const note = button.closest(".approval").querySelector("input.feedback").value.trim();
    actions.decide(entry, option, note || null);
  };
  if (entry.resolved) {
    const said = entry.decision ? ANSWERED[entry.decision] || entry.decision : "Withdrawn: the turn ended unanswered";
    return html`<details class="approval resolved" data-request=${entry.requestId}>
      <summary><span class=${`verdict ${entry.decision || "none"}`}>${said}</span>
        <span class="who">${entry.by ? shortClient(entry.by) : ""}</span>
        <span class="what">${d?.subject || entry.message}</span></summary>
      <div class="approval-message">${entry.message}</div>
    </details>`;
  }
  return html`<div class="card approval waiting" data-request=${entry.requestId}>
    <div class="card-title">Approval needed${entry.fromAgent ? " (a sub-agent asks)" : ""}</div>
    ${entry.approvalKind !== "tool" || !d ? html`<div class="approval-message">${entry.message}</div>` : null}
    ${d ? html`<div class="approval-details">
      <div class="meta"><span class="tool-name">${d.tool}</span> · ${String(d.effect).replace(/_/g, " ")}</div>
      ${d.subject ? html`<pre class="subject">${d.subject}</pre>` : null}
      ${d.reason ? html`<div class="reason">${d.reason}</div>` : null}
      ${d.findings?.length ? html`<ul class="findings">${d.findings.map((f) => html`<li>${f}</li>`)}</ul>` : null}
      ${d.outside_paths?.length ? html`<div class="outside">Outside the project: ${d.outside_paths.join(", ")}</div>` : null}
      ${d.writable_root ? html`<div class="outside">Can be made writable for this session: ${d.writable_root}</div>` : null}
      ${d.diff ? html`<${DiffText} text=${d.diff} />` : null}
    </div>` : null}
    ${entry.form ? html`<pre class="args">${JSON.stringify(entry.form.schema, null, 2)}</pre>` : null}
    ${answers ? html`
    <input class="feedback" type="text" placeholder=${entry.form ? "Your answer (JSON)" : "Note to the agent (optional)"} />
    <div class="row wrap">
      ${entry.options.map((option) => html`<button class=${PRIMARY.has(option) ? "primary" : option === "abort" || option === "deny" ? "danger" : ""}
        data-option=${option} disabled=${entry.sending} onClick=${(e) => answer(option, e.currentTarget)}>${optionLabel(option, d)}</button>`)}
    </div>` : html`<div class="meta">Waiting for someone who may answer approvals.</div>`}
    ${entry.failure ? html`<div class="error">${entry.failure}</div>` : null}
  </div>`;
}

/** An answer's button label; the writable root one names its directory. */
function optionLabel(option, details) {
  if (option === "approve_writable_root" && details?.writable_root) {
    return `Approve, and allow writes beneath ${details.writable_root} for this session`;
  }
  return OPTION_LABELS[option] || option;
}

/** Who answered, shortly: "browser-1f2e3d… (web)" for a paired browser's long id. */
function shortClient(by) {
  return by.replace(/^browser-([0-9a-f]{6})[0-9a-f]+/, "browser $1…");
}

/** A unified diff, its lines coloured by what they do. */
function DiffText({ text }) {
  const lines = String(text).split("\n");
  return html`<pre class="diff">${lines.map((line) => {
    const cls = line.startsWith("+++") || line.startsWith("---") ? "file" : line[0] === "+" ? "add" : line[0] === "-" ? "del" : line.startsWith("@@") ? "hunk" : "";
    return html`<span class=${cls}>${line}\n</span>`;
  })}</pre>`;
}

/** The unified diff split per file ("diff --git a/x b/x" headers). */
function perFile(diff) {
  const out = new Map();
  let current = null;
  for (const line of String(diff || "").split("\n")) {
    const m = /^diff --git a\/(.*) b\/(.*)$/.exec(line);
    if (m) { current = m[2]; out.set(current, []); continue; }
    if (current && !/^(index |new file mode|deleted file mode|old mode|new mode|similarity)/.test(line)) out.get(current).push(line);
  }
  return out;
}

function TurnDiff({ entry, actions, flags }) {
  const parts = perFile(entry.diff);
  const added = entry.files.reduce((n, f) => n + (f.added_lines || 0), 0);
  const removed = entry.files.reduce((n, f) => n + (f.deleted_lines || 0), 0);
  return html`<div class="card diff-card ${entry.undone ? "undone" : ""}">
    <div class="card-title row">
      <span>${entry.files.length} file${entry.files.length === 1 ? "" : "s"} changed <span class="add">+${added}</span> <span class="del">−${removed}</span>${entry.undone ? " — undone" : ""}</span>
      ${flags.idle && flags.member && entry.turn ? html`<button class="small" onClick=${() => actions.undo(entry, entry.undone)}>${entry.undone ? "Redo" : "Undo"}</button>` : null}
    </div>
    ${entry.files.map((f) => html`<details class="file">
      <summary><span class="kind">${f.kind}</span> <span class="path">${f.path}</span>
        ${f.binary ? " (binary)" : html` <span class="add">+${f.added_lines ?? 0}</span> <span class="del">−${f.deleted_lines ?? 0}</span>`}</summary>
      ${parts.get(f.path) ? html`<${DiffText} text=${parts.get(f.path).join("\n")} />` : null}
    </details>`)}
  </div>`;
}

function Plan({ entry }) {
  const mark = { completed: "✓", in_progress: "▸", pending: "○" };
  return html`<div class="card plan">
    <div class="card-title">Plan</div>
    ${entry.explanation ? html`<div class="meta">${entry.explanation}</div>` : null}
    <ul>${entry.plan.map((s) => html`<li class=${s.status}><span class="mark">${mark[s.status] || "○"}</span> ${s.step}</li>`)}</ul>
  </div>`;
}
