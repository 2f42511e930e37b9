// Browser notifications: when a session this page follows needs an approval or ends a turn, and the page is
// not being looked at, the browser shows a notification — once the user has allowed it (`ask`, from a click:
// browsers ask only then). They need a secure context (HTTPS, or this machine's loopback). A browser that has
// no page-made notifications (Chrome on Android) shows them through a service worker (sw.js), registered
// when permission is asked for.

import { signal } from "../vendor/signals.mjs";

const supported = typeof window.Notification === "function" && window.isSecureContext;

/** "granted" | "denied" | "default" (not asked yet) | "unsupported". */
export const permission = signal(supported ? Notification.permission : "unsupported");

export async function ask() {
  if (!supported) return;
  permission.value = await Notification.requestPermission();
  if (permission.value === "granted" && navigator.serviceWorker) {
    navigator.serviceWorker.register("sw.js").catch(() => { /* page-made notifications still work */ });
  }
}

/** Show one notification (a newer one with the same `tag` replaces it); clicking it opens the session. */
export function tell(title, body, tag, sessionId) {
  if (permission.value !== "granted") return;
  if (document.visibilityState === "visible" && document.hasFocus()) return; // the person is looking already
  const options = { body: String(body || "").slice(0, 200), tag, data: { url: `/#/s/${encodeURIComponent(sessionId)}` } };
  try {
    const shown = new Notification(title, options);
    shown.onclick = () => { window.focus(); location.hash = `/s/${encodeURIComponent(sessionId)}`; shown.close(); };
  } catch {
    navigator.serviceWorker?.getRegistration().then((registration) => registration?.showNotification(title, options));
  }
}
