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
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use tokio::net::TcpListener;
use tower::ServiceExt as _;

/// How long a client has to send a request's headers, from the connection's first byte or the
/// end of its previous request.
pub const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` completes, each request carrying its peer's
/// address (`ConnectInfo`, which the development sign-in reads).
pub async fn serve(listener: TcpListener, app: Router, shutdown: impl Future<Output = ()>) {
    let graceful = GracefulShutdown::new();
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
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let mut builder = Builder::new(TokioExecutor::new());
            builder
                .http1()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT);
            // WebSockets over HTTP/2 (the local live hub) need the CONNECT protocol.
            builder.http2().timer(TokioTimer::new()).enable_connect_protocol();
            let connection =
                builder.serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(service));
            if let Err(e) = watcher.watch(connection).await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    graceful.shutdown().await;
}
