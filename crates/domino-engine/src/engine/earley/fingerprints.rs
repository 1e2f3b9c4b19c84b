//! State fingerprints: hashes of a parser state's future (what can still follow), used as
//! keys of the tree cache and draft contexts; computed lazily and cached in the sets.

use super::scratch::{SCRATCH, Scratch};
use super::sets::{Lazy, NO_LEO, SetRef, Stack};
use super::tables::ParserTables;

/// Fingerprint context of an item predicted in the set itself (its completion context is
/// the set being hashed).
const ACCEPT_CONTEXT: u64 = 0x5e1f_c0de_acce_97ed;
/// Marks a reference to a member of the same strongly connected component.
const INTERNAL_CONTEXT: u64 = 0x1e7e_4a11_0000_0001;
/// Marks a Leo record inside a strongly connected component.
const LEO_CONTEXT: u64 = 0x1e0_1e0_1e0;

#[inline]
fn mix64(mut x: u64) -> u64 {
    // splitmix64 finaliser
    x ^= x >> 30;
    x = x.wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x ^= x >> 27;
    x = x.wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// The fingerprint of set `j` (see
/// [`Parser::state_fingerprint`](super::Parser::state_fingerprint)), computed on first use and
/// cached in the set's header.
pub(super) fn fingerprint_of(tables: &ParserTables, stack: &Stack<'_>, j: usize) -> u64 {
    let set = stack.set(j);
    let known = set.header.fingerprint.get();
    if known != Lazy::UNKNOWN {
        return known;
    }
    let nt_base = tables.num_terminals as u32;
    // Predicted items (origin j) are a function of the other items' dotted ids, so only
    // those items count, each with the completion fingerprint of its (lhs, origin). Set 0
    // is the exception (predicted from the start symbol), hence its own salt.
    let mut sum: u64 = if j == 0 { 0x5e70_0000_5e70 } else { 0 };
    for it in set.all_items().iter().filter(|it| (it.origin as usize) < j) {
        ensure_cfps(tables, stack, it.origin as usize);
        let lhs = tables.dots[it.dotted as usize].lhs;
        let ctx = earlier_cfp(stack, nt_base, it.origin, lhs);
        sum = sum.wrapping_add(mix64(mix64(it.dotted as u64 ^ 0x1357_9bdf_0246_8ace) ^ ctx));
    }
    let fp = mix64(sum ^ if set.header.accepting { 0xacce_97ed } else { 0 });
    set.header.fingerprint.set(fp);
    set.header.fingerprint.get()
}

/// The completion fingerprint of `(nt, o)`; set `o`'s fingerprints must be computed.
#[inline]
fn earlier_cfp(stack: &Stack<'_>, nt_base: u32, o: u32, nt: u32) -> u64 {
    let set = stack.set(o as usize);
    debug_assert!(set.header.cfps_done.get() != Lazy::UNKNOWN);
    match set.find(nt_base + nt) {
        Some(b) => set.cfps[b].get(),
        // Only the synthetic start has no waiters: completing it accepts.
        None => ACCEPT_CONTEXT,
    }
}

/// Compute the completion fingerprints of set `j` and of every set they depend on
/// (iteratively: the chain of origins can be as long as the stack).
fn ensure_cfps(tables: &ParserTables, stack: &Stack<'_>, j: usize) {
    let done = |x: usize| stack.set(x).header.cfps_done.get() != Lazy::UNKNOWN;
    if done(j) {
        return;
    }
    SCRATCH.with_borrow_mut(|s| {
        let mut work = std::mem::take(&mut s.cfp_work);
        work.clear();
        work.push(j);
        while let Some(&x) = work.last() {
            if done(x) {
                work.pop();
                continue;
            }
            let set = stack.set(x);
            let dep = set
                .all_items()
                .iter()
                .map(|it| it.origin as usize)
                .chain(
                    set.buckets
                        .iter()
                        .filter(|b| b.leo_nt != NO_LEO)
                        .map(|b| b.leo_origin as usize),
                )
                .find(|&o| o < x && !done(o));
            if let Some(o) = dep {
                work.push(o);
                continue;
            }
            set_cfps(tables, stack, s, x);
            set.header.cfps_done.set(1);
            work.pop();
        }
        s.cfp_work = work;
    });
}

/// What one step of the same-set dependency walk sees.
enum Edge {
    /// No more items in this bucket.
    Done,
    /// This item depends on nothing in this set.
    Skip,
    /// This item depends on the completion fingerprint of bucket `w` of this set.
    To(usize),
}

/// The `pos`-th same-set dependency of bucket `v` of set `m`: the Leo top's bucket for a
/// Leo bucket, else the bucket of the lhs of each item predicted in this set.
fn same_set_edge(tables: &ParserTables, set: &SetRef<'_>, v: usize, pos: usize, m: u32) -> Edge {
    let nt_base = tables.num_terminals as u32;
    let b = &set.buckets[v];
    let find = |nt: u32| match set.find(nt_base + nt) {
        Some(w) => Edge::To(w),
        None => Edge::Skip,
    };
    if b.leo_nt != NO_LEO {
        return match (pos, b.leo_origin == m) {
            (0, true) => find(b.leo_nt),
            (0, false) => Edge::Skip,
            _ => Edge::Done,
        };
    }
    let items = set.bucket_items(v);
    match items.get(pos) {
        None => Edge::Done,
        Some(it) if it.origin == m => find(tables.dots[it.dotted as usize].lhs),
        Some(_) => Edge::Skip,
    }
}

/// Fill the completion fingerprints of set `m`'s nonterminal buckets (earlier sets' are
/// done). `cfp(A, m)` hashes the waiters on `A`: each waiter's dotted id and the completion
/// fingerprint of its own `(lhs, origin)` — from an earlier set, or (origin `m`) another
/// bucket of this set. A Leo bucket takes its top's fingerprint (the futures are equal).
/// Same-set dependencies can be cyclic (left recursion), so buckets are processed by
/// strongly connected components (iterative Tarjan, dependencies first); a component with
/// a cycle is hashed as a whole (every member's items, internal references by name) and
/// each member's fingerprint is that hash combined with its name.
fn set_cfps(tables: &ParserTables, stack: &Stack<'_>, s: &mut Scratch, m: usize) {
    const UNVISITED: u32 = u32::MAX;
    let set = stack.set(m);
    let nt_base = tables.num_terminals as u32;
    let m = m as u32;
    let nb = set.buckets.len();
    let first_nt = set.buckets.partition_point(|b| b.key < nt_base);
    s.t_index.clear();
    s.t_index.resize(nb, UNVISITED);
    s.t_low.clear();
    s.t_low.resize(nb, 0);
    s.t_on.clear();
    s.t_on.resize(nb, false);
    s.t_stack.clear();
    s.t_calls.clear();
    let mut counter = 0u32;
    for root in first_nt..nb {
        if s.t_index[root] != UNVISITED {
            continue;
        }
        s.t_index[root] = counter;
        s.t_low[root] = counter;
        counter += 1;
        s.t_stack.push(root);
        s.t_on[root] = true;
        s.t_calls.push((root, 0));
        while let Some(&(v, pos)) = s.t_calls.last() {
            match same_set_edge(tables, &set, v, pos, m) {
                Edge::Skip => s.t_calls.last_mut().expect("call").1 += 1,
                Edge::To(w) => {
                    s.t_calls.last_mut().expect("call").1 += 1;
                    if s.t_index[w] == UNVISITED {
                        s.t_index[w] = counter;
                        s.t_low[w] = counter;
                        counter += 1;
                        s.t_stack.push(w);
                        s.t_on[w] = true;
                        s.t_calls.push((w, 0));
                    } else if s.t_on[w] {
                        s.t_low[v] = s.t_low[v].min(s.t_index[w]);
                    }
                }
                Edge::Done => {
                    s.t_calls.pop();
                    if let Some(&(u, _)) = s.t_calls.last() {
                        s.t_low[u] = s.t_low[u].min(s.t_low[v]);
                    }
                    if s.t_low[v] == s.t_index[v] {
                        let from = s.t_stack.iter().rposition(|&x| x == v).expect("on stack");
                        s.t_scc.clear();
                        s.t_scc.extend(s.t_stack.drain(from..));
                        hash_component(tables, stack, &set, s, m);
                    }
                }
            }
        }
    }
}

/// Completion fingerprints for the component in `s.t_scc` (its dependencies are done).
fn hash_component(
    tables: &ParserTables,
    stack: &Stack<'_>,
    set: &SetRef<'_>,
    s: &mut Scratch,
    m: u32,
) {
    let nt_base = tables.num_terminals as u32;
    // Reference to the completion of `nt` with origin `o`: its fingerprint, or a name when
    // it is a member of this component.
    let code = |s: &Scratch, nt: u32, o: u32| -> u64 {
        if o < m {
            return earlier_cfp(stack, nt_base, o, nt);
        }
        match set.find(nt_base + nt) {
            Some(w) if s.t_on[w] => mix64(INTERNAL_CONTEXT ^ nt as u64),
            Some(w) => set.cfps[w].get(),
            None => ACCEPT_CONTEXT,
        }
    };
    let cyclic = s.t_scc.len() > 1 || {
        let v = s.t_scc[0];
        let mut pos = 0;
        let mut self_loop = false;
        loop {
            match same_set_edge(tables, set, v, pos, m) {
                Edge::Done => break,
                Edge::To(w) if w == v => self_loop = true,
                _ => {}
            }
            pos += 1;
        }
        self_loop
    };
    let item_sum = |s: &Scratch, v: usize, salt: u64| -> u64 {
        let b = set.buckets[v];
        if b.leo_nt != NO_LEO {
            return mix64(salt ^ LEO_CONTEXT ^ mix64(code(s, b.leo_nt, b.leo_origin)));
        }
        let mut sum: u64 = 0;
        for it in set.bucket_items(v) {
            let lhs = tables.dots[it.dotted as usize].lhs;
            sum = sum.wrapping_add(mix64(
                mix64(salt ^ it.dotted as u64) ^ code(s, lhs, it.origin),
            ));
        }
        sum
    };
    if !cyclic {
        let v = s.t_scc[0];
        let b = set.buckets[v];
        let cfp = if b.leo_nt != NO_LEO {
            // Transparent: a Leo bucket's future is its top's (this is what makes list
            // continuations hash equal whatever the list's length).
            code(s, b.leo_nt, b.leo_origin)
        } else {
            mix64(item_sum(s, v, 0) ^ 0x6a09_e667_f3bc_c908)
        };
        set.cfps[v].set(cfp);
        s.t_on[v] = false;
        return;
    }
    let mut total: u64 = 0;
    for &v in &s.t_scc {
        let name = set.buckets[v].key as u64;
        total = total.wrapping_add(item_sum(s, v, mix64(name ^ 0xbb67_ae85_84ca_a73b)));
    }
    for &v in &s.t_scc {
        set.cfps[v].set(mix64(
            mix64(total ^ 0x3c6e_f372_fe94_f82b) ^ set.buckets[v].key as u64,
        ));
    }
    for i in 0..s.t_scc.len() {
        let v = s.t_scc[i];
        s.t_on[v] = false;
    }
}
