// Package argoresults is the Go client of argo-results, the service that replaces Argo
// Workflows' WorkflowTaskResult path (docs/api.md is the HTTP contract). It uses the
// standard library only, so argoexec and the workflow controller can import it as is.
//
//   - [Client] calls every endpoint of the API, with the backoff of Argo's executor
//     (1 s doubling, 20 % jitter, 30 s cap) when configured; [Config] takes Argo's own
//     *http.Client, a user agent, and reports each retry.
//   - [Reporter] is what argoexec's reporting container needs in place of its
//     WorkflowTaskResult calls: start, progress, outputs merged as an RFC 7386 patch, and
//     the final report, whose failure must fail the container. It retries each report
//     for RetryFor (5 minutes by default), whatever ARGO_DEADLINE says, logging the first
//     retry at once, then gives up and fails the container.
//   - [Follower] is what the controller needs in place of its task-result informer: it
//     registers expected results, follows the change feed of every namespace (or one),
//     lists again on 410 gone, resumes after a restart from the workflows in flight, and
//     decides a node with [Decide], settling a pod that ended ([Follower.Settle]), as the
//     Rust reference reconciler does. Results of one workflow cost what it holds to read.
//   - [RunTickUntilSettled] runs one cron tick the safe way: claim it under a lease,
//     create its workflow, settle, and take a tick over whose holder died in its lease.
//   - [Logger] is what the package logs through; Argo's logging.Logger adapts in a few
//     lines, and [SlogLogger] adapts log/slog.
//
// Argo's outputs travel as [json.RawMessage] and are sent and returned byte for byte.
//
// Stability: v0. The Go API may change between minor versions until v1, each change in
// the repository's CHANGELOG.md; the wire protocol is versioned apart (protocolVersion 1)
// and does not change within it. Argo requires the module at a semver tag
// (executor-client/go/vX.Y.Z); see docs/argo-upstream.md.
package argoresults
