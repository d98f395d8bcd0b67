//! A Postgres of a test's own, on its own port, that the test may stop and start again
//! (Debian's server binaries; run as the `postgres` user when the test runs as root,
//! since Postgres refuses to run as root).

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Command;

use tempfile::TempDir;

use crate::server::{Auth, Backend, TestServer, free_port};
use crate::tls::ServerCert;

#[derive(Debug)]
pub struct PrivatePostgres {
    bin: PathBuf,
    data: PathBuf,
    port: u16,
    dir: TempDir,
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|out| String::from_utf8_lossy(&out.stdout).trim() == "0")
}

impl PrivatePostgres {
    /// Runs one of Postgres' programs; what it prints is shown only if it fails.
    fn run(&self, program: &str, args: &[&str]) {
        let program = self.bin.join(program);
        let out = if is_root() {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&program)
                .args(args)
                .output()
        } else {
            Command::new(&program).args(args).output()
        }
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
        assert!(
            out.status.success(),
            "{} {args:?} failed:\n{}{}",
            program.display(),
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Creates a cluster in a scratch directory and starts it.
    pub fn start() -> Self {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .expect("Debian's PostgreSQL server in /usr/lib/postgresql")
            .filter_map(|entry| entry.ok().map(|e| e.path().join("bin")))
            .filter(|bin| bin.join("pg_ctl").exists())
            .max()
            .expect("a PostgreSQL version with pg_ctl");
        let dir = tempfile::tempdir().expect("scratch directory");
        let data = dir.path().join("data");
        if is_root() {
            let status = Command::new("chown")
                .args(["postgres:postgres"])
                .arg(dir.path())
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "chown the scratch directory"
            );
        }
        let postgres = PrivatePostgres {
            bin,
            data,
            port: free_port(),
            dir,
        };
        let data = postgres.data.to_string_lossy().into_owned();
        postgres.run(
            "initdb",
            &[
                "-D",
                &data,
                "-A",
                "trust",
                "-U",
                "postgres",
                "--no-sync",
                "-E",
                "UTF8",
            ],
        );
        postgres.resume();
        postgres
    }

    /// A cluster that takes TLS connections only, with `cert` (see [`crate::tls`]).
    pub fn start_with_tls(cert: &ServerCert) -> Self {
        let postgres = Self::start();
        postgres.stop();
        let file = |name: &str, text: &str| {
            let path = postgres.data.join(name);
            std::fs::write(&path, text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).expect("chmod");
            if is_root() {
                let status = Command::new("chown")
                    .arg("postgres:postgres")
                    .arg(&path)
                    .status();
                assert!(status.is_ok_and(|s| s.success()), "chown {name}");
            }
        };
        file("server.crt", &cert.cert_pem);
        file("server.key", &cert.key_pem);
        // Appended settings win over initdb's.
        let conf = postgres.data.join("postgresql.conf");
        let mut text = std::fs::read_to_string(&conf).expect("postgresql.conf");
        text.push_str("\nssl = on\nssl_cert_file = 'server.crt'\nssl_key_file = 'server.key'\n");
        std::fs::write(&conf, text).expect("postgresql.conf");
        file(
            "pg_hba.conf",
            "local all all trust\nhostssl all all 127.0.0.1/32 trust\n\
             hostnossl all all 127.0.0.1/32 reject\n",
        );
        postgres.resume();
        postgres
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// A server on this database, without authentication (`--auth none`), so that a test
    /// of the database's absence needs no tokens.
    pub async fn serve(&self) -> TestServer {
        TestServer::builder(Backend::Postgres)
            .database_url(&self.url())
            .auth(Auth::None)
            .start()
            .await
    }

    /// Starts the server again on the same data and port.
    pub fn resume(&self) {
        let data = self.data.to_string_lossy().into_owned();
        let options = format!(
            "-p {} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off",
            self.port
        );
        // Its log in a file beside the data, not on the test's terminal.
        let log = self
            .dir
            .path()
            .join("postgres.log")
            .to_string_lossy()
            .into_owned();
        self.run(
            "pg_ctl",
            &["-D", &data, "-l", &log, "-o", &options, "-w", "-s", "start"],
        );
    }

    /// Stops the server at once, as an outage would.
    pub fn stop(&self) {
        let data = self.data.to_string_lossy().into_owned();
        self.run(
            "pg_ctl",
            &["-D", &data, "-m", "immediate", "-w", "-s", "stop"],
        );
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        let data = self.data.to_string_lossy().into_owned();
        let pg_ctl = self.bin.join("pg_ctl");
        let mut command = if is_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(pg_ctl);
            c
        } else {
            Command::new(pg_ctl)
        };
        let _ = command
            .args(["-D", &data, "-m", "immediate", "-s", "stop"])
            .status();
    }
}
