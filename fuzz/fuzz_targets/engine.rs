//! Differential engine target: a small random grammar and vocabulary drawn from the input,
//! then a walk of commits and rollbacks. At every step the engine's k = ∞ mask must equal
//! the reference recognizer's brute-force mask `{t : prefix · bytes(t) is viable}` (EOG iff
//! the prefix is a sentence), `allows` must agree with the mask, and after a rollback the
//! mask must equal the one computed at that point before, and the bytes the engine says every
//! continuation starts with (`forced_bytes`, what the decoder writes without sampling) must be
//! exactly the reference's: no other byte is viable at each of their positions, the prefix
//! before them is not a sentence, and they stop at a sentence or a real choice.
#![no_main]

use domino_engine::engine::{CompiledGrammar, Constraint, Options};
use domino_engine::grammar::{gbnf, lower, reference::ReferenceRecognizer};
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

/// Reads the fuzz input as a stream of choices (zeros once exhausted).
struct Choices<'a>(&'a [u8]);

impl Choices<'_> {
    fn byte(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }
    fn below(&mut self, n: usize) -> usize {
        self.byte() as usize % n.max(1)
    }
}

const ATOMS: [&str; 8] = ["\"a\"", "\"b\"", "\"ab\"", "[a-c]", "[0-9]+", "\"(\"", "\")\"", "\" \"?"];

/// `r0 ::= …`, up to 4 rules, each up to 3 alternatives of up to 4 items: atoms, references
/// to any rule (recursion included), and `*`, `+`, `?`, `{m,n}` suffixes.
fn grammar(c: &mut Choices) -> String {
    let rules = 1 + c.below(4);
    let mut text = String::new();
    for r in 0..rules {
        text.push_str(&format!("r{r} ::= "));
        let alts = 1 + c.below(3);
        for a in 0..alts {
            if a > 0 {
                text.push_str(" | ");
            }
            for _ in 0..1 + c.below(4) {
                let k = c.below(ATOMS.len() + rules);
                let item = if k < ATOMS.len() {
                    ATOMS[k].to_string()
                } else {
                    format!("r{}", k - ATOMS.len())
                };
                let suffix = match c.below(8) {
                    0 => "*".to_string(),
                    1 => "+".to_string(),
                    2 => "?".to_string(),
                    3 => format!("{{{},{}}}", c.below(3), 3 + c.below(3)),
                    _ => String::new(),
                };
                text.push_str(&format!("({item}){suffix} "));
            }
        }
        text.push('\n');
    }
    text
}

/// Single bytes over the grammar's alphabet, then up to 24 multi-byte tokens; last = EOG.
fn vocab(c: &mut Choices) -> Arc<Vocabulary> {
    let alphabet = b"ab()01 9cx";
    let mut tokens: Vec<Vec<u8>> = alphabet.iter().map(|&b| vec![b]).collect();
    for _ in 0..c.below(25) {
        let len = 2 + c.below(4);
        tokens.push((0..len).map(|_| alphabet[c.below(alphabet.len())]).collect());
    }
    tokens.push(Vec::new());
    let n = tokens.len();
    let mut special = vec![false; n];
    special[n - 1] = true;
    Arc::new(Vocabulary::new(tokens, special, vec![TokenId(n as u32 - 1)]))
}

fn oracle(r: &ReferenceRecognizer, prefix: &[u8], vocab: &Vocabulary) -> TokenSet {
    let mut want = TokenSet::new(vocab.len());
    for i in 0..vocab.len() {
        let t = TokenId(i as u32);
        let ok = if vocab.is_eog(t) {
            r.accepts(prefix)
        } else {
            let mut s = prefix.to_vec();
            s.extend_from_slice(vocab.bytes(t));
            !vocab.bytes(t).is_empty() && r.is_viable_prefix(&s)
        };
        if ok {
            want.insert(t);
        }
    }
    want
}

/// `forced` is what every continuation of `prefix` starts with, and no longer than that.
fn check_forced(r: &ReferenceRecognizer, prefix: &[u8], forced: &[u8], text: &str) {
    let viable_after = |extra: &[u8]| -> Vec<u8> {
        (0..=255u8)
            .filter(|&b| {
                let mut s = prefix.to_vec();
                s.extend_from_slice(extra);
                s.push(b);
                r.is_viable_prefix(&s)
            })
            .collect()
    };
    for i in 0..forced.len() {
        let mut s = prefix.to_vec();
        s.extend_from_slice(&forced[..i]);
        assert!(!r.accepts(&s), "forced bytes past a sentence\n{text}");
        assert_eq!(viable_after(&forced[..i]), vec![forced[i]], "forced byte {i} is not the only one\n{text}");
    }
    let mut end = prefix.to_vec();
    end.extend_from_slice(forced);
    if forced.len() < 4096 && !r.accepts(&end) {
        assert!(viable_after(forced).len() != 1, "forced bytes stop before a choice\n{text}");
    }
}

fuzz_target!(|data: &[u8]| {
    let mut c = Choices(data);
    let text = grammar(&mut c);
    let Ok(def) = gbnf::parse(&text, "r0") else { return };
    let Ok(g) = lower::lower(&def) else { return };
    let Ok(r) = ReferenceRecognizer::new(&g) else { return };
    let Ok(cg) = CompiledGrammar::new(g) else { return };
    let vocab = vocab(&mut c);
    let Ok(mut con) = Constraint::new(&cg, &vocab, Options::default()) else { return };
    let mut prefix: Vec<u8> = Vec::new();
    // (prefix length, mask) before each commit still in effect, for rollbacks.
    let mut history: Vec<(usize, TokenSet)> = Vec::new();
    let mut mask = TokenSet::new(vocab.len());
    for _ in 0..12 {
        con.compute_mask(&mut mask);
        let want = oracle(&r, &prefix, &vocab);
        assert!(mask == want, "grammar:\n{text}prefix {:?}", String::from_utf8_lossy(&prefix));
        for i in 0..vocab.len() {
            let t = TokenId(i as u32);
            assert_eq!(con.allows(t), mask.contains(t), "allows({t:?})");
        }
        if !mask.is_empty() {
            check_forced(&r, &prefix, &con.forced_bytes(), &text);
        }
        if !history.is_empty() && c.below(4) == 0 {
            let back = 1 + c.below(history.len());
            con.rollback(back);
            history.truncate(history.len() - back + 1);
            let (len, before) = history.pop().expect("non-empty");
            prefix.truncate(len);
            con.compute_mask(&mut mask);
            assert!(mask == before, "rollback by {back}: mask differs\n{text}");
            continue;
        }
        let allowed: Vec<TokenId> = mask.iter().filter(|t| !vocab.is_eog(*t)).collect();
        if allowed.is_empty() {
            break;
        }
        let t = allowed[c.below(allowed.len())];
        history.push((prefix.len(), mask.clone()));
        con.commit(t).expect("a token in the mask commits");
        prefix.extend_from_slice(vocab.bytes(t));
    }
});
