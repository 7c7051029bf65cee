//! Kubernetes pod logs, the other half of a shared-pool replay: what each pod asked for, when
//! it was created and how long it ran once placed.
//!
//! Two formats, both CSV with a header line naming the columns (any order):
//! * Alibaba's GPU-cluster pod list (`openb_pod_list_*.csv`: `name, cpu_milli, memory_mib,
//!   num_gpu, gpu_milli, qos, creation_time, scheduled_time, deletion_time, …`, seconds from the
//!   log's start). A pod runs from `scheduled_time` to `deletion_time`; one never scheduled
//!   never ran and is skipped (counted); one with no deletion time still ran at the log's end
//!   and is replayed as running until then. A GPU-sharing pod (`num_gpu` 1, `gpu_milli` < 1000)
//!   asks for that share of a GPU. Priority follows the QoS class: `LS` and `Guaranteed` 2,
//!   `Burstable` 1, `BE` 0.
//! * A generic CSV a site exports from its own cluster: `name, submit_s, run_s, cpus,
//!   memory_mib, gpus` and optional `priority` (higher first); CPUs and GPUs may be fractional.
//!
//! A line that does not parse stops the replay with file, line and column, unless
//! `--skip-bad-lines` counts it, as for job logs.

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead;
use std::path::Path;

use super::trace::{NodeShape, error, numbered_lines};
use crate::error::{Error, Result};

/// One pod as the log recorded it.
#[derive(Clone, Debug, PartialEq)]
pub struct PodRequest {
    pub name: String,
    /// Seconds from the log's start.
    pub submit: i64,
    /// Seconds it runs once placed.
    pub run: u64,
    pub cpus: f64,
    pub memory_mib: u64,
    pub gpus: f64,
    /// Higher is scheduled first.
    pub priority: i32,
}

/// A pod log, read: its pods in creation order and what was left out.
#[derive(Clone, Debug, Default)]
pub struct ParsedPods {
    pub pods: Vec<PodRequest>,
    /// Pods that are not replayable (never ran), by reason.
    pub skipped: BTreeMap<&'static str, u64>,
    /// Pods replayed as running to the log's end (no deletion time).
    pub ran_to_end: u64,
    pub bad_lines: u64,
    pub first_bad_line: Option<String>,
}

impl ParsedPods {
    fn bad(&mut self, skip_bad: bool, e: Error) -> Result<()> {
        if !skip_bad {
            return Err(e);
        }
        self.bad_lines += 1;
        self.first_bad_line.get_or_insert_with(|| e.to_string());
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PodFormat {
    Openb,
    Csv,
}

impl std::str::FromStr for PodFormat {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "openb" => Ok(Self::Openb),
            "csv" => Ok(Self::Csv),
            _ => Err(format!("{s:?}: openb or csv")),
        }
    }
}

/// Which format a header names: the openb columns, else the generic ones.
pub fn detect(path: &Path) -> Result<PodFormat> {
    let mut reader = super::trace::open(path)?;
    let mut header = String::new();
    reader.read_line(&mut header).map_err(|source| Error::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let cols: Vec<&str> = header.trim().split(',').map(str::trim).collect();
    if cols.contains(&"cpu_milli") && cols.contains(&"creation_time") {
        Ok(PodFormat::Openb)
    } else if cols.contains(&"submit_s") && cols.contains(&"run_s") {
        Ok(PodFormat::Csv)
    } else {
        Err(error(
            path,
            1,
            "",
            "the first line names neither openb's columns (cpu_milli, creation_time, …) nor the generic ones (name, submit_s, run_s, cpus, memory_mib, gpus): give --pod-format",
        ))
    }
}

/// Reads a pod log; pods come back in creation order.
pub fn read(path: &Path, format: PodFormat, skip_bad: bool) -> Result<ParsedPods> {
    let reader = super::trace::open(path)?;
    let mut p = ParsedPods::default();
    let mut columns: HashMap<String, usize> = HashMap::new();
    // openb: pods still running have no deletion time; they run to the log's last moment.
    let mut open_ended: Vec<PodRequest> = Vec::new();
    let mut last_time = 0i64;
    let (required, kind): (&[&str], &str) = match format {
        PodFormat::Openb => (
            &[
                "name",
                "cpu_milli",
                "memory_mib",
                "num_gpu",
                "gpu_milli",
                "creation_time",
                "scheduled_time",
                "deletion_time",
            ],
            "openb",
        ),
        PodFormat::Csv => (
            &["name", "submit_s", "run_s", "cpus", "memory_mib", "gpus"],
            "generic",
        ),
    };
    for line in numbered_lines(reader, path) {
        let (n, line) = line?;
        let cells: Vec<&str> = line.split(',').map(str::trim).collect();
        if columns.is_empty() {
            columns = cells
                .iter()
                .enumerate()
                .map(|(i, c)| (c.to_string(), i))
                .collect();
            if let Some(missing) = required.iter().find(|r| !columns.contains_key(**r)) {
                return Err(error(
                    path,
                    n,
                    "",
                    format!("the header has no {missing} column ({kind} pod log)"),
                ));
            }
            continue;
        }
        let row = Row {
            cells: &cells,
            columns: &columns,
            path,
            n,
        };
        let parsed = match format {
            PodFormat::Openb => row.openb(),
            PodFormat::Csv => row.generic().map(|p| p.map(|p| (p, None))),
        };
        match parsed {
            Ok(Ok((pod, end))) => {
                last_time = last_time.max(pod.submit).max(end.unwrap_or(0));
                if end.is_none() && format == PodFormat::Openb {
                    open_ended.push(pod);
                } else {
                    p.pods.push(pod);
                }
            }
            Ok(Err(why)) => *p.skipped.entry(why).or_default() += 1,
            Err(e) => p.bad(skip_bad, e)?,
        }
    }
    if columns.is_empty() {
        return Err(error(path, 0, "", "the pod log is empty"));
    }
    // Running at the log's end: replayed as running until then.
    p.ran_to_end = open_ended.len() as u64;
    for mut pod in open_ended {
        pod.run = (last_time - pod.submit).max(1) as u64;
        p.pods.push(pod);
    }
    p.pods.sort_by_key(|pod| pod.submit);
    Ok(p)
}

struct Row<'a> {
    cells: &'a [&'a str],
    columns: &'a HashMap<String, usize>,
    path: &'a Path,
    n: usize,
}

impl Row<'_> {
    fn get(&self, name: &str) -> Option<&str> {
        self.columns
            .get(name)
            .and_then(|i| self.cells.get(*i))
            .copied()
            .filter(|c| !c.is_empty())
    }

    fn bad(&self, field: &'static str, message: String) -> Error {
        error(
            self.path,
            self.n,
            field,
            format!("{message} (--skip-bad-lines passes over malformed lines and counts them)"),
        )
    }

    fn number(&self, field: &'static str) -> Result<f64> {
        let s = self
            .get(field)
            .ok_or_else(|| self.bad(field, "empty".into()))?;
        s.parse::<f64>()
            .ok()
            .filter(|v| v.is_finite() && *v >= 0.0)
            .ok_or_else(|| self.bad(field, format!("{s:?} is not a number ≥ 0")))
    }

    fn optional(&self, field: &'static str) -> Result<Option<f64>> {
        match self.get(field) {
            None => Ok(None),
            Some(_) => self.number(field).map(Some),
        }
    }

    fn name(&self) -> String {
        self.get("name")
            .map_or_else(|| format!("line-{}", self.n), String::from)
    }

    /// The pod and, when the log says it ended, its end; or why it is not replayed.
    #[allow(clippy::type_complexity)]
    fn openb(&self) -> Result<std::result::Result<(PodRequest, Option<i64>), &'static str>> {
        let created = self.number("creation_time")? as i64;
        let Some(scheduled) = self.optional("scheduled_time")? else {
            return Ok(Err("never scheduled (no scheduled_time)"));
        };
        let end = self.optional("deletion_time")?.map(|d| d as i64);
        let num_gpu = self.number("num_gpu")?;
        let gpu_milli = self.number("gpu_milli")?;
        let gpus = if num_gpu == 1.0 && gpu_milli > 0.0 && gpu_milli < 1000.0 {
            gpu_milli / 1000.0
        } else {
            num_gpu
        };
        let priority = match self.get("qos") {
            Some("LS" | "Guaranteed") => 2,
            Some("Burstable") => 1,
            _ => 0,
        };
        let run = end.map_or(0, |e| (e - scheduled as i64).max(0) as u64);
        if end.is_some() && run == 0 {
            return Ok(Err("deleted as soon as it was scheduled"));
        }
        Ok(Ok((
            PodRequest {
                name: self.name(),
                submit: created,
                run,
                cpus: self.number("cpu_milli")? / 1000.0,
                memory_mib: self.number("memory_mib")? as u64,
                gpus,
                priority,
            },
            end,
        )))
    }

    fn generic(&self) -> Result<std::result::Result<PodRequest, &'static str>> {
        let run = self.number("run_s")? as u64;
        if run == 0 {
            return Ok(Err("never ran (run_s 0)"));
        }
        Ok(Ok(PodRequest {
            name: self.name(),
            submit: self.number("submit_s")? as i64,
            run,
            cpus: self.number("cpus")?,
            memory_mib: self.number("memory_mib")? as u64,
            gpus: self.number("gpus")?,
            priority: self.optional("priority")?.map_or(0, |p| p as i32),
        }))
    }
}

/// How the pod log is laid onto the job log's replay: pod-log time `from` meets the replay's
/// start, and each pod is replayed `scale` times (a fraction thins the log: every pod whose
/// running count crosses a whole number is kept, so the choice is the same every run).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Alignment {
    pub from: i64,
    pub scale: f64,
}

impl Default for Alignment {
    fn default() -> Self {
        Self {
            from: 0,
            scale: 1.0,
        }
    }
}

/// The pods to replay from `start` (unix seconds) to `until`, aligned; those larger than a
/// node of `shape`, by name.
pub fn select(
    pods: &[PodRequest],
    align: Alignment,
    start: i64,
    until: i64,
    shape: &NodeShape,
) -> (Vec<PodRequest>, Vec<String>) {
    let (mut out, mut too_big) = (Vec::new(), Vec::new());
    let mut carried = 0.0;
    for p in pods.iter().filter(|p| p.submit >= align.from) {
        let submit = start + (p.submit - align.from);
        if submit >= until {
            break;
        }
        let fits = p.cpus <= f64::from(shape.cpus)
            && (shape.memory_mib == 0 || p.memory_mib <= shape.memory_mib)
            && p.gpus <= f64::from(shape.gpus);
        if !fits {
            too_big.push(p.name.clone());
            continue;
        }
        carried += align.scale;
        let copies = carried.floor();
        carried -= copies;
        for k in 0..copies as u64 {
            let mut q = p.clone();
            q.submit = submit;
            if k > 0 {
                q.name = format!("{}~{k}", p.name);
            }
            out.push(q);
        }
    }
    (out, too_big)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str, format: PodFormat, skip_bad: bool) -> Result<ParsedPods> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("pods.csv");
        std::fs::write(&path, text).unwrap();
        read(&path, format, skip_bad)
    }

    const OPENB: &str = "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n\
        p0,12000,16384,1,1000,,LS,Running,0,500,10\n\
        p1,6000,12288,1,460,,BE,Running,100,,120\n\
        p2,4000,1024,0,0,,Burstable,Pending,200,,\n\
        p3,64000,2048,8,1000,,Guaranteed,Succeeded,300,900,300\n";

    #[test]
    fn openb_pods_run_from_their_scheduling_to_their_deletion() {
        let p = parse(OPENB, PodFormat::Openb, false).unwrap();
        let names: Vec<&str> = p.pods.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["p0", "p1", "p3"]);
        let p0 = &p.pods[0];
        assert_eq!(
            (p0.submit, p0.run, p0.cpus, p0.memory_mib),
            (0, 490, 12.0, 16384)
        );
        assert_eq!((p0.gpus, p0.priority), (1.0, 2));
        // A GPU share; still running at the log's end (900): replayed until then.
        let p1 = &p.pods[1];
        assert_eq!((p1.gpus, p1.priority, p1.run), (0.46, 0, 800));
        assert_eq!(p.ran_to_end, 1);
        assert_eq!(p.pods[2].gpus, 8.0);
        assert_eq!(
            p.skipped.get("never scheduled (no scheduled_time)"),
            Some(&1)
        );
    }

    #[test]
    fn generic_pods_take_their_columns_in_any_order() {
        let p = parse(
            "gpus,run_s,name,submit_s,cpus,memory_mib,priority\n0.5,60,web-1,5,0.25,512,3\n0,0,dead,9,1,1,0\n",
            PodFormat::Csv,
            false,
        )
        .unwrap();
        assert_eq!(
            p.pods,
            [PodRequest {
                name: "web-1".into(),
                submit: 5,
                run: 60,
                cpus: 0.25,
                memory_mib: 512,
                gpus: 0.5,
                priority: 3
            }]
        );
        assert_eq!(p.skipped.get("never ran (run_s 0)"), Some(&1));
    }

    #[test]
    fn a_bad_pod_line_names_the_file_line_and_column() {
        let text = "name,submit_s,run_s,cpus,memory_mib,gpus\nok,0,10,1,1,0\nbad,x,10,1,1,0\n";
        let e = parse(text, PodFormat::Csv, false).unwrap_err();
        let s = e.to_string();
        assert!(
            s.contains("pods.csv:3: submit_s") && s.contains("--skip-bad-lines"),
            "{s}"
        );
        let p = parse(text, PodFormat::Csv, true).unwrap();
        assert_eq!((p.pods.len(), p.bad_lines), (1, 1));
        let e = parse("name,cpus\n", PodFormat::Csv, false).unwrap_err();
        assert!(e.to_string().contains("no submit_s column"), "{e}");
    }

    #[test]
    fn alignment_shifts_thins_and_reports_pods_larger_than_a_node() {
        let pod = |name: &str, submit, cpus| PodRequest {
            name: name.into(),
            submit,
            run: 10,
            cpus,
            memory_mib: 1,
            gpus: 0.0,
            priority: 0,
        };
        let pods = [
            pod("a", 0, 1.0),
            pod("b", 100, 1.0),
            pod("c", 200, 64.0),
            pod("d", 300, 2.0),
            pod("e", 400, 2.0),
        ];
        let shape = NodeShape {
            cpus: 32,
            memory_mib: 0,
            gpus: 0,
        };
        let align = Alignment {
            from: 100,
            scale: 1.0,
        };
        let (kept, too_big) = select(&pods, align, 1000, 1250, &shape);
        let at: Vec<(&str, i64)> = kept.iter().map(|p| (p.name.as_str(), p.submit)).collect();
        assert_eq!(at, [("b", 1000), ("d", 1200)]);
        assert_eq!(too_big, ["c"]);
        // Doubled, then halved.
        let (kept, _) = select(
            &pods,
            Alignment {
                from: 0,
                scale: 2.0,
            },
            0,
            1000,
            &shape,
        );
        assert_eq!(kept.len(), 8);
        let (kept, _) = select(
            &pods,
            Alignment {
                from: 0,
                scale: 0.5,
            },
            0,
            1000,
            &shape,
        );
        assert_eq!(kept.len(), 2);
    }
}
