//! The token set: who may do what, from `--auth-tokens FILE` (TOML) or the
//! short form in `SKEIN_AUTH_TOKENS` (`read:SECRET,ingest:SECRET`).
//!
//! Secrets are kept only as SHA-256 digests, and a presented secret is
//! compared with every token's digest in constant time, so neither the
//! time an answer takes nor a dump of the process tells a secret.

use serde::Deserialize;
use sha2::{Digest, Sha256};

/// What a token allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scope {
    /// Write telemetry (OTLP, the JSON span API, scores).
    Ingest,
    /// Read everything (API, tail, MCP, UI, `/metrics`).
    Read,
    /// Operator actions; implies the other two.
    Admin,
}

impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "ingest" => Some(Scope::Ingest),
            "read" => Some(Scope::Read),
            "admin" => Some(Scope::Admin),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Ingest => "ingest",
            Scope::Read => "read",
            Scope::Admin => "admin",
        }
    }
}

#[derive(Debug, Clone)]
pub struct Token {
    pub name: String,
    digest: [u8; 32],
    pub scopes: Vec<Scope>,
    /// The only tenant this token reads and writes (none: the home space).
    pub tenant: Option<crate::tenancy::TenantId>,
}

impl Token {
    pub fn allows(&self, scope: Scope) -> bool {
        self.scopes.iter().any(|s| *s == scope || *s == Scope::Admin)
    }
}

#[derive(Debug, Clone, Default)]
pub struct TokenSet {
    tokens: Vec<Token>,
}

/// The file's form.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default)]
    token: Vec<FileToken>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToken {
    name: String,
    secret: Option<String>,
    sha256: Option<String>,
    scopes: Vec<String>,
    tenant: Option<String>,
}

fn digest(secret: &str) -> [u8; 32] {
    Sha256::digest(secret.as_bytes()).into()
}

/// Equality of two digests in time independent of where they differ.
fn same(a: &[u8; 32], b: &[u8; 32]) -> bool {
    let diff = a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y));
    std::hint::black_box(diff) == 0
}

/// The 1-based line of the `n`th (0-based) `[[token]]` table in `text`.
fn line_of_token(text: &str, n: usize) -> usize {
    text.lines()
        .enumerate()
        .filter(|(_, l)| l.trim_start().starts_with("[[token]]"))
        .nth(n)
        .map_or(1, |(i, _)| i + 1)
}

impl TokenSet {
    /// Reads and parses a tokens file.
    pub fn load(path: &std::path::Path) -> Result<TokenSet, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read tokens file {}: {e}", path.display()))?;
        TokenSet::from_toml(&text, &path.display().to_string())
    }

    /// Parses the TOML form; `what` names the file in errors.
    pub fn from_toml(text: &str, what: &str) -> Result<TokenSet, String> {
        let file: File = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| {
                    text.as_bytes()[..s.start.min(text.len())]
                        .iter()
                        .filter(|&&b| b == b'\n')
                        .count()
                        + 1
                })
                .unwrap_or(1);
            format!("{what}, line {line}: {}", e.message())
        })?;
        let mut set = TokenSet::default();
        for (n, t) in file.token.into_iter().enumerate() {
            let at = || format!("{what}, line {} (token {:?})", line_of_token(text, n), t.name);
            let digest = match (&t.secret, &t.sha256) {
                (Some(s), None) if !s.is_empty() => digest(s),
                (None, Some(h)) => {
                    let bytes = hex::decode(h.trim()).map_err(|_| format!("{}: sha256 is not hex", at()))?;
                    bytes
                        .try_into()
                        .map_err(|_| format!("{}: sha256 must be 64 hex digits", at()))?
                }
                (Some(_), Some(_)) => return Err(format!("{}: give secret or sha256, not both", at())),
                _ => return Err(format!("{}: needs a non-empty secret or a sha256", at())),
            };
            let scopes = parse_scopes(t.scopes.iter().map(String::as_str)).map_err(|e| format!("{}: {e}", at()))?;
            let tenant = t
                .tenant
                .as_deref()
                .map(str::parse)
                .transpose()
                .map_err(|e| format!("{}: {e}", at()))?;
            set.add(t.name.clone(), digest, scopes, tenant)
                .map_err(|e| format!("{}: {e}", at()))?;
        }
        if set.tokens.is_empty() {
            return Err(format!("{what}: no [[token]] entries"));
        }
        Ok(set)
    }

    /// Parses the short form, `scope[+scope]:SECRET` separated by commas,
    /// e.g. `read:r3ad,ingest+read:b0th`.
    pub fn from_short(text: &str, what: &str) -> Result<TokenSet, String> {
        let mut set = TokenSet::default();
        for (i, item) in text.split(',').map(str::trim).filter(|s| !s.is_empty()).enumerate() {
            let Some((scopes, secret)) = item.split_once(':') else {
                return Err(format!("{what}, entry {}: use scope:SECRET", i + 1));
            };
            if secret.is_empty() {
                return Err(format!("{what}, entry {}: empty secret", i + 1));
            }
            let scopes = parse_scopes(scopes.split('+')).map_err(|e| format!("{what}, entry {}: {e}", i + 1))?;
            set.add(format!("token-{}", i + 1), digest(secret), scopes, None)
                .map_err(|e| format!("{what}, entry {}: {e}", i + 1))?;
        }
        if set.tokens.is_empty() {
            return Err(format!("{what}: no tokens"));
        }
        Ok(set)
    }

    fn add(
        &mut self,
        name: String,
        digest: [u8; 32],
        scopes: Vec<Scope>,
        tenant: Option<crate::tenancy::TenantId>,
    ) -> Result<(), String> {
        if self.tokens.iter().any(|t| t.name == name) {
            return Err(format!("a second token named {name:?}"));
        }
        if self.tokens.iter().any(|t| same(&t.digest, &digest)) {
            return Err("the same secret as another token".into());
        }
        self.tokens.push(Token {
            name,
            digest,
            scopes,
            tenant,
        });
        Ok(())
    }

    /// The token whose secret this is. Every token is compared, whichever
    /// matches.
    pub fn find(&self, secret: &str) -> Option<&Token> {
        let d = digest(secret);
        let mut found = None;
        for t in &self.tokens {
            if same(&t.digest, &d) && found.is_none() {
                found = Some(t);
            }
        }
        found
    }

    pub fn len(&self) -> usize {
        self.tokens.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }
}

fn parse_scopes<'a>(scopes: impl Iterator<Item = &'a str>) -> Result<Vec<Scope>, String> {
    let mut out = Vec::new();
    for s in scopes {
        let scope = Scope::parse(s.trim()).ok_or_else(|| format!("unknown scope {s:?}: use ingest, read or admin"))?;
        if !out.contains(&scope) {
            out.push(scope);
        }
    }
    if out.is_empty() {
        return Err("no scopes".into());
    }
    Ok(out)
}

/// The secret of an `Authorization: Bearer SECRET` value.
pub fn bearer(header: &str) -> Option<&str> {
    let (scheme, rest) = header.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| rest.trim())
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_form_names_the_line_of_a_bad_entry() {
        let ok = TokenSet::from_toml(
            "[[token]]\nname = \"ci\"\nsecret = \"s3cret\"\nscopes = [\"ingest\"]\n\n[[token]]\nname = \"ro\"\nsha256 = \"2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b\"\nscopes = [\"read\"]\n",
            "tokens.toml",
        )
        .unwrap();
        assert_eq!(ok.len(), 2);
        let ci = ok.find("s3cret").unwrap();
        assert!(ci.allows(Scope::Ingest) && !ci.allows(Scope::Read));
        // sha256("secret")
        assert_eq!(ok.find("secret").unwrap().name, "ro");
        assert!(ok.find("nope").is_none());

        let bad = TokenSet::from_toml(
            "[[token]]\nname = \"a\"\nsecret = \"x\"\nscopes = [\"read\"]\n\n[[token]]\nname = \"b\"\nsecret = \"y\"\nscopes = [\"wrute\"]\n",
            "tokens.toml",
        )
        .unwrap_err();
        assert!(bad.contains("line 6") && bad.contains("\"wrute\""), "{bad}");
        let unknown = TokenSet::from_toml(
            "[[token]]\nname = \"a\"\nsecret = \"x\"\nscopes = [\"read\"]\nrole = \"x\"\n",
            "f",
        )
        .unwrap_err();
        assert!(unknown.contains("line 5") && unknown.contains("role"), "{unknown}");
        let tenant = TokenSet::from_toml(
            "[[token]]\nname = \"a\"\nsecret = \"x\"\nscopes = [\"read\"]\ntenant = \"acme\"\n\n[[token]]\nname = \"b\"\nsecret = \"y\"\nscopes = [\"read\"]\ntenant = \"../etc\"\n",
            "f",
        )
        .unwrap_err();
        assert!(tenant.contains("line 7") && tenant.contains("\"../etc\""), "{tenant}");
        let acme = TokenSet::from_toml(
            "[[token]]\nname = \"a\"\nsecret = \"x\"\nscopes = [\"read\"]\ntenant = \"acme\"\n",
            "f",
        )
        .unwrap();
        assert_eq!(acme.find("x").unwrap().tenant.as_ref().unwrap().as_str(), "acme");
        assert!(TokenSet::from_toml("", "f").unwrap_err().contains("no [[token]]"));
        assert!(
            TokenSet::from_toml("[[token]]\nname = \"a\"\nscopes = [\"read\"]\n", "f")
                .unwrap_err()
                .contains("secret or a sha256")
        );
    }

    #[test]
    fn the_short_form() {
        let s = TokenSet::from_short("read:r3ad, ingest+read:b0th", "SKEIN_AUTH_TOKENS").unwrap();
        assert!(s.find("r3ad").unwrap().allows(Scope::Read));
        assert!(!s.find("r3ad").unwrap().allows(Scope::Ingest));
        assert!(s.find("b0th").unwrap().allows(Scope::Ingest));
        assert!(TokenSet::from_short("read", "E").unwrap_err().contains("entry 1"));
        assert!(
            TokenSet::from_short("read:a,all:b", "E")
                .unwrap_err()
                .contains("entry 2")
        );
        assert!(
            TokenSet::from_short("read:a,ingest:a", "E")
                .unwrap_err()
                .contains("same secret")
        );
        let admin = TokenSet::from_short("admin:x", "E").unwrap();
        assert!(admin.find("x").unwrap().allows(Scope::Ingest));
    }

    #[test]
    fn bearer_values() {
        assert_eq!(bearer("Bearer abc"), Some("abc"));
        assert_eq!(bearer("bearer  abc "), Some("abc"));
        assert_eq!(bearer("Basic abc"), None);
        assert_eq!(bearer("Bearer "), None);
        assert_eq!(bearer("abc"), None);
    }
}

#[cfg(test)]
mod props {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn any_tokens_text_parses_or_is_refused(text in "\\PC{0,200}") {
            let _ = TokenSet::from_toml(&text, "f");
            let _ = TokenSet::from_toml(&format!("[[token]]\n{text}"), "f");
            let _ = TokenSet::from_short(&text, "E");
            let _ = bearer(&text);
        }

        #[test]
        fn a_short_form_secret_finds_its_token(secret in "[A-Za-z0-9._~-]{1,40}") {
            let set = TokenSet::from_short(&format!("read:{secret}"), "E").unwrap();
            prop_assert!(set.find(&secret).is_some());
            let other = format!("{secret}x");
            prop_assert!(set.find(&other).is_none());
            let header = format!("Bearer {secret}");
            prop_assert_eq!(bearer(&header), Some(secret.as_str()));
        }
    }
}
