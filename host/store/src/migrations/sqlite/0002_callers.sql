-- Who made each call and event (R40): `ISSUER#SUBJECT` for an OAuth
-- caller, `token:DIGEST` for a static token, NULL for nobody in particular.
ALTER TABLE calls ADD COLUMN caller TEXT;
CREATE INDEX calls_by_caller ON calls (caller, ended_at);
ALTER TABLE events ADD COLUMN caller TEXT;
