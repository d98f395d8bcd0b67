-- The store's epoch names the history its revisions count: a feed position read in one
-- epoch means nothing in another. The server sets it at its first start, and a new one
-- when it finds the database restored or replaced: started with --new-epoch, or (on
-- Postgres) when the database's identity (system identifier, timeline, the OID of this
-- table) is not the one recorded here. '' until then.
ALTER TABLE store_state ADD COLUMN epoch TEXT NOT NULL DEFAULT '';
ALTER TABLE store_state ADD COLUMN identity TEXT NOT NULL DEFAULT '';
