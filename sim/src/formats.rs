//! The job-log formats `simulate` reads, and the one place to add one: a parser module
//! beside [`swf`](super::swf) and [`sacct`](super::sacct) that turns lines into
//! [`Request`](super::trace::Request)s, a variant of [`Format`] with its name and how its
//! first line looks, and its arm in [`read`]. The command line takes the names from here.

use std::io::BufRead;
use std::path::Path;

use super::trace::{Parsed, open};
use crate::error::{Error, Result};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Standard Workload Format (Parallel Workloads Archive), plain or gzipped.
    Swf,
    /// `sacct --allocations --parsable2` with the columns the README lists.
    Sacct,
}

impl Format {
    /// In the order a first line is tried against them (a sacct line may hold 18 words).
    pub const ALL: [Format; 2] = [Self::Sacct, Self::Swf];

    pub fn name(self) -> &'static str {
        match self {
            Self::Swf => "swf",
            Self::Sacct => "sacct",
        }
    }

    /// Whether a file so named is in this format, whatever it holds.
    fn named(self, lowercase_name: &str) -> bool {
        match self {
            Self::Swf => lowercase_name.ends_with(".swf") || lowercase_name.ends_with(".swf.gz"),
            Self::Sacct => false,
        }
    }

    /// Whether the first line that is not blank looks like this format.
    fn starts(self, line: &str) -> bool {
        match self {
            Self::Swf => line.starts_with(';') || line.split_ascii_whitespace().count() == 18,
            Self::Sacct => line.contains('|'),
        }
    }
}

impl std::str::FromStr for Format {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        Self::ALL
            .into_iter()
            .find(|f| f.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|f| f.name()).collect();
                format!("{s:?} is not a trace format ({} or auto)", names.join(", "))
            })
    }
}

/// The format of `path`: from its name and, failing that, its first line that is not blank.
pub fn detect(path: &Path) -> Result<Format> {
    let name = path.to_string_lossy().to_ascii_lowercase();
    if let Some(f) = Format::ALL.into_iter().find(|f| f.named(&name)) {
        return Ok(f);
    }
    let mut reader = open(path)?;
    let mut line = String::new();
    loop {
        line.clear();
        let n = reader.read_line(&mut line).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            source,
        })?;
        if n == 0 {
            return Err(Error::Trace {
                file: path.to_path_buf(),
                line: 0,
                field: "",
                message: "the trace is empty".into(),
            });
        }
        let l = line.trim();
        if l.is_empty() {
            continue;
        }
        return Format::ALL.into_iter().find(|f| f.starts(l)).ok_or_else(|| Error::Trace {
            file: path.to_path_buf(),
            line: 1,
            field: "",
            message: "neither SWF (18 numbers per line, ';' headers) nor sacct --parsable2 ('|' separated): give --format".into(),
        });
    }
}

/// Reads a trace file in `format`, its jobs in submit order.
pub fn read(path: &Path, format: Format, skip_bad: bool) -> Result<Parsed> {
    let reader = open(path)?;
    let mut parsed = match format {
        Format::Swf => super::swf::parse(reader, path, skip_bad)?,
        Format::Sacct => super::sacct::parse(reader, path, skip_bad)?,
    };
    parsed.requests.sort_by_key(|r| r.submit);
    Ok(parsed)
}
