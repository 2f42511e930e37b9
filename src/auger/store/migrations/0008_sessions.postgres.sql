-- The same tables as SQLite's schema 8. Text a model or a user wrote (paths, titles, tool arguments and
-- outputs, ops) is BYTEA holding UTF-8 with lone surrogates kept (`surrogatepass`): PostgreSQL's TEXT
-- takes neither those nor NUL. Items and events are JSON whose every surrogate and control is escaped.
-- Times are seconds since the epoch, as in SQLite, so listings page by the same cursors.
CREATE TABLE sessions (
    id TEXT PRIMARY KEY, created DOUBLE PRECISION NOT NULL, updated DOUBLE PRECISION NOT NULL,
    cwd BYTEA NOT NULL, provider TEXT NOT NULL, model TEXT NOT NULL, mode TEXT NOT NULL,
    title BYTEA NOT NULL DEFAULT '');
CREATE INDEX sessions_by_updated ON sessions (updated);
CREATE TABLE items (
    session_id TEXT NOT NULL, seq BIGINT NOT NULL, turn_id TEXT NOT NULL, type TEXT NOT NULL,
    data TEXT NOT NULL, created DOUBLE PRECISION NOT NULL, PRIMARY KEY (session_id, seq));
CREATE TABLE tool_outputs (
    session_id TEXT NOT NULL, call_id TEXT NOT NULL, seq BIGINT NOT NULL, tool BYTEA NOT NULL,
    arguments BYTEA NOT NULL, full_output BYTEA NOT NULL, PRIMARY KEY (session_id, call_id));
CREATE TABLE usage (
    session_id TEXT NOT NULL, turn_id TEXT NOT NULL, model TEXT NOT NULL, input BIGINT NOT NULL,
    cached BIGINT NOT NULL, output BIGINT NOT NULL, reasoning BIGINT NOT NULL,
    created DOUBLE PRECISION NOT NULL, inherited INTEGER NOT NULL DEFAULT 0);
CREATE INDEX usage_by_session ON usage (session_id);
CREATE TABLE leases (
    session_id TEXT PRIMARY KEY, pid INTEGER NOT NULL, host TEXT NOT NULL, heartbeat DOUBLE PRECISION NOT NULL);
CREATE TABLE events (
    session_id TEXT NOT NULL, seq BIGINT NOT NULL, type TEXT NOT NULL, data TEXT NOT NULL,
    PRIMARY KEY (session_id, seq));
CREATE TABLE session_links (
    child_id TEXT PRIMARY KEY, parent_id TEXT NOT NULL, parent_call_id BYTEA NOT NULL, agent BYTEA NOT NULL,
    status TEXT NOT NULL, created DOUBLE PRECISION NOT NULL);
CREATE INDEX links_by_parent ON session_links (parent_id);
CREATE TABLE backend_sessions (
    session_id TEXT NOT NULL, backend TEXT NOT NULL, agent_session_id TEXT NOT NULL,
    PRIMARY KEY (session_id, backend));
CREATE TABLE pending_changes (
    session_id TEXT NOT NULL, seq BIGINT NOT NULL, path BYTEA NOT NULL, before_hash TEXT NOT NULL,
    content BYTEA, mode INTEGER, agent BYTEA NOT NULL, call_id BYTEA NOT NULL, tool BYTEA NOT NULL,
    created DOUBLE PRECISION NOT NULL, state TEXT NOT NULL DEFAULT 'pending', PRIMARY KEY (session_id, seq));
CREATE TABLE submissions (
    session_id TEXT NOT NULL, submission_id BYTEA NOT NULL, op BYTEA NOT NULL,
    created DOUBLE PRECISION NOT NULL, PRIMARY KEY (session_id, submission_id));
