//! Grammar front ends and the grammar IR.
//!
//! Every way in — GBNF ([`gbnf`]), a Lark subset ([`lark`]), a regex ([`regex`]) and JSON
//! Schema ([`json_schema`]) — parses into a [`expr::GrammarDef`]; [`lower`] turns that into
//! the engine's [`ir::Grammar`] (BNF over regular terminals), promoting regular pieces to
//! terminals. [`mod@reference`] is a slow, obviously correct byte-level recognizer over the IR:
//! the oracle for the engine's masks.
//! [`dfa`] turns a terminal's regular language into a byte DFA (for the scanner, lowering's
//! size checks and the reference recognizer).

pub mod dfa;
pub mod expr;
pub(crate) mod fixpoint;
pub mod gbnf;
pub mod hir_key;
pub mod ir;
pub mod json_schema;
pub mod key_set_dfa;
pub mod lark;
pub mod lazy_dfa;
pub mod lower;
pub(crate) mod nfa;
pub mod print;
pub mod reference;
pub mod regex;
pub mod regex_hir;

use std::fmt;
use std::path::Path;

/// Where in the input a grammar error is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    /// 1-based line and column in a grammar text.
    LineColumn { line: u32, column: u32 },
    /// A JSON pointer into a schema (`/properties/name/type`).
    Pointer(String),
    /// The error is about the grammar as a whole (e.g. an empty language).
    Whole,
}

/// What kind of grammar error this is (tools count them separately).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorKind {
    /// The input is malformed or means nothing (syntax, undefined rule, empty language).
    Invalid,
    /// The input is valid but uses something domino does not support (a schema keyword).
    Unsupported,
    /// A configured limit was exceeded (nesting depth, repetition bound, size).
    Limit,
}

/// A grammar or schema error with its position. Displayed as `line:col: message` or
/// `at /pointer: message`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrammarError {
    pub kind: ErrorKind,
    pub location: Location,
    pub message: String,
    /// For `Unsupported`: the keyword or feature name (e.g. `"patternProperties"`).
    pub feature: Option<String>,
}

impl GrammarError {
    pub fn at(line: u32, column: u32, message: impl Into<String>) -> Self {
        GrammarError {
            kind: ErrorKind::Invalid,
            location: Location::LineColumn { line, column },
            message: message.into(),
            feature: None,
        }
    }

    pub fn at_pointer(pointer: impl Into<String>, message: impl Into<String>) -> Self {
        GrammarError {
            kind: ErrorKind::Invalid,
            location: Location::Pointer(pointer.into()),
            message: message.into(),
            feature: None,
        }
    }

    pub fn whole(message: impl Into<String>) -> Self {
        GrammarError {
            kind: ErrorKind::Invalid,
            location: Location::Whole,
            message: message.into(),
            feature: None,
        }
    }

    pub fn unsupported(
        pointer: impl Into<String>,
        feature: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        GrammarError {
            kind: ErrorKind::Unsupported,
            location: Location::Pointer(pointer.into()),
            message: message.into(),
            feature: Some(feature.into()),
        }
    }

    pub fn with_kind(mut self, kind: ErrorKind) -> Self {
        self.kind = kind;
        self
    }
}

impl fmt::Display for GrammarError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.location {
            Location::LineColumn { line, column } => write!(f, "{line}:{column}: {}", self.message),
            Location::Pointer(p) => write!(
                f,
                "at {}: {}",
                if p.is_empty() { "/" } else { p },
                self.message
            ),
            Location::Whole => write!(f, "{}", self.message),
        }
    }
}

impl std::error::Error for GrammarError {}

/// A compilation stopped by its [`crate::budget::Budget`] is a limit error of the grammar as a
/// whole (exit code 2, an HTTP 400), its message naming the stage and the limit.
impl From<crate::budget::BudgetExceeded> for GrammarError {
    fn from(e: crate::budget::BudgetExceeded) -> Self {
        GrammarError::whole(e.to_string()).with_kind(ErrorKind::Limit)
    }
}

/// A cheap budget checkpoint for the front ends and lowering (see [`crate::budget::over`]).
pub(crate) fn budget_over(stage: &'static str) -> Result<(), GrammarError> {
    if crate::budget::over(stage) {
        crate::budget::status()?;
    }
    Ok(())
}

/// JSON whitespace policy for schema-derived grammars.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhitespacePolicy {
    /// Any JSON whitespace between tokens, at most `max_whitespace` bytes in a row.
    #[default]
    Flexible,
    /// No whitespace at all.
    Compact,
    /// Newlines and two-space indentation as `serde_json::to_string_pretty` writes it.
    Pretty,
}

impl WhitespacePolicy {
    /// Every policy, in the order `--help` lists them.
    pub const ALL: [WhitespacePolicy; 3] = [
        WhitespacePolicy::Flexible,
        WhitespacePolicy::Compact,
        WhitespacePolicy::Pretty,
    ];

    /// The policy's name on the command line and in JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            WhitespacePolicy::Flexible => "flexible",
            WhitespacePolicy::Compact => "compact",
            WhitespacePolicy::Pretty => "pretty",
        }
    }
}

impl fmt::Display for WhitespacePolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for WhitespacePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        WhitespacePolicy::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| format!("unknown whitespace policy `{s}` (flexible, compact, pretty)"))
    }
}

/// Options shared by the front ends.
#[derive(Clone, Debug)]
pub struct CompileOptions {
    /// Start rule name (GBNF default `root`, Lark default `start`).
    pub start: Option<String>,
    pub whitespace: WhitespacePolicy,
    /// Longest run of whitespace bytes the flexible policy allows.
    pub max_whitespace: u32,
    /// Ignore unsupported schema keywords (warning on stderr) instead of failing.
    pub lenient: bool,
    /// Unknown schema keywords (typos such as `maxLenght`) are errors instead of warnings.
    pub strict: bool,
    /// JSON front ends, flexible policy: allow whitespace after the root value. Off (the
    /// default), the document ends where its root value ends, so a decoder stops at the
    /// closing brace instead of spending tokens on whitespace up to its token limit (a
    /// chat model would otherwise emit newlines until `max_whitespace`, then EOS).
    /// Whitespace inside the document is unaffected.
    pub trailing_whitespace: bool,
    /// JSON Schema objects: which orders of the named properties the grammar admits.
    pub property_order: PropertyOrder,
    /// The time and memory budget of the compilation ([`crate::budget`]):
    /// [`GrammarSource::compile`] arms it for parsing and lowering; callers that also build
    /// the engine's grammar and first mask arm it around all of that (a tighter budget armed
    /// outside wins). Default: [`Budget::DEFAULT`](crate::budget::Budget::DEFAULT).
    pub budget: crate::budget::Budget,
}

/// Which member orders a JSON Schema object admits (see `json_schema::objects`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum PropertyOrder {
    /// The order of `properties` (then `required` names not listed there); optional ones may
    /// be left out. Smallest grammar; blocks a model that writes `age` before `name`.
    Schema,
    /// Every order, each named property at most once, required ones present, extra members
    /// anywhere, for objects with at most
    /// [`MAX_ANY_ORDER_PROPERTIES`](json_schema::MAX_ANY_ORDER_PROPERTIES) named properties;
    /// larger objects fall back to schema order with a warning naming their JSON pointer.
    #[default]
    Any,
}

impl Default for CompileOptions {
    fn default() -> Self {
        CompileOptions {
            start: None,
            whitespace: WhitespacePolicy::Flexible,
            max_whitespace: 20,
            lenient: false,
            strict: false,
            trailing_whitespace: false,
            property_order: PropertyOrder::Any,
            budget: crate::budget::Budget::DEFAULT,
        }
    }
}

/// A constraint's source, before compilation.
#[derive(Clone, Debug)]
pub enum GrammarSource {
    Gbnf(String),
    Lark(String),
    /// A Rust-`regex`-syntax pattern matched against the whole output.
    Regex(String),
    JsonSchema(serde_json::Value),
    /// Any JSON document (the schema `{}`).
    Json,
}

/// Nesting depth past which `serde_json` refuses a document (its recursion limit).
pub const JSON_MAX_DEPTH: usize = 128;

/// A grammar file's text, or an error giving the byte offset (and line and column) of the
/// first invalid UTF-8 sequence: every command reads grammars through here.
pub fn utf8_text(bytes: Vec<u8>) -> Result<String, GrammarError> {
    String::from_utf8(bytes).map_err(|e| {
        let offset = e.utf8_error().valid_up_to();
        let before = &e.as_bytes()[..offset];
        let line = before.iter().filter(|&&b| b == b'\n').count() + 1;
        let line_start = before
            .iter()
            .rposition(|&b| b == b'\n')
            .map_or(0, |i| i + 1);
        // Characters (not bytes) since the line start: the prefix is valid UTF-8.
        let column = String::from_utf8_lossy(&before[line_start..])
            .chars()
            .count()
            + 1;
        GrammarError::at(
            line as u32,
            column as u32,
            format!("invalid UTF-8 at byte offset {offset}"),
        )
    })
}

/// A schema that `serde_json` refuses, as a positioned error. Documents nested deeper than
/// [`JSON_MAX_DEPTH`] are valid JSON that the parser will not read: say so, not "not JSON".
pub fn json_error(e: serde_json::Error) -> GrammarError {
    let message = if e.to_string().starts_with("recursion limit exceeded") {
        format!(
            "the schema is nested deeper than {JSON_MAX_DEPTH} levels (the JSON parser's limit)"
        )
    } else {
        format!("schema is not valid JSON: {e}")
    };
    GrammarError::at(e.line() as u32, e.column() as u32, message)
}

impl GrammarSource {
    /// Read a grammar file, choosing the front end by extension: `.gbnf`, `.lark`, `.json`
    /// (a JSON Schema). Other extensions are an error naming the accepted ones.
    pub fn from_path(path: &Path) -> anyhow::Result<GrammarSource> {
        use anyhow::Context;
        let bytes = std::fs::read(path)
            .with_context(|| format!("cannot read grammar file {}", path.display()))?;
        let text = utf8_text(bytes)
            .with_context(|| format!("cannot read grammar file {}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().to_lowercase())
            .unwrap_or_default();
        if name.ends_with(".gbnf") {
            Ok(GrammarSource::Gbnf(text))
        } else if name.ends_with(".lark") {
            Ok(GrammarSource::Lark(text))
        } else if name.ends_with(".json") {
            let value: serde_json::Value = serde_json::from_str(&text).map_err(json_error)?;
            Ok(GrammarSource::JsonSchema(value))
        } else {
            anyhow::bail!(
                "{}: unknown grammar type (expected .gbnf, .lark or .json)",
                path.display()
            )
        }
    }

    /// Parse with the matching front end (no lowering).
    pub fn parse(&self, opts: &CompileOptions) -> Result<expr::GrammarDef, GrammarError> {
        match self {
            GrammarSource::Gbnf(text) => gbnf::parse(text, opts.start.as_deref().unwrap_or("root")),
            GrammarSource::Lark(text) => {
                lark::parse(text, opts.start.as_deref().unwrap_or("start"))
            }
            GrammarSource::Regex(pattern) => regex::parse(pattern),
            GrammarSource::JsonSchema(schema) => json_schema::compile(schema, opts),
            GrammarSource::Json => json_schema::compile(&serde_json::json!({}), opts),
        }
    }

    /// Parse and lower to the engine's IR, under `opts.budget`.
    pub fn compile(&self, opts: &CompileOptions) -> Result<ir::Grammar, GrammarError> {
        let _budget = opts.budget.enter();
        let def = self.parse(opts)?;
        crate::budget::check("the grammar's rules")?;
        let lowered = lower::lower(&def);
        let rules = def.rules.len();
        free_later(def, rules);
        lowered
    }
}

/// Rules from which a [`expr::GrammarDef`] (and what lowering built from it) is freed on a
/// background thread instead of by the compiling one.
pub(crate) const FREE_LATER_RULES: usize = 1_000;

/// Free `x`, built for a definition of `rules` rules, off the compiling thread when the
/// definition is big (at least [`FREE_LATER_RULES`]): a Kubernetes schema's rules are tens of
/// thousands of small allocations (expressions, names, HIR), about 1 ms of a 20 ms time to
/// first mask, and lowering's per-rule HIRs as many again (15 % of lowering such a schema was
/// dropping them), that nothing waits for. One thread per process, started by the first big
/// compile, frees them in order; small values (a small one costs less to free than to send),
/// and any if the thread cannot be started, are freed here.
pub(crate) fn free_later<T: Send + 'static>(x: T, rules: usize) {
    if rules < FREE_LATER_RULES {
        return;
    }
    use std::sync::{OnceLock, mpsc};
    type Garbage = Box<dyn Send>;
    static QUEUE: OnceLock<Option<mpsc::Sender<Garbage>>> = OnceLock::new();
    let queue = QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Garbage>();
        std::thread::Builder::new()
            .name("domino-free".into())
            .spawn(move || rx.into_iter().for_each(drop))
            .ok()?;
        Some(tx)
    });
    if let Some(tx) = queue {
        // A send fails only if the thread is gone; the value then comes back and is
        // dropped here.
        let _ = tx.send(Box::new(x));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_utf8_names_its_byte_offset() {
        let e = utf8_text(b"root ::= \"\xc3\xa9\"\nx ::= \"a\xffb\"".to_vec()).unwrap_err();
        assert!(e.message.contains("byte offset 22"), "{e}");
        assert_eq!(e.location, Location::LineColumn { line: 2, column: 9 });
    }

    #[test]
    fn deep_json_says_nested_deeper() {
        let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
        let e = json_error(serde_json::from_str::<serde_json::Value>(&deep).unwrap_err());
        assert!(e.message.contains("nested deeper than 128 levels"), "{e}");
    }
}
