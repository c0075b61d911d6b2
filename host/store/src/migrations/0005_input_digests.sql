-- What each call was besides its ids (R38): a digest of its input, so a
-- claim on ids recorded for another call (another tool, other arguments or
-- another caller) is refused as a conflict, never replayed. NULL on rows
-- recorded before it: those are compared by caller and tool only.
ALTER TABLE calls ADD COLUMN input_digest TEXT;
