//! `slurmscale simulate` from the outside: the formats a site feeds it, what it prints for
//! scripts (`--json`) and people (`--out`), and how it refuses bad input. The engine's
//! schedules are checked by hand-computed cases in the library; this is the command line.

use std::path::Path;
use std::process::{Command, Output};

fn simulate(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_slurmscale"))
        .arg("simulate")
        .args(args)
        .output()
        .expect("slurmscale runs")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// A small SWF trace: 8 one-node jobs and 2 four-node jobs on a 16 × 4-CPU machine.
fn swf(dir: &Path, extra: &str) -> String {
    let mut s = String::from("; UnixStartTime: 1700000000\n; MaxNodes: 16\n; MaxProcs: 64\n");
    for k in 0..10 {
        let procs = if k % 5 == 4 { 16 } else { 2 };
        s.push_str(&format!(
            "{} {} 0 {} {procs} -1 -1 {procs} {} -1 1 1 1 1 1 1 -1 -1\n",
            k + 1,
            k * 60,
            300 + k * 30,
            600 + k * 60
        ));
    }
    s.push_str(extra);
    let path = dir.join("small.swf");
    std::fs::write(&path, s).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn json_rows_carry_every_policy_with_the_documented_keys() {
    let dir = tempfile::tempdir().unwrap();
    let trace = swf(dir.path(), "");
    let out = simulate(&["--trace", &trace, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let rows = rows.as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "builtin",
            "keda",
            "keda-desired",
            "power-save",
            "slurm-planned",
            "static"
        ]
    );
    for r in rows {
        assert_eq!(r["jobs"], 10);
        // A NodeSet following slurmctld's power requests also says which jobs waited a boot.
        let planned = r["policy"] == "slurm-planned";
        assert_eq!(
            r.as_object().unwrap().len(),
            14 + usize::from(planned),
            "{r}"
        );
        if planned {
            let waits = &r["boot_waits"];
            assert!(
                waits["jobs"].as_u64().unwrap() > 0,
                "from zero, a job waits: {r}"
            );
            assert!(waits["p95_s"].as_f64().unwrap() >= 90.0, "one boot: {r}");
            assert_eq!(waits["early_power_ups"], 0, "not booting just in time: {r}");
        }
        let idle_waiting = r["idle_waiting_node_hours"].as_f64().unwrap();
        assert!(
            idle_waiting <= r["idle_node_hours"].as_f64().unwrap(),
            "{r}"
        );
        assert_eq!(
            r["not_replayed"],
            serde_json::json!({}),
            "every record replayed"
        );
        let (total, busy, idle) = (
            r["node_hours"].as_f64().unwrap(),
            r["busy_node_hours"].as_f64().unwrap(),
            r["idle_node_hours"].as_f64().unwrap(),
        );
        assert!((total - busy - idle).abs() < 1e-6 && busy > 0.0, "{r}");
    }
    let hours = |p: usize| rows[p]["node_hours"].as_f64().unwrap();
    assert!(
        hours(0) < hours(5),
        "builtin uses fewer node-hours than static"
    );
}

#[test]
fn out_writes_a_timeline_a_plot_and_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let trace = swf(dir.path(), "");
    let out_dir = dir.path().join("out");
    let out = simulate(&[
        "--trace",
        &trace,
        "--policies",
        "builtin,static",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let table = text(&out.stdout);
    assert!(
        table.contains("builtin") && table.contains("static"),
        "{table}"
    );
    let csv = std::fs::read_to_string(out_dir.join("small.timeline.csv")).unwrap();
    assert!(csv.starts_with("time,policy,pending_jobs,demand_nodes,desired,provisioned,busy\n"));
    assert!(csv.lines().any(|l| l.contains(",builtin,")));
    let svg = std::fs::read_to_string(out_dir.join("small.svg")).unwrap();
    assert!(svg.starts_with("<svg") && svg.contains("builtin:") && svg.contains("static:"));
    assert!(out_dir.join("small.json").exists());
}

#[test]
fn a_sacct_export_with_its_header_replays() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site.txt");
    std::fs::write(
        &path,
        "JobID|Submit|Start|End|Partition|NNodes|NCPUS|ReqMem|ReqTRES|Timelimit|State\n\
         101|2026-10-01T08:00:00|2026-10-01T08:00:05|2026-10-01T09:00:05|gpu|1|8|64G|billing=8,cpu=8,gres/gpu=2,mem=64G,node=1|02:00:00|COMPLETED\n\
         102|2026-10-01T08:10:00|2026-10-01T08:20:00|2026-10-01T08:50:00|gpu|2|16|32G|billing=16,cpu=16,gres/gpu=8,mem=64G,node=2|01:00:00|COMPLETED\n\
         103|2026-10-01T08:11:00|Unknown|Unknown|gpu|1|1|1G|cpu=1,mem=1G,node=1|01:00:00|PENDING\n",
    )
    .unwrap();
    let out = simulate(&[
        "--trace",
        path.to_str().unwrap(),
        "--node-cpus",
        "32",
        "--node-memory",
        "256G",
        "--node-gpus",
        "4",
        "--max-nodes",
        "4",
        "--json",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        rows[0]["jobs"], 2,
        "the job that never started is not replayed"
    );
}

/// A site's accounting holds every partition; a NodeSet serves one. Replayed whole, the
/// command says so; `--partition` replays the one asked for and counts the rest.
#[test]
fn partition_picks_the_jobs_a_nodeset_would_serve() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site.sacct");
    let mut rows = String::new();
    for i in 0..9 {
        let partition = ["cpu", "cpu", "gpu"][i % 3];
        rows.push_str(&format!(
            "{}|2026-10-01T08:{i:02}:00|2026-10-01T08:{i:02}:30|2026-10-01T09:{i:02}:30|{partition}|1|4|4G|cpu=4,mem=4G,node=1|02:00:00|COMPLETED\n",
            200 + i
        ));
    }
    std::fs::write(&path, rows).unwrap();
    let base = [
        "--trace",
        path.to_str().unwrap(),
        "--node-cpus",
        "8",
        "--max-nodes",
        "4",
    ];
    let run = |extra: &[&str]| {
        let out = simulate(
            &[
                &base[..],
                &["--policies", "builtin,static", "--json"],
                extra,
            ]
            .concat(),
        );
        assert!(out.status.success(), "{}", text(&out.stderr));
        let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        (rows[0]["jobs"].as_u64().unwrap(), text(&out.stderr))
    };
    let (jobs, stderr) = run(&[]);
    assert_eq!(jobs, 9);
    assert!(
        stderr.contains("the jobs of 2 partitions (cpu 6, gpu 3) are replayed as one partition"),
        "{stderr}"
    );
    let (jobs, stderr) = run(&["--partition", "gpu"]);
    assert_eq!(jobs, 3);
    assert!(!stderr.contains("replayed as one partition"), "{stderr}");
    let (jobs, _) = run(&["--partition", "gpu,cpu"]);
    assert_eq!(jobs, 9);
    // Without --json the jobs left out are counted.
    let out = simulate(&[&base[..], &["--policies", "static", "--partition", "cpu"]].concat());
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("not replayed: 3 job(s): ran in another partition"),
        "{stderr}"
    );
    // A partition the trace does not have leaves nothing to replay: an error, not zeros.
    let out = simulate(&[&base[..], &["--partition", "fat", "--json"]].concat());
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no job ran in fat; its partitions: cpu, gpu"),
        "{}",
        text(&out.stderr)
    );
}

/// A site's partition over a GPU and a CPU NodeSet (Slinky 1.1's layout): `--nodeset` gives
/// each, the jobs of the trace's `gpu` partition ask for a GPU, and the three ways of choosing
/// which NodeSet grows are replayed side by side.
#[test]
fn nodesets_under_one_partition_replay_each_way_of_choosing_which_grows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("site.sacct");
    let mut rows = String::new();
    for i in 0..30 {
        let (partition, gpu) = match i % 3 {
            2 => ("gpu", ",gres/gpu=1"),
            _ => ("cpu", ""),
        };
        rows.push_str(&format!(
            "{}|2026-10-01T08:{i:02}:00|2026-10-01T08:{i:02}:30|2026-10-01T08:{:02}:30|{partition}|1|4|4G|cpu=4,mem=4G,node=1{gpu}|02:00:00|COMPLETED\n",
            200 + i,
            i + 8
        ));
    }
    std::fs::write(&path, rows).unwrap();
    let trace = ["--trace", path.to_str().unwrap()];
    let gpu = "gpu,cpus=8,gpus=2,nodes=4,weight=10,partition=gpu";
    let cpu = "cpu,cpus=8,nodes=4,partition=cpu";
    let out = simulate(&[&trace[..], &["--nodeset", gpu, "--nodeset", cpu, "--json"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let rows = rows.as_array().unwrap();
    let policies: Vec<&str> = rows.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(policies, ["slurm-order", "every-fit", "first-fit"]);
    let row = |p: &str| rows.iter().find(|r| r["policy"] == p).unwrap();
    let set = |p: &str, k: usize, key: &str| row(p)["nodesets"][k][key].as_f64().unwrap();
    for r in rows {
        assert_eq!(r["jobs"], 30, "{r}");
        assert_eq!(r["nodesets"][0]["nodeset"], "gpu");
        assert_eq!(r["nodesets"][1]["nodeset"], "cpu");
        let hours = set(r["policy"].as_str().unwrap(), 0, "node_hours")
            + set(r["policy"].as_str().unwrap(), 1, "node_hours");
        assert!(
            (hours - r["node_hours"].as_f64().unwrap()).abs() < 1e-6,
            "{r}"
        );
        assert!(r["cpu_hours"].as_f64().unwrap() > 0.0, "{r}");
    }
    // Slurm's order grows the GPU NodeSet for the GPU jobs only; the rivals grow it for CPU
    // jobs too (every-fit beside the CPU NodeSet, first-fit, as gpu is listed first, alone).
    assert!(set("every-fit", 0, "node_hours") > 1.5 * set("slurm-order", 0, "node_hours"));
    assert!(set("first-fit", 0, "node_hours") > 1.5 * set("slurm-order", 0, "node_hours"));
    assert!(
        set("slurm-order", 1, "jobs") >= 15.0,
        "most CPU jobs ran on cpu nodes"
    );
    assert!(
        set("first-fit", 1, "jobs") < 10.0,
        "first-fit put most on gpu nodes"
    );
    let total = |p: &str| row(p)["node_hours"].as_f64().unwrap();
    assert!(total("every-fit") > total("slurm-order"));

    // Bad layouts are refused with the reason.
    for (args, said) in [
        (
            vec!["--nodeset", gpu, "--nodeset", gpu],
            "two NodeSets are called gpu",
        ),
        (
            vec!["--nodeset", "gpu,cpus=8"],
            "cpus=N and nodes=N are needed",
        ),
        (
            vec!["--nodeset", cpu, "--policies", "keda"],
            "unknown choice \"keda\"",
        ),
        (
            vec!["--nodeset", cpu, "--max-nodes", "4"],
            "cannot be used with",
        ),
    ] {
        let out = simulate(&[&trace[..], &args[..]].concat());
        assert!(!out.status.success(), "{args:?}");
        assert!(
            text(&out.stderr).contains(said),
            "{args:?}: {}",
            text(&out.stderr)
        );
    }
}

/// Archive logs hold records of which nothing is known (every field −1, SWF's "unknown"):
/// they are jobs no replay can place, skipped and counted, not a malformed trace.
#[test]
fn records_of_unknown_fields_are_counted_not_fatal() {
    let dir = tempfile::tempdir().unwrap();
    let unknown = "-1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1\n";
    let trace = swf(dir.path(), &unknown.repeat(3));
    let out = simulate(&["--trace", &trace, "--policies", "builtin,static", "--json"]);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("not replayed: 3 job(s): submit time unknown (SWF −1)"),
        "said on stderr, with --json too: {stderr}"
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for r in rows.as_array().unwrap() {
        assert_eq!(r["jobs"], 10);
        assert_eq!(
            r["not_replayed"],
            serde_json::json!({"submit time unknown (SWF −1)": 3}),
            "{r}"
        );
    }
}

#[test]
fn a_bad_line_names_file_line_and_field_unless_skipped() {
    let dir = tempfile::tempdir().unwrap();
    let trace = swf(
        dir.path(),
        "11 700 0 abc 2 -1 -1 2 600 -1 1 1 1 1 1 1 -1 -1\n",
    );
    let out = simulate(&["--trace", &trace, "--json"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("small.swf:14") && err.contains("run time"),
        "{err}"
    );
    assert!(
        err.contains("--skip-bad-lines"),
        "the error names the flag that passes over such lines: {err}"
    );

    let out = simulate(&["--trace", &trace, "--json", "--skip-bad-lines"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("skipped 1 malformed line"),
        "{}",
        text(&out.stderr)
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        rows[0]["not_replayed"]["malformed line (--skip-bad-lines)"],
        1
    );
}

#[test]
fn jobs_too_big_are_reported_and_an_empty_trace_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let trace = swf(dir.path(), "");
    let out = simulate(&[
        "--trace",
        &trace,
        "--max-nodes",
        "2",
        "--policies",
        "static",
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot run 2 job(s)") && err.contains("more nodes than --max-nodes"),
        "{err}"
    );

    let empty = dir.path().join("empty.swf");
    std::fs::write(&empty, "; MaxNodes: 4\n; MaxProcs: 4\n").unwrap();
    let out = simulate(&["--trace", empty.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no job"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_demo_workload_replays_without_a_trace() {
    let out = simulate(&["--workload", "demo", "--duration", "2h", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(rows[0]["jobs"].as_u64().unwrap() > 50);
}

/// A generic pod log: twelve pods of 3.5 CPUs, two minutes apart, columns in their own order.
fn pod_csv(dir: &Path, extra: &str) -> String {
    let mut s = String::from("priority,name,submit_s,run_s,cpus,memory_mib,gpus\n");
    for i in 0..12 {
        s.push_str(&format!("{},web-{i},{},900,3.5,2048,0\n", i % 2, i * 40));
    }
    s.push_str(extra);
    let path = dir.join("pods.csv");
    std::fs::write(&path, s).unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn a_shared_pool_replays_both_logs_under_every_way_of_sharing() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, pods) = (swf(dir.path(), ""), pod_csv(dir.path(), ""));
    let out_dir = dir.path().join("out");
    let out = simulate(&[
        "--trace",
        &trace,
        "--pods",
        &pods,
        "--json",
        "--out",
        out_dir.to_str().unwrap(),
    ]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    let rows = rows.as_array().unwrap();
    let names: Vec<&str> = rows.iter().map(|r| r["policy"].as_str().unwrap()).collect();
    assert_eq!(
        names,
        [
            "builtin",
            "static",
            "static-best",
            "slurm-first",
            "first-come",
            "oracle"
        ]
    );
    let row = |name: &str| rows.iter().find(|r| r["policy"] == name).unwrap();
    for r in rows {
        for key in [
            "stranded_node_hours",
            "slurm_node_hours",
            "kubernetes_node_hours",
            "idle_node_hours",
            "slurm_wait_p95_s",
            "slurm_bounded_slowdown_mean",
            "combined_bounded_slowdown_mean",
            "pod_wait_p95_s",
            "evictions",
            "jobs_killed",
            "lendable_node_hours",
            "gap_closed",
        ] {
            assert!(r.get(key).is_some(), "{key} in {r}");
        }
        assert_eq!(r["jobs"], 10, "{r}");
        assert_eq!(r["pods"], 12, "{r}");
    }
    // Which kube-scheduler scoring placed the pods: the default unless told; the oracle
    // places them itself.
    assert_eq!(row("builtin")["kube_scoring"], "least-allocated");
    assert!(row("oracle")["kube_scoring"].is_null());
    let b = row("builtin");
    assert_eq!(
        (b["jobs_killed"].as_u64(), b["evictions"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(b["pod_hours_lost"].as_f64(), Some(0.0));
    // Every pod ran: none is larger than a node, and the replay ends when both logs are done.
    assert_eq!(b["starved_pods"], 0, "{b}");
    let stranded = |name: &str| row(name)["stranded_node_hours"].as_f64().unwrap();
    assert!(stranded("static-best") <= stranded("static"));
    // The best split wins no stranded hours by starving a side: neither waits longer at
    // p95 than at the even split (`static`, --split 0.5).
    for side in ["slurm_wait_p95_s", "pod_wait_p95_s"] {
        assert!(
            row("static-best")[side].as_f64() <= row("static")[side].as_f64(),
            "{side}: static-best {} against the even split's {}",
            row("static-best"),
            row("static")
        );
    }
    // Both sides' slowdown, node-hour weighted: a wait makes it larger than 1.
    assert!(
        rows.iter()
            .all(|r| r["combined_bounded_slowdown_mean"].as_f64() >= Some(1.0)),
        "{rows:?}"
    );
    for file in [
        "small.shared.timeline.csv",
        "small.shared.svg",
        "small.shared.json",
    ] {
        let body = std::fs::read_to_string(out_dir.join(file)).unwrap_or_default();
        assert!(!body.is_empty(), "{file} written");
    }
}

#[test]
fn pods_packed_by_most_allocated_scoring_are_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, pods) = (swf(dir.path(), ""), pod_csv(dir.path(), ""));
    let args = [
        "--trace",
        &trace,
        "--pods",
        &pods,
        "--policies",
        "builtin,oracle",
    ];
    let out = simulate(&[&args[..], &["--kube-scoring", "most-allocated"]].concat());
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("kube-scheduler scoring most-allocated"),
        "{}",
        text(&out.stderr)
    );
    let out = simulate(&[&args[..], &["--kube-scoring", "most-allocated", "--json"]].concat());
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stdout is JSON");
    assert_eq!(rows[0]["kube_scoring"], "most-allocated", "{rows}");
    let out = simulate(&[&args[..], &["--kube-scoring", "tightest"]].concat());
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("most-allocated"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_bad_pod_line_names_file_line_and_field_and_big_pods_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let trace = swf(dir.path(), "");
    let pods = pod_csv(dir.path(), "1,broken,100,900,many,2048,0\n");
    let out = simulate(&["--trace", &trace, "--pods", &pods, "--json"]);
    assert!(!out.status.success());
    let err = text(&out.stderr);
    assert!(
        err.contains("pods.csv:14") && err.contains("cpus"),
        "file, line and column: {err}"
    );

    // Four SWF CPUs a node: a 6-CPU pod fits no node, and is said by name.
    let pods = pod_csv(dir.path(), "0,giant,100,900,6,2048,0\n");
    let out = simulate(&["--trace", &trace, "--pods", &pods, "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("cannot run 1 pod(s)") && err.contains("giant"),
        "{err}"
    );
    let rows: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(rows[0]["not_replayed"]["pods: larger than a node"], 1);
}
