// argo-results as Argo's task results backend: the implementation behind the seam that
// patch/argo.patch adds to Argo. It builds only against Argo's module with that patch
// applied and this repository's Go package (executor-client/go), through replace
// directives in a temporary go.mod: tests/argo/build --patched links it into Argo's
// binaries, argo/test vets and tests it.
module github.com/argo-results/argo-results/argo

go 1.25.7

require (
	github.com/argo-results/argo-results/executor-client/go v0.0.0
	github.com/argoproj/argo-workflows/v4 v4.0.5
	k8s.io/api v0.33.1
)

