//! Property-based fuzzing of every decoder of every API version: arbitrary bytes, arbitrary
//! JSON, objects with the keys we read bound to values of any type, and recorded answers
//! with random cuts and byte flips. A decoder may reject its input; it must never panic, and
//! what it accepts must render to metrics without panicking either.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use proptest::prelude::*;
use serde_json::{Map, Value, json};
use slurmscale_exporter::metrics::{self, MetricsOptions, PageInput};
use slurmscale_exporter::slurm::ApiVersion;
use slurmscale_exporter::snapshot::ClusterSnapshot;

/// Any JSON value, a few levels deep.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<u64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
        ".{0,12}".prop_map(Value::String),
        prop::sample::select(vec![
            "gpu:4",
            "gres/gpu:a100:2",
            "1-20%5",
            "c[1-4]",
            "RUNNING",
            "idle",
            "DRAIN",
            "gres/gpu=2"
        ])
        .prop_map(|s| Value::String(s.into())),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Keys the decoders read, so random values land where they matter.
const KEYS: &[&str] = &[
    "job_id",
    "job_state",
    "state_reason",
    "partition",
    "user_name",
    "account",
    "node_count",
    "max_nodes",
    "cpus",
    "tasks",
    "memory_per_node",
    "memory_per_cpu",
    "hold",
    "priority",
    "tres_per_job",
    "tres_per_node",
    "tres_per_task",
    "tres_req_str",
    "tres_alloc_str",
    "gres_detail",
    "job_resources",
    "array_job_id",
    "array_task_id",
    "array_task_string",
    "array_max_tasks",
    "submit_time",
    "name",
    "state",
    "state_flags",
    "partitions",
    "alloc_cpus",
    "real_memory",
    "alloc_memory",
    "free_memory",
    "free_mem",
    "gres",
    "gres_used",
    "reason",
    "reason_set_by_user",
    "nodes",
    "total_nodes",
    "total_cpus",
    "maximum_nodes_per_job",
    "maximums",
    "hostname",
    "ping",
    "pinged",
    "responding",
    "primary",
    "mode",
    "latency",
    "set",
    "infinite",
    "number",
];

fn keyed_object() -> impl Strategy<Value = Value> {
    prop::collection::vec((prop::sample::select(KEYS), any_json()), 0..12).prop_map(|kv| {
        Value::Object(
            kv.into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect::<Map<_, _>>(),
        )
    })
}

fn answer() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::sample::select(vec![
            "jobs",
            "nodes",
            "partitions",
            "pings",
            "statistics",
            "errors",
            "warnings",
            "meta",
        ]),
        prop_oneof![
            prop::collection::vec(keyed_object(), 0..6).prop_map(Value::Array),
            keyed_object(),
            any_json()
        ],
        any_json(),
    )
        .prop_map(|(key, data, errors)| {
            let mut v = json!({ "meta": {"slurm": {"release": "99.99"}}, "errors": [] });
            v[key] = data;
            if errors.is_array() {
                v["warnings"] = errors;
            }
            serde_json::to_vec(&v).unwrap()
        })
}

/// Decodes with every decoder of every version and renders whatever decodes.
fn decode_everything(bytes: &[u8]) {
    for version in ApiVersion::ALL {
        let at = SystemTime::UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let mut s = ClusterSnapshot::new("fuzz", "http://fuzz");
        if let Ok(d) = version.decode_ping(bytes) {
            s.ping.succeed(at, Duration::ZERO, Some(d.data));
        }
        if let Ok(d) = version.decode_diag(bytes) {
            s.diag.succeed(at, Duration::ZERO, Some(d.data));
        }
        if let Ok(d) = version.decode_jobs(bytes, true) {
            s.jobs.succeed(at, Duration::ZERO, Some(d.data));
        }
        if let Ok(d) = version.decode_nodes(bytes) {
            s.nodes.succeed(at, Duration::ZERO, Some(d.data));
        }
        if let Ok(d) = version.decode_partitions(bytes) {
            s.partitions.succeed(at, Duration::ZERO, Some(d.data));
        }
        s.collected_at = Some(at);
        let opts = MetricsOptions {
            per_owner: true,
            ..Default::default()
        };
        let _ = metrics::render(&PageInput::new(&[Arc::new(s)], &opts, at), |_| {});
    }
}

fn recorded() -> Vec<Vec<u8>> {
    let root = golden_root();
    let mut out = Vec::new();
    for version in ApiVersion::ALL {
        for e in ["jobs", "nodes", "partitions", "diag", "ping"] {
            if let Ok(b) = std::fs::read(root.join(version.as_str()).join(format!("{e}.json"))) {
                out.push(b);
            }
        }
    }
    assert!(out.len() >= 35, "golden answers missing");
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        decode_everything(&bytes);
    }

    #[test]
    fn arbitrary_answers_never_panic(bytes in answer()) {
        decode_everything(&bytes);
    }

    #[test]
    fn damaged_recordings_never_panic(index in 0usize..35, cut in 0.0f64..1.0, flips in prop::collection::vec((0.0f64..1.0, any::<u8>()), 0..8)) {
        let all = recorded();
        let mut bytes = all[index % all.len()].clone();
        for (at, byte) in flips {
            let i = ((bytes.len() as f64) * at) as usize;
            if i < bytes.len() {
                bytes[i] = byte;
            }
        }
        bytes.truncate(((bytes.len() as f64) * cut) as usize + 1);
        decode_everything(&bytes);
    }
}

/// The package's directory as the running `cargo test` says: a target dir shared by two
/// checkouts may hold this binary built from the other, with the other's path compiled in.
fn golden_root() -> std::path::PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(
            || env!("CARGO_MANIFEST_DIR").into(),
            std::path::PathBuf::from,
        )
        .join("tests/golden")
}
