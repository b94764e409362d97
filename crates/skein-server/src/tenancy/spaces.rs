//! The open spaces: the home engine, and one engine per tenant, each
//! opened on the first request for it (or at start, when its directory is
//! already there) and kept open until shutdown.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use skein_engine::{Engine, EngineOptions, Retention};
use tokio::sync::{OnceCell, broadcast};

use super::{Tenant, TenantId};

/// A record that just arrived, for live tails.
#[derive(Clone, Debug)]
pub enum Arrival {
    Span(Arc<skein_model::Span>),
    Log(Arc<skein_model::LogRecord>),
}

/// Where tenants' data directories (and bucket prefixes) live, under the
/// home space's.
pub const TENANTS_DIR: &str = "tenants";

/// One space: an engine and what is kept beside it.
pub struct Space {
    pub tenant: Tenant,
    pub engine: Arc<Engine>,
    /// Records just stored here, for live tails of this space.
    pub arrivals: broadcast::Sender<Arrival>,
    /// SQL over this engine, made on first use.
    sql: OnceLock<Arc<skein_sql::Sql>>,
    /// The Prometheus labels of the engine's series, kept across queries.
    pub prometheus_labels: crate::prometheus::label_cache::LabelCache,
}

impl Space {
    pub fn new(tenant: Tenant, engine: Arc<Engine>) -> Self {
        Space {
            tenant,
            engine,
            arrivals: broadcast::channel(4096).0,
            sql: OnceLock::new(),
            prometheus_labels: Default::default(),
        }
    }

    /// SQL over this space's engine (its memory pool shared by every query
    /// of the space).
    pub fn sql(&self, options: &skein_sql::SqlOptions) -> Result<Arc<skein_sql::Sql>, skein_sql::SqlError> {
        if let Some(s) = self.sql.get() {
            return Ok(s.clone());
        }
        let s = Arc::new(skein_sql::Sql::new(self.engine.clone(), options.clone())?);
        Ok(self.sql.get_or_init(|| s).clone())
    }

    /// SQL queries running now in this space.
    pub fn sql_running(&self) -> usize {
        self.sql.get().map_or(0, |s| s.running())
    }
}

/// Every space of the server.
#[derive(Default)]
pub struct Spaces {
    home: OnceLock<Arc<Space>>,
    /// The home engine's options, from which each tenant's are made.
    template: OnceLock<EngineOptions>,
    /// Retention of particular tenants (`--tenant-retention`); the others
    /// keep the home space's.
    retention: BTreeMap<TenantId, Retention>,
    tenants: parking_lot::Mutex<BTreeMap<TenantId, Arc<OnceCell<Arc<Space>>>>>,
}

impl Spaces {
    pub fn new(retention: BTreeMap<TenantId, Retention>) -> Self {
        Spaces {
            retention,
            ..Default::default()
        }
    }

    /// Sets the home engine, opened with `options`.
    pub fn set_home(&self, engine: Arc<Engine>, options: EngineOptions) {
        let _ = self.template.set(options);
        let _ = self.home.set(Arc::new(Space::new(Tenant::HOME, engine)));
    }

    pub fn home(&self) -> Option<&Arc<Space>> {
        self.home.get()
    }

    /// The space of `tenant`, opening the tenant's engine on first use
    /// (`None` while the home engine is not open: tenants open after it;
    /// `Err`: why the tenant's engine did not open).
    pub async fn get(&self, tenant: &Tenant) -> Option<Result<Arc<Space>, String>> {
        let home = self.home.get()?;
        let Some(id) = &tenant.0 else {
            return Some(Ok(home.clone()));
        };
        let template = self.template.get()?;
        let cell = self.tenants.lock().entry(id.clone()).or_default().clone();
        // The options are made only for the first request (every later one
        // finds the space open).
        let opened = cell
            .get_or_try_init(|| {
                let options = tenant_options(template, id, self.retention.get(id));
                let id = id.clone();
                async move {
                    let engine = tokio::task::spawn_blocking(move || Engine::open(options))
                        .await
                        .map_err(|e| e.to_string())?
                        .map_err(|e| format!("opening tenant {id}: {e}"))?;
                    tracing::info!("tenant {id}: opened");
                    Ok(Arc::new(Space::new(Tenant(Some(id)), Arc::new(engine))))
                }
            })
            .await;
        Some(opened.cloned())
    }

    /// Opens every tenant whose data directory is already there, so their
    /// logs are replayed and their retention runs before anyone asks.
    /// Names that are not tenant names are left alone (and said).
    pub async fn open_existing(&self) -> Vec<(TenantId, String)> {
        let Some(template) = self.template.get() else {
            return Vec::new();
        };
        let mut failed = Vec::new();
        for id in existing_tenants(&template.data_dir) {
            if let Some(Err(e)) = self.get(&Tenant(Some(id.clone()))).await {
                failed.push((id, e));
            }
        }
        failed
    }

    /// The home space and every tenant's open now, home first.
    pub fn all(&self) -> Vec<Arc<Space>> {
        let mut out: Vec<Arc<Space>> = self.home.get().into_iter().cloned().collect();
        out.extend(self.tenants.lock().values().filter_map(|c| c.get().cloned()));
        out
    }
}

/// The tenants with a data directory under `data_dir`.
fn existing_tenants(data_dir: &Path) -> Vec<TenantId> {
    let Ok(entries) = std::fs::read_dir(data_dir.join(TENANTS_DIR)) else {
        return Vec::new();
    };
    let mut ids: Vec<TenantId> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            match name.parse() {
                Ok(id) => Some(id),
                Err(why) => {
                    tracing::warn!("{}: not a tenant's directory ({why})", e.path().display());
                    None
                }
            }
        })
        .collect();
    ids.sort();
    ids
}

/// A tenant's engine options: the home space's, with the tenant's own
/// directory, bucket prefix and cache, and its own retention if it has one.
pub fn tenant_options(home: &EngineOptions, id: &TenantId, retention: Option<&Retention>) -> EngineOptions {
    let mut o = home.clone();
    o.data_dir = home.data_dir.join(TENANTS_DIR).join(id.as_str());
    if let Some(os) = &mut o.object_storage {
        os.remote.url = format!("{}/{TENANTS_DIR}/{id}", os.remote.url.trim_end_matches('/'));
        os.cache_dir = os.cache_dir.join(TENANTS_DIR).join(id.as_str());
    }
    if let Some(r) = retention {
        o.retention = r.clone();
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tenant_gets_its_own_directory_prefix_and_cache() {
        let mut home = EngineOptions::new("/data");
        home.object_storage = Some(skein_engine::ObjectStorageOptions {
            remote: skein_engine::RemoteConfig {
                url: "s3://bucket/skein/".into(),
                options: Vec::new(),
            },
            cache_dir: "/data/cache".into(),
            cache_bytes: 1 << 30,
            read_only: false,
            removal_grace: std::time::Duration::from_secs(60),
        });
        let id: TenantId = "acme".parse().unwrap();
        let week = Retention {
            spans: Some(std::time::Duration::from_secs(7 * 86_400)),
            ..Default::default()
        };
        let o = tenant_options(&home, &id, Some(&week));
        assert_eq!(o.data_dir, Path::new("/data/tenants/acme"));
        let os = o.object_storage.unwrap();
        assert_eq!(os.remote.url, "s3://bucket/skein/tenants/acme");
        assert_eq!(os.cache_dir, Path::new("/data/cache/tenants/acme"));
        assert_eq!(o.retention.spans, week.spans);
        assert!(tenant_options(&home, &id, None).retention.is_forever());
    }

    #[test]
    fn existing_tenants_are_found_by_their_directories() {
        let dir = tempfile::tempdir().unwrap();
        assert!(existing_tenants(dir.path()).is_empty());
        for d in ["b", "a", ".tmp", "not a tenant"] {
            std::fs::create_dir_all(dir.path().join(TENANTS_DIR).join(d)).unwrap();
        }
        std::fs::write(dir.path().join(TENANTS_DIR).join("file"), b"").unwrap();
        let names: Vec<String> = existing_tenants(dir.path()).iter().map(|t| t.to_string()).collect();
        assert_eq!(names, ["a", "b"]);
    }
}
