//! Where `report` takes its `sequence` from. Two processes of one pod report the same node
//! (the `main` container of a resource or data template, then `wait`), so the clock alone
//! can hand both the same value; a counter file in the emptyDir that Argo mounts into every
//! container of the pod cannot (`workflow/controller/workflowpod.go`, `podBuilder.build`
//! appends `volumeMountVarArgo` to each container).

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

/// Argo's `var-run-argo` mount (`common.VarRunArgoPath`).
const VAR_RUN_ARGO: &str = "/var/run/argo";
const FILE_NAME: &str = "argo-results-sequence";

/// The counter file to use when none is given: in `dir` (`/var/run/argo`) if it exists.
pub fn default_file(dir: &Path) -> Option<PathBuf> {
    dir.is_dir().then(|| dir.join(FILE_NAME))
}

/// [`default_file`] of Argo's mount.
pub fn argo_default_file() -> Option<PathBuf> {
    default_file(Path::new(VAR_RUN_ARGO))
}

/// Unix microseconds: later processes of one pod get larger values, but two processes
/// may get the same one.
pub fn clock() -> i64 {
    let micros = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_micros();
    i64::try_from(micros).unwrap_or(i64::MAX)
}

/// Takes the next value from the counter file at `path`: under an exclusive lock, the
/// larger of the stored value + 1 and [`clock`], written back before the lock is released,
/// so no two takers ever get the same value and values keep growing with the clock.
pub fn take(path: &Path) -> std::io::Result<i64> {
    let mut file: File = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)?;
    file.lock()?;
    let mut text = String::new();
    file.read_to_string(&mut text)?;
    // An empty file is new; a torn or foreign value counts as 0, and the clock orders.
    let stored: i64 = text.trim().parse().unwrap_or(0);
    let next = stored.saturating_add(1).max(clock());
    let digits = next.to_string();
    file.seek(SeekFrom::Start(0))?;
    file.write_all(digits.as_bytes())?;
    file.set_len(digits.len() as u64)?;
    // Closing the file releases the lock.
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("argo-results-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("scratch dir");
        dir
    }

    #[test]
    fn the_default_file_lives_in_an_existing_directory_only() {
        let dir = scratch("sequence-default");
        assert_eq!(default_file(&dir), Some(dir.join(FILE_NAME)));
        assert_eq!(default_file(&dir.join("absent")), None);
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    #[test]
    fn a_stored_value_ahead_of_the_clock_grows_by_one() {
        let dir = scratch("sequence-ahead");
        let path = dir.join(FILE_NAME);
        let ahead = clock() + 1_000_000_000_000;
        std::fs::write(&path, ahead.to_string()).expect("seed");
        assert_eq!(take(&path).expect("take"), ahead + 1);
        assert_eq!(take(&path).expect("take"), ahead + 2);
        assert_eq!(
            std::fs::read_to_string(&path).expect("read"),
            (ahead + 2).to_string()
        );
        std::fs::write(&path, "not a number").expect("garble");
        assert!(
            take(&path).expect("take") < ahead,
            "counted on from the clock"
        );
        std::fs::remove_dir_all(&dir).expect("clean up");
    }

    /// Each thread opens the file itself, so the lock is contended as between processes
    /// (`flock` locks belong to an open file, not to a process).
    #[test]
    fn concurrent_takers_never_share_a_value() {
        let dir = scratch("sequence-concurrent");
        let path = dir.join(FILE_NAME);
        let ahead = clock() + 1_000_000_000_000;
        std::fs::write(&path, ahead.to_string()).expect("seed");
        let takers: Vec<_> = (0..4)
            .map(|_| {
                let path = path.clone();
                std::thread::spawn(move || {
                    (0..200)
                        .map(|_| take(&path).expect("take"))
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        let mut values: Vec<i64> = takers
            .into_iter()
            .flat_map(|taker| taker.join().expect("taker"))
            .collect();
        values.sort_unstable();
        let expected: Vec<i64> = (1..=800).map(|i| ahead + i).collect();
        assert_eq!(values, expected, "every value once, none skipped");
        std::fs::remove_dir_all(&dir).expect("clean up");
    }
}
