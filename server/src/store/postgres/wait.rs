//! Waiting for a database that is not up yet: applied together with its database (a
//! CloudNativePG cluster, say), the server would otherwise exit and crash-loop until it
//! is. Every attempt is logged with the host and port, never the password, and the wait
//! is bounded (`--database-wait`), so a database that never comes is an error.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{ConnectOptions, Connection};
use tokio::time::Instant;

use crate::store::error::{FailureKind, StoreError, StoreResult};

/// One attempt's time to connect: a host that drops packets does not eat the whole wait.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(5);
const FIRST_DELAY: Duration = Duration::from_millis(500);
const MAX_DELAY: Duration = Duration::from_secs(5);

/// `host:port` (or the socket) and database, for logs and errors.
pub(super) fn target(options: &PgConnectOptions) -> String {
    let place = match options.get_socket() {
        Some(socket) => socket.display().to_string(),
        None => format!("{}:{}", options.get_host(), options.get_port()),
    };
    match options.get_database() {
        Some(database) => format!("{place}/{database}"),
        None => place,
    }
}

/// A TLS failure: the handshake's (rustls reports it as invalid data) or the setup's.
fn refused_by_tls(error: &sqlx::Error) -> bool {
    match error {
        sqlx::Error::Tls(_) => true,
        sqlx::Error::Io(io) => io.kind() == std::io::ErrorKind::InvalidData,
        _ => false,
    }
}

/// Returns once the database takes a connection; fails at once on an error waiting
/// cannot cure (a wrong password, a bad certificate), and after `wait` on the others.
pub(super) async fn until_reachable(options: &PgConnectOptions, wait: Duration) -> StoreResult<()> {
    let started = Instant::now();
    let mut delay = FIRST_DELAY;
    let mut attempt: u32 = 1;
    loop {
        let error = match tokio::time::timeout(ATTEMPT_TIMEOUT, options.connect()).await {
            Ok(Ok(connection)) => {
                let _ = PgConnection::close(connection).await;
                if attempt > 1 {
                    tracing::info!(database = %target(options), attempt, "the database is up");
                }
                return Ok(());
            }
            // A certificate that does not verify comes as an I/O error: waiting cannot
            // cure it.
            Ok(Err(error)) if refused_by_tls(&error) => return Err(error.into()),
            Ok(Err(error)) => StoreError::from(error),
            Err(_) => StoreError::TimedOut,
        };
        if error.failure() != Some(FailureKind::Unavailable) {
            return Err(error);
        }
        let waited = started.elapsed();
        if waited >= wait {
            return Err(StoreError::Unreachable {
                target: target(options),
                waited: wait,
                last: error.to_string(),
            });
        }
        let pause = delay.min(wait - waited);
        tracing::warn!(
            database = %target(options),
            attempt,
            %error,
            retry_in_ms = pause.as_millis() as u64,
            gives_up_in_s = (wait - waited).as_secs(),
            "waiting for the database"
        );
        tokio::time::sleep(pause).await;
        delay = (delay * 2).min(MAX_DELAY);
        attempt += 1;
    }
}
