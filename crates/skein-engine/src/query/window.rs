//! The time window every query, aggregation and index lookup takes.

use serde::Serialize;

/// A time window `[start, end)` in ns since the epoch. The default is
/// [`Window::ALL`], every time there is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Window {
    pub start: u64,
    pub end: u64,
}

impl Default for Window {
    fn default() -> Self {
        Window::ALL
    }
}

impl Window {
    pub const ALL: Window = Window {
        start: 0,
        end: u64::MAX,
    };

    pub fn new(start: u64, end: u64) -> Window {
        Window { start, end }
    }

    /// From optional bounds, an unset one open.
    pub fn from_bounds(start: Option<u64>, end: Option<u64>) -> Window {
        Window {
            start: start.unwrap_or(0),
            end: end.unwrap_or(u64::MAX),
        }
    }

    pub fn contains(&self, t: u64) -> bool {
        t >= self.start && t < self.end
    }

    /// Whether every time of the inclusive range `[min, max]` (as parts
    /// record their times) is inside.
    pub fn covers(&self, min: u64, max: u64) -> bool {
        min >= self.start && max < self.end
    }

    /// Whether no time of the inclusive range `[min, max]` is inside.
    pub fn misses(&self, min: u64, max: u64) -> bool {
        max < self.start || min >= self.end
    }

    /// The window narrowed to end no later than `end`.
    pub fn ending_by(self, end: u64) -> Window {
        Window {
            end: self.end.min(end),
            ..self
        }
    }

    /// The window narrowed to start no earlier than `start`.
    pub fn starting_by(self, start: u64) -> Window {
        Window {
            start: self.start.max(start),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_are_half_open() {
        let w = Window::new(10, 20);
        assert!(!w.contains(9) && w.contains(10) && w.contains(19) && !w.contains(20));
        assert!(w.covers(10, 19) && !w.covers(10, 20) && !w.covers(9, 15));
        assert!(w.misses(0, 9) && w.misses(20, 30) && !w.misses(0, 10) && !w.misses(19, 30));
        assert_eq!(Window::from_bounds(None, Some(5)), Window::new(0, 5));
        assert_eq!(Window::default(), Window::ALL);
        assert_eq!(w.ending_by(15), Window::new(10, 15));
        assert_eq!(w.ending_by(25), w);
        assert_eq!(w.starting_by(12), Window::new(12, 20));
    }
}
