//! Kubernetes resource quantities (`1735m`, `2393Mi`, `4000Mi`, `3`, `1.5`, `2e3`, `1G`) in
//! base units: cores for CPU, bytes for memory, a count for everything else. A quantity that
//! does not follow the grammar is `None`, never a guess.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Parses a quantity string into base units.
pub fn parse(s: &str) -> Option<f64> {
    let s = s.trim();
    let (sign, s) = match s.as_bytes().first()? {
        b'-' => (-1.0, &s[1..]),
        b'+' => (1.0, &s[1..]),
        _ => (1.0, s),
    };
    let number_end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(number_end);
    if number.is_empty() || number == "." || number.matches('.').count() > 1 {
        return None;
    }
    let value: f64 = number.parse().ok()?;
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => {
            10f64.powi(exp[1..].parse::<i32>().ok().filter(|e| e.abs() <= 308)?)
        }
        _ => return None,
    };
    let v = sign * value * factor;
    v.is_finite().then_some(v)
}

/// A quantity that may arrive as a JSON integer or string.
pub fn parse_int_or_string(q: &IntOrString) -> Option<f64> {
    match q {
        IntOrString::Int(i) => Some(f64::from(*i)),
        IntOrString::String(s) => parse(s),
    }
}

/// A quantity from any JSON value (strings, integers, floats).
pub fn parse_json(v: &serde_json::Value) -> Option<f64> {
    match v {
        serde_json::Value::String(s) => parse(s),
        serde_json::Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn quantities_of_every_suffix() {
        assert_eq!(parse("1735m"), Some(1.735));
        assert_eq!(parse("2393Mi"), Some(2393.0 * 1048576.0));
        assert_eq!(parse("4000Mi"), Some(4000.0 * 1048576.0));
        assert_eq!(parse("3"), Some(3.0));
        assert_eq!(parse("0"), Some(0.0));
        assert_eq!(parse("1.5"), Some(1.5));
        assert_eq!(parse("1G"), Some(1e9));
        assert_eq!(parse("64Gi"), Some(64.0 * 1073741824.0));
        assert_eq!(parse("2e3"), Some(2000.0));
        assert_eq!(parse("250u"), Some(0.00025));
        assert_eq!(parse("-1"), Some(-1.0));
        for bad in ["", "m", "1.2.3", "12x", "Mi", "1e999", "one", "1 Mi", "--1"] {
            assert_eq!(parse(bad), None, "{bad:?}");
        }
    }
}
