//! Packed demand on a large partition: 100,000 pending jobs onto 10,000 nodes (a third of
//! them up and partly busy), against the unpacked count of the same jobs in the same process
//! (the sum it replaces), so the figure survives this machine's drifting speed. Target:
//! ≤ 50 ms, so the autoscaler's 2 s loop does not notice. Also the worst case:
//! every job of a different size, so nothing groups. And the same partition over four
//! NodeSets (Slinky 1.1's layout), each NodeSet's share of the jobs chosen job by job
//! ([`placed`](slurmscale_exporter::model::grows::placed)), against one NodeSet taking them all.
//!
//!     cargo bench -p slurmscale-exporter --bench packing

use std::sync::Arc;
use std::time::{Duration, Instant};

use slurmscale_exporter::model::demand::{Room, Shape, Take, demand, demand_of};
use slurmscale_exporter::model::grows::{Candidate, Takes};
use slurmscale_exporter::model::{
    Gres, Jobs, Node, NodeBase, NodeFlags, NodeState, Partition, PendingClass, PendingJob,
};

const GIB: u64 = 1 << 30;
const NODES: u64 = 10_000;
const JOBS: u64 = 100_000;

/// A cheap deterministic sequence (no rand dependency).
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    *seed >> 33
}

fn gpus(count: u64) -> Vec<Gres> {
    vec![Gres {
        name: Arc::from("gpu"),
        kind: Arc::from(""),
        count,
    }]
}

/// 64 CPUs, 512 GiB, 8 GPUs per node; a third up, of those half idle, half partly busy.
fn nodes(partition: &Arc<str>) -> Vec<Node> {
    let mut seed = 7;
    (0..NODES / 3)
        .map(|i| {
            let busy = i % 2 == 1;
            let cpus = if busy { lcg(&mut seed) % 64 } else { 0 };
            Node {
                name: format!("n{i}"),
                state: NodeState {
                    base: if busy {
                        NodeBase::Mixed
                    } else {
                        NodeBase::Idle
                    },
                    flags: NodeFlags::default(),
                },
                partitions: vec![partition.clone()],
                cpus: 64,
                alloc_cpus: cpus,
                memory_bytes: 512 * GIB,
                alloc_memory_bytes: cpus * 4 * GIB,
                free_memory_bytes: None,
                gres: gpus(8),
                gres_used: gpus(if busy { lcg(&mut seed) % 9 } else { 0 }),
                reason: String::new(),
                reason_set_by: String::new(),
            }
        })
        .collect()
}

/// A site's mix: one-CPU array tasks, single-node jobs of 4-32 CPUs, GPU jobs, multi-node
/// jobs of 2-16 nodes, some exclusive. `distinct`: every job's memory differs by a MiB (up
/// to 100,000 distinct sizes; the estimator groups them to 1/1024 of a node).
fn jobs(partition: &Arc<str>, distinct: bool) -> Jobs {
    let parts: Arc<[Arc<str>]> = Arc::from(vec![partition.clone()]);
    let reason: Arc<str> = Arc::from("Resources");
    let mut seed = 11;
    let pending = (0..JOBS)
        .map(|k| {
            let r = lcg(&mut seed) % 100;
            let (nodes, cpus, gpus, whole) = match r {
                0..=39 => (1, 1, 0, false),
                40..=69 => (1, 4 << (lcg(&mut seed) % 4), 0, false),
                70..=84 => (1, 8, 1 + lcg(&mut seed) % 4, false),
                85..=96 => {
                    let n = 2 << (lcg(&mut seed) % 4);
                    (n, n * 32, 0, false)
                }
                _ => (1 + lcg(&mut seed) % 4, 64, 0, true),
            };
            PendingJob {
                id: k,
                partitions: parts.clone(),
                class: PendingClass::Schedulable,
                reason: reason.clone(),
                tasks: 1,
                throttled: 0,
                nodes,
                cpus,
                gpus,
                memory_bytes: cpus * 2 * GIB + if distinct { k << 20 } else { 0 },
                whole_node: whole,
                constraint: Arc::from(""),
                excluded: Arc::from(""),
                submit_time: Some(1_700_000_000 + k as i64),
                origin: slurmscale_exporter::model::origin::Origin::Batch,
                planned_start: None,
            }
        })
        .collect();
    Jobs {
        pending,
        ..Jobs::default()
    }
}

fn best_of(runs: usize, mut f: impl FnMut() -> u64) -> (Duration, u64) {
    let mut best = Duration::MAX;
    let mut out = 0;
    for _ in 0..runs {
        let t = Instant::now();
        out = std::hint::black_box(f());
        best = best.min(t.elapsed());
    }
    (best, out)
}

/// Four NodeSets under the partition, as a site might list them: two CPU shapes, GPU nodes
/// and large-memory nodes, each of its own Weight and bound.
fn nodesets(partition: &str) -> Vec<Candidate> {
    let set = |name: &str, cpus: u64, mem: u64, gpus: u64, weight: u64| Candidate {
        name: name.into(),
        partitions: vec![partition.into()],
        features: vec![name.into()],
        shape: Shape {
            cpus: Some(cpus),
            memory_bytes: Some(mem * GIB),
            gpus: Some(gpus),
        },
        weight,
        max_nodes: Some(NODES / 4),
        priority: 0,
        full_nodes: 10,
        gpu_full_nodes: 0,
    };
    vec![
        set("cpu", 32, 256, 0, 1),
        set("cpu-large", 64, 512, 0, 10),
        set("gpu", 64, 512, 8, 100),
        set("bigmem", 64, 2048, 0, 50),
    ]
}

/// Each NodeSet's demand with the choice, against one NodeSet's with every job its own.
fn over_nodesets(name: &Arc<str>, nodes: &[Node], partition: &Partition) {
    let jobs = jobs(name, false);
    let all = nodesets(name);
    let room = Room::new(&[name], nodes, Shape::of(partition, nodes));
    let (alone, _) = best_of(5, || {
        demand_of(&jobs, &[name], Some(NODES), Some(&room), &|_| Take::Yes).nodes
    });
    let mut total = Duration::ZERO;
    for me in 0..all.len() {
        let takes = Takes {
            origins: &slurmscale_exporter::model::origin::Origin::ALL,
            nodeset: Some((&all, me)),
        };
        let (chosen, needed) = best_of(5, || {
            demand_of(&jobs, &[name], Some(NODES), Some(&room), &|j| takes.job(j)).nodes
        });
        total += chosen;
        println!(
            "over 4 NodeSets, {}: {:.1} ms ({needed} nodes), one NodeSet taking every job {:.1} ms, \
             ratio {:.2}",
            all[me].name,
            chosen.as_secs_f64() * 1e3,
            alone.as_secs_f64() * 1e3,
            chosen.as_secs_f64() / alone.as_secs_f64(),
        );
    }
    println!(
        "over 4 NodeSets, all four: {:.1} ms; target ≤ 50 ms a NodeSet",
        total.as_secs_f64() * 1e3
    );
}

fn main() {
    let name: Arc<str> = Arc::from("big");
    let nodes = nodes(&name);
    let partition = Partition {
        name: name.clone(),
        state: "UP".into(),
        total_nodes: NODES,
        total_cpus: NODES * 64,
        total_memory_bytes: Some(NODES * 512 * GIB),
        total_gpus: Some(NODES * 8),
        max_nodes_per_job: None,
        node_list: String::new(),
        never_suspends: false,
        node_sets: Default::default(),
    };
    println!("{NODES} nodes ({} up), {JOBS} pending jobs", nodes.len());
    for (case, distinct) in [("site mix", false), ("memory sizes all distinct", true)] {
        let jobs = jobs(&name, distinct);
        let (unpacked, job_nodes) =
            best_of(5, || demand(&jobs, &name, Some(NODES), None).job_nodes);
        // As the exporter and autoscaler run it (new nodes capped at the partition's size,
        // work beyond counted unpacked), and with no cap (every job packed).
        for (cap, limit) in [("capped at the partition", Some(NODES)), ("uncapped", None)] {
            let (packed, nodes_needed) = best_of(5, || {
                let room = Room::new(&[&name], &nodes, Shape::of(&partition, &nodes));
                demand(&jobs, &name, limit, Some(&room)).nodes
            });
            println!(
                "{case}, {cap}: packed {:.1} ms ({nodes_needed} nodes), unpacked sum {:.1} ms \
                 ({job_nodes} job nodes), ratio {:.1}; target ≤ 50 ms",
                packed.as_secs_f64() * 1e3,
                unpacked.as_secs_f64() * 1e3,
                packed.as_secs_f64() / unpacked.as_secs_f64(),
            );
        }
    }
    over_nodesets(&name, &nodes, &partition);
}
