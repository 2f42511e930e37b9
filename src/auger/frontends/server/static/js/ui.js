// What every view shares: `html` (htm bound to Preact's h), formatting, the hash route, a touch check.

import { h } from "../vendor/preact.mjs";
import htm from "../vendor/htm.mjs";
import { signal } from "../vendor/signals.mjs";

export const html = htm.bind(h);

/** The route from the location's hash: {view: "home" | "new" | "session" | "settings", id?}. */
export const route = signal(parseRoute());
window.addEventListener("hashchange", () => { route.value = parseRoute(); });

function parseRoute() {
  const parts = location.hash.replace(/^#\/?/, "").split("/").map(decodeURIComponent);
  if (parts[0] === "s" && parts[1]) return { view: "session", id: parts[1] };
  if (parts[0] === "settings") return { view: "settings" };
  if (parts[0] === "new") return { view: "new" };
  return { view: "home" };
}

export function go(path) {
  location.hash = path;
}

/** What `/api/server` says: roots, mode, model, provider (null until it answered). */
export const serverInfo = signal(null);

/** A phone or tablet: Enter makes a new line there, the send button sends. */
export const touch = () => window.matchMedia("(pointer: coarse)").matches;

export function money(value) {
  if (value === null || value === undefined) return "cost unknown";
  return value < 0.01 && value > 0 ? `$${value.toFixed(4)}` : `$${value.toFixed(2)}`;
}

export function ago(seconds) {
  const s = Math.max(0, Date.now() / 1000 - seconds);
  if (s < 60) return "now";
  if (s < 3600) return `${Math.floor(s / 60)} min`;
  if (s < 86400) return `${Math.floor(s / 3600)} h`;
  return new Date(seconds * 1000).toLocaleDateString();
}

/** The last one or two parts of a path: what tells projects apart in a narrow list. */
export function shortPath(path) {
  const parts = String(path || "").split("/").filter(Boolean);
  return parts.slice(-2).join("/") || "/";
}

export const MODES = ["plan", "safe", "auto"];

/** The modes a client may choose: up to the server's. */
export function allowedModes(ceiling) {
  return MODES.slice(0, MODES.indexOf(ceiling) + 1 || 1);
}

export function Spinner() {
  return html`<span class="spinner" aria-hidden="true"></span>`;
}
