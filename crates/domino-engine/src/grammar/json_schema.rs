//! JSON Schema → grammar: the `--schema` / `--json` front end.
//!
//! [`compile`] turns a JSON Schema (drafts 4 to 2020-12, local references only) into a
//! [`GrammarDef`] whose language is a set of JSON texts that all validate against the schema.
//! It is aimed at JSONSchemaBench: every keyword that constrains instances is either compiled
//! exactly, compiled to a documented *subset* (never a superset) of the valid instances, or
//! reported as [`ErrorKind::Unsupported`](super::ErrorKind) naming the keyword and its JSON
//! pointer (with `lenient`, a warning in [`GrammarDef::warnings`] instead, and the keyword is
//! ignored). Annotation keywords (`title`, `description`, `default`, `examples`, ...) and
//! unknown keywords constrain nothing and are ignored, as the specification says.
//!
//! # Shape of the grammar (why it is fast for the engine)
//! - JSON strings, numbers, integer ranges, formats, `pattern`s, object keys (`"name"`, one
//!   literal) and whitespace runs are single [`RuleKind::Lexical`] rules, so each becomes one
//!   terminal; objects and arrays are syntactic rules over them.
//! - Object members follow the order of `properties`; optional ones may be left out (the
//!   order of the rest is kept). Where extra members are allowed (`additionalProperties` not
//!   `false`, `patternProperties`), they come after the named ones, and their keys are never
//!   one of the named keys (so a document has no duplicate keys whose value would escape its
//!   schema). Extra keys use no `\u` escapes for characters that need none (so a key cannot
//!   spell a named key in disguise).
//! - `$ref` targets become one rule each (recursion is just rule recursion); they are
//!   compiled from a work list, so long reference chains use no stack.
//! - Where one regular expression cannot say it, a terminal is an *intersection*
//!   ([`ir::Constraints`], [`Expr::Constrained`]): a `pattern` (or `format`) with length
//!   bounds it does not imply, a `pattern` with a `format`, a `patternProperties` key minus
//!   the named keys it matches (and minus what a leading `(?!…)` excludes), a string minus
//!   `not: {enum: [...]}`, a number that must also be a `multipleOf`. The lexer builds their
//!   product automata; each is limited to [`MAX_CONSTRAINED_STATES`] states (every scanner
//!   state costs the engine a token tree), beyond which the keyword is `Unsupported`.
//!
//! # Whitespace
//! - `Flexible`: any JSON whitespace around structural characters and around the whole
//!   document, each run at most `max_whitespace` bytes (so no runaway).
//! - `Compact`: none.
//! - `Pretty`: exactly `serde_json::to_string_pretty`'s layout (newline, two spaces per level,
//!   `": "` after keys, `[]`/`{}` for empty containers) for the first [`MAX_PRETTY_DEPTH`]
//!   levels of nesting; values nested deeper than that are written compactly.
//!
//! # Combinators
//! - `allOf` (and `$ref` with sibling keywords) is merged into one schema (module `merge`).
//! - `anyOf` is an alternation; sibling keywords are merged into each branch.
//! - `oneOf` is compiled as `anyOf` only when no instance can satisfy two branches: branches
//!   of different types, disjoint constants, a property one branch requires whose value
//!   shape (type, constants, pattern, its own discriminators, a few levels deep) is disjoint
//!   from what the other branch allows for that key (`properties`, `patternProperties`,
//!   `additionalProperties`), a required property another branch forbids, string patterns /
//!   formats whose regexes have an empty intersection (checked on their DFAs), or every
//!   branch of an inner `anyOf`/`oneOf` disjoint from the other side. Branches that
//!   only list `enum`/`const` values become the values listed exactly once. Branches that
//!   only say which properties are `required` become a presence constraint (below).
//!   Anything else is `Unsupported` naming `oneOf`.
//! - Presence constraints — `oneOf`/`anyOf` of `required` sets, `dependencies` /
//!   `dependentRequired` property lists, `not: {required: [...]}` — are exact: the member
//!   chain tracks which of the (at most 12) properties concerned are present.
//! - `not` is compiled for `{}` (nothing), `false` (no constraint), `{type: ...}`,
//!   `{required: [...]}` and `{enum|const: strings}` (every escape form of those strings is
//!   removed from the string terminal); other forms are `Unsupported`.
//! - `if`/`then`/`else` that test one property's value (`{"properties": {"D": {"const" |
//!   "enum": …}}}`) on a `type: object` schema, alone or as `allOf` members (the
//!   discriminated-union idiom), are rewritten exactly into an `anyOf` with one branch per
//!   tested value, one for the other values and, unless `D` is required, one for objects
//!   without `D`. Other conditionals are `Unsupported`.
//!
//! # Subsets (sound but stricter than the schema; see also [`lexical`])
//! Each is reported in [`GrammarDef::warnings`] where it applies.
//! - Integers are written without fraction or exponent (and never as `-0`); bounded numbers
//!   without exponent.
//! - `patternProperties` whose keys do not cover every string: keys matching no pattern are not
//!   generated even when `additionalProperties` would allow them.
//! - `$ref` with sibling keywords: the siblings apply too (2019-09+ semantics; under draft 7
//!   they would be ignored, so this is stricter there).
//! - Length bounds on a `pattern` are exact (rewritten or intersected); only when the
//!   intersection is too large and the pattern has several repeated parts is the length
//!   budget split between them.
//! - `format: email`/`idn-email` are a conservative ASCII subset of valid addresses; other
//!   formats likewise (see [`lexical`]). A `format` with a `maxLength` too long to count up
//!   to within [`MAX_CONSTRAINED_STATES`] is generated up to 128, 64 or 32 characters.
//! - `multipleOf`: integers (any `k` up to 10^6 whose part coprime to 10 is at most 13),
//!   `10^-n`, and `c/10^n` with `c` dividing `10^n` (0.25, 0.5, …); numbers without exponent.
//! - Schema-valued `dependencies` of the form `{properties, required}`: the property schemas
//!   apply whether or not the trigger property is present.
//! - Untyped `oneOf` branches about one type family (all `properties`, say) are restricted to
//!   that type (exact unless a single branch is untyped).
//! - `uniqueItems: true` is compiled only when at most one item is possible.
//! - Named members (from `properties`, `required`, presence constraints) and the first extra
//!   member count towards `minProperties`; further extra members may repeat a key, which a
//!   JSON parser keeps once, so `minProperties` beyond that is unsupported.
//!
//! # Soundness tests
//! `tests/json_schema.rs` checks generated instances both ways against the `jsonschema`
//! crate, and samples documents from the grammars themselves (and from every compiled
//! JSONSchemaBench schema in `tests/json_schema_bench.rs`) and validates them.
//!
//! # Limits (errors, never stack overflows)
//! Subschemas nest at most [`MAX_SCHEMA_DEPTH`] deep on one path, enums have at most
//! [`MAX_ENUM_VALUES`] values, a grammar at most [`MAX_RULES`] rules, and `allOf` merging does
//! at most [`MAX_MERGE_STEPS`] steps.

pub mod instances;
pub mod lexical;
mod merge;

use std::collections::HashMap;

use regex_syntax::hir::Hir;
use serde_json::{Map, Value};

use super::expr::{Expr, GrammarDef, Rule, RuleId, RuleKind, Span};
use super::ir;
use super::{CompileOptions, ErrorKind, GrammarError, WhitespacePolicy};

/// Subschemas nested deeper than this on one compile path are a `Limit` error.
pub const MAX_SCHEMA_DEPTH: usize = 128;
/// `Pretty` indents this many levels; deeper values are written compactly.
pub const MAX_PRETTY_DEPTH: u32 = 16;
/// More `enum` values than this are a `Limit` error.
pub const MAX_ENUM_VALUES: usize = 4096;
/// A grammar with more rules than this is a `Limit` error.
pub const MAX_RULES: usize = 100_000;
/// `allOf` merges (and sibling distributions) allowed per schema.
pub const MAX_MERGE_STEPS: usize = 20_000;
/// Strings up to this many characters are one terminal; longer bounds are built from blocks.
pub const STRING_BLOCK: u64 = 256;
/// The most automaton states of one intersection terminal (a `pattern` with length bounds,
/// a `pattern` with a `format`, a pattern key minus the named keys). Every scanner state
/// costs the engine a token tree, so this stays small.
pub const MAX_CONSTRAINED_STATES: usize = 6_000;
/// Shorter maxima tried, longest first, for a `format` whose own `maxLength` makes the
/// intersection too large (see `string`).
const FORMAT_LENGTH_CAPS: [u64; 3] = [128, 64, 32];
/// `minProperties`/`maxProperties` counting states allowed per object.
pub const MAX_COUNT_STATES: usize = 20_000;

/// Keywords that constrain nothing.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$schema",
    "$id",
    "id",
    "$comment",
    "default",
    "examples",
    "example",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$anchor",
    "$dynamicAnchor",
    "$vocabulary",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
    "$defs",
    "definitions",
];

/// Keywords compiled here.
const HANDLED: &[&str] = &[
    "type",
    "enum",
    "const",
    "$ref",
    "allOf",
    "anyOf",
    "oneOf",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "minProperties",
    "maxProperties",
    "items",
    "prefixItems",
    "additionalItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "dependencies",
    "dependentRequired",
];

/// Keywords that constrain instances and are not compiled: always `Unsupported` (or a warning).
/// (`then`/`else` without `if`, and `min/maxContains` without `contains`, do nothing.)
const UNSUPPORTED: &[&str] = &[
    "not",
    "if",
    "dependentSchemas",
    "propertyNames",
    "contains",
    "unevaluatedProperties",
    "unevaluatedItems",
    "$dynamicRef",
    "$recursiveRef",
];

/// Internal schema key carrying `anyOf`/`oneOf` presence constraints from
/// [`Compiler::presence_rewrite`] to [`Compiler::object`] (not a JSON Schema keyword; the NUL
/// keeps it from colliding with a user's key).
pub(crate) const PRESENCE_KEY: &str = "\u{0}domino-presence";

/// A constraint on which properties an object has (its members' values aside).
#[derive(Clone, Debug)]
enum Presence {
    /// Exactly one of the sets is fully present.
    OneOf(Vec<Vec<String>>),
    /// At least one of the sets is fully present.
    AnyOf(Vec<Vec<String>>),
    /// If the property is present, so is the whole set (`dependencies`, `dependentRequired`).
    Implies(String, Vec<String>),
    /// Not the whole set (`not: {required: [...]}`).
    NotAll(Vec<String>),
}

/// [`Presence`] over bit masks of tracked properties (`None`: a set that can never be fully
/// present, because one of its properties cannot occur).
#[derive(Clone, Debug)]
enum PresenceMask {
    OneOf(Vec<Option<u32>>),
    AnyOf(Vec<Option<u32>>),
    Implies(Option<u32>, Option<u32>),
    NotAll(Option<u32>),
}

fn presence_ok(constraints: &[PresenceMask], b: u32) -> bool {
    let all = |m: &Option<u32>| m.is_some_and(|m| b & m == m);
    constraints.iter().all(|c| match c {
        PresenceMask::OneOf(sets) => sets.iter().filter(|m| all(m)).count() == 1,
        PresenceMask::AnyOf(sets) => sets.iter().any(all),
        PresenceMask::Implies(a, set) => !all(a) || all(set),
        PresenceMask::NotAll(set) => !all(set),
    })
}

/// `{"required": [...]}` (annotations aside): the names, else `None`.
fn required_only(v: &Value) -> Option<Vec<String>> {
    let m = v.as_object()?;
    if m.keys().any(|k| is_keyword(k) && k != "required") {
        return None;
    }
    let names = m.get("required")?.as_array()?;
    names
        .iter()
        .map(|n| n.as_str().map(str::to_string))
        .collect()
}

/// Compile a JSON Schema to a grammar whose language is JSON texts valid for the schema.
pub fn compile(schema: &Value, opts: &CompileOptions) -> Result<GrammarDef, GrammarError> {
    let mut c = Compiler::new(schema, opts);
    let root_value = c.value(schema, "", 0)?;
    let (lead, trail) = match opts.whitespace {
        WhitespacePolicy::Flexible => (c.ws(), c.ws()),
        _ => (Expr::Empty, Expr::Empty),
    };
    let start = c.add_rule(
        "root",
        Expr::Seq(vec![lead, root_value, trail]),
        RuleKind::Syntactic,
    )?;
    c.drain_refs()?;
    Ok(GrammarDef {
        rules: c.rules,
        start,
        ignore: Vec::new(),
        warnings: c.warnings,
    })
}

/// A numeric bound: the value and whether it is inclusive.
type Bound = (f64, bool);

/// Layout of structural characters at one nesting depth.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Style {
    Flexible,
    Compact,
    Pretty(u32),
}

/// The JSON types, as a bit set.
pub(crate) mod ty {
    pub const NULL: u8 = 1;
    pub const BOOL: u8 = 2;
    pub const INT: u8 = 4;
    /// Numbers that are not integers.
    pub const FRAC: u8 = 8;
    pub const STRING: u8 = 16;
    pub const ARRAY: u8 = 32;
    pub const OBJECT: u8 = 64;
    pub const NUMBER: u8 = INT | FRAC;
    pub const ALL: u8 = 127;

    pub fn from_name(name: &str) -> Option<u8> {
        Some(match name {
            "null" => NULL,
            "boolean" => BOOL,
            "integer" => INT,
            "number" => NUMBER,
            "string" => STRING,
            "array" => ARRAY,
            "object" => OBJECT,
            _ => return None,
        })
    }

    pub fn of_value(v: &serde_json::Value) -> u8 {
        use serde_json::Value;
        match v {
            Value::Null => NULL,
            Value::Bool(_) => BOOL,
            Value::Number(n) => {
                if n.is_i64() || n.is_u64() || n.as_f64().is_some_and(|f| f.fract() == 0.0) {
                    INT
                } else {
                    FRAC
                }
            }
            Value::String(_) => STRING,
            Value::Array(_) => ARRAY,
            Value::Object(_) => OBJECT,
        }
    }
}

pub(crate) struct Compiler<'a> {
    root: &'a Value,
    opts: &'a CompileOptions,
    rules: Vec<Rule>,
    warnings: Vec<String>,
    /// `(resolved pointer, depth)` → the rule compiled from it.
    refs: HashMap<(String, u32), RuleId>,
    pending: Vec<(RuleId, String, u32)>,
    /// Lexical rules by their regex text (dedup).
    lexical: HashMap<String, RuleId>,
    any_rules: HashMap<u32, RuleId>,
    nest: usize,
    merge_steps: usize,
}

fn merge_schemas(a: Value, b: Value) -> Value {
    if is_trivially_true(&a) {
        return b;
    }
    if is_trivially_true(&b) {
        return a;
    }
    Value::Object(
        [("allOf".to_string(), Value::Array(vec![a, b]))]
            .into_iter()
            .collect(),
    )
}

fn json_entry(kind: &str, sets: Vec<Value>) -> Value {
    Value::Object(
        [
            ("kind".to_string(), Value::String(kind.to_string())),
            ("sets".to_string(), Value::Array(sets)),
        ]
        .into_iter()
        .collect(),
    )
}

fn join_ptr(ptr: &str, token: &str) -> String {
    format!("{ptr}/{}", token.replace('~', "~0").replace('/', "~1"))
}

fn sanitize(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let s = s.trim_matches('-');
    let s: String = s.chars().take(40).collect();
    if s.is_empty() { "value".to_string() } else { s }
}

fn is_trivially_true(v: &Value) -> bool {
    match v {
        Value::Bool(b) => *b,
        Value::Object(m) => m
            .keys()
            .all(|k| ANNOTATIONS.contains(&k.as_str()) || !is_keyword(k)),
        _ => false,
    }
}

pub(super) fn is_keyword(k: &str) -> bool {
    HANDLED.contains(&k) || UNSUPPORTED.contains(&k)
}

fn as_u64(v: &Value, ptr: &str, kw: &str) -> Result<u64, GrammarError> {
    v.as_u64()
        .or_else(|| {
            v.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0 && *f < 1e15)
                .map(|f| f as u64)
        })
        .ok_or_else(|| {
            GrammarError::at_pointer(
                join_ptr(ptr, kw),
                format!("`{kw}` must be a non-negative integer"),
            )
        })
}

impl<'a> Compiler<'a> {
    fn new(root: &'a Value, opts: &'a CompileOptions) -> Self {
        Compiler {
            root,
            opts,
            rules: Vec::new(),
            warnings: Vec::new(),
            refs: HashMap::new(),
            pending: Vec::new(),
            lexical: HashMap::new(),
            any_rules: HashMap::new(),
            nest: 0,
            merge_steps: 0,
        }
    }

    // -------------------------------------------------------------------------------
    // Rules and layout
    // -------------------------------------------------------------------------------

    fn add_rule(&mut self, name: &str, expr: Expr, kind: RuleKind) -> Result<RuleId, GrammarError> {
        if self.rules.len() >= MAX_RULES {
            return Err(GrammarError::whole(format!(
                "schema needs more than {MAX_RULES} grammar rules"
            ))
            .with_kind(ErrorKind::Limit));
        }
        let id = RuleId(self.rules.len() as u32);
        self.rules.push(Rule {
            name: format!("{}-{}", sanitize(name), id.0),
            expr,
            kind,
            span: Span::default(),
        });
        Ok(id)
    }

    /// A lexical rule for a regex (deduplicated by its text).
    fn lex(&mut self, name: &str, pattern: String) -> Result<Expr, GrammarError> {
        if let Some(&id) = self.lexical.get(&pattern) {
            return Ok(Expr::Ref(id));
        }
        let hir = lexical::hir(&pattern);
        let id = self.add_rule(name, Expr::Regex(hir), RuleKind::Lexical)?;
        self.lexical.insert(pattern, id);
        Ok(Expr::Ref(id))
    }

    fn lex_hir(&mut self, name: &str, key: String, hir: Hir) -> Result<Expr, GrammarError> {
        if let Some(&id) = self.lexical.get(&key) {
            return Ok(Expr::Ref(id));
        }
        let id = self.add_rule(name, Expr::Regex(hir), RuleKind::Lexical)?;
        self.lexical.insert(key, id);
        Ok(Expr::Ref(id))
    }

    /// `expr` as something cheap to copy: small expressions as they are, others behind a
    /// rule (so a value used in several places is not duplicated, which would grow
    /// exponentially with nesting).
    fn shared(&mut self, name: &str, expr: Expr) -> Result<Expr, GrammarError> {
        Ok(match expr {
            Expr::Ref(_) | Expr::Bytes(_) | Expr::Empty => expr,
            Expr::Alt(ref v) if v.is_empty() => expr,
            other => Expr::Ref(self.add_rule(name, other, RuleKind::Syntactic)?),
        })
    }

    fn style(&self, d: u32) -> Style {
        match self.opts.whitespace {
            WhitespacePolicy::Flexible => Style::Flexible,
            WhitespacePolicy::Compact => Style::Compact,
            WhitespacePolicy::Pretty if d <= MAX_PRETTY_DEPTH => Style::Pretty(d),
            WhitespacePolicy::Pretty => Style::Compact,
        }
    }

    /// Depth of a container's children (only pretty printing distinguishes depths).
    fn child(&self, d: u32) -> u32 {
        match self.opts.whitespace {
            WhitespacePolicy::Pretty => (d + 1).min(MAX_PRETTY_DEPTH + 1),
            _ => 0,
        }
    }

    fn ws(&mut self) -> Expr {
        let pattern = lexical::whitespace_pattern(self.opts.max_whitespace);
        self.lex("ws", pattern).unwrap_or(Expr::Empty)
    }

    fn newline(d: u32) -> Expr {
        Expr::Bytes(format!("\n{}", "  ".repeat(d as usize)).into_bytes())
    }

    /// After `{`/`[` before the first member.
    fn lead(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => self.ws(),
            Style::Compact => Expr::Empty,
            Style::Pretty(d) => Self::newline(d + 1),
        }
    }

    /// Between members (the comma included).
    fn sep(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => Expr::Seq(vec![Expr::Bytes(b",".to_vec()), self.ws()]),
            Style::Compact => Expr::Bytes(b",".to_vec()),
            Style::Pretty(d) => {
                Expr::Bytes(format!(",\n{}", "  ".repeat(d as usize + 1)).into_bytes())
            }
        }
    }

    /// After the last member, before `}`/`]`.
    fn trail(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Pretty(d) => Self::newline(d),
            _ => Expr::Empty,
        }
    }

    /// Inside an empty container.
    fn empty_inner(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => self.ws(),
            _ => Expr::Empty,
        }
    }

    /// After a key.
    fn colon(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => Expr::Seq(vec![self.ws(), Expr::Bytes(b":".to_vec()), self.ws()]),
            Style::Compact => Expr::Bytes(b":".to_vec()),
            Style::Pretty(_) => Expr::Bytes(b": ".to_vec()),
        }
    }

    /// After a member value (before `,` or the closing bracket).
    fn after_value(&mut self, d: u32) -> Expr {
        match self.style(d) {
            Style::Flexible => self.ws(),
            _ => Expr::Empty,
        }
    }

    fn unsupported(
        &mut self,
        ptr: &str,
        keyword: &str,
        msg: impl Into<String>,
    ) -> Result<(), GrammarError> {
        let msg = msg.into();
        let at = join_ptr(ptr, keyword);
        if self.opts.lenient {
            self.warnings
                .push(format!("ignored unsupported `{keyword}` at {at}: {msg}"));
            Ok(())
        } else {
            Err(GrammarError::unsupported(
                at,
                keyword,
                format!("unsupported `{keyword}`: {msg}"),
            ))
        }
    }

    fn never() -> Expr {
        Expr::Alt(Vec::new())
    }

    // -------------------------------------------------------------------------------
    // References
    // -------------------------------------------------------------------------------

    /// Resolve a local `$ref` to (canonical pointer, target).
    pub(crate) fn resolve(
        &self,
        reference: &str,
        ptr: &str,
    ) -> Result<(String, &'a Value), GrammarError> {
        let at = join_ptr(ptr, "$ref");
        let mut r = reference;
        if let Some(id) = self
            .root
            .get("$id")
            .or_else(|| self.root.get("id"))
            .and_then(Value::as_str)
        {
            let base = id.trim_end_matches('#');
            if !base.is_empty() {
                if let Some(rest) = r.strip_prefix(base) {
                    r = rest;
                }
            }
        }
        if r.is_empty() {
            r = "#";
        }
        let Some(fragment) = r.strip_prefix('#') else {
            return Err(GrammarError::unsupported(
                at,
                "$ref",
                format!("only local references (`#...`) are supported, not `{reference}`"),
            ));
        };
        let fragment = percent_decode(fragment);
        if fragment.is_empty() || fragment.starts_with('/') {
            return match self.root.pointer(&fragment) {
                Some(v) => Ok((fragment, v)),
                None => Err(GrammarError::at_pointer(
                    at,
                    format!("`$ref` target `{reference}` does not exist"),
                )),
            };
        }
        // A plain-name fragment: an `$anchor` (or draft-6 `$id: "#name"`).
        let mut stack: Vec<(String, &'a Value)> = vec![(String::new(), self.root)];
        let mut visited = 0usize;
        while let Some((p, v)) = stack.pop() {
            visited += 1;
            if visited > 100_000 {
                break;
            }
            match v {
                Value::Object(m) => {
                    let anchor = m.get("$anchor").and_then(Value::as_str);
                    let id = m.get("$id").or_else(|| m.get("id")).and_then(Value::as_str);
                    if anchor == Some(fragment.as_str()) || id == Some(&format!("#{fragment}")) {
                        return Ok((p, v));
                    }
                    for (k, c) in m {
                        if matches!(k.as_str(), "enum" | "const" | "default" | "examples") {
                            continue;
                        }
                        stack.push((join_ptr(&p, k), c));
                    }
                }
                Value::Array(a) => {
                    for (i, c) in a.iter().enumerate() {
                        stack.push((join_ptr(&p, &i.to_string()), c));
                    }
                }
                _ => {}
            }
        }
        Err(GrammarError::at_pointer(
            at,
            format!("`$ref` anchor `{reference}` not found"),
        ))
    }

    /// Follow `$ref`s that are the only constraint of their schema; error on a cycle.
    pub(crate) fn resolve_chain(
        &self,
        reference: &str,
        ptr: &str,
    ) -> Result<(String, &'a Value), GrammarError> {
        let (mut p, mut v) = self.resolve(reference, ptr)?;
        let mut seen = vec![p.clone()];
        loop {
            let Some(m) = v.as_object() else {
                return Ok((p, v));
            };
            let Some(next) = m.get("$ref").and_then(Value::as_str) else {
                return Ok((p, v));
            };
            if m.keys().any(|k| k != "$ref" && is_keyword(k)) {
                return Ok((p, v));
            }
            let (np, nv) = self.resolve(next, &p)?;
            if seen.contains(&np) {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "$ref"),
                    format!(
                        "`$ref` cycle through {} never produces a value",
                        seen.join(" -> ")
                    ),
                ));
            }
            if seen.len() > 64 {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "$ref"),
                    "`$ref` chain longer than 64",
                )
                .with_kind(ErrorKind::Limit));
            }
            seen.push(np.clone());
            p = np;
            v = nv;
        }
    }

    fn ref_rule(&mut self, reference: &str, ptr: &str, d: u32) -> Result<Expr, GrammarError> {
        let (target, _) = self.resolve_chain(reference, ptr)?;
        let key = (target.clone(), d);
        if let Some(&id) = self.refs.get(&key) {
            return Ok(Expr::Ref(id));
        }
        let name = target.rsplit('/').next().unwrap_or("ref").to_string();
        let id = self.add_rule(
            if name.is_empty() { "root-ref" } else { &name },
            Expr::Empty,
            RuleKind::Syntactic,
        )?;
        self.refs.insert(key, id);
        self.pending.push((id, target, d));
        Ok(Expr::Ref(id))
    }

    fn drain_refs(&mut self) -> Result<(), GrammarError> {
        while let Some((id, target, d)) = self.pending.pop() {
            let v = self.root.pointer(&target).expect("resolved pointer exists");
            let expr = self.value(v, &target, d)?;
            self.rules[id.0 as usize].expr = expr;
        }
        Ok(())
    }

    // -------------------------------------------------------------------------------
    // Values
    // -------------------------------------------------------------------------------

    /// The grammar of the JSON values valid for schema `s` (at JSON pointer `ptr`), laid out
    /// for nesting depth `d`.
    fn value(&mut self, s: &Value, ptr: &str, d: u32) -> Result<Expr, GrammarError> {
        if self.nest >= MAX_SCHEMA_DEPTH {
            return Err(GrammarError::at_pointer(
                ptr,
                format!("subschemas nested deeper than {MAX_SCHEMA_DEPTH}"),
            )
            .with_kind(ErrorKind::Limit));
        }
        self.nest += 1;
        let r = self.value_inner(s, ptr, d);
        self.nest -= 1;
        r
    }

    fn value_inner(&mut self, s: &Value, ptr: &str, d: u32) -> Result<Expr, GrammarError> {
        let obj = match s {
            Value::Bool(true) => return self.any(d),
            Value::Bool(false) => return Ok(Self::never()),
            Value::Object(m) => m,
            _ => {
                return Err(GrammarError::at_pointer(
                    ptr,
                    "a schema must be an object or a boolean",
                ));
            }
        };
        // `if`/`then`/`else` on a required discriminator: rewritten into `anyOf` (exact).
        if let Some(rewritten) = rewrite_discriminated_conditionals(obj) {
            return self.value_inner(&rewritten, ptr, d);
        }
        // Unsupported keywords first: an error, or (lenient) a warning and the keyword dropped.
        let mut owned: Option<Map<String, Value>> = None;
        // `not` forms compiled here: `not: {}` (nothing is valid), `not: false` (no
        // constraint), `not: {type: ...}` (those types removed), `not: {required: [...]}`
        // (a presence constraint on objects, see `object`).
        let mut excluded_types = 0u8;
        let mut not_handled = false;
        if let Some(n) = obj.get("not") {
            if is_trivially_true(n) {
                return Ok(Self::never());
            }
            let type_only = n
                .as_object()
                .filter(|m| m.keys().all(|k| !is_keyword(k) || k == "type"));
            if *n == Value::Bool(false) {
                owned.get_or_insert_with(|| obj.clone()).remove("not");
            } else if let Some(t) = type_only.and_then(|m| m.get("type")) {
                let names: Vec<&str> = match t {
                    Value::String(x) => vec![x.as_str()],
                    Value::Array(a) => a.iter().filter_map(Value::as_str).collect(),
                    _ => Vec::new(),
                };
                for name in names {
                    excluded_types |= ty::from_name(name).ok_or_else(|| {
                        GrammarError::at_pointer(
                            join_ptr(&join_ptr(ptr, "not"), "type"),
                            format!("unknown type `{name}`"),
                        )
                    })?;
                }
                if excluded_types & ty::NUMBER == ty::INT {
                    // Non-integral numbers are not a regular set this compiler writes.
                    excluded_types = 0;
                } else {
                    // Kept in the schema: `enum` filtering checks it with jsonschema.
                    not_handled = true;
                }
            } else if excluded_strings(n).is_some() {
                // `not: {enum: [strings]}`: those strings are removed from the string
                // terminal (see `string`); other types are unaffected.
                not_handled = true;
            }
        }
        for k in obj.keys() {
            if k == "not"
                && (not_handled
                    || obj.get("not").and_then(required_only).is_some()
                    || owned.as_ref().is_some_and(|o| !o.contains_key("not")))
            {
                continue; // handled above, or `not: {required: [...]}`
            }
            if UNSUPPORTED.contains(&k.as_str()) {
                self.unsupported(ptr, k, "this keyword is not compiled to a grammar")?;
                owned.get_or_insert_with(|| obj.clone()).remove(k);
            }
        }
        if obj.contains_key("if") && !obj.contains_key("then") && !obj.contains_key("else") {
            // `if` alone constrains nothing; already reported above when strict.
        }
        let obj: &Map<String, Value> = match &owned {
            Some(m) => m,
            None => obj,
        };
        let constraining = |m: &Map<String, Value>, skip: &[&str]| {
            m.keys()
                .any(|k| is_keyword(k) && !skip.contains(&k.as_str()))
        };

        if let Some(r) = obj.get("$ref") {
            let Some(r) = r.as_str() else {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "$ref"),
                    "`$ref` must be a string",
                ));
            };
            if !constraining(obj, &["$ref"]) {
                return self.ref_rule(r, ptr, d);
            }
            let mut siblings = obj.clone();
            siblings.remove("$ref");
            let merged = merge::merge_all(
                self,
                vec![
                    Value::Object(
                        [("$ref".to_string(), Value::String(r.to_string()))]
                            .into_iter()
                            .collect(),
                    ),
                    Value::Object(siblings),
                ],
                ptr,
            )?;
            return self.value(&merged, ptr, d);
        }
        if let Some(all) = obj.get("allOf") {
            let Some(branches) = all.as_array() else {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "allOf"),
                    "`allOf` must be an array",
                ));
            };
            let mut parts = branches.clone();
            let mut siblings = obj.clone();
            siblings.remove("allOf");
            parts.push(Value::Object(siblings));
            let merged = merge::merge_all(self, parts, &join_ptr(ptr, "allOf"))?;
            return self.value(&merged, ptr, d);
        }
        for kw in ["anyOf", "oneOf"] {
            let Some(list) = obj.get(kw) else { continue };
            let Some(branches) = list.as_array() else {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, kw),
                    format!("`{kw}` must be an array"),
                ));
            };
            if branches.is_empty() {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, kw),
                    format!("`{kw}` must not be empty"),
                ));
            }
            if let Some(rewritten) = self.presence_rewrite(obj, kw, branches, ptr)? {
                return self.value(&rewritten, ptr, d);
            }
            let mut siblings = obj.clone();
            siblings.remove(kw);
            let has_siblings = constraining(&siblings, &[]);
            // oneOf of enum/const-only branches: exactly the values listed by one branch.
            if kw == "oneOf" && !has_siblings {
                if let Some(values) = self.exclusive_values(branches, ptr) {
                    let mut m = Map::new();
                    m.insert("enum".into(), Value::Array(values));
                    return self.value(&Value::Object(m), ptr, d);
                }
            }
            let typed;
            let branches = match merge::restrict_implied_types(self, branches, ptr) {
                Some(t) if kw == "oneOf" => {
                    self.warnings.push(format!(
                        "at {}: untyped `oneOf` branches restricted to the type their keywords are about",
                        join_ptr(ptr, "oneOf")
                    ));
                    typed = t;
                    &typed
                }
                _ => branches,
            };
            let mut effective = Vec::with_capacity(branches.len());
            for b in branches {
                if has_siblings {
                    self.merge_step(ptr)?;
                    let mut m = siblings.clone();
                    m.insert("allOf".into(), Value::Array(vec![b.clone()]));
                    effective.push(Value::Object(m));
                } else {
                    effective.push(b.clone());
                }
            }
            if kw == "oneOf" && effective.len() > 1 && !has_siblings {
                if let Some(rewritten) = self.one_of_with_overlapping_values(branches, ptr)? {
                    return self.value(&rewritten, ptr, d);
                }
            }
            if kw == "oneOf" && effective.len() > 1 {
                if let Err(why) = merge::provably_disjoint(self, &effective, ptr) {
                    self.unsupported(ptr, "oneOf", format!("branches are not provably disjoint ({why}); compiled as anyOf would accept documents matching several"))?;
                }
            }
            let mut alts = Vec::with_capacity(effective.len());
            for (i, b) in effective.iter().enumerate() {
                alts.push(self.value(b, &join_ptr(&join_ptr(ptr, kw), &i.to_string()), d)?);
            }
            return Ok(Expr::Alt(alts));
        }
        if obj.contains_key("enum") || obj.contains_key("const") {
            return self.enum_values(obj, ptr, d);
        }

        let types = match obj.get("type") {
            None => ty::ALL,
            Some(Value::String(t)) => ty::from_name(t).ok_or_else(|| {
                GrammarError::at_pointer(join_ptr(ptr, "type"), format!("unknown type `{t}`"))
            })?,
            Some(Value::Array(ts)) => {
                let mut set = 0;
                for t in ts {
                    let name = t.as_str().unwrap_or("");
                    set |= ty::from_name(name).ok_or_else(|| {
                        GrammarError::at_pointer(
                            join_ptr(ptr, "type"),
                            format!("unknown type `{t}`"),
                        )
                    })?;
                }
                set
            }
            Some(_) => {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "type"),
                    "`type` must be a string or an array",
                ));
            }
        };
        if types == 0 {
            return Err(GrammarError::at_pointer(
                join_ptr(ptr, "type"),
                "`type` allows no type",
            ));
        }
        // Every non-object satisfies `required`, so `not: {required}` only admits objects.
        let types = if obj.get("not").and_then(required_only).is_some() {
            types & ty::OBJECT
        } else {
            types
        };
        // `not: {type: ...}` removes those types.
        let types = types & !excluded_types;
        if types == 0 {
            return Ok(Self::never());
        }
        // No type-specific keyword at all: the generic value (shares rules).
        if types == ty::ALL && !constraining(obj, &["type"]) {
            return self.any(d);
        }
        let mut alts = Vec::new();
        if types & ty::NULL != 0 {
            alts.push(Expr::Bytes(b"null".to_vec()));
        }
        if types & ty::BOOL != 0 {
            alts.push(Expr::Bytes(b"true".to_vec()));
            alts.push(Expr::Bytes(b"false".to_vec()));
        }
        if types & ty::NUMBER != 0 {
            alts.push(self.number(obj, ptr, types & ty::FRAC == 0)?);
        }
        if types & ty::STRING != 0 {
            alts.push(self.string(obj, ptr)?);
        }
        if types & ty::ARRAY != 0 {
            alts.push(self.array(obj, ptr, d)?);
        }
        if types & ty::OBJECT != 0 {
            alts.push(self.object(obj, ptr, d)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap()
        } else {
            Expr::Alt(alts)
        })
    }

    /// `anyOf`/`oneOf` whose branches only say which properties are required (and give
    /// property schemas): compiled as a presence constraint on the object's members, with the
    /// branches' property schemas applied to those properties whenever present (a subset
    /// when branches give different schemas for properties they do not require).
    /// `Ok(None)` when the branches have another shape.
    fn presence_rewrite(
        &mut self,
        obj: &Map<String, Value>,
        kw: &str,
        branches: &[Value],
        ptr: &str,
    ) -> Result<Option<Value>, GrammarError> {
        if obj.contains_key("patternProperties") || branches.len() < 2 {
            return Ok(None);
        }
        let mut forms: Vec<(Vec<String>, Map<String, Value>, bool)> = Vec::new();
        for b in branches {
            let b = match b.get("$ref").and_then(Value::as_str) {
                Some(r)
                    if b.as_object()
                        .is_some_and(|m| m.keys().all(|k| k == "$ref" || !is_keyword(k))) =>
                {
                    self.resolve_chain(r, ptr)?.1
                }
                _ => b,
            };
            let Some(m) = b.as_object() else {
                return Ok(None);
            };
            if m.keys()
                .any(|k| is_keyword(k) && !matches!(k.as_str(), "required" | "properties" | "type"))
            {
                return Ok(None);
            }
            let typed_object = match m.get("type") {
                None => false,
                Some(Value::String(t)) if t == "object" => true,
                Some(_) => return Ok(None),
            };
            let req = match m.get("required") {
                None => Vec::new(),
                Some(r) => match r.as_array().and_then(|a| {
                    a.iter()
                        .map(|n| n.as_str().map(str::to_string))
                        .collect::<Option<Vec<_>>>()
                }) {
                    Some(v) => v,
                    None => return Ok(None),
                },
            };
            let props = match m.get("properties") {
                None => Map::new(),
                Some(Value::Object(p)) => p.clone(),
                Some(_) => return Ok(None),
            };
            forms.push((req, props, typed_object));
        }
        // Branches giving different schemas to one property are discriminated by values, not
        // presence: leave them to the disjointness proof.
        for (i, (_, p, _)) in forms.iter().enumerate() {
            for (_, q, _) in &forms[i + 1..] {
                if p.iter().any(|(k, s)| q.get(k).is_some_and(|t| t != s)) {
                    return Ok(None);
                }
            }
        }
        let mut m = obj.clone();
        m.remove(kw);
        let mut props = m
            .get("properties")
            .and_then(Value::as_object)
            .cloned()
            .unwrap_or_default();
        let outer_add = m
            .get("additionalProperties")
            .cloned()
            .filter(|a| !is_trivially_true(a));
        for (_, bp, _) in &forms {
            for (k, s) in bp {
                let base = props.get(k).cloned().or_else(|| outer_add.clone());
                let merged = match base {
                    Some(b) if !is_trivially_true(&b) => Value::Object(
                        [("allOf".to_string(), Value::Array(vec![b, s.clone()]))]
                            .into_iter()
                            .collect(),
                    ),
                    _ => s.clone(),
                };
                props.insert(k.clone(), merged);
            }
        }
        m.insert("properties".into(), Value::Object(props));
        let sets: Vec<Value> = forms
            .iter()
            .map(|(r, _, _)| Value::Array(r.iter().map(|n| Value::String(n.clone())).collect()))
            .collect();
        let entry = json_entry(kw, sets);
        match m.get_mut(PRESENCE_KEY) {
            Some(Value::Array(list)) => list.push(entry),
            _ => {
                m.insert(PRESENCE_KEY.into(), Value::Array(vec![entry]));
            }
        }
        // Non-objects: valid for every typeless branch, invalid for typed ones.
        let typeless = forms.iter().filter(|f| !f.2).count();
        let objects_only = if kw == "oneOf" {
            typeless != 1
        } else {
            typeless == 0
        };
        if objects_only {
            let current = match m.get("type") {
                None => ty::ALL,
                Some(Value::String(t)) => ty::from_name(t).unwrap_or(0),
                Some(Value::Array(ts)) => ts
                    .iter()
                    .filter_map(|t| t.as_str().and_then(ty::from_name))
                    .fold(0, |a, b| a | b),
                Some(_) => 0,
            };
            if current & ty::OBJECT == 0 {
                return Ok(Some(Value::Bool(false)));
            }
            m.insert("type".into(), Value::String("object".into()));
        }
        Ok(Some(Value::Object(m)))
    }

    /// `oneOf` branches that are all `enum`/`const` (possibly behind a `$ref`): the values
    /// listed by exactly one branch. `None` for other shapes.
    fn exclusive_values(&self, branches: &[Value], ptr: &str) -> Option<Vec<Value>> {
        let mut lists = Vec::new();
        for b in branches {
            let mut b = b;
            if let Some(r) = b.get("$ref").and_then(Value::as_str) {
                if b.as_object()?.keys().any(|k| k != "$ref" && is_keyword(k)) {
                    return None;
                }
                b = self.resolve_chain(r, ptr).ok()?.1;
            }
            let m = b.as_object()?;
            if m.keys()
                .any(|k| is_keyword(k) && !matches!(k.as_str(), "enum" | "const"))
            {
                return None;
            }
            let list: Vec<Value> = match (m.get("const"), m.get("enum")) {
                (Some(c), None) => vec![c.clone()],
                (None, Some(Value::Array(e))) => e.clone(),
                _ => return None,
            };
            lists.push(list);
        }
        let mut out = Vec::new();
        for (i, l) in lists.iter().enumerate() {
            for v in l {
                let elsewhere = lists
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != i && o.contains(v));
                if !elsewhere && !out.contains(v) {
                    out.push(v.clone());
                }
            }
        }
        Some(out)
    }

    /// `oneOf` of one `enum`/`const` branch of strings `E` and other branches that are
    /// pairwise disjoint but may share values with `E` (`[{"enum": ["linux"]}, {"type":
    /// "string"}]`): exactly one branch holds for the values of `E` no other branch accepts
    /// (checked with the `jsonschema` crate) and for the other branches' values outside `E`.
    /// Rewritten as that `anyOf`; `None` for other shapes or when the other branches may
    /// overlap among themselves.
    fn one_of_with_overlapping_values(
        &mut self,
        branches: &[Value],
        ptr: &str,
    ) -> Result<Option<Value>, GrammarError> {
        let resolved = |b: &Value| -> Option<Value> {
            match b.get("$ref").and_then(Value::as_str) {
                Some(r) if b.as_object()?.keys().all(|k| k == "$ref" || !is_keyword(k)) => {
                    Some(self.resolve_chain(r, ptr).ok()?.1.clone())
                }
                _ => Some(b.clone()),
            }
        };
        let mut enum_branch = None;
        for (i, b) in branches.iter().enumerate() {
            let Some(t) = resolved(b) else {
                return Ok(None);
            };
            let Some(tm) = t.as_object() else {
                return Ok(None);
            };
            if tm.keys().any(|k| is_keyword(k))
                && tm
                    .keys()
                    .all(|k| !is_keyword(k) || k == "enum" || k == "const")
            {
                if enum_branch.is_some() {
                    return Ok(None);
                }
                let values: Vec<Value> = match (tm.get("const"), tm.get("enum")) {
                    (Some(c), None) => vec![c.clone()],
                    (None, Some(Value::Array(list))) => list.clone(),
                    _ => return Ok(None),
                };
                if !values.iter().all(Value::is_string) {
                    return Ok(None);
                }
                enum_branch = Some((i, values));
            }
        }
        let Some((e, values)) = enum_branch else {
            return Ok(None);
        };
        let others: Vec<Value> = branches
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != e)
            .map(|(_, b)| b.clone())
            .collect();
        if others.len() > 1 && merge::provably_disjoint(self, &others, ptr).is_err() {
            return Ok(None);
        }
        // Which values another branch also accepts (with the document's definitions, so
        // local references resolve).
        let mut kept = Vec::new();
        for v in &values {
            let mut shared = false;
            for b in &others {
                let mut schema = match b {
                    Value::Object(m) => m.clone(),
                    _ => return Ok(None),
                };
                for defs in ["definitions", "$defs"] {
                    if let Some(d) = self.root.get(defs) {
                        schema.entry(defs).or_insert(d.clone());
                    }
                }
                let Ok(validator) = jsonschema::options()
                    .should_validate_formats(true)
                    .build(&Value::Object(schema))
                else {
                    return Ok(None);
                };
                shared |= validator.is_valid(v);
            }
            if !shared && !kept.contains(v) {
                kept.push(v.clone());
            }
        }
        let mut alts = Vec::new();
        if !kept.is_empty() {
            alts.push(serde_json::json!({"enum": kept}));
        }
        for b in others {
            alts.push(serde_json::json!({"allOf": [b, {"not": {"enum": values}}]}));
        }
        Ok(Some(serde_json::json!({"anyOf": alts})))
    }

    pub(crate) fn merge_step(&mut self, ptr: &str) -> Result<(), GrammarError> {
        self.merge_steps += 1;
        if self.merge_steps > MAX_MERGE_STEPS {
            return Err(GrammarError::at_pointer(
                ptr,
                format!("more than {MAX_MERGE_STEPS} allOf/anyOf merge steps"),
            )
            .with_kind(ErrorKind::Limit));
        }
        Ok(())
    }

    /// Any JSON value (the schema `{}` / `true`), one shared rule per depth.
    fn any(&mut self, d: u32) -> Result<Expr, GrammarError> {
        if let Some(&id) = self.any_rules.get(&d) {
            return Ok(Expr::Ref(id));
        }
        let id = self.add_rule("any", Expr::Empty, RuleKind::Syntactic)?;
        self.any_rules.insert(d, id);
        let cd = self.child(d);
        let child = self.any(cd)?;
        let string = self.lex("string", lexical::string_pattern(0, None))?;
        let number = self.lex("number", lexical::number_pattern())?;
        // Object: "{" (empty | lead member (sep member)* trail) "}"
        let colon = self.colon(d);
        let after = self.after_value(d);
        let member = Expr::Seq(vec![string.clone(), colon, child.clone(), after.clone()]);
        let object = self.container(b'{', b'}', member, d);
        let item = Expr::Seq(vec![child, after]);
        let array = self.container(b'[', b']', item, d);
        let body = Expr::Alt(vec![
            object,
            array,
            string,
            number,
            Expr::Bytes(b"true".to_vec()),
            Expr::Bytes(b"false".to_vec()),
            Expr::Bytes(b"null".to_vec()),
        ]);
        self.rules[id.0 as usize].expr = body;
        Ok(Expr::Ref(id))
    }

    /// `open (empty | lead member (sep member)* trail) close` for homogeneous members.
    fn container(&mut self, open: u8, close: u8, member: Expr, d: u32) -> Expr {
        let empty = self.empty_inner(d);
        let lead = self.lead(d);
        let sep = self.sep(d);
        let trail = self.trail(d);
        Expr::Seq(vec![
            Expr::Bytes(vec![open]),
            Expr::Alt(vec![
                empty,
                Expr::Seq(vec![
                    lead,
                    member.clone(),
                    Expr::Repeat {
                        expr: Box::new(Expr::Seq(vec![sep, member])),
                        min: 0,
                        max: None,
                    },
                    trail,
                ]),
            ]),
            Expr::Bytes(vec![close]),
        ])
    }

    /// One concrete JSON value, laid out by the whitespace policy.
    fn literal(&mut self, v: &Value, d: u32) -> Expr {
        match v {
            Value::Array(items) if !items.is_empty() => {
                let cd = self.child(d);
                let mut seq = vec![Expr::Bytes(b"[".to_vec()), self.lead(d)];
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        seq.push(self.sep(d));
                    }
                    seq.push(self.literal(item, cd));
                    seq.push(self.after_value(d));
                }
                seq.push(self.trail(d));
                seq.push(Expr::Bytes(b"]".to_vec()));
                Expr::Seq(seq)
            }
            Value::Object(members) if !members.is_empty() => {
                let cd = self.child(d);
                let mut seq = vec![Expr::Bytes(b"{".to_vec()), self.lead(d)];
                for (i, (k, item)) in members.iter().enumerate() {
                    if i > 0 {
                        seq.push(self.sep(d));
                    }
                    seq.push(Expr::Bytes(
                        Value::String(k.clone()).to_string().into_bytes(),
                    ));
                    seq.push(self.colon(d));
                    seq.push(self.literal(item, cd));
                    seq.push(self.after_value(d));
                }
                seq.push(self.trail(d));
                seq.push(Expr::Bytes(b"}".to_vec()));
                Expr::Seq(seq)
            }
            Value::Array(_) => {
                let e = self.empty_inner(d);
                Expr::Seq(vec![
                    Expr::Bytes(b"[".to_vec()),
                    e,
                    Expr::Bytes(b"]".to_vec()),
                ])
            }
            Value::Object(_) => {
                let e = self.empty_inner(d);
                Expr::Seq(vec![
                    Expr::Bytes(b"{".to_vec()),
                    e,
                    Expr::Bytes(b"}".to_vec()),
                ])
            }
            scalar => Expr::Bytes(scalar.to_string().into_bytes()),
        }
    }

    /// `enum` / `const`: the listed values that also satisfy the schema's other keywords.
    fn enum_values(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        d: u32,
    ) -> Result<Expr, GrammarError> {
        let mut values: Vec<Value> = Vec::new();
        if let Some(c) = obj.get("const") {
            values.push(c.clone());
        }
        if let Some(e) = obj.get("enum") {
            let Some(list) = e.as_array() else {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "enum"),
                    "`enum` must be an array",
                ));
            };
            if list.len() > MAX_ENUM_VALUES {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "enum"),
                    format!("`enum` has more than {MAX_ENUM_VALUES} values"),
                )
                .with_kind(ErrorKind::Limit));
            }
            if obj.contains_key("const") {
                values.retain(|c| list.contains(c));
            } else {
                values.extend(list.iter().cloned());
            }
        }
        // Other constraints: check each value with the jsonschema crate against the sibling
        // keywords (with the document's definitions, so local references resolve).
        let mut siblings = obj.clone();
        siblings.remove("enum");
        siblings.remove("const");
        if siblings.keys().any(|k| is_keyword(k)) {
            if let Some(defs) = self.root.get("definitions") {
                siblings.entry("definitions").or_insert(defs.clone());
            }
            if let Some(defs) = self.root.get("$defs") {
                siblings.entry("$defs").or_insert(defs.clone());
            }
            let schema = Value::Object(siblings);
            match jsonschema::options()
                .should_validate_formats(true)
                .build(&schema)
            {
                Ok(validator) => values.retain(|v| validator.is_valid(v)),
                Err(e) => {
                    return Err(GrammarError::at_pointer(
                        ptr,
                        format!("cannot check `enum` values against the sibling keywords: {e}"),
                    ));
                }
            }
        }
        if values.is_empty() {
            // Satisfiable schemas can have unsatisfiable parts (an optional property, a
            // branch); the empty alternative drops them, and lowering reports an empty whole.
            self.warnings.push(format!(
                "at {}: no `enum`/`const` value satisfies the schema",
                if ptr.is_empty() { "/" } else { ptr }
            ));
            return Ok(Self::never());
        }
        let alts: Vec<Expr> = values.iter().map(|v| self.literal(v, d)).collect();
        Ok(if alts.len() == 1 {
            alts.into_iter().next().unwrap()
        } else {
            Expr::Alt(alts)
        })
    }

    // -------------------------------------------------------------------------------
    // Numbers
    // -------------------------------------------------------------------------------

    /// Tightest lower and upper bounds (value, inclusive) from the four bound keywords
    /// (draft-4 boolean `exclusiveMinimum`/`exclusiveMaximum` included).
    fn bounds(
        obj: &Map<String, Value>,
        ptr: &str,
    ) -> Result<(Option<Bound>, Option<Bound>), GrammarError> {
        let num = |k: &str| -> Result<Option<f64>, GrammarError> {
            match obj.get(k) {
                None | Some(Value::Bool(_)) => Ok(None),
                Some(v) => v.as_f64().map(Some).ok_or_else(|| {
                    GrammarError::at_pointer(join_ptr(ptr, k), format!("`{k}` must be a number"))
                }),
            }
        };
        let flag = |k: &str| obj.get(k).and_then(Value::as_bool).unwrap_or(false);
        let mut lo: Option<(f64, bool)> = num("minimum")?.map(|x| (x, !flag("exclusiveMinimum")));
        let mut hi: Option<(f64, bool)> = num("maximum")?.map(|x| (x, !flag("exclusiveMaximum")));
        if let Some(x) = num("exclusiveMinimum")? {
            if lo.is_none_or(|(l, _)| x >= l) {
                lo = Some((x, false));
            }
        }
        if let Some(x) = num("exclusiveMaximum")? {
            if hi.is_none_or(|(h, _)| x <= h) {
                hi = Some((x, false));
            }
        }
        Ok((lo, hi))
    }

    /// The `multipleOf` languages for `k` (see [`lexical::multiple_of_patterns`]); empty
    /// after reporting `k` as unsupported.
    fn multiple_patterns(&mut self, k: f64, ptr: &str) -> Result<Vec<String>, GrammarError> {
        match lexical::multiple_of_patterns(k) {
            Some(p) => Ok(p),
            None => {
                self.unsupported(
                    ptr,
                    "multipleOf",
                    format!("multipleOf {k} (compiled: integers, 10^-n, and c/10^n where c divides 10^n)"),
                )?;
                Ok(Vec::new())
            }
        }
    }

    fn number(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        integer: bool,
    ) -> Result<Expr, GrammarError> {
        let (lo, hi) = Self::bounds(obj, ptr)?;
        let mut integer = integer;
        let mut max_frac = None;
        let mut multiple_pow10 = None;
        let mut multiple: Vec<String> = Vec::new();
        if let Some(m) = obj.get("multipleOf") {
            let Some(k) = m.as_f64().filter(|k| *k > 0.0) else {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "multipleOf"),
                    "`multipleOf` must be a positive number",
                ));
            };
            if k.fract() == 0.0 {
                if k != 1.0 {
                    let n = (k.log10().round()) as i32;
                    if 10f64.powi(n) == k && (1..=18).contains(&n) && lo.is_none() && hi.is_none() {
                        multiple_pow10 = Some(n as usize);
                    } else {
                        multiple = self.multiple_patterns(k, ptr)?;
                    }
                }
                integer = true;
            } else if integer && (1.0 / k).fract() == 0.0 {
                // Every integer is a multiple of 1/n.
            } else {
                let n = (-k.log10()).round() as i32;
                if (1..=9).contains(&n) && (10f64.powi(-n) - k).abs() < k * 1e-9 {
                    max_frac = Some(n as u32);
                } else {
                    multiple = self.multiple_patterns(k, ptr)?;
                }
            }
        }
        // The number terminal, intersected with the `multipleOf` languages if any.
        let multiple_key = multiple.join("\u{0}");
        let mut finish = |c: &mut Self, name: &str, p: String| -> Result<Expr, GrammarError> {
            if multiple.is_empty() {
                return c.lex(name, p);
            }
            let and = std::mem::take(&mut multiple)
                .iter()
                .map(|m| lexical::hir(m))
                .collect();
            let key = format!("{p}\u{0}{multiple_key}");
            match c.constrained(
                name,
                key,
                lexical::hir(&p),
                ir::Constraints {
                    and,
                    and_not: Vec::new(),
                },
            )? {
                Some(e) => Ok(e),
                None => {
                    c.unsupported(ptr, "multipleOf", format!("multipleOf with these bounds needs more than {MAX_CONSTRAINED_STATES} automaton states"))?;
                    c.lex(name, p)
                }
            }
        };
        if let Some(n) = multiple_pow10 {
            return self.lex(
                "multiple",
                format!(
                    "(?:0|-?[1-9][0-9]{{0,{}}}0{{{n}}})",
                    lexical::MAX_INT_DIGITS as usize - 1 - n
                ),
            );
        }
        // Bounds far outside what the grammar can write are no bounds.
        let far = 1e60;
        let lo = lo.filter(|(x, _)| *x > -far);
        let hi = hi.filter(|(x, _)| *x < far);
        if lo.is_some_and(|(x, _)| x >= far) || hi.is_some_and(|(x, _)| x <= -far) {
            return Err(GrammarError::at_pointer(
                ptr,
                "numeric bounds exclude every number this grammar can write",
            ));
        }
        if integer {
            if lo.is_none() && hi.is_none() {
                return finish(self, "integer", lexical::integer_pattern());
            }
            let big = 1e37;
            if lo.is_some_and(|(x, _)| x.abs() > big) || hi.is_some_and(|(x, _)| x.abs() > big) {
                self.unsupported(ptr, "minimum", "integer bounds beyond 1e37")?;
                return finish(self, "integer", lexical::integer_pattern());
            }
            let ilo = lo.map(|(x, inc)| {
                if inc {
                    x.ceil() as i128
                } else {
                    x.floor() as i128 + 1
                }
            });
            let ihi = hi.map(|(x, inc)| {
                if inc {
                    x.floor() as i128
                } else {
                    x.ceil() as i128 - 1
                }
            });
            return match lexical::integer_range_pattern(ilo, ihi) {
                Some(p) => finish(self, "integer-range", p),
                None => Err(GrammarError::at_pointer(
                    ptr,
                    "no integer satisfies minimum/maximum",
                )),
            };
        }
        if lo.is_none() && hi.is_none() && max_frac.is_none() {
            return finish(self, "number", lexical::number_pattern());
        }
        let dec = |b: Option<(f64, bool)>| {
            b.and_then(|(x, inc)| lexical::Decimal::from_f64(x).map(|d| (d, inc)))
        };
        match lexical::number_range_pattern(dec(lo), dec(hi), max_frac) {
            Some(p) => finish(self, "number-range", p),
            None => Err(GrammarError::at_pointer(
                ptr,
                "no number satisfies the numeric bounds",
            )),
        }
    }

    // -------------------------------------------------------------------------------
    // Strings
    // -------------------------------------------------------------------------------

    fn string(&mut self, obj: &Map<String, Value>, ptr: &str) -> Result<Expr, GrammarError> {
        let min = obj
            .get("minLength")
            .map(|v| as_u64(v, ptr, "minLength"))
            .transpose()?;
        let max = obj
            .get("maxLength")
            .map(|v| as_u64(v, ptr, "maxLength"))
            .transpose()?;
        // `not: {enum: [...]}` of strings: every encoding of those strings is excluded.
        let and_not: Vec<Hir> = match obj.get("not").and_then(excluded_strings) {
            Some(words) if !words.is_empty() => {
                let alts = words
                    .iter()
                    .map(|w| lexical::literal_any_encoding(w))
                    .collect();
                vec![quoted(Hir::alternation(alts))]
            }
            _ => Vec::new(),
        };
        let exclusion_key = if and_not.is_empty() {
            String::new()
        } else {
            format!(":not:{}", obj["not"])
        };
        if let (Some(a), Some(b)) = (min, max) {
            if a > b {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "minLength"),
                    format!("minLength {a} > maxLength {b}"),
                ));
            }
        }
        let pattern = match obj.get("pattern") {
            None => None,
            Some(Value::String(p)) => Some(p.clone()),
            Some(_) => {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "pattern"),
                    "`pattern` must be a string",
                ));
            }
        };
        let mut format = match obj.get("format") {
            Some(Value::String(f)) => Some(f.clone()),
            _ => None,
        };
        if let Some(f) = &format {
            if lexical::format_pattern(f).is_none() {
                if lexical::ASSERTED_FORMATS.contains(&f.as_str()) {
                    self.unsupported(ptr, "format", format!("format `{f}` is not compiled"))?;
                }
                format = None; // unknown formats are annotations
            }
        }
        // `format` together with `pattern`: the string must match both (an intersection).
        let format_and = if pattern.is_some() {
            format.take()
        } else {
            None
        };

        let decoded: Option<(Hir, &str)> = if let Some(p) = &pattern {
            let translated = match lexical::translate_ecma(p) {
                Ok(t) => t,
                Err(why) => {
                    self.unsupported(ptr, "pattern", format!("pattern `{p}`: {why}"))?;
                    return self.generic_string(min, max, ptr);
                }
            };
            let parsed = regex_syntax::ParserBuilder::new()
                .nest_limit(100)
                .build()
                .parse(&translated);
            match parsed {
                Ok(h) => {
                    let any = lexical::hir("(?s:.)*");
                    let h = lexical::anchor_search(&h, &any);
                    if lexical::has_look(&h) {
                        self.unsupported(
                            ptr,
                            "pattern",
                            format!("pattern `{p}` has anchors or word boundaries inside"),
                        )?;
                        return self.generic_string(min, max, ptr);
                    }
                    Some((h, "pattern"))
                }
                Err(e) => {
                    self.unsupported(
                        ptr,
                        "pattern",
                        format!("pattern `{p}` does not parse as a regex: {e}"),
                    )?;
                    return self.generic_string(min, max, ptr);
                }
            }
        } else {
            format
                .as_ref()
                .map(|f| (lexical::hir(&lexical::format_pattern(f).unwrap()), "format"))
        };
        let Some((h, kw)) = decoded else {
            if !and_not.is_empty() {
                return self.string_except(min, max, and_not, exclusion_key, ptr);
            }
            return self.generic_string(min, max, ptr);
        };
        let key = format!(
            "{kw}:{}:{:?}:{:?}:{}{exclusion_key}",
            pattern.as_deref().or(format.as_deref()).unwrap_or(""),
            min,
            max,
            format_and.as_deref().unwrap_or("")
        );
        let mut and = Vec::new();
        if let Some(f) = &format_and {
            and.push(quoted(lexical::encode_for_json_string(&lexical::hir(
                &lexical::format_pattern(f).unwrap(),
            ))));
        }
        // Length bounds on a pattern/format: nothing to do when the regex already implies
        // them, a rewrite of the regex when its one variable part is a repeated
        // single-character class, else an intersection with "min..=max characters".
        let mut split = None;
        let mut too_long = false;
        let h = if min.is_some() || max.is_some() {
            match constrain_length(&h, min.unwrap_or(0), max) {
                Some((h, true)) => h,
                other => {
                    split = other.map(|(h, _)| h);
                    // A bound the regex does not imply needs a length counter up to it: past
                    // the state limit the intersection cannot fit (and its DFA is costly).
                    let bound = max.unwrap_or(0).max(min.unwrap_or(0));
                    if bound > MAX_CONSTRAINED_STATES as u64 {
                        too_long = true;
                    } else {
                        and.push(lexical::hir(&lexical::string_pattern(
                            min.unwrap_or(0),
                            max,
                        )));
                    }
                    h
                }
            }
        } else {
            h
        };
        let full = quoted(lexical::encode_for_json_string(&h));
        if and.is_empty() && and_not.is_empty() && !too_long {
            return self.lex_hir(kw, key, full);
        }
        let constraints = ir::Constraints { and, and_not };
        let built = if too_long {
            None
        } else {
            self.constrained(kw, key.clone(), full.clone(), constraints)?
        };
        match built {
            Some(e) => Ok(e),
            None if format_and.is_none() && split.is_some() && exclusion_key.is_empty() => {
                // Too many states for the exact intersection: split the length budget
                // between the pattern's repeated parts (sound, but a subset).
                self.warnings.push(format!(
                    "at {}: length bounds with `{kw}` are split between its repeated parts (a subset of the valid strings)",
                    if ptr.is_empty() { "/" } else { ptr }
                ));
                let full = quoted(lexical::encode_for_json_string(&split.unwrap()));
                self.lex_hir(kw, key, full)
            }
            None if kw == "format" && exclusion_key.is_empty() && max.is_some() => {
                // A format (already a conservative regex) whose maximum is too long to count
                // up to: generate its strings up to a shorter maximum (sound, but a subset).
                for cap in FORMAT_LENGTH_CAPS {
                    let lo = min.unwrap_or(0);
                    if lo > cap || max.is_some_and(|m| m < cap) {
                        continue;
                    }
                    let and = vec![lexical::hir(&lexical::string_pattern(lo, Some(cap)))];
                    let constraints = ir::Constraints {
                        and,
                        and_not: Vec::new(),
                    };
                    if let Some(e) =
                        self.constrained(kw, format!("{key}:cap{cap}"), full.clone(), constraints)?
                    {
                        self.warnings.push(format!(
                            "at {}: `format` with maxLength {}: strings longer than {cap} characters are not generated (a subset of the valid strings)",
                            if ptr.is_empty() { "/" } else { ptr },
                            max.unwrap()
                        ));
                        return Ok(e);
                    }
                }
                self.unsupported(
                    ptr,
                    "maxLength",
                    format!("`format` with length bounds has more than {MAX_CONSTRAINED_STATES} automaton states"),
                )?;
                self.lex_hir(kw, key, full)
            }
            None => {
                let feature = if format_and.is_some() {
                    "format"
                } else if max.is_some() {
                    "maxLength"
                } else {
                    "minLength"
                };
                self.unsupported(
                    ptr,
                    feature,
                    format!(
                        "`{kw}` with {} has more than {MAX_CONSTRAINED_STATES} automaton states",
                        if format_and.is_some() {
                            "`format`"
                        } else {
                            "length bounds"
                        }
                    ),
                )?;
                self.lex_hir(kw, key, full)
            }
        }
    }

    /// A string with length bounds minus the strings in `and_not` (`not: {enum: [...]}`).
    fn string_except(
        &mut self,
        min: Option<u64>,
        max: Option<u64>,
        and_not: Vec<Hir>,
        exclusion_key: String,
        ptr: &str,
    ) -> Result<Expr, GrammarError> {
        let (lo, hi) = (min.unwrap_or(0), max);
        if lo > STRING_BLOCK || hi.is_some_and(|m| m > STRING_BLOCK) {
            self.unsupported(
                ptr,
                "not",
                format!("`not` with strings longer than {STRING_BLOCK} characters"),
            )?;
            return self.generic_string(min, max, ptr);
        }
        let hir = lexical::hir(&lexical::string_pattern(lo, hi));
        let key = format!("string:{lo}:{hi:?}{exclusion_key}");
        match self.constrained(
            "string",
            key,
            hir,
            ir::Constraints {
                and: Vec::new(),
                and_not,
            },
        )? {
            Some(e) => Ok(e),
            None => {
                self.unsupported(ptr, "not", format!("the excluded strings need more than {MAX_CONSTRAINED_STATES} automaton states"))?;
                self.generic_string(min, max, ptr)
            }
        }
    }

    /// One terminal for `hir` ∩ `constraints` (see [`ir::Constraints`]), or `None` when its
    /// automaton would have more than [`MAX_CONSTRAINED_STATES`] states. An empty language
    /// compiles to "never".
    fn constrained(
        &mut self,
        name: &str,
        key: String,
        hir: Hir,
        constraints: ir::Constraints,
    ) -> Result<Option<Expr>, GrammarError> {
        let key = format!("constrained:{key}");
        if let Some(&id) = self.lexical.get(&key) {
            return Ok(Some(Expr::Ref(id)));
        }
        match crate::grammar::dfa::TerminalDfa::product(&hir, &constraints, MAX_CONSTRAINED_STATES)
        {
            Ok(_) => {}
            Err(crate::grammar::dfa::DfaError::MatchesNothing) => return Ok(Some(Self::never())),
            Err(_) => return Ok(None),
        }
        let id = self.add_rule(
            name,
            Expr::Constrained { hir, constraints },
            RuleKind::Syntactic,
        )?;
        self.lexical.insert(key, id);
        Ok(Some(Expr::Ref(id)))
    }

    /// A string with only length bounds. Up to [`STRING_BLOCK`] characters it is one terminal;
    /// longer maxima are `"` FULL^k PART `"` with FULL exactly `STRING_BLOCK` characters and
    /// PART shorter (unambiguous, exact).
    fn generic_string(
        &mut self,
        min: Option<u64>,
        max: Option<u64>,
        ptr: &str,
    ) -> Result<Expr, GrammarError> {
        let min = min.unwrap_or(0);
        match max {
            None if min <= STRING_BLOCK => self.lex("string", lexical::string_pattern(min, None)),
            Some(m) if m <= STRING_BLOCK => {
                self.lex("string", lexical::string_pattern(min, Some(m)))
            }
            _ => {
                if min >= STRING_BLOCK {
                    self.unsupported(
                        ptr,
                        "minLength",
                        format!("minLength above {STRING_BLOCK} with a long or absent maxLength"),
                    )?;
                    return self.lex(
                        "string",
                        lexical::string_pattern(0, max.map(|m| m.min(STRING_BLOCK))),
                    );
                }
                let unit = lexical::string_unit_pattern();
                let b = STRING_BLOCK;
                let full = self.lex("string-block", format!("{unit}{{{b}}}"))?;
                let part = |c: &mut Self, lo: u64, hi: u64| {
                    c.lex("string-part", format!("{unit}{{{lo},{hi}}}"))
                };
                let q = Expr::Bytes(b"\"".to_vec());
                let mut alts = vec![Expr::Seq(vec![
                    q.clone(),
                    part(self, min, b - 1)?,
                    q.clone(),
                ])];
                match max {
                    None => alts.push(Expr::Seq(vec![
                        q.clone(),
                        Expr::Repeat {
                            expr: Box::new(full),
                            min: 1,
                            max: None,
                        },
                        part(self, 0, b - 1)?,
                        q.clone(),
                    ])),
                    Some(m) => {
                        let k = m / b;
                        let r = m % b;
                        if k >= 2 {
                            alts.push(Expr::Seq(vec![
                                q.clone(),
                                Expr::Repeat {
                                    expr: Box::new(full.clone()),
                                    min: 1,
                                    max: Some((k - 1) as u32),
                                },
                                part(self, 0, b - 1)?,
                                q.clone(),
                            ]));
                        }
                        alts.push(Expr::Seq(vec![
                            q.clone(),
                            Expr::Repeat {
                                expr: Box::new(full),
                                min: k as u32,
                                max: Some(k as u32),
                            },
                            part(self, 0, r)?,
                            q,
                        ]));
                    }
                }
                let id = self.add_rule("long-string", Expr::Alt(alts), RuleKind::Syntactic)?;
                Ok(Expr::Ref(id))
            }
        }
    }

    // -------------------------------------------------------------------------------
    // Arrays
    // -------------------------------------------------------------------------------

    fn array(&mut self, obj: &Map<String, Value>, ptr: &str, d: u32) -> Result<Expr, GrammarError> {
        let mut min = obj
            .get("minItems")
            .map(|v| as_u64(v, ptr, "minItems"))
            .transpose()?
            .unwrap_or(0);
        let mut max = obj
            .get("maxItems")
            .map(|v| as_u64(v, ptr, "maxItems"))
            .transpose()?;
        if max.is_some_and(|m| min > m) {
            return Err(GrammarError::at_pointer(
                join_ptr(ptr, "minItems"),
                format!("minItems {min} > maxItems {}", max.unwrap()),
            ));
        }
        let true_schema = Value::Bool(true);
        let (prefix, prefix_ptr, rest, rest_ptr): (Vec<Value>, String, Value, String) =
            match (obj.get("prefixItems"), obj.get("items")) {
                (Some(Value::Array(p)), items) => (
                    p.clone(),
                    join_ptr(ptr, "prefixItems"),
                    items.cloned().unwrap_or(true_schema.clone()),
                    join_ptr(ptr, "items"),
                ),
                (_, Some(Value::Array(p))) => (
                    p.clone(),
                    join_ptr(ptr, "items"),
                    obj.get("additionalItems")
                        .cloned()
                        .unwrap_or(true_schema.clone()),
                    join_ptr(ptr, "additionalItems"),
                ),
                (_, Some(items)) => (
                    Vec::new(),
                    String::new(),
                    items.clone(),
                    join_ptr(ptr, "items"),
                ),
                (_, None) => (
                    Vec::new(),
                    String::new(),
                    true_schema.clone(),
                    join_ptr(ptr, "items"),
                ),
            };
        let m = prefix.len() as u64;
        let rest_allowed = rest != Value::Bool(false);
        if !rest_allowed {
            max = Some(max.map_or(m, |x| x.min(m)));
            if min > m {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "minItems"),
                    format!("minItems {min} but at most {m} items are allowed"),
                ));
            }
        }
        if obj.get("uniqueItems") == Some(&Value::Bool(true)) && max.is_none_or(|x| x > 1) {
            self.unsupported(
                ptr,
                "uniqueItems",
                "uniqueItems is compiled only when at most one item is allowed",
            )?;
        }
        if max == Some(0) {
            min = 0;
        }
        let cd = self.child(d);
        let after = self.after_value(d);
        let mut prefix_items = Vec::with_capacity(prefix.len());
        for (i, p) in prefix
            .iter()
            .enumerate()
            .take(max.unwrap_or(u64::MAX).min(m) as usize)
        {
            let v = self.value(p, &join_ptr(&prefix_ptr, &i.to_string()), cd)?;
            let v = self.shared("item", v)?;
            prefix_items.push(Expr::Seq(vec![v, after.clone()]));
        }
        let rest_item = if rest_allowed && max.is_none_or(|x| x > m) {
            let v = self.value(&rest, &rest_ptr, cd)?;
            let v = self.shared("items", v)?;
            Some(Expr::Seq(vec![v, after.clone()]))
        } else {
            None
        };
        // state(i): i items written so far (i <= number of prefix items compiled).
        let lead = self.lead(d);
        let sep = self.sep(d);
        let trail = self.trail(d);
        let empty = self.empty_inner(d);
        let end = |i: u64| if i == 0 { empty.clone() } else { trail.clone() };
        let pre = |i: u64| if i == 0 { lead.clone() } else { sep.clone() };
        let n = prefix_items.len() as u64;
        // After n prefix items: the rest.
        let mut tail = {
            let mut alts = Vec::new();
            if min <= n {
                alts.push(end(n));
            }
            if let Some(item) = &rest_item {
                let r_min = min.saturating_sub(n).max(1);
                let r_max = max.map(|x| x - n);
                if r_max.is_none_or(|x| x >= 1) {
                    alts.push(Expr::Seq(vec![
                        pre(n),
                        item.clone(),
                        Expr::Repeat {
                            expr: Box::new(Expr::Seq(vec![sep.clone(), item.clone()])),
                            min: (r_min - 1) as u32,
                            max: r_max.map(|x| (x - 1) as u32),
                        },
                        trail.clone(),
                    ]));
                }
            }
            Expr::Alt(alts)
        };
        for i in (0..n).rev() {
            let mut alts = Vec::new();
            if min <= i {
                alts.push(end(i));
            }
            let tail_rule = if prefix_items.len() > 4 {
                let id = self.add_rule("array-tail", tail, RuleKind::Syntactic)?;
                Expr::Ref(id)
            } else {
                tail
            };
            alts.push(Expr::Seq(vec![
                pre(i),
                prefix_items[i as usize].clone(),
                tail_rule,
            ]));
            tail = Expr::Alt(alts);
        }
        Ok(Expr::Seq(vec![
            Expr::Bytes(b"[".to_vec()),
            tail,
            Expr::Bytes(b"]".to_vec()),
        ]))
    }

    // -------------------------------------------------------------------------------
    // Objects
    // -------------------------------------------------------------------------------

    fn object(
        &mut self,
        obj: &Map<String, Value>,
        ptr: &str,
        d: u32,
    ) -> Result<Expr, GrammarError> {
        let empty_map = Map::new();
        let props = match obj.get("properties") {
            None => &empty_map,
            Some(Value::Object(p)) => p,
            Some(_) => {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "properties"),
                    "`properties` must be an object",
                ));
            }
        };
        // Schema dependencies of the form {properties, required}: the property schemas are
        // applied whether or not the trigger is present (a subset), `required` becomes a
        // presence implication below.
        let mut props_owned: Option<Map<String, Value>> = None;
        if let Some(Value::Object(deps)) = obj.get("dependencies") {
            for (a, v) in deps {
                let Some(dm) = v.as_object() else { continue };
                if dm
                    .keys()
                    .any(|k| is_keyword(k) && k != "properties" && k != "required")
                {
                    continue;
                }
                let Some(Value::Object(dp)) = dm.get("properties") else {
                    continue;
                };
                let target = props_owned.get_or_insert_with(|| props.clone());
                for (k, s) in dp {
                    let merged = match target.get(k) {
                        Some(base) => merge_schemas(base.clone(), s.clone()),
                        None => match obj.get("additionalProperties") {
                            Some(Value::Bool(false)) => continue,
                            Some(add) => merge_schemas(add.clone(), s.clone()),
                            None => s.clone(),
                        },
                    };
                    target.insert(k.clone(), merged);
                }
                self.warnings.push(format!(
                    "at {}: the property schemas of the dependency on `{a}` apply whether or not `{a}` is present (a subset)",
                    join_ptr(ptr, "dependencies")
                ));
            }
        }
        let props = props_owned.as_ref().unwrap_or(props);
        let required: Vec<String> = match obj.get("required") {
            None => Vec::new(),
            Some(Value::Array(r)) => r
                .iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect(),
            // Draft-3 style `required: true` on a property: not a draft-4+ keyword form.
            Some(_) => Vec::new(),
        };
        let additional: Option<Value> = match obj.get("additionalProperties") {
            None => Some(Value::Bool(true)),
            Some(Value::Bool(false)) => None,
            Some(v) => Some(v.clone()),
        };
        let patterns: Vec<(String, Value)> = match obj.get("patternProperties") {
            None => Vec::new(),
            Some(Value::Object(pp)) => pp.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
            Some(_) => {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, "patternProperties"),
                    "`patternProperties` must be an object",
                ));
            }
        };
        let pp_ptr = join_ptr(ptr, "patternProperties");
        let mut matchers = Vec::with_capacity(patterns.len());
        for (p, _) in &patterns {
            let re = |p: &str| {
                lexical::translate_ecma(p)
                    .ok()
                    .and_then(|t| regex_automata::meta::Regex::new(&t).ok())
            };
            let m = match lexical::split_leading_negative_lookahead(p) {
                Some((neg, pos)) => re(&pos).zip(re(&neg)).map(|(pos, neg)| KeyMatcher {
                    pos,
                    neg: Some(neg),
                }),
                None => re(p).map(|pos| KeyMatcher { pos, neg: None }),
            };
            match m {
                Some(m) => matchers.push(m),
                None => {
                    return Err(GrammarError::unsupported(
                        join_ptr(&pp_ptr, p),
                        "patternProperties",
                        format!("pattern `{p}` is not supported"),
                    ));
                }
            }
        }
        // Named members: `properties` in order, then required names not listed there.
        let mut named: Vec<(String, Value, bool, String)> = Vec::new();
        for (k, s) in props {
            let mut schemas = vec![s.clone()];
            for (i, (_, ps)) in patterns.iter().enumerate() {
                if matchers[i].is_match(k) && !is_trivially_true(ps) {
                    schemas.push(ps.clone());
                }
            }
            let s = if schemas.len() == 1 {
                schemas.pop().unwrap()
            } else {
                Value::Object(
                    [("allOf".to_string(), Value::Array(schemas))]
                        .into_iter()
                        .collect(),
                )
            };
            named.push((
                k.clone(),
                s,
                required.contains(k),
                join_ptr(&join_ptr(ptr, "properties"), k),
            ));
        }
        for r in &required {
            if props.contains_key(r) || named.iter().any(|(k, ..)| k == r) {
                continue;
            }
            let matching: Vec<Value> = patterns
                .iter()
                .enumerate()
                .filter(|(i, _)| matchers[*i].is_match(r))
                .map(|(_, (_, s))| s.clone())
                .collect();
            let s = if !matching.is_empty() {
                if matching.len() == 1 {
                    matching[0].clone()
                } else {
                    Value::Object(
                        [("allOf".to_string(), Value::Array(matching))]
                            .into_iter()
                            .collect(),
                    )
                }
            } else if let Some(a) = &additional {
                a.clone()
            } else {
                // Legal JSON Schema that no object satisfies (e.g. one branch of a
                // discriminated union): this subschema matches nothing.
                self.warnings.push(format!(
                    "at {}: required property `{r}` is not allowed by `properties`/`additionalProperties: false`; no object satisfies this schema",
                    join_ptr(ptr, "required")
                ));
                return Ok(Self::never());
            };
            named.push((r.clone(), s, true, join_ptr(ptr, "required")));
        }
        // Presence constraints: anyOf/oneOf of required sets, dependencies, not-required.
        let mut presence: Vec<Presence> = Vec::new();
        if let Some(Value::Array(list)) = obj.get(PRESENCE_KEY) {
            for e in list {
                let sets: Vec<Vec<String>> = e["sets"]
                    .as_array()
                    .map(|a| {
                        a.iter()
                            .map(|s| {
                                s.as_array()
                                    .map(|x| {
                                        x.iter()
                                            .filter_map(|n| n.as_str().map(str::to_string))
                                            .collect()
                                    })
                                    .unwrap_or_default()
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                presence.push(if e["kind"] == "oneOf" {
                    Presence::OneOf(sets)
                } else {
                    Presence::AnyOf(sets)
                });
            }
        }
        for kw in ["dependencies", "dependentRequired"] {
            let Some(deps) = obj.get(kw) else { continue };
            let Some(deps) = deps.as_object() else {
                return Err(GrammarError::at_pointer(
                    join_ptr(ptr, kw),
                    format!("`{kw}` must be an object"),
                ));
            };
            for (a, v) in deps {
                let set = match v {
                    Value::Array(names) => names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_string))
                        .collect(),
                    v if is_trivially_true(v) => continue,
                    v => {
                        match required_only(v) {
                            Some(set) => set,
                            None if v.as_object().is_some_and(|m| {
                                m.keys()
                                    .all(|k| !is_keyword(k) || k == "properties" || k == "required")
                            }) =>
                            {
                                // {properties, required}: properties merged above.
                                v.get("required")
                                    .and_then(Value::as_array)
                                    .map(|r| {
                                        r.iter()
                                            .filter_map(|n| n.as_str().map(str::to_string))
                                            .collect()
                                    })
                                    .unwrap_or_default()
                            }
                            None => {
                                self.unsupported(
                                    ptr,
                                    kw,
                                    format!("schema dependency of `{a}` (only property lists are compiled)"),
                                )?;
                                continue;
                            }
                        }
                    }
                };
                presence.push(Presence::Implies(a.clone(), set));
            }
        }
        if let Some(set) = obj.get("not").and_then(required_only) {
            presence.push(Presence::NotAll(set));
        }
        let mut tracked: Vec<String> = Vec::new();
        {
            let mut note = |n: &String| {
                if !tracked.contains(n) {
                    tracked.push(n.clone());
                }
            };
            for c in &presence {
                match c {
                    Presence::OneOf(sets) | Presence::AnyOf(sets) => {
                        sets.iter().flatten().for_each(&mut note)
                    }
                    Presence::Implies(a, set) => {
                        note(a);
                        set.iter().for_each(&mut note);
                    }
                    Presence::NotAll(set) => set.iter().for_each(&mut note),
                }
            }
        }
        if tracked.len() > 12 {
            let kw = if obj.contains_key("dependencies") {
                "dependencies"
            } else {
                "oneOf"
            };
            self.unsupported(ptr, kw, "presence constraints over more than 12 properties")?;
            presence.clear();
            tracked.clear();
        }
        // Tracked names that are not named yet become optional members (when allowed at all).
        for t in &tracked {
            if named.iter().any(|(k, ..)| k == t) {
                continue;
            }
            let matching: Vec<Value> = patterns
                .iter()
                .enumerate()
                .filter(|(i, _)| matchers[*i].is_match(t))
                .map(|(_, (_, s))| s.clone())
                .collect();
            let s = if !matching.is_empty() {
                if matching.len() == 1 {
                    matching[0].clone()
                } else {
                    Value::Object(
                        [("allOf".to_string(), Value::Array(matching))]
                            .into_iter()
                            .collect(),
                    )
                }
            } else if let Some(a) = &additional {
                a.clone()
            } else {
                continue; // never present
            };
            named.push((t.clone(), s, false, join_ptr(ptr, "properties")));
        }
        tracked.retain(|t| named.iter().any(|(k, ..)| k == t));
        let mask = |set: &[String]| -> Option<u32> {
            let mut m = 0u32;
            for n in set {
                m |= 1 << tracked.iter().position(|t| t == n)?;
            }
            Some(m)
        };
        let constraints: Vec<PresenceMask> = presence
            .iter()
            .map(|c| match c {
                Presence::OneOf(sets) => {
                    PresenceMask::OneOf(sets.iter().map(|s| mask(s)).collect())
                }
                Presence::AnyOf(sets) => {
                    PresenceMask::AnyOf(sets.iter().map(|s| mask(s)).collect())
                }
                Presence::Implies(a, set) => {
                    PresenceMask::Implies(mask(std::slice::from_ref(a)), mask(set))
                }
                Presence::NotAll(set) => PresenceMask::NotAll(mask(set)),
            })
            .collect();

        let min_p = obj
            .get("minProperties")
            .map(|v| as_u64(v, ptr, "minProperties"))
            .transpose()?
            .unwrap_or(0);
        let max_p = obj
            .get("maxProperties")
            .map(|v| as_u64(v, ptr, "maxProperties"))
            .transpose()?;
        // Extra members: (key expression, value schema, pointer).
        let names: Vec<&str> = named.iter().map(|x| x.0.as_str()).collect();
        let mut extras: Vec<(Expr, Value, String)> = Vec::new();
        if patterns.is_empty() {
            if let Some(a) = &additional {
                if *a != Value::Bool(false) {
                    let key = self.key_except(&names, false, ptr)?;
                    extras.push((key, a.clone(), join_ptr(ptr, "additionalProperties")));
                }
            }
        } else {
            let mut covers_all = false;
            for (i, (p, s)) in patterns.iter().enumerate() {
                let at = join_ptr(&pp_ptr, p);
                let kind =
                    match_all_kind(p).or_else(|| search_matches_everything(p).then_some(false));
                if patterns.len() > 1
                    && !prefixes_disjoint(
                        &patterns.iter().map(|x| x.0.as_str()).collect::<Vec<_>>(),
                    )
                {
                    self.unsupported(
                        ptr,
                        "patternProperties",
                        "several patterns that may overlap",
                    )?;
                    break;
                }
                let key = match kind {
                    Some(non_empty) => {
                        covers_all |= !non_empty;
                        self.key_except(&names, non_empty, ptr)?
                    }
                    None => {
                        // Keys the pattern shares with named properties are those properties
                        // (whose schemas already include this pattern's): excluded here.
                        let shared: Vec<&str> = names
                            .iter()
                            .copied()
                            .filter(|k| matchers[i].is_match(k))
                            .collect();
                        // `^(?!X)REST`: REST minus the strings starting with a match of X.
                        let (pos, neg) = match lexical::split_leading_negative_lookahead(p) {
                            Some((neg, pos)) => (pos, Some(neg)),
                            None => (p.clone(), None),
                        };
                        let search_hir = |p: &str| -> Option<Hir> {
                            let translated = lexical::translate_ecma(p).ok()?;
                            let h = regex_syntax::ParserBuilder::new()
                                .nest_limit(100)
                                .build()
                                .parse(&translated)
                                .ok()?;
                            let h = lexical::anchor_search(&h, &lexical::hir("(?s:.)*"));
                            (!lexical::has_look(&h)).then_some(h)
                        };
                        let (Some(h), Some(neg)) = (
                            search_hir(&pos),
                            neg.as_deref().map(search_hir).unwrap_or(Some(Hir::fail())),
                        ) else {
                            self.unsupported(
                                ptr,
                                "patternProperties",
                                format!("pattern `{p}` is not supported"),
                            )?;
                            continue;
                        };
                        let full = quoted(lexical::encode_for_json_string(&h));
                        let mut and_not = Vec::new();
                        if !crate::grammar::lower::is_fail(&neg) {
                            and_not.push(quoted(lexical::encode_for_json_string(&neg)));
                        }
                        if shared.is_empty() && and_not.is_empty() {
                            self.lex_hir("pattern-key", format!("key:{p}"), full)?
                        } else {
                            let literals = Hir::alternation(
                                shared
                                    .iter()
                                    .map(|k| Hir::literal(k.as_bytes().to_vec()))
                                    .collect(),
                            );
                            if !shared.is_empty() {
                                and_not.push(quoted(lexical::encode_for_json_string(&literals)));
                            }
                            let key = format!("key:{p}:except:{}", shared.join("\u{0}"));
                            match self.constrained(
                                "pattern-key",
                                key,
                                full,
                                ir::Constraints {
                                    and: Vec::new(),
                                    and_not,
                                },
                            )? {
                                Some(e) => e,
                                None => {
                                    self.unsupported(
                                        ptr,
                                        "patternProperties",
                                        format!("pattern `{p}` minus the named properties it matches has more than {MAX_CONSTRAINED_STATES} automaton states"),
                                    )?;
                                    continue;
                                }
                            }
                        }
                    }
                };
                extras.push((key, s.clone(), at));
            }
            if !covers_all {
                if let Some(a) = &additional {
                    if *a != Value::Bool(false) {
                        self.warnings.push(format!(
                            "at {}: keys matching no `patternProperties` pattern are not generated (additionalProperties would allow them)",
                            if ptr.is_empty() { "/" } else { ptr }
                        ));
                    }
                }
            }
        }

        // Named members count towards minProperties, and so does the *first* extra member: its
        // key is none of the named keys, so it is a distinct property. Later extra members may
        // repeat a key (which a JSON parser keeps once), so they never count.
        let countable = named.len() as u64 + u64::from(!extras.is_empty());
        let min_p = if min_p > countable {
            self.unsupported(
                ptr,
                "minProperties",
                format!("minProperties {min_p} needs several extra members, whose keys a grammar cannot keep distinct"),
            )?;
            0
        } else {
            min_p
        };
        let n_required = named.iter().filter(|x| x.2).count() as u64;
        if max_p.is_some_and(|m| min_p > m || n_required > m) {
            return Err(GrammarError::at_pointer(
                join_ptr(ptr, "maxProperties"),
                "maxProperties is below minProperties or the number of required properties",
            ));
        }

        let cd = self.child(d);
        let colon = self.colon(d);
        let after = self.after_value(d);
        let mut member_exprs = Vec::with_capacity(named.len());
        for (k, s, _, at) in &named {
            let v = self.value(s, at, cd)?;
            let v = self.shared(k, v)?;
            let key = Expr::Bytes(Value::String(k.clone()).to_string().into_bytes());
            member_exprs.push(Expr::Seq(vec![key, colon.clone(), v, after.clone()]));
        }
        let mut extra_alts = Vec::new();
        for (key, s, at) in &extras {
            let v = self.value(s, at, cd)?;
            let v = self.shared("extra-value", v)?;
            extra_alts.push(Expr::Seq(vec![
                key.clone(),
                colon.clone(),
                v,
                after.clone(),
            ]));
        }
        let extra = if extra_alts.is_empty() {
            None
        } else {
            let e = if extra_alts.len() == 1 {
                extra_alts.pop().unwrap()
            } else {
                Expr::Alt(extra_alts)
            };
            let id = self.add_rule("extra-member", e, RuleKind::Syntactic)?;
            Some(Expr::Ref(id))
        };

        // Member chain: state (k, c, b) = "members k.. still to decide, c written so far
        // (saturating unless maxProperties), b = which tracked properties are present".
        let n = named.len();
        let cap = max_p.unwrap_or(1) as usize;
        let saturating = max_p.is_none();
        let next = |c: usize| if saturating { (c + 1).min(cap) } else { c + 1 };
        let allowed = |c: usize| max_p.is_none_or(|m| (c as u64) < m);
        let bit_of: Vec<u32> = named
            .iter()
            .map(|x| {
                tracked
                    .iter()
                    .position(|t| *t == x.0)
                    .map_or(0, |i| 1u32 << i)
            })
            .collect();
        if (n + 2)
            .saturating_mul(cap + 1)
            .saturating_mul(1 << tracked.len())
            .saturating_mul(min_p as usize + 1)
            > MAX_COUNT_STATES
        {
            return Err(GrammarError::at_pointer(
                ptr,
                "too many properties × minProperties/maxProperties/presence states",
            )
            .with_kind(ErrorKind::Limit));
        }
        // The fourth component counts members towards minProperties (capped there): every named
        // member, and the first extra member only (k = n + 1 marks "an extra member was
        // written"); later extra members may repeat a key, so they never count.
        type State = (usize, usize, u32, usize);
        // Explore: transitions (label: Some(member index) / None = extra member / end).
        enum Step {
            Member(usize, State),
            Skip(State),
            Extra(State),
            End,
        }
        let mut steps: HashMap<State, Vec<Step>> = HashMap::new();
        let mut work: Vec<State> = vec![(0, 0, 0, 0)];
        let min_named = min_p as usize;
        while let Some(st) = work.pop() {
            if steps.contains_key(&st) {
                continue;
            }
            let (k, c, b, m) = st;
            let mut out = Vec::new();
            if k < n {
                if allowed(c) {
                    out.push(Step::Member(
                        k,
                        (k + 1, next(c), b | bit_of[k], (m + 1).min(min_named)),
                    ));
                }
                if !named[k].2 {
                    out.push(Step::Skip((k + 1, c, b, m)));
                }
            } else {
                if m >= min_named && presence_ok(&constraints, b) {
                    out.push(Step::End);
                }
                if extra.is_some() && allowed(c) {
                    let counted = if k == n { (m + 1).min(min_named) } else { m };
                    out.push(Step::Extra((n + 1, next(c), b, counted)));
                }
            }
            for step in &out {
                match step {
                    Step::Member(_, t) | Step::Skip(t) | Step::Extra(t) => work.push(*t),
                    Step::End => {}
                }
            }
            steps.insert(st, out);
        }
        // Productive states (some path to End), backwards to a fixed point.
        let mut productive: std::collections::HashSet<State> = steps
            .iter()
            .filter(|(_, v)| v.iter().any(|x| matches!(x, Step::End)))
            .map(|(s, _)| *s)
            .collect();
        loop {
            let before = productive.len();
            for (st, v) in &steps {
                if !productive.contains(st)
                    && v.iter().any(
                        |x| matches!(x, Step::Member(_, t) | Step::Skip(t) | Step::Extra(t) if productive.contains(t)),
                    )
                {
                    productive.insert(*st);
                }
            }
            if productive.len() == before {
                break;
            }
        }
        if !productive.contains(&(0, 0, 0, 0)) {
            self.warnings.push(format!(
                "at {}: no object satisfies the property constraints",
                if ptr.is_empty() { "/" } else { ptr }
            ));
            return Ok(Self::never());
        }
        let mut ids: HashMap<State, RuleId> = HashMap::new();
        let mut order: Vec<State> = productive.iter().copied().collect();
        order.sort();
        for st in &order {
            ids.insert(
                *st,
                self.add_rule("members", Expr::Empty, RuleKind::Syntactic)?,
            );
        }
        let lead = self.lead(d);
        let sep = self.sep(d);
        let trail = self.trail(d);
        let empty = self.empty_inner(d);
        for st in &order {
            let (_, c, _, _) = *st;
            let pre = if c == 0 { lead.clone() } else { sep.clone() };
            let mut alts = Vec::new();
            for step in &steps[st] {
                match step {
                    Step::Member(k, t) if productive.contains(t) => {
                        alts.push(Expr::Seq(vec![
                            pre.clone(),
                            member_exprs[*k].clone(),
                            Expr::Ref(ids[t]),
                        ]));
                    }
                    Step::Skip(t) if productive.contains(t) => alts.push(Expr::Ref(ids[t])),
                    Step::Extra(t) if productive.contains(t) => {
                        alts.push(Expr::Seq(vec![
                            pre.clone(),
                            extra.clone().unwrap(),
                            Expr::Ref(ids[t]),
                        ]));
                    }
                    Step::End => alts.push(if c == 0 { empty.clone() } else { trail.clone() }),
                    _ => {}
                }
            }
            self.rules[ids[st].0 as usize].expr = if alts.len() == 1 {
                alts.pop().unwrap()
            } else {
                Expr::Alt(alts)
            };
        }
        let start = ids[&(0, 0, 0, 0)];
        Ok(Expr::Seq(vec![
            Expr::Bytes(b"{".to_vec()),
            Expr::Ref(start),
            Expr::Bytes(b"}".to_vec()),
        ]))
    }

    /// A JSON string key that is none of `names` (and not empty if `non_empty`): raw
    /// characters and short escapes, `\u` escapes only for control characters.
    fn key_except(
        &mut self,
        names: &[&str],
        non_empty: bool,
        ptr: &str,
    ) -> Result<Expr, GrammarError> {
        let cache_key = format!("except:{non_empty}:{}", names.join("\u{0}"));
        if let Some(&id) = self.lexical.get(&cache_key) {
            return Ok(Expr::Ref(id));
        }
        if names.iter().any(|n| n.chars().count() > 256) {
            self.unsupported(
                ptr,
                "additionalProperties",
                "a property name longer than 256 characters",
            )?;
        }
        let mut keys: Vec<Vec<char>> = names
            .iter()
            .filter(|n| n.chars().count() <= 256)
            .map(|n| n.chars().collect())
            .collect();
        if non_empty {
            keys.push(Vec::new());
        }
        keys.sort();
        keys.dedup();
        let content = except_regex(&keys, 0, 0, keys.len());
        let pattern = format!("\"{content}\"");
        let hir = lexical::hir(&pattern);
        let id = self.add_rule("key", Expr::Regex(hir), RuleKind::Lexical)?;
        self.lexical.insert(cache_key, id);
        Ok(Expr::Ref(id))
    }
}

/// `if`/`then`/`else` whose `if` only tests the value of one property `D`
/// (`{"properties": {"D": {"const": v}}}` or `{"enum": [...]}`), on the schema
/// itself and/or as members of its `allOf` (the usual "discriminated union" idiom), as an
/// equivalent `anyOf` with one branch per tested value (that value for `D`, plus every `then`
/// whose test it passes and every `else` whose test it fails) and one branch for the other
/// values of `D` (every `else`), and, unless `D` is required, one for objects without `D`
/// (every `then`: each test passes vacuously). `None` when the schema has no such
/// conditionals, is not `type: object`, or has conditionals of another shape (they stay
/// unsupported). Exact: each test is decided by `D`'s value (or absence) alone, and the
/// branches partition the objects by it.
fn rewrite_discriminated_conditionals(obj: &Map<String, Value>) -> Option<Value> {
    struct Cond<'v> {
        values: Vec<Value>,
        then: Option<&'v Value>,
        otherwise: Option<&'v Value>,
    }
    let pure_conditional = |m: &Map<String, Value>| {
        m.contains_key("if")
            && m.keys()
                .all(|k| !is_keyword(k) || matches!(k.as_str(), "if" | "then" | "else"))
    };
    let mut members: Vec<&Map<String, Value>> = Vec::new();
    if obj.contains_key("if") {
        members.push(obj);
    }
    let all_of = obj.get("allOf").and_then(Value::as_array);
    for m in all_of.into_iter().flatten().filter_map(Value::as_object) {
        if pure_conditional(m) {
            members.push(m);
        }
    }
    if members.is_empty() {
        return None;
    }
    let mut discriminator: Option<&str> = None;
    let mut conds = Vec::new();
    for m in &members {
        let test = m.get("if")?.as_object()?;
        if test
            .keys()
            .any(|k| is_keyword(k) && k != "properties" && k != "required")
        {
            return None;
        }
        let props = test.get("properties")?.as_object()?;
        if props.len() != 1 {
            return None;
        }
        let (name, sub) = props.iter().next()?;
        if let Some(r) = test.get("required") {
            if r.as_array()?
                .iter()
                .any(|x| x.as_str() != Some(name.as_str()))
            {
                return None;
            }
        }
        let sub = sub.as_object()?;
        if sub
            .keys()
            .any(|k| is_keyword(k) && !matches!(k.as_str(), "const" | "enum" | "type"))
        {
            return None;
        }
        let values: Vec<Value> = match (sub.get("const"), sub.get("enum")) {
            (Some(c), None) => vec![c.clone()],
            (None, Some(Value::Array(list))) => list.clone(),
            _ => return None,
        };
        // A `type` beside the values must hold for all of them (else the test is not just
        // "D is one of these").
        if let Some(t) = sub.get("type") {
            let probe = serde_json::json!({"type": t});
            let v = jsonschema::validator_for(&probe).ok()?;
            if !values.iter().all(|x| v.is_valid(x)) {
                return None;
            }
        }
        if discriminator.is_some_and(|d| d != name) {
            return None;
        }
        discriminator = Some(name);
        conds.push(Cond {
            values,
            then: m.get("then"),
            otherwise: m.get("else"),
        });
    }
    let name = discriminator?;
    // Non-objects pass every `properties` test (so every `then` would apply to them): only
    // object schemas are rewritten.
    if obj.get("type").and_then(Value::as_str) != Some("object") {
        return None;
    }
    let required = obj
        .get("required")
        .and_then(Value::as_array)
        .is_some_and(|r| r.iter().any(|x| x.as_str() == Some(name)));
    let mut tested: Vec<Value> = Vec::new();
    for c in &conds {
        for v in &c.values {
            if !tested.contains(v) {
                tested.push(v.clone());
            }
        }
    }
    let words: Option<Vec<&str>> = tested.iter().map(Value::as_str).collect();
    let words = words?; // "any other value" is compiled for strings only
    // (Each value branch requires `D`: an object without it belongs to the "absent" branch.)
    let prop = |schema: Value| -> Value {
        serde_json::json!({"properties": {name: schema}, "required": [name]})
    };
    // Each branch starts with the schema's own `properties`, so that merging keeps their order
    // (member order in the grammar follows the first `properties` merged).
    let order: Vec<Value> = obj
        .get("properties")
        .map(|p| serde_json::json!({"properties": p}))
        .into_iter()
        .collect();
    let mut branches = Vec::new();
    for v in &tested {
        let mut all = order.clone();
        all.push(prop(serde_json::json!({"const": v})));
        for c in &conds {
            let part = if c.values.contains(v) {
                c.then
            } else {
                c.otherwise
            };
            all.extend(part.cloned());
        }
        branches.push(serde_json::json!({"allOf": all}));
    }
    let mut others = order.clone();
    others.push(prop(serde_json::json!({"not": {"enum": words}})));
    others.extend(conds.iter().filter_map(|c| c.otherwise.cloned()));
    branches.push(serde_json::json!({"allOf": others}));
    if !required {
        // `D` absent: every test passes vacuously, so every `then` applies.
        let mut absent = order.clone();
        absent.push(serde_json::json!({"not": {"required": [name]}}));
        absent.extend(conds.iter().filter_map(|c| c.then.cloned()));
        branches.push(serde_json::json!({"allOf": absent}));
    }

    let mut out = obj.clone();
    out.remove("if");
    out.remove("then");
    out.remove("else");
    let mut kept: Vec<Value> = all_of
        .into_iter()
        .flatten()
        .filter(|m| !m.as_object().is_some_and(pure_conditional))
        .cloned()
        .collect();
    kept.push(serde_json::json!({"anyOf": branches}));
    out.insert("allOf".into(), Value::Array(kept));
    Some(Value::Object(out))
}

/// A whole JSON string: `"` + `content` (raw string content) + `"`.
fn quoted(content: Hir) -> Hir {
    Hir::concat(vec![
        Hir::literal(b"\"".to_vec()),
        content,
        Hir::literal(b"\"".to_vec()),
    ])
}

/// The strings of `not: {enum: [...]}` / `not: {const: ...}` when that is all the `not`
/// says and every excluded value is a string.
fn excluded_strings(n: &Value) -> Option<Vec<String>> {
    let m = n.as_object()?;
    if m.keys()
        .any(|k| is_keyword(k) && k != "enum" && k != "const" && k != "type")
    {
        return None;
    }
    if m.get("type").is_some_and(|t| t != "string") {
        return None;
    }
    let values: Vec<&Value> = match (m.get("enum"), m.get("const")) {
        (Some(Value::Array(list)), None) => list.iter().collect(),
        (None, Some(c)) => vec![c],
        _ => return None,
    };
    values
        .iter()
        .map(|v| v.as_str().map(str::to_string))
        .collect()
}

/// Does a key match a `patternProperties` pattern (`neg`: the strings a leading `(?!X)`
/// excludes)?
struct KeyMatcher {
    pos: regex_automata::meta::Regex,
    neg: Option<regex_automata::meta::Regex>,
}

impl KeyMatcher {
    fn is_match(&self, key: &str) -> bool {
        self.pos.is_match(key) && !self.neg.as_ref().is_some_and(|n| n.is_match(key))
    }
}

/// Regex (raw JSON string content) for strings not in `keys[lo..hi]`, all of which share
/// their first `depth` characters (the caller has already matched those).
fn except_regex(keys: &[Vec<char>], depth: usize, lo: usize, hi: usize) -> String {
    let any = format!("{}*", lexical::string_unit_pattern());
    let mut alts = Vec::new();
    // Ending here is fine unless some key ends here.
    let ends_here = keys[lo..hi].iter().any(|k| k.len() == depth);
    if !ends_here {
        alts.push(String::new());
    }
    // Children: groups of keys by their next character.
    let mut children: Vec<(char, usize, usize)> = Vec::new();
    let mut i = lo;
    while i < hi {
        if keys[i].len() == depth {
            i += 1;
            continue;
        }
        let c = keys[i][depth];
        let mut j = i;
        while j < hi && keys[j].len() > depth && keys[j][depth] == c {
            j += 1;
        }
        children.push((c, i, j));
        i = j;
    }
    for &(c, a, b) in &children {
        let enc = if c == '"' || c == '\\' || (c as u32) < 0x20 {
            serde_json::to_string(&c.to_string())
                .unwrap()
                .trim_matches('"')
                .to_string()
        } else {
            c.to_string()
        };
        alts.push(format!(
            "{}{}",
            regex_syntax::escape(&enc),
            except_regex(keys, depth + 1, a, b)
        ));
    }
    // Any other first character, then anything.
    let child_chars: Vec<char> = children.iter().map(|x| x.0).collect();
    let mut raw_excl = String::from("\"\\\\\\x00-\\x1f");
    for &c in &child_chars {
        if !(c == '"' || c == '\\' || (c as u32) < 0x20) {
            raw_excl.push_str(&regex_syntax::escape(&c.to_string()));
        }
    }
    let mut other = vec![format!("[^{raw_excl}]")];
    let shorts: Vec<(char, char)> = vec![
        ('"', '"'),
        ('\\', '\\'),
        ('/', '/'),
        ('\u{8}', 'b'),
        ('\u{c}', 'f'),
        ('\n', 'n'),
        ('\r', 'r'),
        ('\t', 't'),
    ];
    let allowed_shorts: String = shorts
        .iter()
        .filter(|(c, _)| !child_chars.contains(c))
        .map(|(_, e)| regex_syntax::escape(&e.to_string()))
        .collect();
    if !allowed_shorts.is_empty() {
        other.push(format!("\\\\[{allowed_shorts}]"));
    }
    if !child_chars.iter().any(|&c| (c as u32) < 0x20) {
        other.push("\\\\u00[01][0-9a-fA-F]".to_string());
    }
    alts.push(format!("(?:{}){any}", other.join("|")));
    format!("(?:{})", alts.join("|"))
}

/// `Some(non_empty)` when a `patternProperties` pattern matches every key (`non_empty`: every
/// non-empty key); `None` otherwise (or when that is not recognised).
fn match_all_kind(p: &str) -> Option<bool> {
    match p {
        "" | ".*" | "^.*$" | "^.*" | ".*$" | "^" | "$" | "(.*)" | "^(.*)$" => Some(false),
        "." | ".+" | "^.+$" | "^.+" | ".{1,}" | "^.{1,}$" | "(.+)" | "^(.+)$" => Some(true),
        _ => None,
    }
}

/// Whether a pattern (searched, as JSON Schema does) matches every string: it has no end
/// anchor and, after an optional start anchor, matches the empty string.
fn search_matches_everything(p: &str) -> bool {
    let Ok(t) = lexical::translate_ecma(p) else {
        return false;
    };
    let Ok(h) = regex_syntax::ParserBuilder::new()
        .nest_limit(100)
        .build()
        .parse(&t)
    else {
        return false;
    };
    let any = lexical::hir("(?s:.)*");
    let searched = lexical::anchor_search(&h, &any);
    if lexical::has_look(&searched) {
        return false;
    }
    // `.*` X `.*` with X matching "" is everything only if X was not end-anchored: then the
    // search form ends with `.*` and starts with `.*` or X directly.
    let body = t.strip_prefix('^').unwrap_or(&t);
    if body.ends_with('$') {
        return false;
    }
    regex_syntax::ParserBuilder::new()
        .build()
        .parse(body)
        .is_ok_and(|b| {
            b.properties().minimum_len() == Some(0) && b.properties().look_set().is_empty()
        })
}

/// Whether anchored patterns start with literal prefixes no two of which are prefixes of each
/// other (so no key matches two of them).
fn prefixes_disjoint(patterns: &[&str]) -> bool {
    let prefix = |p: &str| -> Option<String> {
        let rest = p.strip_prefix('^')?;
        let rest = rest.strip_prefix('(').unwrap_or(rest);
        let lit: String = rest
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        if lit.is_empty() { None } else { Some(lit) }
    };
    let mut pre = Vec::new();
    for p in patterns {
        match prefix(p) {
            Some(x) => pre.push(x),
            None => return false,
        }
    }
    for i in 0..pre.len() {
        for j in 0..pre.len() {
            if i != j && pre[j].starts_with(&pre[i]) {
                return false;
            }
        }
    }
    true
}

/// Restrict a decoded-string regex to lengths `min..=max` (characters). The regex must be a
/// concatenation of fixed-length pieces and repetitions of fixed-length pieces (or already
/// imply the bounds). With one repetition the result is exact; with several, the length
/// budget is split between them (a subset; `exact` is false). `None` when not expressible.
fn constrain_length(h: &Hir, min: u64, max: Option<u64>) -> Option<(Hir, bool)> {
    use regex_syntax::hir::{HirKind, Repetition};
    let (lo, hi) = char_len(h);
    if lo >= min && (max.is_none() || hi.is_some_and(|h| max.is_some_and(|m| h <= m))) {
        return Some((h.clone(), true));
    }
    let unwrap = |h: &Hir| -> Hir {
        match h.kind() {
            HirKind::Capture(c) => (*c.sub).clone(),
            _ => h.clone(),
        }
    };
    let h = &unwrap(h);
    if let HirKind::Alternation(branches) = h.kind() {
        // Each branch on its own; branches that cannot meet the bounds are dropped.
        let mut kept = Vec::new();
        let mut exact = true;
        for b in branches {
            match constrain_length(b, min, max) {
                Some((b2, e)) => {
                    kept.push(b2);
                    exact &= e;
                }
                None => {
                    let (a, hb) = char_len(b);
                    let impossible = max.is_some_and(|m| a > m) || hb.is_some_and(|x| x < min);
                    if !impossible {
                        return None;
                    }
                }
            }
        }
        return if kept.is_empty() {
            None
        } else {
            Some((Hir::alternation(kept), exact))
        };
    }
    let mut parts: Vec<Hir> = Vec::new();
    let top: Vec<Hir> = match h.kind() {
        HirKind::Concat(v) => v.clone(),
        _ => vec![h.clone()],
    };
    for p in top {
        match unwrap(&p).kind() {
            HirKind::Concat(v) => parts.extend(v.iter().cloned()),
            _ => parts.push(p),
        }
    }
    // (index, repetition, width of one repetition)
    let mut reps: Vec<(usize, Repetition, u64)> = Vec::new();
    // Longest possible length of everything but the repetitions' optional parts.
    let mut fixed_hi = 0u64;
    let mut other_var = false;
    for (i, p) in parts.iter().enumerate() {
        let (a, b) = char_len(p);
        if Some(a) == b {
            fixed_hi += a;
            continue;
        }
        match unwrap(p).kind() {
            HirKind::Repetition(r) => {
                let (w, wmax) = char_len(&r.sub);
                if wmax != Some(w) || w == 0 {
                    return None;
                }
                fixed_hi += r.min as u64 * w;
                reps.push((i, r.clone(), w));
            }
            _ => {
                fixed_hi += b?;
                other_var = true;
            }
        }
    }
    if reps.is_empty() {
        return None;
    }
    let k = reps.len() as u64;
    let mut new_bounds: Vec<(u64, Option<u64>)> = reps
        .iter()
        .map(|(_, r, _)| (r.min as u64, r.max.map(|x| x as u64)))
        .collect();
    if let Some(m) = max {
        if fixed_hi > m {
            return None;
        }
        let slack = m - fixed_hi;
        for (j, (_, r, w)) in reps.iter().enumerate() {
            let share = if j == 0 {
                slack - (k - 1) * (slack / k)
            } else {
                slack / k
            };
            let extra = share / w;
            let cap = r.min as u64 + extra;
            new_bounds[j].1 = Some(new_bounds[j].1.map_or(cap, |x| x.min(cap)));
        }
    }
    // Lengthen the minimum where needed, first repetition first.
    let mut deficit = min.saturating_sub(lo);
    for (j, (_, _, w)) in reps.iter().enumerate() {
        if deficit == 0 {
            break;
        }
        let room = new_bounds[j].1.map_or(u64::MAX, |x| x - new_bounds[j].0);
        let add = deficit.div_ceil(*w).min(room);
        new_bounds[j].0 += add;
        deficit = deficit.saturating_sub(add * w);
    }
    if deficit > 0 {
        return None;
    }
    for (j, (i, r, _)) in reps.iter().enumerate() {
        let (a, b) = new_bounds[j];
        if b.is_some_and(|b| b < a || b > 100_000) || a > 100_000 {
            return None;
        }
        parts[*i] = Hir::repetition(Repetition {
            min: a as u32,
            max: b.map(|x| x as u32),
            greedy: true,
            sub: r.sub.clone(),
        });
    }
    let out = Hir::concat(parts);
    let (lo2, hi2) = char_len(&out);
    let within = lo2 >= min && max.is_none_or(|m| hi2.is_some_and(|h| h <= m));
    within.then_some((out, k == 1 && !other_var))
}

/// Length range in characters of a decoded-string regex.
fn char_len(h: &Hir) -> (u64, Option<u64>) {
    use regex_syntax::hir::HirKind;
    match h.kind() {
        HirKind::Empty | HirKind::Look(_) => (0, Some(0)),
        HirKind::Literal(l) => {
            let n = String::from_utf8_lossy(&l.0).chars().count() as u64;
            (n, Some(n))
        }
        HirKind::Class(_) => (1, Some(1)),
        HirKind::Repetition(r) => {
            let (a, b) = char_len(&r.sub);
            (
                a.saturating_mul(r.min as u64),
                match (b, r.max) {
                    (Some(0), _) => Some(0),
                    (Some(b), Some(m)) => Some(b.saturating_mul(m as u64)),
                    _ => None,
                },
            )
        }
        HirKind::Capture(c) => char_len(&c.sub),
        HirKind::Concat(v) => v.iter().fold((0, Some(0)), |(a, b), p| {
            let (x, y) = char_len(p);
            (a + x, b.zip(y).map(|(b, y)| b + y))
        }),
        HirKind::Alternation(v) => {
            let mut lo = u64::MAX;
            let mut hi = Some(0);
            for p in v {
                let (x, y) = char_len(p);
                lo = lo.min(x);
                hi = hi.zip(y).map(|(h, y)| h.max(y));
            }
            (lo, hi)
        }
    }
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(h), Some(l)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push(h * 16 + l);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
