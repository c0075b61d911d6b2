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
    lease_until BIGINT NOT NULL,
    started_at BIGINT NOT NULL,
    ended_at BIGINT,
    status TEXT,
    settlement TEXT,
    PRIMARY KEY (session_id, message_id, call_id)
);
CREATE INDEX calls_by_end ON calls (ended_at);
CREATE INDEX calls_by_tool ON calls (tool, ended_at);

-- Progress and audited requests, oldest first.
CREATE TABLE events (
    seq BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL,
    session_id TEXT NOT NULL,
    message_id TEXT NOT NULL,
    call_id TEXT NOT NULL,
    at BIGINT NOT NULL,
    body TEXT NOT NULL
);
CREATE INDEX events_by_call ON events (session_id, message_id, call_id);

-- Retained outputs, readable by the session that produced them, in chunks.
CREATE TABLE outputs (
    id TEXT PRIMARY KEY,
    session_id TEXT NOT NULL,
    bytes BIGINT NOT NULL,
    created_at BIGINT NOT NULL
);
CREATE INDEX outputs_by_age ON outputs (created_at);
CREATE TABLE output_chunks (
    id TEXT NOT NULL,
    seq BIGINT NOT NULL,
    data BYTEA NOT NULL,
    PRIMARY KEY (id, seq)
);

-- "Always" answers, per session and plugin (R29).
CREATE TABLE answers (
    scope TEXT NOT NULL,
    action TEXT NOT NULL,
    pattern TEXT NOT NULL,
    PRIMARY KEY (scope, action, pattern)
);
