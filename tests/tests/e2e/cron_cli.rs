//! `argo-results runs` against the real server: listing a cron workflow's ticks page by
//! page, and claiming and settling them by hand as a controller would.

use std::process::Output;
use std::time::Duration;

use argo_results_client::proto::{Claim, ClaimList, ClaimState};
use argo_results_tests::server::binary;
use argo_results_tests::tokens::{self, CONTROLLER};
use argo_results_tests::{Backend, TestServer, eventually};
use tokio::process::Command;

on_both_backends!(
    runs_claims_settles_and_lists_page_by_page,
    an_unsettled_cli_claim_is_taken_over_after_its_lease_and_its_holder_refused,
    runs_takes_the_old_namespace_slash_name_form_with_a_note,
);

const TICK: [&str; 4] = [
    "--cron-workflow-uid",
    "8e2a6f0c-cron",
    "--scheduled-time",
    "2026-11-29T17:00:00Z",
];

/// `argo-results ARGS` as the controller, bounded so that a hang fails the test.
async fn cli(server: &TestServer, args: &[&str]) -> Output {
    let mut command = Command::new(binary("argo-results"));
    command
        .env_clear()
        .env("ARGO_RESULTS_URL", server.url())
        .env("ARGO_RESULTS_TOKEN", tokens::user_token(CONTROLLER))
        .args(args)
        .kill_on_drop(true);
    tokio::time::timeout(Duration::from_secs(60), command.output())
        .await
        .expect("the command finished")
        .expect("run argo-results")
}

fn stdout(output: &Output) -> String {
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

fn json<T: serde::de::DeserializeOwned>(output: &Output) -> T {
    assert!(output.status.success(), "{}", stderr(output));
    serde_json::from_slice(&output.stdout).expect("JSON on stdout")
}

/// `runs claim` of [`TICK`] with more flags.
async fn claim(server: &TestServer, more: &[&str]) -> Output {
    cli(
        server,
        &[&["runs", "claim", "nightly", "-n", "argo"], &TICK[..], more].concat(),
    )
    .await
}

/// `runs settle` of [`TICK`] by the holder of `claim_id` with more flags.
async fn settle(server: &TestServer, claim_id: &str, more: &[&str]) -> Output {
    let args = [
        &["runs", "settle", "nightly", "-n", "argo"],
        &TICK[..],
        &["--claim-id", claim_id],
        more,
    ];
    cli(server, &args.concat()).await
}

async fn runs_claims_settles_and_lists_page_by_page(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let holder: Claim = json(&claim(&server, &["-o", "json"]).await);
    assert_eq!(holder.state, ClaimState::Claimed);
    assert_eq!(
        holder.workflow_name, "nightly-1795971600",
        "Argo's name by default"
    );
    let claim_id = holder.claim_id.expect("the claimId is printed");

    let again = claim(&server, &[]).await;
    assert_eq!(again.status.code(), Some(3), "refused");
    assert!(
        stderr(&again).contains("409 already_claimed"),
        "{}",
        stderr(&again)
    );

    let settled = settle(&server, &claim_id, &["--submitted", "wf-uid-1"]).await;
    assert!(settled.status.success(), "{}", stderr(&settled));
    assert!(
        stdout(&settled).contains("workflow uid wf-uid-1"),
        "{}",
        stdout(&settled)
    );

    let later = cli(
        &server,
        &[
            "runs",
            "claim",
            "nightly",
            "--namespace",
            "argo",
            "--cron-workflow-uid",
            "8e2a6f0c-cron",
            "--scheduled-time",
            "2026-11-29T18:00:00Z",
        ],
    )
    .await;
    assert!(later.status.success(), "{}", stderr(&later));

    let table = cli(&server, &["runs", "nightly", "-n", "argo"]).await;
    let lines: Vec<String> = stdout(&table).lines().map(str::to_owned).collect();
    assert_eq!(lines[0], "last scheduled (settled): 2026-11-29T17:00:00Z");
    assert!(lines[1].starts_with("SCHEDULED"), "{lines:?}");
    assert!(
        lines[2].starts_with("2026-11-29T18:00:00Z   claimed"),
        "{lines:?}"
    );
    assert!(
        lines[3].starts_with("2026-11-29T17:00:00Z   submitted"),
        "{lines:?}"
    );
    assert!(lines[3].ends_with("workflow uid wf-uid-1"), "{lines:?}");

    // -o name: run/WORKFLOW, each tick named by its workflow, as kubectl's KIND/NAME.
    let names = cli(&server, &["runs", "nightly", "-n", "argo", "-o", "name"]).await;
    assert!(names.status.success(), "{}", stderr(&names));
    assert_eq!(
        stdout(&names),
        "run/nightly-1795975200\nrun/nightly-1795971600\n"
    );
    // -o wide adds the incarnation, the lease's end and the settling, DETAIL still last.
    let wide = stdout(&cli(&server, &["runs", "nightly", "-n", "argo", "-o", "wide"]).await);
    let lines: Vec<&str> = wide.lines().collect();
    for column in ["CRONWORKFLOW UID", "LEASE EXPIRES", "SETTLED"] {
        assert!(lines[1].contains(column), "{wide}");
    }
    assert!(lines[1].ends_with("DETAIL"), "{wide}");
    assert!(lines[3].contains("   8e2a6f0c-cron   "), "{wide}");
    assert!(lines[3].ends_with("workflow uid wf-uid-1"), "{wide}");
    // --no-headers: the rows alone, without the last scheduled tick's line.
    let rows = stdout(&cli(&server, &["runs", "nightly", "-n", "argo", "--no-headers"]).await);
    let lines: Vec<&str> = rows.lines().collect();
    assert_eq!(lines.len(), 2, "{rows}");
    assert!(
        lines[0].starts_with("2026-11-29T18:00:00Z   claimed"),
        "{rows}"
    );

    // One page at a time, the next one named on stderr; `claims` still works.
    let first = cli(&server, &["runs", "nightly", "-n", "argo", "--limit", "1"]).await;
    assert_eq!(stdout(&first).lines().count(), 3, "{}", stdout(&first));
    let hint = stderr(&first);
    let token = hint
        .trim()
        .strip_prefix("more: argo-results runs nightly -n argo --continue ")
        .expect("the next page's command");
    let second: ClaimList = json(
        &cli(
            &server,
            &[
                "claims",
                "nightly",
                "-n",
                "argo",
                "--limit",
                "1",
                "--continue",
                token,
                "-o",
                "json",
            ],
        )
        .await,
    );
    assert_eq!(second.items.len(), 1);
    assert_eq!(second.items[0].scheduled_time, "2026-11-29T17:00:00Z");
    assert_eq!(second.continue_token, None);
}

async fn an_unsettled_cli_claim_is_taken_over_after_its_lease_and_its_holder_refused(
    backend: Backend,
) {
    let server = TestServer::builder(backend).start().await;
    let first: Claim = json(&claim(&server, &["--lease-seconds", "5", "-o", "json"]).await);
    // The first holder never settles. A second claimant retries until its lease is over.
    let expired = async || {
        let output = claim(&server, &["--workflow-name", "another-name", "-o", "json"]).await;
        if output.status.success() {
            return Some(json(&output));
        }
        assert!(
            stderr(&output).contains("409 already_claimed"),
            "{}",
            stderr(&output)
        );
        None
    };
    let second: Claim = eventually("the 5 s lease expires", Duration::from_secs(60), expired).await;
    assert!(second.taken_over);
    assert_eq!(
        second.workflow_name, first.workflow_name,
        "the first name is kept"
    );

    let late = settle(
        &server,
        &first.claim_id.expect("claimId"),
        &["--submitted", "wf-1"],
    )
    .await;
    assert_eq!(late.status.code(), Some(3));
    assert!(
        stderr(&late).contains("409 lease_lost"),
        "{}",
        stderr(&late)
    );
    let settled = settle(
        &server,
        &second.claim_id.expect("claimId"),
        &["--submitted", "wf-1"],
    )
    .await;
    assert!(settled.status.success(), "{}", stderr(&settled));

    let list: ClaimList =
        json(&cli(&server, &["runs", "nightly", "-n", "argo", "-o", "json"]).await);
    assert_eq!(list.items.len(), 1);
    let run = &list.items[0];
    assert_eq!(
        (run.state, run.taken_over, run.workflow_uid.as_deref()),
        (ClaimState::Submitted, true, Some("wf-1"))
    );
}

/// `NAMESPACE/CRONWORKFLOW`, the old form, still claims, settles and lists, each time with
/// a note giving the new form; with an `-n` that names another namespace it is refused. A
/// cron workflow with no claimed tick says so on stderr and exits 0.
async fn runs_takes_the_old_namespace_slash_name_form_with_a_note(backend: Backend) {
    let server = TestServer::builder(backend).start().await;
    let empty = cli(&server, &["runs", "nightly", "-n", "argo"]).await;
    assert_eq!(empty.status.code(), Some(0), "{}", stderr(&empty));
    assert_eq!(stdout(&empty), "");
    assert_eq!(
        stderr(&empty),
        "No claimed runs found for cron workflow nightly in namespace argo.\n"
    );
    let no_names = cli(&server, &["runs", "nightly", "-n", "argo", "-o", "name"]).await;
    assert_eq!(no_names.status.code(), Some(0), "{}", stderr(&no_names));
    assert_eq!(
        (stdout(&no_names), stderr(&no_names)),
        (String::new(), String::new())
    );

    let claimed = cli(
        &server,
        &[
            &["runs", "claim", "argo/nightly"],
            &TICK[..],
            &["-o", "json"],
        ]
        .concat(),
    )
    .await;
    let holder: Claim = json(&claimed);
    assert_eq!(holder.namespace, "argo");
    assert!(
        stderr(&claimed).contains("old form; use: argo-results runs claim nightly -n argo"),
        "{}",
        stderr(&claimed)
    );
    let claim_id = holder.claim_id.expect("claimId");
    let settled = cli(
        &server,
        &[
            &["runs", "settle", "argo/nightly"],
            &TICK[..],
            &["--claim-id", &claim_id, "--skipped", "by hand"],
        ]
        .concat(),
    )
    .await;
    assert!(settled.status.success(), "{}", stderr(&settled));

    let listed = cli(&server, &["runs", "argo/nightly"]).await;
    assert!(listed.status.success(), "{}", stderr(&listed));
    assert!(stdout(&listed).contains("skipped"), "{}", stdout(&listed));
    assert!(
        stderr(&listed).contains("old form; use: argo-results runs nightly -n argo"),
        "{}",
        stderr(&listed)
    );

    let clash = cli(&server, &["runs", "argo/nightly", "-n", "prod"]).await;
    assert_eq!(clash.status.code(), Some(2), "{}", stderr(&clash));
    assert!(
        stderr(&clash).contains("-n says prod"),
        "{}",
        stderr(&clash)
    );
}
