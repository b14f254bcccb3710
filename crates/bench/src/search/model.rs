//! A deterministic device under test, for the search tests and demos.

use std::time::Duration;

use super::{Measurement, Measurer};

/// Forwards up to `capacity_pps` and loses every frame above it; with probability
/// `hiccup_prob` per trial it also loses `hiccup_loss` of what it forwarded (at least one
/// frame), as a noisy software DUT does; its generator cannot send faster than
/// `gen_max_pps` (the rest is shortfall). Same seed, same trials: same results.
#[derive(Debug, Clone)]
pub struct ModelDut {
    pub capacity_pps: f64,
    pub hiccup_prob: f64,
    pub hiccup_loss: f64,
    pub gen_max_pps: f64,
    pub seed: u64,
    rng: u64,
}

impl ModelDut {
    /// A clean DUT: no hiccups, an unlimited generator.
    pub fn new(capacity_pps: f64, seed: u64) -> ModelDut {
        ModelDut {
            capacity_pps,
            hiccup_prob: 0.0,
            hiccup_loss: 0.0,
            gen_max_pps: f64::INFINITY,
            seed,
            rng: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    pub fn with_hiccups(self, prob: f64, loss: f64) -> ModelDut {
        ModelDut {
            hiccup_prob: prob,
            hiccup_loss: loss,
            ..self
        }
    }

    pub fn with_generator_max(self, pps: f64) -> ModelDut {
        ModelDut {
            gen_max_pps: pps,
            ..self
        }
    }

    /// xorshift64, uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 11) as f64 / (1u64 << 53) as f64
    }
}

impl Measurer for ModelDut {
    fn measure(&mut self, load_pps: f64, duration: Duration) -> Result<Measurement, String> {
        let secs = duration.as_secs_f64();
        if !(load_pps.is_finite() && load_pps >= 0.0 && secs > 0.0) {
            return Err(format!("model: cannot offer {load_pps} pps for {secs} s"));
        }
        let frames = |pps: f64| (pps * secs).round() as u64;
        let offered = frames(load_pps);
        let sent = frames(load_pps.min(self.gen_max_pps)).min(offered);
        let forwarded = sent.min(frames(self.capacity_pps));
        let lost = match self.uniform() < self.hiccup_prob {
            true => ((forwarded as f64 * self.hiccup_loss).ceil() as u64).max(1),
            false => 0,
        };
        let received = forwarded - lost.min(forwarded);
        Ok(Measurement {
            load_pps,
            duration_s: secs,
            offered,
            sent,
            received,
            shortfall: offered - sent,
            tx_pps: sent as f64 / secs,
            rx_pps: received as f64 / secs,
        })
    }
}
