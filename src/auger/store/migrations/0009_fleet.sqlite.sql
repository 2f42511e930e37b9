-- Leases name their holder (a store instance: one process's, or one worker's) and count their
-- generations, so a write can be fenced on the lease it was started under; ops for a session that
-- another process runs (an approval answered from `auger serve`) wait in session_ops until it takes them.
ALTER TABLE leases ADD COLUMN holder TEXT NOT NULL DEFAULT '';
ALTER TABLE leases ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
CREATE TABLE session_ops (
    id INTEGER PRIMARY KEY AUTOINCREMENT, session_id TEXT NOT NULL, op TEXT NOT NULL, created REAL NOT NULL);
CREATE INDEX session_ops_by_session ON session_ops (session_id, id);
