//! The one way the real controller runs in a simulated world: show it the world as the API
//! server and slurmrestd would, let it reconcile, and carry out what it wrote as
//! slurm-operator, slurmctld and the API server would. The demo, the single-partition
//! replay (`builtin`, `slurm-planned`) and the shared-pool replay differ only in their
//! [`World`]; each new input or write the controller learns is shown or carried out there,
//! once, and every run picks it up.
//!
//! The controller polls every [`POLL`] seconds. A replay of months cannot reconcile at every
//! poll, so it skips the polls where nothing the controller reads moved and it asked to look
//! at no later time ([`Polls`]); the demo reconciles at every one.

use std::sync::Arc;
use std::time::SystemTime;

use slurmscale_autoscaler::fakes::{Fake, OnFake, Recorded};
use slurmscale_exporter::snapshot::ClusterSnapshot;

use crate::view::POLL;

/// A simulated world the controller runs in.
pub trait World {
    /// Shows the world as it stands at `at`: writes what the controller reads through the
    /// seam into `fake` (targets, pods, the ledger) and returns what slurmrestd shows.
    fn show(&mut self, fake: &Fake, at: SystemTime) -> Arc<ClusterSnapshot>;
    /// Carries out one of the controller's writes at `now` (unix seconds).
    fn apply(&mut self, write: &Recorded, now: i64);
}

/// The real controller on the in-memory seam, on the world's clock.
pub struct Driver {
    pub on: OnFake,
    /// The Slurm cluster it reads (an empty snapshot of it is published between reconciles).
    cluster: String,
    /// For callers outside async code (the replays), made on first use.
    rt: Option<tokio::runtime::Runtime>,
}

/// Unix seconds as the controller's clock reads them.
pub fn clock(t: i64) -> SystemTime {
    slurmscale_autoscaler::plan::unix_time(t)
}

/// The first poll at or after `t`.
pub fn poll_at_or_after(t: SystemTime) -> i64 {
    let s = t
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs_f64().ceil() as i64);
    s.div_euclid(POLL) * POLL + if s.rem_euclid(POLL) == 0 { 0 } else { POLL }
}

impl Driver {
    /// `on` reading Slurm cluster `cluster`.
    pub fn new(on: OnFake, cluster: &str) -> Self {
        Self {
            on,
            cluster: cluster.into(),
            rt: None,
        }
    }

    /// One reconcile at `at` (unix seconds): the world shown, the controller run, its writes
    /// carried out in the order it made them. Returns the writes (Events included).
    pub async fn reconcile(&mut self, world: &mut impl World, at: i64) -> Vec<Recorded> {
        let time = clock(at);
        self.on.set_now(time);
        let snapshot = world.show(&self.on.fake, time);
        let writes = self.run(snapshot).await;
        for w in &writes {
            world.apply(w, at);
        }
        writes
    }

    /// [`Self::reconcile`] for a caller outside async code.
    pub fn reconcile_blocking(&mut self, world: &mut impl World, at: i64) -> Vec<Recorded> {
        let rt = self.rt.take().unwrap_or_else(runtime);
        let writes = rt.block_on(self.reconcile(world, at));
        self.rt = Some(rt);
        writes
    }

    /// A reconcile at `at` on `snapshot` with nothing shown anew and nothing carried out:
    /// a poll skipped since the last reconcile, which read what that one read.
    pub fn rerun_blocking(&mut self, snapshot: Arc<ClusterSnapshot>, at: i64) -> Vec<Recorded> {
        self.on.set_now(clock(at));
        let rt = self.rt.take().unwrap_or_else(runtime);
        let writes = rt.block_on(self.run(snapshot));
        self.rt = Some(rt);
        writes
    }

    async fn run(&mut self, snapshot: Arc<ClusterSnapshot>) -> Vec<Recorded> {
        self.on.publish(snapshot);
        self.on.controller.reconcile_all().await;
        // Let go of the world's data, so the next change is made in place.
        self.on
            .publish(Arc::new(ClusterSnapshot::new(&self.cluster, "")));
        self.on.fake.take_writes()
    }

    /// The first poll at or after the time the controller asked to look again (a window
    /// or a timeout ending), if it did.
    pub fn revisit(&self) -> Option<i64> {
        self.on.controller.next_revisit().map(poll_at_or_after)
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .build()
        .expect("a current-thread runtime builds")
}

/// The first poll after `t`.
fn poll_after(t: i64) -> i64 {
    t - t.rem_euclid(POLL) + POLL
}

/// Which polls a replay reconciles at: the ones where what the controller reads (`I`,
/// a world's summary of it) moved since its last reconcile, or where it asked to look again;
/// at the others it would decide what it decided last.
pub struct Polls<I> {
    sense: Sense,
    /// Reconcile at every poll (the demo; a test of the skipping).
    every_poll: bool,
    /// What it read at its last reconcile.
    seen: Option<I>,
    /// A poll that reconciles whatever it reads then (see [`Sense`]).
    marked: Option<i64>,
    /// No poll before this one: the first at or after the start, then the one after the last
    /// poll looked at.
    next: i64,
    /// The last poll it reconciled at.
    last: Option<i64>,
}

/// How a world's summary of what the controller reads is watched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sense {
    /// At every event: a change seen between two polls makes the next one reconcile even if
    /// undone by then, and before a reconcile that follows skipped polls the poll just
    /// before it is replayed on what the last one read, so the decision history holds what
    /// a tick-by-tick run holds. A single partition: a test holds it to reconciling at
    /// every poll. `replays_skipped` is false where the world's writes between polls would
    /// make that replay read what the skipped poll did not.
    EveryEvent { replays_skipped: bool },
    /// At polls: a poll whose summary is what the last reconcile read, with no revisit due,
    /// is skipped, whatever moved and came back in between. A shared pool, whose summary
    /// is coarse counts.
    AtPolls,
}

/// A poll that reconciles, and the skipped poll to replay before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    pub replay_first: Option<i64>,
}

impl<I: PartialEq> Polls<I> {
    /// The controller starts at `start`: its first poll is the first at or after it.
    pub fn new(sense: Sense, start: i64, every_poll: bool) -> Self {
        Self {
            sense,
            every_poll,
            seen: None,
            marked: None,
            next: poll_at_or_after(clock(start)),
            last: None,
        }
    }

    /// The next time the replay stops for the controller, `revisit` the poll it asked for.
    pub fn wake(&self, revisit: Option<i64>) -> Option<i64> {
        match self.sense {
            Sense::EveryEvent { .. } => [self.marked, revisit].into_iter().flatten().min(),
            Sense::AtPolls => self.marked.or(revisit).map(|t| t.max(self.next)),
        }
    }

    /// An event at `now`, the world reading `inputs`: whether the controller reconciles now.
    pub fn look(&mut self, now: i64, inputs: I, revisit: Option<i64>) -> Option<Due> {
        let changed = self.seen.as_ref() != Some(&inputs);
        if now.rem_euclid(POLL) != 0 || now < self.next {
            if changed && matches!(self.sense, Sense::EveryEvent { .. }) {
                self.marked = Some(poll_after(now));
            }
            return None;
        }
        self.next = now + POLL;
        let revisit_due = revisit.is_some_and(|r| r <= now);
        let due = match self.sense {
            Sense::EveryEvent { .. } => changed || self.wake(revisit).is_some_and(|w| w <= now),
            Sense::AtPolls => changed || revisit_due,
        };
        if matches!(self.sense, Sense::EveryEvent { .. }) {
            self.marked = self.every_poll.then_some(now + POLL);
        }
        if !due && !self.every_poll {
            return None;
        }
        let replays = matches!(
            self.sense,
            Sense::EveryEvent {
                replays_skipped: true
            }
        );
        let replay_first = self
            .last
            .filter(|&last| replays && !self.every_poll && last < now - POLL)
            .map(|_| now - POLL);
        self.seen = Some(inputs);
        self.last = Some(now);
        Some(Due { replay_first })
    }

    /// Everything due at `now` happened, the world reading `inputs`: a summary that moved
    /// brings the next poll (watched at polls only, [`Sense::AtPolls`]).
    pub fn settle(&mut self, now: i64, inputs: &I) {
        if self.sense == Sense::AtPolls {
            self.marked =
                (self.seen.as_ref() != Some(inputs)).then(|| poll_after(now).max(self.next));
        }
    }

    /// What the controller wrote at `now` changes what it reads: the next poll looks again.
    pub fn again(&mut self, now: i64) {
        match self.sense {
            Sense::EveryEvent { .. } => self.marked = Some(now + POLL),
            Sense::AtPolls => self.seen = None,
        }
    }
}
