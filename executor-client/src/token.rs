//! Where the bearer token comes from. A file is re-read before every attempt, because the
//! kubelet rotates projected service-account tokens in place.

use std::path::PathBuf;

use argo_results_proto::token::TokenClaims;

use crate::ClientError;

#[derive(Debug, Clone, Default)]
pub enum TokenSource {
    #[default]
    None,
    Value(String),
    File(PathBuf),
}

impl TokenSource {
    /// The token to send now.
    pub fn current(&self) -> Result<Option<String>, ClientError> {
        match self {
            TokenSource::None => Ok(None),
            TokenSource::Value(token) => Ok(Some(token.clone())),
            TokenSource::File(path) => std::fs::read_to_string(path)
                .map(|text| Some(text.trim().to_owned()))
                .map_err(|source| ClientError::TokenFile {
                    path: path.clone(),
                    source,
                }),
        }
    }
}

/// The namespace a service-account token names (`kubernetes.io.namespace`), read without
/// verification: only the server's check of the token matters.
pub fn token_namespace(token: &str) -> Option<String> {
    jsonwebtoken::dangerous::insecure_decode_claims::<TokenClaims>(token)
        .ok()?
        .kubernetes
        .map(|k| k.namespace)
}
