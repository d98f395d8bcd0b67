//! The one way tests wait for something that happens later: asked again and again, within a
//! bound, so that a wait that would hang fails the test and says what never happened.

use std::fmt::Display;
use std::time::Duration;

use tokio::time::Instant;

/// The first pause between two checks; it doubles up to [`LONGEST_PAUSE`], so a quick
/// change is seen quickly and a slow one is not asked for in a busy loop.
const FIRST_PAUSE: Duration = Duration::from_millis(20);
const LONGEST_PAUSE: Duration = Duration::from_millis(500);

/// Runs `check` until it returns `Some`, and returns what it holds; panics with `what` once
/// `bound` has passed without it. `what` is formatted only then, so it may describe the
/// state at that moment (a server's log, counters).
pub async fn eventually<T>(
    what: impl Display,
    bound: Duration,
    mut check: impl AsyncFnMut() -> Option<T>,
) -> T {
    let deadline = Instant::now() + bound;
    let mut pause = FIRST_PAUSE;
    loop {
        if let Some(done) = check().await {
            return done;
        }
        assert!(Instant::now() < deadline, "not within {bound:?}: {what}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(LONGEST_PAUSE);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_what_the_check_holds_once_it_holds() {
        let mut asked = 0;
        let third = eventually("the third check", Duration::from_secs(5), async || {
            asked += 1;
            (asked == 3).then_some(asked)
        })
        .await;
        assert_eq!(third, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "not within 100ms: a check that never holds")]
    async fn fails_saying_what_never_happened_once_the_bound_has_passed() {
        eventually::<()>(
            "a check that never holds",
            Duration::from_millis(100),
            async || None,
        )
        .await;
    }
}
