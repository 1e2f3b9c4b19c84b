//! The one random number generator of the tests: xorshift64* (Vigna), seeded and
//! reproducible, with no dependency. Random walks, random grammars and grammar mutations all
//! draw from it, so a failing walk replays from its seed.
//!
//! Included by the engine crate's tests (`common::rng`) and by the main crate's tests with
//! `#[path = "../crates/domino-engine/tests/common/rng.rs"] mod rng;` (one definition).

/// xorshift64*: a 64-bit xorshift state scrambled by a multiply on output.
pub struct Rng(u64);

impl Rng {
    /// A generator seeded with `seed` (a zero seed, the one xorshift fixed point, is replaced
    /// by a fixed odd constant so every seed gives a live sequence).
    pub fn new(seed: u64) -> Self {
        Rng(if seed == 0 {
            0x9E37_79B9_7F4A_7C15
        } else {
            seed
        })
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`0` when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }
}
