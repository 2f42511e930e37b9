// Following a server-sent event stream without losing or repeating anything.
//
// EventSource carries the pairing cookie (it cannot send an Authorization header) and reconnects by
// itself with `Last-Event-ID`, the last `id:` (= seq) it read. That is not enough on a phone: a page
// put in the background may hold a connection that died without a word. So when the page becomes
// visible again, or the network comes back, the stream is closed and opened afresh at the cursor the
// owner gives (`after_seq` = the last seq it applied); owners drop any envelope whose seq they already
// have, so the two ways of resuming never show one twice.

const live = new Set();

for (const [target, type] of [[document, "visibilitychange"], [window, "online"], [window, "pageshow"]]) {
  target.addEventListener(type, () => {
    if (document.visibilityState === "visible") for (const follower of live) follower.reopen();
  });
}

export class Follower {
  /**
   * url(): where to connect now; onEvent(data): a numbered or unnumbered data event; onState(data): the
   * `state` event; onStatus(text, reason): "connecting" | "live" | "reconnecting" | "offline", or "ended" (with
   * the server's reason: this user or share link lost access; the stream is not opened again); onReopen(): called
   * after a reopen that had no cursor to resume from (the owner reloads what it shows).
   */
  constructor({ url, onEvent, onState = () => {}, onStatus = () => {}, onReopen = null }) {
    Object.assign(this, { url, onEvent, onState, onStatus, onReopen });
    this.source = null;
    this.failures = 0;
    this.timer = 0;
  }

  open() {
    this.shut();
    live.add(this);
    this.onStatus("connecting");
    const source = new EventSource(this.url());
    this.source = source;
    source.onopen = () => { this.failures = 0; this.onStatus("live"); };
    source.onmessage = (message) => this.onEvent(parse(message.data));
    source.addEventListener("state", (message) => this.onState(parse(message.data)));
    source.addEventListener("closing", (message) => {
      const reason = parse(message.data)?.reason || "";
      if (reason.startsWith("access revoked")) { // the credential opens nothing any more: stop here, say why
        this.close();
        this.onStatus("ended", reason);
      } else {
        this.onStatus("reconnecting");
      }
    });
    source.onerror = () => {
      if (source !== this.source) return;
      if (source.readyState === EventSource.CLOSED) { // refused (an HTTP error): try again, more slowly each time
        this.onStatus("offline");
        clearTimeout(this.timer);
        this.timer = setTimeout(() => this.reopen(), Math.min(30000, 1000 * 2 ** this.failures++));
      } else {
        this.onStatus("reconnecting"); // EventSource reconnects by itself, with Last-Event-ID
      }
    };
  }

  /** Close and open again at the owner's cursor. */
  reopen() {
    if (!live.has(this)) return;
    this.open();
    if (this.onReopen) this.onReopen();
  }

  shut() {
    clearTimeout(this.timer);
    if (this.source) { this.source.onerror = null; this.source.close(); }
    this.source = null;
  }

  close() {
    this.shut();
    live.delete(this);
  }
}

function parse(text) {
  try { return JSON.parse(text); } catch { return null; }
}
