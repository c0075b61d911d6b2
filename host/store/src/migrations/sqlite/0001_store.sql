-- Calls by their identity: claimed while they run, then their outcome,
-- written once (R38).
CREATE TABLE calls (
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    agent TEXT NOT NULL,
    tool TEXT NOT NULL,
    state TEXT NOT NULL,
    owner TEXT NOT NULL,
    lease_until INTEGER NOT NULL,
    started_at INTEGER NOT NULL,
    ended_at INTEGER,
    status TEXT,
    settlement TEXT,
    PRIMARY KEY (session_id, message_id, call_id)
);
CREATE INDEX calls_by_end ON calls (ended_at);
CREATE INDEX calls_by_tool ON calls (tool, ended_at);

-- Progress and audited requests, oldest first.
CREATE TABLE events (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    at INTEGER NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX events_by_call ON events (session_id, message_id, call_id);

-- Retained outputs, readable by the session that produced them, in chunks.
CREATE TABLE outputs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    bytes INTEGER NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE INDEX outputs_by_age ON outputs (created_at);
CREATE TABLE output_chunks (
    id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    data BLOB NOT NULL,
    PRIMARY KEY (id, seq)
);

-- "Always" answers, per session and plugin (R29).
CREATE TABLE answers (
    scope TEXT NOT NULL,
    action TEXT NOT NULL,
    pattern TEXT NOT NULL,
    PRIMARY KEY (scope, action, pattern)
);
