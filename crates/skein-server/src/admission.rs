//! Admission control: a budget of request bytes being ingested at once.
//! A request that does not fit is refused at the door (HTTP 503 with
//! `Retry-After`, gRPC RESOURCE_EXHAUSTED) rather than queued, so memory
//! stays bounded however hard clients push, and clients back off.

use std::sync::Arc;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// Permits are KiB, so the semaphore's counter never overflows.
const UNIT: usize = 1024;

#[derive(Clone)]
pub struct Admission {
    budget: Arc<Semaphore>,
    max_units: usize,
}

/// Holds its share of the budget until dropped.
pub struct Ticket {
    _permits: Vec<OwnedSemaphorePermit>,
}

impl Admission {
    pub fn new(max_bytes: usize) -> Self {
        let max_units = (max_bytes / UNIT).max(1);
        Admission {
            budget: Arc::new(Semaphore::new(max_units)),
            max_units,
        }
    }

    fn units(bytes: usize) -> u32 {
        bytes.div_ceil(UNIT).max(1) as u32
    }

    /// Takes `bytes` of the budget now, or `None` if it is spent. A request
    /// larger than the whole budget may still enter when nothing else is in
    /// flight (it is capped by the body limit instead).
    pub fn try_admit(&self, bytes: usize) -> Option<Ticket> {
        let units = Self::units(bytes).min(self.max_units as u32);
        self.budget
            .clone()
            .try_acquire_many_owned(units)
            .ok()
            .map(|p| Ticket { _permits: vec![p] })
    }

    /// Grows a ticket to cover `more` bytes (a body longer than announced).
    pub fn try_grow(&self, ticket: &mut Ticket, more: usize) -> bool {
        if more == 0 {
            return true;
        }
        let units = Self::units(more).min(self.max_units as u32);
        match self.budget.clone().try_acquire_many_owned(units) {
            Ok(p) => {
                ticket._permits.push(p);
                true
            }
            Err(_) => false,
        }
    }

    /// Bytes currently admitted.
    pub fn in_flight_bytes(&self) -> usize {
        (self.max_units - self.budget.available_permits()) * UNIT
    }

    pub fn max_bytes(&self) -> usize {
        self.max_units * UNIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_refuses_when_spent_and_frees_on_drop() {
        let a = Admission::new(10 * UNIT);
        let t1 = a.try_admit(6 * UNIT).unwrap();
        assert!(a.try_admit(6 * UNIT).is_none());
        assert_eq!(a.in_flight_bytes(), 6 * UNIT);
        drop(t1);
        let mut t2 = a.try_admit(6 * UNIT).unwrap();
        assert!(a.try_grow(&mut t2, 4 * UNIT));
        assert!(!a.try_grow(&mut t2, UNIT));
        drop(t2);
        assert_eq!(a.in_flight_bytes(), 0);
    }
}
