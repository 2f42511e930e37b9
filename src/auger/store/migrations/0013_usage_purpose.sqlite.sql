-- What each model call was for (`token_usage.purpose`: turn, title, compaction, goal_check…), so a session's
-- cost is told per job as well as per model. Rows written before it were turns' calls, or are counted as one.
ALTER TABLE usage ADD COLUMN purpose TEXT NOT NULL DEFAULT 'turn';
