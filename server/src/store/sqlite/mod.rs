//! SQLite, the embedded default: one replica, in-process, one file.
//!
//! SQLite lets one transaction write at a time: every writing transaction begins
//! `IMMEDIATE`, taking the database's write lock at once rather than failing when it
//! upgrades a read. Statements run a row at a time, prepared once per connection: there
//! is no network round trip to save.

#[path = "../sql/claims.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod claims;
#[path = "../sql/delete.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod delete;
#[path = "../sql/epoch.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod epoch;
#[path = "../sql/read.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod read;
#[path = "../sql/transaction.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both databases")]
mod transaction;
mod write;

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use sqlx::SqlitePool;
use sqlx::pool::PoolConnection;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::columns::claim_columns;
use super::dialect::{ACQUIRE_TIMEOUT, Dialect};
use super::error::{StoreError, StoreResult};

/// The shared SQL of `sql/` runs on this.
type This = Sqlite;

#[derive(Debug)]
pub(super) struct Sqlite {
    pool: SqlitePool,
    options: SqliteConnectOptions,
    file: Arc<DbFile>,
    /// The writer's connection and when it was last used (see `sql/transaction.rs`).
    kept: Option<(PoolConnection<sqlx::Sqlite>, Instant)>,
}

impl Dialect for Sqlite {
    type Driver = sqlx::Sqlite;
    /// Takes the write lock at once.
    const BEGIN_WRITE: &'static str = "BEGIN IMMEDIATE";
    /// The write lock is the head's.
    const BEGIN_WRITER: &'static str = Self::BEGIN_WRITE;
    /// A snapshot: in WAL mode, writers never wait for it.
    const BEGIN_READ: &'static str = "BEGIN";
    const NOW: &'static str = "SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)";
    /// A file copied back tells nothing of it: a restore asks for a new epoch itself
    /// (`--new-epoch`).
    const IDENTITY: &'static str = "SELECT ''";
    /// `BEGIN_WRITE` already holds the database's write lock.
    const SELECT_CLAIM_LOCKED: &'static str = concat!(
        "SELECT ",
        claim_columns!(),
        " FROM cron_claims WHERE cron_workflow_uid = $1 AND scheduled_time = $2"
    );
    // A number is text as Postgres' `->>` gives it.
    const EXIT_CODE: &'static str = "CAST(json_extract(outputs, '$.exitCode') AS TEXT)";

    /// SQLite goes on writing to a file deleted or replaced under it, and what it then
    /// acknowledges is gone with the next restart: a write or a probe finds it out first,
    /// with a stat (about a microsecond), and the server answers `503` until the file is
    /// put back.
    fn in_place(&self) -> StoreResult<()> {
        let file = &self.file;
        match file_id(&file.path) {
            Ok(id) if id == file.id => Ok(()),
            _ => Err(StoreError::FileMoved(file.path.display().to_string())),
        }
    }
}

/// The database file as the server opened it.
#[derive(Debug)]
struct DbFile {
    path: PathBuf,
    /// Device and inode.
    id: (u64, u64),
}

impl DbFile {
    fn open(path: &str) -> StoreResult<Self> {
        let path = PathBuf::from(path);
        let id = file_id(&path).map_err(|error| StoreError::Database(sqlx::Error::Io(error)))?;
        Ok(DbFile { path, id })
    }
}

fn file_id(path: &Path) -> std::io::Result<(u64, u64)> {
    let metadata = std::fs::metadata(path)?;
    Ok((metadata.dev(), metadata.ino()))
}

/// Creates the database file, if there is none, readable and writable by its owner only:
/// SQLite gives its `-wal`, `-shm` and journal files the database file's permissions.
fn create_private(path: &str) -> StoreResult<()> {
    let created = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path);
    match created {
        Err(error) if error.kind() != std::io::ErrorKind::AlreadyExists => {
            Err(StoreError::Database(sqlx::Error::Io(error)))
        }
        _ => Ok(()),
    }
}

async fn pool(options: &SqliteConnectOptions, max_connections: u32) -> StoreResult<SqlitePool> {
    Ok(SqlitePoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(ACQUIRE_TIMEOUT)
        .connect_with(options.clone())
        .await?)
}

impl Sqlite {
    /// Opens the file at `path` (created if missing) and applies the migrations.
    pub(super) async fn connect(path: &str, max_connections: u32) -> StoreResult<Self> {
        let file_error = |error: StoreError| StoreError::File {
            path: path.to_owned(),
            detail: match error {
                StoreError::Database(sqlx::Error::Io(io)) => io.to_string(),
                StoreError::Database(error) => error.to_string(),
                other => other.to_string(),
            },
        };
        create_private(path).map_err(file_error)?;
        // WAL lets readers go on beside the one writer; FULL makes every commit durable
        // before the client hears of it; writers queue for up to 10 s.
        let options = SqliteConnectOptions::new()
            .filename(path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(Duration::from_secs(10));
        let db = Sqlite {
            pool: pool(&options, max_connections).await.map_err(file_error)?,
            options,
            file: Arc::new(DbFile::open(path).map_err(file_error)?),
            kept: None,
        };
        let mut migrator = sqlx::migrate!("../migrations/sqlite");
        // Migrations keep what an older release reads (docs/operations.md, "Rules for a new
        // migration"), so an older release (a rollback) runs on a newer schema.
        migrator.set_ignore_missing(true);
        migrator.run(&db.pool).await?;
        Ok(db)
    }

    /// The same database over a pool of one connection of its own, opened where the
    /// future runs: on the runtime that will use it (the writer's).
    pub(super) fn for_writer(&self) -> impl Future<Output = StoreResult<Self>> + Send + 'static {
        let options = self.options.clone();
        let file = Arc::clone(&self.file);
        async move {
            Ok(Sqlite {
                pool: pool(&options, 1).await?,
                options,
                file,
                kept: None,
            })
        }
    }
}
