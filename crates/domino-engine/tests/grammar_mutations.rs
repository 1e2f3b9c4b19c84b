//! A small deterministic fuzzer that runs in the normal test suite: mutated versions of
//! every shipped and test grammar (byte flips, deletions, duplications, splices) go through
//! the front end, lowering, the printer and the reference recognizer. Nothing may panic;
//! errors must be values with a position inside the text (or about the whole grammar).

mod common;
use common::rng::Rng;

use domino_engine::grammar::{
    GrammarSource, Location, lower, print, reference::ReferenceRecognizer,
};

const PIECES: &[&str] = &[
    "(", ")", "[", "]", "\"", "\\", "|", "*", "+", "?", "{", "}", "{0,3}", "::=", ":", "\n", " ",
    "^", "-", ".", "/", "%ignore ", "x", "\\u00", "#",
];

fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut b: Vec<char> = text.chars().collect();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(b.len() + 1);
        match rng.below(4) {
            0 if !b.is_empty() => {
                let end = (at + 1 + rng.below(8)).min(b.len());
                b.drain(at.min(b.len())..end);
            }
            1 => {
                let piece = PIECES[rng.below(PIECES.len())];
                for (k, c) in piece.chars().enumerate() {
                    b.insert(at + k, c);
                }
            }
            2 if !b.is_empty() => {
                let i = at.min(b.len() - 1);
                b[i] = PIECES[rng.below(PIECES.len())].chars().next().unwrap();
            }
            _ => {
                let from = rng.below(b.len());
                let end = (from + rng.below(16)).min(b.len());
                let chunk: Vec<char> = b[from..end].to_vec();
                for (k, c) in chunk.into_iter().enumerate() {
                    b.insert(at + k, c);
                }
            }
        }
    }
    b.into_iter().collect()
}

fn seeds() -> Vec<(String, bool)> {
    let root = common::workspace_root();
    let mut out = Vec::new();
    let mut stack = vec![root.join("grammars"), root.join("tests/cases")];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let name = p.to_string_lossy().to_string();
            if p.is_dir() {
                stack.push(p);
            } else if name.ends_with(".gbnf") {
                out.push((std::fs::read_to_string(&p).unwrap(), false));
            } else if name.ends_with(".lark") {
                out.push((std::fs::read_to_string(&p).unwrap(), true));
            }
        }
    }
    out.sort();
    assert!(out.len() >= 15);
    out
}

#[test]
fn mutated_grammars_never_panic() {
    // `DOMINO_MUTATION_SEED` / `DOMINO_MUTATIONS` widen the search when run by hand.
    let seed = std::env::var("DOMINO_MUTATION_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x9E37_79B9_7F4A_7C15u64);
    let rounds: usize = std::env::var("DOMINO_MUTATIONS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(60);
    let mut rng = Rng::new(seed | 1);
    let mut parsed = 0;
    let mut lowered = 0;
    for (text, is_lark) in seeds() {
        for _ in 0..rounds {
            let m = mutate(&text, &mut rng);
            let lines = m.split('\n').count() as u32;
            let source = if is_lark {
                GrammarSource::Lark(m.clone())
            } else {
                GrammarSource::Gbnf(m.clone())
            };
            match source.parse(&Default::default()) {
                Err(e) => {
                    if let Location::LineColumn { line, column } = e.location {
                        assert!(
                            line >= 1 && line <= lines && column >= 1,
                            "bad position in {e} for {m:?}"
                        );
                    }
                }
                Ok(def) => {
                    parsed += 1;
                    let _ = print::to_gbnf(&def);
                    if let Ok(g) = lower::lower(&def) {
                        lowered += 1;
                        if g.terminals.len() < 120 {
                            let r = ReferenceRecognizer::new(&g).unwrap();
                            let _ = r.accepts(&m.as_bytes()[..m.len().min(40)]);
                        }
                    }
                }
            }
        }
    }
    // The mutations must exercise both the error paths and the full pipeline.
    assert!(
        parsed > 50 && lowered > 30,
        "parsed {parsed}, lowered {lowered}"
    );
}
