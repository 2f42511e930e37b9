// The HTTP API (docs/server.md), as the browser speaks it: same-origin requests that carry the pairing
// cookie; JSON in and out; every op under a submission id chosen here, so a POST retried after a
// network failure starts nothing twice.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

const CLIENT = { "x-auger-client": "web" };

/** GET/POST/PATCH `path`; the parsed JSON answer, or an ApiError with the server's one-line reason. */
export async function api(path, { method = "GET", body } = {}) {
  const init = { method, headers: { ...CLIENT }, credentials: "same-origin" };
  if (body !== undefined) {
    init.headers["content-type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch {
    throw new ApiError(0, "the server cannot be reached");
  }
  const text = await response.text();
  let data = null;
  try { data = text ? JSON.parse(text) : null; } catch { /* not JSON: said below */ }
  if (!response.ok) {
    const reason = data && typeof data.error === "string" ? data.error : `HTTP ${response.status}`;
    throw new ApiError(response.status, reason);
  }
  return data;
}

let counter = 0;

/** A fresh submission id: unique to this page load, and readable in the server's records. */
export function submissionId() {
  const random = crypto.getRandomValues(new Uint32Array(2));
  return `web-${random[0].toString(36)}${random[1].toString(36)}-${++counter}`;
}

/** Submit one op to a session; a network failure is retried under the same id (the server starts it once). */
export async function submit(sessionId, op, id = submissionId()) {
  for (let attempt = 0; ; attempt++) {
    try {
      await api(`/api/sessions/${encodeURIComponent(sessionId)}/ops`, { method: "POST", body: { submission_id: id, op } });
      return id;
    } catch (error) {
      if (error.status !== 0 || attempt >= 4) throw error;
      await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
    }
  }
}

export const sessionPath = (id, rest = "") => `/api/sessions/${encodeURIComponent(id)}${rest}`;
