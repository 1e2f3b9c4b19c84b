//! Random JSON instances for a schema, and random mutations of them — for tests.
//!
//! [`Generator::instance`] produces a document *meant* to be valid for a schema (it follows
//! `type`, `enum`/`const`, `properties`/`required`, `additionalProperties`,
//! `patternProperties`, `items`/`prefixItems`, bounds, lengths, `pattern` (by walking the
//! regex) and the compiled formats). It is best effort: callers check the result with the
//! `jsonschema` crate and keep only valid ones. [`Generator::mutate`] changes one random node
//! (wrong type, dropped or added member, out-of-range number, over-long or malformed string),
//! which usually makes a document invalid. [`Generator::layout`] writes a value with random
//! JSON whitespace (for the flexible policy). The generator is deterministic per seed (a
//! small xorshift RNG, no dependency).

use regex_syntax::hir::{Class, Hir, HirKind};
use serde_json::{Map, Number, Value};

pub struct Generator<'a> {
    root: &'a Value,
    state: u64,
}

const SAMPLE_CHARS: &[char] = &[
    'a', 'b', 'Z', '0', ' ', '"', '\\', '\n', '\t', 'é', '€', '😀', '/', '\u{1}',
];

impl<'a> Generator<'a> {
    pub fn new(root: &'a Value, seed: u64) -> Self {
        Generator {
            root,
            state: seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1,
        }
    }

    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            lo
        } else {
            lo + self.next_u64() % (hi - lo + 1)
        }
    }

    fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 0
    }

    fn pick<'v, T>(&mut self, items: &'v [T]) -> &'v T {
        &items[self.range(0, items.len() as u64 - 1) as usize]
    }

    fn resolve(&self, r: &str) -> Option<&'a Value> {
        let frag = r.strip_prefix('#')?;
        self.root.pointer(frag)
    }

    /// A document meant to be valid for `schema` (`None` when it gave up).
    pub fn instance(&mut self, schema: &Value) -> Option<Value> {
        self.generate(schema, 0)
    }

    fn generate(&mut self, s: &Value, depth: usize) -> Option<Value> {
        if depth > 12 {
            return None;
        }
        let m = match s {
            Value::Bool(true) => return Some(self.any(depth)),
            Value::Bool(false) => return None,
            Value::Object(m) => m,
            _ => return None,
        };
        if let Some(r) = m.get("$ref").and_then(Value::as_str) {
            let t = self.resolve(r)?;
            return self.generate(t, depth + 1);
        }
        if let Some(Value::Array(all)) = m.get("allOf") {
            // Best effort: a naive deep merge of the branches (and the siblings).
            let mut merged = m.clone();
            merged.remove("allOf");
            let mut acc = Value::Object(merged);
            for b in all {
                let b = match b.get("$ref").and_then(Value::as_str) {
                    Some(r) => self.resolve(r)?.clone(),
                    None => b.clone(),
                };
                naive_merge(&mut acc, &b);
            }
            return self.generate(&acc, depth + 1);
        }
        for kw in ["anyOf", "oneOf"] {
            if let Some(Value::Array(list)) = m.get(kw) {
                if list.is_empty() {
                    return None;
                }
                let b = self.pick(list).clone();
                let mut merged = m.clone();
                merged.remove(kw);
                if let Value::Object(bm) = &b {
                    for (k, v) in bm {
                        merged.insert(k.clone(), v.clone());
                    }
                }
                return self.generate(&Value::Object(merged), depth + 1);
            }
        }
        if let Some(c) = m.get("const") {
            return Some(c.clone());
        }
        if let Some(Value::Array(list)) = m.get("enum") {
            if list.is_empty() {
                return None;
            }
            return Some(self.pick(list).clone());
        }
        let types: Vec<&str> = match m.get("type") {
            Some(Value::String(t)) => vec![t.as_str()],
            Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
            _ => {
                if m.contains_key("properties") || m.contains_key("required") {
                    vec!["object"]
                } else if m.contains_key("items") || m.contains_key("prefixItems") {
                    vec!["array"]
                } else if m.contains_key("pattern")
                    || m.contains_key("minLength")
                    || m.contains_key("format")
                {
                    vec!["string"]
                } else if m.contains_key("minimum") || m.contains_key("maximum") {
                    vec!["number"]
                } else {
                    return Some(self.any(depth));
                }
            }
        };
        if types.is_empty() {
            return None;
        }
        match *self.pick(&types) {
            "null" => Some(Value::Null),
            "boolean" => Some(Value::Bool(self.coin())),
            "integer" => self.integer(m),
            "number" => self.number(m),
            "string" => self.string(m),
            "array" => self.array(m, depth),
            "object" => self.object(m, depth),
            _ => None,
        }
    }

    fn any(&mut self, depth: usize) -> Value {
        match self.range(0, if depth > 3 { 4 } else { 6 }) {
            0 => Value::Null,
            1 => Value::Bool(self.coin()),
            2 => Value::from(self.range(0, 2000) as i64 - 1000),
            3 => Value::String(self.text(0, 6)),
            4 => Value::from(self.range(0, 100_000) as f64 / 64.0 - 700.0),
            5 => Value::Array((0..self.range(0, 3)).map(|_| self.any(depth + 1)).collect()),
            _ => {
                let mut m = Map::new();
                for _ in 0..self.range(0, 3) {
                    let k = self.text(0, 5);
                    let v = self.any(depth + 1);
                    m.insert(k, v);
                }
                Value::Object(m)
            }
        }
    }

    fn text(&mut self, min: u64, max: u64) -> String {
        let n = self.range(min, max);
        (0..n).map(|_| *self.pick(SAMPLE_CHARS)).collect()
    }

    fn integer(&mut self, m: &Map<String, Value>) -> Option<Value> {
        let (lo, hi) = bounds(m);
        let lo = lo
            .map(|(x, inc)| if inc { x.ceil() } else { x.floor() + 1.0 })
            .unwrap_or(-1000.0)
            .max(-1e15);
        let hi = hi
            .map(|(x, inc)| if inc { x.floor() } else { x.ceil() - 1.0 })
            .unwrap_or(lo.max(0.0) + 1000.0)
            .min(1e15);
        if lo > hi {
            return None;
        }
        let span = (hi - lo) as u64;
        let mut x = lo as i64 + self.range(0, span.min(5000)) as i64;
        if self.coin() {
            x = if self.coin() { lo as i64 } else { hi as i64 };
        }
        if let Some(k) = m.get("multipleOf").and_then(Value::as_f64) {
            if k >= 1.0 && k.fract() == 0.0 {
                x = (x / k as i64) * k as i64;
            }
        }
        Some(Value::from(x))
    }

    fn number(&mut self, m: &Map<String, Value>) -> Option<Value> {
        let (lo, hi) = bounds(m);
        let l = lo.map(|x| x.0).unwrap_or(-1000.0);
        let h = hi.map(|x| x.0).unwrap_or(l.max(0.0) + 1000.0);
        if l > h {
            return None;
        }
        let digits = match m.get("multipleOf").and_then(Value::as_f64) {
            Some(k) if k < 1.0 => (-k.log10()).round() as i32,
            Some(_) => 0,
            None => self.range(0, 3) as i32,
        };
        let scale = 10f64.powi(digits);
        let t = self.range(0, 1000) as f64 / 1000.0;
        let x = ((l + (h - l) * t) * scale).round() / scale;
        let x = if self.range(0, 4) == 0 {
            if self.coin() { l } else { h }
        } else {
            x
        };
        if x.fract() == 0.0 && x.abs() < 1e15 && self.coin() {
            return Some(Value::from(x as i64));
        }
        Number::from_f64(x).map(Value::Number)
    }

    fn string(&mut self, m: &Map<String, Value>) -> Option<Value> {
        let min = m.get("minLength").and_then(Value::as_u64).unwrap_or(0);
        let max = m
            .get("maxLength")
            .and_then(Value::as_u64)
            .unwrap_or(min + 8)
            .min(min + 8);
        if let Some(p) = m.get("pattern").and_then(Value::as_str) {
            let t = super::lexical::translate_ecma(p).ok()?;
            let h = regex_syntax::ParserBuilder::new().build().parse(&t).ok()?;
            let mut out = String::new();
            self.walk(&h, &mut out, 0);
            return Some(Value::String(out));
        }
        if let Some(f) = m.get("format").and_then(Value::as_str) {
            let samples: &[&str] = match f {
                "date" => &["2024-02-28", "1999-12-31", "2000-01-01"],
                "time" => &["12:00:00Z", "23:59:59.123+05:30", "00:00:00-08:00"],
                "date-time" => &["2024-02-28T12:00:00Z", "1999-12-31T23:59:59.5+01:00"],
                "uuid" => &[
                    "123e4567-e89b-12d3-a456-426614174000",
                    "00000000-0000-0000-0000-000000000000",
                ],
                "ipv4" => &["192.168.0.1", "8.8.8.8", "255.255.255.255"],
                "ipv6" => &["::1", "2001:db8::1", "fe80:0:0:0:0:0:0:1"],
                "email" => &["a@example.com", "first.last+tag@sub.example.org"],
                "uri" => &[
                    "https://example.com/a?b=c#d",
                    "urn:isbn:0451450523",
                    "mailto:a@b.c",
                ],
                "hostname" => &["example.com", "a-b.c"],
                _ => &[],
            };
            if !samples.is_empty() {
                return Some(Value::String(self.pick(samples).to_string()));
            }
        }
        Some(Value::String(self.text(min, max)))
    }

    /// A random string matching `h` (repetitions kept short).
    pub fn sample(&mut self, h: &Hir) -> String {
        let mut out = String::new();
        self.walk(h, &mut out, 0);
        out
    }

    fn walk(&mut self, h: &Hir, out: &mut String, depth: usize) {
        if depth > 50 {
            return;
        }
        match h.kind() {
            HirKind::Empty | HirKind::Look(_) => {}
            HirKind::Literal(l) => out.push_str(&String::from_utf8_lossy(&l.0)),
            HirKind::Class(Class::Unicode(c)) => {
                let ranges = c.ranges();
                if ranges.is_empty() {
                    return;
                }
                let r = self.pick(ranges);
                let (a, b) = (
                    r.start() as u32,
                    (r.end() as u32).min(r.start() as u32 + 200),
                );
                let mut x = self.range(a as u64, b as u64) as u32;
                while char::from_u32(x).is_none() {
                    x -= 1;
                }
                out.push(char::from_u32(x).unwrap());
            }
            HirKind::Class(Class::Bytes(c)) => {
                if let Some(r) = c.ranges().first() {
                    out.push(r.start() as char);
                }
            }
            HirKind::Repetition(r) => {
                let hi = r.max.unwrap_or(r.min + 3).min(r.min + 3);
                for _ in 0..self.range(r.min as u64, hi as u64) {
                    self.walk(&r.sub, out, depth + 1);
                }
            }
            HirKind::Capture(c) => self.walk(&c.sub, out, depth + 1),
            HirKind::Concat(v) => {
                for p in v {
                    self.walk(p, out, depth + 1);
                }
            }
            HirKind::Alternation(v) => {
                let p = self.pick(v).clone();
                self.walk(&p, out, depth + 1);
            }
        }
    }

    fn array(&mut self, m: &Map<String, Value>, depth: usize) -> Option<Value> {
        let min = m.get("minItems").and_then(Value::as_u64).unwrap_or(0);
        let max = m
            .get("maxItems")
            .and_then(Value::as_u64)
            .unwrap_or(min + 3)
            .min(min + 3);
        let (prefix, rest): (Vec<Value>, Value) = match (m.get("prefixItems"), m.get("items")) {
            (Some(Value::Array(p)), items) => {
                (p.clone(), items.cloned().unwrap_or(Value::Bool(true)))
            }
            (_, Some(Value::Array(p))) => (
                p.clone(),
                m.get("additionalItems")
                    .cloned()
                    .unwrap_or(Value::Bool(true)),
            ),
            (_, Some(items)) => (Vec::new(), items.clone()),
            _ => (Vec::new(), Value::Bool(true)),
        };
        let mut n = self.range(min, max);
        if rest == Value::Bool(false) {
            n = n.min(prefix.len() as u64);
        }
        let mut out = Vec::new();
        for i in 0..n as usize {
            let s = prefix.get(i).unwrap_or(&rest).clone();
            out.push(self.generate(&s, depth + 1)?);
        }
        if m.get("uniqueItems") == Some(&Value::Bool(true)) {
            let mut seen = Vec::new();
            out.retain(|v| {
                if seen.contains(v) {
                    false
                } else {
                    seen.push(v.clone());
                    true
                }
            });
        }
        Some(Value::Array(out))
    }

    fn object(&mut self, m: &Map<String, Value>, depth: usize) -> Option<Value> {
        let empty = Map::new();
        let props = m
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let required: Vec<&str> = m
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let mut out = Map::new();
        for (k, s) in props {
            if required.contains(&k.as_str()) || self.coin() {
                out.insert(k.clone(), self.generate(s, depth + 1)?);
            }
        }
        let extra_schema = m
            .get("additionalProperties")
            .cloned()
            .unwrap_or(Value::Bool(true));
        for r in &required {
            if !out.contains_key(*r) {
                out.insert(r.to_string(), self.generate(&extra_schema, depth + 1)?);
            }
        }
        if let Some(Value::Object(pp)) = m.get("patternProperties") {
            for (p, s) in pp {
                if self.coin() {
                    let t = super::lexical::translate_ecma(p).ok()?;
                    let h = regex_syntax::ParserBuilder::new().build().parse(&t).ok()?;
                    let mut key = String::new();
                    self.walk(&h, &mut key, 0);
                    if !props.contains_key(&key) {
                        out.insert(key, self.generate(s, depth + 1)?);
                    }
                }
            }
        } else if extra_schema != Value::Bool(false) && self.range(0, 2) == 0 {
            let key = format!("x{}", self.text(0, 3));
            if !props.contains_key(&key) {
                out.insert(key, self.generate(&extra_schema, depth + 1)?);
            }
        }
        Some(Value::Object(out))
    }

    /// Change one random node of `v` (usually making it invalid).
    pub fn mutate(&mut self, v: &Value) -> Value {
        let mut v = v.clone();
        let mut count = 0usize;
        count_nodes(&v, &mut count);
        let target = self.range(0, count as u64 - 1) as usize;
        let mut i = 0usize;
        self.mutate_at(&mut v, target, &mut i);
        v
    }

    fn mutate_at(&mut self, v: &mut Value, target: usize, i: &mut usize) -> bool {
        if *i == target {
            *v = match (self.range(0, 5), &*v) {
                (0, Value::Object(m)) if !m.is_empty() => {
                    let mut m = m.clone();
                    let k = m
                        .keys()
                        .nth(self.range(0, m.len() as u64 - 1) as usize)
                        .unwrap()
                        .clone();
                    m.remove(&k);
                    Value::Object(m)
                }
                (1, Value::Object(m)) => {
                    let mut m = m.clone();
                    m.insert("unexpected_extra".into(), Value::from(1));
                    Value::Object(m)
                }
                (_, Value::Number(n)) if self.coin() => {
                    let x = n.as_f64().unwrap_or(0.0);
                    Value::from(if self.coin() { x + 1e9 } else { x - 1e9 })
                }
                (_, Value::String(s)) if self.coin() => {
                    if self.coin() {
                        Value::String(format!("{s}{}", "y".repeat(300)))
                    } else {
                        Value::String(format!("@{s}!"))
                    }
                }
                (_, Value::Array(a)) if self.coin() => {
                    let mut a = a.clone();
                    if a.is_empty() || self.coin() {
                        a.push(Value::String("extra item".into()));
                    } else {
                        a.pop();
                    }
                    Value::Array(a)
                }
                _ => match self.range(0, 5) {
                    0 => Value::Null,
                    1 => Value::Bool(true),
                    2 => Value::from(7),
                    3 => Value::from(2.5),
                    4 => Value::String("s".into()),
                    _ => Value::Array(vec![]),
                },
            };
            return true;
        }
        *i += 1;
        match v {
            Value::Object(m) => {
                for (_, c) in m.iter_mut() {
                    if self.mutate_at(c, target, i) {
                        return true;
                    }
                }
            }
            Value::Array(a) => {
                for c in a.iter_mut() {
                    if self.mutate_at(c, target, i) {
                        return true;
                    }
                }
            }
            _ => {}
        }
        false
    }

    /// Serialize with random JSON whitespace (each run at most `max_ws` bytes).
    pub fn layout(&mut self, v: &Value, max_ws: u32) -> String {
        let mut out = String::new();
        self.ws(&mut out, max_ws);
        self.layout_into(v, max_ws, &mut out);
        self.ws(&mut out, max_ws);
        out
    }

    fn ws(&mut self, out: &mut String, max_ws: u32) {
        if self.range(0, 2) == 0 {
            for _ in 0..self.range(1, max_ws as u64) {
                out.push(*self.pick(&[' ', '\n', '\t', '\r']));
            }
        }
    }

    fn layout_into(&mut self, v: &Value, max_ws: u32, out: &mut String) {
        match v {
            Value::Array(a) => {
                out.push('[');
                self.ws(out, max_ws);
                for (i, x) in a.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        self.ws(out, max_ws);
                    }
                    self.layout_into(x, max_ws, out);
                    self.ws(out, max_ws);
                }
                out.push(']');
            }
            Value::Object(m) => {
                out.push('{');
                self.ws(out, max_ws);
                for (i, (k, x)) in m.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                        self.ws(out, max_ws);
                    }
                    out.push_str(&Value::String(k.clone()).to_string());
                    self.ws(out, max_ws);
                    out.push(':');
                    self.ws(out, max_ws);
                    self.layout_into(x, max_ws, out);
                    self.ws(out, max_ws);
                }
                out.push('}');
            }
            x => out.push_str(&x.to_string()),
        }
    }
}

fn naive_merge(acc: &mut Value, b: &Value) {
    let (Value::Object(a), Value::Object(b)) = (acc, b) else {
        return;
    };
    for (k, v) in b {
        match (a.get_mut(k), v) {
            (Some(Value::Array(x)), Value::Array(y)) if k == "required" => {
                for r in y {
                    if !x.contains(r) {
                        x.push(r.clone());
                    }
                }
            }
            (Some(x @ Value::Object(_)), Value::Object(_)) if k == "properties" => {
                let Value::Object(xm) = x else { unreachable!() };
                for (pk, pv) in v.as_object().unwrap() {
                    match xm.get_mut(pk) {
                        Some(existing) => naive_merge(existing, pv),
                        None => {
                            xm.insert(pk.clone(), pv.clone());
                        }
                    }
                }
            }
            _ => {
                a.insert(k.clone(), v.clone());
            }
        }
    }
}

fn count_nodes(v: &Value, n: &mut usize) {
    *n += 1;
    match v {
        Value::Object(m) => m.values().for_each(|c| count_nodes(c, n)),
        Value::Array(a) => a.iter().for_each(|c| count_nodes(c, n)),
        _ => {}
    }
}

type Bound = (f64, bool);

fn bounds(m: &Map<String, Value>) -> (Option<Bound>, Option<Bound>) {
    let flag = |k: &str| m.get(k).and_then(Value::as_bool).unwrap_or(false);
    let mut lo = m
        .get("minimum")
        .and_then(Value::as_f64)
        .map(|x| (x, !flag("exclusiveMinimum")));
    let mut hi = m
        .get("maximum")
        .and_then(Value::as_f64)
        .map(|x| (x, !flag("exclusiveMaximum")));
    if let Some(x) = m.get("exclusiveMinimum").and_then(Value::as_f64) {
        lo = Some((x, false));
    }
    if let Some(x) = m.get("exclusiveMaximum").and_then(Value::as_f64) {
        hi = Some((x, false));
    }
    (lo, hi)
}
