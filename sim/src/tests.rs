//! Hand-computed schedules: each case is small enough to work out on paper, and says how.

use std::sync::Arc;

use super::cluster::{Cluster, Mode, SchedConfig};
use super::replay::TAIL;
use super::trace::{NodeShape, TraceJob};
use super::*;

const CPU16: NodeShape = NodeShape {
    cpus: 16,
    memory_mib: 64_000,
    gpus: 0,
};
const ONE_CPU: NodeShape = NodeShape {
    cpus: 1,
    memory_mib: 0,
    gpus: 0,
};

fn job(submit: i64, run: u64, limit: u64, nodes: u32, cpus: u32) -> TraceJob {
    TraceJob {
        id: format!("{submit}"),
        submit,
        run,
        limit: limit.max(run),
        nodes,
        cpus_per_node: cpus,
        memory_mib_per_node: 0,
        gpus_per_node: 0,
        recorded_wait: None,
    }
}

/// Runs the partition alone (no policy) until nothing is left to happen.
fn replay(shape: NodeShape, max: u32, mode: Mode, jobs: Vec<TraceJob>) -> Cluster {
    let start = jobs[0].submit;
    let mut c = Cluster::new(shape, max, mode, SchedConfig::default(), jobs.into(), start);
    while let Some(t) = c.next_event() {
        c.advance(t);
        c.check();
    }
    c
}

fn starts(c: &Cluster) -> Vec<i64> {
    (0..c.jobs().len()).map(|j| c.started(j).unwrap()).collect()
}

#[test]
fn small_jobs_pack_onto_one_node_best_fit() {
    // Four 4-CPU jobs fill one 16-CPU node exactly; a fifth goes to the second node.
    let jobs: Vec<_> = (0..5).map(|_| job(0, 100, 100, 1, 4)).collect();
    let mut c = Cluster::new(
        CPU16,
        2,
        Mode::Static,
        SchedConfig::default(),
        Arc::from(jobs),
        0,
    );
    c.advance(0);
    assert_eq!(c.counts.busy, 2);
    assert_eq!(c.counts.pending, 0);
    let first: Vec<_> = (0..4).map(|j| c.job_nodes_for_test(j)).collect();
    assert!(first.iter().all(|n| n == &first[0]), "{first:?}");
    assert_ne!(c.job_nodes_for_test(4), first[0]);
}

#[test]
fn memory_and_gpus_limit_packing_as_much_as_cpus() {
    // Two 1-CPU jobs of 40 GB cannot share a 64 GB node.
    let mut jobs = vec![job(0, 100, 100, 1, 1), job(0, 100, 100, 1, 1)];
    for j in &mut jobs {
        j.memory_mib_per_node = 40_000;
    }
    let c = {
        let mut c = Cluster::new(
            CPU16,
            2,
            Mode::Static,
            SchedConfig::default(),
            jobs.into(),
            0,
        );
        c.advance(0);
        c
    };
    assert_eq!(c.counts.busy, 2);
    // Eight 1-GPU jobs share one 8-GPU node; a ninth waits for a second one.
    let gpu8 = NodeShape {
        cpus: 64,
        memory_mib: 0,
        gpus: 8,
    };
    let mut jobs: Vec<_> = (0..9).map(|_| job(0, 100, 100, 1, 4)).collect();
    for j in &mut jobs {
        j.gpus_per_node = 1;
    }
    let c = replay(gpu8, 1, Mode::Static, jobs);
    let s = starts(&c);
    assert_eq!(&s[..8], &[0; 8]);
    assert_eq!(s[8], 100, "the ninth GPU job waits for a GPU to free");
}

#[test]
fn multi_node_jobs_wait_for_all_their_nodes_in_priority_order() {
    // 4 one-CPU nodes. A takes 2 until 100; B needs 3 and waits for A; C (2 nodes) fits
    // now but is behind B, and its 1,000 s limit would delay B, so backfill may not start
    // it either. At 100 B takes 3 nodes; C needs 2 and starts when B ends at 150.
    let jobs = vec![
        job(0, 100, 100, 2, 1),
        job(0, 50, 50, 3, 1),
        job(0, 10, 1000, 2, 1),
    ];
    let c = replay(ONE_CPU, 4, Mode::Static, jobs);
    assert_eq!(starts(&c), vec![0, 100, 150]);
}

/// 4 one-CPU nodes. A: 3 nodes until 100. B needs all 4: reserved for t=100. C (1 node,
/// limit 50) fits in the gap and ends by 100: backfilled at the first pass (t=30). D (1
/// node, limit 200) would delay B: it waits until B ends at 150.
fn easy_backfill_case() -> Vec<TraceJob> {
    vec![
        job(0, 100, 100, 3, 1),
        job(1, 50, 50, 4, 1),
        job(2, 40, 50, 1, 1),
        job(3, 10, 200, 1, 1),
    ]
}

#[test]
fn easy_backfill_starts_what_ends_before_the_reservation() {
    let c = replay(ONE_CPU, 4, Mode::Static, easy_backfill_case());
    assert_eq!(starts(&c), vec![0, 100, 30, 150]);
}

#[test]
fn idle_nodes_are_told_apart_by_whether_jobs_wait() {
    // The EASY backfill case under `static`: one node idle while B, C and D wait (1-30 s
    // and 70-100 s: 59 node-seconds); idle with nothing waiting before B comes (0-1 s: 1)
    // and after D starts (150-160 s: 3 nodes, then all 4 for the tail).
    let jobs = easy_backfill_case().into();
    let r = run_policy(Policy::Static, jobs, &Options::new(ONE_CPU, 4), None).unwrap();
    assert_eq!(r.stats.idle_waiting_node_seconds, 59.0);
    let idle = r.stats.node_seconds - r.stats.busy_node_seconds;
    assert_eq!(idle, 59.0 + 1.0 + 30.0 + 4.0 * TAIL as f64);
}

#[test]
fn backfill_may_use_nodes_the_reservation_does_not_need() {
    // 4 one-CPU nodes. A: 2 nodes until 100. B needs 3: at t=100 A's 2 nodes and one of
    // the 2 free now, so a long 1-node job D can start on the other at the first pass.
    let jobs = vec![
        job(0, 100, 100, 2, 1),
        job(1, 50, 50, 3, 1),
        job(2, 500, 500, 1, 1),
    ];
    let c = replay(ONE_CPU, 4, Mode::Static, jobs);
    assert_eq!(starts(&c), vec![0, 100, 30]);
}

#[test]
fn new_nodes_take_jobs_after_the_boot_delay_and_drained_ones_finish_their_work() {
    let jobs = vec![job(0, 100, 100, 1, 16), job(0, 1000, 1000, 1, 16)];
    let mut c = Cluster::new(
        CPU16,
        4,
        Mode::Elastic,
        SchedConfig::default(),
        jobs.into(),
        0,
    );
    c.advance(0);
    assert_eq!(c.counts.pending, 2, "no nodes yet");
    c.scale(2, 0);
    assert_eq!(c.counts.provisioned, 2, "booting nodes are paid for");
    assert_eq!(c.next_event(), Some(90));
    c.advance(90);
    assert_eq!(starts(&c), vec![90, 90], "usable --boot-time later");
    assert_eq!(c.counts.busy, 2);
    // Scaling to 1 drains the node free soonest, as slurm-operator ranks its pods by the
    // jobs' time limits (node 0, though node 1 has the higher ordinal); it leaves when its
    // job ends, not before.
    c.scale(1, 100);
    assert_eq!(c.counts.provisioned, 2);
    c.advance(190);
    c.check();
    assert_eq!(
        c.counts.provisioned, 1,
        "the drained node went when its job ended"
    );
    assert_eq!((c.scale_ups, c.scale_downs), (1, 1));
}

#[test]
fn scaling_down_takes_booting_then_idle_nodes_before_draining_busy_ones() {
    let jobs = vec![job(0, 1000, 1000, 1, 16)];
    let mut c = Cluster::new(
        CPU16,
        4,
        Mode::Elastic,
        SchedConfig::default(),
        jobs.into(),
        0,
    );
    c.advance(0);
    c.scale(2, 0);
    c.advance(90);
    c.scale(4, 100);
    assert_eq!(c.counts.provisioned, 4);
    // Two booting, one idle, one busy: down to 1 keeps the busy one, nothing drains.
    c.scale(1, 110);
    c.check();
    assert_eq!(c.counts.provisioned, 1);
    assert_eq!(c.counts.busy, 1);
}

#[test]
fn power_saving_boots_the_nodes_it_allocates_and_suspends_idle_ones() {
    // A powered-down partition: the job's node resumes (90 s), the job runs 100 s, the node
    // powers down 600 s after it went idle.
    let jobs = vec![job(0, 100, 100, 1, 16), job(50, 10, 10, 1, 4)];
    let mut c = Cluster::new(
        CPU16,
        4,
        Mode::PowerSave { suspend_after: 600 },
        SchedConfig::default(),
        jobs.into(),
        0,
    );
    c.advance(0);
    assert_eq!(c.counts.provisioned, 1);
    assert_eq!(c.counts.busy, 0, "booting, not yet running");
    let mut suspended = Vec::new();
    while let Some(t) = c.next_event() {
        let before = c.counts.provisioned;
        c.advance(t);
        c.check();
        if c.counts.provisioned < before {
            suspended.push(t);
        }
    }
    // The second job could only go to a powered-down node (the first is full): it boots
    // too. Each node powers down 600 s after its job ended.
    assert_eq!(starts(&c), vec![90, 140]);
    assert_eq!(suspended, vec![150 + 600, 190 + 600]);
    assert_eq!(c.counts.provisioned, 0);
}

/// slurm-planned, through the real controller: slurmctld's power-up goes out at its next
/// power-save pass, the controller adds the pod at the poll that sees it, the pod boots, and
/// the job leaves CONFIGURING at slurmctld's next periodic check; the power-down waits for
/// the same pass, the controller retires exactly that pod, and resumes the record the
/// scale-in left drained, so slurmctld plans on it again.
#[test]
fn slurm_planned_runs_the_controller_on_slurmctld_s_requests() {
    let jobs: Vec<TraceJob> = vec![job(1, 105, 105, 1, 16)];
    let planned = Mode::Planned(cluster::Requests {
        suspend_after: 600,
        interval: 10,
        check_every: 30,
    });
    let mut c = Cluster::new(CPU16, 4, planned, SchedConfig::default(), jobs.into(), 1);
    let opts = Options::new(CPU16, 4);
    let mut scaler = builtin::Builtin::new(&opts.autoscaler, &c, false);
    let (mut pods, mut held) = (Vec::new(), 0.0);
    let mut now = 1;
    while let Some(t) = [c.next_event(), scaler.wake()].into_iter().flatten().min() {
        if t > 5000 {
            break;
        }
        held += f64::from(c.counts.provisioned) * (t - now) as f64;
        now = t;
        let before = c.counts.provisioned;
        c.advance(t);
        c.check();
        assert_eq!(
            scaler.look(t, &mut c),
            None,
            "the scaler carries out its writes"
        );
        c.check();
        if c.counts.provisioned != before {
            pods.push((t, c.counts.provisioned));
        }
    }
    // Requested at the pass of 10, where the poll sees it; up at 100, started at the check
    // at 120; idle from 225, asked to power down at the pass after 825; its pod marked to go
    // at the poll of 830 and removed at the next (the scale-in waits for the mark).
    assert_eq!(starts(&c), vec![120]);
    assert_eq!(pods, vec![(10, 1), (832, 0)]);
    assert_eq!(
        held, 822.0,
        "node-seconds from the pod's creation to its deletion"
    );
    let v = c.node_view(0).unwrap();
    assert_eq!(
        (v.power, v.drain),
        (cluster::PowerFlag::PoweredDown, None),
        "powered down and resumed: slurmctld plans on it again"
    );
    assert!((1..4).all(|i| c.node_view(i).unwrap().power == cluster::PowerFlag::PoweredDown));
}

/// Booting just in time on a slurm-planned NodeSet: job B (4 nodes) waits behind A (2 nodes,
/// running to its limit at 1,120); slurmctld reserves A's two records and the two powered
/// down ones for B at 1,120. With `plannedJobs.boot: JustInTime` (boot 90 s, margin 30 s)
/// the autoscaler powers those two up at 1,000, so B starts at 1,120 on four nodes that are
/// up; without, slurmctld powers them up at 1,120 and B waits for them until the check at
/// 1,230. A waits one boot either way (no plan: it fit at once).
#[test]
fn slurm_planned_just_in_time_powers_up_the_reservation_one_lead_ahead() {
    let run = |just_in_time: bool| {
        let jobs: Vec<TraceJob> = vec![job(1, 1000, 1000, 2, 16), job(200, 100, 100, 4, 16)];
        let planned = Mode::Planned(cluster::Requests {
            suspend_after: 600,
            interval: 10,
            check_every: 30,
        });
        let mut c = Cluster::new(CPU16, 4, planned, SchedConfig::default(), jobs.into(), 1);
        let mut opts = Options::new(CPU16, 4);
        opts.autoscaler.boot_time_seconds = Some(90);
        if just_in_time {
            opts.autoscaler.planned_jobs.boot = slurmscale_autoscaler::crd::PlannedBoot::JustInTime;
        }
        let mut scaler = builtin::Builtin::new(&opts.autoscaler, &c, false);
        let mut now = 0;
        while !c.done() {
            let next = [c.next_event(), scaler.wake()].into_iter().flatten();
            now = next.filter(|&t| t > now).min().expect("something is due");
            c.advance(now);
            scaler.look(now, &mut c);
            c.check();
        }
        (starts(&c), c.boot_waits.clone(), c.early_power_ups)
    };
    assert_eq!(run(false), (vec![120, 1230], vec![119, 110], 0));
    assert_eq!(run(true), (vec![120, 1120], vec![119], 2));
}

#[test]
fn power_saving_prefers_nodes_that_are_up() {
    // The first job's node is up when the second comes: the second shares it, no boot.
    let jobs = vec![job(0, 1000, 1000, 1, 4), job(200, 10, 10, 1, 4)];
    let c = replay(CPU16, 4, Mode::PowerSave { suspend_after: 600 }, jobs);
    assert_eq!(starts(&c), vec![90, 200]);
}

fn trace(n: usize) -> Vec<TraceJob> {
    // Bursts of small and multi-node jobs with quiet gaps, deterministic.
    (0..n)
        .map(|k| {
            let burst = (k / 20) as i64;
            let submit = 1_000_000 + burst * 3600 + (k % 20) as i64 * 7;
            let run = 60 + (k as u64 * 37) % 900;
            let nodes = [1, 1, 1, 2, 4][k % 5];
            let cpus = if nodes > 1 { 16 } else { [1, 4, 8, 16][k % 4] };
            job(submit, run, run * 2, nodes, cpus)
        })
        .collect()
}

#[test]
fn builtin_scales_to_zero_when_idle_and_keeps_the_idle_replicas_its_spec_asks() {
    let opts = Options::new(CPU16, 8);
    let run = run_policy(Policy::Builtin, trace(60).into(), &opts, None).unwrap();
    assert_eq!(run.stats.jobs, 60);
    assert!(run.stats.scale_ups >= 3, "{:?}", run.stats.scale_ups);
    assert_eq!(
        run.final_provisioned, 0,
        "scales to zero after the idle timeout"
    );
    assert!(
        run.stats.starts[0].unwrap() - 1_000_000 >= 90,
        "from zero the first job waits at least one boot"
    );
    // The spec is the controller's input: idleReplicas keeps nodes when idle.
    let mut opts = Options::new(CPU16, 8);
    opts.autoscaler.idle_replicas = 3;
    let run = run_policy(Policy::Builtin, trace(60).into(), &opts, None).unwrap();
    assert_eq!(run.final_provisioned, 3);
}

#[test]
fn fast_forward_gives_what_reconciling_every_poll_gives() {
    let mut opts = Options::new(CPU16, 8);
    opts.autoscaler.scale_down.stabilization_window_seconds = Some(120);
    let fast = run_policy(Policy::Builtin, trace(100).into(), &opts, None).unwrap();
    opts.every_poll = true;
    let slow = run_policy(Policy::Builtin, trace(100).into(), &opts, None).unwrap();
    assert_eq!(fast.stats, slow.stats);
    assert_eq!(fast.timeline, slow.timeline);
    // slurm-planned looks only when slurmctld's requests or the pods change.
    opts.every_poll = false;
    let fast = run_policy(Policy::SlurmPlanned, trace(100).into(), &opts, None).unwrap();
    opts.every_poll = true;
    let slow = run_policy(Policy::SlurmPlanned, trace(100).into(), &opts, None).unwrap();
    assert_eq!(fast.stats, slow.stats);
    assert_eq!(fast.timeline, slow.timeline);
    assert!(fast.stats.scale_ups > 3, "{:?}", fast.stats);
}

#[test]
fn every_policy_runs_every_job_and_saves_node_time_over_static_at_no_shorter_wait() {
    let opts = Options::new(CPU16, 8);
    let runs = super::run(&Policy::ALL, trace(100), &opts, None).unwrap();
    assert_eq!(runs.len(), Policy::ALL.len());
    let by = |p: Policy| runs.iter().find(|r| r.policy == p).unwrap();
    for r in &runs {
        assert_eq!(r.stats.jobs, 100, "{:?}", r.policy);
        assert!(r.stats.busy_node_seconds <= r.stats.node_seconds);
    }
    let stat = by(Policy::Static);
    let horizon = runs.iter().map(|r| r.last_end).max().unwrap() + TAIL - 1_000_000;
    assert_eq!(stat.stats.node_seconds, 8.0 * horizon as f64);
    for r in runs.iter().filter(|r| r.policy != Policy::Static) {
        assert!(
            r.stats.node_seconds < stat.stats.node_seconds,
            "{:?} saves nodes",
            r.policy
        );
        assert!(
            r.stats.waits.last() >= stat.stats.waits.last(),
            "{:?}",
            r.policy
        );
    }
    // KEDA on pending jobs keeps one node while fewer than `threshold` jobs wait: the last
    // multi-node jobs never get their nodes, and the replay says so instead of running on.
    assert!(by(Policy::Keda).stats.starved > 0);
    assert_eq!(by(Policy::KedaDesired).stats.starved, 0);
    assert_eq!(
        by(Policy::KedaDesired).final_provisioned,
        0,
        "back to idleReplicaCount"
    );
}

#[test]
fn an_empty_trace_is_an_error() {
    let opts = Options::new(CPU16, 8);
    let e = super::run(&Policy::ALL, Vec::new(), &opts, None).unwrap_err();
    assert!(e.to_string().contains("no jobs"), "{e}");
}

#[test]
fn keda_desired_reads_the_demand_the_exporter_publishes() {
    // Eight 2-CPU jobs wait on an elastic partition with no node up: summed job by job they
    // ask for 8 nodes, but packed onto 16-CPU nodes — as `slurm_nodeset_desired_nodes`
    // publishes them — they need one. KEDA's trigger and the timeline read that one.
    let jobs: Vec<_> = (0..8).map(|_| job(0, 100, 100, 1, 2)).collect();
    let mut c = Cluster::new(
        CPU16,
        16,
        Mode::Elastic,
        SchedConfig::default(),
        Arc::from(jobs),
        0,
    );
    c.advance(0);
    assert_eq!((c.counts.pending, c.counts.pending_job_nodes), (8, 8));
    let mut view = view::SlurmView::new(&c);
    view.sync(&c);
    assert_eq!(view.signals().demand.nodes, 1);
    assert_eq!(view.published_desired(), 1);
    let mut keda = rivals::Keda::new(rivals::Trigger::DesiredNodes, 16, rivals::TOLERANCE, 0);
    assert_eq!(keda.look(0, &mut c), None, "scraped at 0, polled at 1");
    assert_eq!(
        keda.sample(),
        1.0,
        "the scraped metric is the packed demand"
    );
    assert_eq!(keda.look(1, &mut c), Some(1), "KEDA activates the NodeSet");
}

#[test]
fn the_first_waiting_job_shows_its_reservation_until_it_starts() {
    // 4 one-CPU nodes. A takes 2 until its limit at 100; B needs all 4 and waits: backfill
    // reserves A's two nodes and the two free ones for it, from 100. slurmrestd would show
    // that start and those four nodes on B's record; once B runs, no plan is left.
    let jobs = vec![job(0, 100, 100, 2, 1), job(1, 50, 50, 4, 1)];
    let mut c = Cluster::new(
        ONE_CPU,
        4,
        Mode::Static,
        SchedConfig::default(),
        Arc::from(jobs),
        0,
    );
    while c.plan().is_none() {
        let t = c.next_event().expect("a backfill pass before A ends");
        assert!(t < 100, "no reservation made before A's end");
        c.advance(t);
    }
    let plan = c.plan().unwrap().clone();
    assert_eq!((plan.job, plan.start), (1, 100));
    let mut nodes = plan.nodes.clone();
    nodes.sort_unstable();
    assert_eq!(nodes, [0, 1, 2, 3]);
    let mut view = view::SlurmView::new(&c);
    view.sync(&c);
    let jobs = view.jobs_with_running(&c);
    let planned: Vec<_> = jobs
        .pending
        .iter()
        .filter_map(|j| j.planned_start.clone())
        .collect();
    assert_eq!(planned.len(), 1, "B alone is planned");
    assert_eq!(planned[0].start, 100);
    assert_eq!(planned[0].nodes.len(), 4);
    while let Some(t) = c.next_event() {
        c.advance(t);
    }
    assert_eq!(c.started(1), Some(100));
    assert!(c.plan().is_none());
}

/// The real controller, replayed, learns the boot time the replay gives its nodes, from the
/// scale-ups it wrote to the nodes it saw register.
#[test]
fn the_controller_learns_the_replay_s_boot_time() {
    for boot in [90, 300] {
        let jobs: Arc<[TraceJob]> = trace(100).into();
        let sched = SchedConfig {
            boot,
            ..SchedConfig::default()
        };
        let start = jobs[0].submit;
        let mut c = Cluster::new(CPU16, 8, Mode::Elastic, sched, jobs, start);
        let opts = Options::new(CPU16, 8);
        let mut scaler = builtin::Builtin::new(&opts.autoscaler, &c, false);
        let mut now = start - 1;
        while !c.done() {
            let next = [c.next_event(), scaler.wake()].into_iter().flatten();
            now = next.filter(|&t| t > now).min().expect("something is due");
            c.advance(now);
            scaler.look(now, &mut c);
        }
        let learned = scaler.boot_time();
        assert!(learned.observed >= 8, "{learned:?}");
        // Its own scale-ups are dated to the reconcile that wrote them, and the replay's
        // nodes register on a poll: exactly the boot.
        assert_eq!(learned.seconds, Some(boot as f64), "{learned:?}");
    }
}

#[test]
fn backfill_plans_every_waiting_job_after_those_before_it() {
    // 4 one-CPU nodes. A takes 2 until 100; B needs all 4 (reserved from 100, until 150);
    // C needs 2 and D 1, too long to backfill before B: each behind the jobs before it, C
    // from 150 (B's end), D beside C on the other two, also at 150. Read as a just-in-time
    // policy reads /jobs, every waiting job shows its start; read otherwise, only B's
    // reservation.
    let jobs = vec![
        job(0, 100, 100, 2, 1),
        job(1, 50, 50, 4, 1),
        job(2, 60, 200, 2, 1),
        job(3, 70, 200, 1, 1),
    ];
    let mut c = Cluster::new(
        ONE_CPU,
        4,
        Mode::Static,
        SchedConfig::default(),
        Arc::from(jobs),
        0,
    );
    while c.plan().is_none() {
        let t = c.next_event().expect("a backfill pass before A ends");
        c.advance(t);
    }
    assert_eq!(
        (1..4).map(|j| c.planned_start(j)).collect::<Vec<_>>(),
        [Some(100), Some(150), Some(150)]
    );
    let planned = |plans: bool| {
        let mut view = view::SlurmView::new(&c).reading_plans(plans);
        view.sync(&c);
        let jobs = view.jobs_with_running(&c);
        jobs.pending
            .iter()
            .map(|j| j.planned_start.as_ref().map(|p| p.start))
            .collect::<Vec<_>>()
    };
    assert_eq!(planned(true), [Some(100), Some(150), Some(150)]);
    assert_eq!(planned(false), [Some(100), None, None]);
}
