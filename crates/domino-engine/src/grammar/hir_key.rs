//! Regular expressions (HIR) as map keys, without printing them.
//!
//! Lowering deduplicates terminals by their regular expression and the terminal-DFA cache
//! is keyed by it. Printing a HIR to a string for that was a fifth of a typical JSON
//! Schema's lowering (the none-of-these-keys terminal alone prints to kilobytes).
//! [`hir_hash`] walks the HIR once instead; maps keyed by it compare the HIRs themselves
//! (`Hir: Eq`) on a hash match, so a collision costs a comparison, never a wrong terminal.
//!
//! Two HIRs are equal keys exactly when `regex-syntax` considers them equal — the same
//! structure, which is finer than language equality (as the printed form was).

use crate::hash::Fnv1a;
use regex_syntax::hir::{Class, Hir, HirKind};

/// A structural hash of `hir` (equal HIRs hash equally). Iterative: HIRs may nest deeply.
pub fn hir_hash(hir: &Hir) -> u64 {
    hir_facts(hir).hash
}

/// What lowering needs to know of a HIR it did not build: its node count, its nesting depth
/// and its [`hir_hash`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HirFacts {
    /// Number of nodes.
    pub size: usize,
    /// Nodes on the longest path from the root (a leaf alone: 1).
    pub depth: usize,
    /// Equal to [`hir_hash`] of the same HIR.
    pub hash: u64,
    /// Whether lowering's normalization would leave it as it is (no capture, no empty
    /// language below the top, no ε-only or `{1,1}` repetition, no `Empty` inside a
    /// concatenation): asked of every regex leaf of every rule, and a walk of a big key set.
    pub normalized: bool,
}

/// [`HirFacts`] of `hir`, in one walk. The large HIRs (a key-exclusion set, a format) were
/// walked three times by lowering (size, depth, hash), and each walk of a HIR that is no
/// longer in the cache costs a memory access per node: on Kubernetes schemas the
/// hash walk alone was a tenth of lowering.
pub fn hir_facts(hir: &Hir) -> HirFacts {
    let mut h = Fnv1a::new();
    let (mut size, mut depth) = (0usize, 0usize);
    let mut normalized = true;
    let mut stack = vec![(hir, 1usize)];
    while let Some((x, d)) = stack.pop() {
        size += 1;
        depth = depth.max(d);
        hash_node(&mut h, x);
        normalized = normalized && crate::grammar::lower::node_is_normalized(x);
        match x.kind() {
            HirKind::Repetition(r) => stack.push((&r.sub, d + 1)),
            HirKind::Capture(c) => stack.push((&c.sub, d + 1)),
            HirKind::Concat(v) | HirKind::Alternation(v) => {
                stack.extend(v.iter().rev().map(|c| (c, d + 1)))
            }
            _ => {}
        }
    }
    HirFacts {
        size,
        depth,
        hash: h.finish(),
        normalized,
    }
}

/// The part of [`hir_hash`] one node contributes (its children are hashed after it, in
/// order).
fn hash_node(h: &mut Fnv1a, x: &Hir) {
    match x.kind() {
        HirKind::Empty => {
            h.write_u8(0);
        }
        HirKind::Literal(l) => {
            h.write_u8(1).write_word(l.0.len() as u64).write(&l.0);
        }
        HirKind::Class(Class::Unicode(c)) => {
            h.write_u8(2).write_word(c.ranges().len() as u64);
            for r in c.ranges() {
                h.write_word(((r.start() as u64) << 32) | r.end() as u64);
            }
        }
        HirKind::Class(Class::Bytes(c)) => {
            h.write_u8(3).write_word(c.ranges().len() as u64);
            for r in c.ranges() {
                h.write_word(((r.start() as u64) << 8) | r.end() as u64);
            }
        }
        HirKind::Look(l) => {
            h.write_u8(4).write_word(l.as_repr() as u64);
        }
        HirKind::Repetition(r) => {
            h.write_u8(5)
                .write_word(r.min as u64)
                .write_word(r.max.map_or(u64::MAX, |m| m as u64))
                .write_u8(r.greedy as u8);
        }
        HirKind::Capture(c) => {
            h.write_u8(6).write_word(c.index as u64);
        }
        HirKind::Concat(v) => {
            h.write_u8(7).write_word(v.len() as u64);
        }
        HirKind::Alternation(v) => {
            h.write_u8(8).write_word(v.len() as u64);
        }
    }
}

/// A structural hash of a front end's expression (equal expressions hash equally; regex
/// leaves by their [`RegexHir::facts`](crate::grammar::regex_hir::RegexHir::facts) hash,
/// which is [`hir_hash`] for a built HIR). Iterative, like [`hir_hash`].
pub fn expr_hash(e: &crate::grammar::expr::Expr) -> u64 {
    use crate::grammar::expr::Expr;
    let mut h = Fnv1a::new();
    // (The stack allocates only below a sequence, alternation or repetition: most items
    // hashed are leaves, a literal or a regex, and lowering hashes every distinct one.)
    let mut stack = Vec::new();
    let mut next = Some(e);
    while let Some(x) = next.take().or_else(|| stack.pop()) {
        match x {
            Expr::Empty => {
                h.write_u8(0);
            }
            Expr::Bytes(b) => {
                h.write_u8(1).write_word(b.len() as u64).write(b);
            }
            Expr::Regex(hir) => {
                h.write_u8(2).write_word(hir.facts().hash);
            }
            Expr::Constrained { hir, constraints } => {
                h.write_u8(3).write_word(constrained_hash(hir, constraints));
            }
            Expr::Ref(r) => {
                h.write_u8(4).write_word(r.0 as u64);
            }
            Expr::Seq(v) => {
                h.write_u8(5).write_word(v.len() as u64);
                stack.extend(v.iter().rev());
            }
            Expr::Alt(v) => {
                h.write_u8(6).write_word(v.len() as u64);
                stack.extend(v.iter().rev());
            }
            Expr::RefPairs(pairs) => {
                h.write_u8(8).write_word(pairs.len() as u64);
                for &[a, b] in pairs.iter() {
                    h.write_word(u64::from(a.0) << 32 | u64::from(b.0));
                }
            }
            Expr::Repeat { expr, min, max } => {
                h.write_u8(7)
                    .write_word(*min as u64)
                    .write_word(max.map_or(u64::MAX, |m| m as u64));
                stack.push(expr);
            }
        }
    }
    h.finish()
}

/// A hash of a terminal's HIR and its constraints (each part's [`hir_hash`], tagged).
pub fn constrained_hash(hir: &Hir, constraints: &crate::grammar::ir::Constraints) -> u64 {
    constrained_hash_of(hir_hash(hir), constraints)
}

/// [`constrained_hash`] from the HIR's [`hir_hash`], already known (a terminal carries it:
/// lowering hashed it to deduplicate, and walking a large HIR again for the terminal-DFA
/// cache was 2 % of compiling the whole JSONSchemaBench set).
pub fn constrained_hash_of(of_hir: u64, constraints: &crate::grammar::ir::Constraints) -> u64 {
    let mut h = Fnv1a::new();
    h.write_word(of_hir);
    for (tag, parts) in [(1u8, &constraints.and), (2u8, &constraints.and_not)] {
        for p in parts {
            h.write_u8(tag).write_word(hir_hash(p));
        }
    }
    h.finish()
}

/// Approximate heap bytes of a HIR (its nodes, literal bytes and class ranges), for caches
/// that keep one as a key.
pub fn hir_bytes(hir: &Hir) -> usize {
    let mut n = 0usize;
    let mut stack = vec![hir];
    while let Some(x) = stack.pop() {
        n += std::mem::size_of::<Hir>() + 32;
        match x.kind() {
            HirKind::Literal(l) => n += l.0.len(),
            HirKind::Class(Class::Unicode(c)) => n += c.ranges().len() * 8,
            HirKind::Class(Class::Bytes(c)) => n += c.ranges().len() * 2,
            HirKind::Repetition(r) => stack.push(&r.sub),
            HirKind::Capture(c) => stack.push(&c.sub),
            HirKind::Concat(v) | HirKind::Alternation(v) => stack.extend(v.iter()),
            HirKind::Empty | HirKind::Look(_) => {}
        }
    }
    n
}

/// A map from HIRs (by [`hir_hash`] and equality) to values, looked up without cloning or
/// printing the HIR.
#[derive(Clone, Debug)]
pub struct HirMap<V> {
    buckets: std::collections::HashMap<u64, Vec<(Hir, V)>>,
    len: usize,
}

impl<V> Default for HirMap<V> {
    fn default() -> Self {
        HirMap {
            buckets: Default::default(),
            len: 0,
        }
    }
}

impl<V> HirMap<V> {
    /// The value of `hir` (whose [`hir_hash`] is `hash`).
    pub fn get(&self, hash: u64, hir: &Hir) -> Option<&V> {
        self.buckets
            .get(&hash)?
            .iter()
            .find(|(h, _)| h == hir)
            .map(|(_, v)| v)
    }

    /// Keep `v` for `hir` (whose [`hir_hash`] is `hash`), replacing an equal key's value.
    pub fn insert(&mut self, hash: u64, hir: Hir, v: V) {
        let bucket = self.buckets.entry(hash).or_default();
        match bucket.iter_mut().find(|(h, _)| *h == hir) {
            Some(slot) => slot.1 = v,
            None => {
                bucket.push((hir, v));
                self.len += 1;
            }
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn clear(&mut self) {
        self.buckets.clear();
        self.len = 0;
    }

    /// Every value.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.buckets.values().flatten().map(|(_, v)| v)
    }
}

/// Test helper: `re` parsed as a byte-oriented HIR (`utf8(false)`, so classes may match
/// any byte), panicking on a bad pattern.
#[cfg(test)]
pub(crate) fn parse_bytes(re: &str) -> Hir {
    regex_syntax::ParserBuilder::new()
        .utf8(false)
        .build()
        .parse(re)
        .unwrap()
}

#[cfg(test)]
mod tests {
    use super::parse_bytes as parse;
    use super::*;

    #[test]
    fn equal_hirs_hash_equally_and_different_ones_differ() {
        let res = [
            "a",
            "ab",
            "[a-z]+",
            "[a-z]*",
            "[a-z]{2,5}",
            "[a-z]{2,6}",
            "(a|b)c",
            "a|bc",
            "(?-u:\\xff)",
            "\\bx",
            "é+",
            "",
            "(a)(b)",
            "ab|",
        ];
        let mut hashes = std::collections::HashMap::new();
        for re in res {
            let h = hir_hash(&parse(re));
            assert_eq!(h, hir_hash(&parse(re)), "{re}");
            if let Some(other) = hashes.insert(h, re) {
                panic!("{re} and {other} collide");
            }
        }
        let mut m = HirMap::default();
        for (i, re) in res.iter().enumerate() {
            let h = parse(re);
            m.insert(hir_hash(&h), h, i);
        }
        assert_eq!(m.len(), res.len());
        for (i, re) in res.iter().enumerate() {
            let h = parse(re);
            assert_eq!(m.get(hir_hash(&h), &h), Some(&i));
        }
        // A colliding hash still finds only the equal HIR.
        let h = parse("zz");
        assert_eq!(m.get(hir_hash(&parse("a")), &h), None);
    }

    /// Size and depth by their recursive definitions.
    fn size_depth(h: &Hir) -> (usize, usize) {
        let kids: Vec<&Hir> = match h.kind() {
            HirKind::Repetition(r) => vec![&r.sub],
            HirKind::Capture(c) => vec![&c.sub],
            HirKind::Concat(v) | HirKind::Alternation(v) => v.iter().collect(),
            _ => vec![],
        };
        kids.iter()
            .map(|k| size_depth(k))
            .fold((1, 1), |(s, d), (ks, kd)| (s + ks, d.max(kd + 1)))
    }

    #[test]
    fn facts_agree_with_the_hash_and_the_definitions() {
        for re in [
            "a",
            "",
            "(a|b)c",
            "((ab)*|[x-z]{2,5})+q(?-u:\\xff)",
            "\\bx(é|[^a])?",
            "a(b(c(d|e)f)g)h|i",
        ] {
            let h = parse(re);
            let f = hir_facts(&h);
            assert_eq!(f.hash, hir_hash(&h), "{re}");
            assert_eq!((f.size, f.depth), size_depth(&h), "{re}");
        }
    }
}
