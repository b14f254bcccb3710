//! `--interleave trials`: the searches of every DUT at one (repetition, size) run at once,
//! their trials taking turns, so that a pair of DUTs is compared under the same host
//! moments rather than searches tens of seconds apart.
//!
//! This machine's host changes what a CPU delivers every few seconds (placement, neighbours,
//! stalls), and a search of one DUT takes 5-20 s: DUTs searched one after the other see
//! different hosts, and the ratio of a pair moves by 20-40% from one repetition to the next.
//! Taking turns trial by trial puts their trials a fraction of a second apart. Every DUT is
//! started once per (repetition, size) and kept stopped (`SIGSTOP`, or parked for the
//! harness's own `none`) outside its turns, so that nothing of it runs while another is
//! measured; its turn resumes it, runs one trial (with its warm-up, against cold caches, as
//! every trial after a pause does) and stops it again.

use std::sync::{Condvar, Mutex};

/// Round-robin turns among `n` participants: one holds the turn at a time, in the order
/// 0, 1, ..., n-1, 0, ...; one that leaves is skipped from then on.
#[derive(Debug)]
pub(crate) struct Turns {
    state: Mutex<State>,
    cv: Condvar,
}

#[derive(Debug)]
struct State {
    next: usize,
    active: Vec<bool>,
}

impl State {
    /// The first participant after `me` still taking turns (`me` itself when alone).
    fn after(&self, me: usize) -> usize {
        let n = self.active.len();
        (1..=n)
            .map(|k| (me + k) % n)
            .find(|&i| self.active[i])
            .unwrap_or(me)
    }
}

impl Turns {
    pub(crate) fn new(n: usize) -> Turns {
        Turns {
            state: Mutex::new(State {
                next: 0,
                active: vec![true; n],
            }),
            cv: Condvar::new(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A participant that panicked left the state consistent (each change is one store).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Waits until it is `me`'s turn.
    pub(crate) fn take(&self, me: usize) {
        let mut s = self.lock();
        while s.next != me && s.active[s.next] {
            s = self.cv.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.next = me;
    }

    /// Ends `me`'s turn: the next participant's begins.
    pub(crate) fn pass(&self, me: usize) {
        let mut s = self.lock();
        if s.next == me {
            s.next = s.after(me);
        }
        self.cv.notify_all();
    }

    /// `me` takes no more turns (done, or failed); the turn passes on if it was `me`'s.
    pub(crate) fn leave(&self, me: usize) {
        let mut s = self.lock();
        s.active[me] = false;
        if s.next == me {
            s.next = s.after(me);
        }
        self.cv.notify_all();
    }
}

/// Leaves the turns when dropped: a search that returns early, fails or panics never holds
/// the others up.
pub(crate) struct Leave<'a>(pub(crate) &'a Turns, pub(crate) usize);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.leave(self.1);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn participants_take_turns_in_order_and_one_that_leaves_is_skipped() {
        let turns = Turns::new(3);
        let log = Mutex::new(Vec::new());
        std::thread::scope(|s| {
            for me in 0..3 {
                let (turns, log) = (&turns, &log);
                s.spawn(move || {
                    let _leave = Leave(turns, me);
                    // Participant 1 takes two turns, the others four.
                    for _ in 0..if me == 1 { 2 } else { 4 } {
                        turns.take(me);
                        log.lock().unwrap().push(me);
                        std::thread::sleep(std::time::Duration::from_millis(2));
                        turns.pass(me);
                    }
                });
            }
        });
        assert_eq!(log.into_inner().unwrap(), [0, 1, 2, 0, 1, 2, 0, 2, 0, 2]);
    }

    #[test]
    fn a_participant_that_panics_in_its_turn_does_not_hold_the_others_up() {
        let turns = std::sync::Arc::new(Turns::new(2));
        let t = turns.clone();
        let first = std::thread::spawn(move || {
            let _leave = Leave(&t, 0);
            t.take(0);
            panic!("a failed search");
        });
        let t = turns.clone();
        let second = std::thread::spawn(move || {
            let _leave = Leave(&t, 1);
            t.take(1);
            t.pass(1);
            true
        });
        assert!(first.join().is_err());
        assert!(matches!(second.join(), Ok(true)));
    }
}
