//! `$ref`: resolving local references (JSON pointers, percent-encoded, against the root's
//! `$id`; plain-name fragments as `$anchor` or draft-6 `$id: "#name"`), following chains of
//! bare references (a cycle is an error), and compiling each target once per depth as its own
//! rule, from a work list (so long reference chains use no stack and recursion is rule
//! recursion).

use serde_json::Value;

use super::keywords::STRUCTURE;
use super::{Compiler, is_keyword, join_ptr};
use crate::grammar::expr::{Expr, RuleId, RuleKind};
use crate::grammar::{ErrorKind, GrammarError};

impl<'a> Compiler<'a> {
    /// Resolve a `$ref` found at `ptr` to (canonical pointer, target).
    ///
    /// The reference is resolved against the base URI in force at `ptr` (the root's `$id`,
    /// changed by every embedded `$id` on the way down, as the specification says), then
    /// looked up among the schema's own resources: a JSON pointer fragment is taken inside
    /// the resource the URI names, a plain-name fragment is the `$anchor` (or
    /// `$dynamicAnchor`, or draft-6 `$id: "#name"`) defined in that resource. References to
    /// anything outside the schema are `Unsupported`. When spec resolution finds nothing, the
    /// fragment is tried against the root as before (a schema the validator could not load).
    pub(crate) fn resolve(
        &self,
        reference: &str,
        ptr: &str,
    ) -> Result<(String, &'a Value), GrammarError> {
        let index = self.uris.get_or_init(|| UriIndex::build(self.root));
        // Without embedded resources (every identifier names the root), a `#/pointer` is the
        // root's pointer wherever it is written: no base URI to work out (a walk from the
        // root along `ptr`, per reference). Not found: the general path says why.
        if let Some(fragment) = reference.strip_prefix('#') {
            if (fragment.is_empty() || fragment.starts_with('/'))
                && index.ids.values().all(|p| p.is_empty())
            {
                let fragment = percent_decode(fragment);
                if let Some(v) = self.root.pointer(&fragment) {
                    return Ok((fragment, v));
                }
            }
        }
        let at = join_ptr(ptr, "$ref");
        let base = base_at(self.root, ptr);
        let absolute = join_uri(&base, reference);
        let (uri, fragment) = match absolute.split_once('#') {
            Some((u, f)) => (u.to_string(), percent_decode(f)),
            None => (absolute.clone(), String::new()),
        };
        if let Some(resource) = index.ids.get(&uri) {
            if fragment.is_empty() || fragment.starts_with('/') {
                let target = format!("{resource}{fragment}");
                if let Some(v) = self.root.pointer(&target) {
                    return Ok((target, v));
                }
            } else if let Some(target) = index.anchors.get(&format!("{uri}#{fragment}")) {
                let v = self.root.pointer(target).expect("indexed pointer exists");
                return Ok((target.clone(), v));
            }
        }
        // Not found by URI: the old reading (fragment against the root; the root's `$id`
        // stripped), for schemas whose `$id`s a validator would not accept either.
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
                format!(
                    "only references within the schema (`#...`, or an embedded `$id`) are supported, not `{reference}`"
                ),
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

    pub(super) fn ref_rule(
        &mut self,
        reference: &str,
        ptr: &str,
        d: u32,
    ) -> Result<Expr, GrammarError> {
        let (target, _) = self.resolve_chain(reference, ptr)?;
        if let Some(id) = self.ref_rule_of(&target, d) {
            return Ok(Expr::Ref(id));
        }
        let name = target.rsplit('/').next().unwrap_or("ref").to_string();
        let id = self.add_rule(
            if name.is_empty() { "root-ref" } else { &name },
            Expr::Empty,
            RuleKind::Syntactic,
        )?;
        self.refs.entry(target.clone()).or_default().push((d, id));
        self.pending.push((id, target, d));
        Ok(Expr::Ref(id))
    }

    /// A bare `$ref` to the subschema at `ptr` in the document, for a rewrite that would
    /// otherwise copy `s` (equal to it) into a schema of its own: the copy was compiled
    /// again at every use, the reference is one shared rule. Only for schemas with
    /// structure (small ones cost less copied than as a rule of their own), and only where
    /// `#ptr` means the same everywhere (no embedded `$id` resources).
    pub(super) fn ref_to(&self, ptr: &str, s: &Value) -> Option<Value> {
        let m = s.as_object()?;
        if !STRUCTURE.iter().any(|k| m.contains_key(*k)) {
            return None;
        }
        let index = self.uris.get_or_init(|| UriIndex::build(self.root));
        if !index.all_at_root() {
            return None;
        }
        let there = self.root.pointer(ptr)?;
        if !(std::ptr::eq(there, s) || there == s) {
            return None;
        }
        Some(Value::Object(
            [(
                "$ref".to_string(),
                Value::String(format!("#{}", ptr.replace('%', "%25"))),
            )]
            .into_iter()
            .collect(),
        ))
    }

    /// The rule made of the schema at `ptr` for depth `d`, if one was.
    pub(super) fn ref_rule_of(&self, ptr: &str, d: u32) -> Option<RuleId> {
        let rules = self.refs.get(ptr)?;
        rules.iter().find(|(e, _)| *e == d).map(|(_, id)| *id)
    }

    pub(super) fn drain_refs(&mut self) -> Result<(), GrammarError> {
        while let Some((id, target, d)) = self.pending.pop() {
            let v = self.root.pointer(&target).expect("resolved pointer exists");
            let expr = self.value_uncached(v, &target, d)?;
            self.rules[id.0 as usize].expr = expr;
        }
        Ok(())
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

/// The schema's resources by absolute URI (without fragment) and its anchors by
/// `URI#name`, each mapped to its JSON pointer in the root document.
#[derive(Debug, Default)]
pub(crate) struct UriIndex {
    ids: std::collections::HashMap<String, String>,
    anchors: std::collections::HashMap<String, String>,
    /// Some `$ref` may name the document's root: `#`, an empty reference, or a URI with an
    /// empty fragment (the root's `$id`). [`compile`](super::compile) then compiles the root
    /// as that reference's rule; a reference this misses only costs the root a second copy,
    /// and a false positive only a rule of indirection.
    pub(crate) root_referenced: bool,
}

/// Keywords whose values are data, not schemas: never searched for `$id` or anchors.
/// Keywords whose value is a schema or an array of schemas (every draft).
const SCHEMA_KEYWORDS: &[&str] = &[
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "items",
    "prefixItems",
    "additionalItems",
    "contains",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "contentSchema",
];

/// Keywords whose value is an object of schemas.
const SCHEMA_MAPS: &[&str] = &[
    "properties",
    "patternProperties",
    "$defs",
    "definitions",
    "dependentSchemas",
    "dependencies",
];

/// The `$id` (or draft-4 `id`) of a schema object, when it is a string.
fn id_of(m: &serde_json::Map<String, Value>) -> Option<&str> {
    m.get("$id")
        .and_then(Value::as_str)
        .or_else(|| m.get("id").and_then(Value::as_str))
}

/// The base URI after entering schema object `m` whose enclosing base is `base`.
fn enter(base: &str, m: &serde_json::Map<String, Value>) -> String {
    match id_of(m) {
        Some(id) if !id.starts_with('#') => strip_fragment(&join_uri(base, id)).to_string(),
        _ => base.to_string(),
    }
}

/// One step of a JSON pointer kept as a parent chain ([`UriIndex::build`]).
enum PathToken<'v> {
    Root,
    Key(&'v str),
    Index(usize),
}

fn strip_fragment(u: &str) -> &str {
    u.split_once('#').map_or(u, |(a, _)| a)
}

impl UriIndex {
    /// Whether every identifier names the root (no embedded resources): then a
    /// `#/pointer` means the same schema wherever it is written.
    pub(crate) fn all_at_root(&self) -> bool {
        self.ids.values().all(|p| p.is_empty())
    }

    pub(crate) fn build(root: &Value) -> UriIndex {
        use std::rc::Rc;
        let mut ix = UriIndex::default();
        ix.ids.insert(String::new(), String::new());
        // Each visited node's JSON pointer is kept as its parent's entry and one token, and
        // written out only for the nodes that need it (an `$id` or an anchor); the base URI is
        // shared between a node and its children. (A pointer string and a base string per
        // node were most of indexing a big schema, which nearly never has either.)
        let mut path: Vec<(u32, PathToken)> = vec![(u32::MAX, PathToken::Root)];
        let pointer = |path: &[(u32, PathToken)], mut at: u32| -> String {
            let mut tokens = Vec::new();
            while at != 0 {
                let (parent, token) = &path[at as usize];
                tokens.push(token);
                at = *parent;
            }
            let mut p = String::new();
            for token in tokens.into_iter().rev() {
                p = match token {
                    PathToken::Root => p,
                    PathToken::Key(k) => join_ptr(&p, k),
                    PathToken::Index(i) => join_ptr(&p, &i.to_string()),
                };
            }
            p
        };
        let root_base: Rc<str> = Rc::from("");
        let mut stack: Vec<(u32, &Value, Rc<str>)> = vec![(0, root, root_base)];
        let mut visited = 0usize;
        while let Some((at, v, base)) = stack.pop() {
            visited += 1;
            if visited > 200_000 {
                break;
            }
            match v {
                Value::Object(m) => {
                    // `$ref`, `$id`, `id` and the anchors: most schema objects have none of
                    // them, which one pass over the keys tells (five hashed lookups and a copy
                    // of the base URI per object were 1 % of compiling the slowest schemas).
                    let identified = m.keys().any(|k| k.starts_with('$') || k == "id");
                    let here: Rc<str> = if !identified {
                        base
                    } else {
                        if let Some(Value::String(r)) = m.get("$ref") {
                            ix.root_referenced |= r.is_empty() || r.ends_with('#');
                        }
                        let entered = enter(&base, m);
                        let here: Rc<str> = if *entered == *base {
                            base
                        } else {
                            let p = pointer(&path, at);
                            ix.ids.entry(entered.clone()).or_insert(p);
                            Rc::from(entered)
                        };
                        if let Some(name) = id_of(m).and_then(|id| id.strip_prefix('#')) {
                            if !name.is_empty() && !name.starts_with('/') {
                                let p = pointer(&path, at);
                                ix.anchors.entry(format!("{here}#{name}")).or_insert(p);
                            }
                        }
                        for k in ["$anchor", "$dynamicAnchor"] {
                            if let Some(name) = m.get(k).and_then(Value::as_str) {
                                let p = pointer(&path, at);
                                ix.anchors.entry(format!("{here}#{name}")).or_insert(p);
                            }
                        }
                        here
                    };
                    // Only where the specification puts subschemas: an `$id` inside an
                    // unknown keyword (or `enum`, `const`, `default`, ...) is data, not an
                    // identifier.
                    for (k, c) in m {
                        if SCHEMA_MAPS.contains(&k.as_str()) {
                            if let Value::Object(subs) = c {
                                path.push((at, PathToken::Key(k)));
                                let map_at = (path.len() - 1) as u32;
                                for (name, sub) in subs {
                                    path.push((map_at, PathToken::Key(name)));
                                    stack.push(((path.len() - 1) as u32, sub, here.clone()));
                                }
                            }
                        } else if SCHEMA_KEYWORDS.contains(&k.as_str()) {
                            path.push((at, PathToken::Key(k)));
                            stack.push(((path.len() - 1) as u32, c, here.clone()));
                        }
                    }
                }
                Value::Array(a) => {
                    for (i, c) in a.iter().enumerate() {
                        path.push((at, PathToken::Index(i)));
                        stack.push(((path.len() - 1) as u32, c, base.clone()));
                    }
                }
                _ => {}
            }
        }
        ix
    }
}

/// The base URI in force at `ptr` (every `$id` from the root down to it, inclusive), as far
/// as `ptr` is a pointer into the root.
fn base_at(root: &Value, ptr: &str) -> String {
    let mut v = root;
    let mut base = match v {
        Value::Object(m) => enter("", m),
        _ => String::new(),
    };
    for token in ptr.split('/').skip(1) {
        let token = token.replace("~1", "/").replace("~0", "~");
        let next = match v {
            Value::Object(m) => m.get(&token),
            Value::Array(a) => token.parse::<usize>().ok().and_then(|i| a.get(i)),
            _ => None,
        };
        let Some(n) = next else { break };
        v = n;
        if let Value::Object(m) = v {
            base = enter(&base, m);
        }
    }
    base
}

/// Resolve URI reference `r` against `base` (RFC 3986 section 5.2, without dot-segment
/// removal beyond `./`): absolute URIs stand, `#frag` keeps the base, `//auth`, `/path` and
/// relative paths replace the base's authority, path or last segment.
pub(crate) fn join_uri(base: &str, r: &str) -> String {
    let has_scheme = |s: &str| {
        let mut cs = s.chars();
        cs.next().is_some_and(|c| c.is_ascii_alphabetic())
            && s.find(':').is_some_and(|i| {
                s[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            })
    };
    if has_scheme(r) {
        return r.to_string();
    }
    let base = strip_fragment(base);
    if r.is_empty() {
        return base.to_string();
    }
    if r.starts_with('#') {
        return format!("{base}{r}");
    }
    let scheme_end = if has_scheme(base) {
        base.find(':').map(|i| i + 1)
    } else {
        None
    };
    let scheme = &base[..scheme_end.unwrap_or(0)];
    if r.starts_with("//") {
        return format!("{scheme}{r}");
    }
    let rest = &base[scheme.len()..];
    let (authority, path) = match rest.strip_prefix("//") {
        Some(a) => {
            let end = a.find('/').unwrap_or(a.len());
            (&rest[..end + 2], &a[end..])
        }
        None => ("", rest),
    };
    if r.starts_with('/') {
        return format!("{scheme}{authority}{}", remove_dot_segments(r));
    }
    let dir = match path.rfind('/') {
        Some(i) => &path[..=i],
        None if !authority.is_empty() => "/",
        None => "",
    };
    format!(
        "{scheme}{authority}{}",
        remove_dot_segments(&format!("{dir}{r}"))
    )
}

/// RFC 3986 section 5.2.4 on a path (its query and fragment kept as they are).
fn remove_dot_segments(path: &str) -> String {
    let (path, tail) = match path.find(['?', '#']) {
        Some(i) => path.split_at(i),
        None => (path, ""),
    };
    let absolute = path.starts_with('/');
    let mut out: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    for (i, seg) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *seg {
            "." => {
                if last {
                    out.push("");
                }
            }
            ".." => {
                if out.len() > usize::from(absolute) {
                    out.pop();
                }
                if last {
                    out.push("");
                }
            }
            s => out.push(s),
        }
    }
    format!("{}{tail}", out.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Identifiers and anchors map to the JSON pointers of the subschemas that carry them,
    /// through maps, keywords and arrays, escaped as pointers are (`~1` for `/`); a base
    /// changes only below an `$id`, and `$id` inside data (`const`) is not an identifier.
    #[test]
    fn the_uri_index_finds_identifiers_and_anchors_where_they_are() {
        let doc = serde_json::json!({
            "$id": "https://example.com/root.json",
            "definitions": {
                "a/b": {"$id": "a.json", "properties": {"x": {"$anchor": "ex"}}},
                "c": {"allOf": [{"type": "object"}, {"$id": "https://other.org/c.json", "$anchor": "top"}]}
            },
            "properties": {"k": {"const": {"$id": "data.json"}, "items": {"$id": "#frag"}}}
        });
        let ix = UriIndex::build(&doc);
        let id = |u: &str| ix.ids.get(u).map(String::as_str);
        let anchor = |u: &str| ix.anchors.get(u).map(String::as_str);
        assert_eq!(id(""), Some(""));
        assert_eq!(id("https://example.com/root.json"), Some(""));
        assert_eq!(id("https://example.com/a.json"), Some("/definitions/a~1b"));
        assert_eq!(
            id("https://other.org/c.json"),
            Some("/definitions/c/allOf/1")
        );
        assert_eq!(
            anchor("https://example.com/a.json#ex"),
            Some("/definitions/a~1b/properties/x")
        );
        assert_eq!(
            anchor("https://other.org/c.json#top"),
            Some("/definitions/c/allOf/1")
        );
        assert_eq!(
            anchor("https://example.com/root.json#frag"),
            Some("/properties/k/items")
        );
        assert_eq!(id("https://example.com/data.json"), None);
        assert_eq!(ix.ids.len(), 4);
        assert_eq!(ix.anchors.len(), 3);
    }
}
