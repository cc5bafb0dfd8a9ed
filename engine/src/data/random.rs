//! The randomness the interpreter uses (task tokens, retry jitter, `States.UUID`,
//! `States.MathRandom` without a seed), drawn from a [`Seed`] its caller supplies: the same seed
//! gives the same values, so applying an event is a function of its inputs.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::cell::RefCell;

/// The 32 bytes all the randomness of one interpreter step comes from. The driver draws a fresh
/// one from the operating system's generator for every step, which is what keeps task tokens
/// unguessable; tests and replays pass a fixed one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Seed(pub [u8; 32]);

impl Seed {
    /// A seed made from a number (its little-endian bytes, then zeros): for tests and replays,
    /// never for tokens anyone must not guess.
    pub fn from_u64(n: u64) -> Seed {
        let mut bytes = [0u8; 32];
        bytes[..8].copy_from_slice(&n.to_le_bytes());
        Seed(bytes)
    }
}

/// A seeded generator shared by everything one step evaluates. It hands out values through `&self`
/// because the data flow reaches it through a shared [`super::Scope`]; a step runs on one thread.
#[derive(Debug)]
pub struct Randomness {
    rng: RefCell<StdRng>,
}

impl Randomness {
    pub fn new(seed: Seed) -> Self {
        Randomness {
            rng: RefCell::new(StdRng::from_seed(seed.0)),
        }
    }

    pub fn bytes<const N: usize>(&self) -> [u8; N] {
        let mut bytes = [0u8; N];
        self.rng.borrow_mut().fill(&mut bytes[..]);
        bytes
    }

    /// A number in `[0, 1)`.
    pub fn fraction(&self) -> f64 {
        self.rng.borrow_mut().random()
    }

    /// An integer in `[low, high]`; `low` must not exceed `high`.
    pub fn between(&self, low: i64, high: i64) -> i64 {
        self.rng.borrow_mut().random_range(low..=high)
    }

    /// A version 4 (random) UUID.
    pub fn uuid(&self) -> uuid::Uuid {
        uuid::Builder::from_random_bytes(self.bytes()).into_uuid()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_seed_gives_the_same_values_and_another_seed_others() {
        let draw = |seed: u64| {
            let r = Randomness::new(Seed::from_u64(seed));
            (
                r.bytes::<16>(),
                r.fraction(),
                r.between(1, 1_000_000),
                r.uuid(),
            )
        };
        assert_eq!(draw(7), draw(7));
        let (a, b) = (draw(7), draw(8));
        assert_ne!(a.0, b.0);
        assert_ne!(a.3, b.3);
    }

    #[test]
    fn values_stay_in_their_ranges() {
        let r = Randomness::new(Seed::from_u64(1));
        for _ in 0..1000 {
            assert!((0.0..1.0).contains(&r.fraction()));
            assert!((-3..=3).contains(&r.between(-3, 3)));
        }
        assert_eq!(r.between(5, 5), 5);
        assert_eq!(r.uuid().get_version_num(), 4);
    }
}
