//! TLS on every port (`--tls-cert`, `--tls-key`): rustls with the `ring`
//! provider (the one object_store already brings; no second TLS stack).
//!
//! One certificate serves the API, OTLP/HTTP and OTLP/gRPC ports. ALPN
//! offers `h2` and `http/1.1`: gRPC clients insist on `h2`, browsers and
//! the CLI take either. Handshakes run in their own tasks, so a client
//! that connects and says nothing (or speaks plain HTTP) holds up nobody:
//! its handshake fails or times out and the connection is closed.

use std::io;
use std::net::SocketAddr;
use std::path::Path;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client has to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Handshaken connections waiting for the server to take them.
const ACCEPT_QUEUE: usize = 64;

/// The server's TLS configuration, from a PEM certificate chain and a PEM
/// private key (PKCS#8, PKCS#1 or SEC1). Every failure names the file.
pub fn load(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(cert)
        .map_err(|e| format!("--tls-cert {}: {}", cert.display(), pem_error(&e)))?
        .collect::<Result<_, _>>()
        .map_err(|e| format!("--tls-cert {}: {}", cert.display(), pem_error(&e)))?;
    if certs.is_empty() {
        return Err(format!(
            "--tls-cert {}: no certificate in it (expected PEM: -----BEGIN CERTIFICATE-----)",
            cert.display()
        ));
    }
    let key_der = PrivateKeyDer::from_pem_file(key).map_err(|e| {
        format!(
            "--tls-key {}: {} (expected a PEM private key: PKCS#8, RSA or EC)",
            key.display(),
            pem_error(&e)
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS: {e}"))?
        .with_no_client_auth()
        .with_single_cert(certs, key_der)
        .map_err(|e| format!("--tls-cert {} with --tls-key {}: {e}", cert.display(), key.display()))?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error as E;
    match e {
        E::Io(io) => io.to_string(),
        E::NoItemsFound => "no PEM item of the expected kind in it".into(),
        other => format!("not valid PEM ({other:?})"),
    }
}

/// A connection whose TLS handshake is done, with the peer's address (for
/// the failed-attempt limiter and the audit log).
pub struct TlsConn {
    stream: TlsStream<TcpStream>,
    local: Option<SocketAddr>,
    remote: SocketAddr,
}

impl AsyncRead for TlsConn {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_read(cx, buf)
    }
}

impl AsyncWrite for TlsConn {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write(cx, buf)
    }
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().stream).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }
}

/// tonic reads the peer's address from this (`Request::remote_addr`), as
/// for a plain TCP connection.
impl tonic::transport::server::Connected for TlsConn {
    type ConnectInfo = tonic::transport::server::TcpConnectInfo;
    fn connect_info(&self) -> Self::ConnectInfo {
        tonic::transport::server::TcpConnectInfo {
            local_addr: self.local,
            remote_addr: Some(self.remote),
        }
    }
}

/// Accepts TCP connections on `tcp` and hands out those that complete a
/// TLS handshake. The accept loop ends when the receiver is dropped.
pub struct TlsListener {
    rx: mpsc::Receiver<(TlsConn, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, config: Arc<rustls::ServerConfig>) -> io::Result<TlsListener> {
        let local = tcp.local_addr()?;
        let (tx, rx) = mpsc::channel(ACCEPT_QUEUE);
        tokio::spawn(accept_loop(tcp, TlsAcceptor::from(config), tx));
        Ok(TlsListener { rx, local })
    }

    /// The handshaken connections as a stream, for tonic's
    /// `serve_with_incoming_shutdown`.
    pub fn into_stream(self) -> impl tokio_stream::Stream<Item = io::Result<TlsConn>> {
        tokio_stream::StreamExt::map(tokio_stream::wrappers::ReceiverStream::new(self.rx), |(c, _)| Ok(c))
    }
}

async fn accept_loop(tcp: TcpListener, acceptor: TlsAcceptor, tx: mpsc::Sender<(TlsConn, SocketAddr)>) {
    loop {
        let (conn, remote) = tokio::select! {
            r = tcp.accept() => match r {
                Ok(c) => c,
                Err(e) => {
                    // Out of file descriptors and the like: back off
                    // rather than spin (as axum's own accept loop does).
                    tracing::warn!("TLS accept on {:?}: {e}", tcp.local_addr().ok());
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = tx.closed() => return,
        };
        if let Err(e) = conn.set_nodelay(true) {
            tracing::debug!("TCP_NODELAY: {e}");
        }
        let local = conn.local_addr().ok();
        let acceptor = acceptor.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(conn)).await {
                Ok(Ok(stream)) => {
                    let _ = tx.send((TlsConn { stream, local, remote }, remote)).await;
                }
                // A plain-HTTP client, a wrong certificate on the other
                // side, a port scanner: nothing to answer.
                Ok(Err(e)) => tracing::debug!("TLS handshake with {remote}: {e}"),
                Err(_) => tracing::debug!("TLS handshake with {remote}: timed out"),
            }
        });
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsConn;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.rx.recv().await {
            Some(c) => c,
            // The accept loop only ends once this receiver is gone, so
            // this does not happen; wait for ever rather than panic.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> io::Result<Self::Addr> {
        Ok(self.local)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreadable_or_invalid_files_are_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        let e = load(&missing, &missing).unwrap_err();
        assert!(e.contains("--tls-cert") && e.contains("missing.pem"), "{e}");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        let e = load(&junk, &junk).unwrap_err();
        assert!(
            e.contains("--tls-cert") && e.contains("junk.pem") && e.contains("no certificate"),
            "{e}"
        );
    }
}
