-- Runs that outlive the person: schedules (a cadence, the task each run is, a missed-run policy; the next
-- due time in `next_run`), each run once per due time (the key of schedule_runs), and the deliveries of
-- signed webhooks, kept by delivery id so a replay starts nothing twice. A task says where it came from
-- (`origin`: a schedule's run, an intake's delivery) and its result what was delivered (a branch, a pull
-- request, a comment). NOTIFY auger_schedules wakes the processes that fire schedules when one changes.
CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    cadence TEXT NOT NULL,
    tz TEXT NOT NULL,
    missed TEXT NOT NULL CHECK (missed IN ('skip', 'once')),
    spec TEXT NOT NULL,
    queue TEXT NOT NULL,
    priority INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    paused BOOLEAN NOT NULL DEFAULT FALSE,
    next_run DOUBLE PRECISION NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    last_run DOUBLE PRECISION,
    last_target TEXT,
    runs INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0);
CREATE INDEX schedules_due ON schedules (paused, next_run);
CREATE TABLE schedule_runs (
    schedule_id TEXT NOT NULL,
    due DOUBLE PRECISION NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('claimed', 'started', 'failed', 'skipped')),
    fired DOUBLE PRECISION NOT NULL,
    late BOOLEAN NOT NULL DEFAULT FALSE,
    missed INTEGER NOT NULL DEFAULT 0,
    claimed_by TEXT NOT NULL DEFAULT '',
    task_id TEXT,
    session_id TEXT,
    error TEXT,
    PRIMARY KEY (schedule_id, due));
CREATE INDEX schedule_runs_claimed ON schedule_runs (state, fired);
CREATE TABLE intake_deliveries (
    intake TEXT NOT NULL,
    delivery_id TEXT NOT NULL,
    received DOUBLE PRECISION NOT NULL,
    event TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL,
    task_id TEXT,
    session_id TEXT,
    detail TEXT,
    PRIMARY KEY (intake, delivery_id));
ALTER TABLE tasks ADD COLUMN origin TEXT;
ALTER TABLE task_results ADD COLUMN delivery TEXT;
CREATE FUNCTION auger_notify_schedule() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('auger_schedules', '');
    RETURN NULL;
END $$;
CREATE TRIGGER schedules_notify AFTER INSERT OR UPDATE OF paused, next_run ON schedules
    FOR EACH STATEMENT EXECUTE FUNCTION auger_notify_schedule();
