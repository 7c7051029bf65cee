//! A scale target that lives in memory: what the controller sees of a NodeSet when the
//! cluster is simulated (`slurmscale simulate` and `slurmscale demo`). It keeps the replicas
//! the simulation has, remembers the last scale the controller asked for until the
//! simulation takes it, and the reason and message of the controller's last decision.
//! Pods, Events and colocation have nothing behind them here.

use std::collections::BTreeMap;
use std::sync::Mutex;

use serde_json::Value;

use crate::actuator::{Kubernetes, Target};
use crate::colocation::PendingPod;
use crate::crd::{NodeSetAutoscaler, ScaleTargetRef};
use crate::error::Result;

#[derive(Default)]
pub struct SimTarget {
    selector: Option<String>,
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    replicas: u64,
    version: u64,
    asked: Option<u64>,
    /// `status.lastDecision`: reason and message.
    decision: (String, String),
}

impl SimTarget {
    /// A target whose scale subresource reports `selector` (as a NodeSet's does).
    pub fn new(selector: Option<String>) -> Self {
        Self {
            selector,
            state: Mutex::default(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The replicas the simulation has now.
    pub fn set_replicas(&self, replicas: u64) {
        self.state().replicas = replicas;
    }

    /// The scale the controller asked for since the last call, if any.
    pub fn take_asked(&self) -> Option<u64> {
        self.state().asked.take()
    }

    /// Reason and message of the last decision the controller reported.
    pub fn decision(&self) -> (String, String) {
        self.state().decision.clone()
    }
}

impl Kubernetes for SimTarget {
    async fn read(&self, _: &str, _: &ScaleTargetRef) -> Result<Target> {
        let s = self.state();
        Ok(Target {
            replicas: s.replicas,
            resource_version: Some(s.version.to_string()),
            scaling_mode: None,
            partition_annotation: None,
            selector: self.selector.clone(),
        })
    }

    async fn scale(
        &self,
        _: &str,
        _: &ScaleTargetRef,
        replicas: u64,
        _: Option<&str>,
    ) -> Result<()> {
        let mut s = self.state();
        s.replicas = replicas;
        s.version += 1;
        s.asked = Some(replicas);
        Ok(())
    }

    async fn mark_pods_to_go(&self, _: &str, _: Option<&str>, _: &[String]) -> Result<usize> {
        Ok(0)
    }

    async fn pod_nodes(&self, _: &str, _: &str) -> Result<BTreeMap<String, bool>> {
        Ok(BTreeMap::new())
    }

    async fn unschedulable_pods(&self, _: &BTreeMap<String, String>) -> Result<Vec<PendingPod>> {
        Ok(Vec::new())
    }

    async fn status(&self, _: &NodeSetAutoscaler, status: Value) -> Result<()> {
        let d = &status["lastDecision"];
        if let (Some(reason), Some(message)) = (d["reason"].as_str(), d["message"].as_str()) {
            self.state().decision = (reason.to_string(), message.to_string());
        }
        Ok(())
    }

    /// Events have no reader here: the decision is kept instead.
    async fn event(&self, _: &NodeSetAutoscaler, _: bool, _: &str, _: String) {}
}
