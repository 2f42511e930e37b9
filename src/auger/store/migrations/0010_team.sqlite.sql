-- People, not one token: users with a role and a hashed token (never the token), an audit of who did what,
-- who created each session and sent each op. (The fleet's tasks live only in PostgreSQL.)
CREATE TABLE users (
    name TEXT PRIMARY KEY,
    role TEXT NOT NULL CHECK (role IN ('viewer', 'member', 'approver', 'admin')),
    token_hash TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    revoked REAL);
CREATE TABLE audit (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    time REAL NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    target TEXT NOT NULL,
    detail TEXT NOT NULL,
    status INTEGER NOT NULL);
CREATE INDEX audit_by_actor ON audit (actor, id);
CREATE INDEX audit_by_action ON audit (action, id);
ALTER TABLE sessions ADD COLUMN created_by TEXT NOT NULL DEFAULT '';
ALTER TABLE submissions ADD COLUMN actor TEXT NOT NULL DEFAULT '';
