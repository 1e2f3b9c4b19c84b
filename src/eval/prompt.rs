//! Few-shot prompts (paper §4.1, App. D: "we alternate between questions and answers using a
//! simple Q: ... \n A: ... \n ... format") and the throughput prompt lists (App. C).
//!
//! A template file (`prompts/gsm8k.txt`, `prompts/conll.txt`) has three parts:
//!
//! ```text
//! # comment lines at the top start with '#'
//! One or more instruction lines, printed once at the top of the prompt.
//! ---
//! Q: {question}
//! A: {answer}
//! ```
//!
//! The block after `---` is rendered once per demonstration (`{answer}` = the gold JSON of
//! [`super::gold`]), demonstrations separated by a blank line; the query is the same block cut
//! just before `{answer}` with trailing spaces removed, so the prompt ends in `A:` and the model
//! writes the space (or newline) before `{` itself — a trailing space would force an unnatural
//! tokenization, the very distortion the paper measures.
//!
//! Demonstrations are drawn from the training split with a fixed seed ([`SplitMix64`], no
//! external RNG whose stream could change between versions): the same seed, K and training
//! file give the same prompt, byte for byte, on every machine. The same K demonstrations are
//! used for every test question of a run, as in the paper. [`FewShotPrompt::prompt_id`]
//! fingerprints the shared prefix so results from different prompts are never mixed.

use super::Task;
use super::data::{ConllSample, Dataset, GsmSample};
use super::gold;
use anyhow::{Context, bail};
use serde::Serialize;
use std::path::Path;

/// A small, fixed, well-known PRNG (SplitMix64): deterministic across platforms and versions.
#[derive(Clone, Debug)]
pub struct SplitMix64(u64);

impl SplitMix64 {
    pub fn new(seed: u64) -> Self {
        SplitMix64(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0), by rejection so there is no modulo bias.
    pub fn below(&mut self, n: u64) -> u64 {
        assert!(n > 0);
        let zone = u64::MAX - (u64::MAX % n);
        loop {
            let x = self.next_u64();
            if x < zone {
                return x % n;
            }
        }
    }
}

/// 64-bit FNV-1a, for short stable fingerprints in file names and records.
pub use domino_engine::hash::fnv1a as fnv1a64;

/// How demonstration answers are laid out.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum JsonStyle {
    /// Indented by four spaces, one key per line, as in the paper's Listings 8 and 9.
    #[default]
    Pretty,
    /// One line, no spaces.
    Compact,
}

impl JsonStyle {
    /// Every style, in the order `--help` lists them.
    pub const ALL: [JsonStyle; 2] = [JsonStyle::Pretty, JsonStyle::Compact];

    pub fn as_str(self) -> &'static str {
        match self {
            JsonStyle::Pretty => "pretty",
            JsonStyle::Compact => "compact",
        }
    }
}

impl std::str::FromStr for JsonStyle {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "pretty" => Ok(JsonStyle::Pretty),
            "compact" => Ok(JsonStyle::Compact),
            _ => Err(format!(
                "unknown JSON style `{s}` (expected pretty or compact)"
            )),
        }
    }
}

/// Serialize `value` in `style`.
pub fn render_json(value: &serde_json::Value, style: JsonStyle) -> String {
    match style {
        JsonStyle::Compact => value.to_string(),
        JsonStyle::Pretty => {
            let mut out = Vec::new();
            let formatter = serde_json::ser::PrettyFormatter::with_indent(b"    ");
            let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
            serde::Serialize::serialize(value, &mut ser).expect("serializing a Value cannot fail");
            String::from_utf8(out).expect("serde_json writes UTF-8")
        }
    }
}

/// A parsed few-shot template.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    /// Printed once at the top (may be empty).
    pub instruction: String,
    /// One demonstration, with `{question}` and `{answer}` placeholders.
    pub block: String,
}

impl Template {
    /// Parse template text (see the module docs). Errors name the problem and the line.
    pub fn parse(text: &str) -> anyhow::Result<Template> {
        let mut lines = text
            .lines()
            .enumerate()
            .skip_while(|(_, l)| l.starts_with('#'))
            .peekable();
        let mut instruction = Vec::new();
        let mut found_separator = false;
        for (_, line) in lines.by_ref() {
            if line.trim_end() == "---" {
                found_separator = true;
                break;
            }
            instruction.push(line);
        }
        if !found_separator {
            bail!(
                "template has no `---` line separating the instruction from the demonstration block"
            );
        }
        let block_lines: Vec<&str> = lines.map(|(_, l)| l).collect();
        let block = block_lines.join("\n").trim_end().to_string();
        let question_at = block.find("{question}");
        let answer_at = block.find("{answer}");
        match (question_at, answer_at) {
            (Some(q), Some(a)) if q < a => {}
            (None, _) => bail!("template block has no `{{question}}` placeholder"),
            (_, None) => bail!("template block has no `{{answer}}` placeholder"),
            _ => bail!("template block must put `{{question}}` before `{{answer}}`"),
        }
        if block.matches("{answer}").count() != 1 {
            bail!("template block must contain `{{answer}}` exactly once");
        }
        Ok(Template {
            instruction: instruction.join("\n").trim().to_string(),
            block,
        })
    }

    /// Load and parse a template file.
    pub fn load(path: &Path) -> anyhow::Result<Template> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read prompt template {}", path.display()))?;
        Template::parse(&text).with_context(|| format!("in prompt template {}", path.display()))
    }

    /// The template shipped for `task`, from `prompts/` in the repository.
    pub fn for_task(task: Task) -> anyhow::Result<Template> {
        Template::load(&super::resolve(task.template_path()))
    }

    fn render_shot(&self, question: &str, answer: &str) -> String {
        // Split first so placeholders inside the question or answer text are never expanded.
        let (before, after) = self.block.split_once("{answer}").expect("checked in parse");
        let before = before.replace("{question}", question);
        let after = after.replace("{question}", question);
        format!("{before}{answer}{after}")
    }

    fn render_query(&self, question: &str) -> String {
        let (before, _) = self.block.split_once("{answer}").expect("checked in parse");
        before
            .replace("{question}", question)
            .trim_end_matches([' ', '\t'])
            .to_string()
    }
}

/// The question text shown for a CoNLL sentence: its tokens as a JSON array of strings.
pub fn conll_question(sample: &ConllSample) -> String {
    let quoted: Vec<String> = sample
        .tokens
        .iter()
        .map(|t| serde_json::to_string(t).expect("string"))
        .collect();
    format!("[{}]", quoted.join(", "))
}

/// Which training samples may serve as demonstrations. CoNLL demonstrations must hold at
/// least one entity (so the model sees tags other than `O`) and 4–24 tokens (so five of them
/// fit a small model's context); GSM8K solutions may have at most 6 steps for the same reason.
fn eligible_demo(dataset: &Dataset, index: usize) -> bool {
    match dataset {
        Dataset::Gsm8k(v) => v[index].answer.lines().filter(|l| l.contains("<<")).count() <= 6,
        Dataset::Conll(v) => {
            let s = &v[index];
            (4..=24).contains(&s.tokens.len()) && s.tags.iter().any(|t| t != "O")
        }
    }
}

/// Choose `k` demonstration indices from `train` with `seed` (partial Fisher–Yates over the
/// eligible indices, in draw order).
pub fn choose_demos(train: &Dataset, k: usize, seed: u64) -> anyhow::Result<Vec<usize>> {
    let mut pool: Vec<usize> = (0..train.len())
        .filter(|&i| eligible_demo(train, i))
        .collect();
    if pool.len() < k {
        bail!(
            "the training split has only {} samples eligible as demonstrations, {k} requested",
            pool.len()
        );
    }
    let mut rng = SplitMix64::new(seed);
    for i in 0..k {
        let j = i + rng.below((pool.len() - i) as u64) as usize;
        pool.swap(i, j);
    }
    pool.truncate(k);
    Ok(pool)
}

/// The few-shot prefix of a run: the instruction and the K demonstrations.
#[derive(Clone, Debug)]
pub struct FewShotPrompt {
    pub task: Task,
    template: Template,
    /// Indices (sample ids) of the demonstrations in the training file.
    pub demo_ids: Vec<usize>,
    /// Instruction plus rendered demonstrations, ending in a blank line (or empty for K = 0
    /// without instruction).
    pub prefix: String,
}

impl FewShotPrompt {
    /// Build the prefix from `k` demonstrations of `train` drawn with `seed`.
    pub fn build(
        template: Template,
        train: &Dataset,
        k: usize,
        seed: u64,
        style: JsonStyle,
    ) -> anyhow::Result<Self> {
        let demo_ids = choose_demos(train, k, seed)?;
        let mut prefix = String::new();
        if !template.instruction.is_empty() {
            prefix.push_str(&template.instruction);
            prefix.push_str("\n\n");
        }
        for &i in &demo_ids {
            let (question, answer) = match train {
                Dataset::Gsm8k(v) => (v[i].question.clone(), gold::gsm8k_gold(&v[i])),
                Dataset::Conll(v) => (conll_question(&v[i]), gold::conll_gold(&v[i])),
            };
            prefix.push_str(&template.render_shot(&question, &render_json(&answer, style)));
            prefix.push_str("\n\n");
        }
        Ok(FewShotPrompt {
            task: train.task(),
            template,
            demo_ids,
            prefix,
        })
    }

    /// The full prompt for one test question.
    pub fn prompt_for(&self, question: &str) -> String {
        format!("{}{}", self.prefix, self.template.render_query(question))
    }

    /// The full prompt for a GSM8K problem.
    pub fn gsm8k_prompt(&self, sample: &GsmSample) -> String {
        self.prompt_for(&sample.question)
    }

    /// The full prompt for a CoNLL sentence.
    pub fn conll_prompt(&self, sample: &ConllSample) -> String {
        self.prompt_for(&conll_question(sample))
    }

    /// A stable fingerprint of the prefix and the query layout (`p` + 16 hex digits).
    pub fn prompt_id(&self) -> String {
        let mut bytes = self.prefix.as_bytes().to_vec();
        bytes.push(0);
        bytes.extend_from_slice(self.template.block.as_bytes());
        format!("p{:016x}", fnv1a64(&bytes))
    }
}

/// Load a throughput prompt list: one prompt per line, each a JSON string literal (so `\n`
/// and quotes are unambiguous); blank lines and lines starting with `#` are skipped.
pub fn load_prompt_list(path: &Path) -> anyhow::Result<Vec<String>> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("cannot read prompt list {}", path.display()))?;
    let mut prompts = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let prompt: String = serde_json::from_str(trimmed).map_err(|e| {
            anyhow::anyhow!(
                "{}:{}:{}: a prompt line must be a JSON string literal: {e}",
                path.display(),
                index + 1,
                e.column()
            )
        })?;
        prompts.push(prompt);
    }
    if prompts.is_empty() {
        bail!("prompt list {} holds no prompts", path.display());
    }
    Ok(prompts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitmix_is_the_reference_stream() {
        // First outputs of SplitMix64 seeded with 0 (the published reference values).
        let mut r = SplitMix64::new(0);
        assert_eq!(r.next_u64(), 0xe220a8397b1dcdaf);
        assert_eq!(r.next_u64(), 0x6e789e6aa1b965f4);
    }

    #[test]
    fn template_parse_errors() {
        assert!(Template::parse("no separator").is_err());
        assert!(Template::parse("x\n---\nQ: {question}").is_err());
        assert!(Template::parse("x\n---\nA: {answer} Q: {question}").is_err());
        let t = Template::parse("# c\nDo it.\n---\nQ: {question}\nA: {answer}\n\n").unwrap();
        assert_eq!(t.instruction, "Do it.");
        assert_eq!(t.render_query("why?"), "Q: why?\nA:");
        assert_eq!(t.render_shot("{answer}", "42"), "Q: {answer}\nA: 42");
    }
}
