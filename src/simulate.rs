//! `slurmscale simulate`: reads a trace (or generates the demo's workload), replays it under
//! each policy with the library's [`simulate`] engine, and prints what each cost. This file
//! is only the command line around it: inputs, progress and where the report goes.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use slurmscale_autoscaler::crd::NodeSetAutoscaler;
use slurmscale_sim::formats;
use slurmscale_sim::nodesets::{self, Choice, Layout};
use slurmscale_sim::trace::TraceJob;
use slurmscale_sim::trace::{self, NodeShape, Parsed, Slice, Unfit};
use slurmscale_sim::{self as simulate, Options, Policy, report};

use crate::cli::{PodFormatArg, SimulateArgs};
use slurmscale_sim::demo::{BOOT_SECONDS, BURST_MAX, BURST_NODE};
use slurmscale_sim::pods::{self, Alignment, PodFormat, PodRequest};
use slurmscale_sim::workload::{Part, Workload};

/// The key of lines passed over with --skip-bad-lines in the JSON rows' `not_replayed`.
const MALFORMED: &str = "malformed line (--skip-bad-lines)";

/// The demo's burst-partition jobs, as `slurmscale demo --seed N` submits them.
fn demo_workload(seed: u64, duration: Duration) -> Parsed {
    let start = 1_700_000_000;
    let workload = Workload::generate(seed, duration.as_secs());
    let requests = workload
        .jobs
        .iter()
        .filter(|j| j.partition == Part::Burst)
        .map(|j| j.request(start))
        .collect();
    Parsed {
        requests,
        hints: trace::Hints {
            max_nodes: Some(BURST_MAX as u32),
            node_cpus: Some(BURST_NODE.cpus),
        },
        ..Parsed::default()
    }
}

/// `--boot-time`, or its default: the demo's with the demo's workload.
fn boot_seconds(args: &SimulateArgs) -> i64 {
    let default = match args.workload {
        Some(_) => BOOT_SECONDS,
        None => 90,
    };
    args.boot_time.map_or(default, |d| d.as_secs() as i64)
}

fn load(args: &SimulateArgs) -> Result<(Parsed, String)> {
    match (&args.trace, args.workload) {
        (Some(path), None) => {
            let format = match args.format.0 {
                Some(f) => f,
                None => formats::detect(path)?,
            };
            let parsed = formats::read(path, format, args.skip_bad_lines)?;
            Ok((parsed, trace_name(path)))
        }
        (None, Some(_)) => Ok((
            demo_workload(args.seed, args.duration),
            format!("demo-seed{}", args.seed),
        )),
        _ => bail!("give a trace (--trace FILE) or a generator (--workload demo)"),
    }
}

/// `KTH-SP2-1996-2.1-cln.swf.gz` → `KTH-SP2-1996-2.1-cln`.
fn trace_name(path: &Path) -> String {
    let name = path
        .file_name()
        .map_or("trace".into(), |n| n.to_string_lossy().to_string());
    [".gz", ".swf", ".sacct", ".txt", ".log"]
        .iter()
        .fold(name, |n, ext| {
            n.strip_suffix(ext).map_or(n.clone(), String::from)
        })
}

/// Runs `work` with a progress bar on stderr (hidden when `quiet`) that follows the counter
/// `work` advances, up to `total`.
fn with_progress<T>(
    total: u64,
    quiet: bool,
    template: &str,
    work: impl FnOnce(&Arc<AtomicU64>) -> T,
) -> T {
    let progress = Arc::new(AtomicU64::new(0));
    let bar = if quiet {
        indicatif::ProgressBar::hidden()
    } else {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template(template)
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
                .progress_chars("=> "),
        );
        bar
    };
    std::thread::scope(|s| {
        let ticker = {
            let (bar, progress) = (bar.clone(), progress.clone());
            s.spawn(move || {
                while !bar.is_finished() {
                    bar.set_position(progress.load(Ordering::Relaxed));
                    std::thread::sleep(Duration::from_millis(200));
                }
            })
        };
        let out = work(&progress);
        bar.finish_and_clear();
        let _ = ticker.join();
        out
    })
}

fn autoscaler_spec(path: &Path) -> Result<NodeSetAutoscaler> {
    let text = std::fs::read_to_string(path).with_context(|| format!("{}", path.display()))?;
    serde_saphyr::from_str(&text)
        .with_context(|| format!("{}: not a NodeSetAutoscaler manifest", path.display()))
}

/// The jobs to replay, as the trace, the slice and the node shape leave them.
struct Input {
    name: String,
    jobs: Vec<TraceJob>,
    shape: NodeShape,
    max_nodes: u32,
    /// What the figures leave out, by reason (said on stderr as well).
    not_replayed: BTreeMap<String, u64>,
}

/// Reads the trace (or generates the workload), keeps the partitions and slice asked for,
/// fits the jobs to the node shape, and says on stderr what was left out and why.
fn input(args: &SimulateArgs, policies: &[String]) -> Result<Input> {
    let (mut parsed, name) = load(args)?;
    choose_partitions(&mut parsed, &args.partition, &name)?;
    let mut not_replayed = not_replayed(&parsed);
    if parsed.requests.is_empty() {
        bail!("{name}: the trace has no job to replay");
    }
    let node_cpus = args.node_cpus.or(parsed.hints.node_cpus).context(
        "the trace does not say how many CPUs a node has (no SWF MaxProcs/MaxNodes): give --node-cpus",
    )?;
    let max_nodes = args.max_nodes.or(parsed.hints.max_nodes).context(
        "the trace does not say how many nodes the machine had (no SWF MaxNodes): give --max-nodes",
    )?;
    let shape = NodeShape {
        cpus: node_cpus,
        memory_mib: args.node_memory_mib,
        gpus: args.node_gpus,
    };
    let slice = slice(args, parsed.requests[0].submit);
    let (jobs, unfit) = trace::select(&parsed.requests, slice, &shape, max_nodes);
    say_unfit(&unfit, &mut not_replayed);
    if jobs.is_empty() {
        bail!("{name}: no job of the trace is left to replay in this slice");
    }
    if !args.json {
        eprintln!(
            "{}",
            describe(&name, &jobs, &shape, max_nodes, args, policies)
        );
    }
    Ok(Input {
        name,
        jobs,
        shape,
        max_nodes,
        not_replayed,
    })
}

/// Keeps the jobs of `partitions` (an error names the trace's own when none ran there); or,
/// with none named, says that several partitions are replayed as one.
fn choose_partitions(parsed: &mut Parsed, partitions: &[String], name: &str) -> Result<()> {
    if !partitions.is_empty() {
        let known = parsed.partitions();
        parsed.keep_partitions(partitions);
        if parsed.requests.is_empty() {
            let known: Vec<&str> = known.iter().map(|(p, _)| &**p).collect();
            bail!(
                "{name}: no job ran in {}; {}",
                partitions.join(","),
                if known.is_empty() {
                    "the trace records no partition".to_string()
                } else {
                    format!("its partitions: {}", known.join(", "))
                }
            );
        }
    } else if let several @ [_, _, ..] = &parsed.partitions()[..] {
        // Said even with --json: the figures would be of no partition the site has.
        let shown: Vec<String> = several
            .iter()
            .take(5)
            .map(|(p, n)| format!("{p} {n}"))
            .collect();
        eprintln!(
            "{name}: the jobs of {} partitions ({}{}) are replayed as one partition of identical nodes; --partition NAME replays those a NodeSet would serve",
            several.len(),
            shown.join(", "),
            if several.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        );
    }
    Ok(())
}

/// What the figures leave out of the trace, said on stderr (with --json too) and kept for
/// every JSON row.
fn not_replayed(parsed: &Parsed) -> BTreeMap<String, u64> {
    let mut out: BTreeMap<String, u64> = parsed
        .skipped
        .iter()
        .map(|(why, n)| (why.to_string(), *n))
        .collect();
    if parsed.bad_lines > 0 {
        eprintln!(
            "skipped {} malformed line(s) (--skip-bad-lines); the first: {}",
            parsed.bad_lines,
            parsed.first_bad_line.as_deref().unwrap_or("?")
        );
        out.insert(MALFORMED.into(), parsed.bad_lines);
    }
    for (why, n) in &parsed.skipped {
        eprintln!("not replayed: {n} job(s): {why}");
    }
    out
}

/// A submit time as the lines saying what is replayed show it (UTC).
fn span(t: i64) -> String {
    chrono::DateTime::from_timestamp(t, 0)
        .map_or(t.to_string(), |d| d.format("%Y-%m-%d %H:%M").to_string())
}

/// The line that says what is replayed: how many jobs, when, on what, under which policies.
fn describe(
    name: &str,
    jobs: &[TraceJob],
    shape: &NodeShape,
    max_nodes: u32,
    args: &SimulateArgs,
    policies: &[String],
) -> String {
    format!(
        "{name}: replaying {} jobs submitted {} to {} UTC on up to {max_nodes} nodes of {} CPUs{}{}, boot {}s, policies: {}",
        jobs.len(),
        span(jobs[0].submit),
        span(jobs[jobs.len() - 1].submit),
        shape.cpus,
        if shape.memory_mib > 0 {
            format!(", {} MiB", shape.memory_mib)
        } else {
            String::new()
        },
        if shape.gpus > 0 {
            format!(", {} GPUs", shape.gpus)
        } else {
            String::new()
        },
        boot_seconds(args),
        policies.join(","),
    )
}

/// The replay's settings from the command line.
fn options(args: &SimulateArgs, shape: NodeShape, max_nodes: u32) -> Result<Options> {
    let mut opts = Options::new(shape, max_nodes);
    opts.sched.boot = boot_seconds(args);
    opts.keda_threshold = args.keda_threshold;
    opts.keda_up_tolerance = args.keda_up_tolerance;
    opts.suspend_time = args.suspend_time.as_secs() as i64;
    if let Some(path) = &args.autoscaler {
        opts.autoscaler = autoscaler_spec(path)?.spec;
    } else if args.workload.is_some() {
        let [burst, _] = crate::demo::autoscalers();
        opts.autoscaler = burst.spec;
    }
    Ok(opts)
}

pub fn run(args: SimulateArgs) -> Result<()> {
    if args.pods.is_some() {
        return run_shared(args);
    }
    if !args.nodeset.is_empty() {
        return run_nodesets(args);
    }
    let policies: Vec<String> = if args.policies.is_empty() {
        Policy::defaults().map(|p| p.as_str().to_string()).collect()
    } else {
        args.policies.clone()
    };
    let parsed_policies = policies
        .iter()
        .map(|p| p.parse::<Policy>().map_err(anyhow::Error::msg))
        .collect::<Result<Vec<Policy>>>()?;
    let Input {
        name,
        jobs,
        shape,
        max_nodes,
        not_replayed,
    } = input(&args, &policies)?;
    let quiet = args.json;
    let say = |s: String| {
        if !quiet {
            eprintln!("{s}");
        }
    };

    let opts = options(&args, shape, max_nodes)?;

    let total = (jobs.len() * parsed_policies.len()) as u64;
    let started = Instant::now();
    let runs = with_progress(
        total,
        quiet,
        "{elapsed:>4} [{bar:40}] {percent:>3}% of jobs × policies, eta {eta}",
        |progress| simulate::run(&parsed_policies, jobs, &opts, Some(progress.clone())),
    )?;
    let took = started.elapsed();
    let mut rows = report::rows(&runs, shape.cpus);
    for r in &mut rows {
        r.not_replayed.clone_from(&not_replayed);
    }
    for r in &runs {
        say_starved(r.policy.as_str(), r.stats.starved);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", report::table(&rows));
        say(format!(
            "replayed {} job-runs in {:.1}s ({:.0} jobs/s)",
            total,
            took.as_secs_f64(),
            total as f64 / took.as_secs_f64().max(1e-9)
        ));
    }
    write_out(args.out.as_deref(), quiet, || {
        let title = format!(
            "{name}: {} jobs on up to {max_nodes} × {} CPUs, boot {}s",
            rows.first().map_or(0, |r| r.jobs),
            shape.cpus,
            boot_seconds(&args)
        );
        Ok(vec![
            (format!("{name}.timeline.csv"), report::csv(&runs)),
            (format!("{name}.svg"), report::svg(&title, &runs, &rows)),
            (
                format!("{name}.json"),
                serde_json::to_string_pretty(&rows)? + "\n",
            ),
        ])
    })
}

/// `--nodeset`: the trace replayed on one partition over several NodeSets, once per way of
/// choosing which grows.
fn run_nodesets(args: SimulateArgs) -> Result<()> {
    let choices = if args.policies.is_empty() {
        Choice::ALL.to_vec()
    } else {
        let parsed = args.policies.iter().map(|p| p.parse::<Choice>());
        parsed
            .collect::<Result<Vec<_>, String>>()
            .map_err(anyhow::Error::msg)?
    };
    let layout = Layout {
        sets: args.nodeset.clone(),
        choice: Choice::SlurmOrder,
    };
    for (k, set) in layout.sets.iter().enumerate() {
        if layout.sets[..k].iter().any(|s| s.name == set.name) {
            bail!("two NodeSets are called {}", set.name);
        }
    }
    let (mut parsed, name) = load(&args)?;
    let mut partitions = args.partition.clone();
    if partitions.is_empty() {
        partitions = layout
            .sets
            .iter()
            .filter_map(|s| s.partition.clone())
            .collect();
    }
    choose_partitions(&mut parsed, &partitions, &name)?;
    let mut not_replayed = not_replayed(&parsed);
    let first = parsed
        .requests
        .first()
        .context("the trace has no job to replay")?;
    let slice = slice(&args, first.submit);
    let max_nodes = layout.max_nodes();
    let (jobs, unfit) = trace::select_by(&parsed.requests, slice, |r| {
        r.fit(&layout.fitted_to(r.partition.as_deref()).shape, max_nodes)
    });
    say_unfit(&unfit, &mut not_replayed);
    if jobs.is_empty() {
        bail!("{name}: no job of the trace is left to replay in this slice");
    }
    let quiet = args.json;
    if !quiet {
        eprintln!("{}", describe_sets(&name, &jobs, &layout, &choices, &args));
    }
    // Job CPU-seconds are counted up to the largest node's CPUs.
    let widest = layout.sets.iter().map(|s| s.shape).max_by_key(|s| s.cpus);
    let mut opts = options(&args, widest.unwrap_or(layout.sets[0].shape), max_nodes)?;
    opts.nodesets = Some(layout.clone());
    let total = (jobs.len() * choices.len()) as u64;
    let runs = with_progress(
        total,
        quiet,
        "{elapsed:>4} [{bar:40}] {percent:>3}% of jobs × choices, eta {eta}",
        |progress| nodesets::run(&choices, jobs, &opts, Some(progress.clone())),
    )?;
    let mut rows = nodesets::rows(&runs, &layout);
    for r in &mut rows {
        r.row.not_replayed.clone_from(&not_replayed);
    }
    for (choice, r) in &runs {
        say_starved(choice.as_str(), r.stats.starved);
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", nodesets::table(&rows));
    }
    write_out(args.out.as_deref(), quiet, || {
        Ok(vec![(
            format!("{name}.nodesets.json"),
            serde_json::to_string_pretty(&rows)? + "\n",
        )])
    })
}

/// The line that says what is replayed over several NodeSets.
fn describe_sets(
    name: &str,
    jobs: &[TraceJob],
    layout: &Layout,
    choices: &[Choice],
    args: &SimulateArgs,
) -> String {
    let sets: Vec<String> = layout
        .sets
        .iter()
        .map(|s| {
            let (n, cpus, w) = (s.max_nodes, s.shape.cpus, s.weight);
            let gpus = match s.shape.gpus {
                0 => String::new(),
                g => format!(", {g} GPUs"),
            };
            format!("{} ({n} × {cpus} CPUs{gpus}, Weight {w})", s.name)
        })
        .collect();
    let choices: Vec<&str> = choices.iter().map(|c| c.as_str()).collect();
    format!(
        "{name}: replaying {} jobs submitted {} to {} UTC on one partition over {}, boot {}s, builtin choosing by {}",
        jobs.len(),
        span(jobs[0].submit),
        span(jobs[jobs.len() - 1].submit),
        sets.join(", "),
        boot_seconds(args),
        choices.join(", ")
    )
}

/// The jobs `--from`, `--until` and `--limit-jobs` keep, of a trace whose first job was
/// submitted at `first`.
fn slice(args: &SimulateArgs, first: i64) -> Slice {
    Slice {
        from: args.from.map(|w| w.resolve(first)),
        until: args.until.map(|w| w.resolve(first)),
        limit: args.limit_jobs,
    }
}

/// Says on stderr that `who`'s replay left `starved` jobs without the nodes they need.
fn say_starved(who: &str, starved: usize) {
    if starved > 0 {
        eprintln!(
            "{who}: {starved} job(s) never got the nodes they need (their waits count until the replay ended)"
        );
    }
}

/// Says on stderr which jobs cannot run at all and why, and counts them in `not_replayed`.
fn say_unfit(unfit: &BTreeMap<Unfit, Vec<String>>, not_replayed: &mut BTreeMap<String, u64>) {
    for (why, ids) in unfit {
        not_replayed.insert(format!("needs {}", why.as_str()), ids.len() as u64);
        let shown: Vec<&str> = ids.iter().take(5).map(String::as_str).collect();
        eprintln!(
            "cannot run {} job(s): they need {} (e.g. {}{})",
            ids.len(),
            why.as_str(),
            shown.join(", "),
            if ids.len() > shown.len() { ", …" } else { "" }
        );
    }
}

/// `--out DIR`: writes the files `make` returns there, saying each (unless `quiet`).
fn write_out(
    dir: Option<&Path>,
    quiet: bool,
    make: impl FnOnce() -> Result<Vec<(String, String)>>,
) -> Result<()> {
    let Some(dir) = dir else { return Ok(()) };
    std::fs::create_dir_all(dir).with_context(|| format!("{}", dir.display()))?;
    for (file, text) in make()? {
        let path = dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("{}", path.display()))?;
        if !quiet {
            eprintln!("wrote {}", path.display());
        }
    }
    Ok(())
}

/// The pod log of `--pods`: read, aligned on the job replay's time and fitted to the pool's
/// nodes; what is left out is said on stderr and counted in `not_replayed`.
fn pods_input(
    args: &SimulateArgs,
    path: &Path,
    jobs: &[TraceJob],
    shape: &NodeShape,
    not_replayed: &mut BTreeMap<String, u64>,
) -> Result<(Vec<PodRequest>, Alignment)> {
    let format = match args.pod_format {
        PodFormatArg::Auto => pods::detect(path)?,
        PodFormatArg::Openb => PodFormat::Openb,
        PodFormatArg::Csv => PodFormat::Csv,
    };
    let parsed = pods::read(path, format, args.skip_bad_lines)?;
    if parsed.bad_lines > 0 {
        eprintln!(
            "skipped {} malformed pod line(s) (--skip-bad-lines); the first: {}",
            parsed.bad_lines,
            parsed.first_bad_line.as_deref().unwrap_or("?")
        );
        not_replayed.insert(format!("pods: {MALFORMED}"), parsed.bad_lines);
    }
    for (why, n) in &parsed.skipped {
        eprintln!("not replayed: {n} pod(s): {why}");
        not_replayed.insert(format!("pods: {why}"), *n);
    }
    if parsed.ran_to_end > 0 {
        eprintln!(
            "{} pod(s) still ran at the pod log's end: replayed as running until then",
            parsed.ran_to_end
        );
    }
    let first_pod = parsed
        .pods
        .first()
        .map(|p| p.submit)
        .context("the pod log has no pod to replay")?;
    let align = Alignment {
        from: args.pods_from.map_or(first_pod, |w| w.resolve(first_pod)),
        scale: args.pods_scale,
    };
    if !(align.scale > 0.0 && align.scale.is_finite()) {
        bail!("--pods-scale must be above 0");
    }
    let start = jobs[0].submit;
    let until = jobs[jobs.len() - 1].submit + 1;
    let (pods, too_big) = pods::select(&parsed.pods, align, start, until, shape);
    if !too_big.is_empty() {
        let shown: Vec<&str> = too_big.iter().take(5).map(String::as_str).collect();
        eprintln!(
            "cannot run {} pod(s): larger than a node of the pool (e.g. {}{})",
            too_big.len(),
            shown.join(", "),
            if too_big.len() > shown.len() {
                ", …"
            } else {
                ""
            }
        );
        not_replayed.insert("pods: larger than a node".into(), too_big.len() as u64);
    }
    if pods.is_empty() {
        bail!(
            "{}: no pod falls in the job replay's {:.1} days from pod-log time {} (--pods-from)",
            path.display(),
            (until - start) as f64 / 86400.0,
            align.from
        );
    }
    Ok((pods, align))
}

/// `--pods`: the job log and a pod log on one pool shared by Slurm and Kubernetes, under
/// each way of sharing it.
/// The shared-pool replay's options from the command line.
fn shared_options(
    args: &SimulateArgs,
    shape: NodeShape,
    max_nodes: u32,
    split: u32,
) -> Result<slurmscale_sim::shared::SharedOptions> {
    // A manifest's colocation is run as written (without shares: Kubernetes first); one
    // without colocation gets the default, shares at --split.
    use slurmscale_sim::shared;
    let mut opts = shared::SharedOptions::new(shape, max_nodes, split);
    opts.sched.boot = boot_seconds(args);
    opts.scoring = args.kube_scoring.into();
    if let Some(path) = &args.autoscaler {
        let mut spec = autoscaler_spec(path)?.spec;
        if spec.colocation.is_none() {
            spec.colocation = shared::default_spec(max_nodes, split).colocation;
        }
        opts.autoscaler = spec;
    }
    Ok(opts)
}

fn run_shared(args: SimulateArgs) -> Result<()> {
    use slurmscale_sim::{shared, shared_report};

    let policies: Vec<String> = if args.policies.is_empty() {
        shared::POLICIES.iter().map(|p| p.to_string()).collect()
    } else {
        args.policies.clone()
    };
    let Input {
        name,
        jobs,
        shape,
        max_nodes,
        mut not_replayed,
    } = input(&args, &policies)?;
    let quiet = args.json;
    let path = args.pods.as_deref().context("--pods")?;
    let (pods, align) = pods_input(&args, path, &jobs, &shape, &mut not_replayed)?;
    let split = (args.split.clamp(0.0, 1.0) * f64::from(max_nodes)).round() as u32;
    if !quiet {
        eprintln!(
            "with {} pods of {} from pod-log second {} (×{}), on a pool of {max_nodes} nodes shared by Slurm and Kubernetes ({split} Slurm's at the start; kube-scheduler scoring {})",
            pods.len(),
            path.display(),
            align.from,
            align.scale,
            slurmscale_sim::kube::Scoring::from(args.kube_scoring).name()
        );
    }
    let opts = shared_options(&args, shape, max_nodes, split)?;
    let total = shared::runs_for(&policies, max_nodes) as u64;
    let started = Instant::now();
    let runs = with_progress(
        total,
        quiet,
        "{elapsed:>4} [{bar:40}] {pos}/{len} replays, eta {eta}",
        |progress| shared::run(&policies, jobs, pods, &opts, Some(progress)),
    )?;
    let took = started.elapsed();
    if policies.iter().any(|p| p == "static-best") && !runs.iter().any(|(p, _)| p == "static-best")
    {
        // Said even with --json: the gap column then has nothing to measure against.
        eprintln!(
            "static-best: no fixed split keeps both sides' p95 waits at or below those of the starting split (--split); no row, no gap"
        );
    }
    let mut rows = shared_report::rows(&runs);
    for r in &mut rows {
        r.not_replayed.clone_from(&not_replayed);
        r.kube_scoring = (r.policy != "oracle").then(|| opts.scoring.name());
        if r.starved_jobs + r.starved_pods > 0 {
            eprintln!(
                "{}: {} job(s) and {} pod(s) never got room (their waits count until the replay ended)",
                r.policy, r.starved_jobs, r.starved_pods
            );
        }
    }
    if args.json {
        println!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        print!("{}", shared_report::table(&rows));
        eprintln!(
            "replayed {} ways of sharing in {:.1}s",
            total,
            took.as_secs_f64()
        );
    }
    write_out(args.out.as_deref(), quiet, || {
        let title = format!(
            "{name} + {}: a pool of {max_nodes} × {} CPUs{}",
            trace_name(path),
            shape.cpus,
            if shape.gpus > 0 {
                format!(", {} GPUs", shape.gpus)
            } else {
                String::new()
            }
        );
        Ok(vec![
            (
                format!("{name}.shared.timeline.csv"),
                shared_report::csv(&runs),
            ),
            (
                format!("{name}.shared.svg"),
                shared_report::svg(&title, &runs, &rows),
            ),
            (
                format!("{name}.shared.json"),
                serde_json::to_string_pretty(&rows)? + "\n",
            ),
        ])
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::demo::Demo;
    use clap::Parser;
    use std::time::SystemTime;

    /// `seconds` of the demo of `seed`, under its autoscalers.
    fn demo_run(seed: u64, seconds: u64) -> Demo {
        let start = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let mut demo = Demo::new(seed, start, seconds);
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
        for _ in 0..seconds {
            rt.block_on(demo.step());
        }
        demo
    }

    /// The demo and `simulate --workload demo` run the same burst jobs on the same simulated
    /// slurmctld under the same autoscaler, polled alike: every job the demo started, the
    /// replay starts at the same second.
    #[test]
    fn the_demo_and_its_replay_give_the_burst_jobs_the_same_waits() {
        let (seed, seconds) = (3, 1800);
        let cli = crate::cli::Cli::try_parse_from([
            "slurmscale",
            "simulate",
            "--workload",
            "demo",
            "--seed",
            &seed.to_string(),
            "--duration",
            &format!("{seconds}s"),
            "--policies",
            "builtin",
        ])
        .expect("valid arguments");
        let crate::cli::Command::Simulate(args) = cli.command else {
            panic!("not simulate");
        };
        let input = input(&args, &["builtin".into()]).expect("the demo's jobs");
        let opts = options(&args, input.shape, input.max_nodes).expect("options");
        let run = simulate::run_policy(Policy::Builtin, input.jobs.clone().into(), &opts, None)
            .expect("replayed");

        let demo = demo_run(seed, seconds);
        let started = demo.sim.burst_starts();
        assert!(
            started.len() > 100,
            "only {} burst jobs started",
            started.len()
        );
        let replayed: BTreeMap<&str, Option<i64>> = input
            .jobs
            .iter()
            .zip(&run.stats.starts)
            .map(|(j, s)| (j.id.as_str(), *s))
            .collect();
        let mut differ = Vec::new();
        for (id, start) in &started {
            if replayed.get(id.as_str()) != Some(&Some(*start)) {
                differ.push(format!(
                    "{id}: demo {start}, replay {:?}",
                    replayed.get(id.as_str())
                ));
            }
        }
        assert!(
            differ.is_empty(),
            "{} of {} differ: {differ:?}",
            differ.len(),
            started.len()
        );
    }

    /// The demo's colocated pool runs in the shared-pool replay's world under the same
    /// controller: `simulate --pods` of its cpu jobs and web pods starts every job and pod the
    /// demo started at the same second, and nothing else before the demo's end.
    #[test]
    fn the_demo_s_pool_and_its_shared_replay_start_the_same_work_at_the_same_second() {
        let (seed, seconds) = (3, 1800);
        let demo = demo_run(seed, seconds);
        // The demo's pool autoscaler, on the replay's names (its NodeSet, cluster and pool).
        let mut spec = serde_json::to_value(&crate::demo::autoscalers()[1].spec).expect("json");
        spec["scaleTargetRef"]["name"] = slurmscale_sim::view::PARTITION.into();
        spec.as_object_mut().expect("an object").remove("slurm");
        spec["colocation"]
            .as_object_mut()
            .expect("colocated")
            .remove("pool");
        let spec = serde_json::from_value(spec).expect("a valid spec");
        let base = demo.sim.base;
        let (jobs, pods, opts) = slurmscale_sim::demo::pool_replay(seed, seconds, base, spec);
        let run = slurmscale_sim::shared::run_sharing(
            slurmscale_sim::shared::Sharing::Builtin,
            jobs.into(),
            pods.clone().into(),
            &opts,
        )
        .expect("replayed");
        let end = base + seconds as i64;
        let by_end = |s: Option<i64>| s.filter(|&t| t < end);
        let demo_pods: BTreeMap<String, i64> = demo.sim.pool.pod_starts().into_iter().collect();
        let demo_jobs = demo.sim.pool_job_starts();
        let world = &demo.sim.pool.world;
        assert!(
            world.to_kubernetes > 0 && world.to_slurm > 0 && demo_pods.len() >= 4,
            "the pool hardly moved: {} nodes to Kubernetes, {} back, pods {demo_pods:?}",
            world.to_kubernetes,
            world.to_slurm
        );
        let mut differ = Vec::new();
        for (j, (d, r)) in demo_jobs.iter().zip(&run.job_starts).enumerate() {
            if by_end(*d) != by_end(*r) {
                differ.push(format!("job {j}: demo {d:?}, replay {r:?}"));
            }
        }
        for (p, r) in pods.iter().zip(&run.pod_starts) {
            let d = demo_pods.get(&p.name).copied();
            if by_end(d) != by_end(*r) {
                differ.push(format!("{}: demo {d:?}, replay {r:?}", p.name));
            }
        }
        assert!(
            differ.is_empty(),
            "{} differ (of {} jobs, {} pods): {differ:?}",
            differ.len(),
            demo_jobs.len(),
            pods.len()
        );
    }
}
