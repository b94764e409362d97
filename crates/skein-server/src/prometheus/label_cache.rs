//! The Prometheus labels of a space's number series, by series key, kept
//! from one query to the next.
//!
//! Turning a series' OTLP identity into labels (sanitized attribute keys,
//! `job` and `instance` from the resource, the metric's Prometheus name)
//! was a quarter of an instant query over 10k series, and the answer never
//! changes: a series key (`skein_engine::stats::series_key`) hashes all
//! that the labels are made of, the same in every part. Matchers are not
//! part of what is kept; each query applies its own.
//!
//! Bounded: past [`MAX_SERIES`] keys the table starts over, so a space
//! whose series churn pays the derivation again rather than growing.

use skein_engine::hash::FastMap;
use skein_model::MetricPoint;
use skein_promql::{Labels, naming};

/// Series kept at most: at a few hundred bytes of labels each, about
/// 100 MB for a space of this many series (Prometheus keeps every series'
/// labels in memory too).
pub const MAX_SERIES: usize = 1 << 18;

/// A series' labels: its sample's, and its resource's `target_info`'s
/// (derived the first time a query asks).
#[derive(Clone)]
pub struct Derived {
    pub sample: Option<Labels>,
    pub target_info: Option<Option<Labels>>,
}

#[derive(Default)]
pub struct LabelCache {
    by_key: parking_lot::Mutex<FastMap<u64, Derived>>,
}

impl LabelCache {
    /// The labels of the number series `key`, whose point `p` is, derived
    /// now if no query has yet; its `target_info` too when `target_info`.
    pub fn of(&self, key: u64, p: &MetricPoint, target_info: bool) -> Derived {
        if let Some(d) = self.by_key.lock().get(&key)
            && (!target_info || d.target_info.is_some())
        {
            return d.clone();
        }
        let d = Derived {
            sample: naming::samples(p).into_iter().next().map(|(l, _)| l),
            target_info: target_info.then(|| naming::target_info(p)),
        };
        let mut by_key = self.by_key.lock();
        if by_key.len() >= MAX_SERIES {
            by_key.clear();
        }
        by_key.insert(key, d.clone());
        d
    }

    pub fn kept(&self) -> usize {
        self.by_key.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use skein_model::metric::Number;
    use skein_model::{KeyValue, MetricDesc, MetricKind, PointValue, Resource, Scope};

    use super::*;

    fn point(host: &str) -> MetricPoint {
        let mut resource = Resource::with_service("api");
        resource.attributes.push(KeyValue::new("host.name", host));
        MetricPoint {
            metric: Arc::new(MetricDesc {
                name: "queue.depth".into(),
                description: String::new(),
                unit: String::new(),
                metadata: Vec::new(),
                kind: MetricKind::Gauge,
            }),
            attributes: vec![KeyValue::new("queue", "q1")],
            start_time_unix_nano: 0,
            time_unix_nano: 1,
            flags: 0,
            exemplars: Vec::new(),
            value: PointValue::Number(Some(Number::Double(1.0))),
            resource: Arc::new(resource),
            scope: Arc::new(Scope::default()),
        }
    }

    #[test]
    fn a_key_keeps_its_labels_and_gains_target_info_when_asked() {
        let cache = LabelCache::default();
        let a = cache.of(1, &point("a"), false);
        let sample = a.sample.expect("a number point has a sample");
        assert_eq!(sample.get("queue"), Some("q1"));
        assert!(a.target_info.is_none(), "not derived until asked");
        // Kept by key: a later query does not derive them again.
        let again = cache.of(1, &point("b"), false);
        assert_eq!(again.sample, Some(sample.clone()));
        let info = cache
            .of(1, &point("a"), true)
            .target_info
            .expect("derived now")
            .expect("has host.name");
        assert_eq!(info.get("host_name"), Some("a"));
        assert_eq!(cache.of(1, &point("a"), true).sample, Some(sample));
        assert_eq!(cache.kept(), 1);
    }
}
