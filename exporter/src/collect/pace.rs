//! How often a request may be repeated so that slurmrestd spends at most a share of its time
//! on us. After a request that took `d`, the next of its kind waits `d × (1/share − 1)`:
//! at the default 3 %, a 2 ms ping may go every 65 ms (the poll interval decides), a 22 s
//! `/jobs` of 20,000 jobs every 12 minutes. The wait follows what the request cost last
//! time, so a cluster that grows slows its own polling down, and one that shrinks speeds
//! it back up. A request slurmrestd turned away (slurmctld down, a refused token) cost it
//! nothing however long it took, so it is tried again at the poll interval: data is fresh
//! again within an interval or two of slurmctld's return, not minutes later. Nor does one
//! slow answer (held up while slurmctld went down): the pace follows the smaller of the
//! last two costs.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

/// The share of slurmrestd's time one kind of request may take.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Budget(f64);

impl Budget {
    pub const DEFAULT: Budget = Budget(0.03);

    /// A share in (0, 1].
    pub fn new(share: f64) -> Option<Self> {
        (share > 0.0 && share <= 1.0).then_some(Self(share))
    }

    pub fn share(self) -> f64 {
        self.0
    }

    /// The rest a request that took `took` must leave before the next of its kind.
    pub fn rest_after(self, took: Duration) -> Duration {
        took.mul_f64((1.0 / self.0 - 1.0).min(1e6))
    }
}

impl Default for Budget {
    fn default() -> Self {
        Self::DEFAULT
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "{}%", self.0 * 100.0)
    }
}

/// `3%` or `0.03`.
impl FromStr for Budget {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let share = match s.strip_suffix('%') {
            Some(p) => p.trim().parse::<f64>().map(|p| p / 100.0),
            None => s.parse::<f64>(),
        }
        .map_err(|_| format!("{s:?} is not a share (e.g. 3% or 0.03)"))?;
        Self::new(share).ok_or_else(|| format!("{s:?} must be above 0% and at most 100%"))
    }
}

/// What a request cost slurmrestd, for its pace: how long it took, or nothing when it was
/// turned away before any work (see [`crate::error::Error::turned_away`]).
pub fn cost<T>(took: Duration, result: &crate::error::Result<T>) -> Duration {
    match result {
        Err(e) => error_cost(took, e),
        Ok(_) => took,
    }
}

/// What a failed request cost slurmrestd: `took`, or nothing if it was turned away.
pub fn error_cost(took: Duration, error: &crate::error::Error) -> Duration {
    if error.turned_away() {
        Duration::ZERO
    } else {
        took
    }
}

/// When a kind of request may go next.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pace {
    next: Option<Instant>,
    gap: Option<Duration>,
    /// What the last request of its kind cost.
    last_cost: Option<Duration>,
}

impl Pace {
    pub fn ready(&self) -> bool {
        self.next.is_none_or(|t| Instant::now() >= t)
    }

    /// When it may go (`None`: now).
    pub fn next(&self) -> Option<Instant> {
        self.next
    }

    /// The gap between the last start and the next one allowed.
    pub fn gap(&self) -> Option<Duration> {
        self.gap
    }

    /// A request started at `started` took `took`; the next waits its rest. One slow answer
    /// is not yet a trend: the rest follows the smaller of this cost and the last one, so a
    /// request held up once (slurmctld saving its state on its way down, a reconfigure's
    /// locks) is measured again at the interval instead of holding its kind back for 32
    /// times as long; two slow answers in a row set the pace. The very first sets it alone.
    pub fn done(&mut self, started: Instant, took: Duration, budget: Budget) {
        let cost = self.last_cost.map_or(took, |last| took.min(last));
        self.last_cost = Some(took);
        let next = started + took + budget.rest_after(cost);
        self.next = Some(next);
        self.gap = Some(next - started);
    }

    /// As [`Self::done`], and never sooner than `interval` after the start.
    pub fn done_every(
        &mut self,
        started: Instant,
        took: Duration,
        budget: Budget,
        interval: Duration,
    ) {
        self.done(started, took, budget);
        if let Some(next) = self.next
            && next < started + interval
        {
            self.next = Some(started + interval);
            self.gap = Some(interval);
        }
    }

    /// Due at once (a standby became leader).
    pub fn now(&mut self) {
        self.next = None;
    }

    /// Due by `at` at the latest (a wake-up brings the next request forward, never back).
    pub fn due_by(&mut self, at: Instant) {
        if self.next.is_some_and(|n| n > at) {
            self.next = Some(at);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_took_d_waits_d_times_one_over_share_minus_one() {
        let b: Budget = "3%".parse().unwrap();
        assert_eq!(b, Budget(0.03));
        assert_eq!("0.05".parse::<Budget>(), Ok(Budget(0.05)));
        assert!("0%".parse::<Budget>().is_err());
        assert!("150%".parse::<Budget>().is_err());
        assert!("lots".parse::<Budget>().is_err());
        let b = Budget::new(0.05).unwrap();
        // 22 s /jobs at 5 %: 22 s × 19 = 418 s of rest, one request per 440 s.
        assert_eq!(
            b.rest_after(Duration::from_secs(22)),
            Duration::from_secs(418)
        );
        let mut p = Pace::default();
        assert!(p.ready());
        let t0 = Instant::now();
        p.done(t0, Duration::from_secs(22), b);
        assert_eq!(p.gap(), Some(Duration::from_secs(440)));
        assert!(!p.ready());
        // A cheap request is held to the interval instead.
        p.done_every(t0, Duration::from_millis(2), b, Duration::from_secs(2));
        assert_eq!(p.gap(), Some(Duration::from_secs(2)));
        p.now();
        assert!(p.ready());
    }

    /// The restart that found it: a `/partitions` answered in 2 s while slurmctld saved its
    /// state on the way down held partitions back 65 s at 3 %, past its return.
    #[test]
    fn one_slow_answer_is_measured_again_two_set_the_pace() {
        let (b, every) = (Budget::DEFAULT, Duration::from_secs(2));
        let mut p = Pace::default();
        let t0 = Instant::now();
        p.done_every(t0, Duration::from_millis(3), b, every);
        assert_eq!(p.gap(), Some(every));
        // Its end plus the last cost's rest (0.1 s), not its own (65 s).
        let soon = Duration::from_secs(3);
        p.done_every(t0, Duration::from_secs(2), b, every);
        assert!(p.gap().unwrap() < soon, "one slow answer: {:?}", p.gap());
        p.done_every(t0, Duration::from_secs(2), b, every);
        assert!(p.gap().unwrap() > Duration::from_secs(60), "two in a row");
        // A request turned away in between costs nothing and is no trend either.
        p.done_every(t0, Duration::ZERO, b, every);
        p.done_every(t0, Duration::from_secs(2), b, every);
        assert!(p.gap().unwrap() < soon, "{:?}", p.gap());
    }

    #[test]
    fn a_request_turned_away_costs_nothing_a_slow_answer_its_time() {
        let took = Duration::from_secs(15);
        let down = crate::error::Error::Http {
            endpoint: "nodes".into(),
            status: 502,
            detail: "Unable to contact slurm controller".into(),
        };
        assert_eq!(cost(took, &Err::<(), _>(down)), Duration::ZERO);
        let slow = crate::error::Error::Timeout {
            endpoint: "jobs".into(),
            message: "30s".into(),
        };
        assert_eq!(cost(took, &Err::<(), _>(slow)), took);
        assert_eq!(cost(took, &Ok(())), took);
        // So after slurmctld's return the next try comes at the interval, not 8 minutes on.
        let mut p = Pace::default();
        let t0 = Instant::now();
        let b = Budget::DEFAULT;
        p.done_every(t0, Duration::ZERO, b, Duration::from_secs(2));
        assert_eq!(p.gap(), Some(Duration::from_secs(2)));
    }

    #[test]
    fn a_wake_up_brings_the_next_request_forward_never_back() {
        let (mut p, t0) = (Pace::default(), Instant::now());
        p.done_every(t0, Duration::ZERO, Budget::DEFAULT, Duration::from_secs(60));
        let soon = t0 + Duration::from_secs(1);
        p.due_by(soon);
        assert_eq!(p.next(), Some(soon));
        p.due_by(t0 + Duration::from_secs(30));
        assert_eq!(
            p.next(),
            Some(soon),
            "a later wake-up does not push it back"
        );
        p.now();
        p.due_by(soon);
        assert!(p.ready(), "already due stays due");
    }
}
