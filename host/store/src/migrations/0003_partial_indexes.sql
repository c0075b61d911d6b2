-- Index only recorded outcomes: listings (`toolhost events`) read nothing
-- else, and a claim, which every call writes before it runs, then touches
-- the table and its key alone instead of three more indexes.
DROP INDEX calls_by_end;
DROP INDEX calls_by_tool;
DROP INDEX calls_by_caller;
CREATE INDEX calls_by_end ON calls (ended_at) WHERE state = 'done';
CREATE INDEX calls_by_tool ON calls (tool, ended_at) WHERE state = 'done';
CREATE INDEX calls_by_caller ON calls (caller, ended_at) WHERE state = 'done';
