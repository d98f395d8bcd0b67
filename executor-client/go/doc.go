// Package argoresults is the Go client of argo-results, the service that replaces Argo
// Workflows' WorkflowTaskResult path (docs/api.md is the HTTP contract). It uses the
// standard library only, so argoexec and the workflow controller can import it as is.
//
//   - [Client] calls every endpoint of the API, with the retry policy of Argo's executor
//     (1 s doubling, 20 % jitter, 30 s cap, until an optional deadline) when configured.
//   - [Reporter] is what argoexec's wait container (and the main container of resource and
//     data templates) needs in place of its WorkflowTaskResult calls: start, progress,
//     outputs merged as an RFC 7386 patch, and the final report.
//   - [Follower] is what the controller needs in place of its task-result informer: it
//     registers expected results, follows the change feed of every namespace, re-lists on
//     410 gone, resumes after a restart from the workflows in flight, and decides a node
//     with [Decide], as the Rust reference reconciler does.
//   - [RunTick] runs one cron tick the safe way: claim it under a lease, create its
//     workflow, settle.
//
// Argo's outputs travel as [json.RawMessage] and are sent and returned byte for byte.
package argoresults
