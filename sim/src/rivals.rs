//! What a site would run instead of slurmscale's autoscaler, modelled from their own
//! documentation so the comparison is with the real alternatives, not strawmen.
//!
//! * [`Keda`]: a KEDA ScaledObject on a NodeSet with a Prometheus trigger, as slurm-operator's
//!   autoscaling guide writes it (`slurm_partition_jobs_pending`, `metricType: Value`,
//!   `threshold: 5`, `minReplicaCount: 1`, `idleReplicaCount: 0`), or fed our
//!   `slurm_nodeset_desired_nodes` with `AverageValue` 1 (this project's KEDA examples).
//!   The pipeline is what production runs: the exporter polls and Prometheus scrapes every
//!   30 s; KEDA polls every 30 s to go between 0 and `minReplicaCount` and waits
//!   `cooldownPeriod` (300 s) after the last active poll before going back to 0; in between
//!   the Kubernetes HPA syncs every 15 s with its own arithmetic (10 % tolerance, 300 s
//!   scale-down stabilization, scale-up by at most max(100 %, 4 pods) per period). The
//!   scale-up tolerance can be set (`behavior.scaleUp.tolerance`, Kubernetes 1.33 on): at
//!   0.1 a NodeSet at 95 of the 100 nodes a job needs stays at 95.
//! * Slurm power saving and a static partition need no policy: the partition itself does
//!   it ([`Mode::PowerSave`](super::cluster::Mode), [`Mode::Static`](super::cluster::Mode)).

use std::collections::VecDeque;

use super::Scaler;
use super::cluster::Cluster;
use super::view::SlurmView;

/// What the trigger reads.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Trigger {
    /// `slurm_partition_jobs_pending`, `metricType: Value`, `threshold`.
    PendingJobs { threshold: f64 },
    /// `slurm_nodeset_desired_nodes`, `metricType: AverageValue`, target 1.
    DesiredNodes,
}

/// Seconds, from KEDA's and the HPA's documented defaults.
const SCRAPE: i64 = 30;
const KEDA_POLL: i64 = 30;
const COOLDOWN: i64 = 300;
const HPA_SYNC: i64 = 15;
const HPA_DOWN_WINDOW: i64 = 300;
/// The HPA's tolerance when the ratio is below 1 (and above it unless set).
pub const TOLERANCE: f64 = 0.1;
const MIN_REPLICAS: u32 = 1;

pub struct Keda {
    trigger: Trigger,
    max: u32,
    /// `behavior.scaleUp.tolerance` ([`TOLERANCE`] where the cluster has no such field).
    up_tolerance: f64,
    /// What Prometheus holds: the value at the last scrape.
    sample: f64,
    next_scrape: i64,
    next_poll: i64,
    next_sync: i64,
    last_active: Option<i64>,
    /// The HPA's recommendations of the last `HPA_DOWN_WINDOW` seconds.
    recommendations: VecDeque<(i64, u32)>,
    desired: u32,
    /// What the exporter reads of the partition (made at the first scrape that needs it).
    view: Option<SlurmView>,
}

impl Keda {
    /// Starts idle at `start`. The three loops run on their own grids, offset so that a
    /// scrape is always in before KEDA and the HPA read it.
    pub fn new(trigger: Trigger, max: u32, up_tolerance: f64, start: i64) -> Self {
        let grid = |period: i64, offset: i64| start - start.rem_euclid(period) + offset;
        Self {
            trigger,
            max,
            up_tolerance,
            sample: 0.0,
            next_scrape: grid(SCRAPE, 0),
            next_poll: grid(KEDA_POLL, 1),
            next_sync: grid(HPA_SYNC, 2),
            last_active: None,
            recommendations: VecDeque::new(),
            desired: 0,
            view: None,
        }
    }

    /// What Prometheus holds now (the last scrape).
    #[cfg(test)]
    pub(super) fn sample(&self) -> f64 {
        self.sample
    }

    /// The metric as Prometheus would scrape it from the exporter now.
    fn metric(&mut self, c: &Cluster) -> f64 {
        match self.trigger {
            Trigger::PendingJobs { .. } => c.counts.pending.into(),
            Trigger::DesiredNodes => {
                let view = self.view.get_or_insert_with(|| SlurmView::new(c));
                view.sync(c);
                view.published_desired() as f64
            }
        }
    }

    /// The HPA's desired replicas from the metric, before stabilization.
    fn raw(&self, current: u32) -> u32 {
        let current_f = f64::from(current);
        let (ratio, want) = match self.trigger {
            Trigger::PendingJobs { threshold } => {
                let ratio = self.sample / threshold;
                (ratio, (current_f * ratio).ceil())
            }
            Trigger::DesiredNodes => {
                let ratio = self.sample / current_f;
                (ratio, self.sample.ceil())
            }
        };
        let tolerance = if ratio > 1.0 {
            self.up_tolerance
        } else {
            TOLERANCE
        };
        if (ratio - 1.0).abs() <= tolerance {
            return current;
        }
        (want as u32).clamp(MIN_REPLICAS, self.max)
    }

    /// One HPA sync: recommendation, stabilization, rate limit.
    fn sync(&mut self, now: i64, current: u32) -> u32 {
        let raw = self.raw(current);
        self.recommendations.push_back((now, raw));
        while self
            .recommendations
            .front()
            .is_some_and(|&(t, _)| t <= now - HPA_DOWN_WINDOW)
        {
            self.recommendations.pop_front();
        }
        // Up: no stabilization window, so the latest recommendation. Down: the highest of
        // the window.
        let down = self
            .recommendations
            .iter()
            .map(|&(_, r)| r)
            .max()
            .unwrap_or(raw);
        let mut desired = current;
        if raw > desired {
            desired = raw;
        }
        if desired > down {
            desired = down;
        }
        let up_limit = (current * 2).max(current + 4);
        desired.min(up_limit).clamp(MIN_REPLICAS, self.max)
    }
}

impl Scaler for Keda {
    fn wake(&self) -> Option<i64> {
        Some(self.next_scrape.min(self.next_poll).min(self.next_sync))
    }

    fn look(&mut self, now: i64, cluster: &mut Cluster) -> Option<u32> {
        let current = cluster.replicas();
        let mut want = None;
        if now >= self.next_scrape {
            self.sample = self.metric(cluster);
            self.next_scrape += SCRAPE * (1 + (now - self.next_scrape) / SCRAPE);
        }
        if now >= self.next_poll {
            self.next_poll += KEDA_POLL * (1 + (now - self.next_poll) / KEDA_POLL);
            // activationThreshold 0: any value above it is activity.
            if self.sample > 0.0 {
                self.last_active = Some(now);
                if current == 0 {
                    want = Some(MIN_REPLICAS.min(self.max));
                }
            } else if current > 0 && self.last_active.is_none_or(|t| now - t >= COOLDOWN) {
                // KEDA takes over from the HPA and goes to idleReplicaCount.
                self.recommendations.clear();
                want = Some(0);
            }
        }
        if now >= self.next_sync {
            self.next_sync += HPA_SYNC * (1 + (now - self.next_sync) / HPA_SYNC);
            // The HPA does not act on a target at 0 replicas: KEDA owns 0 <-> 1.
            let current = want.unwrap_or(current);
            if current > 0 {
                let d = self.sync(now, current);
                if d != current {
                    want = Some(d);
                }
            }
        }
        if let Some(w) = want {
            self.desired = w;
        }
        want.filter(|&w| w != current)
    }

    fn desired(&self) -> u32 {
        self.desired
    }
}

/// A partition that scales itself (power saving) or not at all (static).
pub struct Fixed;

impl Scaler for Fixed {
    fn wake(&self) -> Option<i64> {
        None
    }

    fn look(&mut self, _: i64, _: &mut Cluster) -> Option<u32> {
        None
    }

    fn desired(&self) -> u32 {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keda(trigger: Trigger, sample: f64) -> Keda {
        let mut k = Keda::new(trigger, 100, TOLERANCE, 0);
        k.sample = sample;
        k
    }

    #[test]
    fn value_metric_follows_the_hpa_formula_with_its_tolerance() {
        let k = keda(Trigger::PendingJobs { threshold: 5.0 }, 50.0);
        assert_eq!(k.raw(1), 10, "ceil(1 × 50 / 5)");
        assert_eq!(k.raw(4), 40);
        let k = keda(Trigger::PendingJobs { threshold: 5.0 }, 5.4);
        assert_eq!(k.raw(3), 3, "within 10 % of the target: no change");
        let k = keda(Trigger::PendingJobs { threshold: 5.0 }, 0.0);
        assert_eq!(k.raw(7), 1, "never below minReplicaCount");
    }

    #[test]
    fn average_value_metric_asks_for_the_value_itself() {
        let k = keda(Trigger::DesiredNodes, 12.0);
        assert_eq!(k.raw(3), 12);
        assert_eq!(k.raw(11), 11, "12/11 is within the tolerance");
    }

    #[test]
    fn a_scale_up_tolerance_of_zero_reaches_the_last_nodes() {
        let k = keda(Trigger::DesiredNodes, 100.0);
        assert_eq!(k.raw(95), 95, "stuck 5 short at the default tolerance");
        let k = Keda {
            up_tolerance: 0.0,
            ..keda(Trigger::DesiredNodes, 100.0)
        };
        assert_eq!(k.raw(95), 100);
        // Scale-down keeps the default tolerance.
        let k = Keda {
            up_tolerance: 0.0,
            ..keda(Trigger::DesiredNodes, 95.0)
        };
        assert_eq!(k.raw(100), 100);
    }

    #[test]
    fn scale_up_is_limited_per_sync_and_scale_down_waits_for_the_window() {
        let mut k = keda(Trigger::DesiredNodes, 100.0);
        assert_eq!(k.sync(0, 1), 5, "max(2 × 1, 1 + 4)");
        assert_eq!(k.sync(15, 5), 10, "max(2 × 5, 5 + 4)");
        k.sample = 2.0;
        assert_eq!(
            k.sync(30, 10),
            10,
            "a higher recommendation is within 300 s"
        );
        assert_eq!(k.sync(299, 10), 10);
        assert_eq!(
            k.sync(316, 10),
            2,
            "all higher recommendations are older than 300 s"
        );
    }
}
