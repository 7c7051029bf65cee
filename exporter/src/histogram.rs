//! A latency histogram, counted where the time is measured (the Slurm client) and rendered
//! by the metric families. It depends on nothing in the crate, so the client below and the
//! metrics above can both use it without the client reaching up into the metrics.

/// Observations counted per upper bound (not cumulative; [`Out::histogram`] sums them).
#[derive(Clone, Debug, PartialEq)]
pub struct Histogram {
    pub bounds: &'static [f64],
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|b| v <= *b) {
            self.counts[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }
}
