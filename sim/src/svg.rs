//! The plots `--out` writes: one page of stacked panels on a shared time axis, each with its
//! label, frame and y scale, filled step areas and step lines. Both replays (NodeSet and
//! shared pool) draw with these pieces, so their plots look alike and stay small: a step is
//! drawn only where the value changes at the plot's resolution.

use std::fmt::Write;

pub const WIDTH: f64 = 960.0;
pub const LEFT: f64 = 60.0;
const RIGHT: f64 = 20.0;
pub const TOP: f64 = 40.0;

/// A page being drawn over the times `t0..t1`.
pub struct Page {
    s: String,
    t0: i64,
    t1: i64,
    height: f64,
}

impl Page {
    /// A white page of `height` with `title` on top, over `t0..t1`.
    pub fn new(title: &str, (t0, t1): (i64, i64), height: f64) -> Self {
        let mut s = String::new();
        let _ = writeln!(
            s,
            r##"<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="12">"##
        );
        let _ = writeln!(s, r##"<rect width="100%" height="100%" fill="white"/>"##);
        let _ = writeln!(
            s,
            r##"<text x="{LEFT}" y="22" font-size="15" font-weight="bold">{}</text>"##,
            escape(title)
        );
        Self { s, t0, t1, height }
    }

    pub fn x(&self, t: i64) -> f64 {
        LEFT + (t - self.t0) as f64 / (self.t1 - self.t0) as f64 * (WIDTH - LEFT - RIGHT)
    }

    /// A panel's label above it, its frame from `top` down `height`, and its scale `0..max`.
    pub fn panel(&mut self, label: &str, top: f64, height: f64, max: f64) {
        let s = &mut self.s;
        let _ = writeln!(
            s,
            r##"<text x="{LEFT}" y="{:.1}">{}</text>"##,
            top - 5.0,
            escape(label)
        );
        let _ = writeln!(
            s,
            r##"<rect x="{LEFT}" y="{top:.1}" width="{:.1}" height="{height}" fill="none" stroke="#999"/>"##,
            WIDTH - LEFT - RIGHT
        );
        let _ = writeln!(
            s,
            r##"<text x="{:.1}" y="{:.1}" text-anchor="end">{max:.0}</text><text x="{:.1}" y="{:.1}" text-anchor="end">0</text>"##,
            LEFT - 4.0,
            top + 10.0,
            LEFT - 4.0,
            top + height
        );
    }

    /// The step segments (` Lx,y …`) of `(time, y)` points, held to the page's end.
    pub fn steps(&self, points: impl Iterator<Item = (i64, f64)>) -> String {
        let mut d = String::new();
        let mut last: Option<String> = None;
        for (t, y) in points {
            let yv = format!("{y:.1}");
            if last.as_deref() != Some(yv.as_str()) {
                if let Some(prev) = &last {
                    let _ = write!(d, " L{:.1},{prev}", self.x(t));
                }
                let _ = write!(d, " L{:.1},{yv}", self.x(t));
                last = Some(yv);
            }
        }
        if let Some(prev) = last {
            let _ = write!(d, " L{:.1},{prev}", self.x(self.t1));
        }
        d
    }

    /// The area under `steps` (from [`Page::steps`]) down to `base` (a y), from `from`.
    pub fn area(&self, from: i64, base: f64, steps: &str) -> String {
        format!(
            "M{:.1},{base:.1}{steps} L{:.1},{base:.1} Z",
            self.x(from),
            self.x(self.t1)
        )
    }

    /// `steps` as a line.
    pub fn line(steps: &str) -> String {
        format!("M{}", steps.trim_start().trim_start_matches('L'))
    }

    /// A `<path>` with `d` and its attributes.
    pub fn path(&mut self, d: &str, attrs: &str) {
        let _ = writeln!(self.s, r##"<path d="{d}" {attrs}/>"##);
    }

    /// The legend at the bottom, and the page as text.
    pub fn finish(mut self, legend: &str) -> String {
        let bottom = self.height - 12.0;
        let _ = writeln!(self.s, r##"<text x="{LEFT}" y="{bottom}">{legend}</text>"##);
        self.s.push_str("</svg>\n");
        self.s
    }
}

/// The first and last time of `timelines` (at least a second apart).
pub fn span(timelines: impl Iterator<Item = (i64, i64)> + Clone) -> (i64, i64) {
    let t0 = timelines.clone().map(|(a, _)| a).min().unwrap_or(0);
    let t1 = timelines
        .map(|(_, b)| b)
        .max()
        .unwrap_or(t0 + 1)
        .max(t0 + 1);
    (t0, t1)
}

pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
