//! How large a world the checker explores, and the worlds `cargo test` and
//! `tests/model/deep.sh` check.

use super::Template;

/// How large a world the checker explores: each fault is a budget the environment may
/// spend at any moment.
#[derive(Debug, Clone)]
pub struct Config {
    /// The workflow's nodes, in order.
    pub templates: Vec<Template>,
    /// The nodes run one after the other (`steps`: each needs the one before decided) or
    /// all at once (a `dag` without dependencies).
    pub in_sequence: bool,
    /// Attempts a container makes at one report before it gives up.
    pub attempts: u8,
    /// Container nodes' `wait` reports progress twice (sequences 1 and 2), so that a copy
    /// of the first can reach the row after the second, while it is live.
    pub second_progress: bool,
    /// Second progress reports that draw the first one's sequence (a clock that repeats).
    pub sequence_repeats: u8,
    /// Final reports sent once more, under the final's sequence, with other outputs, across
    /// all pods (`Step::OtherFinal`).
    pub other_finals: u8,
    /// Writes the server gathers into one transaction (group commit).
    pub batch_max: usize,
    /// Changes per feed page.
    pub feed_limit: usize,
    /// Pod endings other than the normal one (init or pending failure, eviction,
    /// deletion while it runs) and container crashes, across all pods.
    pub pod_faults: u8,
    /// Pods are deleted once they end (Argo's `podGC: OnPodCompletion`). Without it an
    /// ended pod stays: a deletion the checker could always choose would end every hang.
    pub pod_gc: bool,
    pub server_crashes: u8,
    pub controller_crashes: u8,
    /// A controller crash may also fall between creating a node's pod and persisting the
    /// workflow: the node's registration is forgotten, the pod is there.
    pub crash_before_persist: bool,
    /// After such a crash, a pod deleted meanwhile is created again under its name, with
    /// another UID, as Argo's `createWorkflowPod` does; without it the controller finds it
    /// gone and settles the node. The second pod runs the whole node again, which
    /// multiplies the deep worlds' states past what 2 cores finish, so only the outage
    /// world has it.
    pub pods_created_again: bool,
    /// Times the server is down for a while (`Server::down`).
    pub outages: u8,
    /// Requests the network delivers twice.
    pub duplicates: u8,
    /// A backup taken, then restored.
    pub restores: u8,
    /// Retention prunes the feed's history.
    pub prunes: u8,
    /// A pod reports another node with its own token.
    pub hostile: bool,
    /// A pod of node 0's pod name that someone else created, with a UID of its own, sends
    /// a final report once.
    pub impostor: bool,
    /// A request of an ended pod to a frozen row that no restore can take back is dropped
    /// from the network: the rules refuse or replay it, and its answer reaches nobody. It
    /// rests on the rules that the checker checks while pods run; the deep worlds keep
    /// every such request.
    pub drop_dead_requests: bool,
    /// A second reader follows the feed from the start, as `argo-results watch` or a
    /// controller's other replica would, and reads on after the workflow's results are
    /// deleted: what the deletion leaves in the feed is what it sees.
    pub watcher: bool,
}

impl Config {
    /// One node of `template` and one fault of each kind: two attempts at each report, a
    /// pod that ends in any of Argo's ways, a crash of the server and of the controller, a
    /// restore from a backup and a pruning of the feed's history.
    pub fn every_fault(template: Template) -> Self {
        Config {
            templates: vec![template],
            in_sequence: true,
            attempts: 2,
            second_progress: false,
            sequence_repeats: 0,
            other_finals: 0,
            batch_max: 1,
            feed_limit: 8,
            pod_faults: 1,
            pod_gc: false,
            server_crashes: 1,
            controller_crashes: 1,
            crash_before_persist: false,
            pods_created_again: false,
            outages: 0,
            duplicates: 0,
            restores: 1,
            prunes: 1,
            hostile: false,
            impostor: false,
            drop_dead_requests: true,
            watcher: false,
        }
    }

    /// Two nodes, a resource template then a container one, whose pods each report the
    /// other's node once with their own tokens, and an impostor of the first node's pod
    /// name; two attempts at each report, no other fault.
    pub fn two_nodes() -> Self {
        Config {
            templates: vec![Template::Resource, Template::Container],
            pod_faults: 0,
            server_crashes: 0,
            controller_crashes: 0,
            restores: 0,
            prunes: 0,
            hostile: true,
            impostor: true,
            ..Config::every_fault(Template::Container)
        }
    }

    /// One container node whose `wait` reports progress twice, the second time perhaps
    /// under the first one's sequence: two attempts at each report and a request
    /// delivered twice, so that copies of a report reach the server after later ones, and
    /// one pod fault: 174,000 states. No crash of the controller, restore or pruning: they
    /// do not reorder a pod's reports, and the first two alone (without the pod fault)
    /// made it 2.8 million.
    pub fn progress() -> Self {
        Config {
            second_progress: true,
            sequence_repeats: 1,
            duplicates: 1,
            controller_crashes: 0,
            restores: 0,
            prunes: 0,
            ..Config::every_fault(Template::Container)
        }
    }

    /// One container node whose pod's requests all stay in the network after it ends, one
    /// of them delivered twice, and a final report sent again with other outputs: finals
    /// and replays reach completed and abandoned rows. No crash, restore or pruning: they
    /// change no row a late request reaches.
    pub fn late_requests() -> Self {
        Config {
            other_finals: 1,
            duplicates: 1,
            drop_dead_requests: false,
            server_crashes: 0,
            controller_crashes: 0,
            restores: 0,
            prunes: 0,
            ..Config::every_fault(Template::Container)
        }
    }

    /// Reads after the deletion: a watcher follows the feed in pages of `feed_limit` from
    /// the start and on after the workflow's results are deleted, while a request delivered
    /// twice or sent before its pod ended may still arrive (every request is kept to the
    /// end); a pod fault and a pruning of the feed's history (a watcher behind it lists
    /// again).
    pub fn deletion(template: Template, feed_limit: usize) -> Self {
        Config {
            watcher: true,
            feed_limit,
            duplicates: 1,
            drop_dead_requests: false,
            server_crashes: 0,
            controller_crashes: 0,
            restores: 0,
            ..Config::every_fault(template)
        }
    }

    /// One container node while the server goes down for a while and comes back: reports
    /// and the controller's settle meet `503`, as during a rollout; one pod fault, one
    /// controller crash (anywhere, or between creating the pod and persisting the
    /// workflow, after which a pod deleted meanwhile is created again), two attempts at
    /// each report.
    pub fn outage() -> Self {
        Config {
            outages: 1,
            crash_before_persist: true,
            pods_created_again: true,
            server_crashes: 0,
            restores: 0,
            prunes: 0,
            ..Config::every_fault(Template::Container)
        }
    }

    /// The worlds `cargo test` checks (docs/protocol.md, "Bounds").
    pub fn ci() -> Vec<(&'static str, Config)> {
        vec![
            (
                "results: a container node, every fault",
                Config::every_fault(Template::Container),
            ),
            (
                "results: a resource node, every fault",
                Config::every_fault(Template::Resource),
            ),
            (
                "results: a node whose main finalizes, every fault",
                Config::every_fault(Template::MainFinalizes),
            ),
            ("results: two nodes, hostile pods", Config::two_nodes()),
            (
                "results: a container node, progress reordered and repeated",
                Config::progress(),
            ),
            (
                "results: a container node, late requests and another final",
                Config::late_requests(),
            ),
            (
                "results: a container node, the server down a while",
                Config::outage(),
            ),
            (
                "results: a container node, deleted, read in pages of one",
                Config::deletion(Template::Container, 1),
            ),
            (
                "results: a resource node, deleted, read in pages of two",
                Config::deletion(Template::Resource, 2),
            ),
        ]
    }

    /// Deeper worlds, checked by `tests/model/deep.sh`: two writes per transaction (so a
    /// crash between receiving and committing loses them), one change per feed page, every
    /// request kept to the end, a controller crash that may fall before the workflow
    /// recorded its pod; pods collected once they end; a final sent again with other
    /// outputs. Two nodes at once are not
    /// among them: their pods multiply each other's states past what 2 cores finish
    /// (docs/protocol.md, "Bounds and time").
    pub fn deep() -> Vec<(&'static str, Config)> {
        let deeper = |template| Config {
            crash_before_persist: true,
            batch_max: 2,
            feed_limit: 1,
            drop_dead_requests: false,
            ..Config::every_fault(template)
        };
        vec![
            (
                "results (deep): a container node",
                deeper(Template::Container),
            ),
            (
                "results (deep): a resource node",
                deeper(Template::Resource),
            ),
            (
                "results (deep): a container node, pods collected once they end",
                Config {
                    pod_gc: true,
                    ..deeper(Template::Container)
                },
            ),
            // No restore: one taken back to before a completion lets the other final
            // complete the row anew, after the controller decided on the first, which
            // only a `wait` sending two different finals can do, and Argo's does not.
            (
                "results (deep): a container node, a final sent again with other outputs",
                Config {
                    other_finals: 1,
                    restores: 0,
                    ..deeper(Template::Container)
                },
            ),
        ]
    }
}
