//! What a newcomer needs to talk to the embedded default, printed once it listens: an
//! admin token, a curl line, and how to mint a pod's token.

use std::time::Duration;

use argo_results_proto::token::{self, DEV_ADMIN_SUBJECT, DEV_ISSUER, DEV_KEY_ID, TokenClaims};

use crate::auth::dev::DevKey;
use crate::config::LogFormat;
use crate::console;

/// Lifetime of the admin token printed by the embedded default.
const DEV_ADMIN_TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

/// The CLI as it can be run now: the binary built beside this one (cargo builds both into
/// `target/`, the image holds both), else through cargo from the repository.
fn cli_command() -> String {
    std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.join("argo-results")))
        .filter(|cli| cli.is_file())
        .map_or_else(
            || "cargo run -q -p argo-results-client --".to_owned(),
            |cli| cli.display().to_string(),
        )
}

/// Prints the banner for the server at `url`, whose tokens carry `audience`.
pub fn print(
    format: LogFormat,
    dev: &DevKey,
    audience: &str,
    url: &str,
) -> Result<(), jsonwebtoken::errors::Error> {
    let claims = TokenClaims::user(DEV_ISSUER, audience, DEV_ADMIN_SUBJECT, DEV_ADMIN_TOKEN_TTL);
    let admin = token::mint(&dev.pem, DEV_KEY_ID, &claims)?;
    let key = dev.path.display().to_string();
    let curl = format!("curl -H \"Authorization: Bearer {admin}\" {url}/api/v1/whoami");
    let mint = format!(
        "{} token --key {key} --namespace argo --pod-name my-wf-main-1234 --pod-uid pod-uid-1",
        cli_command()
    );
    let text = format!(
        "dev auth: trusting tokens signed by {key} (loopback only)\n\
         admin token (reader + controller, valid 24h):\n  \
         export ARGO_RESULTS_TOKEN={admin}\n\
         try it:\n  \
         {curl}\n\
         mint a pod token to play the wait container:\n  \
         {mint}"
    );
    let fields = [
        ("key", key.as_str()),
        ("admin_token", admin.as_str()),
        ("try", curl.as_str()),
        ("mint_pod_token", mint.as_str()),
    ];
    console::say(format, &text, &fields);
    Ok(())
}
