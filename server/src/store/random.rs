//! Random identifiers, from the one crypto provider.

use super::error::{StoreError, StoreResult};

/// A random UUID (version 4), like the UIDs Kubernetes hands out: `claimId`s and epochs.
pub(super) fn uuid() -> StoreResult<String> {
    let mut bytes = [0u8; 16];
    aws_lc_rs::rand::fill(&mut bytes).map_err(|_| StoreError::Random)?;
    bytes[6] = (bytes[6] & 0x0f) | 0x40;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!(
        "{}-{}-{}-{}-{}",
        &hex[..8],
        &hex[8..12],
        &hex[12..16],
        &hex[16..20],
        &hex[20..]
    ))
}
