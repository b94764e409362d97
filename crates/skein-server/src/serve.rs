//! `skein serve`: bind every listener (failing fast on a busy port), recover
//! the engine while health endpoints already answer, serve, and on shutdown
//! stop accepting, finish in-flight requests, flush and exit.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::routing::post;
use axum::serve::ListenerExt;
use skein_engine::{Engine, EngineOptions};
use tokio::net::TcpListener;
use tokio::sync::watch;

use crate::app::App;
use crate::config::ServerConfig;

#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("cannot listen on {addr} ({what}): {source}{hint}")]
    Bind {
        addr: SocketAddr,
        what: &'static str,
        hint: &'static str,
        source: std::io::Error,
    },
    #[error("{0}")]
    Engine(#[from] skein_engine::Error),
    #[error("{0}")]
    Other(String),
}

async fn bind(addr: SocketAddr, what: &'static str, flag: &'static str) -> Result<TcpListener, ServeError> {
    TcpListener::bind(addr).await.map_err(|source| ServeError::Bind {
        addr,
        what,
        hint: if source.kind() == std::io::ErrorKind::AddrInUse {
            flag
        } else {
            ""
        },
        source,
    })
}

/// Answers go out as soon as they are written: a response written in more
/// than one piece (headers, then a large or streamed body; an SSE event)
/// must not wait for the client's delayed ACK.
fn no_delay(conn: &tokio::net::TcpStream) {
    if let Err(e) = conn.set_nodelay(true) {
        tracing::debug!("TCP_NODELAY: {e}");
    }
}

/// The router of the API port: ingest, health, metrics, the query API
/// (`api::routes`) and the web UI (`ui::routes`).
pub fn api_router(app: Arc<App>) -> Router {
    Router::new()
        .merge(crate::otlp_http::routes())
        .merge(crate::health::routes())
        .route("/api/v1/spans", post(crate::spans_api::post_spans))
        .merge(crate::prometheus::routes())
        .merge(crate::api::routes())
        .merge(crate::ui::routes())
        .layer(axum::middleware::from_fn(crate::ui::metrics_page_for_browsers))
        .layer(DefaultBodyLimit::disable())
        .with_state(app)
}

/// The router of the API port with `/mcp`: the MCP server, whose tools
/// ask the API router in process.
pub fn api_router_with_mcp(app: Arc<App>) -> Router {
    let config = &app.config;
    let options = crate::mcp::McpOptions {
        max_bytes: config.mcp_max_bytes,
        skill: config.skill,
    };
    let bind = config.api_addr;
    let api = api_router(app.clone());
    let mcp = crate::mcp::SkeinMcp::new(crate::mcp::backend::InProcess::new(api.clone()), options);
    // Tokens are checked once, outside: MCP's in-process calls to the API
    // are on behalf of a request already admitted.
    // The audit log is outside the token check: refused admin attempts
    // are recorded too.
    api.merge(crate::mcp::transport::router(mcp, bind))
        .layer(axum::middleware::from_fn_with_state(app.clone(), crate::gate::require))
        .layer(axum::middleware::from_fn_with_state(
            app,
            crate::audit_layer::middleware,
        ))
}

/// The router of the OTLP/HTTP port.
pub fn otlp_http_router(app: Arc<App>) -> Router {
    Router::new()
        .merge(crate::otlp_http::routes())
        .merge(crate::health::routes())
        .layer(DefaultBodyLimit::disable())
        .layer(axum::middleware::from_fn_with_state(app.clone(), crate::gate::require))
        .with_state(app)
}

/// Reads the tokens file again on each SIGHUP.
async fn reload_tokens_on_hangup(app: Arc<App>) {
    #[cfg(unix)]
    {
        let Ok(mut hup) = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) else {
            tracing::warn!("cannot listen for SIGHUP: the tokens file is read at start only");
            return;
        };
        while hup.recv().await.is_some() {
            let mut entry = match app.reload_tokens() {
                Ok(n) => {
                    tracing::info!("SIGHUP: {n} tokens in force");
                    let mut e = crate::audit::Entry::now("reload tokens", "ok");
                    e.summary = format!("{n} tokens in force");
                    e
                }
                Err(err) => {
                    tracing::error!("SIGHUP: the tokens in force stay as they were: {err}");
                    let mut e = crate::audit::Entry::now("reload tokens", "error");
                    e.summary = format!("the tokens in force stay as they were: {err}");
                    e
                }
            };
            entry.who = Some("SIGHUP".into());
            crate::audit_layer::record(&app, entry).await;
        }
    }
    #[cfg(not(unix))]
    let _ = app;
}

/// Runs the server until `shutdown` resolves; returns once data is flushed.
pub async fn run(config: ServerConfig, shutdown: impl Future<Output = ()> + Send + 'static) -> Result<(), ServeError> {
    crate::auth::check_exposure(
        &[
            (config.otlp_grpc_addr, "--otlp-grpc-addr"),
            (config.otlp_http_addr, "--otlp-http-addr"),
            (config.api_addr, "--api-addr"),
        ],
        config.tokens.is_some(),
        config.allow_unauthenticated,
    )
    .map_err(ServeError::Other)?;
    let grpc = bind(
        config.otlp_grpc_addr,
        "OTLP/gRPC",
        " — is another skein (or collector) running? Pick another port with --otlp-grpc-addr",
    )
    .await?;
    let otlp_http = bind(
        config.otlp_http_addr,
        "OTLP/HTTP",
        " — is another skein (or collector) running? Pick another port with --otlp-http-addr",
    )
    .await?;
    let api = bind(
        config.api_addr,
        "API",
        " — is another skein running? Pick another port with --api-addr",
    )
    .await?;
    let addrs = (grpc.local_addr(), otlp_http.local_addr(), api.local_addr());
    let app = Arc::new(App::new(config.clone()));
    let (stop_tx, stop_rx) = watch::channel(false);
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|s| *s).await;
    };

    let (api_server, http_server, grpc_server) = match config.tls.clone() {
        None => {
            let api_server = tokio::spawn(
                axum::serve(
                    api.tap_io(|c| no_delay(c)),
                    api_router_with_mcp(app.clone()).into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_graceful_shutdown(stopped(stop_rx.clone()))
                .into_future(),
            );
            let http_server = tokio::spawn(
                axum::serve(
                    otlp_http.tap_io(|c| no_delay(c)),
                    otlp_http_router(app.clone()).into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_graceful_shutdown(stopped(stop_rx.clone()))
                .into_future(),
            );
            let grpc_routes = crate::otlp_grpc::router(app.clone());
            let grpc_stop = stopped(stop_rx.clone());
            let grpc_server = tokio::spawn(async move {
                tonic::transport::Server::builder()
                    .concurrency_limit_per_connection(64)
                    .add_routes(grpc_routes)
                    .serve_with_incoming_shutdown(
                        tokio_stream::StreamExt::map(tokio_stream::wrappers::TcpListenerStream::new(grpc), |conn| {
                            conn.inspect(no_delay)
                        }),
                        grpc_stop,
                    )
                    .await
                    .map_err(|e| e.to_string())
            });
            (api_server, http_server, grpc_server)
        }
        Some(tls) => {
            let tls_listener = |l: TcpListener| {
                crate::tls::TlsListener::new(l, tls.clone())
                    .map_err(|e| ServeError::Other(format!("TLS listener: {e}")))
            };
            // `tap_io` (doing nothing: the accept loop set TCP_NODELAY)
            // gives the routers the peer's address as `ConnectInfo`.
            let api_server = tokio::spawn(
                axum::serve(
                    tls_listener(api)?.tap_io(|_| {}),
                    api_router_with_mcp(app.clone()).into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_graceful_shutdown(stopped(stop_rx.clone()))
                .into_future(),
            );
            let http_server = tokio::spawn(
                axum::serve(
                    tls_listener(otlp_http)?.tap_io(|_| {}),
                    otlp_http_router(app.clone()).into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_graceful_shutdown(stopped(stop_rx.clone()))
                .into_future(),
            );
            let grpc_routes = crate::otlp_grpc::router(app.clone());
            let grpc_stop = stopped(stop_rx.clone());
            let incoming = tls_listener(grpc)?.into_stream();
            let grpc_server = tokio::spawn(async move {
                tonic::transport::Server::builder()
                    .concurrency_limit_per_connection(64)
                    .add_routes(grpc_routes)
                    .serve_with_incoming_shutdown(incoming, grpc_stop)
                    .await
                    .map_err(|e| e.to_string())
            });
            (api_server, http_server, grpc_server)
        }
    };
    if app.config.auth_tokens.is_some() {
        tokio::spawn(reload_tokens_on_hangup(app.clone()));
    }
    tracing::info!(
        "listening{}: OTLP/gRPC {}, OTLP/HTTP {}, API {}",
        if config.tls.is_some() { " (TLS)" } else { "" },
        addrs.0.map(|a| a.to_string()).unwrap_or_default(),
        addrs.1.map(|a| a.to_string()).unwrap_or_default(),
        addrs.2.map(|a| a.to_string()).unwrap_or_default()
    );

    // Recover while the health endpoints already answer (readyz: starting).
    let mut opts = EngineOptions::new(&config.data_dir);
    opts.durability = config.durability;
    opts.hot_max_bytes = config.hot_max_bytes;
    opts.hot_max_age = config.hot_max_age;
    opts.payloads.threshold = config.payload_threshold;
    opts.page_cache_bytes = config.page_cache_bytes as u64;
    opts.object_storage = config.object_storage.clone();
    opts.retention = config.retention.clone();
    opts.retention_interval = config.retention_interval;
    opts.refresh_interval = config.refresh_interval;
    opts.min_free_disk = config.min_free_disk;
    opts.on_disk_full = config.on_disk_full;
    if let Some(p) = &config.pricing {
        opts.pricing = p.clone();
    }
    crate::api::llm_views::set_pricing(opts.pricing.clone());
    opts.wal_recovery = if config.wal_salvage {
        skein_engine::RecoveryMode::Salvage
    } else {
        skein_engine::RecoveryMode::Strict
    };
    let shutdown = shutdown;
    tokio::pin!(shutdown);
    // With --storage-wait, a bucket that cannot be reached yet (down,
    // missing, refusing the credentials) is waited for, saying so in
    // /readyz, instead of stopping the start.
    let mut delay = std::time::Duration::from_secs(1);
    let engine = loop {
        let o = opts.clone();
        let opened = tokio::task::spawn_blocking(move || Engine::open(o))
            .await
            .map_err(|e| ServeError::Other(e.to_string()))?;
        match opened {
            Ok(e) => break Arc::new(e),
            Err(e @ skein_engine::Error::Storage { .. }) if config.storage_wait => {
                let reason = e.to_string();
                tracing::warn!("waiting for object storage (--storage-wait): {reason}; next try in {delay:?}");
                app.set_waiting(Some(reason));
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = &mut shutdown => {
                        let _ = stop_tx.send(true);
                        return Ok(());
                    }
                }
                delay = (delay * 2).min(std::time::Duration::from_secs(30));
            }
            Err(e) => {
                let _ = stop_tx.send(true);
                return Err(ServeError::Engine(e));
            }
        }
    };
    app.set_waiting(None);
    app.set_engine(engine.clone(), opts);
    app.open_existing_tenants().await;
    tracing::info!("ready: data dir {}", config.data_dir.display());

    (&mut shutdown).await;
    tracing::info!("shutting down: finishing in-flight requests");
    let _ = stop_tx.send(true);
    let drain = async {
        let _ = api_server.await;
        let _ = http_server.await;
        let _ = grpc_server.await;
    };
    if tokio::time::timeout(config.shutdown_timeout, drain).await.is_err() {
        tracing::warn!("in-flight requests did not finish within {:?}", config.shutdown_timeout);
    }
    app.begin_shutdown();
    let spaces = app.spaces();
    let wait = config.shutdown_timeout;
    tokio::task::spawn_blocking(move || {
        // Tenants first, the home engine last; each flushes its hot tier.
        for space in spaces.iter().rev() {
            space.engine.close()?;
        }
        // Parts on object storage: give the last ones a chance to reach the
        // bucket. Those that do not stay staged and go up after a restart.
        if !spaces.iter().all(|s| s.engine.wait_uploaded(wait)) {
            tracing::warn!("some parts are not uploaded yet; they stay on local disk until the next start");
        }
        Ok::<_, skein_engine::Error>(())
    })
    .await
    .map_err(|e| ServeError::Other(e.to_string()))??;
    tracing::info!("flushed; bye");
    Ok(())
}
