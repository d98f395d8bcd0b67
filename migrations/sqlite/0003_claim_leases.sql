-- Claims become leases (API section 6): a tick is `claimed` until its holder settles it as
-- `submitted` or `skipped`; a claim still `claimed` when its lease expires may be taken
-- over under the same workflow name. Times are the database's clock, in Unix milliseconds.
--
-- Every new column has a default, so that a release from before leases (a rollback, or an
-- old replica during a rolling upgrade) still inserts claims: those were final when taken,
-- so they read as `submitted`. Claims already stored were final too and are settled so.
ALTER TABLE cron_claims ADD COLUMN state TEXT NOT NULL DEFAULT 'submitted';
-- The holder's proof; '' for claims from before leases, which nobody can settle again.
ALTER TABLE cron_claims ADD COLUMN claim_id TEXT NOT NULL DEFAULT '';
ALTER TABLE cron_claims ADD COLUMN lease_expires_at BIGINT NOT NULL DEFAULT 0;
-- How many times the tick was taken over from a holder whose lease expired.
ALTER TABLE cron_claims ADD COLUMN takeovers BIGINT NOT NULL DEFAULT 0;
ALTER TABLE cron_claims ADD COLUMN settled_at BIGINT;
ALTER TABLE cron_claims ADD COLUMN workflow_uid TEXT;
ALTER TABLE cron_claims ADD COLUMN reason TEXT;
UPDATE cron_claims SET lease_expires_at = claimed_at, settled_at = claimed_at;

-- Pages go newest first, ties (two incarnations of one name) broken by UID.
DROP INDEX cron_claims_by_name;
CREATE INDEX cron_claims_by_name ON cron_claims
    (namespace, cron_workflow, scheduled_time, cron_workflow_uid);
-- Retention finds claims by age (--claim-retention).
CREATE INDEX cron_claims_by_age ON cron_claims (claimed_at);
