//! A database restored from a backup (`pg_dump`, then `pg_restore --clean`), under a
//! running server and a controller that follows past the backup: nothing is silently
//! skipped. The reconciler is told (`410 gone`) and lists again, the server numbers the
//! new history in a new epoch, and a node whose row the restore took is settled and lost.
//! Restored while the server was down, the database's identity tells the server at start.

use std::process::Command;

use argo_results_client::FeedOptions;
use argo_results_client::controller::{Decision, PodPhase, Reconciler, WorkflowRef};
use argo_results_client::proto::{ProblemCode, ResultState};
use argo_results_tests::fixtures::{NS, Step, UID, WF, step};
use argo_results_tests::{Backend, TestServer, eventually};
use tempfile::TempDir;

fn etl() -> WorkflowRef {
    WorkflowRef {
        namespace: NS.into(),
        name: WF.into(),
        uid: UID.into(),
    }
}

/// `pg_dump` or `pg_restore` of the server's schema, with `args` after the connection.
fn pg(server: &TestServer, program: &str, args: &[&str]) {
    let schema = server.schema().expect("a Postgres schema");
    let out = Command::new(program)
        .args(["-d", server.database_url(), "-n", schema])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

fn backup(server: &TestServer, dir: &TempDir) -> String {
    let file = dir.path().join("backup.dump");
    let file = file.to_str().expect("a UTF-8 path").to_owned();
    pg(server, "pg_dump", &["-Fc", "-f", &file]);
    file
}

fn restore(server: &TestServer, file: &str) {
    pg(
        server,
        "pg_restore",
        &["--clean", "--single-transaction", file],
    );
}

async fn created(controller: &mut Reconciler, s: &Step) {
    controller
        .pod_created(NS, WF, UID, &s.node_id, &s.pod_name, &s.pod_uid)
        .await
        .expect("expectation");
}

async fn epoch_of(server: &TestServer) -> String {
    server
        .reader()
        .list_results(NS, WF, &Default::default())
        .await
        .expect("list")
        .epoch
        .expect("an epoch")
}

/// A Postgres server and a controller following it: node 1 completed, `pg_dump` taken (in
/// the directory returned, and its file), node 2 completed after it, the controller past
/// both.
async fn backed_up_and_followed() -> (TestServer, TempDir, Reconciler, String) {
    let server = TestServer::builder(Backend::Postgres).start().await;
    let dir = tempfile::tempdir().expect("scratch directory");
    let mut controller = Reconciler::new(server.controller(), 0);
    let (kept, taken) = (step(1), step(2));
    created(&mut controller, &kept).await;
    server.complete(&kept, 1).await;
    let file = backup(&server, &dir);
    created(&mut controller, &taken).await;
    server.complete(&taken, 2).await;
    while controller.follow(0).await.expect("feed") > 0 {}
    (server, dir, controller, file)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_under_a_following_controller_is_noticed() {
    let (server, _dir, mut controller, file) = backed_up_and_followed().await;
    let taken = step(2);
    let before = epoch_of(&server).await;
    println!(
        "pg_dump -Fc after node 1; node 2 completed after it; the controller followed both \
         in epoch {before}"
    );
    assert_eq!(
        controller
            .result(UID, &taken.node_id)
            .map(|result| result.state),
        Some(ResultState::Completed)
    );

    restore(&server, &file);
    println!("pg_restore --clean --single-transaction under the running server");
    // The head is behind the controller: told, it lists again.
    eventually(
        "the restored store answers",
        std::time::Duration::from_secs(30),
        async || controller.follow(0).await.ok(),
    )
    .await;
    assert!(
        controller.result(UID, &taken.node_id).is_none(),
        "the restore took the second node's row"
    );
    // A write numbers revisions again: the server begins a new epoch first.
    let third = step(3);
    created(&mut controller, &third).await;
    let after = epoch_of(&server).await;
    assert_ne!(after, before, "{}", server.log());
    assert!(server.log().contains("the database's head went back"));
    let stale = server
        .reader()
        .feed(&FeedOptions {
            since: 0,
            epoch: Some(before),
            ..Default::default()
        })
        .await
        .expect_err("a position of the old history");
    assert_eq!(stale.code(), Some(ProblemCode::Gone));
    println!(
        "the server began epoch {after} (log: \"the database's head went back\"); a read of \
         the old epoch answers {stale}"
    );
    while controller.follow(0).await.expect("feed") > 0 {}
    let listed = server
        .reader()
        .list_results(NS, WF, &Default::default())
        .await
        .expect("list");
    for result in &listed.items {
        assert_eq!(
            controller.result(UID, &result.node_id),
            Some(result),
            "what the controller knows is what the store holds"
        );
    }
    assert_eq!(listed.items.len(), 2);
    println!(
        "the controller listed again: it knows the {} results the store holds, and node 2 \
         no longer",
        listed.items.len()
    );
    // The second node's pod ended long ago: settled, it is lost, not waited for.
    match controller
        .settle(&etl(), &taken.node_id, PodPhase::Succeeded)
        .await
        .expect("settle")
    {
        Decision::Lost { reason } => {
            assert!(reason.contains("no result is stored"), "{reason}");
            println!("node 2's pod ended: settled, the node is lost, not waited for: {reason}");
        }
        other => panic!("expected the node lost, got {other:?}"),
    }
}

/// A restore whose new history passes the controller's position before it reads again:
/// only the epoch tells it its position is of the old history. Its feed read names the
/// epoch it holds, is answered `410 gone`, and it lists again; a read without the epoch
/// would be answered the new history after its position, and it would never know the
/// results written in between (a mutant of `Reconciler::follow` that drops the epoch
/// passed every other test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_whose_new_history_passes_the_controller_is_noticed_by_its_epoch() {
    let (server, _dir, mut controller, file) = backed_up_and_followed().await;
    let taken = step(2);
    let position = server.count("SELECT MAX(revision) FROM changes").await;

    restore(&server, &file);
    // Pods go on reporting before the controller reads again: the new history's head
    // passes the position the controller holds.
    let mut written = Vec::new();
    for i in 3..=6 {
        let s = step(i);
        server.register(&s).await;
        server.complete(&s, i).await;
        written.push(s);
        if server.count("SELECT MAX(revision) FROM changes").await > position {
            break;
        }
    }
    let head = server.count("SELECT MAX(revision) FROM changes").await;
    assert!(head > position, "the new head {head} is past {position}");
    while controller.follow(0).await.expect("feed") > 0 {}
    let listed = server
        .reader()
        .list_results(NS, WF, &Default::default())
        .await
        .expect("list");
    println!(
        "restored behind position {position}; {} nodes written since, head {head}; the \
         controller knows {} of the {} results stored",
        written.len(),
        listed
            .items
            .iter()
            .filter(|result| controller.result(UID, &result.node_id) == Some(result))
            .count(),
        listed.items.len()
    );
    for result in &listed.items {
        assert_eq!(
            controller.result(UID, &result.node_id),
            Some(result),
            "what the controller knows is what the store holds"
        );
    }
    assert!(controller.result(UID, &taken.node_id).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_restored_while_the_server_was_down_starts_a_new_epoch() {
    let mut server = TestServer::builder(Backend::Postgres).start().await;
    let dir = tempfile::tempdir().expect("scratch directory");
    server.register(&step(1)).await;
    let file = backup(&server, &dir);
    server.register(&step(2)).await;
    let before = epoch_of(&server).await;
    server.kill().await;
    restore(&server, &file);
    let server = server.crash_and_restart().await;
    let after = epoch_of(&server).await;
    assert_ne!(
        after, before,
        "the restored tables are not the ones the epoch was recorded in"
    );
    let gone = server
        .reader()
        .feed(&FeedOptions {
            since: 2,
            epoch: Some(before),
            ..Default::default()
        })
        .await
        .expect_err("410");
    let problem = gone.problem().expect("a problem");
    assert_eq!(problem.code, ProblemCode::Gone);
    assert_eq!(
        (problem.revision, problem.epoch.clone()),
        (Some(1), Some(after))
    );
}
