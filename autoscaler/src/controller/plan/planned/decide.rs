//! Slurm-planned scaling: slurmctld plans on the NodeSet's absent nodes — one powered-down
//! `State=CLOUD` record per ordinal, which backfill reserves and allocates like any node —
//! and powers up exactly the nodes a job will start on, and powers down the ones idle for
//! `SuspendTime`. This planner turns those requests into the NodeSet's replicas: which pods
//! to add, which one pod to retire and which records to `RESUME`.
//!
//! What it must live with (each measured on the harness's real Slurms, 22.05.8 and 24.11.5, and
//! under the real slurm-operator; docs/slurm-planned.md): a NodeSet creates
//! its *lowest free* ordinals, so covering a wanted ordinal may take pods for the free ones
//! below it too (they register as idle nodes slurmctld uses or powers down again); it
//! removes the pod ranked first by deletion cost, and a pending or unready pod ranks before
//! any deletion cost, so a retirement waits until every other pod is up; its scale-in leaves
//! the record DRAIN (and the pod's preStop DOWN), which only `RESUME` clears once the pod is
//! gone; and a record that missed `ResumeTimeout` is DOWN until resumed. A resumed record
//! slurmctld has not heard from since (`NOT_RESPONDING`, powered down) takes jobs until
//! slurmctld loads its configuration again (a restart or reconfigure, as Slinky does on every
//! config change); after that it takes none until drained and resumed once more (seen on
//! 22.05 and 24.11): so after each reload those records are refreshed, DRAIN then RESUME.
//! Not before: the DRAIN of a record slurmctld is powering up for a job requeues the job
//! (22.05, 24.11; a replica that did not see the reload waits for a job left waiting).
//!
//! Pure: what slurmctld shows of each ordinal's record and which ordinals have a pod in,
//! one [`Decision`] out. The controller's `SlurmPlanned` policy observes both, and its
//! executor carries the decision out: the retired pod's deletion cost, the scale, `RESUME`.

use slurmscale_exporter::model::{Node, NodeBase, NodeFlags};

use crate::pool::PodState;
use crate::slurm_nodes::DRAIN_PREFIX;

/// Where an ordinal's Slurm record stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Power {
    /// No record (not created yet, or not visible).
    Absent,
    /// Powered down: slurmctld may plan on it.
    Off,
    /// slurmctld allocated it and asks for it to come up.
    Up,
    /// slurmctld asks for it to go (idle for `SuspendTime`).
    Down,
    /// Registered and running nothing.
    Idle,
    /// Registered and running a job: never removed.
    Busy,
    /// Missed `ResumeTimeout` (DOWN and powered down): out of slurmctld's plans until resumed.
    Failed,
}

impl Power {
    /// Every state, as metrics name them.
    pub const ALL: [Self; 7] = [
        Self::Absent,
        Self::Off,
        Self::Up,
        Self::Down,
        Self::Idle,
        Self::Busy,
        Self::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Absent => "absent",
            Self::Off => "off",
            Self::Up => "up",
            Self::Down => "down",
            Self::Idle => "idle",
            Self::Busy => "busy",
            Self::Failed => "failed",
        }
    }

    /// The record's state as `/nodes` reports it (both API generations end up in the same
    /// flags).
    pub fn of(node: Option<&Node>) -> Self {
        let Some(n) = node else {
            return Self::Absent;
        };
        let (base, flags) = (n.state.base, n.state.flags);
        if flags.contains(NodeFlags::POWERING_DOWN) {
            Self::Down
        } else if flags.contains(NodeFlags::POWERING_UP) {
            Self::Up
        } else if flags.contains(NodeFlags::POWERED_DOWN) {
            match base {
                NodeBase::Down => Self::Failed,
                _ => Self::Off,
            }
        } else if n.busy() {
            Self::Busy
        } else {
            Self::Idle
        }
    }
}

/// One ordinal of the NodeSet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ordinal {
    pub power: Power,
    /// DRAIN or DOWN left on the record by the operator's scale-in, the pod's preStop or a
    /// missed `ResumeTimeout` — ours to clear. Anyone else's (an administrator's) is not.
    pub left_drained: bool,
    /// Powered down, idle, neither drained nor down, and not heard from since it was
    /// resumed (`NOT_RESPONDING`): unschedulable after slurmctld loads its configuration
    /// again, until refreshed.
    pub unheard: bool,
    /// DRAIN or DOWN, whoever set it.
    pub drained: bool,
    pub pod: Option<PodState>,
    /// The earliest start slurmctld plans for a pending job on the record, and the job (read
    /// only when booting just in time).
    pub planned: Option<(i64, u64)>,
}

impl Ordinal {
    /// An ordinal from its record as `/nodes` has it and its pod.
    pub fn of(node: Option<&Node>, pod: Option<PodState>) -> Self {
        Self {
            power: Power::of(node),
            left_drained: node.is_some_and(|n| {
                (n.state.drain() || n.state.base == NodeBase::Down) && left_by_scaling(&n.reason)
            }),
            unheard: node.is_some_and(|n| {
                let f = n.state.flags;
                n.state.base == NodeBase::Idle
                    && !n.state.drain()
                    && f.contains(NodeFlags::POWERED_DOWN)
                    && f.contains(NodeFlags::NOT_RESPONDING)
                    && !f.contains(NodeFlags::POWERING_UP)
                    && !f.contains(NodeFlags::POWERING_DOWN)
            }),
            drained: node.is_some_and(|n| n.state.drain() || n.state.base == NodeBase::Down),
            pod,
            planned: None,
        }
    }

    /// Its pod exists and is not going (starting or ready).
    fn live(&self) -> bool {
        matches!(self.pod, Some(PodState::Starting | PodState::Ready))
    }

    /// Its pod is live but slurmctld no longer wants the node (powering down, powered down
    /// or failed): the pod is to be retired.
    fn going(&self) -> bool {
        self.live() && matches!(self.power, Power::Down | Power::Off | Power::Failed)
    }
}

/// Whether a DRAIN or DOWN reason was left by scaling rather than set by a person: the
/// operator's scale-in and pod preStop (`slurm-operator: …`, `Pod is terminating`; up to
/// operator 1.0 the preStop's reason has no prefix), slurmctld's own `ResumeTimeout`, or us.
pub fn left_by_scaling(reason: &str) -> bool {
    reason.starts_with("slurm-operator")
        || reason.starts_with("Pod is terminating")
        || reason.starts_with("ResumeTimeout")
        || reason.starts_with(DRAIN_PREFIX)
}

/// What to do now.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Decision {
    pub replicas: u64,
    /// Ordinals whose pod goes (lowest deletion cost, then replicas down by as many).
    pub retire: Vec<usize>,
    /// Records to `RESUME`: no pod, and left drained or failed.
    pub resume: Vec<usize>,
    /// Records to `DRAIN` (reason `slurmscale:`) while their retirement waits: powered down
    /// after `SuspendTimeout`, slurmctld would plan on them again, and a pod's slurmd that
    /// lingers never registers for the new job (it waits for `ResumeTimeout` and is
    /// requeued; seen on 24.11). Resumed, like the operator's drain, once the pod is gone.
    pub drain: Vec<usize>,
    /// Records to refresh (DRAIN, then RESUME): slurmctld loaded its configuration since
    /// each was last resumed or refreshed, and they are unheard, with no pod.
    pub refresh: Vec<usize>,
    /// Free ordinals below a wanted one that the NodeSet creates first (said in Events and
    /// metrics: pods slurmctld did not ask for).
    pub extra: Vec<usize>,
    /// Why, one line per step.
    pub steps: Vec<String>,
}

/// The decision for `ordinals` (index = ordinal, up to `maxReplicas`), the NodeSet at
/// `spec_replicas` with `status_replicas` pods; `reloaded` (by ordinal): slurmctld has
/// loaded its configuration since the record was last resumed or refreshed (or may have:
/// one resumed before this replica led).
/// `None` status (the operator has not reported) or one that differs from the spec holds
/// the replicas: the operator is still carrying out the last change, and a second one now
/// would be planned on a wrong count.
pub fn decide(
    ordinals: &[Ordinal],
    spec_replicas: u64,
    status_replicas: Option<u64>,
    reloaded: &[bool],
) -> Decision {
    let mut d = Decision {
        replicas: spec_replicas,
        ..Decision::default()
    };
    d.refresh = (0..ordinals.len())
        .filter(|&i| {
            let o = &ordinals[i];
            reloaded.get(i) == Some(&true) && o.pod.is_none() && o.unheard && o.power == Power::Off
        })
        .collect();
    if !d.refresh.is_empty() {
        d.steps.push(format!(
            "refresh {} resumed record(s) (DRAIN, RESUME): slurmctld loaded its configuration again and plans on them only once refreshed",
            d.refresh.len()
        ));
    }
    d.resume = which(ordinals, |o| {
        o.pod.is_none() && o.left_drained && matches!(o.power, Power::Failed | Power::Off)
    });
    if !d.resume.is_empty() {
        d.steps.push(format!(
            "resume {} record(s) whose pod is gone, so slurmctld plans on them again",
            d.resume.len()
        ));
    }
    if status_replicas != Some(spec_replicas) {
        d.steps.push(format!(
            "holding at {spec_replicas}: the NodeSet has {} pod(s) and is still changing",
            status_replicas.map_or("an unknown number of".into(), |s| s.to_string())
        ));
        return d;
    }
    let pods = ordinals.iter().filter(|o| o.live()).count() as u64;
    // An ordinal whose pod is still terminating is not free yet: its request waits.
    let wanted = which(ordinals, |o| o.power == Power::Up && o.pod.is_none());
    if let Some(&top) = wanted.last() {
        // The NodeSet fills the lowest free ordinals: every free one up to the highest wanted.
        let free: Vec<usize> = (0..=top).filter(|&i| ordinals[i].pod.is_none()).collect();
        d.extra = free
            .iter()
            .copied()
            .filter(|i| !wanted.contains(i))
            .collect();
        d.replicas = pods + free.len() as u64;
        d.steps.push(format!(
            "slurmctld powers up {} node(s): {} → {} pods",
            wanted.len(),
            spec_replicas,
            d.replicas
        ));
        if !d.extra.is_empty() {
            d.steps.push(format!(
                "the NodeSet creates its lowest free ordinals first: {} pod(s) slurmctld did not ask for ({:?})",
                d.extra.len(),
                d.extra
            ));
        }
        // A retirement now could free an ordinal below the wanted ones, which the new pods
        // would fill instead: it waits for the next look.
        return d;
    }
    let going = which(ordinals, Ordinal::going);
    if going.is_empty() {
        return d;
    }
    if ordinals.iter().any(|o| o.pod == Some(PodState::Starting)) {
        d.drain = going
            .iter()
            .copied()
            .filter(|&i| !ordinals[i].drained)
            .collect();
        d.steps.push(format!(
            "slurmctld powers down {} node(s): waiting until no pod is starting (the NodeSet would remove a starting pod first); their records stay drained meanwhile, so no job is planned on a node whose pod still lingers",
            going.len()
        ));
        return d;
    }
    d.retire = going;
    d.replicas = pods - d.retire.len() as u64;
    d.steps.push(format!(
        "slurmctld powers down {} node(s) ({:?}): their pods go first, {} → {} pods",
        d.retire.len(),
        d.retire,
        spec_replicas,
        d.replicas
    ));
    d
}

/// Booting just in time for slurmctld's plan: the records to power up now, and when the
/// next one is due.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Ahead {
    /// Powered-down records, free of pods and drains, that a pending job is planned on
    /// within one lead: powered up now, so the node is up when the job starts instead of
    /// the job waiting a boot then.
    pub power_up: Vec<usize>,
    /// The jobs they are for, each with its planned start: `(job, start)`, earliest first.
    pub jobs: Vec<(u64, i64)>,
    /// When the next such record is one lead from its planned start (unix seconds).
    pub next: Option<i64>,
}

/// Which of `ordinals` to power up at `now` (unix seconds) for a new node to be up `lead`
/// seconds later, leaving out `skip` (records being refreshed). slurmctld powers up on its
/// own a record it allocates; this only brings a planned one forward, and never takes a
/// node away: a plan that moves later leaves the node idle until `SuspendTime`.
pub fn ahead(ordinals: &[Ordinal], now: i64, lead: i64, skip: &[usize]) -> Ahead {
    let mut a = Ahead::default();
    // A pod slurmctld let go waits to be retired until no pod is starting (the NodeSet would
    // remove a starting one first): a power-up ahead would hold it up, and on a NodeSet of
    // thousands of nodes keep it from ever going. Retirements first; the next look, once it
    // is gone, powers up what is due.
    if ordinals.iter().any(Ordinal::going) {
        return a;
    }
    for (i, o) in ordinals.iter().enumerate() {
        let Some((start, job)) = o.planned else {
            continue;
        };
        if o.power != Power::Off || o.pod.is_some() || o.drained || skip.contains(&i) {
            continue;
        }
        let due = start - lead;
        if due <= now {
            a.power_up.push(i);
            if !a.jobs.contains(&(job, start)) {
                a.jobs.push((job, start));
            }
        } else {
            a.next = Some(a.next.map_or(due, |n| n.min(due)));
        }
    }
    a.jobs.sort_by_key(|&(job, start)| (start, job));
    a
}

/// The ordinals `pick` accepts, lowest first.
fn which(ordinals: &[Ordinal], pick: impl Fn(&Ordinal) -> bool) -> Vec<usize> {
    (0..ordinals.len())
        .filter(|&i| pick(&ordinals[i]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use slurmscale_exporter::model::NodeState;

    fn ord(power: Power, pod: Option<PodState>) -> Ordinal {
        Ordinal {
            power,
            left_drained: false,
            unheard: false,
            drained: false,
            pod,
            planned: None,
        }
    }

    #[test]
    fn planned_records_power_up_one_lead_before_their_start_and_no_sooner() {
        let planned = |power, pod, start| Ordinal {
            planned: Some((start, 7)),
            ..ord(power, pod)
        };
        let o = [
            // Busy until the job's start: slurmctld frees it then.
            planned(Power::Busy, READY, 1_000),
            // Powered down, planned on at 1,000: due at 1,000 - 120.
            planned(Power::Off, None, 1_000),
            planned(Power::Off, None, 1_000),
            // Another job's, later.
            Ordinal {
                planned: Some((2_000, 8)),
                ..ord(Power::Off, None)
            },
            // Planned on but drained by someone, or its pod still going: left alone.
            Ordinal {
                drained: true,
                ..planned(Power::Off, None, 1_000)
            },
            planned(Power::Off, Some(PodState::Terminating), 1_000),
            // Not planned on.
            ord(Power::Off, None),
        ];
        let early = ahead(&o, 800, 120, &[]);
        assert_eq!((early.power_up.clone(), early.next), (vec![], Some(880)));
        let due = ahead(&o, 880, 120, &[]);
        assert_eq!(due.power_up, vec![1, 2], "{due:?}");
        assert_eq!(
            (due.jobs.clone(), due.next),
            (vec![(7, 1_000)], Some(1_880))
        );
        // Late (the plan came within a lead of its start): at once.
        assert_eq!(ahead(&o, 990, 120, &[]).power_up, vec![1, 2]);
        // A record being refreshed is powered up a look later.
        assert_eq!(ahead(&o, 880, 120, &[1]).power_up, vec![2]);
        // Once slurmctld asks for them (POWERING_UP), not again.
        let asked = [planned(Power::Up, None, 1_000)];
        assert_eq!(ahead(&asked, 990, 120, &[]), Ahead::default());
        // Not while a pod slurmctld let go waits to be retired: it goes first.
        let mut retiring = o.to_vec();
        retiring.push(ord(Power::Down, READY));
        assert_eq!(ahead(&retiring, 880, 120, &[]), Ahead::default());
    }

    const READY: Option<PodState> = Some(PodState::Ready);

    #[test]
    fn a_power_up_adds_exactly_the_pods_asked_for() {
        // Ordinals 0-1 serve, slurmctld allocated 2 and 3 for a job.
        let o = [
            ord(Power::Busy, READY),
            ord(Power::Idle, READY),
            ord(Power::Up, None),
            ord(Power::Up, None),
            ord(Power::Off, None),
        ];
        let d = decide(&o, 2, Some(2), &[]);
        assert_eq!((d.replicas, d.extra.clone()), (4, vec![]), "{d:?}");
        assert!(d.retire.is_empty() && d.resume.is_empty());
    }

    #[test]
    fn a_wanted_ordinal_above_a_free_one_takes_the_free_one_too_and_says_so() {
        // Ordinal 1 is free (its node powered down earlier), slurmctld wants 3.
        let o = [
            ord(Power::Busy, READY),
            ord(Power::Off, None),
            ord(Power::Busy, READY),
            ord(Power::Up, None),
        ];
        let d = decide(&o, 2, Some(2), &[]);
        assert_eq!((d.replicas, d.extra.clone()), (4, vec![1]), "{d:?}");
        assert!(
            d.steps.iter().any(|s| s.contains("did not ask for")),
            "{d:?}"
        );
    }

    #[test]
    fn a_power_down_retires_exactly_that_pod_and_never_a_busy_one() {
        let o = [
            ord(Power::Busy, READY),
            ord(Power::Down, READY),
            ord(Power::Idle, READY),
        ];
        let d = decide(&o, 3, Some(3), &[]);
        assert_eq!((d.replicas, d.retire.clone()), (2, vec![1]), "{d:?}");
    }

    #[test]
    fn nothing_moves_while_the_nodeset_is_still_changing_or_a_pod_is_starting() {
        let o = [ord(Power::Up, None), ord(Power::Down, READY)];
        assert_eq!(
            decide(&o, 2, Some(1), &[]).replicas,
            2,
            "status behind spec"
        );
        assert_eq!(decide(&o, 2, None, &[]).replicas, 2, "no status");
        // A retirement waits for the starting pod (the operator would remove it first).
        let o = [
            ord(Power::Down, READY),
            ord(Power::Idle, Some(PodState::Starting)),
        ];
        let d = decide(&o, 2, Some(2), &[]);
        assert_eq!((d.replicas, d.retire.clone()), (2, vec![]), "{d:?}");
        // Meanwhile its record is drained, once, so slurmctld plans nothing on it while its
        // pod lingers.
        assert_eq!(d.drain, vec![0], "{d:?}");
        let drained = [
            Ordinal {
                drained: true,
                ..o[0]
            },
            o[1],
        ];
        assert!(decide(&drained, 2, Some(2), &[]).drain.is_empty());
        // A power-up and a power-down together: the power-up first.
        let o = [
            ord(Power::Down, READY),
            ord(Power::Idle, READY),
            ord(Power::Up, None),
        ];
        let d = decide(&o, 2, Some(2), &[]);
        assert_eq!((d.replicas, d.retire.clone()), (3, vec![]), "{d:?}");
    }

    #[test]
    fn records_left_drained_or_failed_are_resumed_once_their_pod_is_gone() {
        let drained = Ordinal {
            power: Power::Off,
            left_drained: true,
            unheard: false,
            drained: true,
            pod: None,
            planned: None,
        };
        let o = [
            drained,
            Ordinal {
                pod: Some(PodState::Terminating),
                ..drained
            },
            Ordinal {
                power: Power::Failed,
                ..drained
            },
            ord(Power::Off, None),
            // Down for a reason of an administrator's: left alone.
            ord(Power::Failed, None),
        ];
        let d = decide(&o, 0, Some(0), &[]);
        assert_eq!(d.resume, vec![0, 2], "{d:?}");
        assert_eq!(d.replicas, 0);
    }

    #[test]
    fn after_slurmctld_reloads_the_unheard_records_without_a_pod_are_refreshed() {
        let unheard = Ordinal {
            unheard: true,
            ..ord(Power::Off, None)
        };
        let o = [
            unheard,
            // Its pod is starting: slurmctld will hear from it.
            Ordinal {
                pod: Some(PodState::Starting),
                ..unheard
            },
            ord(Power::Off, None),
            ord(Power::Up, None),
            unheard,
        ];
        let all = [true; 5];
        let d = decide(&o, 1, Some(1), &all);
        assert_eq!(d.refresh, vec![0, 4], "{d:?}");
        assert_eq!(d.replicas, 4, "a power-up goes on beside it: {d:?}");
        assert!(decide(&o, 1, Some(1), &[]).refresh.is_empty());
        // Only those resumed before the reload.
        let first = [true, true, true, true, false];
        assert_eq!(decide(&o, 1, Some(1), &first).refresh, vec![0]);
        // And while the NodeSet is still changing, as resumes do.
        assert_eq!(decide(&o, 1, Some(0), &all).refresh, vec![0, 4]);
    }

    #[test]
    fn only_drains_and_downs_left_by_scaling_are_cleared() {
        for ours in [
            "slurm-operator: scale-in",
            "Pod is terminating",
            "slurm-operator: Pod is terminating",
            "ResumeTimeout reached",
            "slurmscale: capacity for Kubernetes",
        ] {
            assert!(left_by_scaling(ours), "{ours}");
        }
        for theirs in ["bad DIMM", "maintenance", "Not responding", ""] {
            assert!(!left_by_scaling(theirs), "{theirs}");
        }
    }

    /// The state words real slurmctlds reported for CLOUD records (recorded on the harness's
    /// 22.05.8 and 24.11.5): 22.05's REST v0.0.38 (a base word and flags) and 24.11's v0.0.42
    /// (one array), and scontrol's.
    #[test]
    fn power_states_are_read_from_what_both_slurms_report() {
        let node = |words: &[&str], alloc_cpus: u64| Node {
            name: "w0".into(),
            state: NodeState::from_words(words.iter().copied()),
            partitions: Vec::new(),
            cpus: 4,
            alloc_cpus,
            memory_bytes: 0,
            alloc_memory_bytes: 0,
            free_memory_bytes: None,
            gres: Vec::new(),
            gres_used: Vec::new(),
            reason: String::new(),
            reason_set_by: String::new(),
        };
        let power = |words: &[&str], alloc| Power::of(Some(&node(words, alloc)));
        // Created State=CLOUD: planned on, not up.
        assert_eq!(
            power(&["IDLE+CLOUD+DYNAMIC_NORM+POWERED_DOWN"], 0),
            Power::Off
        );
        // Allocated to a job and asked to come up (E1).
        let v0038 = [
            "mixed",
            "CLOUD",
            "DYNAMIC_NORM",
            "NOT_RESPONDING",
            "POWERING_UP",
        ];
        let v0042 = [
            "MIXED",
            "CLOUD",
            "NOT_RESPONDING",
            "POWERING_UP",
            "DYNAMIC_NORM",
        ];
        assert_eq!(power(&v0038, 2), Power::Up);
        assert_eq!(power(&v0042, 2), Power::Up);
        // Idle for SuspendTime.
        assert_eq!(power(&["IDLE", "CLOUD", "POWERING_DOWN"], 0), Power::Down);
        // The operator's DRAIN and the preStop's DOWN on a powered-down record (E5), and
        // the same after RESUME.
        assert_eq!(power(&["DOWN+CLOUD+DRAIN+POWERED_DOWN"], 0), Power::Failed);
        let resumed = ["IDLE+CLOUD+POWERED_DOWN+NOT_RESPONDING"];
        assert_eq!(power(&resumed, 0), Power::Off);
        // Resumed and not heard from since: refreshed after slurmctld reloads. Fresh from
        // `scontrol create`, allocated or drained by anyone: not.
        let unheard = |words: &[&str], alloc| Ordinal::of(Some(&node(words, alloc)), None).unheard;
        assert!(unheard(&resumed, 0));
        assert!(unheard(
            &["IDLE", "CLOUD", "POWERED_DOWN", "NOT_RESPONDING"],
            0
        ));
        assert!(!unheard(&["IDLE+CLOUD+DYNAMIC_NORM+POWERED_DOWN"], 0));
        assert!(!unheard(&v0042, 2));
        assert!(!unheard(
            &["IDLE+CLOUD+DRAIN+POWERED_DOWN+NOT_RESPONDING"],
            0
        ));
        assert!(!unheard(&["DOWN+CLOUD+POWERED_DOWN+NOT_RESPONDING"], 0));
        // Registered.
        assert_eq!(power(&["MIXED", "CLOUD"], 2), Power::Busy);
        assert_eq!(power(&["IDLE", "CLOUD"], 0), Power::Idle);
        assert_eq!(Power::of(None), Power::Absent);
    }
}
