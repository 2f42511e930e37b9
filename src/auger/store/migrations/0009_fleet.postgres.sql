-- Leases name their holder and count their generations (a write is fenced on both); ops for a session
-- another process runs wait in session_ops; the fleet's tasks and their results. NOTIFY tells listeners
-- of new events (auger serve following a worker's session) and new ops (the worker running it).
ALTER TABLE leases ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE leases ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
CREATE TABLE session_ops (
    id BIGSERIAL PRIMARY KEY, session_id TEXT NOT NULL, op BYTEA NOT NULL, created DOUBLE PRECISION NOT NULL);
CREATE INDEX session_ops_by_session ON session_ops (session_id, id);
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    submission_id TEXT UNIQUE,
    queue TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled')),
    spec TEXT NOT NULL,
    priority INTEGER NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    session_id TEXT,
    worker TEXT,
    cancel_requested BOOLEAN NOT NULL DEFAULT FALSE,
    retried INTEGER NOT NULL DEFAULT 0,
    created DOUBLE PRECISION NOT NULL,
    started DOUBLE PRECISION,
    finished DOUBLE PRECISION,
    exit_reason TEXT,
    error TEXT);
CREATE INDEX tasks_by_state ON tasks (state, created);
CREATE TABLE task_results (
    task_id TEXT PRIMARY KEY REFERENCES tasks (id),
    session_id TEXT NOT NULL,
    final_message BYTEA NOT NULL,
    diff BYTEA NOT NULL,
    turn_diffs TEXT NOT NULL,
    input_tokens BIGINT NOT NULL, cached_tokens BIGINT NOT NULL, output_tokens BIGINT NOT NULL,
    reasoning_tokens BIGINT NOT NULL,
    cost DOUBLE PRECISION,
    exit_reason TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL);
CREATE FUNCTION auger_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('auger_events', NEW.session_id);
    RETURN NULL;
END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION auger_notify_event();
CREATE FUNCTION auger_notify_op() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('auger_ops', NEW.session_id);
    RETURN NULL;
END $$;
CREATE TRIGGER session_ops_notify AFTER INSERT ON session_ops FOR EACH ROW EXECUTE FUNCTION auger_notify_op();
