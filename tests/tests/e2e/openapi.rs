//! `GET /api/v1/openapi.json`: the contract as OpenAPI 3.1, served without a token.

use argo_results_tests::{Backend, TestServer};

#[tokio::test]
async fn the_openapi_document_lists_every_operation() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let answer = server.get("/api/v1/openapi.json", None).await;
    assert_eq!(answer.status, 200);
    let document = answer.json;
    assert_eq!(document["openapi"], "3.1.0");
    let operations = [
        (
            "/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}/result",
            "put",
        ),
        (
            "/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}/result",
            "get",
        ),
        (
            "/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}/expectation",
            "put",
        ),
        (
            "/api/v1/namespaces/{namespace}/workflows/{workflow}/nodes/{nodeId}/result/abandon",
            "post",
        ),
        (
            "/api/v1/namespaces/{namespace}/workflows/{workflow}/results",
            "get",
        ),
        (
            "/api/v1/namespaces/{namespace}/workflows/{workflow}/results",
            "delete",
        ),
        ("/api/v1/results", "get"),
        (
            "/api/v1/namespaces/{namespace}/cronworkflows/{name}/runs",
            "post",
        ),
        (
            "/api/v1/namespaces/{namespace}/cronworkflows/{name}/runs",
            "get",
        ),
        (
            "/api/v1/namespaces/{namespace}/cronworkflows/{name}/runs/settle",
            "post",
        ),
        ("/api/v1/whoami", "get"),
    ];
    for (path, method) in operations {
        assert!(
            document["paths"][path][method].is_object(),
            "{method} {path} is missing"
        );
    }
    let report = &document["paths"][operations[0].0]["put"];
    for status in [
        "200", "201", "400", "401", "403", "409", "413", "415", "422",
    ] {
        assert!(
            report["responses"][status].is_object(),
            "report lacks {status}"
        );
    }
    for schema in [
        "NodeResult",
        "ReportRequest",
        "Problem",
        "FeedPage",
        "ResultList",
        "Claim",
    ] {
        assert!(
            document["components"]["schemas"][schema].is_object(),
            "{schema} is missing"
        );
    }
}

/// The served document is the committed `proto/openapi.json`, so the contract's changes
/// show in review.
#[tokio::test]
async fn the_committed_openapi_document_is_the_served_one() {
    let server = TestServer::builder(Backend::Sqlite).start().await;
    let served = server.get("/api/v1/openapi.json", None).await.text;
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../proto/openapi.json");
    let committed = std::fs::read_to_string(path).expect("proto/openapi.json");
    assert!(
        served == committed,
        "proto/openapi.json is stale; regenerate it with\n  \
         cargo run -q -p argo-results-server -- --openapi > proto/openapi.json"
    );
}
