-- People, not one token: users with a role and a hashed token (never the token), an audit of who did what,
-- who created each session and sent each op; tasks that record their submitter and labels, and wait for a
-- person (`waiting`: the approval they park on in `parked`, the tree as they left it in `parked_diff`, the
-- answer that resumes them in `answer`).
CREATE TABLE users (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role IN ('viewer', 'member', 'approver', 'admin')),
    token_hash TEXT NOT NULL UNIQUE,
    created DOUBLE PRECISION NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    revoked DOUBLE PRECISION);
CREATE TABLE audit (
    id BIGSERIAL PRIMARY KEY,
    time DOUBLE PRECISION NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL,
    status INTEGER NOT NULL);
CREATE INDEX audit_by_actor ON audit (actor, id);
CREATE INDEX audit_by_action ON audit (action, id);
ALTER TABLE sessions ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE submissions ADD COLUMN actor TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN submitted_by TEXT NOT NULL DEFAULT '';
ALTER TABLE tasks ADD COLUMN parked BYTEA;
ALTER TABLE tasks ADD COLUMN answer BYTEA;
ALTER TABLE tasks ADD COLUMN parked_diff BYTEA;
ALTER TABLE tasks DROP CONSTRAINT tasks_state_check;
ALTER TABLE tasks ADD CONSTRAINT tasks_state_check
    CHECK (state IN ('queued', 'running', 'waiting', 'done', 'failed', 'cancelled'));
