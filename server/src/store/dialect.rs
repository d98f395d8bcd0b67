//! What the SQL both databases share needs of each. A file of its own so that the two
//! databases' modules, which implement it, and `db.rs`, which holds them, import each
//! other in no circle.

use super::error::StoreResult;

/// What the SQL both databases share needs of each.
///
/// The files of `store/sql/` are compiled into each database's module (`postgres/`,
/// `sqlite/`) as inherent methods of its type, and see there exactly:
///
/// - `This`, the database's type, which implements `Dialect` and has the fields `pool`
///   (the connections requests use) and `kept` (the writer's connection, kept between
///   batches; only the writer's own copy of the database holds one);
/// - `write`, whose `WriteTransaction::load` and `WriteTransaction::store` read and store
///   a batch's rows each in the database's own way (`postgres/write.rs`,
///   `sqlite/write.rs`).
///
/// The rest of the SQL text is shared, beside the code that runs it.
pub(super) trait Dialect {
    /// The sqlx driver.
    type Driver: sqlx::Database;
    /// Begins a writing transaction.
    const BEGIN_WRITE: &'static str;
    /// Begins the writer's transaction with the head already locked, in the same round
    /// trip (see `sql/transaction.rs`).
    const BEGIN_WRITER: &'static str;
    /// Begins a read-only snapshot that writers never wait for.
    const BEGIN_READ: &'static str;
    /// The database's clock in Unix milliseconds.
    const NOW: &'static str;
    /// The database as it is now, recorded with the store's epoch (see `sql/epoch.rs`).
    const IDENTITY: &'static str;
    /// A tick's claim, its row locked until the transaction ends.
    const SELECT_CLAIM_LOCKED: &'static str;
    /// A result's `outputs.exitCode` as text (`NULL` when absent), in SQL.
    const EXIT_CODE: &'static str;

    /// Whether the database is still the one the server opened.
    fn in_place(&self) -> StoreResult<()>;
}

/// A connection to the database `D`.
pub(super) type ConnectionOf<D> = <<D as Dialect>::Driver as sqlx::Database>::Connection;

/// How long a request may wait for a database connection before it is answered
/// `503 unavailable`: an outage or an exhausted pool is reported within 5 s, never queued.
pub(super) const ACQUIRE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);
