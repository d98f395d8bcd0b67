//! URLs as they may be printed: a database or server URL can carry a password.

/// `url` with its password, if it has one, replaced by `***`: what may be printed.
pub fn redacted(url: &str) -> String {
    // Without a scheme, `user:password@host` may still be there.
    let (scheme, rest) = match url.split_once("://") {
        Some((scheme, rest)) => (format!("{scheme}://"), rest),
        None => (String::new(), url),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return url.to_owned();
    };
    match rest[..at].split_once(':') {
        Some((user, _)) => format!("{scheme}{user}:***{}", &rest[at..]),
        None => url.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::redacted;

    #[test]
    fn a_printed_url_never_carries_its_password() {
        for (url, shown) in [
            ("postgresx://u:SECRET@h/db", "postgresx://u:***@h/db"),
            (
                "postgres://argo:p@ss:w@rd@db:5432/results?sslmode=verify-full",
                "postgres://argo:***@db:5432/results?sslmode=verify-full",
            ),
            ("postgres://argo@db/results", "postgres://argo@db/results"),
            (
                "postgres://db/results?user=a@b",
                "postgres://db/results?user=a@b",
            ),
            (
                "sqlite:///var/lib/a@b:c/results.db",
                "sqlite:///var/lib/a@b:c/results.db",
            ),
            ("u:SECRET@h/db", "u:***@h/db"),
        ] {
            assert_eq!(redacted(url), shown, "{url}");
        }
    }
}
