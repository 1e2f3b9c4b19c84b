//! The engine's error type: compiling a grammar for the engine, or driving a constraint.

use crate::budget;
use crate::lexer::LexerError;
use crate::vocab::TokenId;

/// Errors of the engine (compiling a grammar for it, or driving a constraint).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EngineError {
    /// The terminals could not be compiled into a scanner.
    Lexer(LexerError),
    /// `commit(token)` of a token the grammar does not allow here.
    TokenNotAllowed {
        token: TokenId,
        after_commits: usize,
    },
    /// `commit_bytes`: the bytes stop being a viable prefix at this offset.
    BytesNotAllowed { offset: usize, after_commits: usize },
    /// A token id outside the vocabulary.
    TokenOutOfRange(TokenId),
    /// The constraint already ended (an end-of-generation token was committed).
    Finished,
    /// A constraint specification no text can satisfy, or one naming unusable triggers
    /// (a triggered constraint's [`TriggerSpec`](super::TriggerSpec)).
    InvalidSpec(String),
    /// Building the subterminal tree of this grammar part (a terminal, or a scanner state's
    /// terminals) took more than the work limit ([`super::tree::MAX_TREE_WORK`] by default): its
    /// tokens split into too many terminal sequences.
    TreeLimit { part: String, limit: u64 },
    /// The compile budget ([`budget`](crate::budget)) ran out: the stage and the limit.
    Budget(budget::BudgetExceeded),
}

impl std::fmt::Display for EngineError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            EngineError::Lexer(e) => write!(f, "cannot build the scanner: {e}"),
            EngineError::TokenNotAllowed {
                token,
                after_commits,
            } => {
                write!(
                    f,
                    "token {} is not allowed by the grammar after {after_commits} commits",
                    token.0
                )
            }
            EngineError::BytesNotAllowed {
                offset,
                after_commits,
            } => write!(
                f,
                "text is not allowed by the grammar at byte {offset} (after {after_commits} commits)"
            ),
            EngineError::TokenOutOfRange(t) => {
                write!(f, "token id {} is outside the vocabulary", t.0)
            }
            EngineError::Finished => write!(f, "the constraint has already ended"),
            EngineError::InvalidSpec(m) => write!(f, "invalid constraint specification: {m}"),
            EngineError::Budget(e) => write!(f, "{e}"),
            EngineError::TreeLimit { part, limit } => write!(
                f,
                "building the token tree of {part} took more than {limit} steps: vocabulary tokens split into too many sequences of its terminals (overlapping short terminals repeated, e.g. \"a\" | \"aa\" in a loop); merge them into one terminal or make them distinct"
            ),
        }
    }
}
impl std::error::Error for EngineError {}

impl From<LexerError> for EngineError {
    fn from(e: LexerError) -> Self {
        match e {
            LexerError::Budget(b) => EngineError::Budget(b),
            e => EngineError::Lexer(e),
        }
    }
}

impl From<budget::BudgetExceeded> for EngineError {
    fn from(e: budget::BudgetExceeded) -> Self {
        EngineError::Budget(e)
    }
}
