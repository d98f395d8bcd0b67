-- Feed history is pruned after --feed-retention: a reader behind pruned_revision gets 410.
ALTER TABLE store_state ADD COLUMN pruned_revision BIGINT NOT NULL DEFAULT 0;
CREATE INDEX changes_by_time ON changes (recorded_at);
-- Results unchanged for --result-retention are removed.
CREATE INDEX results_by_update ON results (updated_at);
