//! Which NodeSet grows for a pending job when several could run it. From slurm-operator 1.1
//! a partition spans NodeSets (CPU, GPU, high-memory), and a job pending there should add a
//! node to one of them, not to each. Of the NodeSets whose nodes can run the job — in one of
//! its partitions, meeting its `--constraint`, each node big enough for its share (CPUs,
//! memory, GPUs) — one whose node shape is known to fit comes before one whose shape is
//! partly unknown (a GPU job goes to the NodeSet that declares GPUs, not to one that might
//! detect some); then Slurm's own preference, the lowest node `Weight`, which is where
//! slurmctld places work first; then the site's, the highest `priority` of the NodeSet's
//! autoscaler; then the smallest node (fewest CPUs, then least memory, then fewest GPUs): the
//! cheapest fit; then the name, so every reader chooses alike.
//!
//! A job's `--exclude` takes the NodeSet's nodes it names off its bound: one whose every
//! node is excluded cannot run it.
//!
//! A job goes where it can start soonest in that order, as Slurm's power saving would place
//! it: a NodeSet whose nodes up to its bound are all full (running work, no CPU or memory
//! left) leaves the job to the next one that has room, as cluster-autoscaler skips a node
//! group at its maximum; only when none has room does it wait for the preferred NodeSet.
//! A job needing more nodes than one NodeSet may have is split the same way: the preferred
//! NodeSet's nodes first, the rest on the next ones. Without the split, the preferred
//! NodeSet would count the whole job unsatisfiable and no NodeSet would ever grow for it.

use super::PendingJob;
use super::constraint;
use super::demand::{Shape, Take};
use super::origin::Origin;
use super::text::for_each_host;

/// A NodeSet as the choice sees it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Candidate {
    /// Its name in Slurm (`NodeSet=`), which also names it here.
    pub name: String,
    /// The partitions it serves.
    pub partitions: Vec<String>,
    /// The features its nodes register with.
    pub features: Vec<String>,
    /// Its nodes' shape, as far as known.
    pub shape: Shape,
    /// Its nodes' `Weight=` (Slurm's default, 1, when its `--conf` sets none).
    pub weight: u64,
    /// The most nodes it may have (its `slurmscale.io/max-nodes`, else its autoscaler's
    /// `maxReplicas`); `None`: no bound known.
    pub max_nodes: Option<u64>,
    /// Its autoscaler's `priority` (0 without one): among equal Weights, the highest grows.
    pub priority: i32,
    /// Of its nodes, those running work with no CPU or memory left ([`Full::All`]): a job
    /// starts on them only once they free up.
    pub full_nodes: u64,
    /// Of the others, those running work with every GPU taken ([`Full::Gpus`]): full for a
    /// job that needs GPUs.
    pub gpu_full_nodes: u64,
}

/// How a node running work leaves no room for another job now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Full {
    /// Every CPU or all of its memory allocated: for any job.
    All,
    /// CPUs and memory left, every GPU taken: for a job that needs GPUs.
    Gpus,
}

/// Whether and how node `n` is full ([`Full`]); `None` while idle or with room.
pub fn full(n: &super::Node) -> Option<Full> {
    if !n.busy() {
        None
    } else if n.idle_cpus() == 0 || (n.memory_bytes > 0 && n.alloc_memory_bytes >= n.memory_bytes) {
        Some(Full::All)
    } else if n.gpus() > 0 && n.gpus_alloc() >= n.gpus() {
        Some(Full::Gpus)
    } else {
        None
    }
}

/// How well a candidate's nodes fit a job: `None` when they cannot run it.
fn fit(job: &PendingJob, c: &Candidate) -> Option<bool> {
    if !job
        .partitions
        .iter()
        .any(|p| c.partitions.iter().any(|q| **p == **q))
    {
        return None;
    }
    if !constraint::met_by(&job.constraint, &c.features) {
        return None;
    }
    let nodes = job.nodes.max(1);
    let per_node = |v: u64| v.div_ceil(nodes);
    // Each of what the job needs per node against the shape: fits, does not, or unknown.
    let mut known = true;
    for (need, have) in [
        (per_node(job.cpus), c.shape.cpus),
        (per_node(job.memory_bytes), c.shape.memory_bytes),
        (per_node(job.gpus), c.shape.gpus),
    ] {
        match have {
            Some(have) if need > have => return None,
            Some(_) => {}
            None if need > 0 => known = false,
            None => {}
        }
    }
    Some(known)
}

/// Whether Slurm node `node` is one of NodeSet `nodeset`'s: `<nodeset>-<ordinal>`, as
/// slurm-operator names its pods (and the autoscaler its node records).
pub fn of_nodeset(node: &str, nodeset: &str) -> bool {
    ordinal(node, nodeset).is_some()
}

/// The ordinal of NodeSet `nodeset`'s node `node` (its digits after `<nodeset>-`); `None`
/// for another's node.
fn ordinal<'a>(node: &'a str, nodeset: &str) -> Option<&'a str> {
    node.strip_prefix(nodeset)
        .and_then(|rest| rest.strip_prefix('-'))
        .filter(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The most of `job`'s nodes `c` may hold: its bound, less the nodes below it that the job
/// excludes; `None` without a bound.
fn room(job: &PendingJob, c: &Candidate) -> Option<u64> {
    let max = c.max_nodes?;
    if job.excluded.is_empty() {
        return Some(max);
    }
    let mut excluded = std::collections::BTreeSet::new();
    for_each_host(&job.excluded, EXCLUDED_MAX, |n| {
        let ordinal = ordinal(n, &c.name).and_then(|o| o.parse::<u64>().ok());
        if let Some(o) = ordinal.filter(|o| *o < max) {
            excluded.insert(o);
        }
    });
    Some(max - excluded.len() as u64)
}

/// The most names of an `--exclude` list read.
const EXCLUDED_MAX: usize = 100_000;

/// Where `job`'s nodes go among `candidates`: (index, nodes) in order of preference, empty
/// when none can run it. Filled in that order — of those known to fit, where any is — each
/// NodeSet taking what it has room for now (its bound less its full nodes), when together
/// they have room for the whole job; else each up to its bound; else the whole job on the
/// preferred NodeSet (its bound then says it is unsatisfiable). Candidates of one Slurm name
/// are one NodeSet: the first stands for all.
pub fn placed(job: &PendingJob, candidates: &[Candidate]) -> Vec<(usize, u64)> {
    let mut fits: Vec<(usize, &Candidate, bool, Option<u64>)> = candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| {
            let room = room(job, c);
            (room != Some(0))
                .then(|| fit(job, c))
                .flatten()
                .map(|known| (i, c, known, room))
        })
        .collect();
    fits.sort_by_key(|(_, c, known, _)| {
        let size = |v: Option<u64>| v.unwrap_or(u64::MAX);
        (
            !known,
            c.weight,
            std::cmp::Reverse(c.priority),
            size(c.shape.cpus),
            size(c.shape.memory_bytes),
            size(c.shape.gpus),
            c.name.as_str(),
        )
    });
    let Some(&(first, _, sure, _)) = fits.first() else {
        return Vec::new();
    };
    let nodes = job.nodes.max(1);
    // Where some NodeSet is known to fit, only those known to fit share the job.
    let fill = |now: bool| {
        let mut left = nodes;
        let mut parts: Vec<(usize, u64)> = Vec::new();
        for (i, c, _, room) in fits.iter().filter(|(_, _, known, _)| *known == sure) {
            if parts.iter().any(|(p, _)| candidates[*p].name == c.name) {
                continue;
            }
            // Now: less the nodes full for this job (for a GPU job, those without GPUs too).
            let full = match (now, job.gpus > 0) {
                (false, _) => 0,
                (true, false) => c.full_nodes,
                (true, true) => c.full_nodes + c.gpu_full_nodes,
            };
            let n = left.min(room.map_or(u64::MAX, |r| r.saturating_sub(full)));
            if n > 0 {
                parts.push((*i, n));
                left -= n;
            }
            if left == 0 {
                return Some(parts);
            }
        }
        None
    };
    fill(true)
        .or_else(|| fill(false))
        .unwrap_or_else(|| vec![(first, nodes)])
}

/// Which pending jobs a scaler counts ([`super::demand::demand_of`]): those of `origins`
/// (batch jobs, Kubernetes placeholders) and, for a NodeSet, those it is the one to grow for
/// among `nodeset`'s NodeSets: a job another NodeSet grows for is that one's demand, and one
/// no NodeSet can run is unsatisfiable.
#[derive(Clone, Copy, Debug)]
pub struct Takes<'a> {
    pub origins: &'a [Origin],
    /// The NodeSets of the cluster as the choice reads them, and which of them this is.
    pub nodeset: Option<(&'a [Candidate], usize)>,
}

impl Takes<'_> {
    /// Every job: what a partition's own figures count.
    pub const ALL: Takes<'static> = Takes {
        origins: &Origin::ALL,
        nodeset: None,
    };

    /// Whether another NodeSet (of another Slurm name) serves one of `partitions`: their
    /// nodes then average several NodeSets' shapes, and stand for none of them.
    pub fn shared(&self, partitions: &[&str]) -> bool {
        self.nodeset.is_some_and(|(all, me)| {
            all.iter().any(|c| {
                c.name != all[me].name
                    && c.partitions
                        .iter()
                        .any(|p| partitions.contains(&p.as_str()))
            })
        })
    }

    /// The Slurm name of the NodeSet whose share this is, where `partitions` hold others too:
    /// of their nodes, only those named after it ([`of_nodeset`]) are its own.
    pub fn own_nodes_in(&self, partitions: &[&str]) -> Option<&str> {
        match self.nodeset {
            Some((all, me)) if self.shared(partitions) => Some(&all[me].name),
            _ => None,
        }
    }

    pub fn job(&self, job: &PendingJob) -> Take {
        if !self.origins.contains(&job.origin) {
            return Take::Other;
        }
        match self.nodeset {
            None => Take::Yes,
            // Two NodeSets of one Slurm name are one NodeSet in Slurm: its nodes either way.
            Some((all, me)) => {
                let parts = placed(job, all);
                let mine = parts.iter().find(|(i, _)| all[*i].name == all[me].name);
                match mine {
                    _ if parts.is_empty() => Take::Nobody,
                    None => Take::Elsewhere,
                    Some(_) if parts.len() == 1 => Take::Yes,
                    Some((_, nodes)) => Take::Part(*nodes),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::model::PendingClass;
    use crate::model::origin::Origin;

    const GIB: u64 = 1 << 30;

    fn job(nodes: u64, cpus: u64, gpus: u64, constraint: &str) -> PendingJob {
        PendingJob {
            id: 1,
            partitions: Arc::from(vec![Arc::from("all")]),
            class: PendingClass::Schedulable,
            reason: Arc::from("Resources"),
            tasks: 1,
            throttled: 0,
            nodes,
            cpus,
            gpus,
            memory_bytes: nodes * GIB,
            whole_node: false,
            constraint: Arc::from(constraint),
            excluded: Arc::from(""),
            submit_time: None,
            origin: Origin::Batch,
            planned_start: None,
        }
    }

    fn nodeset(
        name: &str,
        features: &[&str],
        cpus: u64,
        gpus: Option<u64>,
        weight: u64,
    ) -> Candidate {
        Candidate {
            name: name.into(),
            partitions: vec!["all".into()],
            features: std::iter::once(name)
                .chain(features.iter().copied())
                .map(String::from)
                .collect(),
            shape: Shape {
                cpus: Some(cpus),
                memory_bytes: Some(64 * GIB),
                gpus,
            },
            weight,
            max_nodes: Some(2),
            priority: 0,
            full_nodes: 0,
            gpu_full_nodes: 0,
        }
    }

    /// Three NodeSets whose names say nothing of their shape, under one partition.
    fn site() -> Vec<Candidate> {
        vec![
            nodeset("alpha", &["a100"], 16, Some(4), 100),
            nodeset("bravo", &["fastscratch"], 8, None, 10),
            nodeset("charlie", &[], 8, None, 20),
        ]
    }

    fn chosen(job: &PendingJob, candidates: &[Candidate]) -> Option<usize> {
        placed(job, candidates).first().map(|(i, _)| *i)
    }

    fn name(job: &PendingJob) -> Option<&'static str> {
        chosen(job, &site()).map(|i| ["alpha", "bravo", "charlie"][i])
    }

    #[test]
    fn the_nodeset_that_grows_is_the_one_slurm_would_place_the_job_on() {
        // A plain CPU job: bravo and charlie fit, bravo's Weight is lower.
        assert_eq!(name(&job(1, 4, 0, "")), Some("bravo"));
        // A GPU job: only alpha's nodes are known to have GPUs.
        assert_eq!(name(&job(1, 4, 2, "")), Some("alpha"));
        // A feature only charlie has (its own name), and one only alpha has.
        assert_eq!(name(&job(1, 4, 0, "charlie")), Some("charlie"));
        assert_eq!(name(&job(2, 8, 0, "a100")), Some("alpha"));
        // Bigger than any node of bravo or charlie per node: alpha's 16 CPUs.
        assert_eq!(name(&job(1, 12, 0, "")), Some("alpha"));
        // Nothing runs it: more CPUs a node than any has, a feature nobody has.
        assert_eq!(name(&job(1, 32, 0, "")), None);
        assert_eq!(name(&job(1, 4, 0, "h100")), None);
        // Not in any partition they serve.
        let mut elsewhere = job(1, 4, 0, "");
        elsewhere.partitions = Arc::from(vec![Arc::from("debug")]);
        assert_eq!(name(&elsewhere), None);
    }

    #[test]
    fn at_equal_weight_the_smaller_node_wins() {
        let mut nodesets = site();
        for n in &mut nodesets {
            n.weight = 1;
        }
        // A CPU job: bravo and charlie (8 CPUs) before alpha (16); the name breaks the tie.
        assert_eq!(chosen(&job(1, 4, 0, ""), &nodesets), Some(1));
        // A site's priority comes before the node's size and the name, not before Weight.
        nodesets[0].priority = 5;
        assert_eq!(chosen(&job(1, 4, 0, ""), &nodesets), Some(0));
        nodesets[0].weight = 2;
        assert_eq!(chosen(&job(1, 4, 0, ""), &nodesets), Some(1));
    }

    /// bravo and alpha under one partition: each counts the jobs it grows for; a job
    /// neither can run is unsatisfiable for both, and the partition's own figures count all.
    #[test]
    fn a_nodesets_demand_is_the_jobs_it_grows_for() {
        use crate::model::Jobs;
        use crate::model::demand::{Room, demand_of};
        let mut pending = vec![
            job(1, 2, 0, "fastscratch"),
            job(1, 4, 0, "a100"),
            job(1, 1, 0, ""),
            job(1, 1, 0, "h100"),
        ];
        for (i, j) in pending.iter_mut().enumerate() {
            j.id = i as u64;
        }
        let jobs = Jobs {
            pending,
            ..Jobs::default()
        };
        let nodesets = [
            nodeset("bravo", &["fastscratch"], 8, None, 10),
            nodeset("alpha", &["a100"], 16, Some(4), 100),
        ];
        let count = |takes: &Takes<'_>| {
            let room = Room::new(&["all"], &[], Shape::default());
            let d = demand_of(&jobs, &["all"], None, Some(&room), &|j| takes.job(j));
            (
                d.jobs(PendingClass::Schedulable),
                d.unsatisfiable_jobs,
                d.elsewhere_jobs,
            )
        };
        let of = |me| Takes {
            origins: &Origin::ALL,
            nodeset: Some((&nodesets, me)),
        };
        // bravo: the fastscratch job and the plain one (lower Weight); alpha: the a100 job.
        assert_eq!(count(&of(0)), (3, 1, 1));
        assert_eq!(count(&of(1)), (2, 1, 2));
        assert_eq!(count(&Takes::ALL), (4, 0, 0));
    }

    /// Two NodeSet objects of one Slurm name (a copy in another namespace) are one NodeSet
    /// in Slurm: each counts the jobs that NodeSet grows for.
    #[test]
    fn nodesets_of_one_slurm_name_are_one() {
        let twins = [
            nodeset("bravo", &[], 8, None, 1),
            nodeset("bravo", &[], 8, None, 1),
        ];
        for me in [0, 1] {
            let takes = Takes {
                origins: &Origin::ALL,
                nodeset: Some((&twins, me)),
            };
            assert_eq!(takes.job(&job(1, 4, 0, "")), Take::Yes, "twin {me}");
            assert!(!takes.shared(&["all"]), "a twin is no other NodeSet");
        }
    }

    /// A partition's nodes stand for a NodeSet's shape only while no other NodeSet is in it.
    #[test]
    fn a_partition_is_shared_when_another_nodeset_serves_it() {
        let mut all = site();
        all[0].partitions = vec!["gpu".into()];
        let of = |me| Takes {
            origins: &Origin::ALL,
            nodeset: Some((&all, me)),
        };
        assert!(!of(0).shared(&["gpu"]));
        assert!(of(0).shared(&["gpu", "all"]));
        assert!(of(1).shared(&["all"]));
        assert!(!Takes::ALL.shared(&["all"]));
        assert_eq!(of(0).own_nodes_in(&["gpu"]), None);
        assert_eq!(of(1).own_nodes_in(&["all"]), Some("bravo"));
        assert!(of_nodeset("bravo-0", "bravo") && of_nodeset("bravo-012", "bravo"));
        for other in [
            "bravo",
            "bravo-",
            "bravo-x",
            "bravo-1-2",
            "charlie-0",
            "bravo2-0",
        ] {
            assert!(!of_nodeset(other, "bravo"), "{other}");
        }
    }

    /// A job needing more nodes than its preferred NodeSet may have takes that NodeSet's
    /// nodes first and the next ones' for the rest, as Slurm places it once they exist;
    /// one that even all of them cannot hold stays whole on the first, over its bound.
    #[test]
    fn a_job_larger_than_a_nodeset_is_split_as_slurm_would_place_it() {
        let all = site();
        // 3 nodes of 4 CPUs, each NodeSet at most 2: bravo (Weight 10) 2, charlie (20) 1.
        assert_eq!(placed(&job(3, 12, 0, ""), &all), [(1, 2), (2, 1)]);
        // 5: bravo 2, charlie 2, alpha (100, the largest) 1.
        assert_eq!(placed(&job(5, 20, 0, ""), &all), [(1, 2), (2, 2), (0, 1)]);
        // 7: more than the three may have together: whole on bravo (unsatisfiable there).
        assert_eq!(placed(&job(7, 7, 0, ""), &all), [(1, 7)]);
        // 3 GPU jobs' nodes: only alpha has GPUs, so it stays whole there.
        assert_eq!(placed(&job(3, 3, 3, ""), &all), [(0, 3)]);
        // With no bound known, the preferred NodeSet takes it whole.
        let mut unbound = all.clone();
        unbound[1].max_nodes = None;
        assert_eq!(placed(&job(5, 20, 0, ""), &unbound), [(1, 5)]);

        // Each NodeSet counts its part: its share of each node, as many nodes as it holds.
        use crate::model::Jobs;
        use crate::model::demand::{Room, demand_of};
        let jobs = Jobs {
            pending: vec![job(3, 12, 0, "")],
            ..Jobs::default()
        };
        let of = |me| {
            let takes = Takes {
                origins: &Origin::ALL,
                nodeset: Some((&all, me)),
            };
            assert_eq!(
                takes.job(&jobs.pending[0]),
                [Take::Elsewhere, Take::Part(2), Take::Part(1)][me]
            );
            let room = Room::new(&["all"], &[], all[me].shape);
            demand_of(&jobs, &["all"], all[me].max_nodes, Some(&room), &|j| {
                takes.job(j)
            })
        };
        let (bravo, charlie, alpha) = (of(1), of(2), of(0));
        assert_eq!((bravo.nodes, bravo.cpus, bravo.part_jobs), (2, 8, 1));
        assert_eq!((charlie.nodes, charlie.cpus, charlie.part_jobs), (1, 4, 1));
        assert_eq!((alpha.nodes, alpha.elsewhere_jobs), (0, 1));
        assert_eq!(bravo.unsatisfiable_jobs + charlie.unsatisfiable_jobs, 0);
        assert!(
            bravo.explain().contains("1 of them span other NodeSets"),
            "{}",
            bravo.explain()
        );
    }

    /// `--exclude` takes a NodeSet's excluded nodes off its bound: all of them excluded, it
    /// cannot run the job, which goes to the next NodeSet that can; some, it holds fewer.
    #[test]
    fn excluded_nodes_leave_a_nodeset_less_room() {
        let all = site();
        let excluding = |n: u64, list: &str| {
            let mut j = job(n, 4 * n, 0, "");
            j.excluded = Arc::from(list);
            placed(&j, &all)
        };
        assert_eq!(excluding(1, "bravo-[0-1]"), [(2, 1)]);
        assert_eq!(excluding(2, "bravo-1,login1"), [(1, 1), (2, 1)]);
        // Beyond the bound, or another NodeSet's: no room taken.
        assert_eq!(excluding(2, "bravo-[2-9],bravo2-0,bravox-1"), [(1, 2)]);
        // Every CPU NodeSet's nodes excluded: alpha, the only one left.
        assert_eq!(excluding(1, "bravo-[0-1],charlie-[0-1]"), [(0, 1)]);
        assert_eq!(excluding(1, "alpha-[0-1],bravo-[0-1],charlie-[0-1]"), []);
    }

    /// A NodeSet whose nodes up to its bound are all full leaves a job to the next one with
    /// room, as Slurm's power saving would start it there; with no room anywhere the job
    /// waits for the preferred one.
    #[test]
    fn a_full_nodeset_leaves_the_job_to_the_next_with_room() {
        let mut all = site();
        all[1].full_nodes = 2;
        // bravo full: charlie, the next by Weight; a 3-node job: charlie 2, alpha 1.
        assert_eq!(placed(&job(1, 4, 0, ""), &all), [(2, 1)]);
        assert_eq!(placed(&job(3, 12, 0, ""), &all), [(2, 2), (0, 1)]);
        // One of bravo's full: it holds 1 now, charlie the other.
        all[1].full_nodes = 1;
        assert_eq!(placed(&job(2, 8, 0, ""), &all), [(1, 1), (2, 1)]);
        // All full: the job waits where Slurm prefers it.
        for c in &mut all {
            c.full_nodes = 2;
        }
        assert_eq!(placed(&job(1, 4, 0, ""), &all), [(1, 1)]);
        assert_eq!(placed(&job(3, 12, 0, ""), &all), [(1, 2), (2, 1)]);
        // alpha's nodes busy with every GPU taken but CPUs left: full for a GPU job only.
        let mut all = site();
        all[0].max_nodes = Some(1);
        all[0].gpu_full_nodes = 1;
        all.push(nodeset("delta", &[], 16, Some(4), 200));
        assert_eq!(placed(&job(1, 4, 1, ""), &all), [(3, 1)]);
        all[1].full_nodes = 2;
        all[2].full_nodes = 2;
        assert_eq!(placed(&job(1, 12, 0, ""), &all), [(0, 1)]);
    }
}
