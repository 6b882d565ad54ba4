//! Accepting connections, for the self-hosted server and the Functions custom handler: what
//! `axum::serve` does, plus the bound it does not expose. A request's headers must arrive
//! within [`HEADER_READ_TIMEOUT`], so a client that opens connections and trickles their
//! headers (slowloris) cannot hold them open; bodies are bounded where they are read
//! (`http::extract`). Shutdown is explicit: on the signal the listener stops accepting, every
//! open connection finishes the request it is serving, and then [`serve`] returns.

use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{ConnectInfo, Request};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tokio::sync::watch;
use tower::ServiceExt as _;

/// How long a client has to send a request's headers, from the connection's first byte or the
/// end of its previous request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` completes, each request carrying its peer's
/// address (`ConnectInfo`, which the development sign-in reads).
///
/// HTTP/1.1 only: browsers, the Functions host and the Web PubSub client all speak it, while
/// telling HTTP/2 apart first reads bytes with no deadline (a client that sends nothing would
/// be held forever), and HTTP/2 has no header deadline of its own.
pub async fn serve(listener: TcpListener, app: Router, shutdown: impl Future<Output = ()>) {
    // Said once, on shutdown, to every connection; each holds `open` until it is done.
    let (stop, stopping) = watch::channel(());
    let (open, all_closed) = watch::channel(());
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                // Out of file descriptors, say: wait for some to close, as axum's serve does,
                // rather than spin.
                Err(e) => {
                    tracing::warn!(error = %e, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let app = app.clone();
        let service = tower::service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
            app.clone().oneshot(request.map(Body::new))
        });
        let (mut stopping, held) = (stopping.clone(), all_closed.clone());
        tokio::spawn(async move {
            let mut builder = hyper::server::conn::http1::Builder::new();
            builder
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            let connection = builder
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
                .with_upgrades();
            let mut connection = std::pin::pin!(connection);
            let ended = tokio::select! {
                ended = connection.as_mut() => ended,
                _ = stopping.changed() => {
                    connection.as_mut().graceful_shutdown();
                    connection.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
            drop(held);
        });
    }
    drop(listener);
    drop(all_closed);
    let _ = stop.send(());
    open.closed().await;
}
