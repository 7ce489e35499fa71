//! Fault harness: fault scenarios against real workers ([`faults`]) and an independent checker ([`checker`]) that proves no turn was lost or duplicated; `turnstile chaos`.

// Test harness, never in a release build: declared behind `#[cfg(feature = "harness")]`.
// Ungating it fails `cargo check --lib --bins` (no features; scripts/test.sh) here.
#[cfg(not(feature = "harness"))]
compile_error!(
    "src/chaos is test harness: keep its `mod` line behind #[cfg(feature = \"harness\")]"
);

pub mod checker;
pub mod faults;

/// A tiny seeded xorshift64* generator: reproducible fault schedules without a dependency.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // A zero state would stay zero forever.
        Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform enough in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Rng;

    #[test]
    fn same_seed_same_sequence_and_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..1000 {
            let x = a.below(10);
            assert_eq!(x, b.below(10));
            assert!(x < 10);
        }
        assert_eq!(Rng::new(0).below(0), 0);
    }
}
