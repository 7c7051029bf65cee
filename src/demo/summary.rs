//! What `slurmscale demo` prints when it stops (after `--duration`, or on Ctrl-C): the jobs,
//! their waits, the node-hours each autoscaled NodeSet held and how many of them sat idle,
//! and what the autoscalers did — the numbers `slurmscale simulate` reports for a trace,
//! for the run just watched.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use slurmscale_sim::demo::{BURST, POOL, Simulation};

/// The controller's Events, counted by autoscaler and reason.
#[derive(Clone, Debug, Default)]
pub struct Moves(BTreeMap<(String, String), u64>);

impl Moves {
    pub fn count(&mut self, autoscaler: &str, reason: &str) {
        *self
            .0
            .entry((autoscaler.to_string(), reason.to_string()))
            .or_default() += 1;
    }

    pub fn get(&self, autoscaler: &str, reason: &str) -> u64 {
        self.0
            .get(&(autoscaler.to_string(), reason.to_string()))
            .copied()
            .unwrap_or(0)
    }
}

fn hours(seconds: u64) -> f64 {
    seconds as f64 / 3600.0
}

/// Mean, 95th percentile and maximum, in whole seconds.
fn spread(values: &[u64]) -> (u64, u64, u64) {
    let mut v = values.to_vec();
    v.sort_unstable();
    let Some(max) = v.last().copied() else {
        return (0, 0, 0);
    };
    let mean = v.iter().sum::<u64>() / v.len() as u64;
    let p95 = v[(v.len() * 95).div_ceil(100).saturating_sub(1)];
    (mean, p95, max)
}

/// The summary, one fact per line.
pub fn render(sim: &Simulation, moves: &Moves, seed: u64) -> String {
    let t = &sim.totals();
    let (mean, p95, max) = spread(&t.waits);
    let (pods_mean, _, pods_max) = spread(&sim.pool.pod_waits());
    let provisioned = t.burst_seconds + t.pool_seconds;
    let busy = t.burst_busy_seconds + t.pool_busy_seconds;
    let mut out = String::new();
    let _ = writeln!(out, "done after {}s simulated (seed {seed}):", sim.tick);
    let _ = writeln!(
        out,
        "  jobs:          {} submitted, {} started, {} finished",
        t.submitted, t.started, t.completed
    );
    let _ = writeln!(
        out,
        "  waits:         {mean}s mean, {p95}s p95, {max}s max in Slurm's queue; Kubernetes pods {pods_mean}s mean, {pods_max}s max"
    );
    let _ = writeln!(
        out,
        "  node-hours:    {:.2} held, {:.2} idle (burst NodeSet {:.2} held, {:.2} idle; Slurm's share of the pool {:.2} held, {:.2} idle)",
        hours(provisioned),
        hours(provisioned.saturating_sub(busy)),
        hours(t.burst_seconds),
        hours(t.burst_seconds.saturating_sub(t.burst_busy_seconds)),
        hours(t.pool_seconds),
        hours(t.pool_seconds.saturating_sub(t.pool_busy_seconds)),
    );
    let _ = writeln!(
        out,
        "  scale events:  burst {} up, {} down; pool {} drained, {} released to Kubernetes, {} resumed, {} grown back",
        moves.get(BURST, "ScaledUp"),
        moves.get(BURST, "ScaledDown"),
        moves.get(POOL, "Drain"),
        moves.get(POOL, "Release"),
        moves.get(POOL, "Resume"),
        moves.get(POOL, "ScaledUp"),
    );
    out
}

#[cfg(test)]
mod tests {
    use super::spread;

    #[test]
    fn spread_is_mean_p95_and_max() {
        assert_eq!(spread(&[]), (0, 0, 0));
        assert_eq!(spread(&[7]), (7, 7, 7));
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(spread(&v), (50, 95, 100));
    }
}
