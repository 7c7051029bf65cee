//! Job traces: what a replay needs of each job, read from a log in one of the
//! [`formats`](super::formats) or made by a generator, then fitted to the node shape of the
//! partition being simulated.
//!
//! Parsing and fitting are separate steps because a trace records what jobs asked for on
//! *its* machine (processors, nodes, memory, GPUs) while the replay asks "what would they
//! need on nodes of this shape?". A job that cannot fit the shape or the partition at all is
//! counted and reported by id, never silently dropped.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::error::{Error, Result};

/// The nodes a NodeSet adds: every simulated node has this shape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeShape {
    pub cpus: u32,
    /// MiB; 0 = memory is not simulated (every job's memory fits).
    pub memory_mib: u64,
    pub gpus: u32,
}

/// One job as the trace recorded it, before it meets a node shape.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Request {
    /// The trace's own job id (`123`, `123_4` for an array task), for reports.
    pub id: String,
    /// Unix seconds.
    pub submit: i64,
    /// Seconds it ran.
    pub run: u64,
    /// Its time limit in seconds, when the trace has one.
    pub limit: Option<u64>,
    /// CPUs in all.
    pub cpus: u64,
    /// Nodes, when the trace says.
    pub nodes: Option<u64>,
    pub memory_mib_per_node: Option<u64>,
    pub memory_mib_per_cpu: Option<u64>,
    /// GPUs in all.
    pub gpus: u64,
    /// What the traced machine made it wait, for comparison.
    pub recorded_wait: Option<u64>,
    /// The partition it ran in (`gpu`; `a,b` for a job that asked for several), when the
    /// trace says. One name is shared by every job of the partition.
    pub partition: Option<Arc<str>>,
}

/// One job as the simulated partition runs it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceJob {
    pub id: String,
    pub submit: i64,
    pub run: u64,
    /// What backfill plans with: the time limit, never below the run time (a job the trace
    /// shows running past its limit did run that long).
    pub limit: u64,
    pub nodes: u32,
    pub cpus_per_node: u32,
    /// 0 when memory is not simulated.
    pub memory_mib_per_node: u64,
    pub gpus_per_node: u32,
    pub recorded_wait: Option<u64>,
}

impl TraceJob {
    /// Takes its nodes whole (every CPU of each).
    pub fn whole_nodes(&self, shape: &NodeShape) -> bool {
        self.cpus_per_node >= shape.cpus
    }
}

/// Why a job cannot run on the simulated partition.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Unfit {
    /// It needs more nodes than the partition may have.
    TooManyNodes,
    /// One node's share of it is more memory than a node has.
    Memory,
    /// It asks for GPUs and the nodes have none.
    Gpus,
}

impl Unfit {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TooManyNodes => "more nodes than --max-nodes",
            Self::Memory => "more memory per node than --node-memory",
            Self::Gpus => "GPUs, and --node-gpus is 0",
        }
    }
}

fn ceil_div(a: u64, b: u64) -> u64 {
    a.div_ceil(b.max(1))
}

impl Request {
    /// The job on nodes of `shape`, in a partition of at most `max_nodes`: as many nodes as
    /// the trace says, or more when its CPUs or GPUs need more of these nodes; an even share
    /// of CPUs, GPUs and memory on each.
    pub fn fit(&self, shape: &NodeShape, max_nodes: u32) -> Result<TraceJob, Unfit> {
        let cpus = self.cpus.max(1);
        if self.gpus > 0 && shape.gpus == 0 {
            return Err(Unfit::Gpus);
        }
        let nodes = self
            .nodes
            .unwrap_or(1)
            .max(ceil_div(cpus, shape.cpus.into()))
            .max(if self.gpus > 0 {
                ceil_div(self.gpus, shape.gpus.into())
            } else {
                1
            });
        if nodes > u64::from(max_nodes) {
            return Err(Unfit::TooManyNodes);
        }
        let cpus_per_node = ceil_div(cpus, nodes) as u32;
        let memory = if shape.memory_mib == 0 {
            0
        } else {
            match (self.memory_mib_per_node, self.memory_mib_per_cpu) {
                (Some(m), _) if m > 0 => m,
                (_, Some(m)) if m > 0 => m.saturating_mul(cpus_per_node.into()),
                _ => 0,
            }
        };
        if memory > shape.memory_mib {
            return Err(Unfit::Memory);
        }
        Ok(TraceJob {
            id: self.id.clone(),
            submit: self.submit,
            run: self.run,
            limit: self.limit.unwrap_or(self.run).max(self.run).max(1),
            nodes: nodes as u32,
            cpus_per_node,
            memory_mib_per_node: memory,
            gpus_per_node: ceil_div(self.gpus, nodes) as u32,
            recorded_wait: self.recorded_wait,
        })
    }
}

/// What a trace's header says about its machine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Hints {
    pub max_nodes: Option<u32>,
    pub node_cpus: Option<u32>,
}

/// A parsed trace: its jobs in submit order, and what was left out and why.
#[derive(Clone, Debug, Default)]
pub struct Parsed {
    pub requests: Vec<Request>,
    pub hints: Hints,
    /// Records that are not replayable jobs (never ran, no size), by reason.
    pub skipped: BTreeMap<&'static str, u64>,
    /// Malformed lines passed over with `--skip-bad-lines`, and the first of them.
    pub bad_lines: u64,
    pub first_bad_line: Option<String>,
}

/// Why a job of another partition is not replayed.
pub const OTHER_PARTITION: &str = "ran in another partition (--partition)";
/// Why a job is not replayed when partitions are chosen and the trace has none for it.
pub const NO_PARTITION: &str = "no partition recorded (--partition)";

impl Parsed {
    pub fn skip(&mut self, why: &'static str) {
        *self.skipped.entry(why).or_default() += 1;
    }

    /// The partitions the jobs ran in, busiest first, with their job counts. A trace of one
    /// partition (or of none recorded) gives at most one entry.
    pub fn partitions(&self) -> Vec<(Arc<str>, u64)> {
        let mut counts = BTreeMap::<Arc<str>, u64>::new();
        for p in self.requests.iter().filter_map(|r| r.partition.as_ref()) {
            *counts.entry(p.clone()).or_default() += 1;
        }
        let mut v: Vec<_> = counts.into_iter().collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        v
    }

    /// Keeps the jobs that ran in one of `names` (a job that asked for several partitions is
    /// kept when any of them is named); the rest are counted as skipped. A NodeSet serves one
    /// partition, so a site's whole accounting replayed as one partition says little.
    pub fn keep_partitions(&mut self, names: &[String]) {
        let before = self.requests.len();
        let mut unknown = 0;
        self.requests.retain(|r| match &r.partition {
            Some(p) => p.split(',').any(|p| names.iter().any(|n| n == p)),
            None => {
                unknown += 1;
                false
            }
        });
        let other = (before - self.requests.len() - unknown) as u64;
        if unknown > 0 {
            *self.skipped.entry(NO_PARTITION).or_default() += unknown as u64;
        }
        if other > 0 {
            *self.skipped.entry(OTHER_PARTITION).or_default() += other;
        }
    }

    /// A malformed line: an error that says how to pass over such lines, or counted with
    /// `skip_bad`.
    pub fn bad(&mut self, skip_bad: bool, e: Error) -> Result<()> {
        if !skip_bad {
            return Err(match e {
                Error::Trace {
                    file,
                    line,
                    field,
                    message,
                } => Error::Trace {
                    file,
                    line,
                    field,
                    message: format!(
                        "{message} (--skip-bad-lines passes over malformed lines and counts them)"
                    ),
                },
                e => e,
            });
        }
        self.bad_lines += 1;
        self.first_bad_line.get_or_insert_with(|| e.to_string());
        Ok(())
    }
}

/// Which part of a trace to replay.
#[derive(Clone, Copy, Debug, Default)]
pub struct Slice {
    /// Jobs submitted at or after this (unix seconds).
    pub from: Option<i64>,
    /// Jobs submitted before this.
    pub until: Option<i64>,
    /// At most this many jobs (the first ones of the slice).
    pub limit: Option<usize>,
}

/// Where a slice starts: an absolute date (`2012-03-08`, `2012-03-08T06:00:00`, read as UTC)
/// or an offset from the first submit (`30d`, `12h`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum When {
    At(i64),
    After(u64),
}

impl std::str::FromStr for When {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        if let Ok(d) = chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d") {
            return Ok(Self::At(
                d.and_time(chrono::NaiveTime::MIN).and_utc().timestamp(),
            ));
        }
        if let Ok(t) = chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S") {
            return Ok(Self::At(t.and_utc().timestamp()));
        }
        slurmscale_exporter::config::parse_duration(s)
            .map(|d| Self::After(d.as_secs()))
            .map_err(|_| {
                format!("{s:?} is neither a date (2012-03-08[T06:00:00]) nor an offset (30d, 12h)")
            })
    }
}

impl When {
    pub fn resolve(self, first_submit: i64) -> i64 {
        match self {
            Self::At(t) => t,
            Self::After(s) => first_submit.saturating_add(s as i64),
        }
    }
}

/// Opens a trace, gzipped or not (by its magic bytes, whatever its name).
pub fn open(path: &Path) -> Result<Box<dyn BufRead>> {
    let io = |source| Error::Io {
        path: path.to_path_buf(),
        source,
    };
    let mut f = File::open(path).map_err(io)?;
    let mut magic = [0u8; 2];
    let n = f.read(&mut magic).map_err(io)?;
    let f = File::open(path).map_err(io)?;
    Ok(if n == 2 && magic == [0x1f, 0x8b] {
        Box::new(BufReader::with_capacity(
            1 << 16,
            flate2::read::MultiGzDecoder::new(f),
        ))
    } else {
        Box::new(BufReader::with_capacity(1 << 16, f))
    })
}

/// The jobs to replay: the slice of `requests`, fitted to `shape`; the unfit by reason.
pub fn select(
    requests: &[Request],
    slice: Slice,
    shape: &NodeShape,
    max_nodes: u32,
) -> (Vec<TraceJob>, BTreeMap<Unfit, Vec<String>>) {
    select_by(requests, slice, |r| r.fit(shape, max_nodes))
}

/// [`select`] with each job fitted by `fit` (over several NodeSets, to the shape of the
/// NodeSet its partition names).
pub fn select_by(
    requests: &[Request],
    slice: Slice,
    fit: impl Fn(&Request) -> Result<TraceJob, Unfit>,
) -> (Vec<TraceJob>, BTreeMap<Unfit, Vec<String>>) {
    let (mut jobs, mut unfit) = (Vec::new(), BTreeMap::<Unfit, Vec<String>>::new());
    for r in requests
        .iter()
        .filter(|r| slice.from.is_none_or(|f| r.submit >= f))
        .filter(|r| slice.until.is_none_or(|u| r.submit < u))
    {
        if slice.limit.is_some_and(|l| jobs.len() >= l) {
            break;
        }
        match fit(r) {
            Ok(j) => jobs.push(j),
            Err(why) => unfit.entry(why).or_default().push(r.id.clone()),
        }
    }
    (jobs, unfit)
}

/// A log's lines that hold something, numbered from 1 as an editor counts them and without
/// their line ending; a line that cannot be read is an error at its number.
pub fn numbered_lines<'a>(
    reader: impl BufRead + 'a,
    path: &'a Path,
) -> impl Iterator<Item = Result<(usize, String)>> + 'a {
    reader.lines().enumerate().filter_map(move |(i, line)| {
        let n = i + 1;
        match line {
            Err(e) => Some(Err(error(path, n, "", format!("unreadable: {e}")))),
            Ok(line) if line.trim().is_empty() => None,
            Ok(mut line) => {
                line.truncate(line.trim_end_matches(['\r', '\n']).len());
                Some(Ok((n, line)))
            }
        }
    })
}

/// A trace file's error at a line and field.
pub fn error(file: &Path, line: usize, field: &'static str, message: impl Into<String>) -> Error {
    Error::Trace {
        file: PathBuf::from(file),
        line,
        field,
        message: message.into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHAPE: NodeShape = NodeShape {
        cpus: 16,
        memory_mib: 64_000,
        gpus: 4,
    };

    fn req(cpus: u64, nodes: Option<u64>, gpus: u64) -> Request {
        Request {
            id: "1".into(),
            run: 100,
            cpus,
            nodes,
            gpus,
            ..Default::default()
        }
    }

    #[test]
    fn processors_become_nodes_of_the_shape_with_an_even_share() {
        let j = req(1, None, 0).fit(&SHAPE, 10).unwrap();
        assert_eq!((j.nodes, j.cpus_per_node), (1, 1));
        let j = req(40, None, 0).fit(&SHAPE, 10).unwrap();
        assert_eq!((j.nodes, j.cpus_per_node), (3, 14));
        let j = req(32, None, 0).fit(&SHAPE, 10).unwrap();
        assert!(j.whole_nodes(&SHAPE));
        // The trace's node count stands when the shape does not need more.
        let j = req(4, Some(2), 0).fit(&SHAPE, 10).unwrap();
        assert_eq!((j.nodes, j.cpus_per_node), (2, 2));
        // GPUs decide the node count too.
        let j = req(2, None, 10).fit(&SHAPE, 10).unwrap();
        assert_eq!((j.nodes, j.gpus_per_node), (3, 4));
    }

    #[test]
    fn jobs_that_cannot_fit_say_why() {
        assert_eq!(req(200, None, 0).fit(&SHAPE, 10), Err(Unfit::TooManyNodes));
        let no_gpus = NodeShape { gpus: 0, ..SHAPE };
        assert_eq!(req(1, None, 1).fit(&no_gpus, 10), Err(Unfit::Gpus));
        let big = Request {
            memory_mib_per_cpu: Some(8_000),
            ..req(16, None, 0)
        };
        assert_eq!(big.fit(&SHAPE, 10), Err(Unfit::Memory));
        // Without simulated memory, memory never stops a job.
        let no_mem = NodeShape {
            memory_mib: 0,
            ..SHAPE
        };
        assert_eq!(big.fit(&no_mem, 10).unwrap().memory_mib_per_node, 0);
    }

    #[test]
    fn the_limit_is_never_below_the_run_time() {
        let r = Request {
            limit: Some(50),
            ..req(1, None, 0)
        };
        assert_eq!(r.fit(&SHAPE, 1).unwrap().limit, 100);
        assert_eq!(req(1, None, 0).fit(&SHAPE, 1).unwrap().limit, 100);
    }

    #[test]
    fn slices_by_date_offset_and_count() {
        let reqs: Vec<Request> = (0..10)
            .map(|i| Request {
                id: i.to_string(),
                submit: 1_000 + i * 100,
                ..req(1, None, 0)
            })
            .collect();
        let from = "200s".parse::<When>().unwrap().resolve(1_000);
        let slice = Slice {
            from: Some(from),
            until: Some(1_700),
            limit: Some(3),
        };
        let (jobs, _) = select(&reqs, slice, &SHAPE, 1);
        let ids: Vec<&str> = jobs.iter().map(|j| j.id.as_str()).collect();
        assert_eq!(ids, ["2", "3", "4"]);
        assert_eq!("2012-03-08".parse::<When>(), Ok(When::At(1_331_164_800)));
        assert!("yesterday".parse::<When>().is_err());
    }

    #[test]
    fn partitions_are_counted_and_chosen() {
        let in_ = |p: Option<&str>| Request {
            partition: p.map(Arc::from),
            ..req(1, None, 0)
        };
        let mut parsed = Parsed {
            requests: vec![
                in_(Some("cpu")),
                in_(Some("gpu")),
                in_(Some("cpu")),
                in_(Some("gpu,cpu")),
                in_(None),
            ],
            ..Parsed::default()
        };
        let counts: Vec<(String, u64)> = parsed
            .partitions()
            .into_iter()
            .map(|(p, n)| (p.to_string(), n))
            .collect();
        assert_eq!(
            counts,
            [("cpu".into(), 2), ("gpu".into(), 1), ("gpu,cpu".into(), 1)]
        );
        parsed.keep_partitions(&["cpu".into()]);
        // A job that asked for gpu or cpu counts as cpu's too.
        assert_eq!(parsed.requests.len(), 3);
        assert_eq!(parsed.skipped.get(OTHER_PARTITION), Some(&1));
        assert_eq!(parsed.skipped.get(NO_PARTITION), Some(&1));
    }
}
