//! Step 7 of lowering: inline unit rules, drop unproductive and unreachable symbols, number
//! what is left densely, and reject an empty language.

use crate::grammar::GrammarError;
use crate::grammar::expr::GrammarDef;
use crate::grammar::fixpoint::{Csr, least_fixpoint};
use crate::grammar::ir::{Grammar, NonterminalId, Production, Symbol, TerminalId};

/// Replace every nonterminal `N` (other than the start) whose only production is `N → X`
/// by `X` (Earley then predicts and completes one item less per use). `N`'s production
/// stays behind, unreachable, for the cleanup to remove. Cycles of unit rules (which
/// derive nothing) are left alone.
fn inline_unit_rules(productions: &mut [Production], nn: usize, start: NonterminalId) {
    let mut count = vec![0u32; nn];
    for p in productions.iter() {
        count[p.lhs.0 as usize] += 1;
    }
    let mut unit: Vec<Option<Symbol>> = vec![None; nn];
    for p in productions.iter() {
        if p.lhs != start
            && count[p.lhs.0 as usize] == 1
            && p.rhs.len() == 1
            && p.rhs[0] != Symbol::Nonterminal(p.lhs)
        {
            unit[p.lhs.0 as usize] = Some(p.rhs[0]);
        }
    }
    // Where each unit chain ends, each nonterminal resolved once (path compression): a
    // 60,000-rule chain `r0 ::= r1`, `r1 ::= r2`, … is linear, not one walk per link.
    let mut resolved: Vec<Option<Symbol>> = vec![None; nn];
    let mut on_path = vec![false; nn];
    let mut path = Vec::new();
    for n in 0..nn {
        if unit[n].is_none() || resolved[n].is_some() {
            continue;
        }
        let mut s = Symbol::Nonterminal(NonterminalId(n as u32));
        let target = loop {
            match s {
                Symbol::Terminal(_) => break s,
                Symbol::Nonterminal(m) => {
                    let m = m.0 as usize;
                    if let Some(r) = resolved[m] {
                        break r;
                    }
                    match unit[m] {
                        None => break s,
                        // A cycle of unit rules: unproductive, removed later.
                        Some(_) if on_path[m] => break s,
                        Some(next) => {
                            on_path[m] = true;
                            path.push(m);
                            s = next;
                        }
                    }
                }
            }
        };
        for m in path.drain(..) {
            on_path[m] = false;
            resolved[m] = Some(target);
        }
    }
    let resolve = |s: Symbol| match s {
        Symbol::Nonterminal(n) => resolved[n.0 as usize].unwrap_or(s),
        Symbol::Terminal(_) => s,
    };
    for p in productions.iter_mut() {
        for s in p.rhs.iter_mut() {
            *s = resolve(*s);
        }
    }
}

/// Step 7: drop unproductive and unreachable symbols, renumber densely, check non-emptiness.
pub(super) fn cleanup(g: Grammar, def: &GrammarDef) -> Result<Grammar, GrammarError> {
    let Grammar {
        terminals,
        nonterminals,
        mut productions,
        start,
        lexing,
        mut warnings,
    } = g;
    let nn = nonterminals.len();
    inline_unit_rules(&mut productions, nn, start);
    // Productive: the least fixpoint over "every nonterminal occurrence productive" (linear
    // time; a fixpoint loop is quadratic on long helper chains).
    let productive = least_fixpoint(
        nn,
        productions.iter().map(|p| {
            let nts = p.rhs.iter().filter_map(|s| match s {
                Symbol::Nonterminal(n) => Some(n.0),
                Symbol::Terminal(_) => None,
            });
            (p.lhs.0, nts)
        }),
    );
    if !productive[start.0 as usize] {
        return Err(GrammarError::whole(format!(
            "the grammar's language is empty: the start rule `{}` derives no string{}",
            def.rules[def.start.0 as usize].name,
            culprits(
                &productions,
                &nonterminals,
                &productive,
                start,
                def,
                &warnings
            )
        )));
    }
    // (The set of rule names only when something is unproductive: hashing 13,000 generated
    // names was a visible part of cleaning up a big schema.)
    let all_productive = productive.iter().all(|&p| p);
    let user_rule: std::collections::HashSet<&str> = if all_productive {
        Default::default()
    } else {
        def.rules.iter().map(|r| r.name.as_str()).collect()
    };
    for (i, name) in nonterminals.iter().enumerate() {
        if !productive[i] && user_rule.contains(name.as_str()) {
            warnings.push(format!(
                "rule `{name}` derives no string (it never terminates) and is removed"
            ));
        }
    }
    // Every nonterminal productive (the usual case): every production is kept, unread.
    let kept: Vec<Production> = if all_productive {
        productions
    } else {
        productions
            .into_iter()
            .filter(|p| {
                productive[p.lhs.0 as usize]
                    && p.rhs.iter().all(|s| match s {
                        Symbol::Terminal(_) => true,
                        Symbol::Nonterminal(n) => productive[n.0 as usize],
                    })
            })
            .collect()
    };
    // Reachable from start.
    let by_lhs = Csr::new(
        nn,
        kept.iter()
            .enumerate()
            .map(|(i, p)| (p.lhs.0 as usize, i as u32)),
    );
    let mut reach = vec![false; nn];
    let mut term_used = vec![false; terminals.len()];
    let mut stack = vec![start];
    while let Some(n) = stack.pop() {
        if std::mem::replace(&mut reach[n.0 as usize], true) {
            continue;
        }
        for &pi in by_lhs.row(n.0 as usize) {
            for s in &kept[pi as usize].rhs {
                match s {
                    Symbol::Terminal(t) => term_used[t.0 as usize] = true,
                    Symbol::Nonterminal(m) => stack.push(*m),
                }
            }
        }
    }
    // Everything reached and every terminal used: the numbering stays as it is.
    if reach.iter().all(|&r| r) && term_used.iter().all(|&u| u) {
        return Ok(Grammar {
            terminals,
            nonterminals,
            productions: kept,
            start,
            warnings,
            lexing,
        });
    }
    let mut nt_map = vec![u32::MAX; nn];
    let mut new_nts = Vec::new();
    for (i, name) in nonterminals.into_iter().enumerate() {
        if reach[i] {
            nt_map[i] = new_nts.len() as u32;
            new_nts.push(name);
        }
    }
    let mut t_map = vec![u32::MAX; terminals.len()];
    let mut new_ts = Vec::new();
    for (i, t) in terminals.into_iter().enumerate() {
        if term_used[i] {
            t_map[i] = new_ts.len() as u32;
            new_ts.push(t);
        }
    }
    // Renumbered in place: each production keeps its right-hand side's allocation.
    let new_prods = kept
        .into_iter()
        .filter(|p| reach[p.lhs.0 as usize])
        .map(|mut p| {
            p.lhs = NonterminalId(nt_map[p.lhs.0 as usize]);
            for s in p.rhs.iter_mut() {
                *s = match *s {
                    Symbol::Terminal(t) => Symbol::Terminal(TerminalId(t_map[t.0 as usize])),
                    Symbol::Nonterminal(n) => {
                        Symbol::Nonterminal(NonterminalId(nt_map[n.0 as usize]))
                    }
                };
            }
            p
        })
        .collect();
    Ok(Grammar {
        terminals: new_ts,
        nonterminals: new_nts,
        productions: new_prods,
        start: NonterminalId(nt_map[start.0 as usize]),
        warnings,
        lexing,
    })
}

/// The rules of the source that derive nothing and that the start rule reaches through rules
/// that derive nothing either, as `: it needs `b` (2:1), which never terminates` (at most
/// three, nearest first): what to fix when the language is empty.
fn culprits(
    productions: &[Production],
    nonterminals: &[String],
    productive: &[bool],
    start: NonterminalId,
    def: &GrammarDef,
    warnings: &[String],
) -> String {
    let mut by_lhs: Vec<Vec<usize>> = vec![Vec::new(); nonterminals.len()];
    for (i, p) in productions.iter().enumerate() {
        by_lhs[p.lhs.0 as usize].push(i);
    }
    let spans: std::collections::HashMap<&str, &crate::grammar::expr::Rule> =
        def.rules.iter().map(|r| (r.name.as_str(), r)).collect();
    let mut names: Vec<&str> = Vec::new();
    let mut seen = vec![false; nonterminals.len()];
    seen[start.0 as usize] = true;
    let mut queue = std::collections::VecDeque::from([start]);
    while let Some(n) = queue.pop_front() {
        let name = nonterminals[n.0 as usize].as_str();
        if n != start && spans.contains_key(name) {
            names.push(name);
        }
        for &pi in &by_lhs[n.0 as usize] {
            for s in &productions[pi].rhs {
                if let Symbol::Nonterminal(m) = s
                    && !productive[m.0 as usize]
                    && !std::mem::replace(&mut seen[m.0 as usize], true)
                {
                    queue.push_back(*m);
                }
            }
        }
    }
    // Rules promoted to terminals that match nothing were reported as warnings by promotion.
    let start_name = def.rules[def.start.0 as usize].name.as_str();
    for w in warnings {
        if let Some(rest) = w.strip_prefix("rule `")
            && let Some((name, tail)) = rest.split_once('`')
            && tail.starts_with(" derives no string")
            && name != start_name
            && spans.contains_key(name)
            && !names.contains(&name)
        {
            names.push(name);
        }
    }
    // At most three, from distinct places (several helper rules of one schema location,
    // such as an object's member chain, would otherwise hide the location that matters).
    let mut places = std::collections::HashSet::new();
    let found: Vec<String> = names
        .iter()
        .filter_map(|&name| {
            let place = match spans[name] {
                r if r.span.line > 0 => format!("{}:{}", r.span.line, r.span.column),
                crate::grammar::expr::Rule {
                    pointer: Some(p), ..
                } => format!(
                    "the schema at {}",
                    if p.is_empty() { "the root" } else { &**p }
                ),
                _ => return Some(format!("`{name}`")),
            };
            places
                .insert(place.clone())
                .then(|| format!("`{name}` ({place})"))
        })
        .take(3)
        .collect();
    match found.len() {
        0 => String::new(),
        1 => format!(": it needs {}, which never terminates", found[0]),
        _ => format!(": it needs {}, which never terminate", found.join(", ")),
    }
}
