//! `/mcp` on the API port: MCP over streamable HTTP, stateless (each POST
//! is answered on its own, as JSON), behind the checks against DNS
//! rebinding: the `Host` must be a loopback name or the address the API is
//! bound to, and a browser's `Origin` must be such a host too; anything
//! else is refused with 403 before the request reaches a tool.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use axum::Router;
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::{StreamableHttpServerConfig, StreamableHttpService};

use super::SkeinMcp;

/// Where the MCP endpoint is mounted.
pub const PATH: &str = "/mcp";

/// The `Host` values accepted when the API listens on `bind` (any port).
pub fn allowed_hosts(bind: SocketAddr) -> Vec<String> {
    let mut hosts = vec!["localhost".to_string(), "127.0.0.1".to_string(), "::1".to_string()];
    let ip = bind.ip();
    if !ip.is_unspecified() && !ip.is_loopback() {
        hosts.push(ip.to_string());
    }
    hosts
}

/// The browser origins accepted (any port): `http://` and `https://` of
/// the allowed hosts.
pub fn allowed_origins(bind: SocketAddr) -> Vec<String> {
    let mut origins = Vec::new();
    for host in allowed_hosts(bind) {
        let host = match host.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => format!("[{host}]"),
            _ => host,
        };
        for scheme in ["http", "https"] {
            origins.push(format!("{scheme}://{host}:*"));
        }
    }
    origins
}

/// The router of `/mcp`, serving `mcp` for an API bound to `bind`.
///
/// API tokens (a later issue) are checked here too: as a layer on this
/// router, in front of the MCP service, with the same tokens as `/api/v1`.
pub fn router(mcp: SkeinMcp, bind: SocketAddr) -> Router {
    let config = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_allowed_hosts(allowed_hosts(bind))
        .with_allowed_origins(allowed_origins(bind))
        .enforce_origin_validation();
    let service = StreamableHttpService::new(
        move || Ok(mcp.clone()),
        Arc::new(NeverSessionManager::default()),
        config,
    );
    Router::new().nest_service(PATH, service)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_and_the_bound_address_are_allowed() {
        let local: SocketAddr = "127.0.0.1:7700".parse().unwrap();
        assert_eq!(allowed_hosts(local), ["localhost", "127.0.0.1", "::1"]);
        let lan: SocketAddr = "10.1.2.3:7700".parse().unwrap();
        assert!(allowed_hosts(lan).contains(&"10.1.2.3".to_string()));
        let any: SocketAddr = "0.0.0.0:7700".parse().unwrap();
        assert_eq!(allowed_hosts(any).len(), 3);
        assert!(allowed_origins(local).contains(&"http://[::1]:*".to_string()));
        assert!(allowed_origins(lan).contains(&"https://10.1.2.3:*".to_string()));
    }
}
