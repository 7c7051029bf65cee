//! The Standard Workload Format of the Parallel Workloads Archive: `;` header lines
//! (`; UnixStartTime: …`, `; MaxNodes: …`, `; MaxProcs: …`), then one job per line as 18
//! whitespace-separated numbers, −1 where unknown.
//!
//! What a replay takes: submit (field 2, seconds after `UnixStartTime`), run time (4),
//! requested processors (8, or allocated (5) when 8 is −1), requested time (9, or the run
//! time), requested memory (10, KB per processor), the partition (16, named by the header's
//! `; Partition: N name` lines where it has them) and the recorded wait (3). Jobs that never
//! ran (run time ≤ 0), have no size or no known submit time are counted as skipped, as the
//! archive advises; a line that is not 18 numbers is malformed.

use std::collections::HashMap;
use std::io::BufRead;
use std::path::Path;
use std::sync::Arc;

use super::trace::{Hints, Parsed, Request, error, numbered_lines};
use crate::error::Result;

/// Field numbers (1-based, as the format's documentation numbers them) and names.
const SUBMIT: (usize, &str) = (2, "submit time");
const WAIT: (usize, &str) = (3, "wait time");
const RUN: (usize, &str) = (4, "run time");
const ALLOCATED: (usize, &str) = (5, "allocated processors");
const REQUESTED: (usize, &str) = (8, "requested processors");
const LIMIT: (usize, &str) = (9, "requested time");
const MEMORY: (usize, &str) = (10, "requested memory");
const PARTITION: (usize, &str) = (16, "partition number");

pub fn parse(reader: Box<dyn BufRead>, path: &Path, skip_bad: bool) -> Result<Parsed> {
    let mut p = Parsed::default();
    let mut start: i64 = 0;
    let mut max_procs = None;
    // Partition number → its name (the header's, else the number), one string per partition.
    let mut partitions: HashMap<i64, Arc<str>> = HashMap::new();
    for line in numbered_lines(reader, path) {
        let (n, line) = line?;
        let line = line.trim();
        if let Some(header) = line.strip_prefix(';') {
            let Some((key, value)) = header.split_once(':') else {
                continue;
            };
            let value = value.trim();
            let number = || value.split_ascii_whitespace().next()?.parse::<i64>().ok();
            match key.trim() {
                "UnixStartTime" => start = number().unwrap_or(0),
                "MaxNodes" => p.hints.max_nodes = number().and_then(|v| u32::try_from(v).ok()),
                "MaxProcs" => max_procs = number(),
                "Partition" => {
                    if let Some((n, name)) = value.split_once(char::is_whitespace)
                        && let Ok(n) = n.parse()
                    {
                        partitions.insert(n, Arc::from(name.trim()));
                    }
                }
                _ => {}
            }
            continue;
        }
        match job(line, n, path, start) {
            Ok(Some((mut r, partition))) => {
                r.partition = (partition >= 0).then(|| {
                    partitions
                        .entry(partition)
                        .or_insert_with(|| Arc::from(partition.to_string()))
                        .clone()
                });
                p.requests.push(r)
            }
            Ok(None) => {}
            Err(Skip(why)) => p.skip(why),
            Err(Bad(e)) => p.bad(skip_bad, e)?,
        }
    }
    if let (Some(procs), Some(nodes)) = (max_procs, p.hints.max_nodes)
        && procs > 0
        && nodes > 0
    {
        p.hints = Hints {
            node_cpus: u32::try_from(procs / i64::from(nodes))
                .ok()
                .filter(|c| *c > 0),
            ..p.hints
        };
    }
    if p.requests.is_empty() && p.skipped.is_empty() && p.bad_lines == 0 {
        return Err(error(path, 0, "", "the trace has no jobs"));
    }
    Ok(p)
}

enum Outcome {
    Skip(&'static str),
    Bad(crate::error::Error),
}
use Outcome::{Bad, Skip};

/// The job and its partition number (−1: not recorded).
fn job(
    line: &str,
    n: usize,
    path: &Path,
    start: i64,
) -> std::result::Result<Option<(Request, i64)>, Outcome> {
    let fields: Vec<&str> = line.split_ascii_whitespace().collect();
    if fields.len() != 18 {
        return Err(Bad(error(
            path,
            n,
            "",
            format!("{} fields, SWF has 18", fields.len()),
        )));
    }
    let int = |(i, name): (usize, &'static str)| -> std::result::Result<i64, Outcome> {
        let s = fields[i - 1];
        // Some logs write whole numbers as `12.00`.
        s.parse::<i64>()
            .or_else(|_| {
                s.parse::<f64>()
                    .ok()
                    .filter(|v| v.is_finite() && v.fract() == 0.0)
                    .map(|v| v as i64)
                    .ok_or(())
            })
            .map_err(|_| {
                Bad(error(
                    path,
                    n,
                    name,
                    format!("field {i} is {s:?}, not a number"),
                ))
            })
    };
    let submit = int(SUBMIT)?;
    let run = int(RUN)?;
    let allocated = int(ALLOCATED)?;
    let requested = int(REQUESTED)?;
    let limit = int(LIMIT)?;
    let memory_kb = int(MEMORY)?;
    let wait = int(WAIT)?;
    let partition = int(PARTITION)?;
    // −1 is the format's "unknown": some archive logs keep records of which they know
    // nothing, which no replay can place in time. Any other negative time is malformed.
    if submit == -1 {
        return Err(Skip("submit time unknown (SWF −1)"));
    }
    if submit < 0 {
        return Err(Bad(error(
            path,
            n,
            SUBMIT.1,
            format!("field 2 is {submit}: a submit time is seconds from the log's start"),
        )));
    }
    if run <= 0 {
        return Err(Skip("never ran (run time ≤ 0)"));
    }
    let procs = if requested > 0 { requested } else { allocated };
    if procs <= 0 {
        return Err(Skip("no processor count"));
    }
    Ok(Some((
        Request {
            id: fields[0].to_string(),
            submit: start.saturating_add(submit),
            run: run as u64,
            limit: (limit > 0).then_some(limit as u64),
            cpus: procs as u64,
            nodes: None,
            memory_mib_per_node: None,
            memory_mib_per_cpu: (memory_kb > 0).then(|| (memory_kb as u64).div_ceil(1024)),
            gpus: 0,
            recorded_wait: (wait >= 0).then_some(wait as u64),
            partition: None,
        },
        partition,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;

    fn parse_text(text: &str, skip_bad: bool) -> Result<Parsed> {
        parse(
            Box::new(std::io::Cursor::new(text.to_string())),
            Path::new("t.swf"),
            skip_bad,
        )
    }

    const HEADER: &str = "; UnixStartTime: 1000\n; MaxNodes: 100\n; MaxProcs: 1600\n";

    #[test]
    fn reads_jobs_and_the_machine_from_the_header() {
        let p = parse_text(
            &format!(
                "{HEADER}   1  10  5  300  4  -1 -1  -1  600  2048  1 1 1 -1 -1 -1 -1 -1\n\
                 2  20 -1  100 -1  -1 -1  32   -1  -1  1 1 1 -1 -1 -1 -1 -1\n"
            ),
            false,
        )
        .unwrap();
        assert_eq!(
            p.hints,
            Hints {
                max_nodes: Some(100),
                node_cpus: Some(16)
            }
        );
        let [a, b] = &p.requests[..] else {
            panic!("{:?}", p.requests)
        };
        // Allocated processors stand in for missing requested ones.
        assert_eq!(
            (a.submit, a.run, a.cpus, a.limit, a.memory_mib_per_cpu),
            (1010, 300, 4, Some(600), Some(2))
        );
        assert_eq!(a.recorded_wait, Some(5));
        assert_eq!((b.cpus, b.limit, b.recorded_wait), (32, None, None));
    }

    #[test]
    fn partitions_are_named_by_the_header() {
        let p = parse_text(
            &format!(
                "{HEADER}; Partition: 1 test\n; Partition: 2  batch\n\
                 1 10 0 50 1 -1 -1 1 60 -1 1 1 1 -1 -1 2 -1 -1\n\
                 2 10 0 50 1 -1 -1 1 60 -1 1 1 1 -1 -1 7 -1 -1\n\
                 3 10 0 50 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n\
                 4 10 0 50 1 -1 -1 1 60 -1 1 1 1 -1 -1 2 -1 -1\n"
            ),
            false,
        )
        .unwrap();
        let names: Vec<Option<&str>> = p.requests.iter().map(|r| r.partition.as_deref()).collect();
        // A number the header does not name is its own name; −1 is none.
        assert_eq!(names, [Some("batch"), Some("7"), None, Some("batch")]);
    }

    #[test]
    fn jobs_that_never_ran_are_skipped_and_counted() {
        let p = parse_text(
            &format!(
                "{HEADER}1 10 0 0 4 -1 -1 4 60 -1 5 1 1 -1 -1 -1 -1 -1\n\
                 2 10 0 50 -1 -1 -1 -1 60 -1 1 1 1 -1 -1 -1 -1 -1\n\
                 3 10 0 50 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
            ),
            false,
        )
        .unwrap();
        assert_eq!(p.requests.len(), 1);
        assert_eq!(p.skipped.values().sum::<u64>(), 2);
    }

    #[test]
    fn records_of_unknown_fields_are_skipped_and_counted() {
        // Archive logs hold records whose every field is −1; a −1 submit time alone is enough.
        let p = parse_text(
            &format!(
                "{HEADER}-1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1\n\
                 2 -1 0 50 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n\
                 3 10 0 50 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n"
            ),
            false,
        )
        .unwrap();
        assert_eq!(p.requests.len(), 1);
        assert_eq!(p.skipped.get("submit time unknown (SWF −1)"), Some(&2));
        // Another negative time is not SWF's "unknown": malformed.
        let e = parse_text(
            &format!("{HEADER}4 -7 0 50 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n"),
            false,
        )
        .unwrap_err();
        assert!(e.to_string().contains("t.swf:4: submit time"), "{e}");
    }

    #[test]
    fn a_malformed_line_names_the_file_line_and_field() {
        let text = format!(
            "{HEADER}1 10 0 50 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n\
             2 10 0 fifty 1 -1 -1 1 60 -1 1 1 1 -1 -1 -1 -1 -1\n\
             3 10 0 50 1 -1 -1 1\n"
        );
        let e = parse_text(&text, false).unwrap_err();
        let Error::Trace {
            line, field, file, ..
        } = &e
        else {
            panic!("{e}")
        };
        assert_eq!((*line, *field), (5, "run time"));
        assert_eq!(file, Path::new("t.swf"));
        assert!(e.to_string().contains("t.swf:5"), "{e}");
        assert!(e.to_string().contains("--skip-bad-lines"), "{e}");
        // With --skip-bad-lines both bad lines are counted and the good one is kept.
        let p = parse_text(&text, true).unwrap();
        assert_eq!((p.requests.len(), p.bad_lines), (1, 2));
        assert!(p.first_bad_line.unwrap().contains(":5"));
    }

    #[test]
    fn an_empty_trace_is_an_error() {
        assert!(parse_text(HEADER, false).is_err());
        assert!(parse_text("", false).is_err());
    }
}
