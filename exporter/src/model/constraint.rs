//! A job's `--constraint` (`features` in slurmrestd's job record), and whether nodes with a
//! given set of features meet it. Slurm reads `a&b` (all of them), `a|b` (any), `[a|b]` (one
//! of them, the same for all the job's nodes), parentheses, and counts (`a*2`: two of the
//! job's nodes have `a`); older releases wrote `,` for `&`. The nodes of one Slinky NodeSet
//! all register the same features, so for them a count is met when its feature is, and an
//! expression that asks for nodes of different features at once (`[a*2&b*2]`) is met by no
//! single NodeSet. A constraint that cannot be read is taken as met: it is demand, as it
//! was before constraints were read, rather than work nobody grows for.

/// Whether nodes carrying `features` meet `constraint` (empty: no constraint).
pub fn met_by(constraint: &str, features: &[String]) -> bool {
    let constraint = constraint.trim();
    if constraint.is_empty() {
        return true;
    }
    let mut p = Parser {
        rest: constraint,
        features,
    };
    match p.any() {
        Some(met) if p.rest.trim().is_empty() => met,
        _ => true,
    }
}

/// A recursive-descent reading of the expression: `|` binds looser than `&`.
struct Parser<'a> {
    rest: &'a str,
    features: &'a [String],
}

impl Parser<'_> {
    /// `all ('|' all)*`
    fn any(&mut self) -> Option<bool> {
        let mut met = self.all()?;
        while self.eat('|') {
            met |= self.all()?;
        }
        Some(met)
    }

    /// `one (('&' | ',') one)*`
    fn all(&mut self) -> Option<bool> {
        let mut met = self.one()?;
        while self.eat('&') || self.eat(',') {
            met &= self.one()?;
        }
        Some(met)
    }

    /// `'(' any ')'`, `'[' any ']'` or a feature name, each with an optional `*count`.
    fn one(&mut self) -> Option<bool> {
        let met = if self.eat('(') {
            let met = self.any()?;
            self.eat(')').then_some(met)?
        } else if self.eat('[') {
            let met = self.any()?;
            self.eat(']').then_some(met)?
        } else {
            let s = self.rest.trim_start();
            let end = s
                .find(|c: char| "&|,()[]*".contains(c) || c.is_whitespace())
                .unwrap_or(s.len());
            if end == 0 {
                return None;
            }
            self.rest = &s[end..];
            self.features.iter().any(|f| *f == s[..end])
        };
        if self.eat('*') {
            let s = self.rest.trim_start();
            let digits = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            if digits == 0 {
                return None;
            }
            self.rest = &s[digits..];
        }
        Some(met)
    }

    fn eat(&mut self, c: char) -> bool {
        match self.rest.trim_start().strip_prefix(c) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on(features: &[&str]) -> Vec<String> {
        features.iter().map(|f| f.to_string()).collect()
    }

    #[test]
    fn a_nodesets_features_meet_or_fail_a_constraint_as_slurm_reads_it() {
        let gpu = on(&["alpha", "a100", "ib"]);
        let cpu = on(&["bravo", "fastscratch"]);
        for (constraint, on_gpu, on_cpu) in [
            ("", true, true),
            ("a100", true, false),
            ("fastscratch", false, true),
            ("a100&ib", true, false),
            ("a100,ib", true, false),
            ("a100&fastscratch", false, false),
            ("a100|fastscratch", true, true),
            ("[a100|h100]", true, false),
            ("(a100|h100)&ib", true, false),
            ("ib&(h100|v100)", false, false),
            ("a100*2", true, false),
            ("[alpha*2&bravo*2]", false, false),
            (" bravo | alpha ", true, true),
            ("h100", false, false),
        ] {
            assert_eq!(met_by(constraint, &gpu), on_gpu, "{constraint:?} on alpha");
            assert_eq!(met_by(constraint, &cpu), on_cpu, "{constraint:?} on bravo");
        }
    }

    #[test]
    fn a_constraint_that_cannot_be_read_is_taken_as_met() {
        for unreadable in ["a100&", "(a100", "a100)", "[a100", "a100*", "|", "a100 b"] {
            assert!(met_by(unreadable, &on(&["bravo"])), "{unreadable:?}");
        }
    }
}
