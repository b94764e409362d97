//! Tenants: whose data a request reads and writes, and where each tenant's
//! data lives.
//!
//! Isolation is physical, as Tempo, Loki and Mimir do it: each tenant is a
//! whole engine of its own (its WAL, hot tier, parts, payloads and
//! full-text index) in `DATA_DIR/tenants/<id>` (and under
//! `PREFIX/tenants/<id>` of the bucket). Records without a tenant live in
//! the data directory itself, the *home* space. A request is bound to one
//! space before any handler runs ([`Tenant`], set by `crate::gate`), so no
//! query, index or payload lookup can reach another tenant's records: they
//! are not in the engine it asks. Retention and erasure are per space for
//! the same reason.

pub mod spaces;

#[cfg(test)]
mod props;

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

pub use spaces::{Arrival, Space, Spaces};

/// A tenant's name: 1 to 64 of `A-Z a-z 0-9 . _ -`, not starting with a
/// dot (it names a directory and a bucket prefix).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TenantId(Arc<str>);

impl TenantId {
    pub const MAX_LEN: usize = 64;

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl FromStr for TenantId {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if s.is_empty() || s.len() > Self::MAX_LEN {
            return Err(format!("tenant {s:?}: must be 1 to {} characters long", Self::MAX_LEN));
        }
        if let Some(c) = s
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
        {
            return Err(format!(
                "tenant {s:?}: {c:?} is not allowed (use A-Z, a-z, 0-9, '.', '_', '-')"
            ));
        }
        if s.starts_with('.') {
            return Err(format!("tenant {s:?}: must not start with '.'"));
        }
        Ok(TenantId(s.into()))
    }
}

impl fmt::Display for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for TenantId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?}", &*self.0)
    }
}

/// The space a request is bound to: a tenant's, or the home space
/// (`None`). The gate puts one in every request it admits; handlers take
/// it as an extractor (`crate::gate` has both sides).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Tenant(pub Option<TenantId>);

impl Tenant {
    pub const HOME: Tenant = Tenant(None);

    /// For log lines and the audit log: the tenant's name, or `-`.
    pub fn label(&self) -> &str {
        self.0.as_ref().map_or("-", TenantId::as_str)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tenant_names_are_safe_directory_names() {
        for ok in ["acme", "team-7", "a.b_c", "A", &"x".repeat(64)] {
            assert_eq!(ok.parse::<TenantId>().unwrap().as_str(), ok);
        }
        for bad in [
            "",
            ".",
            "..",
            ".hidden",
            "a/b",
            "a\\b",
            "a b",
            "é",
            "a\0",
            &"x".repeat(65),
        ] {
            let e = bad.parse::<TenantId>().unwrap_err();
            assert!(e.starts_with("tenant "), "{bad:?}: {e}");
        }
    }

    proptest::proptest! {
        #[test]
        fn a_tenant_name_that_parses_is_one_safe_path_segment(text in "\\PC{0,70}") {
            if let Ok(t) = text.parse::<TenantId>() {
                proptest::prop_assert_eq!(t.as_str(), text.as_str());
                let segments: Vec<_> = std::path::Path::new(&text).components().collect();
                proptest::prop_assert!(
                    matches!(segments.as_slice(), [std::path::Component::Normal(_)]),
                    "{:?}", text
                );
            }
        }
    }
}
