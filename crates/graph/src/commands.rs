//! Commands from the control thread to a node (a queue handed over, an interface detached),
//! which the node looks for at every call.
//!
//! A node polls its commands once a frame, and almost always finds none: on an empty
//! channel `std::sync::mpsc::Receiver::try_recv` took about 70 instructions (under `--cost`),
//! for each of the nodes that poll, on every pass through the graph. [`channel`] pairs the
//! channel with a count of the commands sent, and the receiving side looks into the channel
//! only when the count moved past what it has taken: one load and a comparison otherwise.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SendError, Sender};

/// A device kind's queue commands: whatever else they say, each kind's nodes take the one
/// that drops an interface's queues, so that deleting an interface reaches every kind without
/// naming any.
pub trait QueueCommands: Send + 'static {
    /// The command that drops every queue of interface `ifindex` from the node.
    fn detach(ifindex: u32) -> Self;
}

/// A sender and a receiver of commands, counted (see the module).
pub fn channel<T>() -> (CommandSender<T>, Commands<T>) {
    let (tx, rx) = mpsc::channel();
    let sent = Arc::new(AtomicU64::new(0));
    (
        CommandSender {
            tx,
            sent: Arc::clone(&sent),
        },
        Commands {
            rx,
            sent: Some(sent),
            taken: 0,
        },
    )
}

/// The control thread's side of [`channel`].
#[derive(Debug)]
pub struct CommandSender<T> {
    tx: Sender<T>,
    sent: Arc<AtomicU64>,
}

impl<T> Clone for CommandSender<T> {
    fn clone(&self) -> Self {
        CommandSender {
            tx: self.tx.clone(),
            sent: Arc::clone(&self.sent),
        }
    }
}

impl<T> CommandSender<T> {
    /// Sends `c`; an error when the node's side is gone (its worker stopped).
    pub fn send(&self, c: T) -> Result<(), SendError<T>> {
        self.tx.send(c)?;
        // After the command is in the channel: a receiver that sees the count sees it.
        self.sent.fetch_add(1, Ordering::Release);
        Ok(())
    }
}

/// A node's side: [`channel`]'s, or a plain receiver (whose channel it then looks into at
/// every call, as nothing counts what was sent on it).
#[derive(Debug)]
pub struct Commands<T> {
    rx: Receiver<T>,
    sent: Option<Arc<AtomicU64>>,
    /// Commands taken from the channel so far.
    taken: u64,
}

impl<T> From<Receiver<T>> for Commands<T> {
    fn from(rx: Receiver<T>) -> Self {
        Commands {
            rx,
            sent: None,
            taken: 0,
        }
    }
}

impl<T> Commands<T> {
    /// The next command, if one was sent and not yet taken.
    #[inline]
    pub fn try_recv(&mut self) -> Option<T> {
        if let Some(sent) = &self.sent
            && sent.load(Ordering::Acquire) == self.taken
        {
            return None;
        }
        let c = self.rx.try_recv().ok()?;
        self.taken += 1;
        Some(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_sent_is_taken_once_in_order() {
        let (tx, mut rx) = channel();
        assert_eq!(rx.try_recv(), None::<u32>);
        for i in 0..3 {
            tx.send(i).unwrap();
        }
        let tx2 = tx.clone();
        tx2.send(3).unwrap();
        let got: Vec<u32> = std::iter::from_fn(|| rx.try_recv()).collect();
        assert_eq!(got, [0, 1, 2, 3]);
        assert_eq!(rx.try_recv(), None);
        tx.send(4).unwrap();
        assert_eq!(rx.try_recv(), Some(4));
        drop(rx);
        assert!(tx.send(5).is_err(), "the node's side is gone");
    }

    #[test]
    fn commands_from_another_thread_arrive() {
        let (tx, mut rx) = channel();
        let t = std::thread::spawn(move || (0..1000u32).for_each(|i| tx.send(i).unwrap()));
        let mut got = Vec::new();
        while got.len() < 1000 {
            got.extend(rx.try_recv());
        }
        t.join().unwrap();
        assert!(got.iter().copied().eq(0..1000));
        assert_eq!(rx.try_recv(), None);
    }

    #[test]
    fn a_plain_receiver_is_looked_into_every_time() {
        let (tx, rx) = mpsc::channel();
        let mut c = Commands::from(rx);
        tx.send(7u8).unwrap();
        assert_eq!((c.try_recv(), c.try_recv()), (Some(7), None));
    }
}
