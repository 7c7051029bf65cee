//! Draining, resuming, downing (to requeue) and powering up Slurm nodes, creating the records of a NodeSet's nodes
//! ([`crate::records`]) and the one reconfigure some Slurm releases need after that — the
//! only Slurm writes slurmscale makes — behind the
//! [`SlurmNodes`] trait, so the controller's colocated path runs on an in-memory Slurm in
//! tests and the demo. [`SlurmNodeWriters`] does it for real: REST `POST node/{name}` on
//! v0.0.40+; Slurm 22.05 (v0.0.38) has no node update endpoint, so there it runs
//! `scontrol update`, which needs Slurm's client and munge where the autoscaler runs. Drains
//! carry the reason prefix `slurmscale:`; callers only ever resume those.
//!
//! These writes are fenced by the lease like the Kubernetes ones (`actuator`): sent only
//! while [`Leadership::write_deadline`] says the lease is certainly ours and abandoned at it
//! (an `scontrol` still running is killed), so a replica cut off from the API server never
//! drains or resumes a node after a standby has taken over the pool.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use slurmscale_exporter::config::ClusterConfig;
use slurmscale_exporter::slurm::{ApiVersion, SlurmClient};

use crate::error::{Error, Result};
use crate::leader::Leadership;
use crate::records::Record;

/// How to run `scontrol` for clusters whose REST API cannot update nodes.
#[derive(Clone, Debug, Default)]
pub struct Scontrol {
    /// The `scontrol` binary (default: `scontrol` on PATH).
    pub bin: Option<PathBuf>,
    /// `SLURM_CONF` for it, if not the default.
    pub conf: Option<PathBuf>,
}

/// Node writes of every Slurm cluster the autoscaler reads.
pub trait SlurmNodes: Send + Sync + 'static {
    /// DRAIN `node` of `cluster` (spoken to in `version`) with the reason `slurmscale: <why>`.
    fn drain(
        &self,
        cluster: &str,
        version: ApiVersion,
        node: &str,
        why: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// DOWN `node` of `cluster` with the reason `slurmscale: <why>`: slurmctld requeues the
    /// batch jobs running there that may be requeued and kills the others, so callers only
    /// ask it of nodes whose every job may be requeued.
    fn down(
        &self,
        cluster: &str,
        version: ApiVersion,
        node: &str,
        why: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// RESUME `node` of `cluster`.
    fn resume(
        &self,
        cluster: &str,
        version: ApiVersion,
        node: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// POWER_UP `node` of `cluster`: a powered-down CLOUD record slurmctld then powers up
    /// (its `ResumeProgram`, `POWERING_UP`) as for a job it allocated there.
    fn power_up(
        &self,
        cluster: &str,
        version: ApiVersion,
        node: &str,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Creates the node record `record` in `cluster` (see [`crate::records`]).
    fn create(
        &self,
        cluster: &str,
        version: ApiVersion,
        record: &Record,
    ) -> impl Future<Output = Result<()>> + Send;

    /// Makes slurmctld of `cluster` load its configuration again (`scontrol reconfigure`).
    fn reconfigure(
        &self,
        cluster: &str,
        version: ApiVersion,
    ) -> impl Future<Output = Result<()>> + Send;
}

/// The prefix of the reason on every drain slurmscale sets; only such drains are ever
/// resumed by it.
pub const DRAIN_PREFIX: &str = "slurmscale:";

/// The reason a drain of ours carries.
pub fn drain_reason(why: &str) -> String {
    format!("{DRAIN_PREFIX} {why}")
}

/// One writer per cluster, by name, fenced by the lease.
pub struct SlurmNodeWriters {
    writers: BTreeMap<String, SlurmNodeWriter>,
    leadership: Leadership,
}

impl SlurmNodeWriters {
    /// Writers for `clusters`, each with its own client (the poller's limits apply), writing
    /// only while `leadership` says the lease is ours.
    pub fn new(
        clusters: &[ClusterConfig],
        scontrol: &Scontrol,
        leadership: Leadership,
    ) -> Result<Self> {
        let writers = clusters
            .iter()
            .map(|c| Ok((c.name.clone(), SlurmNodeWriter::new(c, scontrol.clone())?)))
            .collect::<Result<_>>()?;
        Ok(Self {
            writers,
            leadership,
        })
    }

    fn get(&self, cluster: &str) -> Result<&SlurmNodeWriter> {
        self.writers
            .get(cluster)
            .ok_or_else(|| Error::UnknownCluster(cluster.to_string()))
    }
}

impl SlurmNodes for SlurmNodeWriters {
    async fn drain(&self, cluster: &str, version: ApiVersion, node: &str, why: &str) -> Result<()> {
        let writer = self.get(cluster)?;
        self.leadership
            .fence("Slurm node drain", writer.drain(version, node, why))
            .await
    }

    async fn down(&self, cluster: &str, version: ApiVersion, node: &str, why: &str) -> Result<()> {
        let writer = self.get(cluster)?;
        self.leadership
            .fence("Slurm node down", writer.down(version, node, why))
            .await
    }

    async fn resume(&self, cluster: &str, version: ApiVersion, node: &str) -> Result<()> {
        let writer = self.get(cluster)?;
        self.leadership
            .fence("Slurm node resume", writer.resume(version, node))
            .await
    }

    async fn power_up(&self, cluster: &str, version: ApiVersion, node: &str) -> Result<()> {
        let writer = self.get(cluster)?;
        self.leadership
            .fence("Slurm node power-up", writer.power_up(version, node))
            .await
    }

    async fn create(&self, cluster: &str, version: ApiVersion, record: &Record) -> Result<()> {
        let writer = self.get(cluster)?;
        self.leadership
            .fence("Slurm node record", writer.create(version, record))
            .await
    }

    async fn reconfigure(&self, cluster: &str, version: ApiVersion) -> Result<()> {
        let writer = self.get(cluster)?;
        self.leadership
            .fence("Slurm reconfigure", writer.reconfigure(version))
            .await
    }
}

pub struct SlurmNodeWriter {
    client: Arc<SlurmClient>,
    scontrol: Scontrol,
}

impl SlurmNodeWriter {
    pub fn new(cluster: &ClusterConfig, scontrol: Scontrol) -> Result<Self> {
        let client = SlurmClient::new(&cluster.client_options(), cluster.token_source()?)?;
        Ok(Self {
            client: Arc::new(client),
            scontrol,
        })
    }

    /// DRAIN with `slurmscale: <why>`.
    pub async fn drain(&self, version: ApiVersion, node: &str, why: &str) -> Result<()> {
        self.set_with_reason(version, node, "DRAIN", why).await
    }

    /// DOWN with `slurmscale: <why>` (the DRAIN flag stays where it was set).
    pub async fn down(&self, version: ApiVersion, node: &str, why: &str) -> Result<()> {
        self.set_with_reason(version, node, "DOWN", why).await
    }

    async fn set_with_reason(
        &self,
        version: ApiVersion,
        node: &str,
        state: &str,
        why: &str,
    ) -> Result<()> {
        let reason = drain_reason(why);
        if !version.updates_nodes() {
            return self
                .scontrol(&[
                    &format!("nodename={node}"),
                    &format!("state={}", state.to_ascii_lowercase()),
                    &format!("reason={reason}"),
                ])
                .await;
        }
        let body = json!({"state": [state], "reason": reason});
        Ok(self
            .client
            .post_json(version, &format!("node/{node}"), &body)
            .await?)
    }

    /// RESUME; a node that is no longer DOWN, DRAIN or FAIL is left as it is, which is what
    /// was asked: slurmctld refuses to resume it ("Invalid node state specified", error
    /// 2028), as when a second look came before the first RESUME showed in `/nodes`, or
    /// `idle_on_node_suspend` cleared the drain as the node powered down.
    pub async fn resume(&self, version: ApiVersion, node: &str) -> Result<()> {
        let result = if !version.updates_nodes() {
            self.scontrol(&[&format!("nodename={node}"), "state=resume"])
                .await
        } else {
            self.client
                .post_json(
                    version,
                    &format!("node/{node}"),
                    &json!({"state": ["RESUME"]}),
                )
                .await
                .map_err(Error::from)
        };
        match result {
            Err(e) if e.to_string().contains("Invalid node state specified") => Ok(()),
            other => other,
        }
    }

    /// POWER_UP. slurmctld accepts it on a node already up or powering up, and leaves it so.
    pub async fn power_up(&self, version: ApiVersion, node: &str) -> Result<()> {
        if !version.updates_nodes() {
            return self
                .scontrol(&[&format!("nodename={node}"), "state=power_up"])
                .await;
        }
        let body = json!({"state": ["POWER_UP"]});
        Ok(self
            .client
            .post_json(version, &format!("node/{node}"), &body)
            .await?)
    }

    /// Creates a node record: REST `new/node` where the API has it (v0.0.44, Slurm 25.11
    /// on), else `scontrol create`.
    pub async fn create(&self, version: ApiVersion, record: &Record) -> Result<()> {
        if version.creates_nodes() {
            return Ok(self
                .client
                .post_json(version, "new/node/", &json!({"node_conf": record.conf}))
                .await?);
        }
        let words: Vec<&str> = record.conf.split_ascii_whitespace().collect();
        self.scontrol_do("create", &words).await
    }

    /// `scontrol reconfigure`: REST `reconfigure/` from v0.0.40, else `scontrol`.
    pub async fn reconfigure(&self, version: ApiVersion) -> Result<()> {
        if version.reconfigures() {
            return Ok(self.client.get_command(version, "reconfigure/").await?);
        }
        self.scontrol_do("reconfigure", &[]).await
    }

    async fn scontrol(&self, args: &[&str]) -> Result<()> {
        self.scontrol_do("update", args).await
    }

    async fn scontrol_do(&self, verb: &str, args: &[&str]) -> Result<()> {
        let bin = self
            .scontrol
            .bin
            .clone()
            .unwrap_or_else(|| "scontrol".into());
        let mut cmd = tokio::process::Command::new(&bin);
        // Killed if the lease runs out first (the future is dropped), not left to write later.
        cmd.arg(verb)
            .args(args)
            .env_remove("SLURM_JWT")
            .kill_on_drop(true);
        if let Some(conf) = &self.scontrol.conf {
            cmd.env("SLURM_CONF", conf);
        }
        // What the error names: the node (`nodename=…`, `NodeName=…`), else the verb.
        let what = args.first().copied().unwrap_or(verb).to_string();
        let out = cmd.output().await.map_err(|e| {
            Error::Target(what.clone(), format!("cannot run {}: {e}", bin.display()))
        })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error::Target(
                what,
                format!(
                    "scontrol {verb} failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ))
        }
    }
}

#[cfg(test)]
mod fence_tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, Ordering};

    /// A replica that does not hold the lease sends no Slurm write at all; the leader does.
    #[tokio::test]
    async fn slurm_writes_go_out_only_under_the_lease() {
        let sent = AtomicBool::new(false);
        let write = || async {
            sent.store(true, Ordering::SeqCst);
            Ok(())
        };
        let standby = Leadership::default();
        let refused = standby.fence("Slurm node drain", write()).await;
        assert!(matches!(refused, Err(Error::NotLeader(_))), "{refused:?}");
        assert!(!sent.load(Ordering::SeqCst), "a standby drained a node");
        Leadership::always()
            .fence("Slurm node drain", write())
            .await
            .unwrap();
        assert!(sent.load(Ordering::SeqCst));
    }
}
