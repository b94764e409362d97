//! One trace as a tree, and what the diagnosis asks of it: a span's self
//! time, the time each operation holds on the critical path below a span,
//! and where the errors under a span originate.

use std::sync::Arc;

use skein_model::Span;

use crate::hash::FastMap;

/// A (service, operation) pair.
pub type OpKey<'a> = (&'a str, &'a str);

pub struct Tree<'a> {
    spans: &'a [Arc<Span>],
    /// Children of each span, by end time descending.
    children: Vec<Vec<usize>>,
}

impl<'a> Tree<'a> {
    pub fn new(spans: &'a [Arc<Span>]) -> Tree<'a> {
        let by_id: FastMap<u64, usize> = spans
            .iter()
            .enumerate()
            .map(|(i, s)| (u64::from_be_bytes(s.span_id.0), i))
            .collect();
        let mut children = vec![Vec::new(); spans.len()];
        for (i, s) in spans.iter().enumerate() {
            if let Some(&p) = s.parent_span_id.and_then(|p| by_id.get(&u64::from_be_bytes(p.0)))
                && p != i
            {
                children[p].push(i);
            }
        }
        for c in &mut children {
            c.sort_by_key(|&i| std::cmp::Reverse(spans[i].end_time_unix_nano));
        }
        Tree { spans, children }
    }

    pub fn key(&self, i: usize) -> OpKey<'a> {
        let s: &'a Span = &self.spans[i];
        (s.service_name(), s.name.as_str())
    }

    /// `root` and every span under it. Each span is visited once, so a
    /// cycle of parent links in bad data cannot loop.
    fn descendants(&self, root: usize) -> Vec<usize> {
        let mut out = vec![root];
        let mut seen = vec![false; self.spans.len()];
        seen[root] = true;
        let mut k = 0;
        while k < out.len() {
            for &c in &self.children[out[k]] {
                if !seen[c] {
                    seen[c] = true;
                    out.push(c);
                }
            }
            k += 1;
        }
        out
    }

    /// The span's duration less the time its children cover (overlapping
    /// children counted once, clipped to the span).
    pub fn self_time(&self, i: usize) -> u64 {
        let s = &self.spans[i];
        let (lo, hi) = (s.start_time_unix_nano, s.end_time_unix_nano.max(s.start_time_unix_nano));
        let mut iv: Vec<(u64, u64)> = self.children[i]
            .iter()
            .map(|&c| {
                let c = &self.spans[c];
                (c.start_time_unix_nano.clamp(lo, hi), c.end_time_unix_nano.clamp(lo, hi))
            })
            .filter(|(a, b)| b > a)
            .collect();
        iv.sort_unstable();
        let mut covered = 0;
        let mut cur: Option<(u64, u64)> = None;
        for (a, b) in iv {
            match cur {
                Some((ca, cb)) if a <= cb => cur = Some((ca, cb.max(b))),
                Some((ca, cb)) => {
                    covered += cb - ca;
                    cur = Some((a, b));
                }
                None => cur = Some((a, b)),
            }
        }
        if let Some((a, b)) = cur {
            covered += b - a;
        }
        (hi - lo).saturating_sub(covered)
    }

    /// The time each operation holds on the critical path of the subtree
    /// under `root`: walking back from the span's end, the child that ends
    /// last holds the path until it started, then the next child that ends
    /// before that; gaps belong to the span itself. The times sum to the
    /// root's duration.
    pub fn critical_path(&self, root: usize) -> FastMap<OpKey<'a>, u64> {
        let mut out = FastMap::default();
        let mut visited = vec![false; self.spans.len()];
        let s = &self.spans[root];
        self.walk(root, s.end_time_unix_nano, &mut visited, &mut out);
        out
    }

    fn walk(&self, i: usize, until: u64, visited: &mut [bool], out: &mut FastMap<OpKey<'a>, u64>) {
        if visited[i] {
            return;
        }
        visited[i] = true;
        let s = &self.spans[i];
        let start = s.start_time_unix_nano;
        let mut t = s.end_time_unix_nano.min(until).max(start);
        let mut own = 0;
        for &c in &self.children[i] {
            if t <= start {
                break;
            }
            let child = &self.spans[c];
            if child.start_time_unix_nano >= t {
                continue;
            }
            let end = child.end_time_unix_nano.min(t);
            own += t - end;
            self.walk(c, end, visited, out);
            t = child.start_time_unix_nano.max(start);
        }
        own += t - start;
        *out.entry(self.key(i)).or_default() += own;
    }

    /// Failing spans under `root` (or `root` itself) with no failing span
    /// below them: where the errors began.
    pub fn error_origins(&self, root: usize) -> Vec<usize> {
        let under = self.descendants(root);
        under
            .iter()
            .copied()
            .filter(|&i| self.spans[i].is_error())
            .filter(|&i| {
                self.descendants(i)
                    .into_iter()
                    .skip(1)
                    .all(|d| !self.spans[d].is_error())
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use skein_model::{SpanId, Status, StatusCode, TraceId};

    use super::*;
    use crate::testdata::span_with;

    fn sp(id: u8, parent: Option<u8>, service: &str, name: &str, start: u64, end: u64, error: bool) -> Arc<Span> {
        let mut s = span_with(service, name);
        s.trace_id = TraceId([1; 16]);
        s.span_id = SpanId([0, 0, 0, 0, 0, 0, 0, id]);
        s.parent_span_id = parent.map(|p| SpanId([0, 0, 0, 0, 0, 0, 0, p]));
        s.start_time_unix_nano = start;
        s.end_time_unix_nano = end;
        s.status = Status {
            code: if error { StatusCode::Error } else { StatusCode::Ok },
            message: String::new(),
        };
        Arc::new(s)
    }

    #[test]
    fn self_time_counts_overlapping_children_once() {
        let spans = vec![
            sp(1, None, "a", "root", 0, 100, false),
            sp(2, Some(1), "b", "x", 10, 50, false),
            sp(3, Some(1), "b", "y", 30, 60, false),
            sp(4, Some(1), "c", "z", 90, 120, false),
        ];
        let t = Tree::new(&spans);
        // Covered: 10..60 and 90..100 = 60.
        assert_eq!(t.self_time(0), 40);
        assert_eq!(t.self_time(1), 40);
    }

    #[test]
    fn the_critical_path_follows_the_child_that_ends_last() {
        // root 0..100 calls x (10..40) and, in parallel, y (10..80), then
        // y calls z (20..70).
        let spans = vec![
            sp(1, None, "a", "root", 0, 100, false),
            sp(2, Some(1), "b", "x", 10, 40, false),
            sp(3, Some(1), "b", "y", 10, 80, false),
            sp(4, Some(3), "c", "z", 20, 70, false),
        ];
        let t = Tree::new(&spans);
        let cp = t.critical_path(0);
        assert_eq!(cp.get(&("a", "root")), Some(&30)); // 0..10 and 80..100
        assert_eq!(cp.get(&("b", "y")), Some(&20)); // 10..20 and 70..80
        assert_eq!(cp.get(&("c", "z")), Some(&50));
        assert_eq!(cp.get(&("b", "x")), None, "x ran beside y and never held the path");
        assert_eq!(cp.values().sum::<u64>(), 100);
    }

    #[test]
    fn errors_originate_at_the_deepest_failing_span() {
        let spans = vec![
            sp(1, None, "a", "root", 0, 100, true),
            sp(2, Some(1), "b", "x", 10, 50, true),
            sp(3, Some(2), "c", "db", 20, 30, true),
            sp(4, Some(1), "d", "ok", 60, 70, false),
        ];
        let t = Tree::new(&spans);
        assert_eq!(t.error_origins(0), vec![2]);
        assert_eq!(t.error_origins(1), vec![2]);
        assert_eq!(t.error_origins(3), Vec::<usize>::new());
    }

    #[test]
    fn a_parent_cycle_in_bad_data_terminates() {
        let spans = vec![
            sp(1, Some(2), "a", "p", 0, 100, true),
            sp(2, Some(1), "a", "q", 0, 100, true),
        ];
        let t = Tree::new(&spans);
        let _ = t.critical_path(0);
        assert!(
            t.error_origins(0).is_empty(),
            "every failing span has a failing descendant"
        );
    }
}
