//! A small cluster for the metric families' unit tests: slurmrestd's own answers (REST
//! v0.0.42, trimmed to what the decoders read) decoded into one snapshot, as a poller
//! publishes it after a good cycle. Each family's test renders it alone and compares the
//! exposition text line by line, so a change to a family shows there, not only in the
//! whole-page goldens.
//!
//! Two partitions: `cpu` (c1 idle, c2 mixed and draining, c3 powered down) and `gpu` (g1
//! allocated, four GPUs). Jobs: 1 runs on c2 (alice, 4 CPUs), 2 waits for two cpu nodes
//! (bob; the backfill scheduler plans it on c1 and c3 ten minutes on), 3 is held (alice), 4 runs on g1 with two GPUs (carol), 5 is a pending array of
//! three tasks on gpu (carol).
//!
//! On the Kubernetes side ([`kube`]): NodeSet `slurm-worker-gpu` as Slinky's chart names it
//! (pod host name `gpu-`, so Slurm's `gpu`), one replica of two wanted, bounded at 4 by its
//! annotation; and the GenericNode ledger of a pool of two nodes shared with `cpu` (c1 all
//! Slurm's, c2 half Kubernetes'), one of them malformed away.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::json;

use super::{MetricsOptions, Out};
use crate::k8s::ledger::{self, Capacity, LedgerConfig};
use crate::k8s::nodeset::{NodeSetView, v1beta1};
use crate::k8s::watch::{KubeSnapshot, WatchHealth};
use crate::slurm::ApiVersion;
use crate::snapshot::ClusterSnapshot;

/// "Now" for the fixture: a minute after the answers were taken.
pub const NOW: u64 = 1_800_000_060;
/// When the answers were taken.
pub const AT: u64 = 1_800_000_000;

const PING: &str = r#"{"pings": [{"hostname": "ctl", "pinged": "UP", "responding": true,
  "latency": 1500, "mode": "primary", "primary": true}],
  "meta": {"slurm": {"version": {"major": "24", "micro": "5", "minor": "11"},
    "release": "24.11.5", "cluster": "fixture"}}, "errors": [], "warnings": []}"#;

const DIAG: &str = r#"{"statistics": {"server_thread_count": 3, "agent_queue_size": 0,
  "agent_count": 0, "agent_thread_count": 0, "dbd_agent_queue_size": 2,
  "schedule_cycle_max": 4000, "schedule_cycle_last": 150, "schedule_cycle_sum": 6000,
  "schedule_cycle_total": 10, "schedule_cycle_mean": 600, "schedule_cycle_mean_depth": 2,
  "schedule_cycle_per_minute": 2, "schedule_cycle_depth": 20, "schedule_queue_length": 2,
  "jobs_submitted": 12, "jobs_started": 6, "jobs_completed": 3, "jobs_canceled": 1,
  "jobs_failed": 0, "jobs_pending": 3, "jobs_running": 2, "bf_backfilled_jobs": 1,
  "bf_last_backfilled_jobs": 1, "bf_backfilled_het_jobs": 0, "bf_cycle_counter": 4,
  "bf_cycle_mean": 900, "bf_depth_mean": 3, "bf_depth_mean_try": 3, "bf_cycle_sum": 3600,
  "bf_cycle_last": 800, "bf_cycle_max": 1200, "bf_last_depth": 3, "bf_last_depth_try": 3,
  "bf_queue_len": 2, "bf_queue_len_mean": 2, "bf_table_size": 1, "bf_table_size_mean": 1,
  "bf_active": false,
  "req_time": {"set": true, "infinite": false, "number": 1800000000},
  "req_time_start": {"set": true, "infinite": false, "number": 1799990000},
  "bf_when_last_cycle": {"set": true, "infinite": false, "number": 1799999990}},
  "errors": [], "warnings": []}"#;

pub const NODES: &str = r#"{"nodes": [
  {"name": "c1", "state": ["IDLE"], "cpus": 8, "alloc_cpus": 0, "real_memory": 16000,
   "alloc_memory": 0, "free_mem": {"set": true, "infinite": false, "number": 15000},
   "partitions": ["cpu"], "gres": "", "gres_used": "", "reason": "", "features": [],
   "active_features": [], "weight": 1},
  {"name": "c2", "state": ["MIXED", "DRAIN"], "cpus": 8, "alloc_cpus": 4,
   "real_memory": 16000, "alloc_memory": 4000,
   "free_mem": {"set": true, "infinite": false, "number": 11000},
   "partitions": ["cpu"], "gres": "", "gres_used": "", "reason": "disk check",
   "features": [], "active_features": [], "weight": 1},
  {"name": "c3", "state": ["IDLE", "POWERED_DOWN"], "cpus": 8, "alloc_cpus": 0,
   "real_memory": 16000, "alloc_memory": 0,
   "free_mem": {"set": false, "infinite": false, "number": 0},
   "partitions": ["cpu"], "gres": "", "gres_used": "", "reason": "", "features": [],
   "active_features": [], "weight": 1},
  {"name": "g1", "state": ["ALLOCATED"], "cpus": 16, "alloc_cpus": 16,
   "real_memory": 64000, "alloc_memory": 8000,
   "free_mem": {"set": true, "infinite": false, "number": 50000},
   "partitions": ["gpu"], "gres": "gpu:4", "gres_used": "gpu:2(IDX:0-1)", "reason": "",
   "features": [], "active_features": [], "weight": 1}
 ], "errors": [], "warnings": []}"#;

pub const PARTITIONS: &str = r#"{"partitions": [
  {"name": "cpu", "nodes": {"configured": "c[1-3]", "total": 3},
   "cpus": {"total": 24}, "partition": {"state": ["UP"]},
   "tres": {"configured": "cpu=24,mem=48000M,node=3,billing=24"},
   "maximums": {"nodes": {"set": false, "infinite": true, "number": 0}},
   "suspend_time": {"set": false, "infinite": false, "number": 0}},
  {"name": "gpu", "nodes": {"configured": "g1", "total": 1},
   "cpus": {"total": 16}, "partition": {"state": ["UP"]},
   "tres": {"configured": "cpu=16,mem=64000M,node=1,billing=16,gres/gpu=4"},
   "maximums": {"nodes": {"set": false, "infinite": true, "number": 0}},
   "suspend_time": {"set": false, "infinite": false, "number": 0}}
 ], "errors": [], "warnings": []}"#;

pub const JOBS: &str = r#"{"jobs": [
  {"job_id": 1, "job_state": ["RUNNING"], "partition": "cpu", "user_name": "alice",
   "account": "physics", "node_count": {"set": true, "infinite": false, "number": 1},
   "cpus": {"set": true, "infinite": false, "number": 4}, "nodes": "c2",
   "state_reason": "None", "hold": false, "shared": [],
   "tres_req_str": "cpu=4,mem=4000M,node=1", "tres_alloc_str": "cpu=4,mem=4000M,node=1",
   "submit_time": {"set": true, "infinite": false, "number": 1799999000},
   "end_time": {"set": true, "infinite": false, "number": 1800003600},
   "array_job_id": {"set": true, "infinite": false, "number": 0},
   "array_task_id": {"set": false, "infinite": false, "number": 0},
   "array_task_string": "", "flags": []},
  {"job_id": 2, "job_state": ["PENDING"], "partition": "cpu", "user_name": "bob",
   "account": "physics", "node_count": {"set": true, "infinite": false, "number": 2},
   "cpus": {"set": true, "infinite": false, "number": 16}, "nodes": "",
   "state_reason": "Resources", "hold": false, "shared": ["none"],
   "tres_req_str": "cpu=16,mem=8000M,node=2",
   "start_time": {"set": true, "infinite": false, "number": 1800000600},
   "scheduled_nodes": "c[1,3]",
   "submit_time": {"set": true, "infinite": false, "number": 1799999400},
   "array_job_id": {"set": true, "infinite": false, "number": 0},
   "array_task_id": {"set": false, "infinite": false, "number": 0},
   "array_task_string": "", "flags": []},
  {"job_id": 3, "job_state": ["PENDING"], "partition": "cpu", "user_name": "alice",
   "account": "physics", "node_count": {"set": true, "infinite": false, "number": 1},
   "cpus": {"set": true, "infinite": false, "number": 1}, "nodes": "",
   "state_reason": "JobHeldUser", "hold": true, "shared": [],
   "tres_req_str": "cpu=1,mem=500M,node=1",
   "submit_time": {"set": true, "infinite": false, "number": 1799999500},
   "array_job_id": {"set": true, "infinite": false, "number": 0},
   "array_task_id": {"set": false, "infinite": false, "number": 0},
   "array_task_string": "", "flags": []},
  {"job_id": 4, "job_state": ["RUNNING"], "partition": "gpu", "user_name": "carol",
   "account": "ml", "node_count": {"set": true, "infinite": false, "number": 1},
   "cpus": {"set": true, "infinite": false, "number": 16}, "nodes": "g1",
   "state_reason": "None", "hold": false, "shared": ["none"],
   "tres_per_node": "gres/gpu:2",
   "tres_req_str": "cpu=16,mem=8000M,node=1,gres/gpu=2",
   "tres_alloc_str": "cpu=16,mem=8000M,node=1,gres/gpu=2",
   "submit_time": {"set": true, "infinite": false, "number": 1799998000},
   "end_time": {"set": true, "infinite": false, "number": 1800007200},
   "array_job_id": {"set": true, "infinite": false, "number": 0},
   "array_task_id": {"set": false, "infinite": false, "number": 0},
   "array_task_string": "", "flags": []},
  {"job_id": 5, "job_state": ["PENDING"], "partition": "gpu", "user_name": "carol",
   "account": "ml", "node_count": {"set": true, "infinite": false, "number": 1},
   "cpus": {"set": true, "infinite": false, "number": 4}, "nodes": "",
   "state_reason": "Resources", "hold": false, "shared": [],
   "tres_per_node": "gres/gpu:1", "tres_req_str": "cpu=4,mem=2000M,node=1,gres/gpu=1",
   "submit_time": {"set": true, "infinite": false, "number": 1799999800},
   "array_job_id": {"set": true, "infinite": false, "number": 5},
   "array_task_id": {"set": false, "infinite": false, "number": 0},
   "array_task_string": "0-2", "flags": []}
 ], "last_backfill": {"set": true, "infinite": false, "number": 1799999990},
 "last_update": {"set": true, "infinite": false, "number": 1799999990},
 "errors": [], "warnings": []}"#;

fn at(secs: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(secs)
}

/// The fixture cluster, as a poller publishes it after one good cycle.
pub fn snapshot() -> ClusterSnapshot {
    snapshot_of(NODES, PARTITIONS, JOBS)
}

/// The fixture cluster with other `/nodes`, `/partitions` and `/jobs` answers.
pub fn snapshot_of(nodes: &str, partitions: &str, jobs: &str) -> ClusterSnapshot {
    let v = ApiVersion::V0042;
    let (t, took) = (at(AT), Duration::from_millis(20));
    let mut s = ClusterSnapshot::new("fixture", "http://127.0.0.1:6820");
    s.api_version = Some(v);
    let ping = v.decode_ping(PING.as_bytes()).expect("ping decodes");
    s.release = ping.release.clone();
    s.ping.succeed(t, took, Some(ping.data));
    let diag = v.decode_diag(DIAG.as_bytes()).expect("diag decodes").data;
    s.diag.succeed(t, took, Some(diag));
    let jobs = v
        .decode_jobs(jobs.as_bytes(), true)
        .expect("jobs decode")
        .data;
    s.jobs.succeed(t, took, Some(jobs));
    let nodes = v.decode_nodes(nodes.as_bytes()).expect("nodes decode").data;
    s.nodes.succeed(t, took, Some(nodes));
    let partitions = v
        .decode_partitions(partitions.as_bytes())
        .expect("partitions decode")
        .data;
    s.partitions.succeed(t, took, Some(partitions));
    s.cycles = 1;
    s.collected_at = Some(t);
    s.collection_duration = Some(took);
    s
}

/// Options with every optional series on (per-user jobs, per-node series).
pub fn options() -> MetricsOptions {
    MetricsOptions {
        per_owner: true,
        ..Default::default()
    }
}

/// One cluster family rendered alone on the fixture.
pub fn render(family: fn(&mut Out, &ClusterSnapshot, &MetricsOptions)) -> String {
    let mut out = Out::new();
    let s = snapshot();
    out.set_cluster(&s.cluster);
    family(&mut out, &s, &options());
    out.encode()
}

/// The scrape time of the fixture.
pub fn now() -> SystemTime {
    at(NOW)
}

/// Compares rendered text with the expected lines, showing both in full on a difference.
#[track_caller]
pub fn assert_text(got: &str, want: &str) {
    let want = want
        .lines()
        .map(str::trim_start)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
        + "\n";
    assert!(got == want, "rendered:\n{got}\nexpected:\n{want}");
}

/// The Kubernetes side: one NodeSet, a two-node GenericNode ledger (and one GenericNode
/// skipped as malformed), the Nodes' capacity, every watch healthy.
pub fn kube() -> KubeSnapshot {
    let nodeset: v1beta1::NodeSet = serde_json::from_value(json!({
        "apiVersion": "slinky.slurm.net/v1beta1", "kind": "NodeSet",
        "metadata": {"name": "slurm-worker-gpu", "namespace": "slurm",
                     "annotations": {"slurmscale.io/max-nodes": "4"}},
        "spec": {"replicas": 2, "template": {"spec": {"hostname": "gpu-"}}},
        "status": {"replicas": 1, "readyReplicas": 1, "selector": "app=gpu"},
    }))
    .expect("the fixture NodeSet is valid");
    let generic = |name: &str, alias: &str, slurm: &str, k8s: &str| {
        let object = serde_json::from_value(json!({
            "apiVersion": "kai.alibabacloud.com/v1alpha1", "kind": "GenericNode",
            "metadata": {"name": name, "labels": {"kai.alibabacloud.com/cluster-name": "fixture"}},
            "spec": {"alias": alias, "type": "Slurm"},
            "status": {"allocatedResources": [
                {"type": "Slurm", "allocated": {"cpu": slurm, "memory": "0"}},
                {"type": "Kubernetes", "allocated": {"cpu": k8s, "memory": "1Gi"}},
            ]},
        }))
        .unwrap();
        ledger::parse(&object, &LedgerConfig::default()).expect("the fixture ledger is valid")
    };
    let capacity = |cpu: f64| Capacity {
        resources: BTreeMap::from([
            ("cpu".to_string(), cpu),
            ("memory".to_string(), 16.0 * 1024.0 * 1024.0 * 1024.0),
        ]),
        ..Default::default()
    };
    let healthy = WatchHealth {
        probed: true,
        served: true,
        synced: true,
        version: None,
        last_error: None,
    };
    KubeSnapshot {
        nodesets: vec![NodeSetView::from(&nodeset)],
        ledger: Arc::new(vec![
            generic("node-c1", "c1", "8", "0"),
            generic("node-c2", "c2", "4", "4"),
        ]),
        malformed: BTreeMap::from([(("fixture".to_string(), ledger::Malformed::NoStatus), 1)]),
        capacity: Arc::new(BTreeMap::from([
            ("node-c1".to_string(), capacity(8.0)),
            ("node-c2".to_string(), capacity(8.0)),
        ])),
        autoscaled: BTreeMap::new(),
        watches: BTreeMap::from([("nodesets", healthy.clone()), ("genericnodes", healthy)]),
    }
}

/// One Kubernetes family rendered alone on the fixture (with the Slurm side beside it).
pub fn render_kube(
    family: fn(&mut Out, &KubeSnapshot, &[Arc<ClusterSnapshot>], &MetricsOptions, SystemTime),
) -> String {
    let mut out = Out::new();
    family(
        &mut out,
        &kube(),
        &[Arc::new(snapshot())],
        &options(),
        now(),
    );
    out.encode()
}
