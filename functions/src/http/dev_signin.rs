//! The development sign-in of the self-hosted server: `POST /api/dev/signin {userId, name?}`
//! → `{token}`, so the web client can sign in locally without the `token` command.
//!
//! It is open only where it gives nothing away: the server checks tokens with the published
//! development secret of `local.settings.json` (anyone can sign tokens with it already), and
//! the request comes straight from loopback (the socket's peer is 127.0.0.0/8 or ::1, and no
//! proxy header says it was forwarded for someone else). Anywhere else it answers 404, exactly
//! as a route that does not exist. It is not an API function: not in the OpenAPI document nor
//! in the Functions app (the router adds it only for the self-hosted server, which alone
//! passes the peer address in), and Lambda has no peer address, so it is shut there too.

use std::net::SocketAddr;
use std::time::Duration;

use axum::extract::{ConnectInfo, State};
use axum::http::HeaderMap;
use axum::{Extension, Json};
use serde::{Deserialize, Serialize};
use tabletalk::Error;
use tabletalk::ids::UserId;

use super::AppState;
use super::error::{ApiError, ApiResult};
use super::extract::JsonBody;

/// How long a development token lasts (as `tabletalk token` by default).
const TOKEN_TTL: Duration = Duration::from_secs(24 * 3600);

#[derive(Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SignIn {
    user_id: String,
    #[serde(default)]
    name: Option<String>,
}

#[derive(Serialize)]
pub struct Token {
    token: String,
}

/// Proxy headers: a reverse proxy on the same machine makes every caller look like loopback.
const FORWARDED: [&str; 3] = ["forwarded", "x-forwarded-for", "x-real-ip"];

pub async fn sign_in(
    State(state): State<AppState>,
    peer: Option<Extension<ConnectInfo<SocketAddr>>>,
    headers: HeaderMap,
    // Read only once the door is known open, so a shut door looks like no route at all.
    input: Result<JsonBody<SignIn>, ApiError>,
) -> ApiResult<Json<Token>> {
    let from_loopback = peer.is_some_and(|Extension(ConnectInfo(addr))| addr.ip().is_loopback())
        && FORWARDED.iter().all(|name| !headers.contains_key(*name));
    if !from_loopback || !state.auth.uses_development_secret() {
        return Err(shut());
    }
    let JsonBody(input) = input?;
    let user = UserId::parse(input.user_id.trim()).map_err(|_| {
        ApiError(Error::validation(
            "userId must be 1 to 256 characters without control characters",
        ))
    })?;
    let name = input.name.as_deref().map(str::trim).filter(|n| !n.is_empty());
    match state.auth.mint_development_token(user.as_str(), name, TOKEN_TTL) {
        Some(token) => Ok(Json(Token { token: token? })),
        None => Err(shut()),
    }
}

/// As the router answers a path it does not have.
fn shut() -> ApiError {
    ApiError(Error::not_found("no such route"))
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;
    use std::sync::Arc;

    use axum::body::Body;
    use axum::extract::ConnectInfo;
    use axum::http::{Request, StatusCode};
    use tabletalk::Chat;
    use tabletalk::auth::Authenticator;
    use tabletalk::config::{AuthSettings, DEVELOPMENT_JWT_SECRET};
    use tabletalk::storage::Tables;
    use tabletalk::storage::sqlite::{Durability, SqliteTables};
    use tabletalk::store::schema::Schema;
    use tower::ServiceExt;

    use super::super::{AppState, router};

    async fn app(secret: &str, custom_handler: bool) -> axum::Router {
        let dir = std::env::temp_dir().join(format!("tt-dev-signin-{}", uuid::Uuid::new_v4()));
        let tables = Tables::new(SqliteTables::open(dir.join("db.sqlite"), Durability::Normal).unwrap());
        let chat = Chat::open(tables, Schema::with_prefix("").unwrap()).await.unwrap();
        let auth = Arc::new(Authenticator::new(AuthSettings {
            hs256_secret: Some(secret.into()),
            ..Default::default()
        }));
        router(AppState { chat, auth }, custom_handler)
    }

    async fn sign_in(app: axum::Router, peer: Option<&str>) -> StatusCode {
        let mut request = Request::post("/api/dev/signin")
            .header("content-type", "application/json")
            .body(Body::from(r#"{"userId":"alice"}"#))
            .unwrap();
        if let Some(peer) = peer {
            request
                .extensions_mut()
                .insert(ConnectInfo(peer.parse::<SocketAddr>().unwrap()));
        }
        app.oneshot(request).await.unwrap().status()
    }

    /// Open to loopback peers (IPv4 and IPv6) with the development secret; missing to any
    /// other peer, to a request with no peer address (Lambda), in the Functions app, and with
    /// another secret.
    #[tokio::test]
    async fn the_development_sign_in_opens_only_to_loopback_with_the_development_secret() {
        let dev = app(DEVELOPMENT_JWT_SECRET, false).await;
        assert_eq!(sign_in(dev.clone(), Some("127.0.0.1:5000")).await, StatusCode::OK);
        assert_eq!(sign_in(dev.clone(), Some("[::1]:5000")).await, StatusCode::OK);
        assert_eq!(
            sign_in(dev.clone(), Some("192.0.2.1:5000")).await,
            StatusCode::NOT_FOUND
        );
        assert_eq!(sign_in(dev, None).await, StatusCode::NOT_FOUND);
        let functions = app(DEVELOPMENT_JWT_SECRET, true).await;
        assert_eq!(sign_in(functions, Some("127.0.0.1:5000")).await, StatusCode::NOT_FOUND);
        let other = app("another-secret", false).await;
        assert_eq!(sign_in(other, Some("127.0.0.1:5000")).await, StatusCode::NOT_FOUND);
    }
}
