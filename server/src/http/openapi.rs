//! The OpenAPI 3.1 document, generated from the handlers and the proto types.

use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "argo-results",
        description = "Step results of Argo Workflows, committed to a database before they are acknowledged.",
        license(name = "Apache-2.0")
    ),
    modifiers(&BearerAuth),
    tags(
        (name = "results", description = "Reports from wait containers and reads"),
        (name = "controller", description = "Expectations, abandon and garbage collection"),
        (name = "cron", description = "Cron run claims"),
        (name = "auth", description = "Who is calling"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .bearer_format("JWT")
                    .description(Some(
                        "A projected service-account token (audience argo-results) or a reader/controller token",
                    ))
                    .build(),
            ),
        );
    }
}
