//! The number series a metric part's scans have met, by series key: the
//! first point read of each, kept so that a later scan describes the
//! series without reading that row again.
//!
//! Describing a series is the costly half of a query over many series
//! and few samples each (a PromQL instant query over 10k series): its first
//! row is a random read of every column of the row, and its resource is
//! JSON to parse. A part never changes, so what a series key stands for in
//! it never does either; the memo goes with the part.
//!
//! Only what all the key's points share is meant to be read from a kept
//! point (`stats::series_key`: metric name, kind and unit, attributes,
//! resource, scope), never its time or value. Memory is bounded: past
//! [`MAX_SERIES`] keys a part keeps no more, and scans read first rows as
//! before.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;
use skein_model::MetricPoint;

use crate::hash::FastMap;

/// Series a part keeps at most: about 300 bytes each beside the shared
/// resources, so 40 MB for a part of as many series as this.
pub const MAX_SERIES: usize = 1 << 17;

#[derive(Default)]
pub struct SeriesMemo {
    points: Mutex<FastMap<u64, Arc<MetricPoint>>>,
    bytes: AtomicUsize,
}

impl SeriesMemo {
    /// The kept point of each of `keys`, in order (`None`: not kept).
    pub fn get(&self, keys: &[u64]) -> Vec<Option<Arc<MetricPoint>>> {
        let points = self.points.lock();
        keys.iter().map(|k| points.get(k).cloned()).collect()
    }

    /// Keeps `point` as what `key` stands for, unless the part keeps
    /// [`MAX_SERIES`] already.
    pub fn keep(&self, key: u64, point: &MetricPoint) {
        let mut points = self.points.lock();
        if points.len() >= MAX_SERIES || points.contains_key(&key) {
            return;
        }
        self.bytes.fetch_add(64 + point.approx_size(), Ordering::Relaxed);
        points.insert(key, Arc::new(point.clone()));
    }

    /// About the memory the kept points take.
    pub fn memory_bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    pub fn kept(&self) -> usize {
        self.points.lock().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;

    #[test]
    fn keeps_the_first_point_of_a_key_and_stops_at_the_cap() {
        let memo = SeriesMemo::default();
        let points = testdata::metric_points(3);
        memo.keep(7, &points[0]);
        memo.keep(7, &points[1]);
        let got = memo.get(&[7, 8]);
        assert_eq!(got[0].as_deref(), Some(&points[0]), "the first kept stays");
        assert!(got[1].is_none());
        assert!(memo.memory_bytes() > 0);
        for k in 0..MAX_SERIES as u64 + 10 {
            memo.keep(1000 + k, &points[2]);
        }
        assert_eq!(memo.kept(), MAX_SERIES);
    }
}
