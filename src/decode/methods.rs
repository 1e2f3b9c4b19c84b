//! Decoding methods behind one entry point: DOMINO and the baselines it is compared with.
//!
//! # Overview
//! A [`Decoder`] is built once per grammar and model from a [`DecoderConfig`] (what the CLI
//! flags say) and then runs any number of generations with [`Decoder::generate`]:
//! - `none`: unconstrained sampling;
//! - `domino`: the engine at lookahead `k` (default ∞, minimally invasive), optionally
//!   opportunistic and speculative ([`super::constrained`]);
//! - `naive`: the engine at `k = 0` (no bridge tokens) — the paper's Fig. 1;
//! - `template`: the engine with forced text appended without the model (guidance-style);
//! - `llama-grammar`: llama.cpp's GBNF sampler ([`crate::runtime::LlamaGrammar`], sample,
//!   check the one token, resample on rejection; it has no "nothing more can follow" query,
//!   so it stops at the grammar's forced end-of-generation token, one forward pass later
//!   than DOMINO's `grammar_end`, or at `max_tokens`). GBNF text comes from
//!   a `.gbnf` file as written, or is printed from the parsed grammar
//!   ([`crate::grammar::print::to_gbnf`]); a constraint GBNF cannot express is an error.
//!
//! The draft counts live in the decoder, so they keep learning across generations, and are
//! loaded from / saved to `--draft-stats` by [`Decoder::new`] / [`Decoder::save_draft_stats`].
//! So does the [`DraftTuner`] (measured forward-pass cost and acceptance calibration, see
//! [`super::draft_policy`]), which is not saved: it describes this machine and this run.
//!
//! Every method runs in decode's one loop ([`super::sequence::run`]): the decoder only
//! builds the [`ChoiceRule`] of a generation.

use super::constrained::EngineDecodeOptions;
use super::draft_model::DraftModel;
use super::draft_policy::{DraftPolicy, DraftSource, DraftTuner};
use super::opportunistic::Chooser;
use super::regions::{CompiledPlan, TagPlan};
use super::sequence::{self, ChoiceRule, Held, Sequence};
use super::{
    Control, GenerationRequest, GenerationResult, Observer, Sampler, SamplingConfig, TokenEvent,
};
use crate::engine::healing::{HealedConstraint, healing_plan};
use crate::engine::triggered::{TriggerSpec, TriggeredConstraint};
use crate::engine::{CompiledGrammar, Constraint, Options, TokenConstraint};
use crate::grammar::{CompileOptions, GrammarError, GrammarSource};
use crate::runtime::{LlamaGrammar, Model, Session};
use crate::vocab::{TokenId, TokenSet};
use std::path::PathBuf;
use std::sync::Arc;

/// The default speculative draft length: a cap, not a length. Drafts grow only while the
/// chain's count probability stays above the threshold, and the default
/// [`DraftPolicy::Cost`] then cuts each one where expected tokens per measured millisecond
/// peak, so a long cap costs nothing where drafts are expensive (a CPU) or unreliable, and
/// pays where verification is nearly free (a GPU) or the grammar fixes long stretches.
/// Measured with `scripts/bench-decode` (SmolLM2, one thread, greedy, opportunistic): with the
/// threshold policy alone S = 2 / 4 / 8 once gave XML 1.33 / 1.45 / 1.65 and, in another
/// period, 1.05 / 1.01 / 0.94 (CPU-time ratios to unconstrained decoding): what pays
/// depends on the machine's current speed, which is why the length is measured, not fixed.
pub const DEFAULT_DRAFT: usize = 8;
/// The default smallest count probability for a drafted token.
pub const DEFAULT_DRAFT_THRESHOLD: f32 = 0.8;

/// A decoding method (`--method`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    /// DOMINO: minimally invasive masks (lookahead `--k`, default ∞).
    Domino,
    /// Unconstrained.
    None,
    /// llama.cpp's own GBNF grammar sampler (sample, check, resample on rejection).
    LlamaGrammar,
    /// The engine at k = 0: tokens may not bridge terminals.
    Naive,
    /// Guidance-style: forced text is tokenized and appended without the model.
    Template,
}

impl Method {
    /// Every method, in the order `--help` lists them.
    pub const ALL: [Method; 5] = [
        Method::Domino,
        Method::None,
        Method::LlamaGrammar,
        Method::Naive,
        Method::Template,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Method::Domino => "domino",
            Method::None => "none",
            Method::LlamaGrammar => "llama-grammar",
            Method::Naive => "naive",
            Method::Template => "template",
        }
    }
}

impl std::str::FromStr for Method {
    type Err = String;
    /// A method by name, ignoring ASCII case.
    fn from_str(s: &str) -> Result<Method, String> {
        Method::ALL
            .into_iter()
            .find(|m| m.as_str().eq_ignore_ascii_case(s))
            .ok_or_else(|| format!("unknown method `{s}`"))
    }
}

/// Everything a decoder is built from.
#[derive(Clone, Debug)]
pub struct DecoderConfig {
    pub method: Method,
    /// The constraint (required unless `method` is `none`).
    pub source: Option<GrammarSource>,
    pub compile: CompileOptions,
    /// Lookahead `k` for `domino` and `template` (`None` = ∞); `naive` is always 0.
    pub k: Option<u32>,
    pub opportunistic: bool,
    pub draft: usize,
    pub draft_threshold: f32,
    /// How the length of each draft is decided.
    pub draft_policy: DraftPolicy,
    pub draft_stats: Option<PathBuf>,
    /// Tagged regions (reasoning, structural tags, tool calls): the constraint applies in
    /// them, the rest is free ([`super::regions`]). `source` is then unused.
    pub regions: Option<TagPlan>,
    /// Token healing ([`TOKEN_HEALING_MAX_BACK`] prompt tokens at most): back off the
    /// prompt's last token(s) when some token extends them, and make the output re-write
    /// them. Off by default here; the command line and the server turn it on.
    pub token_healing: bool,
}

/// How many prompt tokens token healing may back off.
pub const TOKEN_HEALING_MAX_BACK: usize = 3;

impl Default for DecoderConfig {
    fn default() -> Self {
        DecoderConfig {
            method: Method::Domino,
            source: None,
            compile: CompileOptions::default(),
            k: None,
            opportunistic: false,
            draft: 0,
            draft_threshold: DEFAULT_DRAFT_THRESHOLD,
            draft_policy: DraftPolicy::default(),
            draft_stats: None,
            regions: None,
            token_healing: false,
        }
    }
}

enum Kind {
    Unconstrained,
    Engine {
        grammar: EngineGrammar,
        lookahead: Option<u32>,
        opts: EngineDecodeOptions,
    },
    LlamaGrammar {
        gbnf: String,
        root: String,
    },
}

/// What the engine constrains: the whole output, or tagged regions of free text.
#[derive(Clone, Debug)]
pub enum EngineGrammar {
    Plain(Arc<CompiledGrammar>),
    Triggered(Arc<TriggerSpec>),
}

/// A method ready to generate (see the module doc).
pub struct Decoder {
    method: Method,
    kind: Kind,
    token_healing: bool,
    drafts: DraftModel,
    tuner: DraftTuner,
    draft_stats: Option<PathBuf>,
}

impl Decoder {
    /// Compile the constraint for `model` and load the draft statistics.
    pub fn new(config: &DecoderConfig, model: &Model) -> anyhow::Result<Decoder> {
        let method = config.method;
        if !(0.0..=1.0).contains(&config.draft_threshold) {
            return Err(crate::diag::UsageError(format!(
                "--draft-threshold must be in [0, 1], got {}",
                config.draft_threshold
            ))
            .into());
        }
        if config.regions.is_some()
            && !matches!(method, Method::Domino | Method::Naive | Method::Template)
        {
            return Err(crate::diag::UsageError(format!(
                "--method {} cannot constrain tagged regions (reasoning, triggers, tools): use --method domino",
                method.as_str()
            ))
            .into());
        }
        let vocab = model.vocabulary();
        // Compiling the constraint, its trees and its first mask run under the compile budget:
        // a grammar that would take too long or too much memory stops here with an error.
        let _budget = config.compile.budget.enter();
        let mut key = domino_engine::hash::fnv1a(&vocab.fingerprint().to_le_bytes());
        if let Some(plan) = &config.regions {
            key = domino_engine::hash::Fnv1a::resume(key)
                .write(plan.key_text(&config.compile).as_bytes())
                .finish();
            let t0 = std::time::Instant::now();
            let grammar = match plan.compile_plan(&config.compile, &vocab)? {
                CompiledPlan::Whole(g) => EngineGrammar::Plain(g),
                CompiledPlan::Triggered(spec) => EngineGrammar::Triggered(spec),
            };
            crate::log!(
                1,
                "{} tagged region(s) compiled in {:.0} ms",
                plan.regions.len(),
                t0.elapsed().as_secs_f64() * 1000.0
            );
            // Free text must be exactly what the unconstrained model writes with the same
            // seed: sample first and mask only on a rejection (the draw is the free loop's).
            let opportunistic =
                config.opportunistic || matches!(grammar, EngineGrammar::Triggered(_));
            let kind = Kind::Engine {
                grammar,
                lookahead: if method == Method::Naive {
                    Some(0)
                } else {
                    config.k
                },
                opts: EngineDecodeOptions {
                    opportunistic,
                    draft: config.draft,
                    draft_threshold: config.draft_threshold,
                    template: method == Method::Template,
                },
            };
            let drafts = match &config.draft_stats {
                Some(p) => DraftModel::load(p, key)?,
                None => DraftModel::new(key),
            };
            return Ok(Decoder {
                method,
                kind,
                token_healing: config.token_healing,
                drafts,
                tuner: DraftTuner::new(config.draft_policy),
                draft_stats: config.draft_stats.clone(),
            });
        }
        let source = match (&config.source, method) {
            (_, Method::None) => None,
            (Some(s), _) => Some(s),
            (None, m) => {
                return Err(crate::diag::UsageError(format!(
                    "--method {} needs a constraint: --grammar FILE, --schema FILE, --regex RE or --json",
                    m.as_str()
                ))
                .into());
            }
        };
        // FNV-1a: a stable key for draft statistics (saved files depend on its values).
        let kind = match (method, source) {
            (Method::None, _) | (_, None) => Kind::Unconstrained,
            (Method::LlamaGrammar, Some(source)) => {
                // The front end's rules printed as GBNF; where GBNF cannot say it (a Lark
                // `%ignore`), the lowered grammar, which has the ignores expanded.
                let printed = || -> anyhow::Result<String> {
                    let def = source.parse(&config.compile)?;
                    match crate::grammar::print::to_gbnf(&def) {
                        Ok(g) => Ok(g),
                        Err(first) => {
                            let ir = crate::grammar::lower::lower(&def)?;
                            Ok(crate::grammar::print::ir_to_gbnf(&ir).map_err(|e| {
                                GrammarError::whole(format!(
                                    "this constraint cannot be expressed in GBNF for llama.cpp: {first}; lowered: {e}"
                                ))
                            })?)
                        }
                    }
                };
                let (gbnf, root) = match source {
                    // The file as written, unless llama.cpp's stricter parser rejects it
                    // (e.g. alternatives continued on a new line): then our printer's
                    // one-rule-per-line form of the same grammar.
                    GrammarSource::Gbnf(text) => {
                        let root = config
                            .compile
                            .start
                            .clone()
                            .unwrap_or_else(|| "root".into());
                        if LlamaGrammar::parses(model, text, &root) {
                            (text.clone(), root)
                        } else {
                            crate::log!(
                                1,
                                "llama.cpp rejects the GBNF file as written; using the printed equivalent"
                            );
                            (printed()?, "root".to_string())
                        }
                    }
                    _ => (printed()?, "root".to_string()),
                };
                Kind::LlamaGrammar { gbnf, root }
            }
            (m, Some(source)) => {
                let ir = source.compile(&config.compile)?;
                for w in &ir.warnings {
                    eprintln!("warning: {w}");
                }
                key = domino_engine::hash::Fnv1a::resume(key)
                    .write(format!("{source:?}{:?}", config.compile).as_bytes())
                    .finish();
                let t0 = std::time::Instant::now();
                let grammar = CompiledGrammar::new(ir)
                    .map_err(|e| GrammarError::whole(format!("cannot compile the grammar: {e}")))?;
                let lookahead = if m == Method::Naive {
                    Some(0)
                } else {
                    config.k
                };
                let first = Options {
                    lookahead,
                    ..Options::default()
                };
                grammar.prepare(&vocab, first).map_err(|e| {
                    GrammarError::whole(format!("cannot compile the grammar: {e}"))
                        .with_kind(crate::grammar::ErrorKind::Limit)
                })?;
                crate::log!(
                    1,
                    "grammar compiled in {:.0} ms",
                    t0.elapsed().as_secs_f64() * 1000.0
                );
                let opts = EngineDecodeOptions {
                    opportunistic: config.opportunistic,
                    draft: config.draft,
                    draft_threshold: config.draft_threshold,
                    template: m == Method::Template,
                };
                Kind::Engine {
                    grammar: EngineGrammar::Plain(grammar),
                    lookahead,
                    opts,
                }
            }
        };
        let drafts = match &config.draft_stats {
            Some(p) if matches!(kind, Kind::Engine { .. }) => DraftModel::load(p, key)?,
            _ => DraftModel::new(key),
        };
        Ok(Decoder {
            method,
            kind,
            token_healing: config.token_healing,
            drafts,
            tuner: DraftTuner::new(config.draft_policy),
            draft_stats: config.draft_stats.clone(),
        })
    }

    pub fn method(&self) -> Method {
        self.method
    }

    /// The draft counts learned so far.
    pub fn draft_model(&self) -> &DraftModel {
        &self.drafts
    }

    /// What the draft policy has measured so far.
    pub fn draft_tuner(&self) -> &DraftTuner {
        &self.tuner
    }

    /// Keep the draft counts as they are from now on (see [`DraftModel::freeze`]); the draft
    /// policy's cost model and calibration keep measuring (see [`super::draft_policy`]).
    pub fn freeze_drafts(&mut self) {
        self.drafts.freeze();
    }

    /// A fresh constraint for this decoder's grammar, when it constrains the whole output
    /// (engine methods without tagged regions; see [`Decoder::token_constraint`]).
    pub fn constraint(&self, model: &Model) -> anyhow::Result<Option<Constraint>> {
        match &self.kind {
            Kind::Engine {
                grammar: EngineGrammar::Plain(grammar),
                lookahead,
                ..
            } => {
                let opts = Options {
                    lookahead: *lookahead,
                    ..Options::default()
                };
                Ok(Some(Constraint::new(grammar, &model.vocabulary(), opts)?))
            }
            _ => Ok(None),
        }
    }

    /// The engine's grammar (`None` for the other methods).
    pub fn engine_grammar(&self) -> Option<&EngineGrammar> {
        match &self.kind {
            Kind::Engine { grammar, .. } => Some(grammar),
            _ => None,
        }
    }

    /// A fresh constraint for this decoder: plain or triggered (engine methods only).
    pub fn token_constraint(
        &self,
        model: &Model,
    ) -> anyhow::Result<Option<Box<dyn TokenConstraint>>> {
        match &self.kind {
            Kind::Engine {
                grammar, lookahead, ..
            } => {
                let opts = Options {
                    lookahead: *lookahead,
                    ..Options::default()
                };
                Ok(Some(engine_constraint(grammar, &model.vocabulary(), opts)?))
            }
            _ => Ok(None),
        }
    }

    /// The choice rule of llama.cpp's grammar sampler for one request, owning everything it
    /// uses (a server slot's run); `None` for other methods.
    pub fn llama_grammar_rule(
        &self,
        model: &Model,
        sampling: &SamplingConfig,
    ) -> anyhow::Result<Option<ChoiceRule<'static>>> {
        let Kind::LlamaGrammar { gbnf, root } = &self.kind else {
            return Ok(None);
        };
        Ok(Some(ChoiceRule::LlamaGrammar {
            grammar: LlamaGrammar::new(model, gbnf, root)?,
            sampler: Sampler::new(sampling.clone()),
            mask: TokenSet::new(model.vocabulary().len()),
            stats: Default::default(),
        }))
    }

    /// One generation from `request.prompt` in `session`, calling `on_token(id, bytes)` for
    /// each output token as soon as it is chosen (an error from it stops generation).
    pub fn generate(
        &mut self,
        session: &mut Session<'_>,
        request: &GenerationRequest,
        on_token: &mut dyn FnMut(TokenId, &[u8]) -> anyhow::Result<()>,
    ) -> anyhow::Result<GenerationResult> {
        self.run(session, request, &Control::none(), &mut |e: &TokenEvent<
            '_,
        >| {
            on_token(e.token, e.bytes)
        })
    }

    /// One generation from `request.prompt` in `session`, reporting every token to
    /// `observer` and stopping when `control` says so.
    pub fn run(
        &mut self,
        session: &mut Session<'_>,
        request: &GenerationRequest,
        control: &Control,
        observer: &mut dyn Observer,
    ) -> anyhow::Result<GenerationResult> {
        let model = session.model();
        let vocab = model.vocabulary();
        let (healed_n, healed) =
            if self.token_healing && !matches!(self.kind, Kind::LlamaGrammar { .. }) {
                healing_plan(&vocab, &request.prompt, TOKEN_HEALING_MAX_BACK)
            } else {
                (0, Vec::new())
            };
        if healed_n > 0 && healed_n < request.prompt.len() {
            crate::log!(
                1,
                "token healing: backed off {healed_n} prompt token(s) {:?}",
                String::from_utf8_lossy(&healed)
            );
            let mut healed_request = request.clone();
            healed_request
                .prompt
                .truncate(request.prompt.len() - healed_n);
            let inner = self.token_constraint(model)?;
            let constraint: Box<dyn TokenConstraint> =
                Box::new(HealedConstraint::new(healed.clone(), inner, &vocab));
            return self.run_engine(
                session,
                &healed_request,
                control,
                observer,
                constraint,
                Some((healed_n, healed)),
            );
        }
        match &self.kind {
            Kind::Unconstrained => {
                let rule = ChoiceRule::Free(Sampler::new(request.sampling.clone()));
                let seq = Sequence::new(vocab, request, rule)?;
                sequence::run(session, seq, control, observer)
            }
            Kind::LlamaGrammar { gbnf, root } => {
                // Build the grammar only for a request the loop will run.
                Sequence::new(
                    vocab.clone(),
                    request,
                    ChoiceRule::Free(Sampler::new(request.sampling.clone())),
                )?;
                let rule = ChoiceRule::LlamaGrammar {
                    grammar: LlamaGrammar::new(model, gbnf, root)?,
                    sampler: Sampler::new(request.sampling.clone()),
                    mask: TokenSet::new(vocab.len()),
                    stats: Default::default(),
                };
                let seq = Sequence::new(vocab, request, rule)?;
                sequence::run(session, seq, control, observer)
            }
            Kind::Engine { .. } => {
                let constraint = self.token_constraint(model)?.expect("engine kind");
                self.run_engine(session, request, control, observer, constraint, None)
            }
        }
    }

    /// One generation driven by `constraint` (an engine constraint, or a healed one);
    /// `healed`: the backed-off prompt tokens and their bytes.
    fn run_engine(
        &mut self,
        session: &mut Session<'_>,
        request: &GenerationRequest,
        control: &Control,
        observer: &mut dyn Observer,
        mut constraint: Box<dyn TokenConstraint>,
        healed: Option<(usize, Vec<u8>)>,
    ) -> anyhow::Result<GenerationResult> {
        let vocab = session.model().vocabulary();
        let opts = match &self.kind {
            Kind::Engine { opts, .. } => opts.clone(),
            // Healing an unconstrained generation: the healed constraint alone, no drafts.
            _ => EngineDecodeOptions::default(),
        };
        let rule = ChoiceRule::Engine {
            constraint: Held::Borrowed(&mut *constraint),
            chooser: Chooser::new(request.sampling.clone(), vocab.len(), opts.opportunistic),
            drafts: Held::Borrowed(&mut self.drafts),
            tuner: Held::Borrowed(&mut self.tuner),
            opts: opts.clone(),
        };
        let mut seq = Sequence::new(vocab, request, rule)?;
        if let Some((n, bytes)) = &healed {
            seq = seq.healed(*n, bytes);
        }
        let result = sequence::run(session, seq, control, observer)?;
        if opts.draft > 0 {
            self.log_draft_tuning(opts.draft);
        }
        Ok(result)
    }

    /// Whether token healing is on.
    pub fn token_healing(&self) -> bool {
        self.token_healing
    }

    /// The draft policy's measurements, at `-v` / `-vv`.
    fn log_draft_tuning(&self, draft: usize) {
        let (counted, forced) = self.tuner.calibration_factors();
        let cost = self
            .tuner
            .cost
            .estimate()
            .map_or("not measured yet".to_string(), |c| {
                format!(
                    "{:.1} ms + {:.1} ms per extra position",
                    c.base_ms, c.per_extra_ms
                )
            });
        crate::log!(
            1,
            "drafts ({} policy): forward pass {cost}; acceptance calibration: counted ×{counted:.2}, forced ×{forced:.2}",
            self.tuner.policy.as_str()
        );
        let show = |source| {
            let f = self.tuner.factors_by_position(source, draft.min(16));
            f.iter()
                .map(|x| format!("{x:.2}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        crate::log!(
            2,
            "draft calibration by position: counted [{}], forced [{}]",
            show(DraftSource::Counted),
            show(DraftSource::Forced)
        );
    }

    /// Save the draft counts to `--draft-stats` (when given and the method uses the engine).
    pub fn save_draft_stats(&self) -> anyhow::Result<()> {
        if let (Some(p), Kind::Engine { .. }) = (&self.draft_stats, &self.kind) {
            self.drafts.save(p)?;
        }
        Ok(())
    }
}

/// A fresh constraint for `grammar` over `vocab`.
pub fn engine_constraint(
    grammar: &EngineGrammar,
    vocab: &Arc<crate::vocab::Vocabulary>,
    opts: Options,
) -> anyhow::Result<Box<dyn TokenConstraint>> {
    Ok(match grammar {
        EngineGrammar::Plain(g) => Box::new(Constraint::new(g, vocab, opts)?),
        EngineGrammar::Triggered(spec) => {
            Box::new(TriggeredConstraint::new(spec.clone(), vocab, opts)?)
        }
    })
}
