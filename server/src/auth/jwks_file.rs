//! `--jwks-file`, re-read when it changes, as the TLS certificate is: keys rotated by
//! rewriting the file (a Secret or ConfigMap volume is updated in place) are trusted
//! without a restart. A file that cannot be read or trusted keeps the keys read before
//! it, with a warning, as a half-written certificate does.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use argo_results_proto::token::TokenClaims;

use super::AuthError;
use super::keys::{KeyError, KeySet, TokenPolicy};

/// How often the file is checked for a change (the certificate's interval).
const RELOAD_CHECK: Duration = Duration::from_secs(5);

/// Why the file's keys could not be read.
#[derive(Debug, thiserror::Error)]
pub enum JwksFileError {
    #[error("{0}")]
    Read(#[from] std::io::Error),
    #[error("{0}")]
    Keys(#[from] KeyError),
}

/// The keys of the file as last read.
#[derive(Debug)]
pub struct JwksFile {
    keys: RwLock<Arc<KeySet>>,
}

fn modified(path: &Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn read(path: &Path, policy: &TokenPolicy) -> Result<KeySet, JwksFileError> {
    Ok(KeySet::from_jwks(&std::fs::read_to_string(path)?, policy)?)
}

impl JwksFile {
    /// Reads the file, and keeps re-reading it as it changes.
    pub fn watch(path: PathBuf, policy: TokenPolicy) -> Result<Arc<Self>, JwksFileError> {
        // Before the read: a change during it is read again at the first check.
        let mut seen = modified(&path);
        let file = Arc::new(JwksFile {
            keys: RwLock::new(Arc::new(read(&path, &policy)?)),
        });
        let watched = Arc::downgrade(&file);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(RELOAD_CHECK).await;
                let Some(file) = watched.upgrade() else {
                    return;
                };
                let now = modified(&path);
                if now == seen {
                    continue;
                }
                seen = now;
                match read(&path, &policy) {
                    Ok(keys) => {
                        *file.keys.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(keys);
                        tracing::info!(path = %path.display(), "--jwks-file re-read");
                    }
                    Err(error) => tracing::warn!(
                        path = %path.display(),
                        %error,
                        "--jwks-file changed but was not re-read: the keys read before stay"
                    ),
                }
            }
        });
        Ok(file)
    }

    pub fn verify(&self, token: &str) -> Result<TokenClaims, AuthError> {
        let keys = Arc::clone(&self.keys.read().unwrap_or_else(|e| e.into_inner()));
        keys.verify(token)
    }
}
