//! Who may call what: bearer tokens with scopes, and which scope each
//! route needs. Enforced by `crate::gate` on every HTTP surface (one
//! middleware) and on OTLP/gRPC (an interceptor).
//!
//! Without tokens the server is open, which it allows only on loopback
//! addresses unless `--allow-unauthenticated` says otherwise
//! ([`check_exposure`]). `/healthz` and `/readyz` stay open; `/metrics`
//! needs `read` unless `--metrics-public`.

pub mod limiter;
pub mod tokens;

use std::net::SocketAddr;

use axum::http::Method;

pub use self::limiter::FailureLimiter;
pub use self::tokens::{Scope, Token, TokenSet};

/// The scope a request needs, `None` for the open endpoints.
pub fn required_scope(method: &Method, path: &str, metrics_public: bool) -> Option<Scope> {
    match path {
        "/healthz" | "/readyz" => None,
        "/metrics" if metrics_public => None,
        "/v1/traces" | "/v1/logs" | "/v1/metrics" => Some(Scope::Ingest),
        "/api/v1/spans" | "/api/v1/scores" if method == Method::POST => Some(Scope::Ingest),
        "/prometheus/api/v1/write" => Some(Scope::Ingest),
        "/api/v1/backups" => Some(Scope::Admin),
        // Erasures and their receipts (which name what was erased), and
        // the audit log.
        "/api/v1/erasures" | "/api/v1/audit" => Some(Scope::Admin),
        p if p.starts_with("/api/v1/erasures/") => Some(Scope::Admin),
        _ => Some(Scope::Read),
    }
}

/// Why a request was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// No token, or one that is not known: 401 / UNAUTHENTICATED.
    Unauthenticated,
    /// A known token without the scope: 403 / PERMISSION_DENIED.
    Forbidden(Scope),
    /// A token bound to one tenant, on a request the tenant header names
    /// another for: 403 / PERMISSION_DENIED.
    OtherTenant {
        token: crate::tenancy::TenantId,
        asked: String,
    },
    /// The tenant header holds no tenant name: 400 / INVALID_ARGUMENT.
    BadTenant(String),
    /// Too many failed attempts from this address lately: 429.
    Throttled,
}

impl Refusal {
    pub fn message(&self) -> String {
        match self {
            Refusal::Unauthenticated => {
                "a valid bearer token is required (Authorization: Bearer TOKEN; the CLI's --token)".into()
            }
            Refusal::Forbidden(s) => format!("this token lacks the {} scope", s.as_str()),
            Refusal::OtherTenant { token, asked } => {
                format!("this token is for tenant {token}; it cannot act for tenant {asked:?}")
            }
            Refusal::BadTenant(why) => format!("the tenant header: {why}"),
            Refusal::Throttled => "too many failed authentication attempts from this address; retry later".into(),
        }
    }
}

/// The tenant of a request: the token's own, which a tenant header may
/// only repeat; otherwise the header's (`--tenant-header`, a trusted
/// gateway's), if enabled and present; otherwise the home space.
pub fn tenant_of(token: Option<&Token>, header: Option<&str>) -> Result<crate::tenancy::Tenant, Refusal> {
    use crate::tenancy::{Tenant, TenantId};
    let header = header.map(str::trim).filter(|h| !h.is_empty());
    match (token.and_then(|t| t.tenant.as_ref()), header) {
        (Some(own), Some(asked)) if own.as_str() != asked => Err(Refusal::OtherTenant {
            token: own.clone(),
            asked: asked.to_string(),
        }),
        (Some(own), _) => Ok(Tenant(Some(own.clone()))),
        (None, Some(asked)) => asked
            .parse::<TenantId>()
            .map(|id| Tenant(Some(id)))
            .map_err(Refusal::BadTenant),
        (None, None) => Ok(Tenant::HOME),
    }
}

/// Refuses to serve an address other than loopback without tokens, unless
/// told to.
pub fn check_exposure(
    addrs: &[(SocketAddr, &str)],
    have_tokens: bool,
    allow_unauthenticated: bool,
) -> Result<(), String> {
    if have_tokens || allow_unauthenticated {
        return Ok(());
    }
    match addrs.iter().find(|(a, _)| !a.ip().is_loopback()) {
        Some((a, flag)) => Err(format!(
            "{flag} {a} is reachable from other machines and no tokens are set: give --auth-tokens FILE (or SKEIN_AUTH_TOKENS), or --allow-unauthenticated to serve it open"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_by_route() {
        let get = Method::GET;
        let post = Method::POST;
        assert_eq!(required_scope(&get, "/healthz", false), None);
        assert_eq!(required_scope(&get, "/readyz", false), None);
        assert_eq!(required_scope(&get, "/metrics", false), Some(Scope::Read));
        assert_eq!(required_scope(&get, "/metrics", true), None);
        assert_eq!(required_scope(&post, "/v1/traces", false), Some(Scope::Ingest));
        assert_eq!(required_scope(&post, "/api/v1/spans", false), Some(Scope::Ingest));
        assert_eq!(required_scope(&get, "/api/v1/spans", false), Some(Scope::Read));
        assert_eq!(required_scope(&post, "/api/v1/scores", false), Some(Scope::Ingest));
        assert_eq!(required_scope(&get, "/api/v1/scores", false), Some(Scope::Read));
        assert_eq!(required_scope(&post, "/mcp", false), Some(Scope::Read));
        assert_eq!(required_scope(&post, "/api/v1/backups", false), Some(Scope::Admin));
        assert_eq!(
            required_scope(&post, "/prometheus/api/v1/write", false),
            Some(Scope::Ingest)
        );
        assert_eq!(
            required_scope(&post, "/prometheus/api/v1/query", false),
            Some(Scope::Read)
        );
        assert_eq!(
            required_scope(&get, "/prometheus/api/v1/series", false),
            Some(Scope::Read)
        );
        assert_eq!(required_scope(&get, "/", false), Some(Scope::Read));
        assert_eq!(required_scope(&post, "/api/v1/erasures", false), Some(Scope::Admin));
        assert_eq!(required_scope(&get, "/api/v1/erasures/e1", false), Some(Scope::Admin));
        assert_eq!(required_scope(&get, "/api/v1/audit", false), Some(Scope::Admin));
    }

    #[test]
    fn the_tenant_comes_from_the_token_or_else_the_header() {
        let set = TokenSet::from_toml(
            "[[token]]\nname = \"a\"\nsecret = \"x\"\nscopes = [\"read\"]\ntenant = \"acme\"\n\n[[token]]\nname = \"gw\"\nsecret = \"y\"\nscopes = [\"read\"]\n",
            "f",
        )
        .unwrap();
        let acme = set.find("x");
        let gateway = set.find("y");
        assert_eq!(tenant_of(acme, None).unwrap().label(), "acme");
        assert_eq!(tenant_of(acme, Some("acme")).unwrap().label(), "acme");
        assert!(matches!(
            tenant_of(acme, Some("beta")),
            Err(Refusal::OtherTenant { .. })
        ));
        assert_eq!(tenant_of(gateway, None).unwrap(), crate::tenancy::Tenant::HOME);
        assert_eq!(tenant_of(gateway, Some(" beta ")).unwrap().label(), "beta");
        assert_eq!(tenant_of(None, Some("beta")).unwrap().label(), "beta");
        assert_eq!(tenant_of(None, Some("")).unwrap(), crate::tenancy::Tenant::HOME);
        assert!(matches!(tenant_of(gateway, Some("../x")), Err(Refusal::BadTenant(_))));
    }

    #[test]
    fn exposure() {
        let lo: SocketAddr = "127.0.0.1:7700".parse().unwrap();
        let any: SocketAddr = "0.0.0.0:4318".parse().unwrap();
        assert!(check_exposure(&[(lo, "--api-addr")], false, false).is_ok());
        let e = check_exposure(&[(lo, "--api-addr"), (any, "--otlp-http-addr")], false, false).unwrap_err();
        assert!(e.contains("--otlp-http-addr 0.0.0.0:4318"), "{e}");
        assert!(check_exposure(&[(any, "--otlp-http-addr")], true, false).is_ok());
        assert!(check_exposure(&[(any, "--otlp-http-addr")], false, true).is_ok());
    }
}
