//! A real Prometheus (Debian's) on 127.0.0.1 for the tests that need one: the dashboards'
//! and alerts' queries (tests/observability.rs), and KEDA's Prometheus trigger
//! (tests/keda.rs). It loads the chart's alert rules, so their expressions are evaluated too.

use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

/// The alert rules the chart ships.
pub const ALERTS: &str = "charts/slurmscale/files/alerts.yaml";

/// Prometheus on 127.0.0.1, storing in a temp dir; killed (by its pid) when dropped.
pub struct Prometheus {
    child: Child,
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Prometheus {
    pub fn start(targets: &[(&str, u16)]) -> Self {
        let scrape: Vec<Value> = targets
            .iter()
            .map(|(job, port)| {
                json!({"job_name": job, "honor_labels": true, "scrape_interval": "1s",
                       "static_configs": [{"targets": [format!("127.0.0.1:{port}")]}]})
            })
            .collect();
        Self::start_with(scrape)
    }

    /// With these scrape configs as they are.
    pub fn start_with(scrape: Vec<Value>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let config = json!({
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [super::repo_root().join(ALERTS)],
            "scrape_configs": scrape,
        });
        let config_file = dir.path().join("prometheus.yml");
        std::fs::write(&config_file, serde_json::to_vec(&config).unwrap()).unwrap();
        let port = super::free_port();
        let child = Command::new("prometheus")
            .arg(format!("--config.file={}", config_file.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.path().join("log")).unwrap())
            .spawn()
            .expect("prometheus (Debian's prometheus package; tests/harness/deps.sh installs it)");
        Self {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        }
    }

    pub async fn api(&self, path: &str, query: &[(&str, &str)]) -> Option<Value> {
        let url = reqwest::Url::parse_with_params(&format!("{}{path}", self.url), query).ok()?;
        let resp = reqwest::get(url).await.ok()?;
        resp.json().await.ok()
    }

    /// The result of an instant query; an error names the query.
    pub async fn query(&self, expr: &str) -> Result<Vec<Value>, String> {
        let v = self
            .api("/api/v1/query", &[("query", expr)])
            .await
            .ok_or("Prometheus did not answer")?;
        if v["status"] != "success" {
            return Err(format!("{}: {}", v["errorType"], v["error"]));
        }
        Ok(v["data"]["result"].as_array().cloned().unwrap_or_default())
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self._dir.path().join("log")).unwrap_or_default()
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
