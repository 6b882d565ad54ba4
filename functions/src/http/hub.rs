//! The local live hub's WebSocket endpoint, `GET /client/hubs/{hub}?access_token=…`, the URL
//! `negotiate` hands out when no Azure Web PubSub is configured. This is only the transport:
//! the protocol, tokens and groups are `tabletalk::adapters::live::local_hub`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, rejection::WebSocketUpgradeRejection};
use axum::extract::{Path, Query, State};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use tabletalk::Error;
use tabletalk::adapters::live::local_hub::{JSON_PROTOCOL, RELIABLE_PROTOCOL, Session};
use tokio::sync::mpsc;

use super::AppState;
use super::error::ApiError;

/// How often the server pings a quiet connection.
const PING_EVERY: Duration = Duration::from_secs(20);
/// A connection silent this long (no frame, no pong) is dead: dropped, so its user counts as
/// offline again and gets pushes.
const SILENCE_LIMIT: Duration = Duration::from_secs(60);
/// The largest frame a client may send (its frames are small JSON requests).
const MAX_FRAME_BYTES: usize = 64 * 1024;

#[derive(Deserialize)]
pub struct ConnectQuery {
    access_token: Option<String>,
    /// Set when a reliable client asks to recover a dropped connection.
    awps_connection_id: Option<String>,
}

/// Upgrades to a hub connection. A bad token is refused before the upgrade (401), as the
/// service does; a recovery request is accepted and closed with 1008 (policy violation), which
/// tells the official client to start a fresh connection at once instead of retrying.
pub async fn connect(
    State(state): State<AppState>,
    Path(hub): Path<String>,
    Query(query): Query<ConnectQuery>,
    upgrade: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let Some(local) = state.chat.local_hub().filter(|local| local.hub() == hub) else {
        return ApiError(Error::not_found("no such hub")).into_response();
    };
    let upgrade = match upgrade {
        Ok(upgrade) => upgrade
            .protocols([RELIABLE_PROTOCOL, JSON_PROTOCOL])
            .max_message_size(MAX_FRAME_BYTES)
            .max_frame_size(MAX_FRAME_BYTES),
        Err(_) => return ApiError(Error::bad_request("a WebSocket upgrade is expected")).into_response(),
    };
    if query.awps_connection_id.is_some() {
        return upgrade.on_upgrade(|mut socket| async move {
            let close = CloseFrame {
                code: 1008,
                reason: "connections are not recovered here; connect again".into(),
            };
            let _ = socket.send(Message::Close(Some(close))).await;
        });
    }
    let protocol = upgrade
        .selected_protocol()
        .and_then(|p| p.to_str().ok())
        .unwrap_or(JSON_PROTOCOL)
        .to_owned();
    match local.connect(query.access_token.as_deref().unwrap_or_default(), &protocol) {
        Ok((session, queue)) => {
            // Once closed, the room the connection showed is no longer looked at through it.
            let (chat, connection) = (state.chat.clone(), session.connection_id().to_owned());
            let user = session.user().map(str::to_owned);
            upgrade.on_upgrade(move |socket| async move {
                run(socket, session, queue).await;
                if let Some(user) = user {
                    chat.signals.connection_closed(&user, &connection).await;
                }
            })
        }
        Err(e) => ApiError(e).into_response(),
    }
}

/// Pumps one connection: the client's frames through the session, group signals out to it,
/// and a ping when it is quiet, until either side ends or it falls silent.
async fn run(mut socket: WebSocket, mut session: Session, mut queue: mpsc::Receiver<Arc<str>>) {
    if socket.send(Message::text(session.connected())).await.is_err() {
        return;
    }
    let mut heard = Instant::now();
    let mut pings = tokio::time::interval(PING_EVERY);
    pings.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = pings.tick() => {
                if heard.elapsed() > SILENCE_LIMIT || socket.send(Message::Ping(Default::default())).await.is_err() {
                    break;
                }
            }
            incoming = socket.recv() => match incoming {
                Some(Ok(Message::Text(frame))) => {
                    heard = Instant::now();
                    if let Some(answer) = session.handle(frame.as_str())
                        && socket.send(Message::text(answer)).await.is_err()
                    {
                        break;
                    }
                }
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => break,
                Some(Ok(_)) => heard = Instant::now(),
            },
            signal = queue.recv() => match signal {
                Some(data) => {
                    if socket.send(Message::text(session.server_message(&data))).await.is_err() {
                        break;
                    }
                }
                // Dropped by the hub for falling behind.
                None => {
                    let close = CloseFrame { code: 1013, reason: "too slow; connect again".into() };
                    let _ = socket.send(Message::Close(Some(close))).await;
                    break;
                }
            },
        }
    }
}
