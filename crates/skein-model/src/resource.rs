//! The producer of telemetry (resource) and the library that emitted it
//! (instrumentation scope). Both are shared by every record of a batch.

use serde::{Deserialize, Serialize};

use crate::value::{KeyValue, find_str};

/// The service name OTel SDKs report when none is configured.
pub const UNKNOWN_SERVICE: &str = "unknown_service";

/// An OTLP resource, with the schema URL of its `Resource*` envelope.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Resource {
    pub attributes: Vec<KeyValue>,
    pub dropped_attributes_count: u32,
    pub entity_refs: Vec<EntityRef>,
    pub schema_url: String,
}

/// OTLP's reference from a resource to an entity (kept so that conversion
/// is lossless; Skein does not interpret it).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct EntityRef {
    pub schema_url: String,
    pub entity_type: String,
    pub id_keys: Vec<String>,
    pub description_keys: Vec<String>,
}

/// An instrumentation scope, with the schema URL of its `Scope*` envelope.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Scope {
    pub name: String,
    pub version: String,
    pub attributes: Vec<KeyValue>,
    pub dropped_attributes_count: u32,
    pub schema_url: String,
}

impl Resource {
    /// `service.name`, or `unknown_service` as the OTel spec prescribes.
    pub fn service_name(&self) -> &str {
        find_str(&self.attributes, "service.name").unwrap_or(UNKNOWN_SERVICE)
    }

    pub fn with_service(name: &str) -> Self {
        Resource {
            attributes: vec![KeyValue::new("service.name", name)],
            ..Default::default()
        }
    }
}
