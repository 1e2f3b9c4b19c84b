//! Steps 3 to 5 of lowering: the syntactic rules' bodies become BNF productions. Regular
//! pieces become terminals (deduplicated by their printed HIR), nullable pieces optional
//! symbols, and repetitions of non-regular things helper nonterminals.

use super::super::dfa::dfa_fits;
use super::hir::{expr_to_hir, hir_size, is_fail, normalize, shared_hir};
use super::promotion::may_blow_up;
use super::{
    LINEAR_REPEAT, LITERAL_SET_MIN, LowerOptions, MAX_INLINE_HIR, MAX_PRODUCTIONS,
    PROMOTION_DFA_LIMIT, PROMOTION_STATE_ESTIMATE,
};
use crate::grammar::GrammarError;
use crate::grammar::expr::{Expr, GrammarDef, RuleId, RuleKind};
use crate::grammar::hir_key::{constrained_hash_of, expr_hash};
use crate::grammar::ir::{Constraints, NonterminalId, Production, Symbol, Terminal, TerminalId};
use crate::grammar::regex_hir::RegexHir;
use crate::hash::WordHashMap;
use regex_syntax::hir::{Hir, HirKind};

/// What [`Builder::lower_item`] found for an item: `Some(symbol)` when it was lowered as one
/// regular piece (`Some(None)`: ε only), `None` when it is lowered structurally.
type PieceMemo = Option<Option<Symbol>>;

/// The IR under construction (terminals, nonterminals, productions) and the caches that
/// deduplicate its symbols.
pub(super) struct Builder<'a> {
    def: &'a GrammarDef,
    opts: &'a LowerOptions,
    rule_hir: &'a [Option<RegexHir>],
    promoted: &'a [bool],
    pub(super) terminals: Vec<Terminal>,
    /// Hash of a terminal's HIR and constraints ([`constrained_hash`]) -> the terminals with
    /// it (deduplication; equal terminals compared in full).
    terminal_index: WordHashMap<u64, Vec<TerminalId>>,
    /// The terminal of a HIR already interned, by the shared HIR's address (the `RegexHir` is
    /// kept here, so the address is not reused): a shared leaf (a key set, a format, a
    /// promoted rule's expression) is interned again at every use, and comparing it again
    /// each time walked kilobytes of HIR per member state.
    interned_at: WordHashMap<*const (), (RegexHir, TerminalId)>,
    pub(super) nonterminals: Vec<String>,
    pub(super) productions: Vec<Production>,
    pub(super) rule_nt: Vec<Option<NonterminalId>>,
    opt_cache: WordHashMap<Symbol, Symbol>,
    star_cache: WordHashMap<Symbol, NonterminalId>,
    pair_cache: WordHashMap<Symbol, Symbol>,
    fail_nt: Option<NonterminalId>,
    piece_counter: Vec<u32>,
    /// A promoted rule's symbol where it is referenced (`Some(None)`: ε only), once known.
    /// Without it every reference cloned, normalised, hashed and compared the rule's HIR.
    ref_piece: Vec<Option<Option<Symbol>>>,
    /// An item already looked at, by [`expr_hash`] (compared in full): `Some(symbol)` when
    /// it was lowered as one regular piece (`Some(None)`: ε only), `None` when it is lowered
    /// structurally. A JSON object's member chain repeats the same items
    /// (`"," ws`, `ws ":" ws`, a member) in hundreds of alternatives; the result of
    /// [`Builder::lower_item`] on a regular item depends only on the item, so each distinct
    /// one is turned into HIR and interned once.
    piece_memo: WordHashMap<u64, Vec<(&'a Expr, PieceMemo)>>,
    /// An [`RuleKind::Inline`] rule's body as symbols, once lowered (spliced into every
    /// sequence that refers to it), and the rules being lowered so (a self reference falls
    /// back to the rule's nonterminal).
    inline_syms: Vec<Option<Vec<Symbol>>>,
    /// Per rule: an [`RuleKind::Inline`] rule that is not promoted (what [`Builder::inline_symbols`]
    /// splices), one byte each: asking `def.rules[r].kind` for every reference of every
    /// production was a cache miss each (a rule is a hundred bytes, a big schema has tens of
    /// thousands, and a member state refers to a different one in each alternative).
    inline: Vec<bool>,
    inlining: Vec<usize>,
}

impl<'a> Builder<'a> {
    /// A builder with no symbols yet, over promotion's results for `def`.
    pub(super) fn new(
        def: &'a GrammarDef,
        opts: &'a LowerOptions,
        rule_hir: &'a [Option<RegexHir>],
        promoted: &'a [bool],
    ) -> Self {
        let n = def.rules.len();
        Builder {
            def,
            opts,
            rule_hir,
            promoted,
            terminals: Vec::new(),
            terminal_index: WordHashMap::default(),
            interned_at: WordHashMap::default(),
            nonterminals: Vec::new(),
            productions: Vec::new(),
            rule_nt: vec![None; n],
            opt_cache: WordHashMap::default(),
            star_cache: WordHashMap::default(),
            pair_cache: WordHashMap::default(),
            fail_nt: None,
            piece_counter: vec![0; n],
            ref_piece: vec![None; n],
            piece_memo: WordHashMap::default(),
            inline_syms: vec![None; def.rules.len()],
            inline: def
                .rules
                .iter()
                .zip(promoted)
                .map(|(rule, &p)| rule.kind == RuleKind::Inline && !p)
                .collect(),
            inlining: Vec::new(),
        }
    }

    pub(super) fn new_nt(&mut self, name: String) -> NonterminalId {
        let id = NonterminalId(self.nonterminals.len() as u32);
        self.nonterminals.push(name);
        id
    }

    fn helper_name(&mut self, rule: usize, what: &str) -> String {
        self.piece_counter[rule] += 1;
        format!(
            "{}#{what}{}",
            self.def.rules[rule].name, self.piece_counter[rule]
        )
    }

    fn intern(&mut self, hir: RegexHir, name: &str) -> TerminalId {
        let at = hir.as_ptr();
        if let Some(&(_, t)) = self.interned_at.get(&at) {
            return t;
        }
        let empty = Constraints::default();
        let hh = hir.facts().hash;
        let key = constrained_hash_of(hh, &empty);
        if let Some(t) = self.find_terminal(key, &hir, &empty) {
            self.interned_at.insert(at, (hir, t));
            return t;
        }
        self.interned_at
            .insert(at, (hir.clone(), TerminalId(self.terminals.len() as u32)));
        let id = TerminalId(self.terminals.len() as u32);
        // (A key set is never one string: its HIR stays unbuilt.)
        let literal = match hir.is_key_set() {
            true => None,
            false => match hir.kind() {
                HirKind::Literal(l) => Some(l.0.to_vec()),
                _ => None,
            },
        };
        let name = match &literal {
            Some(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
            None => name.to_string(),
        };
        let terminal = Terminal::new(name, hir, literal);
        terminal.hir_hash.get_or_init(|| hh);
        self.terminals.push(terminal);
        self.terminal_index.entry(key).or_default().push(id);
        id
    }

    /// The terminal with exactly this HIR and these constraints, if interned.
    fn find_terminal(
        &self,
        key: u64,
        hir: &RegexHir,
        constraints: &Constraints,
    ) -> Option<TerminalId> {
        self.terminal_index.get(&key)?.iter().copied().find(|t| {
            let t = &self.terminals[t.0 as usize];
            t.hir == *hir && t.constraints == *constraints
        })
    }

    /// A terminal with constraints (the front end has checked that its language holds a
    /// non-empty string and no `ε`), deduplicated like [`Builder::intern`].
    fn intern_constrained(
        &mut self,
        hir: RegexHir,
        constraints: Constraints,
        name: &str,
    ) -> TerminalId {
        if constraints.is_empty() {
            return self.intern(hir, name);
        }
        let hh = hir.facts().hash;
        let key = constrained_hash_of(hh, &constraints);
        if let Some(t) = self.find_terminal(key, &hir, &constraints) {
            return t;
        }
        let id = TerminalId(self.terminals.len() as u32);
        self.terminals.push(Terminal {
            name: name.to_string(),
            hir,
            literal: None,
            constraints,
            hir_hash: hh.into(),
        });
        self.terminal_index.entry(key).or_default().push(id);
        id
    }

    /// `sym?` as a symbol (a cached helper nonterminal `sym | ε`).
    pub(super) fn nt_opt_of(&mut self, sym: Symbol) -> Symbol {
        if let Some(&s) = self.opt_cache.get(&sym) {
            return s;
        }
        let name = match sym {
            Symbol::Terminal(t) => format!("{}?", self.terminals[t.0 as usize].name),
            Symbol::Nonterminal(n) => format!("{}?", self.nonterminals[n.0 as usize]),
        };
        let nt = self.new_nt(name);
        self.productions.push(Production {
            lhs: nt,
            rhs: vec![sym],
        });
        self.productions.push(Production {
            lhs: nt,
            rhs: vec![],
        });
        let s = Symbol::Nonterminal(nt);
        self.opt_cache.insert(sym, s);
        s
    }

    /// A nonterminal with no productions (a piece whose language is empty).
    fn fail(&mut self) -> Symbol {
        let nt = match self.fail_nt {
            Some(nt) => nt,
            None => {
                let nt = self.new_nt("#empty-language".into());
                self.fail_nt = Some(nt);
                nt
            }
        };
        Symbol::Nonterminal(nt)
    }

    /// A regular piece as a symbol: `None` = ε only; optional wrapper when nullable.
    pub(super) fn piece(&mut self, hir: RegexHir, name: &str, _top: bool) -> Option<Symbol> {
        if hir.is_key_set() {
            // A JSON string: never empty, never ε (and its HIR stays unbuilt).
            return Some(Symbol::Terminal(self.intern(hir, name)));
        }
        if is_fail(&hir) {
            return Some(self.fail());
        }
        let props = hir.properties();
        let min = props
            .minimum_len()
            .expect("normalized, non-failing HIR has a minimum length");
        if props.maximum_len() == Some(0) {
            return None;
        }
        let t = Symbol::Terminal(self.intern(hir, name));
        Some(if min == 0 { self.nt_opt_of(t) } else { t })
    }

    /// May `hir` become one terminal? Pieces that could determinise badly are checked
    /// against [`PROMOTION_DFA_LIMIT`] (remembered per process by `dfa_fits`).
    fn small_enough(&self, hir: &RegexHir) -> bool {
        if hir.is_key_set() {
            // Its DFA is the names' trie, whatever the size of its HIR (not built).
            return true;
        }
        let size = hir_size(hir);
        !may_blow_up(hir, size)
            || (size <= MAX_INLINE_HIR
                && dfa_fits(hir, PROMOTION_DFA_LIMIT, PROMOTION_STATE_ESTIMATE))
    }

    /// Is `e` a regular piece (every reference names a promoted rule that is not
    /// standalone)? Its HIR if so.
    fn piece_hir(&self, e: &Expr) -> Option<RegexHir> {
        let leaf = matches!(e, Expr::Bytes(_) | Expr::Regex(_) | Expr::Empty);
        if !self.opts.promote && !leaf {
            return None;
        }
        // A standalone rule is a terminal of its own, never part of a bigger one.
        let shared = |id: RuleId| {
            let i = id.0 as usize;
            if self.promoted[i] && !self.def.rules[i].is_standalone() {
                self.rule_hir[i].clone()
            } else {
                None
            }
        };
        if let Some(h) = shared_hir(e, &shared) {
            return Some(h);
        }
        expr_to_hir(e, &|id| shared(id).as_deref().cloned()).map(RegexHir::new)
    }

    pub(super) fn lower_rule_body(
        &mut self,
        nt: NonterminalId,
        body: &'a Expr,
        rule: usize,
    ) -> Result<(), GrammarError> {
        let alts: &'a [Expr] = match body {
            Expr::Alt(v) => v,
            e => std::slice::from_ref(e),
        };
        if self.opts.promote
            && alts.len() >= LITERAL_SET_MIN
            && alts
                .iter()
                .all(|a| matches!(a, Expr::Bytes(b) if !b.is_empty()))
        {
            // A large set of literals (a big enum, a word list): ONE terminal whose DFA is
            // their trie, instead of one terminal per literal that the scanner would carry
            // in every state and the follow matrix would square.
            let lits = alts.iter().map(|a| match a {
                Expr::Bytes(b) => Hir::literal(b.clone()),
                _ => unreachable!("checked above"),
            });
            let name = self.helper_name(rule, "lits");
            let sym = self.piece(RegexHir::new(Hir::alternation(lits.collect())), &name, true);
            self.productions.push(Production {
                lhs: nt,
                rhs: sym.into_iter().collect(),
            });
            return Ok(());
        }
        for alt in alts {
            self.lower_alternative(nt, alt, rule)?;
        }
        Ok(())
    }

    /// The productions of `nt` for one alternative: one, or one per pair of an
    /// [`Expr::RefPairs`].
    fn lower_alternative(
        &mut self,
        nt: NonterminalId,
        alt: &'a Expr,
        rule: usize,
    ) -> Result<(), GrammarError> {
        if let Expr::RefPairs(pairs) = alt {
            return self.lower_ref_pairs(nt, pairs);
        }
        let rhs = self.lower_seq(alt, rule)?;
        self.productions.push(Production { lhs: nt, rhs });
        Ok(())
    }

    /// The productions `nt → a b` of [`Expr::RefPairs`] (each as [`Builder::lower_seq`]
    /// lowers `Seq([Ref(a), Ref(b)])`: an inline rule's symbols spliced in).
    fn lower_ref_pairs(
        &mut self,
        nt: NonterminalId,
        pairs: &[[RuleId; 2]],
    ) -> Result<(), GrammarError> {
        for &[a, b] in pairs {
            let len = |r: RuleId| match &self.inline_syms[r.0 as usize] {
                Some(syms) if self.inline[r.0 as usize] => syms.len(),
                _ => 1,
            };
            let mut rhs = Vec::with_capacity(len(a) + len(b));
            self.push_ref(a, &mut rhs)?;
            self.push_ref(b, &mut rhs)?;
            self.productions.push(Production { lhs: nt, rhs });
        }
        Ok(())
    }

    /// The symbols of `Ref(r)` as an item of a sequence, appended to `out`: an inline rule's
    /// symbols (copied from the memo straight into the sequence), else its symbol.
    fn push_ref(&mut self, r: RuleId, out: &mut Vec<Symbol>) -> Result<(), GrammarError> {
        if let Some(i) = self.inline_symbols_of(r)? {
            let syms = self.inline_syms[i].as_deref();
            out.extend_from_slice(syms.expect("inline_symbols lowered the rule"));
        } else if let Some(s) = self.ref_symbol(r)? {
            out.push(s);
        }
        Ok(())
    }

    /// The symbols of one alternative (sequences flattened).
    fn lower_seq(&mut self, e: &'a Expr, rule: usize) -> Result<Vec<Symbol>, GrammarError> {
        let items: &'a [Expr] = match e {
            Expr::Seq(v) => v,
            e => std::slice::from_ref(e),
        };
        // Sized for what the items will most likely give: an inline rule already lowered
        // gives its symbols (a member of an any-order object is five, in every state), the
        // rest one each. Sized by the item count, each such production grew twice.
        let hint: usize = items
            .iter()
            .map(|item| match item {
                Expr::Ref(r) if self.inline[r.0 as usize] => {
                    self.inline_syms[r.0 as usize].as_ref().map_or(1, Vec::len)
                }
                Expr::Seq(v) => v.len(),
                _ => 1,
            })
            .sum();
        let mut out = Vec::with_capacity(hint);
        self.lower_seq_into(items, rule, &mut out)?;
        Ok(out)
    }

    /// [`Builder::lower_seq`] of `items`, appended to `out` (nested sequences in place).
    fn lower_seq_into(
        &mut self,
        items: &'a [Expr],
        rule: usize,
        out: &mut Vec<Symbol>,
    ) -> Result<(), GrammarError> {
        for item in items {
            match item {
                Expr::Seq(v) => self.lower_seq_into(v, rule, out)?,
                Expr::Ref(r) => self.push_ref(*r, out)?,
                _ => out.extend(self.lower_item(item, rule)?),
            }
        }
        Ok(())
    }

    /// When `r` is an [`RuleKind::Inline`] rule: the rule, its body's symbols lowered into
    /// `inline_syms` (once, then copied by each use); `None` for any other rule.
    fn inline_symbols_of(&mut self, r: RuleId) -> Result<Option<usize>, GrammarError> {
        let r = r.0 as usize;
        if !self.inline[r] || self.inlining.contains(&r) {
            return Ok(None);
        }
        if self.inline_syms[r].is_some() {
            return Ok(Some(r));
        }
        let def = self.def;
        self.inlining.push(r);
        let syms = self.lower_seq(&def.rules[r].expr, r);
        self.inlining.pop();
        self.inline_syms[r] = Some(syms?);
        Ok(Some(r))
    }

    /// Whether rule `i` is an [`RuleKind::Inline`] rule that is not promoted: spliced into
    /// the sequences that refer to it, with a nonterminal of its own only when something
    /// refers to it otherwise ([`Builder::ref_symbol`] makes it then).
    pub(super) fn is_spliced(&self, i: usize) -> bool {
        self.inline[i]
    }

    /// The symbol of `Ref(r)` as an item (`None` = ε): the rule's nonterminal, or the
    /// terminal of a promoted rule.
    fn ref_symbol(&mut self, r: RuleId) -> Result<Option<Symbol>, GrammarError> {
        if !self.promoted[r.0 as usize] {
            if let Some(nt) = self.rule_nt[r.0 as usize] {
                return Ok(Some(Symbol::Nonterminal(nt)));
            }
            // An inline rule used as a nonterminal (not spliced): its nonterminal and
            // productions, made now (set first, so that its body may refer to it).
            let i = r.0 as usize;
            assert!(self.inline[i], "reachable rule has a nonterminal");
            let def = self.def;
            let nt = self.new_nt(def.rules[i].name.clone());
            self.rule_nt[i] = Some(nt);
            self.lower_rule_body(nt, &def.rules[i].expr, i)?;
            return Ok(Some(Symbol::Nonterminal(nt)));
        }
        if let Some(sym) = self.ref_piece[r.0 as usize] {
            return Ok(sym);
        }
        let hir = self.rule_hir[r.0 as usize]
            .clone()
            .expect("promoted rules have HIR");
        let name = self.def.rules[r.0 as usize].name.clone();
        let sym = self.piece(hir, &name, false);
        self.ref_piece[r.0 as usize] = Some(sym);
        Ok(sym)
    }

    /// One item as a symbol (`None` = ε).
    fn lower_item(&mut self, e: &'a Expr, rule: usize) -> Result<Option<Symbol>, GrammarError> {
        match e {
            Expr::Empty => return Ok(None),
            Expr::Bytes(b) if b.is_empty() => return Ok(None),
            Expr::Ref(r) => return self.ref_symbol(*r),
            Expr::Constrained { hir, constraints } => {
                let name = self.helper_name(rule, "t");
                return Ok(Some(Symbol::Terminal(self.intern_constrained(
                    RegexHir::new(normalize(hir)),
                    (**constraints).clone(),
                    &name,
                ))));
            }
            Expr::Seq(_) => {}
            _ => {
                let key = expr_hash(e);
                let known = self
                    .piece_memo
                    .get(&key)
                    .and_then(|v| v.iter().find(|(x, _)| *x == e))
                    .map(|&(_, sym)| sym);
                let piece = match known {
                    Some(Some(sym)) => {
                        // Numbered as if lowered again: helper names do not depend on the memo.
                        self.piece_counter[rule] += 1;
                        return Ok(sym);
                    }
                    Some(None) => None,
                    None => self.piece_hir(e).filter(|hir| self.small_enough(hir)),
                };
                if let Some(hir) = piece {
                    let name = self.helper_name(rule, "t");
                    let sym = self.piece(hir, &name, false);
                    self.piece_memo.entry(key).or_default().push((e, Some(sym)));
                    return Ok(sym);
                }
                if known.is_none() {
                    self.piece_memo.entry(key).or_default().push((e, None));
                }
                // Not regular, or too big a DFA as one terminal (e.g. `number*` with counted
                // parts): lower the structure instead.
            }
        }
        match e {
            Expr::Seq(_) => {
                let rhs = self.lower_seq(e, rule)?;
                let name = self.helper_name(rule, "seq");
                let nt = self.new_nt(name);
                self.productions.push(Production { lhs: nt, rhs });
                Ok(Some(Symbol::Nonterminal(nt)))
            }
            Expr::Alt(v) => {
                let name = self.helper_name(rule, "alt");
                let nt = self.new_nt(name);
                for alt in v {
                    self.lower_alternative(nt, alt, rule)?;
                }
                Ok(Some(Symbol::Nonterminal(nt)))
            }
            Expr::RefPairs(pairs) => {
                let name = self.helper_name(rule, "alt");
                let nt = self.new_nt(name);
                self.lower_ref_pairs(nt, pairs)?;
                Ok(Some(Symbol::Nonterminal(nt)))
            }
            Expr::Repeat { expr, min, max } => {
                let Some(inner) = self.lower_item(expr, rule)? else {
                    return Ok(None);
                };
                if *max == Some(0) {
                    return Ok(None);
                }
                let name = self.helper_name(rule, "rep");
                let mut rhs = Vec::new();
                if *min as usize <= LINEAR_REPEAT {
                    rhs.extend(std::iter::repeat_n(inner, *min as usize));
                } else {
                    rhs.push(self.exactly(inner, *min, &name));
                }
                match max {
                    None => {
                        let star = self.star_of(inner, &name);
                        rhs.push(Symbol::Nonterminal(star));
                    }
                    Some(max) if ((max - min) as usize) <= LINEAR_REPEAT => {
                        // Linear chain: O_k → ε | inner O_{k-1}; O_1 → ε | inner.
                        let mut tail: Option<Symbol> = None;
                        for k in 1..=(max - min) {
                            let o = self.new_nt(format!("{name}.opt{k}"));
                            self.productions.push(Production {
                                lhs: o,
                                rhs: vec![],
                            });
                            let mut r = vec![inner];
                            r.extend(tail);
                            self.productions.push(Production { lhs: o, rhs: r });
                            tail = Some(Symbol::Nonterminal(o));
                        }
                        rhs.extend(tail);
                    }
                    Some(max) => {
                        let mut memo = WordHashMap::default();
                        rhs.extend(self.up_to(inner, max - min, &name, &mut memo));
                    }
                }
                self.check_budget(rule)?;
                if *min == 0 && rhs.len() == 1 {
                    // `x*` / `x{0,n}`: the star or chain itself, no unit rule around it.
                    return Ok(rhs.pop());
                }
                let nt = self.new_nt(name);
                self.productions.push(Production { lhs: nt, rhs });
                Ok(Some(Symbol::Nonterminal(nt)))
            }
            Expr::Empty
            | Expr::Bytes(_)
            | Expr::Regex(_)
            | Expr::Constrained { .. }
            | Expr::Ref(_) => {
                unreachable!("handled above")
            }
        }
    }

    /// `sym sym` as a cached helper nonterminal (the doubling step of [`Builder::exactly`]
    /// and [`Builder::up_to`]).
    fn pair_of(&mut self, sym: Symbol, name: &str) -> Symbol {
        if let Some(&s) = self.pair_cache.get(&sym) {
            return s;
        }
        let nt = self.new_nt(format!("{name}.pair{}", self.pair_cache.len() + 1));
        self.productions.push(Production {
            lhs: nt,
            rhs: vec![sym, sym],
        });
        let s = Symbol::Nonterminal(nt);
        self.pair_cache.insert(sym, s);
        s
    }

    /// `sym{n}` (n ≥ 1) in O(log n) productions: one nonterminal whose right-hand side is
    /// `sym^(2^k)` for every bit `k` set in `n`, each power built by doubling.
    fn exactly(&mut self, sym: Symbol, n: u32, name: &str) -> Symbol {
        let mut parts = Vec::new();
        let (mut power, mut n) = (sym, n);
        loop {
            if n & 1 == 1 {
                parts.push(power);
            }
            n >>= 1;
            if n == 0 {
                break;
            }
            power = self.pair_of(power, name);
        }
        if parts.len() == 1 {
            return parts[0];
        }
        let nt = self.new_nt(format!("{name}.exactly"));
        self.productions.push(Production {
            lhs: nt,
            rhs: parts,
        });
        Symbol::Nonterminal(nt)
    }

    /// `sym{0,n}` in O(log n) productions, unambiguous when `sym` is: with `y = sym sym`,
    /// `x{0,2m+1} = x? y{0,m}` and `x{0,2m} = y{0,m} | x y{0,m-1}` (even and odd counts
    /// apart). At each level only two consecutive `n` occur, so `memo` keeps it logarithmic.
    /// `None` is ε.
    fn up_to(
        &mut self,
        sym: Symbol,
        n: u32,
        name: &str,
        memo: &mut WordHashMap<(Symbol, u32), Option<Symbol>>,
    ) -> Option<Symbol> {
        if n == 0 {
            return None;
        }
        if let Some(&s) = memo.get(&(sym, n)) {
            return s;
        }
        let result = if n == 1 {
            self.nt_opt_of(sym)
        } else {
            let y = self.pair_of(sym, name);
            let nt = self.new_nt(format!("{name}.upto{n}"));
            if n % 2 == 1 {
                let mut rhs = vec![self.nt_opt_of(sym)];
                rhs.extend(self.up_to(y, n / 2, name, memo));
                self.productions.push(Production { lhs: nt, rhs });
            } else {
                let even: Vec<Symbol> = self.up_to(y, n / 2, name, memo).into_iter().collect();
                let mut odd = vec![sym];
                odd.extend(self.up_to(y, n / 2 - 1, name, memo));
                self.productions.push(Production { lhs: nt, rhs: even });
                self.productions.push(Production { lhs: nt, rhs: odd });
            }
            Symbol::Nonterminal(nt)
        };
        memo.insert((sym, n), Some(result));
        Some(result)
    }

    /// Fails closed when the IR under construction outgrows [`MAX_PRODUCTIONS`], naming the
    /// rule being lowered and the limit.
    pub(super) fn check_budget(&self, rule: usize) -> Result<(), GrammarError> {
        crate::grammar::budget_over("the lowered grammar")?;
        if self.productions.len() > MAX_PRODUCTIONS {
            return Err(GrammarError::whole(format!(
                "rule `{}`: the lowered grammar exceeds {MAX_PRODUCTIONS} productions",
                self.def.rules[rule].name
            )));
        }
        Ok(())
    }

    /// `S → ε | S sym` (left recursion: cheap for Earley), cached per symbol.
    fn star_of(&mut self, sym: Symbol, name: &str) -> NonterminalId {
        if let Some(&s) = self.star_cache.get(&sym) {
            return s;
        }
        let s = self.new_nt(format!("{name}*"));
        self.productions.push(Production {
            lhs: s,
            rhs: vec![],
        });
        self.productions.push(Production {
            lhs: s,
            rhs: vec![Symbol::Nonterminal(s), sym],
        });
        self.star_cache.insert(sym, s);
        s
    }
}
