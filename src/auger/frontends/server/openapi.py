"""The OpenAPI document of `auger serve` (`GET /api/openapi.json`).

Ops, events and items are not described again here: their schemas are the protocol's own, generated
from the code (`/api/protocol.schema.json`, a copy of docs/protocol.schema.json), referred to by `$ref`.
"""

from __future__ import annotations

from typing import Any

from auger._version import __version__

PROTOCOL = "/api/protocol.schema.json#/$defs/"


def _ref(name: str) -> dict[str, str]:
    return {"$ref": PROTOCOL + name}


def _error(description: str) -> dict[str, Any]:
    schema = {"$ref": "#/components/schemas/Error"}
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _ok(description: str, schema: dict[str, Any] | None = None, status: str = "200") -> dict[str, Any]:
    body: dict[str, Any] = {"description": description}
    if schema is not None:
        body["content"] = {"application/json": {"schema": schema}}
    return {status: body, "400": _error("a field that is unknown, missing or ill-typed"),
            "401": _error("no valid credentials"), "403": _error("refused: a role short of the one needed, a "
                                                                 "foreign Host or Origin, outside the roots, or a mode "
                                                                 "beyond the server's")}


def _sse(description: str) -> dict[str, Any]:
    return {"description": description, "content": {"text/event-stream": {"schema": {"type": "string"}}}}


_ID = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]
_TASK_ID = [{"name": "id", "in": "path", "required": True, "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}}]
_EMPTY = {"content": {"application/json": {"schema": {"type": "object", "additionalProperties": False}}}}


def openapi_document() -> dict[str, Any]:
    snapshot = {"$ref": "#/components/schemas/Snapshot"}
    return {
        "openapi": "3.1.0",
        "info": {"title": "auger serve", "version": __version__,
                 "description": "Sessions driven by protocol ops, followed by their event envelopes (SSE, `id:` = "
                                "`seq`). See docs/server.md."},
        "security": [{"bearer": []}, {"cookie": []}],
        "paths": {
            "/api/sessions": {
                "get": {"summary": "Stored sessions within the roots, newest first",
                        "parameters": [{"name": "cursor", "in": "query", "schema": {"type": "string"}},
                                       {"name": "limit", "in": "query", "schema": {"type": "integer"}}],
                        "responses": _ok("a page of sessions and next_cursor")},
                "post": {"summary": "Create, fork (201) or resume (200) a session",
                         "requestBody": {"content": {"application/json": {"schema": {
                             "type": "object", "additionalProperties": False, "properties": {
                                 "cwd": {"type": "string"}, "mode": _ref("Mode"), "model": {"type": "string"},
                                 "provider": {"type": "string"}, "resume": {"type": "string"},
                                 "fork": {"type": "string"},
                                 "before": {"type": "integer", "minimum": 1,
                                            "description": "a fork: cut just before this user message (1: the "
                                            "first)"},
                                 "before_seq": {"type": "integer", "description": "a fork: cut just before the "
                                                "user message stored under this item seq"}}}}}},
                         "responses": {**_ok("the session's snapshot", snapshot, "201"),
                                       "409": _error("the session runs in another process")}}},
            "/api/openapi.json": {"get": {"summary": "This document", "responses": _ok("the OpenAPI document")}},
            "/api/protocol.schema.json": {"get": {"summary": "The JSON Schema of every op, event and item, generated "
                                                             "from the code (docs/protocol.schema.json)",
                                                  "responses": _ok("the protocol's JSON Schema")}},
            "/api/health": {"get": {
                "summary": "For load balancers and probes: no credentials (the Host is still checked), no details",
                "security": [],
                "responses": {
                    "200": {"description": "the server answers and so does its store", "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                    "503": {"description": "the store does not answer", "content": {
                        "application/json": {"schema": {"$ref": "#/components/schemas/Health"}}}},
                    "403": _error("a foreign Host or Origin")}}},
            "/api/server": {"get": {"summary": "The roots sessions may work in, the server's mode and model, "
                                               "who is asking, whether there is a fleet",
                                    "responses": _ok("roots, mode, model, provider, user, fleet")}},
            "/api/sessions/{id}": {"get": {"summary": "A session's record and state snapshot", "parameters": _ID,
                                           "responses": {**_ok("the snapshot", snapshot),
                                                         "404": _error("no such session")}}},
            "/api/sessions/{id}/handoff": {"post": {
                "summary": "Take a session over from the process running it (a terminal on the same store; a "
                           "member's): opened now (200), or once that process lets it go at its turn's end (202)",
                "parameters": _ID, "requestBody": _EMPTY,
                "responses": {**_ok("id, open, url (its page), pair (a one-use link that pairs a phone as the "
                                    "caller and opens it), expires_in"),
                              "202": {"description": "the same, while the process running it still has it"},
                              "403": _error("a session this server may not open"),
                              "404": _error("no such session")}}},
            "/api/sessions/{id}/shares": {"post": {
                "summary": "A read-only link to the session (a member's): its snapshot, transcript, diffs and live "
                           "events, until it expires or is revoked",
                "parameters": _ID,
                "requestBody": {"content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "properties": {
                        "expires_in": {"type": ["integer", "string"],
                                       "description": "seconds (60 to 2592000; default 86400), or a duration: "
                                                      "30m, 1h, 7d"}}}}}},
                "responses": {**_ok("id, session_id, url and token (shown this once), expires, created_by",
                                    None, "201"), "404": _error("no such session")}}},
            "/api/shares": {"get": {
                "summary": "The share links made (a member's), newest first, never their tokens",
                "parameters": [{"name": "session", "in": "query", "schema": {"type": "string"}}],
                "responses": _ok("shares: id, session_id, created, created_by, expires, revoked, live")}},
            "/api/shares/{share}/revoke": {"post": {
                "summary": "Revoke a share link (a member's): refused from its next request, its streams closed now",
                "parameters": [{"name": "share", "in": "path", "required": True, "schema": {"type": "string"}}],
                "requestBody": _EMPTY, "responses": {**_ok("the share"), "404": _error("no such unrevoked share")}}},
            "/share": {"get": {"summary": "Open a share link: sets the browser's read-only cookie for the session and "
                                          "takes it to the session's page", "security": [],
                               "parameters": [{"name": "code", "in": "query", "required": True,
                                               "schema": {"type": "string"}}],
                               "responses": {"200": {"description": "a page that goes on to the session"},
                                             "403": _error("revoked, expired, or not a share link")}}},
            "/api/sessions/{id}/ops": {"post": {
                "summary": "Submit one op under a client-chosen submission id (a repeat starts nothing)",
                "parameters": _ID,
                "requestBody": {"content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "required": ["submission_id", "op"],
                    "properties": {"submission_id": {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,64}$"},
                                   "op": _ref("Op")}}}}},
                "responses": {**_ok("accepted", {"type": "object"}, "202"),
                              "409": _error("the id was used for another op, the approval was already answered, or "
                                            "the session runs elsewhere")}}},
            "/api/sessions/{id}/events": {"get": {
                "summary": "The session's envelopes after a cursor, as server-sent events",
                "description": "First an unnumbered `state` event (the snapshot), then one event per envelope "
                               "(`id:` = seq, data: " + PROTOCOL + "Envelope). Resume with `Last-Event-ID` or "
                               "`after_seq`. `: ping` comments keep it alive; a final `closing` event says why "
                               "the server ended the stream.",
                "parameters": [*_ID, {"name": "after_seq", "in": "query", "schema": {"type": "integer"}},
                               {"name": "Last-Event-ID", "in": "header", "schema": {"type": "integer"}}],
                "responses": {"200": _sse("the stream"), "404": _error("no such session"),
                              "409": _error("the cursor is past the session's last event")}}},
            "/api/sessions/{id}/items": {"get": {
                "summary": "The transcript, a page at a time (items with seq < before)",
                "parameters": [*_ID, {"name": "before", "in": "query", "schema": {"type": "integer"}},
                               {"name": "limit", "in": "query", "schema": {"type": "integer"}}],
                "responses": _ok("items (" + PROTOCOL + "Item) with their seq, and next_before")}},
            "/api/sessions/{id}/diff": {"get": {
                "summary": "The turns that changed files, with their diffs",
                "parameters": [*_ID, {"name": "turn", "in": "query", "schema": {"type": "string"}}],
                "responses": _ok("turns")}},
            "/api/sessions/{id}/pending": {"get": {"summary": "Pending mode's queued changes", "parameters": _ID,
                                                   "responses": _ok("files")}},
            "/api/events": {"get": {"summary": "Coarse events of every session, for the session list",
                                    "responses": {"200": _sse("unnumbered events: session_created, session_opened, "
                                                              "session_updated, turn_started, turn_ended, "
                                                              "approval_waiting, approval_resolved, session_closed")}}},
            "/api/fleet": {"get": {"summary": "The fleet (a PostgreSQL store): queue depth, running, done, failed, "
                                              "retried, tokens and cost, and the latest tasks",
                                   "parameters": [{"name": "limit", "in": "query", "schema": {"type": "integer"}}],
                                   "responses": {**_ok("stats, and tasks (each with its cost once finished)"),
                                                 "404": _error("the store has no fleet (SQLite)")}}},
            "/api/fleet/tasks": {"post": {
                "summary": "Submit a task (data only; a member's): 201, or 200 for a repeated submission id",
                "requestBody": {"content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "required": ["prompt", "repo"],
                    "properties": {
                        "prompt": {"type": "string"}, "repo": {"type": "string"}, "ref": {"type": "string"},
                        "provider": {"type": "string"}, "model": {"type": "string"}, "mode": _ref("Mode"),
                        "token_budget": {"type": "integer", "minimum": 1}, "cost_budget": {"type": "number"},
                        "approval_timeout_s": {"type": "number", "minimum": 1},
                        "labels": {"type": "array", "items": {"type": "string"}},
                        "priority": {"type": "integer"}, "queue": {"type": "string"},
                        "max_attempts": {"type": "integer", "minimum": 1, "maximum": 20},
                        "submission_id": {"type": "string", "pattern": "^[A-Za-z0-9_.:-]{1,64}$"}}}}}},
                "responses": {**_ok("the task's record", None, "201"), "200": {"description": "the first task of "
                                                                               "a repeated submission id"},
                              "404": _error("no fleet"), "409": _error("the submission id names another task")}}},
            "/api/hooks/{name}": {"post": {
                "summary": "A webhook intake's delivery: no bearer token, the body's HMAC-SHA256 under the intake's "
                           "secret (X-Hub-Signature-256 or X-Auger-Signature) is its credential",
                "security": [],
                "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}},
                               {"name": "X-Hub-Signature-256", "in": "header", "schema": {"type": "string"}},
                               {"name": "X-Auger-Signature", "in": "header", "schema": {"type": "string"}},
                               {"name": "X-GitHub-Delivery", "in": "header", "schema": {"type": "string"}},
                               {"name": "X-GitHub-Event", "in": "header", "schema": {"type": "string"}}],
                "requestBody": {"content": {"application/json": {"schema": {}}}},
                "responses": {"200": {"description": "a replay (nothing new), or a ping"},
                              "202": {"description": "a task queued or started, a message sent, or the delivery "
                                                     "ignored by the intake's filter"},
                              "401": _error("no signature, or a wrong one"), "404": _error("no such intake"),
                              "422": _error("the payload makes no valid task"),
                              "503": _error("the intake's configuration is unusable")}}},
            "/api/fleet/schedules": {
                "get": {"summary": "The schedules, each with its next due time and latest runs",
                        "responses": _ok("schedules, and who fires them: the fleet or this server")},
                "post": {"summary": "Add a schedule (a member's): a cadence, a missed-run policy and the task each "
                                    "run is (data only, as a task's)",
                         "requestBody": {"content": {"application/json": {"schema": {
                             "type": "object", "additionalProperties": False, "required": ["prompt", "repo"],
                             "properties": {
                                 "cron": {"type": "string", "description": "five cron fields, or @hourly, @daily…"},
                                 "every": {"type": "string", "description": "instead of cron: 30s, 10m, 2h, 1d"},
                                 "tz": {"type": "string", "description": "an IANA zone for cron (default UTC)"},
                                 "missed": {"enum": ["once", "skip"]},
                                 "prompt": {"type": "string"}, "repo": {"type": "string"}, "ref": {"type": "string"},
                                 "provider": {"type": "string"}, "model": {"type": "string"}, "mode": _ref("Mode"),
                                 "token_budget": {"type": "integer", "minimum": 1}, "cost_budget": {"type": "number"},
                                 "approval_timeout_s": {"type": "number", "minimum": 1},
                                 "labels": {"type": "array", "items": {"type": "string"}},
                                 "deliver": {"enum": ["none", "branch", "pr", "comment"]},
                                 "kind": {"enum": ["change", "review"]}, "base": {"type": "string"},
                                 "issue": {"type": "integer", "minimum": 1}, "title": {"type": "string"},
                                 "priority": {"type": "integer"}, "queue": {"type": "string"},
                                 "max_attempts": {"type": "integer", "minimum": 1, "maximum": 20}}}}}},
                         "responses": {**_ok("the schedule", status="201"),
                                       "409": _error("too many schedules")}}},
            "/api/fleet/schedules/{id}": {
                "get": {"summary": "One schedule with its latest runs", "parameters": _TASK_ID,
                        "responses": {**_ok("the schedule"), "404": _error("no such schedule")}},
                "delete": {"summary": "Remove a schedule (the tasks it started stay)", "parameters": _TASK_ID,
                           "responses": {**_ok("removed"), "404": _error("no such schedule")}}},
            "/api/fleet/schedules/{id}/pause": {"post": {
                "summary": "Pause a schedule", "parameters": _TASK_ID, "requestBody": _EMPTY,
                "responses": {**_ok("the schedule"), "404": _error("no such schedule")}}},
            "/api/fleet/schedules/{id}/resume": {"post": {
                "summary": "Resume a schedule from its next due time after now (paused time is not missed)",
                "parameters": _TASK_ID, "requestBody": _EMPTY,
                "responses": {**_ok("the schedule"), "404": _error("no such schedule")}}},
            "/api/fleet/tasks/{id}": {"get": {
                "summary": "One task, with its stored result", "parameters": _TASK_ID,
                "responses": {**_ok("the task's record and result"), "404": _error("no such task, or no fleet")}}},
            "/api/fleet/tasks/{id}/answer": {"post": {
                "summary": "Answer the approval a waiting (parked) task waits for (an approver's); any worker "
                           "resumes it",
                "parameters": _TASK_ID,
                "requestBody": {"content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "required": ["request_id", "decision"],
                    "properties": {"request_id": {"type": "string"}, "decision": _ref("ApprovalOption"),
                                   "feedback": {"type": ["string", "null"]}}}}}},
                "responses": {**_ok("the task's record, queued again"), "404": _error("no such task, or no fleet"),
                              "409": _error("nothing waits, or it was answered already")}}},
            "/api/users": {
                "get": {"summary": "Every user (an admin's)", "responses": _ok("users")},
                "post": {"summary": "Add a user (an admin's): the token is in the answer, once",
                         "requestBody": {"content": {"application/json": {"schema": {
                             "type": "object", "additionalProperties": False, "required": ["name", "role"],
                             "properties": {"name": {"type": "string", "pattern": "^[a-z][a-z0-9._-]{0,31}$"},
                                            "role": {"enum": ["viewer", "member", "approver", "admin"]}}}}}},
                         "responses": {**_ok("the user and its token", None, "201"),
                                       "409": _error("the name is taken")}}},
            "/api/users/{name}/revoke": {"post": {
                "summary": "Revoke a user (an admin's): refused from the next request, open streams closed",
                "parameters": [{"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}],
                "requestBody": _EMPTY, "responses": {**_ok("the user"), "404": _error("no such active user")}}},
            "/api/audit": {"get": {
                "summary": "Who did what, newest first (an admin's)",
                "parameters": [{"name": name, "in": "query", "schema": {"type": kind}} for name, kind in (
                    ("actor", "string"), ("action", "string"), ("target", "string"), ("before", "integer"),
                    ("limit", "integer"))],
                "responses": _ok("entries and next_before")}},
            "/api/fleet/tasks/{id}/cancel": {"post": {
                "summary": "Cancel a task: a queued one at once, a running one through its worker",
                "parameters": _TASK_ID, "requestBody": _EMPTY,
                "responses": {**_ok("the task's record"), "404": _error("no such task, or no fleet"),
                              "409": _error("the task has finished")}}},
            "/api/fleet/tasks/{id}/retry": {"post": {
                "summary": "Queue a failed or cancelled task again",
                "parameters": _TASK_ID, "requestBody": _EMPTY,
                "responses": {**_ok("the task's record"), "404": _error("no such task, or no fleet"),
                              "409": _error("the task is neither failed nor cancelled")}}},
            "/api/providers": {"get": {"summary": "Model providers and backend agents with their status",
                                       "parameters": [{"name": "probe", "in": "query",
                                                       "schema": {"enum": ["stale"]}}],
                                       "responses": _ok("providers")}},
            "/api/providers/{name}/probe": {"post": {"summary": "Check one provider or agent for real now",
                                                     "responses": _ok("its row")}},
            "/api/providers/{name}": {"patch": {
                "summary": "Enable or disable a provider or agent, or add a custom ACP agent (user config)",
                "requestBody": {"content": {"application/json": {"schema": {
                    "type": "object", "additionalProperties": False, "properties": {
                        "enabled": {"type": "boolean"}, "command": {"type": "string"},
                        "args": {"type": "array", "items": {"type": "string"}}, "label": {"type": "string"}}}}}},
                "responses": _ok("its row")}},
            "/api/pair": {"post": {"summary": "A new one-use pairing link for another browser",
                                   "responses": _ok("url and expires_in", None, "201")}},
            "/pair": {"get": {"summary": "Redeem a pairing code: sets the browser's cookie, redirects to /",
                              "security": [], "parameters": [
                                  {"name": "code", "in": "query", "required": True, "schema": {"type": "string"}},
                                  {"name": "session", "in": "query", "schema": {"type": "string"},
                                   "description": "the session whose page to land on"}],
                              "responses": {"303": {"description": "signed in"},
                                            "403": _error("used up or expired")}}},
            "/acp": {"get": {"summary": "The Agent Client Protocol over a WebSocket (JSON-RPC text frames)",
                             "responses": {"101": {"description": "switching to the WebSocket"}}}},
        },
        "components": {
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"},
                                "cookie": {"type": "apiKey", "in": "cookie", "name": "auger_auth"}},
            "schemas": {
                "Error": {"type": "object", "properties": {"error": {"type": "string"}}, "required": ["error"]},
                "Health": {"type": "object", "additionalProperties": False, "required": ["status", "version", "store"],
                           "properties": {"status": {"enum": ["ok", "unavailable"]}, "version": {"type": "string"},
                                          "store": {"enum": ["ok", "unreachable"]}}},
                "Snapshot": {"type": "object", "properties": {
                    "id": {"type": "string"}, "title": {"type": "string"}, "cwd": {"type": "string"},
                    "provider": {"type": "string"}, "model": {"type": "string"}, "mode": _ref("Mode"),
                    "cost": {"type": ["number", "null"], "description": "USD of its own calls; null: a price "
                             "is unknown"},
                    "state": {"type": "object", "properties": {
                        "open": {"type": "boolean"}, "last_seq": {"type": "integer"},
                        "running_turn": {"type": ["string", "null"]},
                        "turn_started_seq": {"type": ["integer", "null"],
                                             "description": "the seq of the running turn's turn_started"},
                        "pending_approvals": {"type": "array", "items": _ref("Envelope")},
                        "pending_changes": {"type": "integer"}, "mode": _ref("Mode"), "model": {"type": "string"},
                        "provider": {"type": "string"}, "backend": {"type": "string"}}}}},
            },
        },
    }
