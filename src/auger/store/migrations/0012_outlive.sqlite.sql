-- Runs that outlive the person: schedules (a cadence, the task each run is, a missed-run policy; the next
-- due time in `next_run`), each run once per due time (the key of schedule_runs), and the deliveries of
-- signed webhooks, kept by delivery id so a replay starts nothing twice.
CREATE TABLE schedules (
    id TEXT PRIMARY KEY,
    cadence TEXT NOT NULL,
    tz TEXT NOT NULL,
    missed TEXT NOT NULL CHECK (missed IN ('skip', 'once')),
    spec TEXT NOT NULL,
    queue TEXT NOT NULL,
    priority INTEGER NOT NULL,
    max_attempts INTEGER NOT NULL,
    paused INTEGER NOT NULL DEFAULT 0,
    next_run REAL NOT NULL,
    created REAL NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    last_run REAL,
    last_target TEXT,
    runs INTEGER NOT NULL DEFAULT 0,
    skipped INTEGER NOT NULL DEFAULT 0);
CREATE INDEX schedules_due ON schedules (paused, next_run);
CREATE TABLE schedule_runs (
    schedule_id TEXT NOT NULL,
    due REAL NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('claimed', 'started', 'failed', 'skipped')),
    fired REAL NOT NULL,
    late INTEGER NOT NULL DEFAULT 0,
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
    received REAL NOT NULL,
    event TEXT NOT NULL DEFAULT '',
    outcome TEXT NOT NULL,
    task_id TEXT,
    session_id TEXT,
    detail TEXT,
    PRIMARY KEY (intake, delivery_id));
