//! The service manager (systemd `Type=notify`): readiness, reloads and stopping are told to
//! it over `$NOTIFY_SOCKET`, and its watchdog (`WatchdogSec=`, given as `$WATCHDOG_USEC`) is
//! fed from the control loop at half its period, so a control thread that hangs (and with it
//! the API, the memif handshakes and the tables) gets the daemon restarted. Without
//! `$NOTIFY_SOCKET` every call does nothing.

use std::time::{Duration, Instant};

use sd_notify::NotifyState;

#[derive(Debug)]
pub struct Service {
    /// Half the watchdog's period, when it is on.
    every: Option<Duration>,
    last: Instant,
}

impl Default for Service {
    fn default() -> Self {
        Service::new()
    }
}

impl Service {
    pub fn new() -> Service {
        let every = sd_notify::watchdog_enabled().map(|d| d / 2);
        if let Some(d) = every {
            tracing::info!(
                every_ms = d.as_millis() as u64,
                "systemd watchdog: fed from the control loop"
            );
        }
        Service {
            every,
            last: Instant::now(),
        }
    }

    /// Started (or reloaded): sockets listening, workers pinned.
    pub fn ready(&mut self, status: &str) {
        send(&[NotifyState::Ready, NotifyState::Status(status)]);
    }

    /// A reload begins (followed by [`ready`](Self::ready) when it is done).
    pub fn reloading(&mut self) {
        let mut v = vec![NotifyState::Reloading];
        if let Ok(now) = NotifyState::monotonic_usec_now() {
            v.push(now);
        }
        send(&v);
    }

    pub fn stopping(&mut self) {
        send(&[NotifyState::Stopping]);
    }

    /// Tells the watchdog the control loop is alive, when half its period has passed.
    pub fn feed_watchdog(&mut self) {
        if let Some(every) = self.every
            && self.last.elapsed() >= every
        {
            self.last = Instant::now();
            send(&[NotifyState::Watchdog]);
        }
    }
}

fn send(states: &[NotifyState<'_>]) {
    if let Err(e) = sd_notify::notify(states) {
        tracing::warn!(reason = %e, "cannot notify the service manager");
    }
}
