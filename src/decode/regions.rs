//! Where a constraint applies in the output: from the first token (the default), or in
//! tagged regions of otherwise free text — a reasoning model's answer after `</think>`,
//! structural tags (`--trigger TEXT --schema FILE`, `--tags FILE`), tool calls.
//!
//! A [`TagPlan`] is what the command line, the REPL, the server and the tool-call syntaxes
//! ([`super::tools`]) describe: regions, each a `begin` text (the trigger), a grammar source
//! and an `end` text appended to the grammar (so `</tool_call>` is part of the region, and a
//! region is over only when its closing text is written). [`TagPlan::compile`] turns it into
//! the engine's [`TriggerSpec`]; [`crate::engine::triggered::TriggeredConstraint`] then makes
//! the masks exact at the boundaries (a token that straddles the trigger is allowed exactly
//! when the region's grammar accepts the rest of it).
//!
//! Reasoning ([`TagPlan::reasoning`]) is one region whose trigger is the end-of-reasoning
//! marker, whose grammar is the constraint, and after which only end-of-generation may come
//! (`min_regions` 1: the answer must come). Everything before the marker is free, so it is
//! byte-identical to what the unconstrained model writes with the same seed.

use crate::engine::CompiledGrammar;
use crate::engine::triggered::{AfterRegion, Region, Trigger, TriggerSpec};
use crate::grammar::expr::{Expr, GrammarDef, Rule, RuleId, RuleKind, Span};
use crate::grammar::{CompileOptions, GrammarError, GrammarSource};
use crate::vocab::Vocabulary;
use std::sync::Arc;

/// The default end-of-reasoning marker (DeepSeek-R1, Qwen3, QwQ).
pub const DEFAULT_REASONING_END: &str = "</think>";

/// What follows a completed region (the engine's [`AfterRegion`], spelled for configs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum After {
    /// Free text again; more regions may follow.
    #[default]
    Free,
    /// Only end-of-generation.
    End,
}

impl After {
    pub fn as_str(self) -> &'static str {
        match self {
            After::Free => "free",
            After::End => "end",
        }
    }
}

impl std::str::FromStr for After {
    type Err = String;
    fn from_str(s: &str) -> Result<After, String> {
        match s {
            "free" => Ok(After::Free),
            "end" => Ok(After::End),
            _ => Err(format!("unknown --after-region `{s}` (free or end)")),
        }
    }
}

/// One tagged region: its trigger text, its grammar and the text that closes it.
#[derive(Clone, Debug)]
pub struct TagRegion {
    /// A name for stats and parsing (a tool's name, `answer`, `tag 1`).
    pub name: String,
    /// The trigger: free text runs until its first occurrence.
    pub begin: String,
    /// Literal text the region starts with after `begin` (may be empty).
    pub prefix: String,
    /// The grammar of the region's text after `begin` and `prefix`.
    pub source: GrammarSource,
    /// Text the region ends with (appended to the grammar; may be empty).
    pub end: String,
}

/// Free text with tagged regions (see the module doc).
#[derive(Clone, Debug)]
pub struct TagPlan {
    pub regions: Vec<TagRegion>,
    pub after: After,
    /// At least this many regions (0: free text alone is a complete output).
    pub min_regions: usize,
    pub max_regions: Option<usize>,
    /// The output starts inside a region: it is constrained from its first token to
    /// `begin · region` (one of the regions), repeated with newlines between (only once
    /// under [`After::End`]). For `tool_choice: required`: a model that would talk first
    /// cannot leave the call out.
    pub from_start: bool,
}

/// A compiled [`TagPlan`].
#[derive(Clone, Debug)]
pub enum CompiledPlan {
    /// Constrained from the first token ([`TagPlan::from_start`]).
    Whole(Arc<CompiledGrammar>),
    /// Free text with regions.
    Triggered(Arc<TriggerSpec>),
}

impl TagPlan {
    /// Free until `end` (the end-of-reasoning marker), then `source`, then the end.
    pub fn reasoning(end: &str, source: GrammarSource) -> TagPlan {
        TagPlan {
            regions: vec![TagRegion {
                name: "answer".into(),
                begin: end.to_string(),
                prefix: String::new(),
                source,
                end: String::new(),
            }],
            after: After::End,
            min_regions: 1,
            max_regions: Some(1),
            from_start: false,
        }
    }

    /// Compile the plan: [`CompiledPlan::Whole`] when it starts in a region, else the
    /// engine's spec ([`TagPlan::compile`]).
    pub fn compile_plan(
        &self,
        opts: &CompileOptions,
        vocab: &Vocabulary,
    ) -> Result<CompiledPlan, GrammarError> {
        if !self.from_start {
            return Ok(CompiledPlan::Triggered(Arc::new(
                self.compile(opts, vocab)?,
            )));
        }
        let ir = crate::grammar::lower::lower(&self.whole_def(opts)?)?;
        Ok(CompiledPlan::Whole(CompiledGrammar::new(ir).map_err(
            |e| GrammarError::whole(format!("cannot compile the grammar: {e}")),
        )?))
    }

    /// The grammar of a plan that starts in a region ([`TagPlan::from_start`]): one of the
    /// regions (`begin · prefix · grammar · end`); under [`After::Free`] one or more of them,
    /// a newline between two, at most `max_regions`.
    pub fn whole_def(&self, opts: &CompileOptions) -> Result<GrammarDef, GrammarError> {
        if self.regions.is_empty() {
            return Err(GrammarError::whole("no tagged regions (no trigger given)"));
        }
        let mut defs = Vec::with_capacity(self.regions.len());
        for r in &self.regions {
            let def = r.source.parse(opts)?;
            let open = format!("{}{}", r.begin, r.prefix);
            defs.push(wrap(def, open.as_bytes(), r.end.as_bytes()));
        }
        let many = self.after == After::Free && self.max_regions.is_none_or(|m| m > 1);
        Ok(repeat(alternatives(defs), many, b"\n"))
    }

    /// A key for this plan's content (draft statistics, caches).
    pub fn key_text(&self, opts: &CompileOptions) -> String {
        format!("{:?}{opts:?}", self)
    }

    /// Compile every region's grammar (with its `end` appended) into the engine's spec. A
    /// `begin` that is exactly one special token of `vocab` becomes a token trigger.
    pub fn compile(
        &self,
        opts: &CompileOptions,
        vocab: &Vocabulary,
    ) -> Result<TriggerSpec, GrammarError> {
        if self.regions.is_empty() {
            return Err(GrammarError::whole("no tagged regions (no trigger given)"));
        }
        let mut regions = Vec::with_capacity(self.regions.len());
        for r in &self.regions {
            if r.begin.is_empty() {
                return Err(GrammarError::whole(format!(
                    "region `{}`: the trigger text is empty",
                    r.name
                )));
            }
            let grammar = compile_wrapped(&r.source, opts, r.prefix.as_bytes(), r.end.as_bytes())
                .map_err(|e| GrammarError {
                message: format!("region `{}`: {}", r.name, e.message),
                ..e
            })?;
            regions.push(Region {
                trigger: Trigger::for_text(vocab, r.begin.as_bytes()),
                grammar,
                name: r.name.clone(),
            });
        }
        Ok(TriggerSpec {
            regions,
            after: match self.after {
                After::Free => AfterRegion::Free,
                After::End => AfterRegion::End,
            },
            min_regions: self.min_regions,
            max_regions: self.max_regions,
        })
    }
}

/// The regions of a structural-tags spec (`--tags FILE`): a JSON array of
/// `{"begin": TEXT, one of "schema" (a JSON Schema) | "grammar" (GBNF text) | "lark" (Lark
/// text) | "regex" (a pattern) | "json": true, "end": TEXT (optional), "name": TEXT
/// (optional)}`. Errors name the entry and the field.
pub fn tag_regions_from_json(v: &serde_json::Value) -> Result<Vec<TagRegion>, String> {
    use serde_json::Value;
    let items = v
        .as_array()
        .ok_or("a tags spec must be a JSON array of {\"begin\", \"schema\"|\"grammar\"|\"lark\"|\"regex\", \"end\"} objects")?;
    if items.is_empty() {
        return Err("the tags spec is empty".into());
    }
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        let obj = item
            .as_object()
            .ok_or_else(|| format!("tags[{i}]: not a JSON object"))?;
        let text = |key: &str| -> Result<Option<String>, String> {
            match obj.get(key) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(format!("tags[{i}].{key}: must be a string")),
            }
        };
        for key in obj.keys() {
            if ![
                "begin", "end", "name", "schema", "grammar", "lark", "regex", "json",
            ]
            .contains(&key.as_str())
            {
                return Err(format!(
                    "tags[{i}]: unknown field `{key}` (begin, end, name, schema, grammar, lark, regex, json)"
                ));
            }
        }
        let begin = text("begin")?.ok_or_else(|| format!("tags[{i}]: `begin` is missing"))?;
        if begin.is_empty() {
            return Err(format!("tags[{i}].begin: empty"));
        }
        let mut sources = Vec::new();
        if let Some(s) = obj.get("schema") {
            sources.push(GrammarSource::JsonSchema(s.clone()));
        }
        if let Some(g) = text("grammar")? {
            sources.push(GrammarSource::Gbnf(g));
        }
        if let Some(g) = text("lark")? {
            sources.push(GrammarSource::Lark(g));
        }
        if let Some(r) = text("regex")? {
            sources.push(GrammarSource::Regex(r));
        }
        match obj.get("json") {
            None | Some(Value::Bool(false)) => {}
            Some(Value::Bool(true)) => sources.push(GrammarSource::Json),
            Some(_) => return Err(format!("tags[{i}].json: must be true or false")),
        }
        if sources.len() != 1 {
            return Err(format!(
                "tags[{i}]: exactly one of schema, grammar, lark, regex, json is needed (found {})",
                sources.len()
            ));
        }
        out.push(TagRegion {
            name: text("name")?.unwrap_or_else(|| format!("tag {}", i + 1)),
            begin,
            prefix: String::new(),
            source: sources.pop().expect("one source"),
            end: text("end")?.unwrap_or_default(),
        });
    }
    Ok(out)
}

/// Compile `source` with `prefix` before and `suffix` after its language (literal bytes).
pub fn compile_wrapped(
    source: &GrammarSource,
    opts: &CompileOptions,
    prefix: &[u8],
    suffix: &[u8],
) -> Result<Arc<CompiledGrammar>, GrammarError> {
    let def = source.parse(opts)?;
    let def = wrap(def, prefix, suffix);
    let ir = crate::grammar::lower::lower(&def)?;
    CompiledGrammar::new(ir)
        .map_err(|e| GrammarError::whole(format!("cannot compile the grammar: {e}")))
}

/// `prefix · start · suffix` as the new start rule (unchanged when both are empty).
pub fn wrap(mut def: GrammarDef, prefix: &[u8], suffix: &[u8]) -> GrammarDef {
    if prefix.is_empty() && suffix.is_empty() {
        return def;
    }
    let mut seq = Vec::new();
    if !prefix.is_empty() {
        seq.push(Expr::Bytes(prefix.to_vec()));
    }
    seq.push(Expr::Ref(def.start));
    if !suffix.is_empty() {
        seq.push(Expr::Bytes(suffix.to_vec()));
    }
    let id = RuleId(def.rules.len() as u32);
    def.rules.push(Rule {
        name: "__region".into(),
        expr: Expr::Seq(seq),
        kind: RuleKind::Syntactic,
        span: Span::default(),
        pointer: None,
    });
    def.start = id;
    def
}

/// One grammar whose language is the union of `defs`' (their rules side by side).
pub fn alternatives(mut defs: Vec<GrammarDef>) -> GrammarDef {
    if defs.len() == 1 {
        return defs.pop().expect("one grammar");
    }
    // One lexing policy for the union: Lark's greedy lexer only when every region uses it.
    let lexing = defs[0].lexing;
    let mixed = defs.iter().any(|d| d.lexing != lexing);
    let mut out = GrammarDef {
        rules: Vec::new(),
        start: RuleId(0),
        ignore: Vec::new(),
        warnings: Vec::new(),
        lexing: if mixed { Default::default() } else { lexing },
    };
    if mixed {
        out.warnings.push(
            "regions mix Lark grammars with other formats: all of them are lexed character by character (llama.cpp's semantics), not with Lark's greedy lexer"
                .into(),
        );
    }
    let mut starts = Vec::with_capacity(defs.len());
    for def in defs {
        let offset = out.rules.len() as u32;
        starts.push(Expr::Ref(RuleId(def.start.0 + offset)));
        for mut rule in def.rules {
            shift_refs(&mut rule.expr, offset);
            out.rules.push(rule);
        }
        for mut e in def.ignore {
            shift_refs(&mut e, offset);
            out.ignore.push(e);
        }
        out.warnings.extend(def.warnings);
    }
    out.start = RuleId(out.rules.len() as u32);
    out.rules.push(Rule {
        name: "__regions".into(),
        expr: Expr::Alt(starts),
        kind: RuleKind::Syntactic,
        span: Span::default(),
        pointer: None,
    });
    out
}

/// `start (sep start)*` when `many`, else `def` unchanged.
fn repeat(mut def: GrammarDef, many: bool, sep: &[u8]) -> GrammarDef {
    if !many {
        return def;
    }
    let one = Expr::Ref(def.start);
    def.start = RuleId(def.rules.len() as u32);
    def.rules.push(Rule {
        name: "__repeated".into(),
        expr: Expr::Seq(vec![
            one.clone(),
            Expr::Repeat {
                expr: Box::new(Expr::Seq(vec![Expr::Bytes(sep.to_vec()), one])),
                min: 0,
                max: None,
            },
        ]),
        kind: RuleKind::Syntactic,
        span: Span::default(),
        pointer: None,
    });
    def
}

/// Add `offset` to every rule reference in `e`.
fn shift_refs(e: &mut Expr, offset: u32) {
    match e {
        Expr::Ref(id) => id.0 += offset,
        Expr::Seq(v) | Expr::Alt(v) => v.iter_mut().for_each(|x| shift_refs(x, offset)),
        Expr::Repeat { expr, .. } => shift_refs(expr, offset),
        Expr::RefPairs(pairs) => pairs.iter_mut().flatten().for_each(|id| id.0 += offset),
        Expr::Empty | Expr::Bytes(_) | Expr::Regex(_) | Expr::Constrained { .. } => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grammar::reference::ReferenceRecognizer;

    fn accepts(r: &ReferenceRecognizer, text: &[u8]) -> bool {
        let mut s = r.start();
        for &b in text {
            match r.feed(&s, b) {
                Some(n) => s = n,
                None => return false,
            }
        }
        r.is_accepting(&s)
    }

    #[test]
    fn wrapped_grammars_need_their_prefix_and_suffix() {
        let def = GrammarSource::Regex("[0-9]+".into())
            .parse(&CompileOptions::default())
            .unwrap();
        let def = wrap(def, b"<n>", b"</n>");
        let ir = crate::grammar::lower::lower(&def).unwrap();
        let r = ReferenceRecognizer::new(&ir).unwrap();
        assert!(accepts(&r, b"<n>42</n>"));
        assert!(!accepts(&r, b"42</n>"));
        assert!(!accepts(&r, b"<n>42"));
        assert!(!accepts(&r, b"<n></n>"));
    }

    #[test]
    fn alternatives_and_repeats_keep_each_grammar_intact() {
        let o = CompileOptions::default();
        let a = wrap(
            GrammarSource::Regex("[0-9]+".into()).parse(&o).unwrap(),
            b"<n>",
            b"</n>",
        );
        let b = wrap(
            GrammarSource::Gbnf("root ::= w w\nw ::= [a-z]".into())
                .parse(&o)
                .unwrap(),
            b"<w>",
            b"</w>",
        );
        let def = repeat(alternatives(vec![a, b]), true, b"\n");
        let ir = crate::grammar::lower::lower(&def).unwrap();
        let r = ReferenceRecognizer::new(&ir).unwrap();
        assert!(accepts(&r, b"<n>1</n>"));
        assert!(accepts(&r, b"<w>ab</w>"));
        assert!(accepts(&r, b"<w>ab</w>\n<n>12</n>\n<w>zz</w>"));
        assert!(!accepts(&r, b"<w>abc</w>"));
        assert!(!accepts(&r, b"<n>1</n><n>2</n>"));
        assert!(!accepts(&r, b"<n>a</n>"));
    }

    #[test]
    fn a_schema_object_behind_another_grammar_keeps_its_member_states() {
        // The second grammar's rules move by the first's count, the member states'
        // reference pairs (`Expr::RefPairs`) with them.
        let o = CompileOptions::default();
        let a = GrammarSource::Regex("[0-9]+".into()).parse(&o).unwrap();
        let schema = serde_json::json!({
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "boolean"}, "c": {"const": 1}},
            "required": ["a"],
            "additionalProperties": false
        });
        let b = GrammarSource::JsonSchema(schema).parse(&o).unwrap();
        let def = alternatives(vec![a, b]);
        let ir = crate::grammar::lower::lower(&def).unwrap();
        let r = ReferenceRecognizer::new(&ir).unwrap();
        assert!(accepts(&r, b"12"));
        assert!(accepts(&r, br#"{"a":1}"#));
        assert!(accepts(&r, br#"{"c":1,"b":true,"a":2}"#));
        assert!(accepts(&r, br#"{"b":false,"a":2}"#));
        assert!(!accepts(&r, br#"{"b":false}"#));
        assert!(!accepts(&r, br#"{"a":1,"a":2}"#));
        assert!(!accepts(&r, br#"{"a":1,"c":2}"#));
    }

    #[test]
    fn tags_specs_parse_and_bad_ones_name_the_entry() {
        let v = serde_json::json!([
            {"begin": "<a>", "schema": {"type": "integer"}, "end": "</a>"},
            {"begin": "<b>", "regex": "x+", "name": "bees"},
            {"begin": "<c>", "json": true}
        ]);
        let r = tag_regions_from_json(&v).unwrap();
        assert_eq!(r.len(), 3);
        assert_eq!((r[0].begin.as_str(), r[0].end.as_str()), ("<a>", "</a>"));
        assert_eq!(r[1].name, "bees");
        assert!(matches!(r[2].source, GrammarSource::Json));
        for (bad, says) in [
            (serde_json::json!({}), "JSON array"),
            (serde_json::json!([]), "empty"),
            (
                serde_json::json!([{"schema": {}}]),
                "tags[0]: `begin` is missing",
            ),
            (serde_json::json!([{"begin": "x"}]), "exactly one"),
            (
                serde_json::json!([{"begin": "x", "regex": "a", "lark": "b"}]),
                "exactly one",
            ),
            (
                serde_json::json!([{"begin": "x", "regex": "a", "ned": ""}]),
                "unknown field `ned`",
            ),
            (
                serde_json::json!([{"begin": 3, "regex": "a"}]),
                "tags[0].begin: must be a string",
            ),
        ] {
            let e = tag_regions_from_json(&bad).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
    }

    #[test]
    fn after_parses_both_spellings_and_rejects_others() {
        assert_eq!("free".parse::<After>(), Ok(After::Free));
        assert_eq!("end".parse::<After>(), Ok(After::End));
        assert!("stop".parse::<After>().is_err());
    }
}
