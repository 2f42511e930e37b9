// A session as this page follows it: load the newest items, follow the envelopes after them, act through
// ops. No DOM here; chat.js draws it.
//
// Loading: the snapshot first (its `last_seq`, and where a running turn started), then the newest page
// of items, then the events after the snapshot's cursor — from just before the running turn's start,
// so a reply streaming as the page loads is drawn whole. Older pages come as the user scrolls up.

import { signal } from "../vendor/signals.mjs";
import { api, ApiError, sessionPath, submissionId, submit } from "./api.js";
import { Follower } from "./stream.js";
import { Transcript } from "./transcript.js";
import { go } from "./ui.js";

const PAGE = 80; // items per page: what is drawn at first, and each time the user scrolls to the top

/** A session this page just created (the home page, a fork), and its first prompt: its page follows its
 * events from the first, so what the session said as it opened (a warning) is shown too. */
export const handoff = new Map();

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

  /** The next older page, drawn above; false when none came (one is loading, there is none, it failed). */
  async loadOlder() {
    if (this.olderLoading || this.t.nextBefore == null) return false;
    this.olderLoading = true;
    try {
      const page = await api(sessionPath(this.id, `/items?limit=${PAGE}&before=${this.t.nextBefore}`));
      this.t.prepend(page);
      this.redraw();
      return true;
    } catch (error) {
      this.error.value = `Older messages did not load: ${error.message}`;
      return false;
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
      const fork = await api("/api/sessions", { method: "POST", body: { fork: this.id, before_seq: before } });
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
