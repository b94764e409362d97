//! Finding a step's samples in a series: the steps of a range query
//! ascend, so each window starts at or after where the last one did, and
//! a search forward from there (galloping: 1, 2, 4, … samples ahead, then
//! a binary search of the last stride) touches a few samples near the
//! window instead of a binary search's scattered dozen over the whole day.

use std::cell::Cell;

/// `samples.partition_point(|s| pred(s.0))`, searched forward from `from`
/// when every sample before `from` satisfies `pred` (as a cursor left by
/// an earlier, not later, time does), over `samples[..from]` otherwise.
/// `pred` is true on a prefix of `samples` (they ascend by time).
pub(crate) fn seek(samples: &[(i64, f64)], from: usize, pred: impl Fn(i64) -> bool) -> usize {
    let from = from.min(samples.len());
    if from > 0 && !pred(samples[from - 1].0) {
        return samples[..from].partition_point(|s| pred(s.0));
    }
    let mut stride = 1;
    while from + stride <= samples.len() && pred(samples[from + stride - 1].0) {
        stride *= 2;
    }
    // samples[from + stride/2 - 1] is in the prefix (or stride is 1), and
    // samples[from + stride - 1] is not (or is past the end).
    let lo = from + stride / 2;
    let hi = (from + stride).min(samples.len());
    lo + samples[lo..hi].partition_point(|s| pred(s.0))
}

/// Where each series' last window started: one cursor per series of a
/// selector, moved by each step that reads it.
#[derive(Debug, Default)]
pub(crate) struct Cursors(Vec<Cell<usize>>);

impl Cursors {
    pub(crate) fn new(series: usize) -> Cursors {
        Cursors((0..series).map(|_| Cell::new(0)).collect())
    }

    /// `seek` from series `i`'s cursor, which moves to the answer.
    pub(crate) fn seek(&self, i: usize, samples: &[(i64, f64)], pred: impl Fn(i64) -> bool) -> usize {
        let Some(c) = self.0.get(i) else {
            return samples.partition_point(|s| pred(s.0));
        };
        let at = seek(samples, c.get(), pred);
        c.set(at);
        at
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Wherever the search starts, it finds what a binary search does.
        #[test]
        fn seek_finds_the_partition_point(
            mut times in proptest::collection::vec(-50i64..50, 0..200),
            from in 0usize..250,
            t in -60i64..60,
            inclusive in any::<bool>(),
        ) {
            times.sort();
            let samples: Vec<(i64, f64)> = times.iter().map(|&t| (t, 0.0)).collect();
            let pred = |ts: i64| if inclusive { ts <= t } else { ts < t };
            let want = samples.partition_point(|s| pred(s.0));
            prop_assert_eq!(seek(&samples, from, pred), want);
        }
    }

    #[test]
    fn ascending_steps_move_a_cursor_forward_and_a_step_back_still_finds() {
        let samples: Vec<(i64, f64)> = (0..100).map(|i| (i * 15, 0.0)).collect();
        let c = Cursors::new(1);
        for t in [0, 14, 15, 700, 1485, 2000] {
            assert_eq!(
                c.seek(0, &samples, |ts| ts < t),
                samples.partition_point(|s| s.0 < t),
                "{t}"
            );
        }
        assert_eq!(c.seek(0, &samples, |ts| ts < 30), 2, "back in time");
    }
}
