//! Scale: the push timing harness, parsers shared across threads, long rule chains.

use std::sync::Arc;

use super::*;

/// This thread's CPU time in ns (Linux `schedstat`), so timings on a loaded machine count
/// only the time actually spent running; falls back to wall-clock elsewhere.
fn cpu_ns(wall: std::time::Instant) -> u128 {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse::<u128>().ok())
        .unwrap_or_else(|| wall.elapsed().as_nanos())
}

/// Timing harness:
/// `cargo test --lib engine::earley::tests::scale::bench_push -- --ignored --nocapture`.
#[test]
#[ignore]
fn bench_push() {
    for (name, src) in [("json-right", JSON_RIGHT), ("json-left", JSON_LEFT)] {
        let g = grammar(src);
        let tables = Arc::new(ParserTables::new(&g));
        // A random document-shaped walk: random expected terminals, biased to close.
        let mut rng = Rng(42);
        let mut p = Parser::new(Arc::clone(&tables));
        let mut seq = Vec::new();
        while seq.len() < 200_000 {
            let exp: Vec<TerminalId> = p.expected().iter().collect();
            if exp.is_empty() {
                p = Parser::new(Arc::clone(&tables));
                seq.push(None);
                continue;
            }
            let closing: Vec<TerminalId> = exp
                .iter()
                .copied()
                .filter(|t| matches!(g.terminals[t.0 as usize].name.as_str(), "]" | "}"))
                .collect();
            let opening: Vec<TerminalId> = exp
                .iter()
                .copied()
                .filter(|t| matches!(g.terminals[t.0 as usize].name.as_str(), "[" | "{"))
                .collect();
            let t = if !closing.is_empty() && p.depth() > 300 && rng.below(2) == 0 {
                closing[0]
            } else if !opening.is_empty() && p.depth() < 100 && rng.below(4) == 0 {
                opening[rng.below(opening.len())]
            } else {
                exp[rng.below(exp.len())]
            };
            assert!(p.push(t));
            seq.push(Some(t));
        }
        let origin = std::time::Instant::now();
        let start = cpu_ns(origin);
        let mut p = Parser::new(Arc::clone(&tables));
        let (mut pushes, mut depth_sum) = (0, 0);
        for t in &seq {
            match t {
                Some(t) => {
                    p.push(*t);
                    pushes += 1;
                    depth_sum += p.depth();
                }
                None => p.truncate(0),
            }
        }
        let per_push = (cpu_ns(origin) - start) as f64 / pushes as f64;
        let st = p.stats();
        eprintln!(
            "{name}: per push {:.1} items, {:.2} completions, {:.2} Leo jumps",
            st.items_added as f64 / pushes as f64,
            st.completions as f64 / pushes as f64,
            st.leo_jumps as f64 / pushes as f64
        );
        // push+pop of every expected terminal at each position (the engine's mask pattern)
        let mut p = Parser::new(Arc::clone(&tables));
        let start = cpu_ns(origin);
        let mut probes = 0;
        for t in seq.iter().take(50_000) {
            match t {
                Some(t) => {
                    for e in p.expected().clone().iter() {
                        p.push(e);
                        p.pop();
                        probes += 1;
                    }
                    p.push(*t);
                }
                None => p.truncate(0),
            }
        }
        let per_probe = (cpu_ns(origin) - start) as f64 / probes as f64;
        // Clone (+ first push on the clone) deep inside a long array, the engine's per-token
        // pattern for candidate configurations.
        let mut deep = Parser::new(Arc::clone(&tables));
        let (open, num, comma) = (tid(&g, "["), tid(&g, "N"), tid(&g, ","));
        assert!(deep.push(open) && deep.push(num));
        while deep.depth() < 1000 {
            assert!(deep.push(comma) && deep.push(num));
        }
        let start = cpu_ns(origin);
        for _ in 0..1_000_000 {
            std::hint::black_box(deep.clone());
        }
        let per_clone = (cpu_ns(origin) - start) as f64 / 1_000_000.0;
        let start = cpu_ns(origin);
        for _ in 0..100_000 {
            let mut q = deep.clone();
            q.push(comma);
            std::hint::black_box(&q);
        }
        let per_clone_push = (cpu_ns(origin) - start) as f64 / 100_000.0;
        eprintln!(
            "{name} (thread CPU time): push {per_push:.0} ns ({pushes} pushes, mean depth {:.0}), push+pop {per_probe:.0} ns, \
             at depth {}: clone {per_clone:.0} ns, clone+push {per_clone_push:.0} ns",
            depth_sum as f64 / pushes as f64,
            deep.depth()
        );
    }
}

#[test]
fn clones_work_across_threads() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Parser>();
    assert_send_sync::<ParserTables>();
    let g = grammar(JSON_RIGHT);
    let mut p = parser(&g);
    push_all(
        &mut p,
        &g,
        "[ { S : [ N , N , { S : [ [ null ] ] } ] , S : { } } , [ ] , S",
    );
    // Fingerprints are computed lazily into shared sets: racing threads must agree.
    let fps: Vec<u64> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let mut q = p.clone();
                scope.spawn(move || {
                    let fp = q.state_fingerprint();
                    q.pop();
                    (fp, q.state_fingerprint())
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                let (a, b) = h.join().expect("thread");
                [a, b]
            })
            .collect()
    });
    let fresh = {
        let mut q = parser(&g);
        push_all(
            &mut q,
            &g,
            "[ { S : [ N , N , { S : [ [ null ] ] } ] , S : { } } , [ ] , S",
        );
        let a = q.state_fingerprint();
        q.pop();
        (a, q.state_fingerprint())
    };
    for pair in fps.chunks(2) {
        assert_eq!((pair[0], pair[1]), fresh);
    }
    assert_eq!(p.state_fingerprint(), fresh.0);
}

#[test]
fn long_rule_chains() {
    // Right chain (productivity propagates against rule order) and left chain (one set
    // predicts every nonterminal): built and parsed without recursion.
    let n = 5000;
    let right: Vec<String> = (0..n)
        .map(|i| format!("R{i} -> 'a' R{}", i + 1))
        .chain([format!("R{n} -> 'a'")])
        .collect();
    let g = grammar(&right.join(";"));
    let mut p = parser(&g);
    for _ in 0..=n {
        assert!(!p.is_accepting());
        assert!(p.push(tid(&g, "a")));
    }
    assert!(p.is_accepting() && p.expected().is_empty());
    let left: Vec<String> = (0..n)
        .map(|i| format!("L{i} -> L{} 'b' | 'c'", i + 1))
        .chain([format!("L{n} -> 'a'")])
        .collect();
    let g = grammar(&left.join(";"));
    let mut p = parser(&g);
    assert!(p.push(tid(&g, "a")));
    for _ in 0..n {
        assert!(!p.is_accepting());
        assert!(p.push(tid(&g, "b")));
    }
    assert!(p.is_accepting());
    assert!(accepts(&g, "c b b b") && !accepts(&g, "c c"));
    assert_eq!(p.state_fingerprint(), p.clone().state_fingerprint());
}
