// What a session's chat shows, built from two sources: pages of stored items (the history, older pages
// put in front as the user scrolls up) and the live envelopes after a cursor (put at the end).
//
// The model is plain data, no DOM: `entries` in display order, each `{key, kind, turn, v, …}` where `v`
// grows on every change (the view redraws an entry only when its `v` moved). Envelopes are applied once
// each, by seq. Items and envelopes can describe the same thing when a turn runs while the page loads;
// they are matched by what identifies it — a tool call by its call id, a reply or an injected message by
// its turn and text — so it is shown once. A sub-agent's envelopes (`parent_call_id`) go into the entry
// of the spawn call that started it, at any depth; a change to an entry there moves its own `v` too, as its
// view is memoized like any other (a sub-agent's reply drawn mid-stream is redrawn as it grows).

export class Transcript {
  constructor() {
    this.entries = [];
    this.calls = new Map(); // call id -> tool entry, at any depth
    this.streams = new Map(); // item id -> the message or reasoning entry it streams into
    this.approvals = new Map(); // request id -> approval entry
    this.orphans = new Map(); // call id -> tool_output item whose call is on an older page
    this.lastSeq = 0;
    this.nextBefore = undefined; // the older page's cursor; null when the first item is shown
    this.missingUser = new Set(); // turns another client started: their message comes from the items
    this.changed = () => {};
    this.counter = 0;
  }

  // -- items ---------------------------------------------------------------------------------------
  /** A page of stored items, older than what is shown: put in front. */
  prepend(page, { liveTurn = null } = {}) {
    const made = [];
    for (const { seq, turn_id: turn, item } of page.items) {
      if (liveTurn && turn === liveTurn && item.type !== "user_message") continue; // its envelopes tell it
      const entry = this.fromItem(seq, turn, item, made);
      if (entry) made.push(entry);
    }
    this.nextBefore = page.next_before;
    this.entries = [...made, ...this.entries];
    this.relayout();
  }

  fromItem(seq, turn, item, made) {
    const base = { key: `i${seq}`, turn, seq, v: 0 };
    switch (item.type) {
      case "user_message":
        if (this.entries.some((e) => e.kind === "user" && e.turn === turn && e.text === item.text)) return null;
        return { ...base, kind: "user", text: item.text, images: item.images || [] };
      case "assistant_message":
        return { ...base, kind: "agent", text: item.text };
      case "reasoning":
        return item.text ? { ...base, kind: "reasoning", text: item.text } : null;
      case "tool_call": {
        if (this.calls.has(item.call_id)) return null;
        const entry = { ...base, kind: "tool", callId: item.call_id, name: item.name, args: parseArgs(item.arguments),
          output: "", live: "", ok: null, done: false, children: [] };
        this.calls.set(item.call_id, entry);
        const output = this.orphans.get(item.call_id);
        if (output) { this.orphans.delete(item.call_id); Object.assign(entry, { output: output.output, ok: output.ok, done: true }); }
        return entry;
      }
      case "tool_output": {
        const call = this.calls.get(item.call_id) || made.find((e) => e.callId === item.call_id);
        if (call) Object.assign(call, { output: item.output, ok: item.ok, done: true, v: call.v + 1 });
        else this.orphans.set(item.call_id, item);
        return null;
      }
      case "turn_changes":
        return item.files.length ? { ...base, kind: "diff", files: item.files, diff: item.diff, undone: false } : null;
      case "compaction":
        return { ...base, kind: "notice", level: "info", text: `Earlier conversation summarised (${item.archived_items} items archived).` };
      case "rollback":
        return { ...base, kind: "rollback", turns: item.turns };
      case "turn_aborted":
        return { ...base, kind: "notice", level: "warn", text: `Turn stopped: ${item.reason}` };
      default: // context, snapshots, settings: the model's records, not the conversation
        return null;
    }
  }

  // -- envelopes -----------------------------------------------------------------------------------
  /** One envelope; false when it was already applied (its seq is not new). */
  apply(e) {
    if (!e || typeof e.seq !== "number" || e.seq <= this.lastSeq) return false;
    this.lastSeq = e.seq;
    if (e.parent_call_id && e.type !== "approval_request" && e.type !== "approval_resolved") {
      this.applyChild(e);
    } else {
      this.applyTop(e);
    }
    this.changed(e);
    return true;
  }

  applyTop(e) {
    const turn = e.turn_id ?? null;
    switch (e.type) {
      case "turn_started": {
        const mine = this.entries.find((x) => x.kind === "user" && x.submission === e.submission_id && !x.turn);
        if (mine) this.touch(mine, { turn: e.turn_id, pending: false });
        else if (!this.entries.some((x) => x.kind === "user" && x.turn === e.turn_id)) this.missingUser.add(e.turn_id);
        break;
      }
      case "user_input_injected": {
        const mine = this.entries.find((x) => x.kind === "user" && x.submission === e.submission_id && !x.turn);
        const same = this.entries.find((x) => x.kind === "user" && x.turn === turn && x.text === e.text && !x.injected);
        if (mine) this.touch(mine, { turn, pending: false, injected: true });
        else if (same) this.touch(same, { injected: true });
        else this.push({ kind: "user", turn, text: e.text, images: [], injected: true });
        break;
      }
      case "item_started":
        this.streams.set(e.item_id, this.push({ kind: e.kind === "reasoning" ? "reasoning" : "agent", turn, text: "", streaming: true, itemId: e.item_id }));
        break;
      case "message_delta":
      case "reasoning_delta": {
        const entry = this.streams.get(e.item_id) || this.startStream(e, turn);
        this.touch(entry, { text: entry.text + e.delta });
        break;
      }
      case "item_ended": {
        const entry = this.streams.get(e.item_id);
        if (entry && e.discarded) this.remove(entry);
        else if (entry) this.touch(entry, { streaming: false });
        break;
      }
      case "agent_message": {
        const entry = (e.item_id && this.streams.get(e.item_id)) || this.push({ kind: "agent", turn, text: "" });
        this.touch(entry, { text: e.text, streaming: false });
        const stored = this.entries.find((x) => x !== entry && x.kind === "agent" && x.seq && x.turn === turn && x.text === e.text && !x.claimed);
        if (stored) { stored.claimed = true; this.remove(entry); } // the items told it already
        break;
      }
      case "tool_call_started":
        this.startCall(e, this.entries);
        break;
      case "tool_output_delta":
      case "tool_call_ended":
        this.callEvent(e);
        break;
      case "approval_request":
        this.approval(e);
        break;
      case "approval_resolved": {
        const entry = this.approvals.get(e.request_id);
        if (entry) this.touch(entry, { resolved: true, decision: e.decision, by: e.by });
        break;
      }
      case "turn_diff":
        if (e.files.length) this.push({ kind: "diff", turn, files: e.files, diff: e.diff, undone: false });
        break;
      case "turn_undone":
        for (const x of this.entries) if (x.kind === "diff" && x.turn === e.turn_id) this.touch(x, { undone: !e.redo });
        this.push({ kind: "notice", level: e.failed?.length ? "warn" : "info", turn: null,
          text: `${e.redo ? "Redone" : "Undone"}: ${e.files.length ? e.files.join(", ") : "no file"}${e.failed?.length ? ` — not restored: ${e.failed.join("; ")}` : ""}` });
        break;
      case "plan_updated": {
        const key = `plan-${turn}`;
        const entry = this.entries.find((x) => x.key === key);
        if (entry) this.touch(entry, { plan: e.plan, explanation: e.explanation });
        else this.push({ key, kind: "plan", turn, plan: e.plan, explanation: e.explanation });
        break;
      }
      case "turn_ended":
        for (const x of this.entries) if (x.turn === turn && x.streaming) this.touch(x, { streaming: false });
        if (e.reason !== "complete") this.push({ kind: "notice", level: e.reason === "error" ? "error" : "warn", turn, text: e.message || `Turn ${e.reason}.` });
        break;
      case "warning":
        this.push({ kind: "notice", level: "warn", turn, text: e.message });
        break;
      case "secret_redacted":
        this.push({ kind: "notice", level: "info", turn, text: redactedText(e) });
        break;
      case "goal_checked":
        this.push({ kind: "notice", level: e.passed ? "info" : "warn", turn,
          text: `Goal check ${e.attempt}/${e.max_turns} ${e.passed ? "passed" : "not met"}` +
            (e.exit_code !== null && e.exit_code !== undefined && !e.passed ? ` (exit ${e.exit_code})` : "") +
            (e.reason ? `: ${e.reason}` : "") });
        break;
      case "goal_ended":
        this.push({ kind: "notice", level: e.reason === "passed" ? "info" : "warn", turn, text: e.message });
        break;
      case "model_switched":
        this.push({ kind: "notice", level: "warn", turn, text: `Now on ${e.to} (was ${e.from}: ${e.reason})` });
        break;
      case "loop_detected":
        this.push({ kind: "notice", level: "warn", turn, text: `${e.tool} was called ${e.repeats} times the same way.` });
        break;
      case "context_compacted":
        this.push({ kind: "notice", level: "info", turn, text: `Conversation summarised: ${e.tokens_before} → ${e.tokens_after} tokens.` });
        break;
      case "rolled_back":
        this.push({ kind: "rollback", turn: null, turns: e.turns });
        break;
      case "mode_changed":
        this.push({ kind: "notice", level: "info", turn: null, text: `Mode: ${e.mode}` });
        break;
      case "model_changed":
        this.push({ kind: "notice", level: "info", turn: null, text: `Model: ${e.model} (${e.provider})` });
        break;
      case "entered_review_mode":
        this.push({ kind: "notice", level: "info", turn: null, text: `Review mode: reviewing ${e.target} with ${e.model}` });
        break;
      case "exited_review_mode":
        this.push({ kind: "notice", level: e.verdict ? "info" : "warn", turn: null, text: e.verdict
          ? `Review mode over: ${e.verdict}, ${e.findings} finding(s)` : `Review mode over: no review (${e.error || "no reason given"})` });
        break;
      case "backend_changed":
        this.push({ kind: "notice", level: "info", turn: null, text: `Agent: ${e.label || e.backend || "auger"}` });
        break;
      case "structured_output":
        this.push({ kind: "agent", turn, text: "```json\n" + JSON.stringify(e.value, null, 2) + "\n```" });
        break;
      default:
        break;
    }
  }

  /** A sub-agent's envelope: into the entry of its spawn call. */
  applyChild(e) {
    let parent = this.calls.get(e.parent_call_id);
    if (!parent) { // its spawn call is on a page not loaded: a stand-in keeps its work together
      parent = this.startCall({ call_id: e.parent_call_id, name: "agent", arguments: {}, turn_id: e.turn_id }, this.entries);
    }
    const list = parent.children;
    switch (e.type) {
      case "item_started":
        if (e.kind === "message") this.streams.set(e.item_id, this.pushInto(parent, { kind: "agent", text: "", streaming: true }));
        break;
      case "message_delta": {
        const entry = this.streams.get(e.item_id);
        if (entry) this.touch(entry, { text: entry.text + e.delta });
        break;
      }
      case "item_ended": {
        const entry = this.streams.get(e.item_id);
        if (entry && e.discarded) list.splice(list.indexOf(entry), 1);
        else if (entry) this.touch(entry, { streaming: false });
        break;
      }
      case "agent_message": {
        const entry = this.streams.get(e.item_id);
        if (entry) this.touch(entry, { text: e.text, streaming: false });
        else this.pushInto(parent, { kind: "agent", text: e.text });
        break;
      }
      case "tool_call_started":
        this.startCall(e, list);
        break;
      case "tool_output_delta":
      case "tool_call_ended":
        this.callEvent(e);
        break;
      case "turn_ended":
        parent.agentDone = e.reason;
        break;
      case "warning":
        this.pushInto(parent, { kind: "notice", level: "warn", text: e.message });
        break;
      case "secret_redacted":
        this.pushInto(parent, { kind: "notice", level: "info", text: redactedText(e) });
        break;
      default:
        break;
    }
    this.bubble(parent);
  }

  startCall(e, list) {
    const known = this.calls.get(e.call_id);
    if (known) { this.touch(known, { args: e.arguments ?? known.args, name: e.name || known.name }); return known; }
    const entry = { key: `c-${e.call_id}`, kind: "tool", turn: e.turn_id ?? null, callId: e.call_id, name: e.name,
      args: typeof e.arguments === "string" ? parseArgs(e.arguments) : e.arguments, output: "", live: "", ok: null,
      done: false, children: [], v: 0, parent: list === this.entries ? null : e.parent_call_id };
    this.calls.set(e.call_id, entry);
    if (list === this.entries) this.push(entry);
    else list.push(entry);
    return entry;
  }

  callEvent(e) {
    const entry = this.calls.get(e.call_id) || this.startCall({ ...e, arguments: {} }, this.entries);
    if (e.type === "tool_output_delta") {
      const live = entry.live + e.text;
      this.touch(entry, { live: live.length > 20000 ? live.slice(-20000) : live });
    } else {
      this.touch(entry, { output: e.output, ok: e.ok, done: true, denied: e.denied || null, ms: e.duration_ms,
        diagnostics: e.diagnostics || [] });
    }
    if (entry.parent) this.bubble(this.calls.get(entry.parent));
  }

  approval(e) {
    if (this.approvals.has(e.request_id)) return;
    const entry = this.push({ key: `a-${e.request_id}`, kind: "approval", turn: e.turn_id, requestId: e.request_id,
      message: e.message, options: e.options || [], details: e.details, form: e.form, approvalKind: e.kind,
      fromAgent: Boolean(e.parent_call_id), resolved: false, decision: null, by: "" });
    this.approvals.set(e.request_id, entry);
  }

  /** Approvals still waiting, from a snapshot (they may be older than the cursor). */
  waiting(envelopes) {
    for (const e of envelopes || []) this.approval(e);
    this.changed(null);
  }

  startStream(e, turn) {
    const entry = this.push({ kind: e.type === "reasoning_delta" ? "reasoning" : "agent", turn, text: "", streaming: true, itemId: e.item_id });
    this.streams.set(e.item_id, entry);
    return entry;
  }

  // -- the user's own input ------------------------------------------------------------------------
  /** A message this page sent, shown at once; its turn is learnt from the envelopes carrying `submission`. */
  sent(text, submission) {
    const entry = this.push({ kind: "user", turn: null, text, images: [], submission, pending: true });
    this.changed(null);
    return entry;
  }

  /** User messages of turns other clients started, found in a fresh page of items. */
  fillUsers(items) {
    for (const { seq, turn_id: turn, item } of items) {
      if (item.type !== "user_message" || !this.missingUser.has(turn)) continue;
      if (this.entries.some((x) => x.kind === "user" && x.turn === turn && x.text === item.text)) continue;
      const at = this.entries.findIndex((x) => x.turn === turn);
      const entry = { key: `i${seq}`, kind: "user", turn, seq, text: item.text, images: item.images || [], v: 0 };
      this.entries.splice(at < 0 ? this.entries.length : at, 0, entry);
    }
    this.missingUser.clear();
    this.relayout();
    this.changed(null);
  }

  // -- bookkeeping ---------------------------------------------------------------------------------
  /** `entry` (kept as it is: other maps may hold it) at the end of the transcript. */
  push(entry) {
    entry.key ||= `e${++this.counter}`;
    entry.v ??= 0;
    this.entries.push(entry);
    if (entry.kind === "rollback") this.relayout();
    return entry;
  }

  pushInto(parent, entry) {
    entry.key ||= `e${++this.counter}`;
    entry.v ??= 0;
    parent.children.push(entry);
    return entry;
  }

  touch(entry, fields) {
    Object.assign(entry, fields);
    entry.v++;
    return entry;
  }

  bubble(entry) {
    for (let x = entry; x; x = x.parent ? this.calls.get(x.parent) : null) x.v++;
  }

  remove(entry) {
    const at = this.entries.indexOf(entry);
    if (at >= 0) this.entries.splice(at, 1);
  }

  /** Mark the turns a rollback took out of the model's context (a regenerated answer replaces them). */
  relayout() {
    const turns = [];
    const rolled = new Set();
    for (const x of this.entries) {
      if (x.kind === "user" && x.turn && !x.injected && turns[turns.length - 1] !== x.turn) turns.push(x.turn);
      if (x.kind === "rollback") for (let n = 0; n < x.turns && turns.length; n++) rolled.add(turns.pop());
    }
    for (const x of this.entries) {
      const now = Boolean(x.turn && rolled.has(x.turn));
      if (Boolean(x.rolledBack) !== now) this.touch(x, { rolledBack: now });
    }
  }

  /** The last user message of the conversation still in context, and whether an answer follows it. */
  lastExchange() {
    for (let i = this.entries.length - 1; i >= 0; i--) {
      const x = this.entries[i];
      if (x.kind === "user" && !x.rolledBack && !x.injected) return x;
    }
    return null;
  }
}

function parseArgs(text) {
  if (typeof text !== "string") return text ?? {};
  try { return JSON.parse(text); } catch { return text; }
}

const REDACTED_WHERE = {
  tool_output: "the output", message: "the conversation", user_message: "your message", context: "the context",
  agent: "the agent's words", hook: "a hook's output", diff: "the diff", approval: "the approval",
  warning: "a warning", error: "an error",
};

/** One line for a secret_redacted event, as the terminal says it: never a value, only its kinds. */
export function redactedText(e) {
  const values = e.count === 1 ? "1 secret value" : `${e.count} secret values`;
  return `Hid ${values} (${(e.kinds || []).join(", ")}) from ${REDACTED_WHERE[e.where] || e.where}.`;
}
