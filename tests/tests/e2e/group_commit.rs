//! Group commit: writes that share a transaction get exactly the answers each would get
//! alone, and one write that breaks the transaction fails nobody else.

use argo_results_client::proto::ProblemCode;
use argo_results_client::{Answer, ClientError};
use argo_results_proto::NodeResult;
use argo_results_tests::fixtures::{NS, UID, WF, outputs, step};
use argo_results_tests::{Backend, TestServer};

on_both_backends!(
    writes_sharing_a_transaction_get_their_own_outcomes,
    a_write_that_breaks_the_batch_fails_alone,
    large_batches_and_deletions_lose_nothing,
);

/// A long wait gathers every write sent at once into one transaction, even on a busy
/// machine.
const GATHER: &[&str] = &["--batch-wait", "500ms", "--batch-max", "1000"];

/// The value of the sample `name` (with its labels) in a `/metrics` text.
fn metric(text: &str, name: &str) -> u64 {
    text.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .map(|value: f64| value as u64)
        .unwrap_or_else(|| panic!("{name} in:\n{text}"))
}

/// `(transactions, writes)` from `argo_results_store_batch_writes`.
async fn batches(server: &TestServer) -> (u64, u64) {
    let text = server.get("/metrics", None).await.text;
    (
        metric(&text, "argo_results_store_batch_writes_count"),
        metric(&text, "argo_results_store_batch_writes_sum"),
    )
}

type Sent = tokio::task::JoinHandle<Result<Answer<NodeResult>, ClientError>>;

async fn writes_sharing_a_transaction_get_their_own_outcomes(backend: Backend) {
    let server = TestServer::builder(backend).flags(GATHER).start().await;
    // Alone, one after the other: a frozen result, two reporting at sequence 100 (one
    // to refuse a stale report, one to take a newer one: each write below that is
    // refused or accepted touches a row of its own, so the order they arrive in does not
    // matter), and one bound to its first pod.
    let (frozen, reporting, updating, bound) = (step(1), step(2), step(4), step(3));
    let completed = server.complete(&frozen, 1).await.body;
    for s in [&reporting, &updating] {
        server
            .send(s, &s.report(Some(100), false, None))
            .await
            .expect("sequence 100");
    }
    server
        .send(&bound, &bound.report(Some(1), false, None))
        .await
        .expect("first pod");
    let (transactions_before, writes_before) = batches(&server).await;
    let head_before = server.count("SELECT MAX(revision) FROM changes").await;

    let send = |s: &argo_results_tests::fixtures::Step, report| -> Sent {
        let pod = server.pod_of(s);
        let node = s.node_id.clone();
        tokio::spawn(async move { pod.report(NS, WF, &node, &report).await })
    };
    let fresh: Vec<Sent> = (10..30)
        .map(|i| send(&step(i), step(i).report(Some(1), true, Some(&outputs(i)))))
        .collect();
    let replay = send(&frozen, frozen.report(Some(1), true, Some(&outputs(1))));
    let overwrite = send(&frozen, frozen.report(Some(2), true, Some(&outputs(2))));
    let stale = send(&reporting, reporting.report(Some(50), false, None));
    let newer = send(
        &updating,
        updating.report(Some(200), true, Some(&outputs(2))),
    );
    let intruder = bound.restarted();
    let mismatch = send(&intruder, intruder.report(Some(2), true, Some(&outputs(3))));

    for sent in fresh {
        let answer = sent.await.expect("task").expect("a new node");
        assert_eq!(answer.status, 201);
        assert_eq!(answer.body.state.as_str(), "completed");
    }
    let replayed = replay.await.expect("task").expect("replay");
    assert_eq!(replayed.status, 200);
    assert_eq!(
        replayed.body.revision, completed.revision,
        "a replay writes nothing"
    );
    let refused = |sent: Result<Answer<NodeResult>, ClientError>| {
        sent.expect_err("refused").code().expect("a problem")
    };
    assert_eq!(
        refused(overwrite.await.expect("task")),
        ProblemCode::AlreadyCompleted
    );
    assert_eq!(
        refused(stale.await.expect("task")),
        ProblemCode::StaleSequence
    );
    assert_eq!(
        refused(mismatch.await.expect("task")),
        ProblemCode::PodMismatch
    );
    let updated = newer.await.expect("task").expect("sequence 200");
    assert_eq!(updated.status, 200);

    // 21 writes changed a row: 21 changes with consecutive revisions after the old head.
    let revisions: Vec<i64> = {
        let db = server.db().await;
        argo_results_tests::on_db!(&db, |pool| sqlx::query_scalar(
            "SELECT revision FROM changes WHERE revision > $1 ORDER BY revision"
        )
        .bind(head_before)
        .fetch_all(pool)
        .await)
        .expect("changes")
    };
    assert_eq!(
        revisions,
        (head_before + 1..=head_before + 21).collect::<Vec<_>>()
    );
    assert_eq!(
        server
            .count("SELECT COUNT(*) FROM results WHERE state = 'completed'")
            .await,
        22
    );
    // The 25 writes went through fewer transactions than writes: they were gathered.
    let (transactions, writes) = batches(&server).await;
    assert_eq!(writes - writes_before, 25);
    assert!(
        transactions - transactions_before < 25,
        "{} transactions for 25 writes",
        transactions - transactions_before
    );
}

/// A trigger refuses one node's row: the database fails the shared transaction, and the
/// server retries each write alone so that only that node's request fails.
async fn a_write_that_breaks_the_batch_fails_alone(backend: Backend) {
    let server = TestServer::builder(backend).flags(GATHER).start().await;
    let poisoned = step(99);
    let db = server.db().await;
    let trigger = match backend {
        Backend::Postgres => vec![
            format!(
                "CREATE FUNCTION poison() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN \
                 IF NEW.node_id = '{}' THEN RAISE EXCEPTION 'poisoned row'; END IF; \
                 RETURN NEW; END $$",
                poisoned.node_id
            ),
            "CREATE TRIGGER poison BEFORE INSERT ON results FOR EACH ROW \
             EXECUTE FUNCTION poison()"
                .to_owned(),
        ],
        Backend::Sqlite => vec![format!(
            "CREATE TRIGGER poison BEFORE INSERT ON results WHEN NEW.node_id = '{}' \
             BEGIN SELECT RAISE(ABORT, 'poisoned row'); END",
            poisoned.node_id
        )],
    };
    for statement in trigger {
        argo_results_tests::on_db!(&db, |pool| sqlx::query(&statement)
            .execute(pool)
            .await
            .map(drop))
        .expect("trigger");
    }

    let send = |s: argo_results_tests::fixtures::Step, i: u32| -> Sent {
        let pod = server.pod_of(&s);
        let report = s.report(Some(1), true, Some(&outputs(i)));
        tokio::spawn(async move { pod.report(NS, WF, &s.node_id, &report).await })
    };
    let good: Vec<Sent> = (1..=10).map(|i| send(step(i), i)).collect();
    let bad = send(poisoned.clone(), 99);
    for sent in good {
        assert_eq!(sent.await.expect("task").expect("a good row").status, 201);
    }
    let error = bad.await.expect("task").expect_err("the poisoned row");
    assert_eq!(error.code(), Some(ProblemCode::Internal), "{error}");

    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 10);
    assert_eq!(server.count("SELECT COUNT(*) FROM changes").await, 10);
    assert_eq!(
        server
            .count(&format!(
                "SELECT COUNT(*) FROM results WHERE node_id = '{}'",
                poisoned.node_id
            ))
            .await,
        0
    );
    let metrics = server.get("/metrics", None).await.text;
    assert!(
        metrics.contains("argo_results_store_errors_total{kind=\"database\"}"),
        "{metrics}"
    );
}

/// Transactions of more writes than the writer keeps a statement prepared for (64), and a
/// deletion recording more tombstones than one statement carries (1,000): every row and
/// every change lands, each change with a revision of its own.
async fn large_batches_and_deletions_lose_nothing(backend: Backend) {
    const NODES: u32 = 1_100;
    let all = i64::from(NODES);
    const AT_ONCE: usize = 200;
    let server = TestServer::builder(backend).flags(GATHER).start().await;
    let controller = server.controller();
    let nodes: Vec<u32> = (0..NODES).collect();
    for wave in nodes.chunks(AT_ONCE) {
        let sent: Vec<_> = wave
            .iter()
            .map(|&i| {
                let (controller, s) = (controller.clone(), step(i));
                tokio::spawn(async move {
                    controller
                        .expect(NS, WF, &s.node_id, &s.expectation())
                        .await
                })
            })
            .collect();
        for answer in sent {
            assert_eq!(
                answer.await.expect("task").expect("expectation").status,
                201
            );
        }
    }
    let text = server.get("/metrics", None).await.text;
    let (transactions, writes) = batches(&server).await;
    let up_to_64 = metric(&text, "argo_results_store_batch_writes_bucket{le=\"64.0\"}");
    assert!(transactions > up_to_64, "no batch above 64 writes:\n{text}");
    // A batch that failed is counted, then each of its writes again, alone.
    assert_eq!(
        writes,
        u64::from(NODES),
        "a batch was retried:\n{}",
        server.log()
    );
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, all);
    assert_eq!(server.count("SELECT COUNT(*) FROM changes").await, all);
    let before = server.count("SELECT MAX(revision) FROM changes").await;

    let deleted = controller
        .delete_results(NS, WF, UID)
        .await
        .expect("delete");
    assert_eq!(deleted.deleted, u64::from(NODES));
    assert_eq!(server.count("SELECT COUNT(*) FROM results").await, 0);
    let tombstones = format!(
        "SELECT COUNT(*) FROM changes WHERE revision > {before} \
         AND item LIKE '%\"type\":\"deleted\"%'"
    );
    assert_eq!(server.count(&tombstones).await, all);
    assert_eq!(
        server
            .count(&format!(
                "SELECT MAX(revision) - MIN(revision) + 1 FROM changes WHERE revision > {before}"
            ))
            .await,
        all
    );
}
