-- Everything auger stored before numbered migrations (schema versions 1-8 upgraded in place): sessions,
-- items, full tool outputs, usage, leases, events, sub-agent links, backend sessions, pending changes,
-- client-chosen submission ids. Idempotent, so a file of any older version comes up to 8.
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, created REAL NOT NULL, updated REAL NOT NULL, cwd TEXT NOT NULL,
    provider TEXT NOT NULL, model TEXT NOT NULL, mode TEXT NOT NULL, title TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS items (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, turn_id TEXT NOT NULL, type TEXT NOT NULL,
    data TEXT NOT NULL, created REAL NOT NULL, PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS tool_outputs (
    session_id TEXT NOT NULL, call_id TEXT NOT NULL, seq INTEGER NOT NULL, tool TEXT NOT NULL,
    arguments TEXT NOT NULL, full_output TEXT NOT NULL, PRIMARY KEY (session_id, call_id)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS usage (
    session_id TEXT NOT NULL, turn_id TEXT NOT NULL, model TEXT NOT NULL, input INTEGER NOT NULL,
    cached INTEGER NOT NULL, output INTEGER NOT NULL, reasoning INTEGER NOT NULL, created REAL NOT NULL,
    inherited INTEGER NOT NULL DEFAULT 0);
CREATE INDEX IF NOT EXISTS usage_by_session ON usage (session_id);
CREATE INDEX IF NOT EXISTS sessions_by_updated ON sessions (updated);
CREATE TABLE IF NOT EXISTS leases (
    session_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, host TEXT NOT NULL, heartbeat REAL NOT NULL);
CREATE TABLE IF NOT EXISTS events (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS session_links (
    child_id TEXT PRIMARY KEY, parent_id TEXT NOT NULL, parent_call_id TEXT NOT NULL, agent TEXT NOT NULL,
    status TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX IF NOT EXISTS links_by_parent ON session_links (parent_id);
CREATE TABLE IF NOT EXISTS backend_sessions (
    session_id TEXT NOT NULL, backend TEXT NOT NULL, agent_session_id TEXT NOT NULL,
    PRIMARY KEY (session_id, backend)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS pending_changes (
    session_id TEXT NOT NULL, seq INTEGER NOT NULL, path TEXT NOT NULL, before_hash TEXT NOT NULL,
    content BLOB, mode INTEGER, agent TEXT NOT NULL, call_id TEXT NOT NULL, tool TEXT NOT NULL,
    created REAL NOT NULL, state TEXT NOT NULL DEFAULT 'pending', PRIMARY KEY (session_id, seq)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS submissions (
    session_id TEXT NOT NULL, submission_id TEXT NOT NULL, op TEXT NOT NULL, created REAL NOT NULL,
    PRIMARY KEY (session_id, submission_id)) WITHOUT ROWID;
