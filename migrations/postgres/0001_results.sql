-- The revision counter. Every writing transaction locks this row first, so revisions are
-- assigned and committed in the same order and the feed can never skip a late commit.
CREATE TABLE store_state (
    id       BIGINT PRIMARY KEY CHECK (id = 1),
    revision BIGINT NOT NULL
);
INSERT INTO store_state (id, revision) VALUES (1, 0);

-- One row per (namespace, workflow UID, node ID): the current state of a node's result.
-- Times are Unix milliseconds; outputs are the exact JSON text received (not jsonb, which
-- would reorder keys and refuse \u0000). node_id sorts bytewise, as on SQLite.
CREATE TABLE results (
    namespace        TEXT NOT NULL,
    workflow_uid     TEXT NOT NULL,
    node_id          TEXT COLLATE "C" NOT NULL,
    workflow         TEXT NOT NULL,
    pod_name         TEXT,
    pod_uid          TEXT,
    instance_id      TEXT,
    state            TEXT NOT NULL,
    phase            TEXT,
    message          TEXT,
    progress         TEXT,
    outputs          TEXT,
    sequence         BIGINT,
    revision         BIGINT NOT NULL,
    created_revision BIGINT NOT NULL,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    completed_at     BIGINT,
    abandon_reason   TEXT,
    PRIMARY KEY (namespace, workflow_uid, node_id)
);
-- Reads by workflow name pick the newest incarnation (highest created_revision).
CREATE INDEX results_by_name ON results (namespace, workflow, created_revision);

-- The change feed: each change as served, in revision order. Deletions stay as tombstones.
CREATE TABLE changes (
    revision    BIGINT PRIMARY KEY,
    namespace   TEXT NOT NULL,
    item        TEXT NOT NULL,
    recorded_at BIGINT NOT NULL
);
CREATE INDEX changes_by_namespace ON changes (namespace, revision);

-- Cron run claims: the primary key makes a tick claimable exactly once.
CREATE TABLE cron_claims (
    cron_workflow_uid TEXT NOT NULL,
    scheduled_time    BIGINT NOT NULL,
    namespace         TEXT NOT NULL,
    cron_workflow     TEXT NOT NULL,
    workflow_name     TEXT NOT NULL,
    claimed_at        BIGINT NOT NULL,
    PRIMARY KEY (cron_workflow_uid, scheduled_time)
);
CREATE INDEX cron_claims_by_name ON cron_claims (namespace, cron_workflow, scheduled_time);
