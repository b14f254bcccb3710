//! Log lines that could repeat (a client asking the same bad question every second, a socket
//! that keeps failing): the first is logged, identical ones within a minute are counted, and
//! the count is told with the next one logged after that.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How long identical lines are counted rather than logged.
const QUIET: Duration = Duration::from_secs(60);

/// Keys are whole messages; at most this many are remembered (the oldest are forgotten).
const KEEP: usize = 256;

#[derive(Debug, Default)]
pub(super) struct Repeats {
    seen: HashMap<String, (Instant, u64)>,
}

impl Repeats {
    /// Whether to log `key` now and how many identical lines were held back since it was
    /// last logged.
    pub(super) fn admit(&mut self, key: &str) -> Option<u64> {
        let now = Instant::now();
        match self.seen.get_mut(key) {
            Some((last, held)) if now.duration_since(*last) < QUIET => {
                *held += 1;
                None
            }
            Some((last, held)) => {
                *last = now;
                Some(std::mem::take(held))
            }
            None => {
                if self.seen.len() >= KEEP {
                    self.seen.retain(|_, (t, _)| now.duration_since(*t) < QUIET);
                }
                if self.seen.len() < KEEP {
                    self.seen.insert(key.to_string(), (now, 0));
                }
                Some(0)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_is_logged_and_repeats_are_counted() {
        let mut r = Repeats::default();
        assert_eq!(r.admit("a"), Some(0));
        assert_eq!(r.admit("a"), None);
        assert_eq!(r.admit("a"), None);
        assert_eq!(r.admit("b"), Some(0));
        // A minute later the next one is logged with the count.
        r.seen.get_mut("a").unwrap().0 -= QUIET;
        assert_eq!(r.admit("a"), Some(2));
        assert_eq!(r.admit("a"), None);
    }
}
