module github.com/argo-results/argo-results/tests/bench/follower

go 1.24

require github.com/argo-results/argo-results/executor-client/go v0.0.0

replace github.com/argo-results/argo-results/executor-client/go => ../../../executor-client/go
