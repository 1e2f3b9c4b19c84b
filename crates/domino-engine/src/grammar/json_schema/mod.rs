//! JSON Schema → grammar: the `--schema` / `--json` front end.
//!
//! [`compile`] turns a JSON Schema (drafts 4 to 2020-12, local references only) into a
//! [`GrammarDef`] whose language is a set of JSON texts that all validate against the schema.
//! It is aimed at JSONSchemaBench: every keyword that constrains instances is either compiled
//! exactly, compiled to a documented *subset* (never a superset) of the valid instances, or
//! reported as [`ErrorKind::Unsupported`](super::ErrorKind) naming the keyword and its JSON
//! pointer (with `lenient`, a warning in [`GrammarDef::warnings`] instead, and the keyword is
//! ignored). Annotation keywords (`title`, `description`, `default`, `examples`, ...) and
//! unknown keywords constrain nothing and are ignored, as the specification says; an
//! unknown keyword (a typo such as `maxLenght`; `x-…` extensions excepted) is reported in
//! [`GrammarDef::warnings`] with the known keyword it most likely misspells, or is an error
//! with [`CompileOptions::strict`].
//!
//! # Shape of the grammar (why it is fast for the engine)
//! - JSON strings, numbers, integer ranges, formats, `pattern`s, object keys (`"name"`, one
//!   literal) and whitespace runs are single [`RuleKind::Lexical`] rules, so each becomes one
//!   terminal; objects and arrays are syntactic rules over them.
//! - Object members: with [`PropertyOrder::Any`](super::PropertyOrder) (the default) the named
//!   properties come in any order, each at most once, required ones present, extra members
//!   (`additionalProperties` not `false`, `patternProperties`) anywhere among them, for objects
//!   with at most [`MAX_ANY_ORDER_PROPERTIES`] named properties; larger objects, and
//!   `PropertyOrder::Schema`, follow the order of `properties` (optional ones may be left
//!   out) with extra members after the named ones (a warning names each object that falls
//!   back). Extra keys are never one of the named keys (so a document has no duplicate keys
//!   whose value would escape its schema). Extra keys use no `\u` escapes for characters that need none (so a key cannot
//!   spell a named key in disguise).
//! - `$ref` resolves against the base URI in force where it is written (the root's `$id`,
//!   changed by each embedded `$id` on the way down; RFC 3986 joins), to a JSON pointer
//!   inside the resource it names or to an `$anchor` of that resource (module `references`).
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
//! - `allOf` (and `$ref` with sibling keywords) is merged into one schema (module `merge`);
//!   array positions are merged position by position (`prefixItems[i]` / `items` of each
//!   side), never keyword by keyword.
//! - `anyOf` is an alternation; sibling keywords are merged into each branch, except into a
//!   branch that already implies them (module `implied`: `{"type": "object", "anyOf":
//!   [{"$ref": …}]}` over object definitions), which stays its target's one shared rule.
//!   Parts of an `allOf` said twice are merged once.
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
//!   removed from the string terminal); other forms through their exact negation (module
//!   `conditionals`: bounds, lengths, counts, `properties`, `allOf`/`anyOf` of those), else
//!   `Unsupported`.
//! - `if`/`then`/`else` that test one property's value (`{"properties": {"D": {"const" |
//!   "enum": …}}}`) on a `type: object` schema, alone or as `allOf` members (the
//!   discriminated-union idiom), are rewritten exactly into an `anyOf` with one branch per
//!   tested value, one for the other values and, unless `D` is required, one for objects
//!   without `D`. Other conditionals are rewritten `(if ∧ then) ∨ (¬if ∧ else)` when `if`
//!   has an exact negation (module `conditionals`), else `Unsupported` naming `if`;
//!   `dependentSchemas` (and draft-7 schema `dependencies` of other shapes) likewise.
//! - `unevaluatedProperties`/`unevaluatedItems` whose evaluated set is static (only
//!   `allOf` members and the schema's own keywords evaluate) become `additionalProperties` /
//!   `items` (module `unevaluated`); otherwise `Unsupported`.
//!
//! # Subsets (sound but stricter than the schema; see also [`lexical`])
//! Each is reported in [`GrammarDef::warnings`] where it applies.
//! - Integers are written without exponent (and never as `-0`); from draft 6 on, a zero
//!   fraction (`1.0`) is admitted, as the specification says. Bounded numbers without
//!   exponent. `const`/`enum` numbers are admitted in every plain decimal spelling of their
//!   value (`-2`, `-2.0`, `-2.00`; not `-2e0`).
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
//! - `uniqueItems: true` is compiled when at most one item is possible, or over finite item
//!   domains (module `unique`, exact); otherwise `Unsupported`.
//! - Named members (from `properties`, `required`, presence constraints) and the first extra
//!   member count towards `minProperties`; further extra members may repeat a key, which a
//!   JSON parser keeps once, so `minProperties` beyond that is unsupported.
//!
//! # Soundness tests
//! `crates/domino-engine/tests/json_schema/` checks generated instances both ways against the
//! `jsonschema` crate, and samples documents from the grammars themselves (and from every
//! compiled JSONSchemaBench schema in `crates/domino-engine/tests/json_schema_bench.rs`) and
//! validates them.
//!
//! # Limits (errors, never stack overflows)
//! Subschemas nest at most [`MAX_SCHEMA_DEPTH`] deep on one path, enums have at most
//! [`MAX_ENUM_VALUES`] values ([`MAX_SCALAR_ENUM_VALUES`] when all are scalars: 256 or more
//! become one rule of literals, one trie terminal after lowering), a grammar at most
//! [`MAX_RULES`] rules, and `allOf` merging does at most [`MAX_MERGE_STEPS`] steps. Time and
//! memory are bounded by the compile budget ([`crate::budget`]).
//!
//! # Modules
//! [`compile`] and the dispatch from one schema to its grammar (`Compiler::value`: unsupported
//! keywords, `$ref`, `allOf`, `anyOf`/`oneOf`, `enum`/`const`, then one part per `type`) are
//! here, with the grammar-building helpers every part shares (rules, lexical terminals,
//! intersection terminals, `Unsupported` reporting). Each keyword family has its own module:
//! - `keywords`: which keywords are annotations, compiled or never compiled; the JSON types.
//! - `references`: `$ref` resolution (JSON pointers, `$id` bases, `$anchor`s) and the work
//!   list that compiles each reference target once.
//! - `combinators`: `anyOf`/`oneOf` rewrites (values listed by exactly one branch, an `enum`
//!   branch overlapping the others), `if`/`then`/`else` on a discriminator, the strings of
//!   `not: {enum}`, and `enum`/`const`.
//! - `presence`: presence constraints (`anyOf`/`oneOf` of `required` sets, `dependencies`,
//!   `not: {required}`) as bit masks over the tracked properties.
//! - `merge`: `allOf` merging and `oneOf` disjointness proofs.
//! - `implied`: whether a branch implies its sibling keywords (then it is not merged).
//! - `copies`: subschemas repeated verbatim in the document, each compiled once as a rule.
//! - `numbers`: `minimum`/`maximum`/`exclusiveMinimum`/`exclusiveMaximum`, `multipleOf`,
//!   integers.
//! - `strings`: `minLength`/`maxLength`, `pattern`, `format`, `not: {enum}` exclusions,
//!   strings longer than one terminal.
//! - `arrays`: `items`, `prefixItems`, `additionalItems`, `minItems`/`maxItems`, `uniqueItems`,
//!   `contains`/`minContains`/`maxContains` (witness counting, exact).
//! - `unique`: `uniqueItems` over finite item domains.
//! - `conditionals`: general `if`/`then`/`else`, `dependentSchemas`, `not` by negation.
//! - `unevaluated`: static `unevaluatedProperties`/`unevaluatedItems`.
//! - `objects`: `properties` (any order), `required`, `additionalProperties`, `patternProperties`, `propertyNames`,
//!   `minProperties`/`maxProperties`, `dependencies`/`dependentRequired`: the member chain.
//! - `keys`: object keys: any key but the named ones, and what a `patternProperties`
//!   pattern is known to match.
//! - `layout`: the whitespace policy (separators, indentation), the generic JSON value and
//!   literal values.
//! - [`lexical`]: the regexes of JSON's lexical pieces (strings, numbers and their ranges,
//!   formats, ECMA `pattern`s).
//! - [`instances`]: random instances of a schema, for tests.

mod arrays;
mod combinators;
mod conditionals;
mod copies;
mod implied;
pub mod instances;
pub(crate) mod keys;
mod keywords;
mod layout;
pub mod lexical;
mod merge;
mod numbers;
mod objects;
mod presence;
mod references;
mod strings;
mod unevaluated;
mod unique;

use std::collections::HashMap;

use regex_syntax::hir::Hir;
use serde_json::{Map, Value};

use super::expr::{Expr, GrammarDef, Rule, RuleId, RuleKind, Span};
use super::ir;
use super::{CompileOptions, ErrorKind, GrammarError, WhitespacePolicy};
use combinators::{excluded_strings, rewrite_discriminated_conditionals};
use keywords::{UNSUPPORTED, is_keyword, is_trivially_true, is_unknown, suggestion, ty};
use presence::required_only;

/// Subschemas nested deeper than this on one compile path are a `Limit` error.
pub const MAX_SCHEMA_DEPTH: usize = 128;
/// `Pretty` indents this many levels; deeper values are written compactly.
pub const MAX_PRETTY_DEPTH: u32 = 16;
/// More `enum` values than this are a `Limit` error, unless every value is a scalar (a
/// string, number, boolean or null: one literal each), up to [`MAX_SCALAR_ENUM_VALUES`].
pub const MAX_ENUM_VALUES: usize = 4096;
/// More scalar `enum` values than this are a `Limit` error. 256 or more scalar values become
/// one rule of literal alternatives, which lowering turns into ONE terminal whose DFA is their
/// trie (`lower::LITERAL_SET_MIN`): set-up grows linearly (100,000 values: seconds).
pub const MAX_SCALAR_ENUM_VALUES: usize = 1_000_000;
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
/// With [`PropertyOrder::Any`](super::PropertyOrder), objects with at most this many named
/// properties admit them in every order; larger ones fall back to schema order (a warning).
/// The member chain then has one state per subset of the named properties written, so an
/// object costs at most `2^N` rules and `N·2^(N-1)` member alternatives (N = 8: 256 rules,
/// 1,024 alternatives).
pub const MAX_ANY_ORDER_PROPERTIES: usize = 8;
/// `minProperties`/`maxProperties` counting states allowed per object.
pub const MAX_COUNT_STATES: usize = 20_000;

/// Compile a JSON Schema to a grammar whose language is JSON texts valid for the schema.
pub fn compile(schema: &Value, opts: &CompileOptions) -> Result<GrammarDef, GrammarError> {
    let mut c = Compiler::new(schema, opts);
    let uris = c.uris.get_or_init(|| references::UriIndex::build(schema));
    let root_referenced = uris.root_referenced;
    // Repeated subschemas (module `copies`), where a pointer means the same everywhere.
    if uris.all_at_root() {
        c.copies = copies::CopyIndex::build(schema);
    }
    // A schema that refers to itself (`"$ref": "#"`) is compiled once, as the rule that
    // reference names; compiled inline here as well, the whole document was lowered twice.
    let root_value = if root_referenced {
        c.ref_rule("#", "", 0)?
    } else {
        c.value(schema, "", 0)?
    };
    // Leading whitespace is allowed (models often open with a newline); trailing whitespace
    // only when asked for, so that the document, and generation, ends with the root value.
    let (lead, trail) = match opts.whitespace {
        WhitespacePolicy::Flexible if opts.trailing_whitespace => (c.ws(), c.ws()),
        WhitespacePolicy::Flexible => (c.ws(), Expr::Empty),
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
        lexing: Default::default(),
    })
}

pub(crate) struct Compiler<'a> {
    root: &'a Value,
    opts: &'a CompileOptions,
    rules: Vec<Rule>,
    warnings: Vec<String>,
    /// The unknown-keyword warnings already given (a schema can carry thousands of
    /// annotations no draft defines; a linear search of `warnings` per one was quadratic).
    unknown_seen: std::collections::HashSet<String>,
    /// [`suggestion`] per unknown keyword, computed once.
    suggestions: HashMap<String, Option<&'static str>>,
    /// Resolved pointer → (depth, the rule compiled from it) (looked up by `&str`: every
    /// subschema compiled asks, see `value`).
    refs: HashMap<String, Vec<(u32, RuleId)>>,
    pending: Vec<(RuleId, String, u32)>,
    /// Lexical rules by their regex text (dedup).
    lexical: HashMap<String, RuleId>,
    any_rules: HashMap<u32, RuleId>,
    /// The flexible layout's rules, once made (module `layout`).
    layout_memo: layout::LayoutMemo,
    nest: usize,
    /// The JSON pointer of the schema being compiled (rules record it: errors about a rule
    /// name where it came from).
    pointer: std::sync::Arc<str>,
    merge_steps: usize,
    /// Embedded resources (`$id`) and anchors by absolute URI, built on the first `$ref`.
    uris: std::cell::OnceCell<references::UriIndex>,
    /// The document's repeated subschemas (module `copies`).
    copies: copies::CopyIndex,
    /// (content hash, depth) → the rules compiled from them, with the pointer of the copy
    /// each was compiled from.
    copy_rules: HashMap<(u64, u32), Vec<(String, RuleId)>>,
}

/// `ptr` extended by one reference token, escaped (`~` → `~0`, `/` → `~1`). Written into
/// one string sized for it: a pointer is built for every subschema and member.
fn join_ptr(ptr: &str, token: &str) -> String {
    let mut out = String::with_capacity(ptr.len() + 1 + token.len());
    out.push_str(ptr);
    out.push('/');
    for c in token.chars() {
        match c {
            '~' => out.push_str("~0"),
            '/' => out.push_str("~1"),
            c => out.push(c),
        }
    }
    out
}

/// A rule name from `name`: ASCII letters, digits and inner `-`, at most 40 characters
/// (`value` when nothing is left), appended to `out`.
fn sanitize_into(name: &str, out: &mut String) {
    // The front end's own names (`members`, `item`) are clean already: one copy, no scan
    // per character (this runs for every rule of every schema).
    if name.len() <= 40
        && !name.starts_with('-')
        && !name.ends_with('-')
        && !name.is_empty()
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        out.push_str(name);
        return;
    }
    let s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let s = s.trim_matches('-');
    if s.is_empty() {
        out.push_str("value");
    } else {
        out.extend(s.chars().take(40));
    }
}

/// `n` in decimal, appended to `out`.
fn push_decimal(out: &mut String, mut n: u32) {
    let mut digits = [0u8; 10];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(digits[i..].iter().map(|&d| d as char));
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
            unknown_seen: std::collections::HashSet::new(),
            suggestions: HashMap::new(),
            refs: HashMap::new(),
            uris: std::cell::OnceCell::new(),
            pending: Vec::new(),
            lexical: HashMap::new(),
            any_rules: HashMap::new(),
            layout_memo: Default::default(),
            nest: 0,
            pointer: "".into(),
            merge_steps: 0,
            copies: copies::CopyIndex::default(),
            copy_rules: HashMap::new(),
        }
    }

    // -------------------------------------------------------------------------------
    // Rules, terminals, errors and limits (layout: module `layout`)
    // -------------------------------------------------------------------------------

    fn add_rule(&mut self, name: &str, expr: Expr, kind: RuleKind) -> Result<RuleId, GrammarError> {
        if self.rules.len() >= MAX_RULES {
            return Err(GrammarError::whole(format!(
                "schema needs more than {MAX_RULES} grammar rules"
            ))
            .with_kind(ErrorKind::Limit));
        }
        let id = RuleId(self.rules.len() as u32);
        // `{sanitized name}-{id}`, built in one allocation (`format!` was most of this
        // function, which runs for every rule).
        let mut rule_name = String::with_capacity(name.len().min(40) + 11);
        sanitize_into(name, &mut rule_name);
        rule_name.push('-');
        push_decimal(&mut rule_name, id.0);
        self.rules.push(Rule {
            name: rule_name,
            expr,
            kind,
            span: Span::default(),
            pointer: Some(std::sync::Arc::clone(&self.pointer)),
        });
        Ok(id)
    }

    /// A lexical rule for a regex (deduplicated by its text).
    fn lex(&mut self, name: &str, pattern: String) -> Result<Expr, GrammarError> {
        if let Some(&id) = self.lexical.get(&pattern) {
            return Ok(Expr::Ref(id));
        }
        let hir = lexical::hir_shared(&pattern);
        let id = self.add_rule(name, Expr::Regex(hir), RuleKind::Lexical)?;
        self.lexical.insert(pattern, id);
        Ok(Expr::Ref(id))
    }

    fn lex_hir(&mut self, name: &str, key: String, hir: Hir) -> Result<Expr, GrammarError> {
        if let Some(&id) = self.lexical.get(&key) {
            return Ok(Expr::Ref(id));
        }
        let id = self.add_rule(name, Expr::Regex(hir.into()), RuleKind::Lexical)?;
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

    /// An unknown keyword (no draft defines it): ignored, as the specification says, but
    /// never silently: a warning (once per location), or an error under `strict`.
    fn unknown_keyword(&mut self, ptr: &str, keyword: &str) -> Result<(), GrammarError> {
        let at = join_ptr(ptr, keyword);
        // One suggestion per keyword (a Kubernetes schema repeats its `_format` hundreds of
        // times, and each suggestion is an edit distance to every known keyword).
        let hint = match self.suggestions.get(keyword) {
            Some(&s) => s,
            None => {
                let s = suggestion(keyword);
                self.suggestions.insert(keyword.to_string(), s);
                s
            }
        }
        .map(|c| format!(" (did you mean `{c}`?)"))
        .unwrap_or_default();
        if self.opts.strict {
            return Err(GrammarError::at_pointer(
                at,
                format!("unknown keyword `{keyword}`{hint} (--strict)"),
            ));
        }
        let msg = format!("unknown keyword `{keyword}` at {at} ignored{hint}");
        if self.unknown_seen.insert(msg.clone()) {
            self.warnings.push(msg);
        }
        Ok(())
    }

    fn never() -> Expr {
        Expr::Alt(Vec::new())
    }

    /// Whether `e` is known to derive no string: [`Compiler::never`], a sequence holding one,
    /// or a reference to a rule (a few levels deep) that is one. `false` means "not known":
    /// rules still being built (recursion) read as possible.
    pub(crate) fn derives_nothing(&self, e: &Expr) -> bool {
        fn go(c: &Compiler<'_>, e: &Expr, depth: u32) -> bool {
            match e {
                Expr::Alt(v) => v.iter().all(|x| go(c, x, depth)),
                Expr::Seq(v) => v.iter().any(|x| go(c, x, depth)),
                Expr::RefPairs(pairs) => pairs
                    .iter()
                    .all(|&[a, b]| go(c, &Expr::Ref(a), depth) || go(c, &Expr::Ref(b), depth)),
                Expr::Ref(r) => {
                    depth < 8
                        && c.rules
                            .get(r.0 as usize)
                            .is_some_and(|rule| go(c, &rule.expr, depth + 1))
                }
                _ => false,
            }
        }
        go(self, e, 0)
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
        Ok(self.constrained_reach(name, key, hir, constraints)?.ok())
    }

    /// [`Compiler::constrained`], with the reach of a product that had too many states
    /// ([`crate::grammar::dfa::TerminalDfa::product_reach`]) as the error when it is known.
    fn constrained_reach(
        &mut self,
        name: &str,
        key: String,
        hir: Hir,
        constraints: ir::Constraints,
    ) -> Result<Result<Expr, Option<usize>>, GrammarError> {
        let key = format!("constrained:{key}");
        if let Some(&id) = self.lexical.get(&key) {
            return Ok(Ok(Expr::Ref(id)));
        }
        match crate::grammar::dfa::TerminalDfa::product_reach(
            &hir,
            &constraints,
            MAX_CONSTRAINED_STATES,
        ) {
            Ok(_) => {}
            Err((crate::grammar::dfa::DfaError::MatchesNothing, _)) => {
                return Ok(Ok(Self::never()));
            }
            Err((crate::grammar::dfa::DfaError::TooManyStates(_), reach)) => {
                return Ok(Err(reach));
            }
            Err(_) => return Ok(Err(None)),
        }
        let id = self.add_rule(
            name,
            Expr::Constrained {
                hir: Box::new(hir),
                constraints: Box::new(constraints),
            },
            RuleKind::Syntactic,
        )?;
        self.lexical.insert(key, id);
        Ok(Ok(Expr::Ref(id)))
    }

    // -------------------------------------------------------------------------------
    // Values: the dispatch by keyword family
    // -------------------------------------------------------------------------------

    /// The grammar of the JSON values valid for schema `s` (at JSON pointer `ptr`), laid out
    /// for nesting depth `d`.
    fn value(&mut self, s: &Value, ptr: &str, d: u32) -> Result<Expr, GrammarError> {
        // The document's own subschema at `ptr` that a reference already made a rule of
        // (a rewrite referenced it, see `ref_to`): that rule, not a second copy.
        if let Some(id) = self.ref_rule_of(ptr, d) {
            if self.root.pointer(ptr).is_some_and(|v| std::ptr::eq(v, s)) {
                return Ok(Expr::Ref(id));
            }
        }
        if let Some(h) = self.copies.hash_of(s) {
            return self.value_copy(s, ptr, d, h);
        }
        self.value_uncached(s, ptr, d)
    }

    /// A repeated subschema `s` (content hash `h`): the rule of an equal copy compiled
    /// before, else a new rule other copies will use. (Only for `s` the document's own node
    /// at `ptr`, so that the pointer kept finds it again.)
    fn value_copy(&mut self, s: &Value, ptr: &str, d: u32, h: u64) -> Result<Expr, GrammarError> {
        let root = self.root;
        if let Some(list) = self.copy_rules.get(&(h, d)) {
            for (at, id) in list {
                if root.pointer(at).is_some_and(|v| copies::same(v, s)) {
                    return Ok(Expr::Ref(*id));
                }
            }
        }
        if !root.pointer(ptr).is_some_and(|v| std::ptr::eq(v, s)) {
            return self.value_uncached(s, ptr, d);
        }
        let outer = std::mem::replace(&mut self.pointer, ptr.into());
        let name = ptr.rsplit('/').next().unwrap_or("copy").to_string();
        let id = self.add_rule(
            if name.is_empty() { "copy" } else { &name },
            Expr::Empty,
            RuleKind::Syntactic,
        );
        self.pointer = outer;
        let id = id?;
        self.copy_rules
            .entry((h, d))
            .or_default()
            .push((ptr.to_string(), id));
        let expr = self.value_uncached(s, ptr, d)?;
        self.rules[id.0 as usize].expr = expr;
        Ok(Expr::Ref(id))
    }

    /// [`Compiler::value`] without looking for a rule already made of `ptr` (what that
    /// rule's own body is compiled with).
    fn value_uncached(&mut self, s: &Value, ptr: &str, d: u32) -> Result<Expr, GrammarError> {
        if self.nest >= MAX_SCHEMA_DEPTH {
            return Err(GrammarError::at_pointer(
                ptr,
                format!("subschemas nested deeper than {MAX_SCHEMA_DEPTH}"),
            )
            .with_kind(ErrorKind::Limit));
        }
        self.nest += 1;
        let outer = std::mem::replace(&mut self.pointer, ptr.into());
        let r = self.value_inner(s, ptr, d);
        self.pointer = outer;
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
        // The rewrites below each look for keywords most schema objects lack: one pass over the
        // keys says whether any can apply (their dozen hashed lookups per subschema were 2 %
        // of compiling the slowest schemas).
        let rewritable = obj.keys().any(|k| {
            matches!(
                k.as_str(),
                "unevaluatedProperties"
                    | "unevaluatedItems"
                    | "if"
                    | "then"
                    | "else"
                    | "allOf"
                    | "dependentSchemas"
                    | "dependencies"
                    | "not"
            )
        });
        // `unevaluated*` where the evaluated set is static (module `unevaluated`), on the whole
        // schema object before `$ref`/`allOf` split it and before conditionals are rewritten
        // (an `if` annotates even without `then`/`else`).
        if rewritable {
            if let Some(rewritten) = unevaluated::rewrite_unevaluated(obj) {
                return self.value_inner(&Value::Object(rewritten), ptr, d);
            }
        }
        // `if`/`then`/`else` on a required discriminator: rewritten into `anyOf` (exact).
        // (With an `unevaluated*` still here, conditionals stay: rewriting them would change
        // what it sees evaluated; it is reported unsupported below.)
        let unevaluated_left = rewritable
            && (obj.contains_key("unevaluatedProperties") || obj.contains_key("unevaluatedItems"));
        if rewritable && !unevaluated_left {
            if let Some(rewritten) = rewrite_discriminated_conditionals(obj) {
                return self.value_inner(&rewritten, ptr, d);
            }
            // General `if`/`then`/`else`, `dependentSchemas`, `not`: exact rewrites (module
            // `conditionals`).
            if let Some(rewritten) = conditionals::rewrite_conditionals(obj) {
                return self.value_inner(&Value::Object(rewritten), ptr, d);
            }
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
            } else if is_unknown(k) {
                self.unknown_keyword(ptr, k)?;
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
            let bare: Value = Value::Object(
                [("$ref".to_string(), Value::String(r.to_string()))]
                    .into_iter()
                    .collect(),
            );
            if implied::implies(self, &bare, &siblings, ptr) {
                // The siblings say nothing the target does not: the target's shared rule.
                return self.ref_rule(r, ptr, d);
            }
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
            let mut siblings = obj.clone();
            siblings.remove("allOf");
            // One member that implies the siblings is that member. (Not one with its own
            // `$id`: merged, its `$ref` resolves against the enclosing base, which drafts up
            // to 7 require — a `$ref` ignores the `$id` beside it.)
            if let [only] = branches.as_slice() {
                let at = join_ptr(&join_ptr(ptr, "allOf"), "0");
                let own_id = only.get("$id").is_some() || only.get("id").is_some();
                if !own_id && implied::implies(self, only, &siblings, &at) {
                    return self.value(only, &at, d);
                }
            }
            let mut parts = branches.clone();
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
            for (i, b) in branches.iter().enumerate() {
                let at = join_ptr(&join_ptr(ptr, kw), &i.to_string());
                if has_siblings && !implied::implies(self, b, &siblings, &at) {
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
}
