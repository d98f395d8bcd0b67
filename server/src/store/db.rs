//! The two databases behind the one store, and the one dispatch between them.

use super::postgres::Postgres;
use super::sqlite::Sqlite;

/// The database the store runs on.
#[derive(Debug)]
pub(super) enum Db {
    Postgres(Postgres),
    Sqlite(Sqlite),
}

impl From<Postgres> for Db {
    fn from(db: Postgres) -> Self {
        Db::Postgres(db)
    }
}

impl From<Sqlite> for Db {
    fn from(db: Sqlite) -> Self {
        Db::Sqlite(db)
    }
}

/// Runs `$body` with `$db` bound to the database of `$value` (a `Db`, `&Db` or `&mut Db`).
/// The body is compiled once per database, so one text calls each database's own methods:
/// the store's only dispatch.
macro_rules! on_db {
    ($value:expr, |$db:ident| $body:expr) => {
        match $value {
            $crate::store::db::Db::Postgres($db) => $body,
            $crate::store::db::Db::Sqlite($db) => $body,
        }
    };
}
pub(super) use on_db;
