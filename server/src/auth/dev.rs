//! Dev auth of the embedded default: a signing key made in the data directory and trusted
//! by the server, so a newcomer gets working tokens without a cluster.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use argo_results_proto::token::{DEV_KEY_FILE, DEV_KEY_ID, es256_public_jwk, generate_es256_key};
use jsonwebtoken::jwk::JwkSet;

use super::keys::{KeyError, KeySet, TokenPolicy};

#[derive(Debug, thiserror::Error)]
pub enum DevKeyError {
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{0}: not an EC P-256 private key in PKCS#8 PEM; delete it to make a new one")]
    Invalid(PathBuf),
    #[error("could not generate a key")]
    Generate,
    #[error(transparent)]
    Key(#[from] KeyError),
}

/// The dev signing key: its file and its PEM text (to mint tokens).
#[derive(Debug)]
pub struct DevKey {
    pub path: PathBuf,
    pub pem: Vec<u8>,
}

/// Reads `<data_dir>/argo-results-dev-key.pem`, creating it (mode 0600) on first start, and
/// the key set that trusts it.
pub fn load_or_create(
    data_dir: &Path,
    policy: &TokenPolicy,
) -> Result<(DevKey, KeySet), DevKeyError> {
    let path = data_dir.join(DEV_KEY_FILE);
    let io = |source| DevKeyError::Io {
        path: path.clone(),
        source,
    };
    if !path.exists() {
        let pem = generate_es256_key().map_err(|_| DevKeyError::Generate)?;
        fs::create_dir_all(data_dir).map_err(io)?;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        file.write_all(pem.as_bytes()).map_err(io)?;
    }
    let pem = fs::read(&path).map_err(io)?;
    let jwk = es256_public_jwk(&pem, DEV_KEY_ID).map_err(|_| DevKeyError::Invalid(path.clone()))?;
    let keys = KeySet::from_jwk_set(&JwkSet { keys: vec![jwk] }, policy)?;
    let dev = DevKey {
        path: fs::canonicalize(&path).map_err(io)?,
        pem,
    };
    Ok((dev, keys))
}
