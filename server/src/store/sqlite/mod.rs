//! SQLite, the embedded default: one replica, in-process, one file.
//!
//! SQLite lets one transaction write at a time: every writing transaction begins
//! `IMMEDIATE`, taking the database's write lock at once rather than failing when it
//! upgrades a read. Statements run a row at a time, prepared once per connection: there
//! is no network round trip to save.

#[path = "../sql/backend_impl.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod backend_impl;
#[path = "../sql/claims.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod claims;
#[path = "../sql/delete.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod delete;
#[path = "../sql/epoch.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod epoch;
#[path = "../sql/read.rs"]
#[allow(clippy::duplicate_mod, reason = "one file, both backends")]
mod read;
mod write;

use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use sqlx::SqlitePool;
use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePoolOptions, SqliteSynchronous};

use super::backend::ACQUIRE_TIMEOUT;
use super::error::{StoreError, StoreResult};
use super::statements::SELECT_CLAIM;

// What the transactions of `sql/` run on here.
type ThisBackend = SqliteBackend;
type Db = sqlx::Sqlite;
type Pool = SqlitePool;
type Connection = sqlx::SqliteConnection;
/// Takes the write lock at once.
const BEGIN_WRITE: &str = "BEGIN IMMEDIATE";
/// A snapshot: in WAL mode, writers never wait for it.
const BEGIN_READ: &str = "BEGIN";
/// The database's clock in Unix milliseconds.
const NOW: &str = "SELECT CAST(ROUND(unixepoch('subsec') * 1000) AS INTEGER)";
/// A file copied back tells nothing of it: a restore asks for a new epoch itself
/// (`--new-epoch`).
const IDENTITY: &str = "SELECT ''";
/// A tick's claim: `BEGIN_WRITE` already holds the database's write lock.
const SELECT_CLAIM_LOCKED: &str = SELECT_CLAIM;

#[derive(Debug, Clone)]
pub(super) struct SqliteBackend {
    pool: SqlitePool,
    options: SqliteConnectOptions,
    file: Arc<DbFile>,
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

/// Whether the database file is still the one the server opened. SQLite goes on writing
/// to a file deleted or replaced under it, and what it then acknowledges is gone with the
/// next restart: a write or a probe finds it out first, with a stat (about a microsecond),
/// and the server answers `503` until the file is put back.
fn in_place(backend: &SqliteBackend) -> StoreResult<()> {
    let file = &backend.file;
    match file_id(&file.path) {
        Ok(id) if id == file.id => Ok(()),
        _ => Err(StoreError::FileMoved(file.path.display().to_string())),
    }
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

impl SqliteBackend {
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
        let backend = SqliteBackend {
            pool: pool(&options, max_connections).await.map_err(file_error)?,
            options,
            file: Arc::new(DbFile::open(path).map_err(file_error)?),
        };
        let mut migrator = sqlx::migrate!("../migrations/sqlite");
        // Migrations only add, so an older release (a rollback) runs on a newer schema.
        migrator.set_ignore_missing(true);
        migrator.run(&backend.pool).await?;
        Ok(backend)
    }
}
