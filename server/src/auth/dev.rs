//! Dev auth of the embedded default: a signing key made in the data directory and trusted
//! by the server, so a newcomer gets working tokens without a cluster.

use std::fs;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use argo_results_proto::token::{DEV_KEY_FILE, DEV_KEY_ID};
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};

use super::keys::{Expectations, KeyError, KeySet};

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

fn pem_to_der(pem: &str) -> Option<Vec<u8>> {
    let body: String = pem
        .lines()
        .filter(|line| !line.starts_with("-----"))
        .collect();
    STANDARD.decode(body.trim()).ok()
}

fn der_to_pem(der: &[u8]) -> String {
    let encoded = STANDARD.encode(der);
    let mut pem = String::from("-----BEGIN PRIVATE KEY-----\n");
    for line in encoded.as_bytes().chunks(64) {
        pem.push_str(&String::from_utf8_lossy(line));
        pem.push('\n');
    }
    pem.push_str("-----END PRIVATE KEY-----\n");
    pem
}

/// Reads `<data_dir>/argo-results-dev-key.pem`, creating it (mode 0600) on first start, and
/// the key set that trusts it.
pub fn load_or_create(
    data_dir: &Path,
    expect: &Expectations,
) -> Result<(DevKey, KeySet), DevKeyError> {
    let path = data_dir.join(DEV_KEY_FILE);
    let io = |source| DevKeyError::Io {
        path: path.clone(),
        source,
    };
    if !path.exists() {
        let document = EcdsaKeyPair::generate_pkcs8(
            &ECDSA_P256_SHA256_FIXED_SIGNING,
            &aws_lc_rs::rand::SystemRandom::new(),
        )
        .map_err(|_| DevKeyError::Generate)?;
        fs::create_dir_all(data_dir).map_err(io)?;
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
            .map_err(io)?;
        file.write_all(der_to_pem(document.as_ref()).as_bytes())
            .map_err(io)?;
    }
    let pem = fs::read_to_string(&path).map_err(io)?;
    let der = pem_to_der(&pem).ok_or_else(|| DevKeyError::Invalid(path.clone()))?;
    let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der)
        .map_err(|_| DevKeyError::Invalid(path.clone()))?;
    // An uncompressed point: 0x04, then x and y of 32 bytes each.
    let point = pair.public_key().as_ref();
    let (x, y) = point[1..].split_at(32);
    let keys = KeySet::from_p256(
        DEV_KEY_ID,
        &URL_SAFE_NO_PAD.encode(x),
        &URL_SAFE_NO_PAD.encode(y),
        expect,
    )?;
    let dev = DevKey {
        path: fs::canonicalize(&path).map_err(io)?,
        pem: pem.into_bytes(),
    };
    Ok((dev, keys))
}
