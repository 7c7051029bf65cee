//! Leader election on a `coordination.k8s.io/v1` Lease, so that of several autoscaler
//! replicas exactly one actuates. The holder renews every `renew`; a standby takes the lease
//! once it has not been renewed for `duration`. Every write goes through the Lease's
//! resourceVersion, so two candidates racing for an expired lease cannot both win. A leader
//! whose renewal fails or is slow keeps trying, and keeps leading, while the lease is
//! certainly its own (below), and steps down the moment that may no longer hold, never after:
//! an API server slow to answer, but answering, does not leave the site without a leader
//! (stepping down at the first slow renewal did, for as long as the slowness lasted). One
//! that finds the lease held by another steps down at once.
//!
//! Stepping down is not enough on its own: a write started while leading can still be in
//! flight (held by a slow network or a retrying client) when a standby takes over. So the
//! leader also knows until when its lease is certainly its own — the start of its last
//! successful renewal plus the lease duration, less one renewal period of margin, on the
//! monotonic clock — and every write to Kubernetes must be sent and answered before that
//! instant ([`Leadership::write_deadline`]) or is abandoned. A standby takes over only when the
//! lease is `duration` past the renewTime the leader wrote, which the leader took before that
//! renewal started: the leader's deadline always comes first.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::{Client, ResourceExt};
use serde_json::json;
use tokio::sync::watch;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::{info, warn};

#[derive(Clone, Debug)]
pub struct LeaseConfig {
    pub namespace: String,
    pub name: String,
    pub identity: String,
    /// How long a lease lasts without renewal.
    pub duration: Duration,
    /// How often the holder renews (and a standby looks).
    pub renew: Duration,
}

/// Whether this process may actuate right now, and a way to hear when that changes (only
/// the leader polls Slurm in full).
#[derive(Clone, Debug)]
pub struct Leadership {
    leading: Arc<watch::Sender<bool>>,
    /// Until when the lease is certainly ours; `None` without election (never expires).
    valid_until: Option<Arc<Mutex<Option<Instant>>>>,
}

impl Default for Leadership {
    /// Not leading until an election says so.
    fn default() -> Self {
        Self {
            leading: Arc::new(watch::Sender::new(false)),
            valid_until: Some(Arc::default()),
        }
    }
}

impl Leadership {
    /// Always the leader (a single replica without election).
    pub fn always() -> Self {
        Self {
            leading: Arc::new(watch::Sender::new(true)),
            valid_until: None,
        }
    }

    pub fn is_leader(&self) -> bool {
        *self.leading.borrow()
    }

    /// Follows leadership: `true` while leading.
    pub fn watch(&self) -> watch::Receiver<bool> {
        self.leading.subscribe()
    }

    /// The instant by which a write must be answered for it to be certainly ours, or `None`
    /// when no write may be sent now (not leading, or the lease may have run out). Without
    /// election: a day from now.
    pub fn write_deadline(&self) -> Option<Instant> {
        let Some(valid) = &self.valid_until else {
            return Some(Instant::now() + Duration::from_secs(86_400));
        };
        let until = (*valid.lock().unwrap_or_else(|e| e.into_inner()))?;
        (self.is_leader() && until > Instant::now()).then_some(until)
    }

    /// `write`, if it can be sent now and answered before the lease may run out; abandoned
    /// (dropped) at that instant. Every write the autoscaler makes, to Kubernetes or to
    /// Slurm, goes through here.
    pub async fn fence<T>(
        &self,
        what: &'static str,
        write: impl Future<Output = crate::Result<T>>,
    ) -> crate::Result<T> {
        let ends = self.write_deadline().ok_or(crate::Error::NotLeader(what))?;
        tokio::time::timeout_at(ends, write)
            .await
            .unwrap_or(Err(crate::Error::NotLeader(what)))
    }

    /// Sets it; returns what it was.
    fn swap(&self, leading: bool) -> bool {
        if !leading {
            self.set_valid_until(None);
        }
        self.leading.send_replace(leading)
    }

    /// Until when the lease is certainly ours (`None`: not known to be ours, or no election).
    fn certain_until(&self) -> Option<Instant> {
        let valid = self.valid_until.as_ref()?;
        *valid.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn set_valid_until(&self, until: Option<Instant>) {
        if let Some(valid) = &self.valid_until {
            *valid.lock().unwrap_or_else(|e| e.into_inner()) = until;
        }
    }
}

/// Runs the election until `stop`; `leadership` follows the outcome.
pub async fn run(
    client: Client,
    cfg: LeaseConfig,
    leadership: Leadership,
    stop: CancellationToken,
) {
    let api: Api<Lease> = Api::namespaced(client, &cfg.namespace);
    loop {
        // Past the instant our lease is certainly ours, a standby may hold it.
        if leadership.is_leader() && leadership.write_deadline().is_none() {
            leadership.swap(false);
            warn!(identity = %cfg.identity, lease = %cfg.name, "the lease could not be renewed before it may run out; not leading");
        }
        // Taken before the renewal (and its renewTime) so our deadline is never later than
        // what a standby computes from the lease.
        let started = Instant::now();
        // A leader may wait for an answer while the lease is certainly its own, a standby for
        // one period: a renewal that hangs must not leave us acting as leader past the lease.
        let limit = leadership
            .certain_until()
            .filter(|until| *until > started)
            .unwrap_or(started + cfg.renew);
        let leading = match tokio::time::timeout_at(limit, try_acquire_or_renew(&api, &cfg)).await {
            Ok(Ok(won)) => {
                if won {
                    let margin = cfg.renew.min(cfg.duration / 2);
                    leadership.set_valid_until(Some(started + cfg.duration - margin));
                }
                won
            }
            Ok(Err(e)) => {
                warn!(error = %e, "cannot reach the lease");
                leadership.write_deadline().is_some()
            }
            Err(_) => {
                warn!("lease renewal timed out");
                leadership.write_deadline().is_some()
            }
        };
        if leading != leadership.swap(leading) {
            info!(identity = %cfg.identity, lease = %cfg.name, leading, "leadership changed");
        }
        // The next try one period after this one started (a slow answer does not stretch the
        // period); a leader also wakes when its lease may run out, to step down on time.
        let mut next = started + cfg.renew;
        if let Some(until) = leadership.certain_until().filter(|_| leading) {
            next = next.min(until);
        }
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep_until(next) => {}
        }
    }
    // Step down cleanly so a standby need not wait for the lease to expire.
    if leadership.swap(false) {
        let _ = release(&api, &cfg).await;
    }
}

async fn try_acquire_or_renew(api: &Api<Lease>, cfg: &LeaseConfig) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    let spec = |transitions: i32, acquired: Option<MicroTime>| {
        json!({
            "holderIdentity": cfg.identity,
            "leaseDurationSeconds": cfg.duration.as_secs(),
            "acquireTime": acquired.unwrap_or(MicroTime(now)),
            "renewTime": MicroTime(now),
            "leaseTransitions": transitions,
        })
    };
    let Some(lease) = api.get_opt(&cfg.name).await? else {
        let lease: Lease = serde_json::from_value(json!({
            "metadata": {"name": cfg.name, "namespace": cfg.namespace},
            "spec": spec(0, None),
        }))
        .map_err(kube::Error::SerdeError)?;
        return match api.create(&PostParams::default(), &lease).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
            Err(e) => Err(e),
        };
    };
    let s = lease.spec.clone().unwrap_or_default();
    let holder = s.holder_identity.clone().unwrap_or_default();
    let expired = s.renew_time.as_ref().is_none_or(|t| {
        let lasts = s
            .lease_duration_seconds
            .map_or(cfg.duration.as_secs() as i64, i64::from);
        now.as_millisecond() - t.0.as_millisecond() > lasts * 1000
    });
    let ours = holder == cfg.identity;
    if !ours && !expired && !holder.is_empty() {
        return Ok(false);
    }
    let transitions = s.lease_transitions.unwrap_or(0) + i32::from(!ours);
    let acquired = if ours { s.acquire_time.clone() } else { None };
    let mut updated = lease.clone();
    updated.spec =
        Some(serde_json::from_value(spec(transitions, acquired)).map_err(kube::Error::SerdeError)?);
    // replace() sends our resourceVersion: if someone else wrote first, we get a 409.
    match api
        .replace(&lease.name_any(), &PostParams::default(), &updated)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

async fn release(api: &Api<Lease>, cfg: &LeaseConfig) -> Result<(), kube::Error> {
    if let Some(mut lease) = api.get_opt(&cfg.name).await?
        && lease
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_deref())
            == Some(cfg.identity.as_str())
    {
        if let Some(spec) = lease.spec.as_mut() {
            spec.holder_identity = None;
            spec.renew_time = None;
        }
        api.replace(&cfg.name, &PostParams::default(), &lease)
            .await?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_only_within_the_lease() {
        let l = Leadership::default();
        assert_eq!(l.write_deadline(), None, "not leading yet");
        let until = Instant::now() + Duration::from_millis(100);
        l.set_valid_until(Some(until));
        l.swap(true);
        assert_eq!(l.write_deadline(), Some(until));
        // Still "leading" (no renewal failed yet) but past the lease: no write.
        std::thread::sleep(Duration::from_millis(150));
        assert!(l.is_leader());
        assert_eq!(l.write_deadline(), None);
        // Stepping down forgets the lease.
        l.set_valid_until(Some(Instant::now() + Duration::from_secs(5)));
        l.swap(false);
        assert_eq!(l.write_deadline(), None);
        assert!(Leadership::always().write_deadline().is_some());
    }
}
