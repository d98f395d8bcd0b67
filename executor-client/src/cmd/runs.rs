//! `argo-results runs`: a cron workflow's ticks, newest first; and claiming and settling a
//! tick by hand, as a controller does (docs/controller-integration.md, "Cron schedules").

use argo_results_client::RunsOptions;
use argo_results_client::proto::{
    Claim, ClaimList, ClaimRequest, ClaimState, SettleOutcome, SettleRequest,
};
use clap::{ArgGroup, Args, Subcommand};

use super::connect::{Connection, NamespaceArg};
use super::failure::Failure;
use super::output::{self, Cell, Format, Headers, ListFormat};

/// List a cron workflow's claimed ticks, newest first, or claim or settle one.
///
/// The table opens with the newest settled tick (last scheduled), a line --no-headers
/// leaves out with the header. -o wide adds the cron workflow's UID, when the lease
/// expires and when the tick was settled; -o name prints run/WORKFLOW, the name of the
/// workflow of each tick. A cron workflow with no claimed tick says so on stderr and
/// exits 0 (-o json or yaml: an empty items list; -o name: nothing).
///
/// Examples:
///   argo-results runs nightly -n argo
///   argo-results runs nightly -n argo -o wide
///   argo-results runs nightly -n argo -o name
///   argo-results runs claim nightly -n argo --cron-workflow-uid 8e2a6f0c \
///     --scheduled-time 2026-11-29T17:00:00Z --lease-seconds 60
///   argo-results runs settle nightly -n argo --cron-workflow-uid 8e2a6f0c \
///     --scheduled-time 2026-11-29T17:00:00Z --claim-id <claimId> --submitted <workflow UID>
#[derive(Debug, Args)]
#[command(
    verbatim_doc_comment,
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
pub struct RunsArgs {
    #[command(subcommand)]
    action: Option<Action>,

    #[command(flatten)]
    list: ListArgs,
}

#[derive(Debug, Subcommand)]
enum Action {
    Claim(ClaimArgs),
    Settle(SettleArgs),
}

#[derive(Debug, Args)]
struct ListArgs {
    /// The cron workflow's name (the old form NAMESPACE/CRONWORKFLOW is still taken).
    #[arg(required = true)]
    cron_workflow: Option<String>,

    #[command(flatten)]
    namespace: NamespaceArg,

    /// Only this incarnation's claims.
    #[arg(long)]
    cron_workflow_uid: Option<String>,

    /// Claims on this page at most (1 to 1000).
    #[arg(long, default_value_t = 50)]
    limit: u32,

    /// The next page: the token printed after the previous one.
    #[arg(long = "continue", value_name = "TOKEN")]
    continue_token: Option<String>,

    #[arg(short, long, value_enum, default_value = "table")]
    output: ListFormat,

    #[command(flatten)]
    headers: Headers,

    #[command(flatten)]
    connection: Connection,
}

/// One tick of a cron workflow, as claim and settle name it.
#[derive(Debug, Args)]
struct TickArgs {
    /// The cron workflow's name (the old form NAMESPACE/CRONWORKFLOW is still taken).
    cron_workflow: String,

    #[command(flatten)]
    namespace: NamespaceArg,

    /// The cron workflow's UID (metadata.uid).
    #[arg(long)]
    cron_workflow_uid: String,

    /// The tick, RFC 3339, e.g. 2026-11-29T17:00:00Z.
    #[arg(long)]
    scheduled_time: String,
}

/// Claim a tick under a lease; prints the claim and its claimId, which settle needs.
#[derive(Debug, Args)]
struct ClaimArgs {
    #[command(flatten)]
    tick: TickArgs,

    /// The workflow to create [default: <cron>-<unix scheduled time>, as Argo names it].
    #[arg(long)]
    workflow_name: Option<String>,

    /// How long the claim holds without a settle before another claimant may take it over
    /// (5 to 3600) [default: the server's, 60].
    #[arg(long)]
    lease_seconds: Option<i64>,

    #[arg(short, long, value_enum, default_value = "table")]
    output: Format,

    #[command(flatten)]
    headers: Headers,

    #[command(flatten)]
    connection: Connection,
}

/// Settle a claimed tick: the workflow was submitted, or the tick skipped.
#[derive(Debug, Args)]
#[command(group(ArgGroup::new("outcome").required(true).args(["submitted", "skipped"])))]
struct SettleArgs {
    #[command(flatten)]
    tick: TickArgs,

    /// The claimId that claim printed.
    #[arg(long)]
    claim_id: String,

    /// The workflow exists (created, or AlreadyExists): its UID.
    #[arg(long, value_name = "WORKFLOW_UID")]
    submitted: Option<String>,

    /// The tick is not run, for this reason.
    #[arg(long, value_name = "REASON")]
    skipped: Option<String>,

    #[arg(short, long, value_enum, default_value = "table")]
    output: Format,

    #[command(flatten)]
    headers: Headers,

    #[command(flatten)]
    connection: Connection,
}

pub async fn run(args: &RunsArgs) -> Result<(), Failure> {
    match &args.action {
        None => list(&args.list).await,
        Some(Action::Claim(claim_args)) => claim(claim_args).await,
        Some(Action::Settle(settle_args)) => settle(settle_args).await,
    }
}

/// The state, coloured by what it means for the tick, and whether it was taken over.
fn state_cell(claim: &Claim) -> Cell {
    let ansi = match claim.state {
        ClaimState::Claimed => "33",
        ClaimState::Submitted => "32",
        ClaimState::Skipped => "2",
    };
    let taken_over = if claim.taken_over {
        " (taken over)"
    } else {
        ""
    };
    Cell::coloured(format!("{}{taken_over}", claim.state.as_str()), ansi)
}

/// What a claim's state rests on: its lease, its workflow or its reason.
fn detail(claim: &Claim) -> String {
    match claim.state {
        ClaimState::Claimed => format!("lease until {}", claim.lease_expires_at),
        ClaimState::Submitted => match &claim.workflow_uid {
            Some(uid) => format!("workflow uid {uid}"),
            None => "-".into(),
        },
        ClaimState::Skipped => claim.reason.clone().unwrap_or_else(|| "-".into()),
    }
}

async fn list(args: &ListArgs) -> Result<(), Failure> {
    let Some(cron_workflow) = &args.cron_workflow else {
        return Err(Failure::Usage("CRONWORKFLOW is required".into()));
    };
    let (namespace, name) = args.namespace.locate(cron_workflow, "runs", "")?;
    let options = RunsOptions {
        cron_workflow_uid: args.cron_workflow_uid.clone(),
        limit: Some(args.limit),
        continue_token: args.continue_token.clone(),
    };
    let (ns, cron, options) = (&namespace, &name, &options);
    let page = args
        .connection
        .api()?
        .call(|client| async move { client.runs(ns, cron, options).await })
        .await?;
    let tabled = matches!(args.output, ListFormat::Table | ListFormat::Wide);
    if tabled && page.items.is_empty() {
        eprintln!("No claimed runs found for cron workflow {name} in namespace {namespace}.");
        return Ok(());
    }
    let text = match args.output {
        ListFormat::Table => runs_table(&page, false, args.headers),
        ListFormat::Wide => runs_table(&page, true, args.headers),
        ListFormat::Name => output::names(
            RUN,
            page.items.iter().map(|claim| claim.workflow_name.as_str()),
        ),
        ListFormat::Json => output::document(&page, Format::Json)?,
        ListFormat::Yaml => output::document(&page, Format::Yaml)?,
    };
    output::emit(&text)?;
    // JSON and YAML carry the token in the page itself.
    let documented = matches!(args.output, ListFormat::Json | ListFormat::Yaml);
    if let (false, Some(token)) = (documented, &page.continue_token) {
        eprintln!("more: argo-results runs {name} -n {namespace} --continue {token}");
    }
    Ok(())
}

/// The kind of `-o name`: a run is named by the workflow of its tick.
const RUN: &str = "run";

/// The ticks' table under the newest settled tick; wide adds the cron workflow's UID, the
/// lease's end and when the tick was settled, before DETAIL.
fn runs_table(page: &ClaimList, wide: bool, headers: Headers) -> String {
    let mut header = vec!["SCHEDULED", "STATE", "WORKFLOW", "CLAIMED"];
    if wide {
        header.extend(["CRONWORKFLOW UID", "LEASE EXPIRES", "SETTLED"]);
    }
    header.push("DETAIL");
    let rows = page
        .items
        .iter()
        .map(|claim| {
            let mut row = vec![
                Cell::from(claim.scheduled_time.clone()),
                state_cell(claim),
                Cell::from(claim.workflow_name.clone()),
                Cell::from(output::age(&claim.claimed_at)),
            ];
            if wide {
                row.extend([
                    Cell::from(claim.cron_workflow_uid.clone()),
                    Cell::from(claim.lease_expires_at.clone()),
                    Cell::from(claim.settled_at.as_deref().map_or("-".into(), output::age)),
                ]);
            }
            row.push(Cell::from(detail(claim)));
            row
        })
        .collect();
    let table = output::table(&header, rows, headers);
    if !headers.shown() {
        return table;
    }
    let last = page.last_scheduled_time.as_deref().unwrap_or("none");
    format!("last scheduled (settled): {last}\n") + &table
}

/// A claim as FIELD/VALUE rows, or as a document.
fn show(claim: &Claim, format: Format, headers: Headers) -> Result<(), Failure> {
    let text = match format {
        Format::Table => {
            let or_dash = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
            let rows = vec![
                vec![
                    Cell::from("tick"),
                    Cell::from(format!(
                        "{}/{} {}",
                        claim.namespace, claim.cron_workflow, claim.scheduled_time
                    )),
                ],
                vec![Cell::from("state"), state_cell(claim)],
                vec![
                    Cell::from("workflow"),
                    Cell::from(claim.workflow_name.clone()),
                ],
                vec![Cell::from("claimId"), Cell::from(or_dash(&claim.claim_id))],
                vec![
                    Cell::from("claimedAt"),
                    Cell::from(claim.claimed_at.clone()),
                ],
                vec![
                    Cell::from("leaseExpiresAt"),
                    Cell::from(claim.lease_expires_at.clone()),
                ],
                vec![Cell::from("detail"), Cell::from(detail(claim))],
            ];
            output::table(&["FIELD", "VALUE"], rows, headers)
        }
        format => output::document(claim, format)?,
    };
    output::emit(&text)
}

/// Argo's name for a tick's workflow (`getChildWorkflowName`): `<cron>-<unix seconds>`.
fn argo_workflow_name(cron_workflow: &str, scheduled_time: &str) -> Result<String, Failure> {
    let time: jiff::Timestamp = scheduled_time.parse().map_err(|e| {
        Failure::Usage(format!(
            "--scheduled-time {scheduled_time:?} is not an RFC 3339 time: {e}"
        ))
    })?;
    Ok(format!("{cron_workflow}-{}", time.as_second()))
}

/// The tick's namespace and cron workflow.
fn locate(tick: &TickArgs, action: &str) -> Result<(String, String), Failure> {
    tick.namespace
        .locate(&tick.cron_workflow, &format!("runs {action}"), "")
}

async fn claim(args: &ClaimArgs) -> Result<(), Failure> {
    let (namespace, name) = locate(&args.tick, "claim")?;
    let workflow_name = match &args.workflow_name {
        Some(workflow_name) => workflow_name.clone(),
        None => argo_workflow_name(&name, &args.tick.scheduled_time)?,
    };
    let request = ClaimRequest {
        cron_workflow_uid: args.tick.cron_workflow_uid.clone(),
        scheduled_time: args.tick.scheduled_time.clone(),
        workflow_name,
        lease_seconds: args.lease_seconds,
    };
    let (ns, cron, request) = (&namespace, &name, &request);
    let claim = args
        .connection
        .api()?
        .call(|client| async move { client.claim(ns, cron, request).await })
        .await?;
    show(&claim, args.output, args.headers)
}

async fn settle(args: &SettleArgs) -> Result<(), Failure> {
    let (namespace, name) = locate(&args.tick, "settle")?;
    let outcome = match &args.submitted {
        Some(_) => SettleOutcome::Submitted,
        None => SettleOutcome::Skipped,
    };
    let request = SettleRequest {
        cron_workflow_uid: args.tick.cron_workflow_uid.clone(),
        scheduled_time: args.tick.scheduled_time.clone(),
        claim_id: args.claim_id.clone(),
        outcome,
        workflow_uid: args.submitted.clone(),
        reason: args.skipped.clone(),
    };
    let (ns, cron, request) = (&namespace, &name, &request);
    let claim = args
        .connection
        .api()?
        .call(|client| async move { client.settle(ns, cron, request).await })
        .await?;
    show(&claim, args.output, args.headers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_workflow_name_is_argos() {
        // workflow/cron/operator.go getChildWorkflowName: fmt.Sprintf("%s-%d", name, Unix()).
        assert_eq!(
            argo_workflow_name("nightly", "2026-11-29T18:00:00+01:00").ok(),
            Some("nightly-1795971600".to_owned())
        );
        assert!(argo_workflow_name("nightly", "yesterday").is_err());
    }
}
