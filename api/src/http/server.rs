//! The service's HTTP/1 connections: hyper's connection builder with a clock, so a client that
//! sends its headers too slowly (or nothing at all) is cut off, the header block is size-limited,
//! and a graceful stop drains every connection within bounded time.
//!
//! `axum::serve` arms no timer, so hyper's header read timeout never fires there: one client
//! that opened a connection and sent half a header held it, and a graceful stop waited for it,
//! forever.

use axum::Router;
use axum::extract::ConnectInfo;
use axum::serve::Listener;
use hyper::Request;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::time::Duration;
use tokio::net::TcpListener;
use tower::ServiceExt as _;

/// The largest request header block (request line and every header) accepted; larger ones are
/// answered `431 Request Header Fields Too Large` and the connection is closed. Browsers' and
/// Node's usual limit; the API's own headers are a few hundred bytes.
pub const MAX_HEADER_BYTES: usize = 16 * 1024;

/// The most header fields a request may have (hyper's limit, which the service keeps); more are
/// answered 431.
pub const MAX_HEADERS: usize = 100;

/// Serves `router` on `listener` until `shutdown` completes, then stops accepting and waits
/// for the open connections to finish their requests.
///
/// A client has `read_timeout` to send a request's headers, counted from when the connection
/// is ready for them (so a connection idle that long between requests is closed too); the body
/// has its own deadline in the extractor that reads it. So no connection outlives a stop by
/// more than the read timeout plus the request timeout.
pub async fn serve(
    mut listener: TcpListener,
    router: Router,
    read_timeout: Duration,
    shutdown: impl Future<Output = ()> + Send + 'static,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        .max_header_size(MAX_HEADER_BYTES);
    let graceful = GracefulShutdown::new();
    tokio::pin!(shutdown);
    loop {
        // `Listener::accept` retries failed accepts itself (and sleeps on EMFILE).
        let (io, remote) = tokio::select! {
            accepted = Listener::accept(&mut listener) => accepted,
            () = &mut shutdown => break,
        };
        // The peer's address, for the failed-authentication limit (see `rate_limit`).
        let service = TowerToHyperService::new(router.clone().map_request(
            move |mut request: Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(remote));
                request
            },
        ));
        let connection = graceful.watch(builder.serve_connection(TokioIo::new(io), service));
        tokio::spawn(async move {
            if let Err(e) = connection.await {
                // A client that was too slow, sent a malformed request or went away.
                tracing::debug!(%remote, error = %e, "connection ended");
            }
        });
    }
    drop(listener);
    tracing::info!(
        connections = graceful.count(),
        "not accepting any more connections; draining"
    );
    graceful.shutdown().await;
}
