//! Hand-built grammars: terminal sets, recursion, ambiguity, nullable symbols, unproductive
//! rules, Leo linearity, push/pop round trips, clones and fingerprints.

use std::sync::Arc;

use super::*;

#[test]
fn terminal_set_basics() {
    let mut s = TerminalSet::new(130);
    assert!(s.is_empty());
    assert!(s.insert(TerminalId(3)));
    assert!(!s.insert(TerminalId(3)));
    assert!(s.insert(TerminalId(129)));
    assert!(!s.insert(TerminalId(500)), "beyond the universe is ignored");
    assert!(
        s.contains(TerminalId(129))
            && !s.contains(TerminalId(128))
            && !s.contains(TerminalId(9999))
    );
    assert_eq!(
        s.iter().collect::<Vec<_>>(),
        vec![TerminalId(3), TerminalId(129)]
    );
    assert_eq!(s.len(), 2);
    assert!(s.remove(TerminalId(3)) && !s.remove(TerminalId(3)));
    assert_eq!(s.len(), 1);
    // Large universes live on the heap; same behaviour.
    let mut big = TerminalSet::new(1000);
    let mut other = big.clone();
    assert!(big.insert(TerminalId(999)) && big.insert(TerminalId(64)));
    assert_ne!(big, other);
    assert!(!big.intersects(&other));
    other.union_with(&big);
    assert_eq!(big, other);
    assert!(big.intersects(&other));
    assert_eq!(
        other.iter().collect::<Vec<_>>(),
        vec![TerminalId(64), TerminalId(999)]
    );
    assert_eq!(big.words().len(), 16);
}

#[test]
fn arithmetic_left_recursion() {
    let g = grammar("E -> E '+' T | T; T -> T '*' F | F; F -> '(' E ')' | 'n'");
    assert!(accepts(&g, "n"));
    assert!(accepts(&g, "n + n * n"));
    assert!(accepts(&g, "( n + n ) * n + ( ( n ) )"));
    assert!(!accepts(&g, "n +"));
    assert!(!accepts(&g, "( n"));
    assert!(!accepts(&g, "n n"));
    let mut p = parser(&g);
    assert_eq!(expected_names(&p, &g), vec!["(", "n"]);
    push_all(&mut p, &g, "( n");
    assert_eq!(expected_names(&p, &g), vec![")", "*", "+"]);
    assert!(!p.is_accepting());
    assert!(!p.push(tid(&g, "n")), "n cannot follow n");
    assert_eq!(p.depth(), 2, "rejected push leaves the state");
    push_all(&mut p, &g, ")");
    assert!(p.is_accepting());
}

#[test]
fn json_expected_sets() {
    for src in [JSON_RIGHT, JSON_LEFT] {
        let g = grammar(src);
        let mut p = parser(&g);
        assert_eq!(
            expected_names(&p, &g),
            vec!["N", "S", "[", "false", "null", "true", "{"]
        );
        push_all(&mut p, &g, "{ S : [ N , { } , S");
        assert_eq!(expected_names(&p, &g), vec![",", "]"]);
        push_all(&mut p, &g, "]");
        assert_eq!(expected_names(&p, &g), vec![",", "}"]);
        assert!(!p.is_accepting());
        push_all(&mut p, &g, "}");
        assert!(p.is_accepting());
        assert!(p.expected().is_empty());
        assert!(accepts(&g, "[ [ [ ] ] , { S : null , S : true } ]"));
        assert!(!accepts(&g, "[ N , ]"));
        assert!(!accepts(&g, "{ S }"));
    }
}

#[test]
fn ambiguous_concatenation() {
    let g = grammar("E -> E E | 'a'");
    for n in 1..40 {
        let s = vec!["a"; n].join(" ");
        assert!(accepts(&g, &s), "a^{n}");
    }
    let g = grammar("S -> S S | '(' S ')' | '(' ')'");
    assert!(accepts(&g, "( ) ( ( ) ( ) ) ( )"));
    assert!(!accepts(&g, "( ) ( ( ) ( ) ( )"));
}

#[test]
fn nullable_heavy() {
    let g = grammar("S -> A B C 'x' | A B; A -> ε | 'a'; B -> A A; C -> B | 'c'");
    assert!(parser(&g).is_accepting(), "empty sentence");
    for ok in [
        "x",
        "a",
        "a a",
        "a a a",
        "a a a a x",
        "c x",
        "a c x",
        "a a a c x",
        "a a a a a x",
    ] {
        assert!(accepts(&g, ok), "{ok}");
    }
    for bad in ["a a a a", "a a a a c x", "x x", "c", "a a a a a a x"] {
        assert!(!accepts(&g, bad), "{bad}");
    }
}

#[test]
fn cycles_and_star_of_star() {
    // `A -> A | ε` and the lowered shape of ("a"*)*.
    let g = grammar("S -> A 'b'; A -> A | ε | 'a'");
    assert!(accepts(&g, "b") && accepts(&g, "a b") && !accepts(&g, "a a b"));
    let g = grammar("S -> R; R -> R2 R | ε; R2 -> 'a' R2 | ε");
    assert!(parser(&g).is_accepting());
    for n in 1..30 {
        assert!(accepts(&g, &vec!["a"; n].join(" ")));
    }
    let g = grammar("S -> X 'c' | 'b'; X -> Y; Y -> X | S | 'a'");
    assert!(accepts(&g, "a c") && accepts(&g, "b c c c") && accepts(&g, "b") && !accepts(&g, "c"));
}

#[test]
fn unproductive_rules_are_ignored() {
    let g = grammar("S -> 'a' | 'b' U; U -> 'c' U");
    let t = ParserTables::new(&g);
    assert_eq!(t.dropped_productions(), 2);
    let mut p = Parser::new(Arc::new(t));
    assert_eq!(
        expected_names(&p, &g),
        vec!["a"],
        "b only leads into an unproductive rule"
    );
    assert!(!p.push(tid(&g, "b")));
    // A grammar whose start is unproductive: nothing is ever expected or accepted.
    let g = grammar("S -> 'a' S");
    let p = parser(&g);
    assert!(p.expected().is_empty() && !p.is_accepting());
}

#[test]
fn leo_keeps_right_recursion_linear() {
    let cases = [
        ("L -> 'a' L | 'a'", "a"),
        ("L -> 'a' ',' L | 'a'", "a ,"),
        ("L -> 'a' ',' R | 'a'; R -> L", "a ,"),
        ("L -> 'a' L | ε", "a"),
        ("S -> '[' L ']'; L -> 'a' L | ε", "a"),
    ];
    for (src, unit) in cases {
        let g = grammar(src);
        let unit: Vec<TerminalId> = unit.split_whitespace().map(|n| tid(&g, n)).collect();
        let mut work = Vec::new();
        for n in [1000usize, 10_000] {
            let mut p = parser(&g);
            if src.starts_with("S") {
                assert!(p.push(tid(&g, "[")));
            }
            for _ in 0..n {
                for &t in &unit {
                    assert!(p.push(t), "{src}");
                }
            }
            if unit.len() == 2 {
                assert!(p.push(unit[0]));
            }
            if src.starts_with("S") {
                assert!(p.push(tid(&g, "]")));
            }
            assert!(p.is_accepting(), "{src} n={n}");
            let s = p.stats();
            work.push(s.items_added + s.completions);
            assert!(s.completions <= 8 * n as u64 + 16, "{src}: {s:?} for n={n}");
        }
        // Ten times the input, about ten times the work (quadratic would be 100x).
        assert!(work[1] <= 11 * work[0], "{src}: work {work:?}");
    }
}

#[test]
fn left_recursion_is_linear() {
    let g = grammar("L -> L ',' 'a' | 'a'");
    let mut p = parser(&g);
    assert!(p.push(tid(&g, "a")));
    for _ in 0..10_000 {
        assert!(p.push(tid(&g, ",")) && p.push(tid(&g, "a")));
    }
    assert!(p.is_accepting());
    assert!(p.stats().completions <= 3 * 20_001);
}

#[test]
fn push_pop_truncate_round_trips() {
    let g = grammar(JSON_RIGHT);
    let mut p = parser(&g);
    let input: Vec<TerminalId> = "[ { S : [ N , N , { S : null } ] , S : { } } , [ ] , S ]"
        .split_whitespace()
        .map(|n| tid(&g, n))
        .collect();
    let mut states = vec![(
        p.expected().clone(),
        p.state_fingerprint(),
        p.is_accepting(),
    )];
    for &t in &input {
        assert!(p.push(t));
        states.push((
            p.expected().clone(),
            p.state_fingerprint(),
            p.is_accepting(),
        ));
        // push+pop of every expected terminal restores the state exactly
        let before = states.last().expect("state").clone();
        for e in p.expected().clone().iter() {
            assert!(p.push(e));
            p.pop();
            assert_eq!(
                (
                    p.expected().clone(),
                    p.state_fingerprint(),
                    p.is_accepting()
                ),
                before
            );
        }
    }
    assert!(p.is_accepting());
    for d in (0..input.len()).rev() {
        p.pop();
        assert_eq!(p.depth(), d);
        assert_eq!(
            (
                p.expected().clone(),
                p.state_fingerprint(),
                p.is_accepting()
            ),
            states[d]
        );
    }
    p.pop(); // no-op at depth 0
    assert_eq!(p.depth(), 0);
    // Truncate across chunk boundaries, then re-push: identical states.
    let long: Vec<TerminalId> = std::iter::once(tid(&g, "["))
        .chain((0..100).flat_map(|_| [tid(&g, "N"), tid(&g, ",")]))
        .chain([tid(&g, "N"), tid(&g, "]")])
        .collect();
    let mut fps = vec![p.state_fingerprint()];
    for &t in &long {
        assert!(p.push(t));
        fps.push(p.state_fingerprint());
    }
    for target in [150, 64, 63, 33, 32, 31, 1, 0] {
        p.truncate(target);
        assert_eq!(p.depth(), target);
        assert_eq!(p.state_fingerprint(), fps[target]);
        for (i, &t) in long[target..].iter().enumerate() {
            assert!(p.push(t));
            assert_eq!(p.state_fingerprint(), fps[target + i + 1]);
        }
        assert!(p.is_accepting());
    }
}

#[test]
fn clones_are_independent() {
    let g = grammar(JSON_LEFT);
    let mut p = parser(&g);
    push_all(
        &mut p,
        &g,
        "[ N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N , N",
    );
    let fp = p.state_fingerprint();
    let mut q = p.clone();
    push_all(&mut q, &g, "]");
    assert!(q.is_accepting() && !p.is_accepting());
    assert_eq!(p.state_fingerprint(), fp);
    q.truncate(3);
    push_all(&mut p, &g, ", S ]");
    assert!(p.is_accepting());
    assert_eq!(q.depth(), 3);
    let mut r = q.clone();
    r.pop();
    q.pop();
    assert_eq!(r.state_fingerprint(), q.state_fingerprint());
}

#[test]
fn lazy_fingerprints_match_eager_ones() {
    let g = grammar(JSON_RIGHT);
    let input: Vec<TerminalId> = "[ { S : [ N , N , { S : [ [ null ] ] } ] , S : { } } , [ ] , S ]"
        .split_whitespace()
        .map(|n| tid(&g, n))
        .collect();
    let mut eager = parser(&g);
    let mut fps = vec![eager.state_fingerprint()];
    for &t in &input {
        assert!(eager.push(t));
        fps.push(eager.state_fingerprint());
    }
    for skip in [1, 2, 3, 7] {
        let mut lazy = parser(&g);
        for (i, &t) in input.iter().enumerate() {
            assert!(lazy.push(t));
            if (i + 1) % skip == 0 {
                assert_eq!(
                    lazy.state_fingerprint(),
                    fps[i + 1],
                    "after {} terminals",
                    i + 1
                );
            }
        }
        assert_eq!(lazy.state_fingerprint(), fps[input.len()]);
    }
    // A deep dependency chain is computed without recursion.
    let mut deep = parser(&g);
    for _ in 0..100_000 {
        assert!(deep.push(tid(&g, "[")));
    }
    let mut other = deep.clone();
    assert!(deep.push(tid(&g, "N")));
    let fp = deep.state_fingerprint();
    assert!(other.push(tid(&g, "[")) && other.push(tid(&g, "]")));
    assert_eq!(
        other.state_fingerprint(),
        fp,
        "`[^n [ ]` has the future of `[^n N`"
    );
}

#[test]
fn fingerprint_normalises_list_length() {
    for src in [JSON_RIGHT, JSON_LEFT] {
        let g = grammar(src);
        let fp = |input: &str| {
            let mut p = parser(&g);
            push_all(&mut p, &g, input);
            p.state_fingerprint()
        };
        assert_eq!(fp("[ N , N ,"), fp("[ N , N , N ,"), "{src}");
        assert_eq!(fp("[ N , N"), fp("[ S , N , N"));
        // Every pair of an object has the same continuation, first or not.
        assert_eq!(fp("{ S : N , S : [ S"), fp("{ S : N , S : true , S : [ S"));
        assert_eq!(fp("{ S : N , S : [ S"), fp("{ S : [ S"));
        assert_eq!(fp("[ { S : [ N , { S : N"), fp("[ N , { S : [ { S : N"));
        assert_ne!(fp("[ N , N"), fp("[ [ N , N"), "nesting depth matters");
        assert_ne!(fp("[ N"), fp("{ S : N"));
        assert_ne!(fp("[ N"), fp("N"));
    }
}
