//! A log of which slots changed, read by several readers at their own pace: the simulated
//! slurmctld logs node records whose Slurm view changed, the simulated Kubernetes nodes whose
//! pods changed. A view reads only what changed since it last looked, which is what keeps a
//! month's replay at thousands of nodes fast. The log is cut when it grows past a few times
//! the slot count; a reader left behind is told so and rereads every slot.

/// Changed slots in order, from the `from`-th change on.
#[derive(Debug, Default)]
pub struct Touched {
    slots: Vec<u32>,
    from: u64,
}

impl Touched {
    /// Logs `slots` as changed; `of` is how many slots there are, which bounds the log.
    pub fn record(&mut self, slots: &[u32], of: usize) {
        if self.slots.len() > 4 * of {
            self.from += self.slots.len() as u64;
            self.slots.clear();
        }
        self.slots.extend_from_slice(slots);
    }

    /// Slots changed since a reader's `cursor` (0 at first), and its new cursor; `None` when
    /// the log no longer reaches back that far and every slot must be read again.
    pub fn since(&self, cursor: u64) -> (Option<&[u32]>, u64) {
        let end = self.from + self.slots.len() as u64;
        let since = cursor
            .checked_sub(self.from)
            .map(|i| &self.slots[i as usize..]);
        (since, end)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_gets_what_changed_since_it_looked_or_is_told_to_reread_all() {
        let mut log = Touched::default();
        log.record(&[3, 1], 2);
        let (seen, cursor) = log.since(0);
        assert_eq!(seen, Some(&[3, 1][..]));
        log.record(&[0], 2);
        assert_eq!(log.since(cursor), (Some(&[0][..]), 3));
        // Past four times the slot count the log is cut: an old cursor rereads everything.
        for _ in 0..8 {
            log.record(&[1], 2);
        }
        let (seen, end) = log.since(cursor);
        assert_eq!(seen, None);
        assert_eq!(log.since(end), (Some(&[][..]), end));
    }
}
