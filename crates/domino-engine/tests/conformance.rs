//! The data-driven conformance suite: every case directory under `tests/cases/` (a grammar:
//! `grammar.gbnf`, `grammar.lark`, `pattern.regex` or `schema.json`, plus `accept.jsonl` /
//! `reject.jsonl`; format in `tests/cases/README.md`) runs through
//! - the reference recognizer (`grammar::reference`): every accept string is in the language
//!   and each of its prefixes is viable; every reject string is not in the language;
//! - the engine (`engine::Constraint`) over a byte-level vocabulary (one token per byte, a few
//!   multi-byte tokens cut from the accept strings so that tokens bridge terminal boundaries,
//!   and EOS): an accept string commits token by token, every token allowed by the mask
//!   (`allows` agreeing with the computed mask), and then EOS is allowed; a reject string meets
//!   a token the mask refuses, or ends where EOS is refused.
//!
//! llama.cpp's own grammar sampler runs the same cases in the main crate
//! (`tests/conformance_llama.rs`). llama.cpp's grammar set has one named test each
//! (`tests/cases/llama_cpp/<name>`).

mod common;

use common::cases::{self, Case, CaseKind};
use common::rng::Rng;
use domino_engine::engine::{CompiledGrammar, Constraint, Options};
use domino_engine::grammar::CompileOptions;
use domino_engine::grammar::ir::Grammar;
use domino_engine::grammar::ir::Lexing;
use domino_engine::grammar::reference::{GreedyReference, ReferenceRecognizer};
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary};
use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

fn cases_dir() -> PathBuf {
    common::workspace_root().join("tests/cases")
}

/// The reference recognizer's verdicts (the greedy reference for Lark grammars, see
/// `domino_engine::lexer::greedy`); returns the failures.
fn check_reference(case: &Case, grammar: &Grammar) -> Vec<String> {
    if grammar.lexing == Lexing::Greedy {
        let rec = GreedyReference::new(grammar).unwrap_or_else(|e| panic!("{}: {e}", case.name()));
        let mut failures = Vec::new();
        for s in &case.accept {
            if !rec.accepts(s.as_bytes()) {
                failures.push(format!("greedy reference: should accept {s:?}"));
            }
            for i in 1..s.len() {
                if !rec.is_viable_prefix(&s.as_bytes()[..i]) {
                    failures.push(format!(
                        "greedy reference: prefix {:?} of {s:?} should be viable",
                        String::from_utf8_lossy(&s.as_bytes()[..i])
                    ));
                    break;
                }
            }
        }
        for s in &case.reject {
            if rec.accepts(s.as_bytes()) {
                failures.push(format!("greedy reference: should reject {s:?}"));
            }
        }
        return failures;
    }
    let rec = ReferenceRecognizer::new(grammar).unwrap_or_else(|e| panic!("{}: {e}", case.name()));
    let mut failures = Vec::new();
    for s in &case.accept {
        if !rec.accepts(s.as_bytes()) {
            failures.push(format!("reference: should accept {s:?}"));
        }
        // Every prefix of a sentence is viable.
        let mut state = rec.start();
        for (i, &b) in s.as_bytes().iter().enumerate() {
            match rec.feed(&state, b).filter(|next| rec.is_viable(next)) {
                Some(next) => state = next,
                None => {
                    failures.push(format!(
                        "reference: prefix {:?} of {s:?} should be viable",
                        String::from_utf8_lossy(&s.as_bytes()[..=i])
                    ));
                    break;
                }
            }
        }
    }
    for s in &case.reject {
        if rec.accepts(s.as_bytes()) {
            failures.push(format!("reference: should reject {s:?}"));
        }
    }
    failures
}

/// At most this many multi-byte tokens per case.
const MAX_MULTI_BYTE_TOKENS: usize = 96;

/// A byte-level vocabulary for `case`: token `b` is the byte `b` (0..=255), then multi-byte
/// tokens of 2 to 4 bytes cut from the accept strings at staggered offsets (so they start and
/// end inside terminals and across their boundaries), then EOS (the empty, end-of-generation
/// token). Returns the vocabulary and the multi-byte tokens by their bytes.
fn byte_vocabulary(case: &Case) -> (Arc<Vocabulary>, HashMap<Vec<u8>, TokenId>) {
    let mut pieces = BTreeSet::new();
    'cut: for s in &case.accept {
        let b = s.as_bytes();
        for start in (0..b.len()).step_by(3) {
            let len = 2 + start % 3;
            if start + len <= b.len() {
                pieces.insert(b[start..start + len].to_vec());
                if pieces.len() == MAX_MULTI_BYTE_TOKENS {
                    break 'cut;
                }
            }
        }
    }
    let mut words: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    let mut multi = HashMap::new();
    for p in pieces {
        multi.insert(p.clone(), TokenId(words.len() as u32));
        words.push(p);
    }
    words.push(Vec::new());
    let eos = TokenId(words.len() as u32 - 1);
    let special = vec![false; words.len()];
    (Arc::new(Vocabulary::new(words, special, vec![eos])), multi)
}

/// Greedy tokenization: the longest multi-byte token at each position, else the byte's token.
fn tokenize(bytes: &[u8], multi: &HashMap<Vec<u8>, TokenId>) -> Vec<TokenId> {
    let mut out = Vec::new();
    let mut pos = 0;
    while pos < bytes.len() {
        let found = (2..=4)
            .rev()
            .filter(|len| pos + len <= bytes.len())
            .find_map(|len| multi.get(&bytes[pos..pos + len]).map(|&t| (t, len)));
        let (t, len) = found.unwrap_or((TokenId(bytes[pos] as u32), 1));
        out.push(t);
        pos += len;
    }
    out
}

/// Outcome of running one string through a fresh constraint.
enum Walk {
    /// Every token was allowed and committed; whether EOS was then allowed.
    Committed { eos_allowed: bool },
    /// The token at this index was refused by the mask.
    Refused(usize),
}

/// Commit `tokens` one by one, checking at every step that `allows` agrees with the computed
/// mask on the token and on a few random others (disagreements go to `failures`).
fn walk(
    c: &mut Constraint,
    tokens: &[TokenId],
    rng: &mut Rng,
    failures: &mut Vec<String>,
    what: &str,
) -> Walk {
    let vocab = Arc::clone(c.vocab());
    let eos = vocab.eog_tokens()[0];
    let mut mask = TokenSet::new(vocab.len());
    let mut agree = |c: &mut Constraint, mask: &TokenSet, t: TokenId, step: usize| {
        if c.allows(t) != mask.contains(t) {
            failures.push(format!(
                "engine: {what}: step {step}: allows({:?}) = {} but the mask says {}",
                String::from_utf8_lossy(vocab.bytes(t)),
                c.allows(t),
                mask.contains(t)
            ));
        }
    };
    for (step, &t) in tokens.iter().enumerate() {
        c.compute_mask(&mut mask);
        agree(c, &mask, t, step);
        for _ in 0..3 {
            let other = TokenId(rng.below(vocab.len()) as u32);
            agree(c, &mask, other, step);
        }
        if !mask.contains(t) {
            return Walk::Refused(step);
        }
        if let Err(e) = c.commit(t) {
            failures.push(format!(
                "engine: {what}: step {step}: allowed token refused by commit: {e}"
            ));
            return Walk::Refused(step);
        }
    }
    c.compute_mask(&mut mask);
    agree(c, &mask, eos, tokens.len());
    Walk::Committed {
        eos_allowed: mask.contains(eos),
    }
}

/// The engine's verdicts over the case's byte-level vocabulary; returns the failures.
fn check_engine(case: &Case, grammar: Grammar) -> Vec<String> {
    let compiled = CompiledGrammar::new(grammar).unwrap_or_else(|e| panic!("{}: {e}", case.name()));
    let (vocab, multi) = byte_vocabulary(case);
    let base = Constraint::new(&compiled, &vocab, Options::default())
        .unwrap_or_else(|e| panic!("{}: {e}", case.name()));
    let mut rng = Rng::new(0x005E_ED0F_C04F_0A11);
    let mut failures = Vec::new();
    let mut bridged = 0;
    for s in &case.accept {
        let tokens = tokenize(s.as_bytes(), &multi);
        bridged += tokens.iter().filter(|t| t.index() > 255).count();
        let mut c = base.clone();
        let what = format!("accept {s:?}");
        match walk(&mut c, &tokens, &mut rng, &mut failures, &what) {
            Walk::Committed { eos_allowed: true } if c.is_accepting() => {}
            Walk::Committed { .. } => {
                failures.push(format!("engine: {what}: EOS not allowed at the end"))
            }
            Walk::Refused(step) => failures.push(format!(
                "engine: {what}: token {step} ({:?}) refused",
                String::from_utf8_lossy(vocab.bytes(tokens[step]))
            )),
        }
    }
    for s in &case.reject {
        let tokens = tokenize(s.as_bytes(), &multi);
        let mut c = base.clone();
        let what = format!("reject {s:?}");
        if let Walk::Committed { eos_allowed: true } =
            walk(&mut c, &tokens, &mut rng, &mut failures, &what)
        {
            failures.push(format!("engine: {what}: every token and EOS allowed"));
        }
    }
    assert!(
        bridged > 0 || case.accept.iter().all(|s| s.len() < 2),
        "{}: no multi-byte token was used",
        case.name()
    );
    failures
}

/// Run one case through the reference recognizer and the engine; returns the number of
/// strings checked.
fn run_case(case: &Case) -> usize {
    let grammar = case
        .source
        .compile(&CompileOptions::default())
        .unwrap_or_else(|e| panic!("{}: {e}", case.name()));
    let mut failures = check_reference(case, &grammar);
    failures.extend(check_engine(case, grammar));
    assert!(
        failures.is_empty(),
        "{}:\n  {}",
        case.name(),
        failures.join("\n  ")
    );
    case.accept.len() + case.reject.len()
}

fn run_dir(dir: &std::path::Path) -> usize {
    let case = cases::load(dir).unwrap_or_else(|| panic!("{}: no grammar file", dir.display()));
    run_case(&case)
}

#[test]
fn every_case_directory_passes() {
    let all = cases::all(&cases_dir());
    assert!(
        all.len() >= 22,
        "expected the full case set, found {}",
        all.len()
    );
    for kind in [
        CaseKind::Gbnf,
        CaseKind::Lark,
        CaseKind::Regex,
        CaseKind::JsonSchema,
    ] {
        assert!(
            all.iter().filter(|c| c.kind == kind).count() >= 2,
            "fewer than two {kind:?} cases"
        );
    }
    let checked: usize = all.iter().map(run_case).sum();
    assert!(checked > 150, "only {checked} strings checked");
}

macro_rules! llama_cpp_case {
    ($($name:ident),*) => {$(
        #[test]
        fn $name() {
            run_dir(&cases_dir().join("llama_cpp").join(stringify!($name)));
        }
    )*};
}
llama_cpp_case!(
    arithmetic, c, chess, english, japanese, json, json_arr, list
);

#[test]
fn llama_cpp_set_is_complete() {
    for name in [
        "arithmetic",
        "c",
        "chess",
        "english",
        "japanese",
        "json",
        "json_arr",
        "list",
    ] {
        assert!(
            cases_dir()
                .join("llama_cpp")
                .join(name)
                .join("grammar.gbnf")
                .is_file(),
            "{name}"
        );
    }
}
