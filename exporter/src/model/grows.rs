//! Which NodeSet grows for a pending job when several could run it. From slurm-operator 1.1
//! a partition spans NodeSets (CPU, GPU, high-memory), and a job pending there should add a
//! node to one of them, not to each. Of the NodeSets whose nodes can run the job — in one of
//! its partitions, meeting its `--constraint`, each node big enough for its share (CPUs,
//! memory, GPUs) — one whose node shape is known to fit comes before one whose shape is
//! partly unknown (a GPU job goes to the NodeSet that declares GPUs, not to one that might
//! detect some); then Slurm's own preference, the lowest node `Weight`, which is where
//! slurmctld places work first; then the smallest node (fewest CPUs, then least memory, then
//! fewest GPUs): the cheapest fit; then the name, so every reader chooses alike.

use super::PendingJob;
use super::constraint;
use super::demand::{Shape, Take};
use super::origin::Origin;

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

/// The index of the candidate that grows for `job`, or `None` when none can run it.
/// Whether Slurm node `node` is one of NodeSet `nodeset`'s: `<nodeset>-<ordinal>`, as
/// slurm-operator names its pods (and the autoscaler its node records).
pub fn of_nodeset(node: &str, nodeset: &str) -> bool {
    node.strip_prefix(nodeset)
        .and_then(|rest| rest.strip_prefix('-'))
        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

pub fn chosen(job: &PendingJob, candidates: &[Candidate]) -> Option<usize> {
    candidates
        .iter()
        .enumerate()
        .filter_map(|(i, c)| fit(job, c).map(|known| (i, c, known)))
        .min_by_key(|(_, c, known)| {
            let size = |v: Option<u64>| v.unwrap_or(u64::MAX);
            (
                !known,
                c.weight,
                size(c.shape.cpus),
                size(c.shape.memory_bytes),
                size(c.shape.gpus),
                c.name.as_str(),
            )
        })
        .map(|(i, _, _)| i)
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
            Some((all, me)) => match chosen(job, all) {
                Some(i) if i == me || all[i].name == all[me].name => Take::Yes,
                Some(_) => Take::Elsewhere,
                None => Take::Nobody,
            },
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
}
