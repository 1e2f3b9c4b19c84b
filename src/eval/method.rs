//! Decoding methods compared by the harness, by the names the command line and the result
//! files use.
//!
//! This is a label, not an implementation: the backend (the decode loop) maps each method to
//! its constraint mode. Names round-trip: `Method::from_str(&m.to_string()) == Ok(m)`, which is
//! what `results.jsonl` relies on.
//!
//! | name | meaning |
//! |---|---|
//! | `none` | unconstrained generation (the reference every ratio is taken against) |
//! | `domino` | DOMINO, lookahead k = ∞, opportunistic masking |
//! | `domino-kN` | DOMINO with lookahead k = N (`domino-k0`, `domino-k1`: the Table 4 ablation) |
//! | `domino-sN` | DOMINO, k = ∞, count-based speculative drafts of up to N tokens, each cut where expected tokens per measured millisecond peak (`--draft-policy cost`) |
//! | `domino-sN-threshold` | the same, every proposed draft verified in full (the paper's rule, `--draft-policy threshold`) |
//! | `naive` | per-token masking that only allows tokens completing terminals (no bridge tokens) |
//! | `llama-grammar` | llama.cpp's own GBNF grammar sampler |
//! | `template` | guidance-style template: fixed text is forced token by token, the model fills the holes |
//! | `llguidance` | the llguidance engine (when built with it) |

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// One decoding method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Method {
    /// No constraint.
    None,
    /// DOMINO: `lookahead` None is k = ∞; `speculative` is the draft length s, if any;
    /// `threshold` verifies whole drafts (the paper's rule) instead of cutting them by cost.
    Domino {
        lookahead: Option<u32>,
        speculative: Option<u32>,
        threshold: bool,
    },
    Naive,
    LlamaGrammar,
    Template,
    Llguidance,
}

impl Method {
    /// DOMINO with k = ∞ and opportunistic masking: the paper's main configuration.
    pub const DOMINO: Method = Method::Domino {
        lookahead: None,
        speculative: None,
        threshold: false,
    };

    /// DOMINO at lookahead `k` (the Table 4 ablation), no drafts.
    pub const fn domino_k(k: u32) -> Method {
        Method::Domino {
            lookahead: Some(k),
            speculative: None,
            threshold: false,
        }
    }

    /// DOMINO with drafts of up to `s` tokens (`threshold`: verified whole, the paper's rule).
    pub const fn domino_s(s: u32, threshold: bool) -> Method {
        Method::Domino {
            lookahead: None,
            speculative: Some(s),
            threshold,
        }
    }

    /// The methods `domino eval gsm8k|conll` runs when `--methods` is not given.
    pub fn default_accuracy_methods() -> Vec<Method> {
        vec![
            Method::None,
            Method::DOMINO,
            Method::Naive,
            Method::LlamaGrammar,
            Method::Template,
        ]
    }

    /// The methods `domino eval throughput` runs when `--methods` is not given.
    pub fn default_throughput_methods() -> Vec<Method> {
        vec![
            Method::None,
            Method::DOMINO,
            Method::domino_s(10, false),
            Method::LlamaGrammar,
            Method::Template,
        ]
    }

    /// Whether output is constrained at all (everything but `none`).
    pub fn is_constrained(self) -> bool {
        self != Method::None
    }

    /// Whether the method drafts speculatively (`domino-sN`).
    pub fn is_speculative(self) -> bool {
        matches!(
            self,
            Method::Domino {
                speculative: Some(_),
                ..
            }
        )
    }

    /// Parse a comma-separated list such as `none,domino,naive`; duplicates are an error.
    pub fn parse_list(s: &str) -> Result<Vec<Method>, String> {
        let mut out: Vec<Method> = Vec::new();
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let m: Method = part.parse()?;
            if out.contains(&m) {
                return Err(format!("method `{m}` is listed twice"));
            }
            out.push(m);
        }
        if out.is_empty() {
            return Err("no methods given".into());
        }
        Ok(out)
    }
}

impl std::fmt::Display for Method {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Method::None => f.write_str("none"),
            Method::Domino {
                lookahead,
                speculative,
                threshold,
            } => {
                f.write_str("domino")?;
                if let Some(k) = lookahead {
                    write!(f, "-k{k}")?;
                }
                if let Some(s) = speculative {
                    write!(f, "-s{s}")?;
                }
                if *threshold {
                    f.write_str("-threshold")?;
                }
                Ok(())
            }
            Method::Naive => f.write_str("naive"),
            Method::LlamaGrammar => f.write_str("llama-grammar"),
            Method::Template => f.write_str("template"),
            Method::Llguidance => f.write_str("llguidance"),
        }
    }
}

impl std::str::FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let lower = s.trim().to_ascii_lowercase();
        Ok(match lower.as_str() {
            "none" | "unconstrained" => Method::None,
            "naive" => Method::Naive,
            "llama-grammar" => Method::LlamaGrammar,
            "template" => Method::Template,
            "llguidance" => Method::Llguidance,
            _ => {
                let Some(rest) = lower.strip_prefix("domino") else {
                    return Err(unknown(s));
                };
                let mut lookahead = None;
                let mut speculative = None;
                let mut threshold = false;
                for part in rest.split('-').skip(1) {
                    if part == "threshold" && speculative.is_some() && !threshold {
                        threshold = true;
                        continue;
                    }
                    if threshold {
                        return Err(unknown(s));
                    }
                    let (kind, digits) = part.split_at(part.len().min(1));
                    let n: u32 = digits.parse().map_err(|_| unknown(s))?;
                    match kind {
                        "k" if lookahead.is_none() => lookahead = Some(n),
                        "s" if speculative.is_none() && n > 0 => speculative = Some(n),
                        _ => return Err(unknown(s)),
                    }
                }
                if !rest.is_empty() && !rest.starts_with('-') {
                    return Err(unknown(s));
                }
                Method::Domino {
                    lookahead,
                    speculative,
                    threshold,
                }
            }
        })
    }
}

fn unknown(s: &str) -> String {
    format!(
        "unknown method `{s}` (expected one of none, domino, domino-k<N>, domino-s<N>, \
         domino-s<N>-threshold, naive, llama-grammar, template, llguidance)"
    )
}

impl Serialize for Method {
    fn serialize<S: Serializer>(&self, ser: S) -> Result<S::Ok, S::Error> {
        ser.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Method {
    fn deserialize<D: Deserializer<'de>>(de: D) -> Result<Self, D::Error> {
        let s = String::deserialize(de)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for name in [
            "none",
            "domino",
            "domino-k0",
            "domino-k1",
            "domino-s10",
            "domino-s10-threshold",
            "domino-k2-s4",
            "naive",
            "llama-grammar",
            "template",
            "llguidance",
        ] {
            let m: Method = name.parse().unwrap();
            assert_eq!(m.to_string(), name);
        }
        assert_eq!("domino-k0".parse::<Method>().unwrap(), Method::domino_k(0));
        assert_eq!(
            "domino-s8-threshold".parse::<Method>().unwrap(),
            Method::domino_s(8, true)
        );
    }

    #[test]
    fn rejects_bad_names() {
        for bad in [
            "",
            "dominos",
            "domino-x3",
            "domino-k",
            "domino-s0",
            "domino-k1-k2",
            "greedy",
            "domino-threshold",
            "domino-k1-threshold",
            "domino-s4-threshold-threshold",
            "domino-s4-threshold-k1",
        ] {
            assert!(bad.parse::<Method>().is_err(), "{bad} parsed");
        }
        assert!(Method::parse_list("none,none").is_err());
        assert_eq!(
            Method::parse_list("none, domino").unwrap(),
            vec![Method::None, Method::DOMINO]
        );
    }
}
