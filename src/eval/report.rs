//! Reports of an accuracy run: `report.md`, `report.json`, `accuracy.svg`.
//!
//! `report.md` lays our numbers out like the paper's Table 2 (Dataset, Model, Method,
//! Accuracy, Well-Formed, Perplexity, Performance Impact) and puts the paper's numbers for the
//! corresponding method beside them (Mistral 7B / Llama-2 13B, from
//! `eval/paper_reference.json`), then the invasiveness columns, entity F1 for CoNLL and the
//! Table 4 lookahead ablation when `domino-k*` methods ran. The model is always named.
//! Nothing in a report depends on the clock, so a resumed run's report equals an
//! uninterrupted one's.

use super::Task;
use super::method::Method;
use super::metrics::MethodSummary;
use super::runner::RunConfig;
use super::svg::BarChart;
use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::fmt::Write;
use std::path::Path;

/// `eval/paper_reference.json`, parsed loosely (the file is documentation as much as data).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct PaperReference {
    pub source: String,
    #[serde(default)]
    pub models: Vec<String>,
    #[serde(default)]
    pub table2: Vec<Table2Row>,
    #[serde(default)]
    pub table3: Vec<Table3Row>,
    #[serde(default)]
    pub table3_columns: Vec<Table3Column>,
    #[serde(default)]
    pub table4: Vec<Value>,
}

/// One row of the paper's Table 2.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Table2Row {
    pub dataset: String,
    pub model: String,
    pub method: String,
    /// Our method of the same kind, if any.
    pub ours: Option<String>,
    pub accuracy: f64,
    pub well_formed: f64,
    pub perplexity: f64,
    pub performance_impact: f64,
}

/// One row of the paper's Table 3 (a workload on a model).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Table3Row {
    pub workload: String,
    pub model: String,
    pub values: std::collections::BTreeMap<String, Option<f64>>,
    pub accel: String,
    pub accel_ours: String,
}

/// A column of Table 3 and our counterpart (`accel_ours` = per row).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Table3Column {
    pub name: String,
    pub ours: Option<String>,
}

impl PaperReference {
    /// Load `eval/paper_reference.json` from the repository.
    pub fn load_default() -> anyhow::Result<PaperReference> {
        Self::load(&super::resolve("eval/paper_reference.json"))
    }

    pub fn load(path: &Path) -> anyhow::Result<PaperReference> {
        let text = std::fs::read_to_string(path)
            .with_context(|| format!("cannot read {}", path.display()))?;
        serde_json::from_str(&text)
            .with_context(|| format!("{} is not a paper reference file", path.display()))
    }

    /// Table 2 rows of `task`'s dataset for our `method`, one per paper model.
    pub fn table2_for(&self, task: Task, method: Method) -> Vec<&Table2Row> {
        let name = method.to_string();
        self.table2
            .iter()
            .filter(|r| r.dataset == task.name() && r.ours.as_deref() == Some(name.as_str()))
            .collect()
    }
}

/// `report.json` of an accuracy run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskReport {
    pub task: Task,
    pub dataset: String,
    pub model: String,
    pub command: String,
    /// Samples evaluated per method (the first N of the test split).
    pub samples: usize,
    pub shots: usize,
    pub demo_ids: Vec<usize>,
    pub seed: u64,
    /// None = automatic per sample (see `runner::auto_max_tokens`).
    pub max_tokens: Option<usize>,
    pub temperature: f32,
    pub prompt_id: String,
    pub methods: Vec<MethodSummary>,
    /// The paper's claims, checked against this run's numbers.
    pub claims: Vec<Claim>,
    /// The paper's Table 2 rows for this dataset.
    pub paper_reference: Vec<Table2Row>,
    pub paper_source: String,
}

impl TaskReport {
    pub fn new(
        task: Task,
        config: &RunConfig,
        samples: usize,
        methods: Vec<MethodSummary>,
    ) -> anyhow::Result<Self> {
        let paper = PaperReference::load_default()?;
        Ok(TaskReport {
            task,
            dataset: task.paper_name().to_string(),
            model: config.model.clone(),
            command: config.command.clone(),
            samples,
            shots: config.shots,
            demo_ids: config.demo_ids.clone(),
            seed: config.seed,
            max_tokens: config.max_tokens,
            temperature: config.temperature,
            prompt_id: config.prompt_id.clone(),
            claims: check_claims(&methods),
            methods,
            paper_reference: paper
                .table2
                .iter()
                .filter(|r| r.dataset == task.name())
                .cloned()
                .collect(),
            paper_source: paper.source,
        })
    }
}

/// One of the paper's claims and what this run says about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    pub claim: String,
    /// What the paper reports for it.
    pub paper: String,
    /// Our numbers.
    pub ours: String,
    /// Whether our numbers agree; None when this run lacks the methods to tell.
    pub holds: Option<bool>,
    /// For accuracy claims: McNemar's p-value of the difference behind the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub p_value: Option<f64>,
    /// Why this run cannot decide the claim (too few samples, a difference within the noise,
    /// nothing correct on either side); `holds` is then `None`, so that no evidence is
    /// reported as support.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive: Option<String>,
}

/// Fewer samples than this cannot decide an accuracy claim, whatever the p-value: McNemar's
/// test needs discordant pairs, and at 30 samples one sample is already 3.3 points.
pub const MIN_CLAIM_SAMPLES: usize = 30;

/// Why an accuracy comparison of `a` with `b` on `n` samples (McNemar p-value `p`) decides
/// nothing, if it does not: too few samples, nothing correct on either side, no paired
/// test, or p ≥ 0.05.
pub fn accuracy_inconclusive(n: usize, a: f64, b: f64, p: Option<f64>) -> Option<String> {
    if n < MIN_CLAIM_SAMPLES {
        Some(format!("too few samples ({n} < {MIN_CLAIM_SAMPLES})"))
    } else if a == 0.0 && b == 0.0 {
        Some("no sample correct on either side: accuracy 0 cannot show a difference".into())
    } else {
        match p {
            None => Some("no paired test on the same samples".into()),
            Some(p) if p >= 0.05 => Some(format!(
                "the difference is within the noise (McNemar p = {p:.2} ≥ 0.05)"
            )),
            Some(_) => None,
        }
    }
}

/// An accuracy claim: `holds` when `direction` and the comparison decides, else inconclusive.
fn accuracy_claim(
    claim: String,
    paper: String,
    ours: String,
    direction: bool,
    (n, a, b): (usize, f64, f64),
    p: Option<f64>,
) -> Claim {
    let inconclusive = accuracy_inconclusive(n, a, b, p);
    Claim {
        claim,
        paper,
        ours,
        holds: if inconclusive.is_some() {
            None
        } else {
            Some(direction)
        },
        p_value: p,
        inconclusive,
    }
}

/// A speed claim: inconclusive within the timing-noise band.
fn speed_claim(claim: &str, paper: &str, ratio: f64, faster: bool) -> Claim {
    let holds = speed_verdict(ratio, faster);
    Claim {
        claim: claim.into(),
        paper: paper.into(),
        ours: speed_text(ratio),
        holds,
        p_value: None,
        inconclusive: holds.is_none().then(|| {
            format!(
                "within ±{:.0} % of unconstrained: timing noise on this machine",
                SPEED_NOISE * 100.0
            )
        }),
    }
}

/// `, McNemar p = …` for a method compared with `none`.
fn p_note(m: &MethodSummary) -> String {
    m.vs_none
        .map_or(String::new(), |p| format!(", McNemar p = {:.3}", p.p_value))
}

/// Check the paper's main accuracy-table claims against `methods` (those the run has).
pub fn check_claims(methods: &[MethodSummary]) -> Vec<Claim> {
    let find = |m: Method| methods.iter().find(|s| s.method == m);
    let mut claims = Vec::new();
    let Some(none) = find(Method::None) else {
        return claims;
    };
    let n = none.samples;
    if let Some(domino) = find(Method::DOMINO) {
        let p = domino.vs_none.map(|p| p.p_value);
        claims.push(accuracy_claim(
            "DOMINO (k=∞) costs no accuracy: accuracy ≥ unconstrained".into(),
            "GSM8K 0.418 vs 0.415 (Mistral), 0.262 vs 0.262 (Llama-2); CoNLL equal for both".into(),
            format!(
                "{:.3} vs {:.3} ({} samples{})",
                domino.accuracy,
                none.accuracy,
                n,
                p_note(domino)
            ),
            domino.accuracy >= none.accuracy,
            (n, domino.accuracy, none.accuracy),
            p,
        ));
        if let Some(x) = domino.exact_match_where_none_well_formed {
            claims.push(Claim {
                claim: "Where the unconstrained output is already valid, DOMINO (k=∞) leaves it unchanged".into(),
                paper: "§3 minimal invasiveness (greedy: identical tokens up to the end of the document)".into(),
                ours: format!("{x:.3} of the samples with a well-formed unconstrained output are identical"),
                holds: Some(x >= 1.0),
                p_value: None,
                inconclusive: None,
            });
        }
        if let Some(p) = domino.performance_impact {
            claims.push(speed_claim(
                "DOMINO is faster than unconstrained generation",
                "1.66–2.71× (Table 2, with speculative decoding)",
                p,
                true,
            ));
        }
    }
    for (method, paper) in [
        (
            Method::Template,
            "guidance templates: −7 / −11 points on GSM8K, −11 / −3 on CoNLL",
        ),
        (
            Method::LlamaGrammar,
            "llama.cpp grammars: −4 / −2.5 points on GSM8K, −9 / −1 on CoNLL",
        ),
        (
            Method::domino_k(0),
            "k=0: −11 points on GSM8K (Mistral, Table 4)",
        ),
        (
            Method::domino_k(1),
            "k=1: −31 points on GSM8K (Mistral, Table 4)",
        ),
        (
            Method::Naive,
            "naive constraining loses accuracy (Fig. 1, §2)",
        ),
    ] {
        if let Some(m) = find(method) {
            claims.push(accuracy_claim(
                format!("Invasive constraining ({method}) loses accuracy against unconstrained"),
                paper.into(),
                format!(
                    "{:.3} vs {:.3} ({:+.1} points{})",
                    m.accuracy,
                    none.accuracy,
                    (m.accuracy - none.accuracy) * 100.0,
                    p_note(m)
                ),
                m.accuracy < none.accuracy,
                (n, m.accuracy, none.accuracy),
                m.vs_none.map(|p| p.p_value),
            ));
        }
    }
    if let Some(p) = find(Method::LlamaGrammar).and_then(|m| m.performance_impact) {
        claims.push(speed_claim(
            "llama.cpp's grammar sampler slows generation",
            "0.80–0.86× (Table 2)",
            p,
            false,
        ));
    }
    claims
}

/// Speed ratios within this of 1 are no measured difference (timing noise on a shared machine
/// is several percent): the claim is then neither confirmed nor refuted.
const SPEED_NOISE: f64 = 0.05;

fn speed_text(ratio: f64) -> String {
    if (ratio - 1.0).abs() < SPEED_NOISE {
        format!(
            "{ratio:.2}× (within ±{:.0} %: no difference measured)",
            SPEED_NOISE * 100.0
        )
    } else {
        format!("{ratio:.2}×")
    }
}

/// Does a speed ratio confirm "faster" (`faster`) or "slower"? `None` within the noise band.
fn speed_verdict(ratio: f64, faster: bool) -> Option<bool> {
    if (ratio - 1.0).abs() < SPEED_NOISE {
        None
    } else {
        Some((ratio > 1.0) == faster)
    }
}

fn opt(x: Option<f64>, decimals: usize) -> String {
    x.map_or("—".to_string(), |v| format!("{v:.decimals$}"))
}

/// Paper values of `field` for `method` as "Mistral 7B / Llama-2 13B".
fn paper_cell(
    report: &TaskReport,
    method: Method,
    field: impl Fn(&Table2Row) -> f64,
    decimals: usize,
) -> String {
    let name = method.to_string();
    let rows: Vec<&Table2Row> = report
        .paper_reference
        .iter()
        .filter(|r| r.ours.as_deref() == Some(name.as_str()))
        .collect();
    if rows.is_empty() {
        return "—".into();
    }
    rows.iter()
        .map(|r| format!("{:.decimals$}", field(r)))
        .collect::<Vec<_>>()
        .join(" / ")
}

/// The compact summary `domino eval gsm8k|conll` prints on stdout: one row per method and
/// one line per claim with its verdict (inconclusive ones with their reason). The full
/// report, with the paper's numbers beside ours, stays in `report.md`.
pub fn render_compact(report: &TaskReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} · {} · {} samples",
        report.dataset, report.model, report.samples
    );
    let width = report
        .methods
        .iter()
        .map(|m| m.method.to_string().len())
        .max()
        .unwrap_or(6)
        .max(6);
    let _ = writeln!(
        s,
        "{:<width$}  {:>9}  {:>8}  {:>11}  {:>7}  {:>7}",
        "method", "correct", "accuracy", "well-formed", "tok/s", "vs none"
    );
    for m in &report.methods {
        let _ = writeln!(
            s,
            "{:<width$}  {:>9}  {:>8.3}  {:>11.3}  {:>7}  {:>7}",
            m.method.to_string(),
            format!("{}/{}", m.correct, m.samples),
            m.accuracy,
            m.well_formed_rate,
            opt(m.tokens_per_second, 1),
            m.performance_impact
                .map_or("—".to_string(), |p| format!("{p:.2}×")),
        );
    }
    for c in &report.claims {
        let verdict = match (&c.inconclusive, c.holds) {
            (Some(why), _) => format!("inconclusive ({why})"),
            (None, Some(true)) => "holds".to_string(),
            (None, Some(false)) => "does not hold".to_string(),
            (None, None) => "—".to_string(),
        };
        let _ = writeln!(s, "claim: {} — {verdict}", c.claim);
    }
    s
}

/// Render `report.md`.
pub fn render_markdown(report: &TaskReport) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# domino eval {} — {}\n", report.task, report.dataset);
    let _ = writeln!(s, "- Model: `{}`", report.model);
    let _ = writeln!(
        s,
        "- Samples: the first {} of the test split, every method on every sample; {}-shot prompts (demonstrations: training lines {:?}, seed {}), prompt id `{}`",
        report.samples,
        report.shots,
        report.demo_ids.iter().map(|i| i + 1).collect::<Vec<_>>(),
        report.seed,
        report.prompt_id
    );
    let sampling = if report.temperature == 0.0 {
        "greedy".to_string()
    } else {
        format!("temperature {}", report.temperature)
    };
    let budget = match report.max_tokens {
        Some(n) => format!("at most {n} new tokens"),
        None => match report.task {
            Task::Gsm8k => "at most 512 new tokens".to_string(),
            Task::Conll => {
                "at most 64 + 32 new tokens per input token (16 for compact JSON), capped at 2048"
                    .to_string()
            }
        },
    };
    let _ = writeln!(s, "- Decoding: {sampling}, {budget}");
    if !report.command.is_empty() {
        let _ = writeln!(s, "- Command: `{}`", report.command);
    }
    let _ = writeln!(
        s,
        "\nSmall models score low on these tasks, far below the paper's 7B/13B models; what matters is the \
         comparison between methods on the same model (accuracy, well-formedness, and the invasiveness columns), \
         not the absolute level.\n"
    );

    let _ = writeln!(s, "## Accuracy (laid out like the paper's Table 2)\n");
    let _ = writeln!(
        s,
        "Paper columns give the paper's numbers for the same kind of method as Mistral 7B / Llama-2 13B \
         (template ↔ guidance, llama-grammar ↔ llama.cpp, domino ↔ Domino k=∞); — where the paper has none.\n"
    );
    let _ = writeln!(
        s,
        "| Dataset | Model | Method | Accuracy | Well-Formed | Perplexity | Performance Impact | Paper Accuracy | Paper Well-Formed | Paper Perplexity | Paper Impact | vs none: +/− samples (McNemar p) |"
    );
    let _ = writeln!(
        s,
        "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for m in &report.methods {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.3} | {:.3} | {} | {} | {} | {} | {} | {} | {} |",
            report.dataset,
            report.model,
            m.method,
            m.accuracy,
            m.well_formed_rate,
            opt(m.perplexity, 3),
            m.performance_impact
                .map_or("—".into(), |x| format!("{x:.2}×")),
            paper_cell(report, m.method, |r| r.accuracy, 3),
            paper_cell(report, m.method, |r| r.well_formed, 3),
            paper_cell(report, m.method, |r| r.perplexity, 3),
            paper_cell(report, m.method, |r| r.performance_impact, 2),
            m.vs_none.map_or("—".into(), |p| format!(
                "+{} / −{} (p = {:.3})",
                p.only_method, p.only_none, p.p_value
            )),
        );
    }

    if !report.claims.is_empty() {
        let _ = writeln!(s, "\n## The paper's claims in this run\n");
        let _ = writeln!(
            s,
            "With {} samples one sample is {:.1} accuracy points; differences of a few samples are noise.\n",
            report.samples,
            100.0 / report.samples.max(1) as f64
        );
        let _ = writeln!(s, "| Claim | Paper | This run | Holds here |");
        let _ = writeln!(s, "|---|---|---|---|");
        for c in &report.claims {
            // A direction without evidence is reported as such, not as a finding.
            let verdict = match (&c.inconclusive, c.holds) {
                (Some(why), _) => format!("inconclusive: {why}"),
                (None, Some(true)) => "yes".to_string(),
                (None, Some(false)) => "no".to_string(),
                (None, None) => "—".to_string(),
            };
            let _ = writeln!(s, "| {} | {} | {} | {verdict} |", c.claim, c.paper, c.ours);
        }
    }

    let _ = writeln!(s, "\n## Invasiveness and speed\n");
    let _ = writeln!(
        s,
        "| Method | Samples | Correct | Intervention rate | Exact match with none | … where none is well-formed | Mean first divergence (tokens) | Tokens/s | Generated tokens | Mean sample perplexity | Finish reasons | Errors |"
    );
    let _ = writeln!(
        s,
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|"
    );
    for m in &report.methods {
        let reasons = m
            .finish_reasons
            .iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ");
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
            m.method,
            m.samples,
            m.correct,
            opt(m.intervention_rate, 4),
            m.exact_match_with_none.map_or("—".into(), |x| format!(
                "{x:.3} (of {})",
                m.compared_with_none
            )),
            opt(m.exact_match_where_none_well_formed, 3),
            opt(m.mean_first_divergence, 1),
            opt(m.tokens_per_second, 1),
            m.generated_tokens,
            opt(m.mean_sample_perplexity, 3),
            reasons,
            m.errors
        );
    }

    if report.task == Task::Conll {
        let _ = writeln!(
            s,
            "\n## Entity-level F1 (IOB2 chunks, seqeval default mode, micro-averaged)\n"
        );
        let _ = writeln!(
            s,
            "| Method | Precision | Recall | F1 | True positives | Predicted | Gold |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
        for m in &report.methods {
            if let Some(e) = m.entities {
                let _ = writeln!(
                    s,
                    "| {} | {:.3} | {:.3} | {:.3} | {} | {} | {} |",
                    m.method,
                    e.precision(),
                    e.recall(),
                    e.f1(),
                    e.true_positive,
                    e.predicted,
                    e.gold
                );
            }
        }
    }

    let lookahead: Vec<&MethodSummary> = report
        .methods
        .iter()
        .filter(|m| {
            matches!(
                m.method,
                Method::None
                    | Method::Domino {
                        speculative: None,
                        ..
                    }
            )
        })
        .collect();
    if report.task == Task::Gsm8k
        && lookahead.iter().any(|m| {
            matches!(
                m.method,
                Method::Domino {
                    lookahead: Some(_),
                    ..
                }
            )
        })
    {
        let _ = writeln!(
            s,
            "\n## Lookahead ablation (the paper's Table 4: Mistral 7B / Llama-2 13B)\n"
        );
        let _ = writeln!(
            s,
            "| Configuration | Accuracy | Well-Formed | Paper accuracy |"
        );
        let _ = writeln!(s, "|---|---:|---:|---:|");
        let table4 = PaperReference::load_default()
            .map(|p| p.table4)
            .unwrap_or_default();
        for m in lookahead {
            let name = m.method.to_string();
            let paper = table4
                .iter()
                .find(|r| r.get("ours").and_then(Value::as_str) == Some(name.as_str()))
                .map(|r| format!("{} / {}", r["Mistral 7B"], r["Llama-2 13B"]))
                .unwrap_or_else(|| "—".into());
            let _ = writeln!(
                s,
                "| {} | {:.3} | {:.3} | {} |",
                m.method, m.accuracy, m.well_formed_rate, paper
            );
        }
    }

    let _ = writeln!(s, "\n## Definitions\n");
    let _ = writeln!(
        s,
        "- Accuracy: {}\n- Well-formed: the first JSON object in the output parses and validates against `{}`.\n\
         - Perplexity: exp of the mean negative log-probability of all generated tokens under the unmasked model.\n\
         - Performance impact: generated tokens per second of decoding (prompt evaluation excluded) relative to `none` in this run.\n\
         - Intervention rate: share of decoding steps where the model's top token was blocked.\n\
         - vs none: samples this method gets right and `none` wrong (+) and the reverse (−); McNemar's exact test p-value \
         (small p: the accuracy difference is unlikely to be noise).\n\
         - Exact match with none / first divergence: generated token ids compared with `none`'s on the same sample; \
         a prefix counts as the same output when the shorter one holds a complete JSON document (constrained runs stop there).\n\
         - Paper numbers: {}",
        match report.task {
            Task::Gsm8k => "`answer` is a JSON number equal to the gold final answer.",
            Task::Conll => {
                "exact sequence accuracy — the `tokens` array has the gold length and every `tag` equals the gold tag at its position."
            }
        },
        report.task.schema_path(),
        report.paper_source
    );
    let _ = writeln!(
        s,
        "\n![accuracy and well-formed rate per method](accuracy.svg)"
    );
    s
}

/// The accuracy / well-formed chart.
pub fn accuracy_chart(report: &TaskReport) -> BarChart {
    let mut series = vec![
        (
            "accuracy".to_string(),
            report.methods.iter().map(|m| Some(m.accuracy)).collect(),
        ),
        (
            "well-formed".to_string(),
            report
                .methods
                .iter()
                .map(|m| Some(m.well_formed_rate))
                .collect(),
        ),
    ];
    if report.task == Task::Conll {
        series.push((
            "entity F1".to_string(),
            report.methods.iter().map(|m| m.entity_f1).collect(),
        ));
    }
    BarChart {
        title: format!(
            "{} — {} ({} samples)",
            report.dataset,
            super::svg::model_label(&report.model),
            report.samples
        ),
        y_label: "rate".into(),
        categories: report
            .methods
            .iter()
            .map(|m| m.method.to_string())
            .collect(),
        series,
        y_max: Some(1.0),
        reference_line: None,
        decimals: 2,
        ranges: Vec::new(),
    }
}

/// Write `report.md`, `report.json` and `accuracy.svg` into `out_dir`.
pub fn write_task_report(report: &TaskReport, out_dir: &Path) -> anyhow::Result<()> {
    let write = |name: &str, text: String| {
        let path = out_dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
    };
    write("report.md", render_markdown(report))?;
    write("report.json", serde_json::to_string_pretty(report)? + "\n")?;
    write("accuracy.svg", accuracy_chart(report).render())?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_compact_summary_has_a_row_per_method_and_the_verdicts() {
        let claim = accuracy_claim(
            "DOMINO costs no accuracy".into(),
            "p".into(),
            "o".into(),
            true,
            (2, 0.0, 0.0),
            Some(1.0),
        );
        let text = format!(
            "claim: {} — inconclusive ({})",
            claim.claim,
            claim.inconclusive.clone().unwrap()
        );
        let report: TaskReport = serde_json::from_value(serde_json::json!({
            "task": "gsm8k", "dataset": "GSM8K", "model": "m.gguf", "command": "", "samples": 2,
            "shots": 0, "demo_ids": [], "seed": 0, "max_tokens": null, "temperature": 0.0,
            "prompt_id": "x", "methods": [], "claims": [claim], "paper_reference": [],
            "paper_source": ""
        }))
        .unwrap();
        let out = render_compact(&report);
        assert!(out.starts_with("GSM8K · m.gguf · 2 samples\n"), "{out}");
        assert!(out.contains(&text), "{out}");
    }

    #[test]
    fn accuracy_claims_need_samples_a_signal_and_significance() {
        // The case: 0/2 vs 0/2, p = 1.
        let why = accuracy_inconclusive(2, 0.0, 0.0, Some(1.0)).unwrap();
        assert!(why.contains("too few samples"), "{why}");
        let why = accuracy_inconclusive(100, 0.0, 0.0, Some(1.0)).unwrap();
        assert!(why.contains("no sample correct"), "{why}");
        let why = accuracy_inconclusive(100, 0.30, 0.28, Some(0.4)).unwrap();
        assert!(why.contains("p = 0.40"), "{why}");
        assert!(accuracy_inconclusive(100, 0.30, 0.28, None).is_some());
        assert_eq!(accuracy_inconclusive(100, 0.30, 0.10, Some(0.001)), None);
        let c = accuracy_claim(
            "c".into(),
            "p".into(),
            "o".into(),
            true,
            (2, 0.0, 0.0),
            Some(1.0),
        );
        assert_eq!(c.holds, None);
        let c = accuracy_claim(
            "c".into(),
            "p".into(),
            "o".into(),
            false,
            (100, 0.1, 0.3),
            Some(0.001),
        );
        assert_eq!((c.holds, c.inconclusive), (Some(false), None));
        let s = speed_claim("c", "p", 1.02, true);
        assert_eq!(s.holds, None);
        assert!(s.inconclusive.unwrap().contains("timing noise"));
    }

    #[test]
    fn speed_claims_need_a_difference_beyond_the_noise_band() {
        assert_eq!(speed_verdict(1.03, true), None);
        assert_eq!(speed_verdict(0.97, false), None);
        assert_eq!(speed_verdict(1.2, true), Some(true));
        assert_eq!(speed_verdict(0.8, true), Some(false));
        assert_eq!(speed_verdict(0.8, false), Some(true));
        assert!(speed_text(1.01).contains("no difference measured"));
        assert_eq!(speed_text(1.5), "1.50×");
    }
}
