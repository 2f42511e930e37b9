-- Read-only links to one session (`auger share`): the token is kept only as its SHA-256, each link has an
-- expiry, and a revoked one stays, marked, so `auger share list` shows what was given out.
CREATE TABLE shares (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    token_hash TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    created_by TEXT NOT NULL DEFAULT '',
    expires REAL NOT NULL,
    revoked REAL);
CREATE INDEX shares_by_session ON shares (session_id, created);
