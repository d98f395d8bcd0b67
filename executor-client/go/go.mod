module github.com/argo-results/argo-results/executor-client/go

go 1.24
