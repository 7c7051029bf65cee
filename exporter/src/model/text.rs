//! Slurm's little text formats, shared by every API version: GRES and TRES strings
//! (`gpu:a100:2(IDX:0-1)`, `gres/gpu=2`, `gres:gpu:2`), host lists (`c[1-4,7],g01`) and
//! array task strings (`1-20%5`). Parsers here never fail: what they cannot read counts as
//! nothing, and every result is bounded so a hostile string cannot exhaust memory.

use std::sync::Arc;

use crate::model::Gres;

/// Splits on commas that are not inside parentheses or brackets: `gpu:2(IDX:0,2),mps:100`.
pub fn split_top(s: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(s);
    std::iter::from_fn(move || {
        let s = rest?;
        let mut depth = 0i32;
        for (i, b) in s.bytes().enumerate() {
            match b {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b',' if depth <= 0 => {
                    rest = Some(&s[i + 1..]);
                    return Some(&s[..i]);
                }
                _ => {}
            }
        }
        rest = None;
        Some(s)
    })
    .map(str::trim)
    .filter(|p| !p.is_empty())
}

/// Parses a node's `gres` or `gres_used` string: `gpu:4`, `gpu:a100:2(S:0-1),gpu:v100:2`,
/// `gpu:2(IDX:0-1)`, `gpu:a100:0(IDX:N/A)`, `shard:8`, `(null)`. A bare name counts 1.
pub fn parse_gres(s: &str) -> Vec<Gres> {
    let mut out: Vec<Gres> = Vec::new();
    for item in split_top(s) {
        // Drop "(...)" details, then a "gres/" or "gres:" prefix.
        let item = item.split('(').next().unwrap_or("").trim();
        let item = item
            .strip_prefix("gres/")
            .or_else(|| item.strip_prefix("gres:"))
            .unwrap_or(item);
        if item.is_empty() || item.eq_ignore_ascii_case("null") || item == "N/A" {
            continue;
        }
        let mut fields: Vec<&str> = item.split([':', '=']).collect();
        let count = match fields.last().and_then(|c| parse_count(c)) {
            Some(c) if fields.len() > 1 => {
                fields.pop();
                c
            }
            _ => 1,
        };
        let name = fields.first().copied().unwrap_or("");
        if name.is_empty() {
            continue;
        }
        let kind = fields.get(1).copied().unwrap_or("");
        match out
            .iter_mut()
            .find(|g| &*g.name == name && &*g.kind == kind)
        {
            Some(g) => g.count = g.count.saturating_add(count),
            None => out.push(Gres {
                name: Arc::from(name),
                kind: Arc::from(kind),
                count,
            }),
        }
    }
    out
}

/// A count as Slurm writes it in GRES/TRES strings: `4`, `2K`, `1M`.
fn parse_count(s: &str) -> Option<u64> {
    let s = s.trim();
    let (digits, mult) = match s.as_bytes().last()? {
        b'k' | b'K' => (&s[..s.len() - 1], 1024),
        b'm' | b'M' => (&s[..s.len() - 1], 1024 * 1024),
        b'g' | b'G' => (&s[..s.len() - 1], 1024 * 1024 * 1024),
        _ => (s, 1),
    };
    digits.parse::<u64>().ok().map(|n| n.saturating_mul(mult))
}

/// GPUs in a TRES string (`cpu=3,mem=2000M,node=1,gres/gpu=2,gres/gpu:a100=2`): the untyped
/// `gres/gpu` entry when present (it is the total), else the sum of typed ones.
pub fn tres_gpus(s: &str) -> Option<u64> {
    if !s.contains("gres/gpu") {
        return None;
    }
    let (mut total, mut typed) = (None, None::<u64>);
    for item in s.split(',') {
        let Some((key, value)) = item.trim().split_once('=') else {
            continue;
        };
        let Some(rest) = key.strip_prefix("gres/gpu") else {
            continue;
        };
        let Some(n) = parse_count(value) else {
            continue;
        };
        if rest.is_empty() {
            total = Some(n);
        } else if rest.starts_with(':') {
            typed = Some(typed.unwrap_or(0).saturating_add(n));
        }
    }
    total.or(typed)
}

/// Memory in a TRES string (`cpu=32,mem=62.50G,node=8`), in bytes.
pub fn tres_memory_bytes(s: &str) -> Option<u64> {
    tres_mem_mib(s).map(|m| m.saturating_mul(1 << 20))
}

/// GPUs in a per-node/per-job/per-task TRES request: `gres:gpu:2` (22.05), `gres/gpu:2`,
/// `gres/gpu:a100:2`, `gres/gpu=2`, `gpu:2`, several comma-separated.
pub fn tres_per_gpus(s: &str) -> Option<u64> {
    if !s.contains("gpu") {
        return None;
    }
    let gpus: Vec<u64> = parse_gres(s)
        .iter()
        .filter(|g| &*g.name == "gpu")
        .map(|g| g.count)
        .collect();
    (!gpus.is_empty()).then(|| gpus.iter().fold(0u64, |a, b| a.saturating_add(*b)))
}

/// Expands a host list (`c[1-4,7],g[01-02],login`) into names, at most `limit` of them.
pub fn expand_hostlist(s: &str, limit: usize) -> Vec<String> {
    let mut out = Vec::new();
    for_each_host(s, limit, |h| out.push(h.to_string()));
    out
}

/// Calls `f` with each name of a host list, at most `limit` of them, without allocating a
/// string per name: for lists of thousands of nodes read on every poll.
pub fn for_each_host(s: &str, limit: usize, mut f: impl FnMut(&str)) {
    let mut left = limit;
    let mut buf = String::new();
    for item in split_top(s) {
        expand_one(item, &mut buf, &mut left, &mut f as &mut dyn FnMut(&str));
        if left == 0 {
            break;
        }
    }
}

fn expand_one(item: &str, buf: &mut String, left: &mut usize, f: &mut dyn FnMut(&str)) {
    use std::fmt::Write;
    let whole = |buf: &mut String, left: &mut usize, f: &mut dyn FnMut(&str)| {
        if *left > 0 {
            *left -= 1;
            buf.clear();
            buf.push_str(item);
            f(buf);
        }
    };
    let Some(open) = item.find('[') else {
        return whole(buf, left, f);
    };
    let Some(close) = item[open..].find(']').map(|c| c + open) else {
        return whole(buf, left, f);
    };
    let (prefix, ranges, suffix) = (&item[..open], &item[open + 1..close], &item[close + 1..]);
    // The suffix may hold more brackets (`a[1-2]b[1-2]`): expand it first, no further
    // than the names still wanted.
    let mut tails = Vec::new();
    if !suffix.is_empty() {
        let mut most = *left;
        expand_one(suffix, &mut String::new(), &mut most, &mut |t: &str| {
            tails.push(t.to_string())
        });
    }
    if tails.is_empty() {
        tails.push(String::new());
    }
    for range in ranges.split(',') {
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        let width = lo.len();
        let (Ok(lo_n), Ok(hi_n)) = (lo.trim().parse::<u64>(), hi.trim().parse::<u64>()) else {
            continue;
        };
        for n in lo_n..=hi_n {
            buf.clear();
            let _ = write!(buf, "{prefix}{n:0width$}");
            let base = buf.len();
            for tail in &tails {
                if *left == 0 {
                    return;
                }
                *left -= 1;
                buf.truncate(base);
                buf.push_str(tail);
                f(buf);
            }
        }
    }
}

/// Tasks an array record still holds: `1-20%5` → 20, `1,3,5-9` → 7, `1-99:2` → 50.
/// A `%N` suffix is the throttle, returned separately. Empty means "not an array record" (1).
pub fn array_tasks(s: &str) -> (u64, Option<u64>) {
    let s = s.trim().trim_start_matches('[').trim_end_matches(']');
    if s.is_empty() {
        return (1, None);
    }
    let (list, throttle) = match s.split_once('%') {
        Some((l, t)) => (l, t.trim().parse().ok()),
        None => (s, None),
    };
    let mut tasks: u64 = 0;
    for part in list.split(',') {
        let (range, step) = match part.split_once(':') {
            Some((r, st)) => (r, st.trim().parse::<u64>().unwrap_or(1).max(1)),
            None => (part, 1),
        };
        let (lo, hi) = range.split_once('-').unwrap_or((range, range));
        if let (Ok(lo), Ok(hi)) = (lo.trim().parse::<u64>(), hi.trim().parse::<u64>())
            && hi >= lo
        {
            tasks = tasks.saturating_add(((hi - lo) / step).saturating_add(1));
        }
    }
    (tasks.max(1), throttle)
}

/// `mem=2000M` / `mem=62.50G` in a TRES string, in MiB.
pub fn tres_mem_mib(s: &str) -> Option<u64> {
    let value = s.split(',').find_map(|i| i.trim().strip_prefix("mem="))?;
    memory_mib(value).map(|m| m as u64)
}

/// A Slurm memory size (`2000M`, `62.50G`, `1.5T`, `512K`; no unit: MiB) in MiB, unrounded:
/// TRES strings and accounting exports write memory this way.
pub fn memory_mib(s: &str) -> Option<f64> {
    let (num, unit) = s.split_at(s.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(s.len()));
    let n: f64 = num.parse().ok()?;
    let factor = match unit {
        "" | "M" => 1.0,
        "K" => 1.0 / 1024.0,
        "G" => 1024.0,
        "T" => 1024.0 * 1024.0,
        _ => return None,
    };
    Some(n * factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gres(s: &str) -> Vec<(String, String, u64)> {
        parse_gres(s)
            .into_iter()
            .map(|g| (g.name.to_string(), g.kind.to_string(), g.count))
            .collect()
    }

    #[test]
    fn gres_strings_of_every_era() {
        assert_eq!(gres("gpu:4"), [("gpu".into(), "".into(), 4)]);
        assert_eq!(gres("gpu:2(IDX:0-1)"), [("gpu".into(), "".into(), 2)]);
        assert_eq!(gres("gpu:2(IDX:0,2)"), [("gpu".into(), "".into(), 2)]);
        assert_eq!(
            gres("gpu:a100:2(S:0-1),gpu:v100:1,shard:8"),
            [
                ("gpu".into(), "a100".into(), 2),
                ("gpu".into(), "v100".into(), 1),
                ("shard".into(), "".into(), 8)
            ]
        );
        assert_eq!(
            gres("gpu:a100:0(IDX:N/A)"),
            [("gpu".into(), "a100".into(), 0)]
        );
        assert_eq!(gres("gpu"), [("gpu".into(), "".into(), 1)]);
        assert!(gres("(null)").is_empty());
        assert!(gres("").is_empty());
    }

    #[test]
    fn gpus_in_tres_requests() {
        assert_eq!(tres_per_gpus("gres:gpu:2"), Some(2));
        assert_eq!(tres_per_gpus("gres/gpu:4"), Some(4));
        assert_eq!(tres_per_gpus("gres/gpu:a100:3"), Some(3));
        assert_eq!(tres_per_gpus("gres/gpu=2"), Some(2));
        assert_eq!(tres_per_gpus("gres/gpu"), Some(1));
        assert_eq!(tres_per_gpus("gres/shard:2"), None);
        assert_eq!(tres_per_gpus(""), None);
        assert_eq!(tres_gpus("cpu=3,mem=2000M,node=1,billing=3"), None);
        assert_eq!(tres_gpus("cpu=3,gres/gpu=2,gres/gpu:a100=2"), Some(2));
        assert_eq!(tres_gpus("cpu=3,gres/gpu:a100=2,gres/gpu:v100=1"), Some(3));
        assert_eq!(tres_gpus("cpu=3,gres/gpumem=2G"), None);
    }

    #[test]
    fn hostlists() {
        assert_eq!(
            expand_hostlist("c[1-3],g01", 100),
            ["c1", "c2", "c3", "g01"]
        );
        assert_eq!(expand_hostlist("n[01-02,10]", 100), ["n01", "n02", "n10"]);
        assert_eq!(
            expand_hostlist("r[1-2]n[1-2]", 100),
            ["r1n1", "r1n2", "r2n1", "r2n2"]
        );
        assert_eq!(expand_hostlist("e[1-1000000]", 5).len(), 5);
        // A long inner range is not written out past the bound either.
        assert_eq!(
            expand_hostlist("a[1-2]b[1-4000000000]", 3),
            ["a1b1", "a1b2", "a1b3"]
        );
        assert_eq!(
            expand_hostlist("g[0008-0010],h[7-8]x[00-01]", 100),
            [
                "g0008", "g0009", "g0010", "h7x00", "h7x01", "h8x00", "h8x01"
            ]
        );
        assert_eq!(
            expand_hostlist("n[9-10,18446744073709551615]", 100),
            ["n9", "n10", "n18446744073709551615"]
        );
        assert_eq!(expand_hostlist("", 5), Vec::<String>::new());
        assert_eq!(expand_hostlist("bad[x-y]", 5), Vec::<String>::new());
    }

    #[test]
    fn array_task_strings() {
        assert_eq!(array_tasks(""), (1, None));
        assert_eq!(array_tasks("1-20%5"), (20, Some(5)));
        assert_eq!(array_tasks("5-50"), (46, None));
        assert_eq!(array_tasks("1,3,5-9"), (7, None));
        assert_eq!(array_tasks("1-99:2"), (50, None));
        assert_eq!(array_tasks("[1-3]"), (3, None));
        assert_eq!(array_tasks("garbage"), (1, None));
        assert_eq!(array_tasks("0-18446744073709551615"), (u64::MAX, None));
    }
}
