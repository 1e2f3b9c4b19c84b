//! The slow reference for triggered constraints, shared by `tests/triggered.rs` and
//! `tests/triggered_smollm2.rs` (each includes it with `#[path]`): a byte-level set of
//! {free text since the last region, searched for triggers by brute force | region i with a
//! `grammar::reference` recognizer state}, with exact region counts.
#![allow(dead_code)]

use domino_engine::engine::{AfterRegion, CompiledGrammar, Region, Trigger, TriggerSpec};
use domino_engine::grammar::GrammarSource;
use domino_engine::grammar::reference::{RefState, ReferenceRecognizer};
use domino_engine::vocab::{TokenId, TokenSet, Vocabulary};
use std::sync::Arc;

pub fn compile(gbnf: &str) -> Arc<CompiledGrammar> {
    let g = GrammarSource::Gbnf(gbnf.into())
        .compile(&Default::default())
        .unwrap();
    CompiledGrammar::new(g).unwrap()
}

/// The slow reference: one byte (or opaque special token) at a time, brute-force trigger
/// search, exact region counts.
pub struct Reference {
    spec: Arc<TriggerSpec>,
    recognizers: Vec<ReferenceRecognizer>,
}

#[derive(Clone)]
pub enum RState {
    /// The free text since the region (or start, or special token) before it.
    Free {
        text: Vec<u8>,
        n: usize,
    },
    Region {
        i: usize,
        s: RefState,
        n: usize,
    },
}

impl Reference {
    pub fn new(spec: &Arc<TriggerSpec>) -> Self {
        Reference {
            spec: spec.clone(),
            recognizers: spec
                .regions
                .iter()
                .map(|r| ReferenceRecognizer::new(r.grammar.grammar()).unwrap())
                .collect(),
        }
    }

    pub fn may_begin(&self, n: usize) -> bool {
        let under_max = self.spec.max_regions.is_none_or(|m| n < m);
        match self.spec.after {
            AfterRegion::Free => under_max,
            AfterRegion::End => n == 0 && under_max,
        }
    }

    /// Enter region `i` (and, where its empty text is a sentence, leave it at once).
    pub fn enter(&self, i: usize, n: usize, out: &mut Vec<RState>) {
        let s = self.recognizers[i].start();
        out.push(RState::Region { i, s, n: n + 1 });
        self.close(out);
    }

    /// Add the free reading after every region whose text is a sentence (Free mode).
    pub fn close(&self, out: &mut Vec<RState>) {
        if self.spec.after != AfterRegion::Free {
            return;
        }
        let extra: Vec<RState> = out
            .iter()
            .filter_map(|st| match st {
                RState::Region { i, s, n } if self.recognizers[*i].is_accepting(s) => {
                    Some(RState::Free {
                        text: Vec::new(),
                        n: *n,
                    })
                }
                _ => None,
            })
            .collect();
        out.extend(extra);
    }

    pub fn start(&self) -> Vec<RState> {
        vec![RState::Free {
            text: Vec::new(),
            n: 0,
        }]
    }

    pub fn feed_byte(&self, states: &[RState], b: u8) -> Vec<RState> {
        let mut out = Vec::new();
        for st in states {
            match st {
                RState::Free { text, n } => {
                    let mut text = text.clone();
                    text.push(b);
                    let hit = self.spec.regions.iter().position(|r| match &r.trigger {
                        Trigger::Text(t) => text.ends_with(t),
                        Trigger::Token(_) => false,
                    });
                    match hit {
                        Some(i) if self.may_begin(*n) => self.enter(i, *n, &mut out),
                        Some(_) => {}
                        None => out.push(RState::Free { text, n: *n }),
                    }
                }
                RState::Region { i, s, n } => {
                    if let Some(s) = self.recognizers[*i].feed(s, b) {
                        let mut one = vec![RState::Region { i: *i, s, n: *n }];
                        self.close(&mut one);
                        out.extend(one);
                    }
                }
            }
        }
        out
    }

    pub fn feed_token(&self, v: &Vocabulary, states: &[RState], t: TokenId) -> Vec<RState> {
        if !v.is_special(t) {
            return v
                .bytes(t)
                .iter()
                .fold(states.to_vec(), |s, &b| self.feed_byte(&s, b));
        }
        let mut out = Vec::new();
        for st in states {
            if let RState::Free { n, .. } = st {
                let trig = self
                    .spec
                    .regions
                    .iter()
                    .position(|r| r.trigger == Trigger::Token(t));
                match trig {
                    Some(i) if self.may_begin(*n) => self.enter(i, *n, &mut out),
                    Some(_) => {}
                    None => out.push(RState::Free {
                        text: Vec::new(),
                        n: *n,
                    }),
                }
            }
        }
        out
    }

    pub fn accepting(&self, states: &[RState]) -> bool {
        states.iter().any(|st| match st {
            RState::Free { n, .. } => *n >= self.spec.min_regions,
            RState::Region { i, s, n } => {
                *n >= self.spec.min_regions && self.recognizers[*i].is_accepting(s)
            }
        })
    }

    pub fn mask(&self, v: &Vocabulary, states: &[RState]) -> TokenSet {
        let mut m = TokenSet::new(v.len());
        for i in 0..v.len() as u32 {
            let t = TokenId(i);
            let ok = if v.is_eog(t) {
                self.accepting(states)
            } else {
                !self.feed_token(v, states, t).is_empty()
            };
            if ok {
                m.insert(t);
            }
        }
        m
    }
}

pub fn show(v: &Vocabulary, t: TokenId) -> String {
    format!("{:?}", String::from_utf8_lossy(v.bytes(t)))
}

pub fn diff(a: &TokenSet, b: &TokenSet, v: &Vocabulary) -> String {
    let only = |x: &TokenSet, y: &TokenSet| -> Vec<String> {
        x.iter()
            .filter(|t| !y.contains(*t))
            .map(|t| show(v, t))
            .collect()
    };
    format!("engine-only {:?}, oracle-only {:?}", only(a, b), only(b, a))
}

pub fn region(trigger: Trigger, gbnf: &str, name: &str) -> Region {
    Region {
        trigger,
        grammar: compile(gbnf),
        name: name.into(),
    }
}

pub fn text(s: &str) -> Trigger {
    Trigger::Text(s.as_bytes().to_vec())
}
