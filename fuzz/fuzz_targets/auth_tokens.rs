//! The token parsers of `--auth-tokens` (TOML), `SKEIN_AUTH_TOKENS` (the
//! short form), the `Authorization: Bearer` header and the tenant header
//! (`--tenant-header`), on any text.
#![no_main]

use libfuzzer_sys::fuzz_target;
use skein_server::auth::TokenSet;
use skein_server::auth::tokens::bearer;
use skein_server::tenancy::TenantId;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    for set in [TokenSet::from_toml(text, "f"), TokenSet::from_short(text, "f")].into_iter().flatten() {
        assert!(!set.is_empty(), "a parsed token set has tokens");
        // Lookup is total: any secret finds a token or none.
        let _ = set.find(text);
    }
    if let Ok(t) = text.parse::<TenantId>() {
        // A tenant name is a safe single path segment.
        assert_eq!(t.as_str(), text);
        assert!(!text.contains(['/', '\\', '\0']) && !text.starts_with('.'), "{text:?}");
        assert_eq!(std::path::Path::new(text).components().count(), 1, "{text:?}");
    }
    if let Ok(tenant) = skein_server::auth::tenant_of(None, Some(text)) {
        assert!(tenant.0.is_none() || text.trim().parse::<TenantId>().is_ok());
    }
    if let Some(secret) = bearer(text) {
        assert!(!secret.is_empty(), "an empty bearer secret is no secret");
        assert_eq!(secret, secret.trim(), "the secret is trimmed");
        assert!(text.len() > secret.len(), "the scheme is not part of the secret");
    }
});
