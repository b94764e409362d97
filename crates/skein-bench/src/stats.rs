//! Latency samples and their percentiles (nearest rank, nothing discarded).

use std::time::Duration;

use serde::Serialize;

#[derive(Debug, Clone, Default)]
pub struct Samples {
    nanos: Vec<u64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Percentiles {
    pub samples: usize,
    pub p50_ms: f64,
    pub p95_ms: f64,
    pub p99_ms: f64,
    pub max_ms: f64,
}

impl Samples {
    pub fn push(&mut self, d: Duration) {
        self.nanos.push(d.as_nanos() as u64);
    }

    pub fn extend(&mut self, other: Samples) {
        self.nanos.extend(other.nanos);
    }

    pub fn len(&self) -> usize {
        self.nanos.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nanos.is_empty()
    }

    /// The first sample, in milliseconds (0 with none).
    pub fn first_ms(&self) -> f64 {
        self.nanos.first().map_or(0.0, |&n| n as f64 / 1e6)
    }

    /// Nearest-rank percentile: the smallest sample with at least q·n
    /// samples at or below it.
    pub fn percentile(&self, q: f64) -> f64 {
        if self.nanos.is_empty() {
            return 0.0;
        }
        let mut v = self.nanos.clone();
        v.sort_unstable();
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1] as f64 / 1e6
    }

    pub fn summary(&self) -> Percentiles {
        Percentiles {
            samples: self.nanos.len(),
            p50_ms: self.percentile(0.50),
            p95_ms: self.percentile(0.95),
            p99_ms: self.percentile(0.99),
            max_ms: self.percentile(1.0),
        }
    }
}

pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[(v.len() - 1) / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank() {
        let mut s = Samples::default();
        for ms in 1..=100 {
            s.push(Duration::from_millis(ms));
        }
        assert_eq!(s.percentile(0.5), 50.0);
        assert_eq!(s.percentile(0.99), 99.0);
        assert_eq!(s.percentile(1.0), 100.0);
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
    }
}
