//! The OpenAPI document, generated from the handlers' annotations so it cannot drift from the
//! routes, and served at `/api/openapi.json`.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

#[derive(OpenApi)]
#[openapi(
    info(title = "tabletalk", description = "Chat messages on table storage."),
    paths(
        super::rooms::create, super::rooms::list, super::rooms::get, super::rooms::join, super::rooms::leave,
        super::rooms::update, super::rooms::delete,
        super::members::list, super::members::update_mine, super::members::mark_read, super::members::kick,
        super::members::timeout, super::members::ban, super::members::unban, super::members::set_roles,
        super::roles::list, super::roles::create, super::roles::update, super::roles::delete,
        super::messages::create, super::messages::read, super::messages::get, super::messages::edit,
        super::messages::delete, super::messages::pin, super::messages::unpin, super::messages::vote,
        super::messages::react, super::messages::unreact, super::messages::forward, super::messages::thread,
        super::messages::changes,
        super::push::subscribe, super::push::unsubscribe, super::push::list, super::push::vapid_public_key,
        super::live::negotiate, super::live::typing, super::events::deliver,
    ),
    modifiers(&BearerAuth),
    security(("bearer" = [])),
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
                    .build(),
            ),
        );
    }
}

pub async fn document() -> Json<utoipa::openapi::OpenApi> {
    Json(ApiDoc::openapi())
}
