//! A site's own history, as Slurm accounting exports it:
//!
//! ```text
//! sacct --allocations --parsable2 --noheader --starttime 2026-10-01 --endtime 2026-11-01 \
//!   --format=JobID,Submit,Start,End,Partition,NNodes,NCPUS,ReqMem,ReqTRES,Timelimit,State
//! ```
//!
//! With a header line (no `--noheader`) the columns may come in any order; without one they
//! are read in the order above. Times are Slurm's local `YYYY-MM-DDTHH:MM:SS` (read as UTC:
//! only differences matter). Jobs that never started or have not ended are skipped and
//! counted; memory comes from `ReqTRES`'s `mem=` (the job's total), else `ReqMem` (`c`/`n`
//! suffixes of older Slurm honoured); GPUs from `gres/gpu=`.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use slurmscale_exporter::model::text::memory_mib;

use super::trace::{Parsed, Request, error, numbered_lines};
use crate::error::{Error, Result};

/// The documented order.
const COLUMNS: [&str; 11] = [
    "JobID",
    "Submit",
    "Start",
    "End",
    "Partition",
    "NNodes",
    "NCPUS",
    "ReqMem",
    "ReqTRES",
    "Timelimit",
    "State",
];
const REQUIRED: [&str; 8] = [
    "JobID",
    "Submit",
    "Start",
    "End",
    "NNodes",
    "NCPUS",
    "Timelimit",
    "State",
];

pub fn parse(reader: Box<dyn BufRead>, path: &Path, skip_bad: bool) -> Result<Parsed> {
    let mut p = Parsed::default();
    // Column name → index.
    let mut columns: Vec<String> = COLUMNS.iter().map(|c| c.to_string()).collect();
    // One string per partition, shared by its jobs.
    let mut partitions: HashMap<String, Arc<str>> = HashMap::new();
    for line in numbered_lines(reader, path) {
        let (n, line) = line?;
        let cells: Vec<&str> = line.split('|').collect();
        if cells.first().is_some_and(|c| c.trim() == "JobID") {
            columns = cells.iter().map(|c| c.trim().to_string()).collect();
            if let Some(missing) = REQUIRED.iter().find(|r| !columns.iter().any(|c| c == *r)) {
                return Err(error(
                    path,
                    n,
                    "",
                    format!(
                        "the header has no {missing} column (see `slurmscale simulate --help`)"
                    ),
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
        match row.job() {
            Ok(Ok(mut r)) => {
                r.partition = row.get("Partition").filter(|n| !n.is_empty()).map(|n| {
                    partitions
                        .entry(n.to_string())
                        .or_insert_with(|| Arc::from(n))
                        .clone()
                });
                p.requests.push(r)
            }
            Ok(Err(why)) => p.skip(why),
            Err(e) => p.bad(skip_bad, e)?,
        }
    }
    if p.requests.is_empty() && p.skipped.is_empty() && p.bad_lines == 0 {
        return Err(error(path, 0, "", "the trace has no jobs"));
    }
    Ok(p)
}

struct Row<'a> {
    cells: &'a [&'a str],
    columns: &'a [String],
    path: &'a Path,
    n: usize,
}

impl Row<'_> {
    fn get(&self, name: &'static str) -> Option<&str> {
        let i = self.columns.iter().position(|c| c == name)?;
        self.cells.get(i).map(|c| c.trim())
    }

    fn bad(&self, field: &'static str, message: String) -> Error {
        error(self.path, self.n, field, message)
    }

    fn need(&self, name: &'static str) -> Result<&str> {
        self.get(name).ok_or_else(|| {
            self.bad(
                name,
                format!(
                    "{} columns, expected {}",
                    self.cells.len(),
                    self.columns.len()
                ),
            )
        })
    }

    fn number(&self, name: &'static str) -> Result<u64> {
        let s = self.need(name)?;
        s.parse()
            .map_err(|_| self.bad(name, format!("{s:?} is not a number")))
    }

    /// A time, or `None` for Slurm's `Unknown`/`None`.
    fn time(&self, name: &'static str) -> Result<Option<i64>> {
        let s = self.need(name)?;
        if matches!(s, "Unknown" | "None" | "") {
            return Ok(None);
        }
        chrono::NaiveDateTime::parse_from_str(s, "%Y-%m-%dT%H:%M:%S")
            .map(|t| Some(t.and_utc().timestamp()))
            .map_err(|_| {
                self.bad(
                    name,
                    format!("{s:?} is not a time like 2026-11-02T13:45:00"),
                )
            })
    }

    /// The job, or why it is not replayable.
    fn job(&self) -> Result<std::result::Result<Request, &'static str>> {
        if self.cells.len() != self.columns.len() {
            return Err(self.bad(
                "",
                format!(
                    "{} columns, expected {} ({})",
                    self.cells.len(),
                    self.columns.len(),
                    self.columns.join("|")
                ),
            ));
        }
        let id = self.need("JobID")?.to_string();
        let submit = self
            .time("Submit")?
            .ok_or_else(|| self.bad("Submit", "a job needs a submit time".into()))?;
        let start = self.time("Start")?;
        let end = self.time("End")?;
        let nodes = self.number("NNodes")?;
        let cpus = self.number("NCPUS")?;
        let limit_text = self.need("Timelimit")?;
        let limit = timelimit(limit_text).ok_or_else(|| {
            self.bad(
                "Timelimit",
                format!("{limit_text:?} is not a time limit like 1-00:00:00"),
            )
        })?;
        let tres = self.get("ReqTRES").unwrap_or("");
        let (start, end) = match (start, end) {
            (None, _) => return Ok(Err("never started")),
            (Some(_), None) => return Ok(Err("not finished")),
            (Some(s), Some(e)) => (s, e),
        };
        if end <= start || cpus == 0 {
            return Ok(Err("never ran (run time ≤ 0)"));
        }
        let mut r = Request {
            id,
            submit,
            run: (end - start) as u64,
            limit,
            cpus,
            nodes: (nodes > 0).then_some(nodes),
            gpus: tres_gpus(tres),
            recorded_wait: Some(start.saturating_sub(submit).max(0) as u64),
            ..Default::default()
        };
        if let Some(total) = tres_value(tres, "mem").and_then(mib) {
            r.memory_mib_per_node = Some(total.div_ceil(nodes.max(1)));
        } else if let Some(m) = self.get("ReqMem").filter(|m| !m.is_empty()) {
            let (value, per_cpu) = match m.as_bytes().last() {
                Some(b'c') => (&m[..m.len() - 1], true),
                Some(b'n') => (&m[..m.len() - 1], false),
                _ => (m, false),
            };
            let v = mib(value).ok_or_else(|| {
                self.bad("ReqMem", format!("{m:?} is not a memory size like 4000M"))
            })?;
            if per_cpu {
                r.memory_mib_per_cpu = Some(v);
            } else {
                r.memory_mib_per_node = Some(v);
            }
        }
        Ok(Ok(r))
    }
}

/// `4000M`, `4G`, `1.5T`, `512K` (no unit: MiB) in whole MiB, rounded up.
fn mib(s: &str) -> Option<u64> {
    let m = memory_mib(s)?;
    (m.is_finite() && m >= 0.0).then(|| m.ceil() as u64)
}

/// `key=value` from a TRES string.
fn tres_value<'a>(tres: &'a str, key: &str) -> Option<&'a str> {
    tres.split(',')
        .find_map(|kv| kv.split_once('=').filter(|(k, _)| *k == key))
        .map(|(_, v)| v)
}

/// GPUs in a TRES string: `gres/gpu=N`, else the sum of typed `gres/gpu:TYPE=N`.
fn tres_gpus(tres: &str) -> u64 {
    if let Some(n) = tres_value(tres, "gres/gpu").and_then(|v| v.parse().ok()) {
        return n;
    }
    tres.split(',')
        .filter_map(|kv| kv.split_once('='))
        .filter(|(k, _)| k.starts_with("gres/gpu:"))
        .filter_map(|(_, v)| v.parse::<u64>().ok())
        .sum()
}

/// Slurm's time limit: `[days-]hours:minutes:seconds`, `minutes:seconds`, `minutes`, or
/// `UNLIMITED`/`Partition_Limit` (no limit: `None`). `None` inside `Some` means unparseable.
fn timelimit(s: &str) -> Option<Option<u64>> {
    if matches!(s, "UNLIMITED" | "Partition_Limit" | "INVALID" | "") {
        return Some(None);
    }
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u64> = rest
        .split(':')
        .map(|p| p.parse::<u64>().ok())
        .collect::<Option<_>>()?;
    let secs = match (parts.as_slice(), days > 0) {
        ([h], true) => h * 3600,
        ([m], false) => m * 60,
        ([h, m], true) => h * 3600 + m * 60,
        ([m, s], false) => m * 60 + s,
        ([h, m, s], _) => h * 3600 + m * 60 + s,
        _ => return None,
    };
    Some(Some(days * 86400 + secs))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(text: &str, skip_bad: bool) -> Result<Parsed> {
        parse(
            Box::new(std::io::Cursor::new(text.to_string())),
            Path::new("site.sacct"),
            skip_bad,
        )
    }

    const ROWS: &str = "\
1001|2026-11-01T10:00:00|2026-11-01T10:00:30|2026-11-01T11:00:30|cpu|2|64|4000M|billing=64,cpu=64,mem=250G,node=2|02:00:00|COMPLETED
1002_3|2026-11-01T10:01:00|2026-11-01T10:05:00|2026-11-01T10:06:00|gpu|1|8|8000Mc|cpu=8,gres/gpu:a100=2,node=1|1-00:00:00|CANCELLED by 1000
1003|2026-11-01T10:02:00|Unknown|Unknown|cpu|1|1|1G||30:00|PENDING
1004|2026-11-01T10:03:00|2026-11-01T10:03:01|Unknown|cpu|1|1|1G||UNLIMITED|RUNNING
";

    #[test]
    fn reads_the_documented_columns() {
        let p = parse_text(ROWS, false).unwrap();
        let [a, b] = &p.requests[..] else {
            panic!("{:?}", p.requests)
        };
        assert_eq!(
            (a.run, a.limit, a.nodes, a.cpus, a.recorded_wait),
            (3600, Some(7200), Some(2), 64, Some(30))
        );
        // ReqTRES mem is the job's total: half of it per node.
        assert_eq!(a.memory_mib_per_node, Some(128_000));
        assert_eq!(
            (b.id.as_str(), b.gpus, b.memory_mib_per_cpu, b.limit),
            ("1002_3", 2, Some(8000), Some(86_400))
        );
        assert_eq!(
            (a.partition.as_deref(), b.partition.as_deref()),
            (Some("cpu"), Some("gpu"))
        );
        assert_eq!(p.skipped.values().sum::<u64>(), 2, "{:?}", p.skipped);
    }

    #[test]
    fn a_header_line_may_reorder_the_columns() {
        let text = "JobID|State|NNodes|NCPUS|Timelimit|Submit|Start|End\n\
                    7|COMPLETED|1|4|10|2026-11-01T10:00:00|2026-11-01T10:00:00|2026-11-01T10:05:00\n";
        let p = parse_text(text, false).unwrap();
        assert_eq!(
            (p.requests[0].cpus, p.requests[0].run, p.requests[0].limit),
            (4, 300, Some(600))
        );
        let e = parse_text("JobID|Submit\n", false).unwrap_err();
        assert!(e.to_string().contains("no Start column"), "{e}");
    }

    #[test]
    fn a_malformed_line_names_the_file_line_and_field() {
        let text = format!(
            "{ROWS}1005|2026-11-01T10:04:00|yesterday|2026-11-01T10:09:00|cpu|1|1|1G||10:00|COMPLETED\n1006|x\n"
        );
        let e = parse_text(&text, false).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("site.sacct:5") && msg.contains("Start"),
            "{msg}"
        );
        let p = parse_text(&text, true).unwrap();
        assert_eq!((p.requests.len(), p.bad_lines), (2, 2));
    }

    #[test]
    fn time_limits_in_every_spelling() {
        assert_eq!(timelimit("1-02:03:04"), Some(Some(93_784)));
        assert_eq!(timelimit("02:00:00"), Some(Some(7_200)));
        assert_eq!(timelimit("30:00"), Some(Some(1_800)));
        assert_eq!(timelimit("45"), Some(Some(2_700)));
        assert_eq!(timelimit("2-12"), Some(Some(216_000)));
        assert_eq!(timelimit("UNLIMITED"), Some(None));
        assert_eq!(timelimit("soon"), None);
    }
}
