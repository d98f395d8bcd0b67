// The S3-compatible server of the Argo e2e's artifact repository (tests/argo/e2e): the
// gofakes3 command, in memory, as served by the Go module proxy. Nothing of ours is in
// it. A module of its own rather than a tool of tests/argo's: gofakes3 v1.2.0 requires
// github.com/aws/aws-sdk-go-v2 v1.41.5, Argo v4.0.5 v1.36.3, and in tests/argo's module
// graph minimal version selection would build Argo's binaries with the newer one.
module github.com/argo-results/argo-results/tests/argo/s3

go 1.24

tool github.com/johannesboyne/gofakes3/cmd/gofakes3

require (
	github.com/johannesboyne/gofakes3 v1.2.0 // indirect
	github.com/ryszard/goskiplist v0.0.0-20150312221310-2dfbae5fcf46 // indirect
	github.com/spf13/afero v1.2.1 // indirect
	go.etcd.io/bbolt v1.3.5 // indirect
	go.shabbyrobe.org/gocovmerge v0.0.0-20230507111327-fa4f82cfbf4d // indirect
	golang.org/x/sys v0.7.0 // indirect
	golang.org/x/text v0.9.0 // indirect
	golang.org/x/tools v0.8.0 // indirect
	gopkg.in/check.v1 v1.0.0-20201130134442-10cb98267c6c // indirect
	gopkg.in/mgo.v2 v2.0.0-20180705113604-9856a29383ce // indirect
)
