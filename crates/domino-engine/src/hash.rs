//! FNV-1a, the one 64-bit hash for stable keys: vocabulary and grammar fingerprints, tree
//! cache checksums, draft contexts, file-name fingerprints.
//!
//! Why FNV-1a and not `std`'s hasher: the values are written to disk (tree caches, draft
//! statistics) and compared across runs, processes and platforms, so the function must be
//! fixed forever; `DefaultHasher` may change between Rust releases. Changing anything here
//! invalidates every persisted file.

/// 64-bit FNV-1a of `bytes`.
pub fn fnv1a(bytes: &[u8]) -> u64 {
    Fnv1a::new().write(bytes).finish()
}

/// Incremental 64-bit FNV-1a: `state = (state ^ byte) · PRIME` per byte, from
/// [`Fnv1a::OFFSET_BASIS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv1a {
    state: u64,
}

impl Default for Fnv1a {
    fn default() -> Self {
        Fnv1a::new()
    }
}

impl Fnv1a {
    /// The initial state.
    pub const OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;
    /// The multiplier applied after each byte (or word).
    pub const PRIME: u64 = 0x0100_0000_01b3;

    /// A hash of nothing yet.
    pub const fn new() -> Self {
        Fnv1a {
            state: Self::OFFSET_BASIS,
        }
    }

    /// Continue from `state`: a previous [`Fnv1a::finish`] (to extend a hash) or a seed.
    pub const fn resume(state: u64) -> Self {
        Fnv1a { state }
    }

    /// Feed `bytes`, one FNV-1a step each.
    pub fn write(&mut self, bytes: &[u8]) -> &mut Self {
        for &b in bytes {
            self.write_u8(b);
        }
        self
    }

    /// Feed one byte.
    #[inline]
    pub fn write_u8(&mut self, b: u8) -> &mut Self {
        self.state = (self.state ^ b as u64).wrapping_mul(Self::PRIME);
        self
    }

    /// Feed a whole 64-bit word in ONE step (`state = (state ^ w) · PRIME`): the word-wise
    /// variant the draft contexts use, not the same as writing the word's 8 bytes.
    #[inline]
    pub fn write_word(&mut self, w: u64) -> &mut Self {
        self.state = (self.state ^ w).wrapping_mul(Self::PRIME);
        self
    }

    /// Feed `bytes` eight at a time, one [`Fnv1a::write_word`] step per word (the last one
    /// zero-padded), then their length: a hash of the bytes for in-process tables, several
    /// times faster than [`Fnv1a::write`] on long strings and not the same value.
    pub fn write_words(&mut self, bytes: &[u8]) -> &mut Self {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.write_word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.write_word(u64::from_le_bytes(w));
        }
        self.write_word(bytes.len() as u64)
    }

    /// The hash of everything fed so far.
    pub fn finish(&self) -> u64 {
        self.state
    }
}

/// A fast [`std::hash::BuildHasher`] for maps keyed by small integers, tuples and slices of
/// them and pointers (the JSON Schema front end's member-state maps, lowering's and the
/// scanner builder's maps; SipHash in the latter was 1 % of compiling the slowest
/// JSONSchemaBench schemas): each integer is one word-wise FNV-1a
/// step, finished with the SplitMix64 mixer so hashbrown's bucket index (low bits) and tag
/// (high bits) both depend on every word. Not for untrusted keys (no DoS resistance); std's
/// SipHash was a tenth of building a large object's member states.
#[derive(Clone, Copy, Debug, Default)]
pub struct WordHashBuilder;

/// The [`std::hash::Hasher`] of [`WordHashBuilder`].
#[derive(Clone, Copy, Debug)]
pub struct WordHasher(Fnv1a);

impl std::hash::BuildHasher for WordHashBuilder {
    type Hasher = WordHasher;
    fn build_hasher(&self) -> WordHasher {
        WordHasher(Fnv1a::new())
    }
}

impl std::hash::Hasher for WordHasher {
    fn write(&mut self, bytes: &[u8]) {
        self.0.write(bytes);
    }
    fn write_u32(&mut self, n: u32) {
        self.0.write_word(n as u64);
    }
    fn write_u64(&mut self, n: u64) {
        self.0.write_word(n);
    }
    fn write_usize(&mut self, n: usize) {
        self.0.write_word(n as u64);
    }
    fn finish(&self) -> u64 {
        let mut z = self.0.finish();
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// A `HashMap` with [`WordHashBuilder`].
pub type WordHashMap<K, V> = std::collections::HashMap<K, V, WordHashBuilder>;
/// A `HashSet` with [`WordHashBuilder`].
pub type WordHashSet<K> = std::collections::HashSet<K, WordHashBuilder>;

#[cfg(test)]
mod tests {

    /// Word-wise hashing is a function of the bytes: equal slices hash alike wherever they
    /// start, and trailing zero bytes (the padding of the last word) still tell slices apart.
    #[test]
    fn write_words_tells_lengths_and_contents_apart() {
        let h = |b: &[u8]| Fnv1a::new().write_words(b).finish();
        let text = b"properties/containers/items/0";
        assert_eq!(h(&text[3..20]), h(&text.to_vec()[3..20]));
        let mut seen = std::collections::HashSet::new();
        for b in [
            &b""[..],
            b"a",
            b"a\0",
            b"a\0\0\0\0\0\0\0",
            b"a\0\0\0\0\0\0\0\0",
            b"abcdefgh",
            b"abcdefghi",
            b"b",
        ] {
            assert!(seen.insert(h(b)), "{b:?}");
        }
    }

    use super::*;

    #[test]
    fn matches_the_published_fnv1a_test_vectors() {
        // From the FNV reference (draft-eastlake-fnv): "", "a", "foobar".
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn incremental_writes_and_resume_equal_one_shot() {
        let mut h = Fnv1a::new();
        h.write(b"foo").write_u8(b'b');
        let resumed = Fnv1a::resume(h.finish()).write(b"ar").finish();
        assert_eq!(resumed, fnv1a(b"foobar"));
    }

    #[test]
    fn a_word_is_one_step_not_eight_bytes() {
        let mut word = Fnv1a::new();
        word.write_word(0x61);
        assert_eq!(word.finish(), fnv1a(b"a"));
        let mut bytes = Fnv1a::new();
        bytes.write(&0x61u64.to_le_bytes());
        assert_ne!(bytes.finish(), word.finish());
    }
}
