//! The demo's workload: a seeded generator of the jobs users submit, second by second, to
//! the demo cluster's three partitions. It is a source of jobs and nothing else — it never
//! looks at the cluster — so `slurmscale demo --seed N` and `slurmscale simulate --workload
//! demo --seed N` replay the very same jobs, and the simulated Slurm they run on decides
//! their waits the same way in both.
//!
//! The mood cycles (bursts, steady work, idle stretches) so a few minutes show every kind of
//! decision; the first second already has a job for the burst NodeSet.

use std::sync::Arc;

use crate::trace::Request;

const GIB: u64 = 1 << 30;
/// A held job's user releases it this long after submitting it.
pub const HOLD_SECONDS: u64 = 60;

/// SplitMix64: tiny, fast and the same on every platform, which is all a replayable demo needs.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }
}

/// The workload's mood, cycling so a few minutes show every kind of decision.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    Steady,
    Burst,
    Idle,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Steady => "steady",
            Self::Burst => "burst",
            Self::Idle => "idle",
        }
    }

    /// Jobs arriving per second, on average.
    fn rate(self) -> f64 {
        match self {
            Self::Steady => 0.12,
            Self::Burst => 0.5,
            Self::Idle => 0.0,
        }
    }
}

/// The demo cluster's partitions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Part {
    /// On the pool shared with Kubernetes.
    Cpu,
    /// Four fixed GPU nodes.
    Gpu,
    /// The autoscaled NodeSet, whole 16-CPU nodes.
    Burst,
}

impl Part {
    pub const ALL: [Part; 3] = [Part::Cpu, Part::Gpu, Part::Burst];
}

/// One job as its user submits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoJob {
    pub id: u64,
    /// Seconds from the start.
    pub submit: u64,
    pub partition: Part,
    pub user: &'static str,
    pub account: &'static str,
    pub nodes: u64,
    pub cpus_per_node: u64,
    pub gpus_per_node: u64,
    pub memory_per_node: u64,
    pub seconds: u64,
    /// Held by its user for [`HOLD_SECONDS`] (never in the burst partition, whose jobs
    /// `simulate --workload demo` replays: a hold is not a trace's business).
    pub held: bool,
}

impl DemoJob {
    /// When slurmctld may first start it.
    pub fn eligible(&self) -> u64 {
        self.submit + if self.held { HOLD_SECONDS } else { 0 }
    }

    /// The job as a trace records it, `base` being the start in unix seconds; the submit
    /// time is when it became eligible.
    pub fn request(&self, base: i64) -> Request {
        Request {
            id: self.id.to_string(),
            submit: base + self.eligible() as i64,
            run: self.seconds,
            cpus: self.cpus_per_node * self.nodes,
            nodes: Some(self.nodes),
            memory_mib_per_node: Some(self.memory_per_node >> 20),
            gpus: self.gpus_per_node * self.nodes,
            partition: Some(Arc::from(format!("{:?}", self.partition).to_lowercase())),
            ..Request::default()
        }
    }
}

/// `ticks` seconds of the workload: the mood of each second and the jobs, in submit order.
#[derive(Clone, Debug, Default)]
pub struct Workload {
    pub phases: Vec<Phase>,
    pub jobs: Vec<DemoJob>,
}

impl Workload {
    pub fn generate(seed: u64, ticks: u64) -> Self {
        let mut g = Generator {
            rng: Rng::new(seed),
            phase: Phase::Burst,
            phase_left: 30,
            next_id: 1000,
            out: Workload::default(),
        };
        for tick in 0..ticks {
            g.next_phase();
            if tick == 0 {
                g.opening();
            }
            g.arrivals(tick);
            let phase = g.phase;
            g.out.phases.push(phase);
        }
        g.out
    }

    /// The mood at second `tick` (idle after the generated span).
    pub fn phase(&self, tick: u64) -> Phase {
        self.phases
            .get(tick as usize)
            .copied()
            .unwrap_or(Phase::Idle)
    }
}

struct Generator {
    rng: Rng,
    phase: Phase,
    phase_left: u64,
    next_id: u64,
    out: Workload,
}

impl Generator {
    /// A two-node job for the burst partition in the first second: the NodeSet, at zero,
    /// has something to do at once.
    fn opening(&mut self) {
        self.push(
            0,
            Part::Burst,
            2,
            (16, 0, 48 * GIB),
            40,
            ("alice", "physics"),
            false,
        );
    }

    fn next_phase(&mut self) {
        if self.phase_left > 0 {
            self.phase_left -= 1;
            return;
        }
        let (phase, lo, hi) = match self.phase {
            Phase::Steady if self.rng.chance(0.5) => (Phase::Burst, 20, 40),
            Phase::Steady => (Phase::Idle, 150, 220),
            Phase::Burst => (Phase::Steady, 30, 60),
            Phase::Idle => (Phase::Burst, 20, 40),
        };
        self.phase = phase;
        self.phase_left = self.rng.range(lo, hi);
    }

    fn arrivals(&mut self, tick: u64) {
        let rate = self.phase.rate();
        let mut n = rate.floor() as u64;
        if self.rng.chance(rate.fract()) {
            n += 1;
        }
        for _ in 0..n {
            self.submit(tick);
        }
    }

    fn submit(&mut self, tick: u64) {
        let burst_share = if self.phase == Phase::Burst { 0.5 } else { 0.2 };
        let r = &mut self.rng;
        let users = [("alice", "physics"), ("bob", "chemistry"), ("carol", "ml")];
        let owner = users[r.range(0, 2) as usize];
        let (part, nodes, shape, seconds) = if r.chance(burst_share) {
            // Whole burst nodes, one to three of them.
            (
                Part::Burst,
                r.range(1, 3),
                (16, 0, 48 * GIB),
                r.range(15, 45),
            )
        } else if r.chance(0.2) {
            let g = r.range(1, 4);
            (Part::Gpu, 1, (g * 4, g, g * 32 * GIB), r.range(30, 150))
        } else if r.chance(0.2) {
            (
                Part::Cpu,
                r.range(2, 4),
                (32, 0, 100 * GIB),
                r.range(30, 90),
            )
        } else {
            let c = r.range(1, 16);
            (Part::Cpu, 1, (c, 0, c * 2 * GIB), r.range(20, 120))
        };
        let held = r.chance(0.03) && part != Part::Burst;
        self.push(tick, part, nodes, shape, seconds, owner, held);
    }

    #[allow(clippy::too_many_arguments)]
    fn push(
        &mut self,
        tick: u64,
        partition: Part,
        nodes: u64,
        (cpus, gpus, memory): (u64, u64, u64),
        seconds: u64,
        (user, account): (&'static str, &'static str),
        held: bool,
    ) {
        self.out.jobs.push(DemoJob {
            id: self.next_id,
            submit: tick,
            partition,
            user,
            account,
            nodes,
            cpus_per_node: cpus,
            gpus_per_node: gpus,
            memory_per_node: memory,
            seconds,
            held,
        });
        self.next_id += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_gives_the_same_day_and_every_kind_of_job_and_phase() {
        let a = Workload::generate(3, 1200);
        assert_eq!(a.jobs, Workload::generate(3, 1200).jobs);
        assert_ne!(a.jobs, Workload::generate(4, 1200).jobs);
        let phases: std::collections::BTreeSet<_> = a.phases.iter().map(|p| p.as_str()).collect();
        assert_eq!(phases.len(), 3, "{phases:?}");
        let any = |f: &dyn Fn(&DemoJob) -> bool| a.jobs.iter().any(f);
        assert!(any(&|j| j.nodes > 1) && any(&|j| j.gpus_per_node > 0));
        assert!(any(&|j| j.partition == Part::Burst) && any(&|j| j.held));
        assert!(!any(&|j| j.held && j.partition == Part::Burst));
        assert_eq!((a.jobs[0].submit, a.jobs[0].partition), (0, Part::Burst));
        assert!(a.jobs.windows(2).all(|w| w[0].submit <= w[1].submit));
    }
}
