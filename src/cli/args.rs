//! Argument groups shared by several subcommands, each defined once: the constraint
//! ([`ConstraintArgs`]), the model ([`ModelArgs`]), sampling ([`SamplingArgs`]), `--format`,
//! and the clap parsers for library enums (the library modules do not depend on clap, so
//! their command-line spelling lives here).

use crate::constraint::ConstraintSpec;
use crate::decode::SamplingConfig;
use crate::decode::draft_policy::DraftPolicy;
use crate::decode::methods::Method;
use crate::engine::budget::Budget;
use crate::eval::prompt::JsonStyle;
use crate::grammar::{CompileOptions, PropertyOrder, WhitespacePolicy};
use crate::models::ModelConfig;
use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use std::path::PathBuf;
use std::time::Duration;

/// `--format text|json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum OutputFormat {
    #[default]
    Text,
    Json,
}

/// Which constraint to apply: one of `--grammar`, `--schema`, `-j/--json-schema`, `--regex`,
/// `--json`, `--json-value`. `-` as a file reads the grammar (GBNF) or schema from stdin, as
/// llama.cpp's tools do.
///
/// Each flag may be given more than once only to pair constraints with structural tags
/// (`--trigger '<a>' --schema a.json --trigger '<b>' --regex '[0-9]+'`: each trigger gets the
/// constraint written right after it); otherwise two constraints are a usage error
/// ([`ConstraintArgs::spec`]). Where each one stood on the command line is recorded after
/// parsing ([`ConstraintArgs::record_positions`], from clap's `indices_of`).
#[derive(Args, Debug, Clone, Default)]
#[command(
    next_help_heading = "Constraint",
    group(clap::ArgGroup::new("constraint").multiple(true))
)]
pub struct ConstraintArgs {
    /// Grammar file: .gbnf (llama.cpp GBNF), .lark (Lark subset) or .json (JSON Schema), by
    /// extension; `-` reads GBNF from stdin.
    #[arg(
        long,
        visible_alias = "grammar-file",
        value_name = "FILE",
        group = "constraint"
    )]
    pub grammar: Vec<PathBuf>,
    /// JSON Schema file the output must validate against (whatever its extension); `-` reads
    /// the schema from stdin.
    #[arg(
        long,
        visible_alias = "json-schema-file",
        value_name = "FILE",
        group = "constraint"
    )]
    pub schema: Vec<PathBuf>,
    /// Inline JSON Schema, e.g. -j '{"type":"object","required":["name"]}'.
    #[arg(short = 'j', long, value_name = "JSON", group = "constraint")]
    pub json_schema: Vec<String>,
    /// Rust-regex pattern the whole output must match.
    #[arg(long, value_name = "RE", group = "constraint")]
    pub regex: Vec<String>,
    /// A JSON object or array (llama.cpp's json.gbnf); --json-value for any JSON value.
    #[arg(long, group = "constraint", action = clap::ArgAction::Count)]
    pub json: u8,
    /// Any JSON value, a bare number or string included.
    #[arg(long, group = "constraint", action = clap::ArgAction::Count)]
    pub json_value: u8,
    /// Start rule of a grammar (default: `root` for GBNF, `start` for Lark).
    #[arg(long, value_name = "RULE")]
    pub start: Option<String>,
    /// Whitespace between JSON tokens for --schema/--json.
    #[arg(long, value_parser = whitespace_parser(), default_value_t = WhitespacePolicy::Flexible)]
    pub whitespace: WhitespacePolicy,
    /// Longest run of whitespace bytes the flexible policy allows.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub max_whitespace: u32,
    /// Allow whitespace after the JSON document (the old behaviour: generation then runs on
    /// until the model ends it or the token limit). By default it stops at the closing brace.
    #[arg(long)]
    pub trailing_whitespace: bool,
    /// JSON Schema objects: `any` admits the named properties in every order (each once,
    /// required ones present) for objects with up to 8 of them, larger ones in schema order
    /// with a warning; `schema` admits only the order of `properties`.
    #[arg(long, value_parser = property_order_parser(), default_value = "any")]
    pub property_order: PropertyOrder,
    /// Warn about unsupported schema keywords and ignore them instead of failing.
    #[arg(long)]
    pub lenient: bool,
    /// Warnings become errors: an unknown schema keyword (a typo such as `maxLenght`) exits
    /// 2; in `generate`, a constrained output cut by the token limit exits 3.
    #[arg(long)]
    pub strict: bool,
    #[command(flatten)]
    pub budget: BudgetArgs,
    /// Where each constraint flag stood on the command line (clap's argument indices), in
    /// command-line order; empty when the flags were not parsed from a command line.
    #[arg(skip)]
    pub positions: Vec<(usize, ConstraintFlag)>,
}

/// One occurrence of a constraint flag: which flag, and for the flags that take a value,
/// the index of that value among the flag's values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConstraintFlag {
    Grammar(usize),
    Schema(usize),
    JsonSchema(usize),
    Regex(usize),
    Json,
    JsonValue,
}

impl ConstraintFlag {
    /// The flag as a user writes it.
    pub fn name(self) -> &'static str {
        match self {
            ConstraintFlag::Grammar(_) => "--grammar",
            ConstraintFlag::Schema(_) => "--schema",
            ConstraintFlag::JsonSchema(_) => "--json-schema",
            ConstraintFlag::Regex(_) => "--regex",
            ConstraintFlag::Json => "--json",
            ConstraintFlag::JsonValue => "--json-value",
        }
    }
}

/// The compile budget (`crate::engine::budget`): how long and how much memory compiling one
/// constraint — parsing, lowering, the scanner, follow sets, parser tables, the token trees
/// and the first mask — may take before it stops with an error (exit 2) instead of hanging or
/// being killed. Shared by every command that compiles a constraint.
#[derive(Args, Debug, Clone)]
pub struct BudgetArgs {
    /// Time budget for compiling the constraint, in seconds (0 = none). The default, 30 s,
    /// is three times the slowest legitimate schema we know (JSONSchemaBench, loaded 2-core
    /// machine) and ends a pathological grammar within half a minute.
    #[arg(long, value_name = "SECS", default_value_t = DEFAULT_COMPILE_SECS)]
    pub compile_timeout: f64,
    /// Memory budget for compiling the constraint, in MB (0 = none), measured by domino's
    /// counting allocator. The default, 2048, leaves half of a 4 GB cap (`ulimit -v 4000000`), so a
    /// capped process gets this error rather than an abort.
    #[arg(long, value_name = "MB", default_value_t = DEFAULT_COMPILE_MB)]
    pub compile_memory: u64,
}

/// `--compile-timeout`'s (and the server's `--grammar-timeout`'s) default: the engine's
/// [`crate::engine::budget::DEFAULT_TIME`], in seconds.
pub const DEFAULT_COMPILE_SECS: f64 = crate::engine::budget::DEFAULT_TIME.as_secs() as f64;
/// `--compile-memory`'s (and `--grammar-memory`'s) default: the engine's
/// [`crate::engine::budget::DEFAULT_MAX_BYTES`], in MB.
pub const DEFAULT_COMPILE_MB: u64 = crate::engine::budget::DEFAULT_MAX_BYTES >> 20;

impl Default for BudgetArgs {
    fn default() -> Self {
        BudgetArgs {
            compile_timeout: DEFAULT_COMPILE_SECS,
            compile_memory: DEFAULT_COMPILE_MB,
        }
    }
}

impl BudgetArgs {
    /// The budget these flags describe.
    pub fn budget(&self) -> Budget {
        budget_of(self.compile_timeout, self.compile_memory)
    }
}

/// A budget from seconds and megabytes, 0 meaning "no limit" (shared with `serve`).
pub fn budget_of(seconds: f64, megabytes: u64) -> Budget {
    Budget {
        time: (seconds.is_finite() && seconds > 0.0).then(|| Duration::from_secs_f64(seconds)),
        max_bytes: (megabytes > 0).then(|| megabytes.saturating_mul(1 << 20)),
    }
}

/// `-` as a file name: stdin.
fn is_stdin(path: &std::path::Path) -> bool {
    path.as_os_str() == "-"
}

fn read_stdin(what: &str) -> anyhow::Result<String> {
    use anyhow::Context;
    let mut s = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin(), &mut s)
        .with_context(|| format!("reading the {what} from stdin"))?;
    Ok(s)
}

impl ConstraintArgs {
    /// Record where each constraint flag stood in `matches` (the subcommand's matches of a
    /// parsed command line), so that [`RegionArgs::resolve`] can pair each `--trigger` with
    /// the constraint written after it.
    pub fn record_positions(&mut self, matches: &clap::ArgMatches) {
        let mut at = Vec::new();
        for (id, make) in [
            (
                "grammar",
                ConstraintFlag::Grammar as fn(usize) -> ConstraintFlag,
            ),
            ("schema", ConstraintFlag::Schema),
            ("json_schema", ConstraintFlag::JsonSchema),
            ("regex", ConstraintFlag::Regex),
        ] {
            for (i, index) in command_line_indices(matches, id).into_iter().enumerate() {
                at.push((index, make(i)));
            }
        }
        for (id, flag) in [
            ("json", ConstraintFlag::Json),
            ("json_value", ConstraintFlag::JsonValue),
        ] {
            for index in command_line_indices(matches, id) {
                at.push((index, flag));
            }
        }
        at.sort_by_key(|(index, _)| *index);
        self.positions = at;
    }

    /// Every constraint flag given, in command-line order when the positions are known
    /// (else in the order the flags are declared), with its position.
    pub fn occurrences(&self) -> Vec<(Option<usize>, ConstraintFlag)> {
        let count = self.grammar.len()
            + self.schema.len()
            + self.json_schema.len()
            + self.regex.len()
            + usize::from(self.json)
            + usize::from(self.json_value);
        if self.positions.len() == count {
            return self.positions.iter().map(|&(i, f)| (Some(i), f)).collect();
        }
        let mut out = Vec::new();
        out.extend((0..self.grammar.len()).map(ConstraintFlag::Grammar));
        out.extend((0..self.schema.len()).map(ConstraintFlag::Schema));
        out.extend((0..self.json_schema.len()).map(ConstraintFlag::JsonSchema));
        out.extend((0..self.regex.len()).map(ConstraintFlag::Regex));
        out.extend((0..self.json).map(|_| ConstraintFlag::Json));
        out.extend((0..self.json_value).map(|_| ConstraintFlag::JsonValue));
        out.into_iter().map(|f| (None, f)).collect()
    }

    /// The constraint one flag occurrence names (files read).
    pub fn spec_of(&self, flag: ConstraintFlag) -> anyhow::Result<ConstraintSpec> {
        let compile = self.compile_options();
        Ok(match flag {
            ConstraintFlag::Grammar(i) => {
                let p = &self.grammar[i];
                if is_stdin(p) {
                    ConstraintSpec::gbnf_text("grammar (stdin)", &read_stdin("grammar")?, compile)
                } else {
                    ConstraintSpec::grammar_file(p, compile)?
                }
            }
            ConstraintFlag::Schema(i) => {
                let p = &self.schema[i];
                if is_stdin(p) {
                    ConstraintSpec::schema_text("schema (stdin)", &read_stdin("schema")?, compile)?
                } else {
                    ConstraintSpec::schema_file(p, compile)?
                }
            }
            ConstraintFlag::JsonSchema(i) => ConstraintSpec::schema_text(
                "schema (--json-schema)",
                &self.json_schema[i],
                compile,
            )?,
            ConstraintFlag::Regex(i) => ConstraintSpec::regex(&self.regex[i], compile),
            ConstraintFlag::Json => ConstraintSpec::json(compile),
            ConstraintFlag::JsonValue => ConstraintSpec::json_value(compile),
        })
    }

    /// The chosen constraint (files read), or `None` when no constraint flag was given; two
    /// or more are a usage error (only `--trigger` pairs several, see [`RegionArgs::resolve`]).
    pub fn spec(&self) -> anyhow::Result<Option<ConstraintSpec>> {
        let all = self.occurrences();
        match all.as_slice() {
            [] => Ok(None),
            [(_, flag)] => Ok(Some(self.spec_of(*flag)?)),
            several => {
                let names: Vec<&str> = several.iter().map(|(_, f)| f.name()).collect();
                Err(crate::diag::UsageError(format!(
                    "one constraint at a time, but {} are given ({}); to give each structural tag its own, \
                     write each constraint right after its trigger: --trigger '<a>' --schema a.json --trigger '<b>' --regex '[0-9]+'",
                    several.len(),
                    names.join(", ")
                ))
                .into())
            }
        }
    }

    /// Whether the constraint is read from stdin (`--grammar -` or `--schema -`), which then
    /// cannot also hold the prompt.
    pub fn reads_stdin(&self) -> bool {
        self.grammar.iter().chain(&self.schema).any(|p| is_stdin(p))
    }

    /// The chosen constraint; a usage error when none was given.
    pub fn required_spec(&self) -> anyhow::Result<ConstraintSpec> {
        self.spec()?.ok_or_else(|| {
            crate::diag::UsageError(
                "a constraint is needed: --grammar, --schema, --json-schema, --regex, --json or --json-value"
                    .into(),
            )
            .into()
        })
    }

    pub fn compile_options(&self) -> CompileOptions {
        CompileOptions {
            start: self.start.clone(),
            whitespace: self.whitespace,
            max_whitespace: self.max_whitespace,
            lenient: self.lenient,
            strict: self.strict,
            trailing_whitespace: self.trailing_whitespace,
            property_order: self.property_order,
            budget: self.budget.budget(),
        }
    }
}

/// `--reasoning [--reasoning-end TEXT]`: a reasoning model's free text until the
/// end-of-reasoning marker, the constraint after it. Shared by `generate`, `mask`, `repl`
/// (through [`RegionArgs`]) and `eval`.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Regions and token healing")]
pub struct ReasoningArgs {
    /// Reasoning model: free text until the end-of-reasoning marker (--reasoning-end), then
    /// the constraint (--schema, --grammar, --regex, --json; in eval the task's schema), then
    /// the end.
    #[arg(long)]
    pub reasoning: bool,
    /// The end-of-reasoning marker for --reasoning.
    #[arg(long, value_name = "TEXT", default_value = crate::decode::regions::DEFAULT_REASONING_END)]
    pub reasoning_end: String,
}

impl ReasoningArgs {
    /// The end-of-reasoning marker when --reasoning is on (a usage error when it is empty).
    pub fn marker(&self) -> anyhow::Result<Option<&str>> {
        if !self.reasoning {
            return Ok(None);
        }
        if self.reasoning_end.is_empty() {
            return Err(crate::diag::UsageError("--reasoning-end is empty".into()).into());
        }
        Ok(Some(&self.reasoning_end))
    }
}

/// `--no-token-healing`: shared by every command whose prompts can be raw text.
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Regions and token healing")]
pub struct HealingArgs {
    /// Do not heal the prompt's last token. By default, when the prompt ends in a token that
    /// some other token extends (mid-word, `http:`), it is backed off and the output must
    /// re-write it (the stats say when this happened).
    #[arg(long)]
    pub no_token_healing: bool,
}

/// Where the constraint applies and the prompt boundary: reasoning, structural tags
/// (triggers), and token healing. Shared by `generate`, `mask` and `repl` (`eval` takes
/// [`ReasoningArgs`] and [`HealingArgs`]).
#[derive(Args, Debug, Clone, Default)]
#[command(next_help_heading = "Regions and token healing")]
pub struct RegionArgs {
    #[command(flatten)]
    pub reasoning: ReasoningArgs,
    /// Structural tag: free text until TEXT, then a constraint (--schema, --grammar, --regex,
    /// --json) for the region that follows; repeatable. One constraint serves every trigger;
    /// with several, each trigger takes the one written right after it
    /// (`--trigger '<a>' --schema a.json --trigger '<b>' --regex '[0-9]+'`). Also: --tags FILE.
    #[arg(
        long,
        value_name = "TEXT",
        conflicts_with = "reasoning",
        requires = "constraint"
    )]
    pub trigger: Vec<String>,
    /// Text that closes every --trigger region (appended to its grammar).
    #[arg(long, value_name = "TEXT", requires = "trigger")]
    pub trigger_end: Option<String>,
    /// Structural tags from a JSON file: [{"begin": TEXT, "schema"|"grammar"|"lark"|"regex": …,
    /// "end": TEXT}], free text between the regions.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["reasoning", "trigger", "constraint"])]
    pub tags: Option<PathBuf>,
    /// After a tagged region: free text again (more regions may follow) or the end.
    #[arg(long, value_name = "free|end", default_value = "free", value_parser = after_parser())]
    pub after_region: crate::decode::regions::After,
    /// At least one tagged region must be written (end-of-generation is blocked before).
    #[arg(long)]
    pub require_region: bool,
    #[command(flatten)]
    pub healing: HealingArgs,
    /// Where each --trigger stood on the command line (clap's argument indices); empty when
    /// the flags were not parsed from a command line.
    #[arg(skip)]
    pub trigger_positions: Vec<usize>,
}

fn after_parser() -> impl TypedValueParser<Value = crate::decode::regions::After> {
    PossibleValuesParser::new([PossibleValue::new("free"), PossibleValue::new("end")])
        .map(|s| s.parse().expect("a possible value"))
}

/// The command-line indices of the values (or, for a flag, the occurrences) of argument
/// `id` in `matches`; none when it was not given on the command line (a default).
fn command_line_indices(matches: &clap::ArgMatches, id: &str) -> Vec<usize> {
    if matches.value_source(id) != Some(clap::parser::ValueSource::CommandLine) {
        return Vec::new();
    }
    matches
        .indices_of(id)
        .map(|i| i.collect())
        .unwrap_or_default()
}

/// Pair each trigger with its own constraint by command-line position: `triggers` and
/// `constraints` are `(position, name)` in command-line order, with at least two
/// constraints. Each trigger takes the one constraint written after it and before the next
/// trigger. Returns, per trigger, the index of its constraint in `constraints`; an
/// ambiguous command line is an error that says what to write instead.
pub fn pair_triggers(
    triggers: &[(usize, &str)],
    constraints: &[(usize, &str)],
) -> Result<Vec<usize>, String> {
    let example = "--trigger '<a>' --schema a.json --trigger '<b>' --regex '[0-9]+'";
    let Some(&(first, _)) = triggers.first() else {
        return Err("several constraints need --trigger flags to pair with".into());
    };
    if let Some((_, name)) = constraints.iter().find(|(at, _)| *at < first) {
        return Err(format!(
            "{name} stands before the first --trigger while other constraints follow triggers, \
             so it is unclear which trigger it belongs to: write each constraint right after its \
             trigger ({example}), or give a single constraint that every trigger shares"
        ));
    }
    let mut pairs = Vec::with_capacity(triggers.len());
    for (i, &(at, text)) in triggers.iter().enumerate() {
        let next = triggers.get(i + 1).map_or(usize::MAX, |t| t.0);
        let own: Vec<usize> = (0..constraints.len())
            .filter(|&c| constraints[c].0 > at && constraints[c].0 < next)
            .collect();
        match own.as_slice() {
            [c] => pairs.push(*c),
            [] => {
                return Err(format!(
                    "--trigger {text:?} has no constraint of its own while other triggers do: \
                     write one right after it ({example}), or give a single constraint that every trigger shares"
                ));
            }
            [a, b, ..] => {
                return Err(format!(
                    "--trigger {text:?} is followed by {} constraints ({} and {}): each trigger takes \
                     exactly one, written right after it ({example})",
                    own.len(),
                    constraints[*a].1,
                    constraints[*b].1
                ));
            }
        }
    }
    Ok(pairs)
}

impl RegionArgs {
    /// Record where each `--trigger` stood in `matches` (see [`pair_triggers`]).
    pub fn record_positions(&mut self, matches: &clap::ArgMatches) {
        self.trigger_positions = command_line_indices(matches, "trigger");
    }

    /// The constraint flags' grammar and the tagged regions these flags describe around it:
    /// `(whole-output constraint, regions)`. With several constraints, each `--trigger`
    /// gets its own by position ([`pair_triggers`]); the first constraint is then returned
    /// as the (unused) whole-output one.
    pub fn resolve(
        &self,
        constraint: &ConstraintArgs,
    ) -> anyhow::Result<(
        Option<ConstraintSpec>,
        Option<crate::decode::regions::TagPlan>,
    )> {
        let all = constraint.occurrences();
        if self.trigger.is_empty() || all.len() <= 1 {
            let spec = constraint.spec()?;
            let plan = self.plan(spec.as_ref())?;
            return Ok((spec, plan));
        }
        let usage = |m: String| -> anyhow::Error { crate::diag::UsageError(m).into() };
        let known = |p: Option<usize>| {
            p.ok_or_else(|| {
                usage("several constraints with --trigger need their command-line positions".into())
            })
        };
        if self.trigger_positions.len() != self.trigger.len() {
            return Err(usage(
                "several constraints with --trigger need their command-line positions".into(),
            ));
        }
        let triggers: Vec<(usize, &str)> = self
            .trigger_positions
            .iter()
            .zip(&self.trigger)
            .map(|(&at, t)| (at, t.as_str()))
            .collect();
        let mut constraints = Vec::with_capacity(all.len());
        for (at, flag) in &all {
            constraints.push((known(*at)?, flag.name()));
        }
        let pairs = pair_triggers(&triggers, &constraints).map_err(usage)?;
        if constraint
            .grammar
            .iter()
            .chain(&constraint.schema)
            .filter(|p| is_stdin(p))
            .count()
            > 1
        {
            return Err(usage(
                "only one constraint can be read from stdin (`-`)".into(),
            ));
        }
        let specs = all
            .iter()
            .map(|(_, flag)| constraint.spec_of(*flag))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let regions = pairs
            .iter()
            .zip(&self.trigger)
            .enumerate()
            .map(|(i, (&c, t))| self.region(i, t, &specs[c]))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok((specs.into_iter().next(), Some(self.tag_plan(regions))))
    }

    /// The region of trigger number `i` (0-based) with text `trigger` and grammar `spec`.
    fn region(
        &self,
        i: usize,
        trigger: &str,
        spec: &ConstraintSpec,
    ) -> anyhow::Result<crate::decode::regions::TagRegion> {
        if trigger.is_empty() {
            return Err(crate::diag::UsageError("--trigger is empty".into()).into());
        }
        Ok(crate::decode::regions::TagRegion {
            name: format!("tag {}", i + 1),
            begin: trigger.to_string(),
            prefix: String::new(),
            source: spec.source.clone(),
            end: self.trigger_end.clone().unwrap_or_default(),
        })
    }

    /// The plan of tagged `regions` under these flags (--after-region, --require-region).
    fn tag_plan(
        &self,
        regions: Vec<crate::decode::regions::TagRegion>,
    ) -> crate::decode::regions::TagPlan {
        use crate::decode::regions::{After, TagPlan};
        TagPlan {
            regions,
            after: self.after_region,
            min_regions: usize::from(self.require_region),
            max_regions: (self.after_region == After::End).then_some(1),
            from_start: false,
        }
    }

    /// The tagged regions these flags describe around `spec` (the constraint flags' one
    /// grammar, shared by every trigger), or `None` when the constraint applies to the whole
    /// output.
    pub fn plan(
        &self,
        spec: Option<&ConstraintSpec>,
    ) -> anyhow::Result<Option<crate::decode::regions::TagPlan>> {
        use crate::decode::regions::{TagPlan, tag_regions_from_json};
        let usage = |m: String| -> anyhow::Error { crate::diag::UsageError(m).into() };
        if let Some(end) = self.reasoning.marker()? {
            let spec = spec.ok_or_else(|| usage("--reasoning needs a constraint for the answer: --schema, --grammar, --regex or --json".into()))?;
            return Ok(Some(TagPlan::reasoning(end, spec.source.clone())));
        }
        let regions = if let Some(path) = &self.tags {
            use anyhow::Context;
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("cannot read the tags file {}", path.display()))?;
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| usage(format!("{}: not JSON: {e}", path.display())))?;
            tag_regions_from_json(&value).map_err(|e| usage(format!("{}: {e}", path.display())))?
        } else if !self.trigger.is_empty() {
            let spec = spec.ok_or_else(|| usage("--trigger needs a constraint for its region: --schema, --grammar, --regex or --json".into()))?;
            self.trigger
                .iter()
                .enumerate()
                .map(|(i, t)| self.region(i, t, spec))
                .collect::<anyhow::Result<Vec<_>>>()?
        } else {
            return Ok(None);
        };
        Ok(Some(self.tag_plan(regions)))
    }

    /// Whether token healing is on.
    pub fn token_healing(&self) -> bool {
        !self.healing.no_token_healing
    }
}

/// Model and context flags, shared by every subcommand that runs a model (llama.cpp's
/// spellings: `-m`, `-c/--ctx-size`, `-t/--threads`, `-ngl/--n-gpu-layers`).
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Model")]
pub struct ModelArgs {
    /// GGUF model file [default: $DOMINO_MODEL, else models/SmolLM2-135M-Instruct.Q4_1.gguf
    /// under the current directory, else under the domino source tree]
    #[arg(short = 'm', long, value_name = "FILE", env = "DOMINO_MODEL")]
    pub model: Option<PathBuf>,
    /// Context size in tokens (prompt + output); `domino serve` splits it between its slots.
    #[arg(short = 'c', long, visible_alias = "ctx-size", value_name = "N", default_value_t = 4096, value_parser = clap::value_parser!(u32).range(16..))]
    pub ctx: u32,
    /// CPU threads [default: physical cores]. On a machine that is already busy use 1:
    /// llama.cpp's threads wait for each other by spinning, which collapses under
    /// oversubscription (measured: 2 threads < 1 token/s vs 1 thread 17 tokens/s at load 13 on 2 cores).
    #[arg(short = 't', long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub threads: Option<u32>,
    /// Layers to offload to the GPU, as llama-cli's `-ngl N` (also accepted, as is `--ngl`);
    /// 0 keeps the model on the CPU [default: all in GPU builds (--features cuda|vulkan|metal),
    /// else 0]
    #[arg(long, visible_alias = "ngl", value_name = "N")]
    pub n_gpu_layers: Option<u32>,
}

impl ModelArgs {
    /// The model configuration these flags describe (`$DOMINO_MODEL` already in `model`).
    pub fn config(&self) -> ModelConfig {
        ModelConfig {
            path: self.model.clone(),
            ctx: self.ctx,
            threads: self.threads,
            n_gpu_layers: self.n_gpu_layers,
        }
    }

    /// Load the model these flags name.
    pub fn load(&self) -> anyhow::Result<crate::runtime::Model> {
        self.config().load()
    }

    pub fn session_options(&self) -> crate::runtime::SessionOptions {
        self.config().session_options()
    }
}

/// Sampling flags, with llama-cli's names and meanings (0 or 1 switches a filter off, as
/// there; `--seed -1` draws a random seed). The defaults differ: greedy and unfiltered, so
/// that a run is reproducible unless sampling is asked for.
#[derive(Args, Debug, Clone)]
#[command(next_help_heading = "Sampling")]
pub struct SamplingArgs {
    /// Temperature; 0 = greedy (always the most likely token).
    #[arg(long, value_name = "T", default_value_t = 0.0)]
    pub temp: f32,
    /// Keep only the K most likely tokens (0 = off).
    #[arg(long, value_name = "K", default_value_t = 0)]
    pub top_k: usize,
    /// Nucleus sampling: keep the most likely tokens up to this probability mass (1 = off).
    #[arg(long, value_name = "P", default_value_t = 1.0)]
    pub top_p: f32,
    /// Drop tokens less likely than this fraction of the best one (0 = off).
    #[arg(long, value_name = "P", default_value_t = 0.0)]
    pub min_p: f32,
    /// Random seed for sampling (-1: a random one; -v prints it).
    #[arg(long, value_name = "N", default_value_t = 0, allow_negative_numbers = true, value_parser = parse_seed)]
    pub seed: u64,
}

impl SamplingArgs {
    /// The sampling configuration (a usage error when a value is out of range).
    pub fn config(&self) -> anyhow::Result<SamplingConfig> {
        let config = SamplingConfig {
            temperature: self.temp,
            top_k: self.top_k,
            top_p: self.top_p,
            min_p: self.min_p,
            seed: self.seed,
        };
        config.validate().map_err(crate::diag::UsageError)?;
        Ok(config)
    }
}

/// `--seed`: a number, or -1 (llama.cpp's "random seed") for one drawn from the clock.
fn parse_seed(s: &str) -> Result<u64, String> {
    if s.trim() == "-1" {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        Ok(nanos ^ (u64::from(std::process::id()) << 32))
    } else {
        s.trim()
            .parse::<u64>()
            .map_err(|_| format!("expected a non-negative number or -1 (random), got `{s}`"))
    }
}

/// `--whitespace flexible|compact|pretty`: the engine's [`WhitespacePolicy`] on the command
/// line (the engine crate does not depend on clap, so the parser lives here).
pub fn whitespace_parser() -> impl TypedValueParser<Value = WhitespacePolicy> {
    PossibleValuesParser::new(WhitespacePolicy::ALL.map(|p| p.as_str()))
        .map(|s| s.parse::<WhitespacePolicy>().expect("a possible value"))
}

/// `--property-order`: the engine's [`PropertyOrder`].
pub fn property_order_parser() -> impl TypedValueParser<Value = PropertyOrder> {
    PossibleValuesParser::new(["any", "schema"]).map(|s| match s.as_str() {
        "schema" => PropertyOrder::Schema,
        _ => PropertyOrder::Any,
    })
}

/// `--method`: decode's [`Method`], each value with its description for `--help`.
pub fn method_parser() -> impl TypedValueParser<Value = Method> {
    let help = |m: Method| match m {
        Method::Domino => "DOMINO: minimally invasive masks (lookahead `--k`, default ∞)",
        Method::None => "Unconstrained",
        Method::LlamaGrammar => {
            "llama.cpp's own GBNF grammar sampler (sample, check, resample on rejection)"
        }
        Method::Naive => "The engine at k = 0: tokens may not bridge terminals",
        Method::Template => {
            "Guidance-style: forced text is tokenized and appended without the model"
        }
    };
    PossibleValuesParser::new(Method::ALL.map(|m| PossibleValue::new(m.as_str()).help(help(m))))
        .map(|s| s.parse::<Method>().expect("a possible value"))
}

/// `--draft-policy cost|threshold`: decode's [`DraftPolicy`].
pub fn draft_policy_parser() -> impl TypedValueParser<Value = DraftPolicy> {
    let help = |p: DraftPolicy| match p {
        DraftPolicy::Cost => {
            "Cut each draft where expected tokens per unit of measured forward-pass time peak"
        }
        DraftPolicy::Threshold => {
            "Draft while the count probability stays at or above the threshold, whatever it costs"
        }
    };
    PossibleValuesParser::new(
        DraftPolicy::ALL.map(|p| PossibleValue::new(p.as_str()).help(help(p))),
    )
    .map(|s| s.parse::<DraftPolicy>().expect("a possible value"))
}

/// `--json-style pretty|compact`: eval's [`JsonStyle`].
pub fn json_style_parser() -> impl TypedValueParser<Value = JsonStyle> {
    let help = |s: JsonStyle| match s {
        JsonStyle::Pretty => {
            "Indented by four spaces, one key per line, as in the paper's Listings 8 and 9"
        }
        JsonStyle::Compact => "One line, no spaces",
    };
    PossibleValuesParser::new(JsonStyle::ALL.map(|s| PossibleValue::new(s.as_str()).help(help(s))))
        .map(|s| s.parse::<JsonStyle>().expect("a possible value"))
}
