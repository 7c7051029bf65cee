//! Draining and resuming Slurm nodes — the only Slurm writes slurmscale makes. REST
//! `POST node/{name}` on v0.0.40+; Slurm 22.05 (v0.0.38) has no node update endpoint, so
//! there it runs `scontrol update`, which needs Slurm's client and munge where the autoscaler
//! runs. Drains carry the reason prefix `slurmscale:`; callers only ever resume those.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use slurmscale_exporter::config::ClusterConfig;
use slurmscale_exporter::slurm::{ApiVersion, ClientOptions, SlurmClient};

use crate::colocation::DRAIN_PREFIX;
use crate::error::{Error, Result};

/// How to run `scontrol` for clusters whose REST API cannot update nodes.
#[derive(Clone, Debug, Default)]
pub struct Scontrol {
    /// The `scontrol` binary (default: `scontrol` on PATH).
    pub bin: Option<PathBuf>,
    /// `SLURM_CONF` for it, if not the default.
    pub conf: Option<PathBuf>,
}

pub struct SlurmNodeWriter {
    client: Arc<SlurmClient>,
    scontrol: Scontrol,
}

impl SlurmNodeWriter {
    pub fn new(cluster: &ClusterConfig, scontrol: Scontrol) -> Result<Self> {
        let mut opts = ClientOptions::new(&cluster.url, &cluster.user);
        opts.ca_file = cluster.ca_file.clone();
        opts.timeout = cluster.timeout;
        let client = SlurmClient::new(&opts, cluster.token_source()?)?;
        Ok(Self {
            client: Arc::new(client),
            scontrol,
        })
    }

    /// DRAIN with `slurmscale: <why>`.
    pub async fn drain(&self, version: ApiVersion, node: &str, why: &str) -> Result<()> {
        let reason = format!("{DRAIN_PREFIX} {why}");
        if version == ApiVersion::V0038 {
            return self
                .scontrol(&[
                    &format!("nodename={node}"),
                    "state=drain",
                    &format!("reason={reason}"),
                ])
                .await;
        }
        let body = json!({"state": ["DRAIN"], "reason": reason});
        Ok(self
            .client
            .post_json(version, &format!("node/{node}"), &body)
            .await?)
    }

    pub async fn resume(&self, version: ApiVersion, node: &str) -> Result<()> {
        if version == ApiVersion::V0038 {
            return self
                .scontrol(&[&format!("nodename={node}"), "state=resume"])
                .await;
        }
        Ok(self
            .client
            .post_json(
                version,
                &format!("node/{node}"),
                &json!({"state": ["RESUME"]}),
            )
            .await?)
    }

    async fn scontrol(&self, args: &[&str]) -> Result<()> {
        let bin = self
            .scontrol
            .bin
            .clone()
            .unwrap_or_else(|| "scontrol".into());
        let mut cmd = tokio::process::Command::new(&bin);
        cmd.arg("update").args(args).env_remove("SLURM_JWT");
        if let Some(conf) = &self.scontrol.conf {
            cmd.env("SLURM_CONF", conf);
        }
        let out = cmd.output().await.map_err(|e| {
            Error::Target(
                args[0].to_string(),
                format!("cannot run {}: {e}", bin.display()),
            )
        })?;
        if out.status.success() {
            Ok(())
        } else {
            Err(Error::Target(
                args[0].to_string(),
                format!(
                    "scontrol update failed: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                ),
            ))
        }
    }
}
