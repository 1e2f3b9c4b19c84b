//! The files domino reads back — draft statistics (`--draft-stats`), eval results
//! (`results.jsonl` on `--resume`), prompt templates,
//! eval datasets — are parsed from valid seeds mutated at random (bytes flipped, inserted,
//! deleted, spans duplicated, JSON fragments spliced in, truncations). Every mutation must
//! load or fail with an error; none may panic. (The engine's own inputs — grammars, schemas,
//! tokenizer.json, tree caches — are covered by the fuzz targets in `fuzz/`; these loaders
//! live in the llama-linked crate, so they are driven here, deterministically, on every test
//! run.)

use domino::decode::draft_model::DraftModel;
use domino::eval::metrics::FinishReason;
use domino::eval::results::read_results;
use domino::eval::{Method, SampleResult, Task};
use domino::vocab::TokenId;
use serde_json::Value;
use std::path::Path;

/// xorshift64*: a fixed, dependency-free stream of pseudo-random numbers.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const FRAGMENTS: &[&[u8]] = &[
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"\"",
    b"\\",
    b"\n",
    b"null",
    b"-1",
    b"1e999",
    b"18446744073709551616",
    b"\"\\u0000\"",
    b"\xff\xfe",
    b"[[",
    b"{\"version\":1}",
    b"\"ffffffffffffffffff\"",
    b"NaN",
    b"-0",
    b"\r\n",
    b"\"key\"",
    b"true",
];

fn mutate(seed: &[u8], rng: &mut Rng) -> Vec<u8> {
    let mut v = seed.to_vec();
    for _ in 0..1 + rng.below(4) {
        let at = rng.below(v.len() + 1);
        match rng.below(6) {
            0 if !v.is_empty() => {
                let i = at.min(v.len() - 1);
                v[i] ^= 1 << rng.below(8);
            }
            1 => {
                let f = FRAGMENTS[rng.below(FRAGMENTS.len())];
                v.splice(at..at, f.iter().copied());
            }
            2 if at < v.len() => {
                let end = (at + 1 + rng.below(16)).min(v.len());
                v.drain(at..end);
            }
            3 if at < v.len() => {
                let end = (at + 1 + rng.below(32)).min(v.len());
                let span = v[at..end].to_vec();
                v.splice(at..at, span);
            }
            4 => v.truncate(at),
            _ => v.insert(at, rng.next() as u8),
        }
    }
    v
}

/// Run `load` on `n` mutations of `seed`, written to a file; a panic fails the test and
/// shows the input that caused it.
fn never_panics(name: &str, seed: &[u8], n: usize, load: impl Fn(&Path) -> bool) {
    let dir = tempfile_dir(name);
    let path = dir.join("input");
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ name.len() as u64);
    // The seed itself must load (otherwise the test would only exercise error paths).
    std::fs::write(&path, seed).unwrap();
    assert!(load(&path), "{name}: the seed itself does not load");
    for i in 0..n {
        let input = mutate(seed, &mut rng);
        std::fs::write(&path, &input).unwrap();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| load(&path)));
        assert!(
            result.is_ok(),
            "{name}: mutation {i} panicked; input: {:?}",
            String::from_utf8_lossy(&input)
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn tempfile_dir(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("domino-loaders-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn draft_statistics_never_panic() {
    let key = 0xABCD_u64;
    let mut model = DraftModel::new(key);
    for ctx in 0..20u64 {
        for t in 0..5u32 {
            model.observe(ctx * 7919, TokenId(t * 13 + ctx as u32));
        }
    }
    let dir = tempfile_dir("draft-seed");
    let file = dir.join("stats.json");
    model.save(&file).unwrap();
    let seed = std::fs::read(&file).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        DraftModel::load(&file_with(&seed), key).unwrap().len(),
        model.len()
    );
    never_panics("draft-stats", &seed, 3000, |p| {
        DraftModel::load(p, key).is_ok()
    });
}

fn file_with(bytes: &[u8]) -> std::path::PathBuf {
    let dir = tempfile_dir("draft-roundtrip");
    let p = dir.join("stats.json");
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn eval_results_never_panic() {
    let record = |id: usize, text: &str| SampleResult {
        task: Task::Gsm8k,
        sample_id: id,
        method: Method::Naive,
        prompt_id: "p1".into(),
        output_text: text.into(),
        tokens: vec![1, 2, 3],
        logprobs: vec![-0.5, -1.0, -2.0],
        interventions: 1,
        parsed_answer: Value::from(4),
        gold: Value::from(4),
        correct: true,
        well_formed: true,
        generated_tokens: 3,
        prompt_tokens: 10,
        decode_ms: 1.5,
        prompt_ms: 0.5,
        finish_reason: FinishReason::Eos,
        entities: None,
        score_note: None,
        error: None,
    };
    let mut seed = String::new();
    for (i, t) in ["{\"answer\": 4}", "x\ny", "ünï"].iter().enumerate() {
        seed.push_str(&serde_json::to_string(&record(i, t)).unwrap());
        seed.push('\n');
    }
    never_panics("results", seed.as_bytes(), 3000, |p| {
        read_results::<SampleResult>(p).is_ok()
    });
}

#[test]
fn prompt_templates_and_datasets_never_panic() {
    let template = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts/gsm8k.txt"));
    if let Ok(template) = template {
        never_panics("template", &template, 2000, |p| {
            domino::eval::prompt::Template::load(p).is_ok()
        });
    }
    let gsm = b"{\"question\": \"1+1?\", \"answer\": \"It is 2.\\n#### 2\"}\n{\"question\": \"q\", \"answer\": \"#### -3\"}\n";
    never_panics("gsm8k", gsm, 2000, |p| {
        domino::eval::data::load_gsm8k(p).is_ok()
    });
    let conll = b"{\"tokens\": [\"EU\", \"rejects\", \"German\"], \"tags\": [\"B-ORG\", \"O\", \"B-MISC\"]}\n";
    never_panics("conll", conll, 2000, |p| {
        domino::eval::data::load_conll(p).is_ok()
    });
}
