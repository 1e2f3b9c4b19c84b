//! A per-constraint compile budget: a time and memory limit that fails closed with an error.
//!
//! # Why
//! Some grammars are cheap to write and ruinous to compile (a 10 MB grammar, a schema bound of
//! a billion items, nested bounded repeats). A server compiles whatever its clients send, and a
//! batch check runs thousands of schemas: neither may hang or be killed by the kernel for one
//! input. The fix is not to guess which inputs are dangerous but to *measure* the compilation
//! of each one and stop it when it goes over a budget.
//!
//! # How
//! [`Budget::enter`] arms a budget for the current thread until the returned [`Scope`] is
//! dropped: everything the thread compiles meanwhile — front end, lowering, the scanner and
//! its DFAs, follow sets, parser tables, subterminal trees, the first mask — calls cheap
//! cooperative checkpoints in its loops ([`check`], [`over`]). A checkpoint that finds the
//! deadline passed or the thread's memory grown past the limit records a
//! [`BudgetExceeded`] naming the stage and the limit; the stage returns its error (or stops its
//! loop early, its partial result to be thrown away) and every later checkpoint fails at once,
//! so the whole compilation unwinds within milliseconds. The thread is not killed: it stops.
//!
//! Memory is *measured*, not estimated: the `domino` binary installs a counting global
//! allocator that keeps each thread's net allocated bytes in a const-initialised thread-local
//! counter and hands the engine a probe ([`set_memory_probe`]). A budget's memory use is the
//! growth of that counter since [`Budget::enter`], so memory freed on another thread is not
//! credited and memory allocated by other threads is not charged. Without a probe (a library
//! user who installs no counting allocator) the memory limit cannot be enforced:
//! [`memory_measured`] says so, and only the time limit applies.
//!
//! The regex DFAs built under a budget also take their size limits from it
//! ([`dfa_size_limit`]): regex-automata then refuses an oversized DFA itself.
//!
//! Nested scopes keep the tighter of the two limits. With no scope armed every checkpoint is
//! a thread-local read and a branch.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A time and memory limit for one compilation (see the module doc). `None` = unlimited.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Budget {
    /// Wall-clock time from [`Budget::enter`].
    pub time: Option<Duration>,
    /// Net bytes the compiling thread may allocate (enforced only with a memory probe).
    pub max_bytes: Option<u64>,
}

/// The default time budget of the command line: long enough for the largest legitimate
/// grammars we know (the slowest JSONSchemaBench schema compiles in about 10 s on a loaded
/// 2-core machine, a 100,000-value enum in about 2 s), short enough that a pathological one
/// is refused within a minute.
pub const DEFAULT_TIME: Duration = Duration::from_secs(30);

/// The default memory budget: 2 GiB. Half of a 4 GB address-space cap (`ulimit -v 4000000`):
/// checkpoints notice growth between two of them, and the model, the binary and thread stacks
/// take address space too, so a capped process gets the error, not an abort. The largest
/// legitimate grammars we know stay under 1 GB (100,000 literal alternatives: ~1 GB peak).
pub const DEFAULT_MAX_BYTES: u64 = 2 << 30;

impl Budget {
    /// No limit at all.
    pub const UNLIMITED: Budget = Budget {
        time: None,
        max_bytes: None,
    };

    /// The command line's defaults ([`DEFAULT_TIME`], [`DEFAULT_MAX_BYTES`]).
    pub const DEFAULT: Budget = Budget {
        time: Some(DEFAULT_TIME),
        max_bytes: Some(DEFAULT_MAX_BYTES),
    };

    /// Arm this budget on the current thread until the scope is dropped.
    pub fn enter(&self) -> Scope {
        let now = Instant::now();
        let deadline = self.time.and_then(|t| now.checked_add(t));
        let base = probe();
        let prev = ACTIVE.with(|a| {
            let mut a = a.borrow_mut();
            let prev = a.clone();
            let mut next = Active {
                budget: *self,
                deadline,
                mem_base: base,
                exceeded: None,
            };
            if let Some(outer) = &prev {
                // Keep the tighter limits (an outer scope's memory limit counts from its base).
                if let Some(d) = outer.deadline
                    && next.deadline.is_none_or(|n| d < n)
                {
                    next.deadline = Some(d);
                    next.budget.time = outer.budget.time;
                }
                if let Some(m) = outer.budget.max_bytes {
                    let left = (m as i64 - (base - outer.mem_base)).max(0) as u64;
                    if next.budget.max_bytes.is_none_or(|n| left < n) {
                        next.budget.max_bytes = Some(m);
                        next.mem_base = outer.mem_base;
                    }
                }
                next.exceeded = outer.exceeded.clone();
            }
            EXCEEDED_HINT.with(|h| h.set(next.exceeded.is_some()));
            *a = Some(next);
            prev
        });
        TICKS.with(|t| t.set(0));
        Scope { prev }
    }

    /// The budget armed on this thread, if any (a cache records it with what it compiled).
    pub fn current() -> Option<Budget> {
        ACTIVE.with(|a| a.borrow().as_ref().map(|a| a.budget))
    }
}

impl fmt::Display for Budget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.time {
            Some(t) => write!(f, "{:.1} s", t.as_secs_f64())?,
            None => f.write_str("no time limit")?,
        }
        match self.max_bytes {
            Some(b) => write!(f, ", {} MB", b >> 20),
            None => f.write_str(", no memory limit"),
        }
    }
}

/// Which limit a compilation went over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The time limit (the budget's `time`).
    Time(Duration),
    /// The memory limit, and the net bytes the thread had allocated when it was noticed.
    Memory { limit: u64, used: u64 },
}

/// A compilation stopped by its budget: what was being built and which limit it went over.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BudgetExceeded {
    /// The stage, e.g. `"lowering"`, `"the scanner"`, `"follow sets"`, `"the token trees"`.
    pub stage: &'static str,
    pub limit: Limit,
}

impl fmt::Display for BudgetExceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.limit {
            Limit::Time(t) => write!(
                f,
                "compiling the constraint took longer than its time budget of {:.1} s (while building {}); raise it with --compile-timeout (server: --grammar-timeout)",
                t.as_secs_f64(),
                self.stage
            ),
            Limit::Memory { limit, used } => write!(
                f,
                "compiling the constraint needed more than its memory budget of {} MB ({} MB while building {}); raise it with --compile-memory (server: --grammar-memory)",
                limit >> 20,
                used >> 20,
                self.stage
            ),
        }
    }
}

impl std::error::Error for BudgetExceeded {}

/// The armed scope; dropping it restores the previous one (see [`Budget::enter`]).
#[must_use = "the budget is armed only while the scope lives"]
pub struct Scope {
    prev: Option<Active>,
}

impl Scope {
    /// The limit this scope went over, if it did.
    pub fn exceeded(&self) -> Option<BudgetExceeded> {
        exceeded()
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        let prev = self.prev.take();
        // Drop can run during unwinding or thread exit: never panic here.
        let _ = ACTIVE.try_with(|a| {
            if let Ok(mut a) = a.try_borrow_mut() {
                let hint = prev.as_ref().is_some_and(|p| p.exceeded.is_some());
                let _ = EXCEEDED_HINT.try_with(|h| h.set(hint));
                *a = prev;
            }
        });
    }
}

#[derive(Clone)]
struct Active {
    budget: Budget,
    deadline: Option<Instant>,
    mem_base: i64,
    exceeded: Option<BudgetExceeded>,
}

thread_local! {
    static ACTIVE: RefCell<Option<Active>> = const { RefCell::new(None) };
    static TICKS: Cell<u32> = const { Cell::new(0) };
}

static PROBE: AtomicUsize = AtomicUsize::new(0);

/// Install the memory probe: a function returning the current thread's net allocated bytes
/// (allocations minus frees), e.g. from a counting global allocator. It must not allocate.
pub fn set_memory_probe(probe: fn() -> i64) {
    PROBE.store(probe as usize, Ordering::Release);
}

/// Whether memory limits are enforced (a probe is installed); without one only time is.
pub fn memory_measured() -> bool {
    PROBE.load(Ordering::Acquire) != 0
}

fn probe() -> i64 {
    match PROBE.load(Ordering::Acquire) {
        0 => 0,
        p => {
            // SAFETY: only `set_memory_probe` stores here, always a `fn() -> i64`.
            let f: fn() -> i64 = unsafe { std::mem::transmute::<usize, fn() -> i64>(p) };
            f()
        }
    }
}

/// A full checkpoint: `Err` when the armed budget (if any) is exceeded, naming `stage`.
/// Costs a clock read; in hot loops use [`over`], which looks only every 256th call.
pub fn check(stage: &'static str) -> Result<(), BudgetExceeded> {
    let r = ACTIVE.with(|a| {
        let mut a = a.borrow_mut();
        let Some(a) = a.as_mut() else {
            return Ok(());
        };
        if let Some(e) = &a.exceeded {
            return Err(e.clone());
        }
        let limit = if a.deadline.is_some_and(|d| Instant::now() >= d) {
            Some(Limit::Time(a.budget.time.unwrap_or_default()))
        } else if let Some(m) = a.budget.max_bytes
            && memory_measured()
        {
            let used = (probe() - a.mem_base).max(0) as u64;
            (used > m).then_some(Limit::Memory { limit: m, used })
        } else {
            None
        };
        match limit {
            None => Ok(()),
            Some(limit) => {
                let e = BudgetExceeded { stage, limit };
                a.exceeded = Some(e.clone());
                Err(e)
            }
        }
    });
    if r.is_err() {
        EXCEEDED_HINT.with(|h| h.set(true));
    }
    r
}

/// A cheap checkpoint for hot loops: `true` when the budget is exceeded (the caller stops its
/// loop; its stage's caller turns [`exceeded`] into the error). Does the full [`check`] on
/// every 256th call, and at once after the budget has been exceeded.
#[inline]
pub fn over(stage: &'static str) -> bool {
    let n = TICKS.with(|t| {
        let n = t.get().wrapping_add(1);
        t.set(n);
        n
    });
    if n % 256 != 0 && !EXCEEDED_HINT.with(Cell::get) {
        return false;
    }
    check(stage).is_err()
}

thread_local! {
    /// Set once a checkpoint failed on this thread; cleared when a scope is entered or left.
    static EXCEEDED_HINT: Cell<bool> = const { Cell::new(false) };
}

/// The limit the armed budget went over, if any.
pub fn exceeded() -> Option<BudgetExceeded> {
    ACTIVE.with(|a| a.borrow().as_ref().and_then(|a| a.exceeded.clone()))
}

/// `Err` when the armed budget was exceeded by an earlier checkpoint (for a stage that stops
/// its loops with [`over`] and returns no error itself).
pub fn status() -> Result<(), BudgetExceeded> {
    match exceeded() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Whether allocating `bytes` more now would go over the armed memory budget (without a
/// budget or a memory limit: never). Nothing is recorded: a stage with a cheaper way to do its
/// work (an approximation that keeps results exact, e.g. "every terminal may follow every
/// other") asks this before one large allocation that a checkpoint could not catch in time.
pub fn would_exceed(bytes: u64) -> bool {
    ACTIVE.with(|a| {
        let a = a.borrow();
        let Some(a) = a.as_ref() else {
            return false;
        };
        match a.budget.max_bytes {
            Some(m) => {
                let used = (probe() - a.mem_base).max(0) as u64;
                used.saturating_add(bytes) > m
            }
            None => false,
        }
    })
}

/// The size limit for a regex DFA built under the armed budget: what the memory budget has
/// left (at least 1 MB), at most `cap`. Without a memory budget, `cap`.
pub fn dfa_size_limit(cap: usize) -> usize {
    match memory_in_use() {
        Some((m, used)) => (m.saturating_sub(used).max(1 << 20) as usize).min(cap),
        None => cap,
    }
}

/// The armed memory budget and the bytes the thread has used under it (0 when memory is not
/// measured); `None` without a memory budget.
fn memory_in_use() -> Option<(u64, u64)> {
    ACTIVE.with(|a| {
        let a = a.borrow();
        let a = a.as_ref()?;
        let max = a.budget.max_bytes?;
        let used = if memory_measured() {
            (probe() - a.mem_base).max(0) as u64
        } else {
            0
        };
        Some((max, used))
    })
}

/// When a regex automaton built with [`dfa_size_limit`]`(cap)` went over its size limit, the
/// budget error to report instead, if the armed memory budget is what made that limit smaller
/// than `cap` (the limit is then the memory left, so the budget, not the automaton's own cap,
/// is what ran out). `None` when the automaton's own cap applied.
pub fn size_limit_error(cap: usize, stage: &'static str) -> Option<BudgetExceeded> {
    let limit = dfa_size_limit(cap);
    if limit >= cap {
        return None;
    }
    let (max, used) = memory_in_use()?;
    Some(BudgetExceeded {
        stage,
        limit: Limit::Memory {
            limit: max,
            used: used.saturating_add(limit as u64),
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_scope_never_stops() {
        for _ in 0..1000 {
            assert!(!over("x"));
        }
        assert!(check("x").is_ok());
    }

    #[test]
    fn a_passed_deadline_stops_and_sticks() {
        let b = Budget {
            time: Some(Duration::ZERO),
            max_bytes: None,
        };
        let s = b.enter();
        let e = check("the scanner").unwrap_err();
        assert_eq!(e.stage, "the scanner");
        assert!(matches!(e.limit, Limit::Time(_)));
        // Sticky: later stages report the first one.
        assert_eq!(check("lowering").unwrap_err().stage, "the scanner");
        assert!(over("lowering"));
        assert!(s.exceeded().is_some());
        drop(s);
        assert!(!over("x"), "the scope ended");
        assert!(check("x").is_ok(), "the scope ended");
    }

    #[test]
    fn nested_scopes_keep_the_tighter_limit() {
        let outer = Budget {
            time: Some(Duration::ZERO),
            max_bytes: None,
        }
        .enter();
        {
            let _inner = Budget {
                time: Some(Duration::from_secs(100)),
                max_bytes: None,
            }
            .enter();
            assert!(check("inner").is_err());
        }
        drop(outer);
    }
}
