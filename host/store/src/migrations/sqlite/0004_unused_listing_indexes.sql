-- The listing's filters are optional (`$n IS NULL OR column = $n`), and
-- SQLite's planner then walks `calls_by_end` whatever is asked (EXPLAIN
-- QUERY PLAN, with a tool or a caller bound): these two were never read,
-- yet every recorded outcome wrote a page of each. Postgres plans with the
-- values and keeps them.
DROP INDEX calls_by_tool;
DROP INDEX calls_by_caller;
