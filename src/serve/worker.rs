//! The generation slots: worker threads that own llama.cpp contexts, fed from one bounded
//! queue.
//!
//! llama.cpp objects must stay on the thread that uses them (a context is not `Send` across
//! an `.await`), so each slot is a plain `std::thread` holding one [`Session`] over the one
//! loaded [`Model`] (weights shared, one KV cache per slot, `--ctx-size / --parallel`
//! positions each, as llama-server splits its context). The HTTP side turns a request into
//! a [`Job`] and [`Pool::submit`]s it; a free slot takes it from the queue, runs it through
//! decode's generation loop, and streams [`Event`]s back over the job's own channel. A
//! full queue refuses the job at once (503 with `Retry-After`).
//!
//! Slots run side by side, each with its own forward passes: this is *not* continuous
//! batching (one context, one sequence id per slot, one batch per step across slots), which
//! needs multi-sequence support in the runtime; the README says so.
//!
//! Each job runs through decode's one loop ([`sequence::run`]) with an observer that
//! streams its text and a [`Control`] that holds the stop strings and the job's cancel flag.
//! A job ends early, with what it has produced so far, when a stop string appears (the text
//! before it is kept, the stop string is not sent), when `--timeout` passes (the observer
//! raises the flag; the partial result is flagged `Finish::Timeout`), or when the client
//! goes away (the HTTP side's [`CancelOnDrop`] raises the flag: the slot is freed at the
//! loop's next step). A panic inside a job is caught, answered
//! 500, and the slot goes on with a cleared context.

use super::error::ApiError;
use super::metrics::Metrics;
use crate::decode::draft_model::DraftModel;
use crate::decode::draft_policy::{DraftPolicy, DraftTuner};
use crate::decode::methods::{Decoder, DecoderConfig, Method};
use crate::decode::methods::{EngineGrammar, TOKEN_HEALING_MAX_BACK, engine_constraint};
use crate::decode::opportunistic::Chooser;
use crate::decode::{
    ChoiceRule, Control, EngineDecodeOptions, FinishReason, GenerationRequest, GenerationStats,
    Sampler, SamplingConfig, Sequence, TokenEvent, Utf8Stream, sequence,
};
use crate::engine::healing::{HealedConstraint, healing_plan};
use crate::engine::{Options, TokenConstraint};
use crate::runtime::{Model, Session, SessionOptions};
use crate::vocab::TokenId;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Instant;
use tokio::sync::mpsc::UnboundedSender;

/// How a job's output is constrained.
#[derive(Clone, Debug)]
pub enum JobConstraint {
    /// Free text.
    None,
    /// The engine, with a grammar from the cache or tagged regions (tool calls, reasoning)
    /// (`key` is its content key).
    Engine { grammar: EngineGrammar, key: u64 },
    /// llama.cpp's own grammar sampler (`method: llama-grammar`), built per request.
    LlamaGrammar(Box<DecoderConfig>),
}

/// Decoding settings of one job (the server's flags, overridden by the request's `domino`
/// object).
#[derive(Clone, Debug, PartialEq)]
pub struct DecodeSettings {
    pub method: Method,
    pub k: Option<u32>,
    pub opportunistic: bool,
    pub draft: usize,
    pub draft_threshold: f32,
    pub draft_policy: DraftPolicy,
}

/// One generation to run.
pub struct Job {
    pub prompt: Vec<TokenId>,
    pub max_tokens: usize,
    pub sampling: SamplingConfig,
    pub logprobs: bool,
    /// Stop strings: generation ends before the first of them.
    pub stop: Vec<String>,
    pub constraint: JobConstraint,
    pub decode: DecodeSettings,
    /// Token healing of the prompt's end (raw prompts only; see [`crate::engine::healing`]).
    pub token_healing: bool,
    /// `--timeout`: past it the job ends with its partial result.
    pub deadline: Option<Instant>,
    /// Raised when the client goes away (see [`CancelOnDrop`]) or the deadline passes: the
    /// loop stops at its next step.
    pub cancel: Arc<AtomicBool>,
    pub events: UnboundedSender<Event>,
}

/// Why a job ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Finish {
    /// An end-of-generation token.
    Eos,
    /// The grammar allows nothing more.
    GrammarEnd,
    /// The token limit or the context's end.
    Length,
    /// This stop string appeared.
    Stop(String),
    /// `--timeout` passed: the result is partial.
    Timeout,
    /// The client went away.
    Cancelled,
}

/// What a finished job produced.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The text, without a stop string that ended it.
    pub text: String,
    pub tokens: Vec<TokenId>,
    /// Per-token log-probabilities, when asked for and the generation ran to its end.
    pub logprobs: Vec<f32>,
    pub finish: Finish,
    pub stats: GenerationStats,
}

/// Raises a job's cancel flag when dropped: the HTTP side holds one for as long as it wants
/// the job's answer (a handler dropped by a closed connection, an SSE stream whose client
/// left), so the slot is freed at the loop's next step.
pub struct CancelOnDrop(pub Arc<AtomicBool>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// What a slot sends back while it runs a job.
#[derive(Debug)]
pub enum Event {
    /// New text (never splits a UTF-8 character; held back while it may start a stop string).
    Delta(String),
    Done(Outcome),
    Failed(ApiError),
}

/// Jobs not yet taken by a slot, and how many slots are running one. A slot counts as free
/// from its start and again as soon as its job's answer is ready (before the answer is sent),
/// so a client that sends its next request the moment it has an answer finds the slot free.
#[derive(Default)]
struct Queue {
    jobs: VecDeque<Job>,
    busy_slots: usize,
}

impl Queue {
    /// Jobs that no free slot will take at once.
    fn waiting(&self, slots: usize) -> usize {
        self.jobs
            .len()
            .saturating_sub(slots.saturating_sub(self.busy_slots))
    }
}

/// The queue and the slots that serve it (see the module doc).
pub struct Pool {
    queue: Mutex<Queue>,
    ready: Condvar,
    capacity: usize,
    slots: usize,
    metrics: Arc<Metrics>,
}

impl Pool {
    /// Start `slots` worker threads over `model`, each with a context of `options`, and a
    /// queue of at most `capacity` waiting jobs. Fails if a context cannot be created.
    pub fn start(
        model: Arc<Model>,
        options: SessionOptions,
        slots: usize,
        capacity: usize,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Arc<Pool>> {
        let pool = Arc::new(Pool {
            queue: Mutex::new(Queue::default()),
            ready: Condvar::new(),
            capacity,
            slots: slots.max(1),
            metrics,
        });
        let (started_tx, started_rx) = std::sync::mpsc::channel();
        for slot in 0..pool.slots {
            let (pool, model, options, started) = (
                pool.clone(),
                model.clone(),
                options.clone(),
                started_tx.clone(),
            );
            std::thread::Builder::new()
                .name(format!("domino-slot-{slot}"))
                .spawn(move || pool.serve_slot(&model, options, started))?;
        }
        drop(started_tx);
        for started in started_rx {
            started.map_err(|e| anyhow::anyhow!("cannot start a generation slot: {e}"))?;
        }
        Ok(pool)
    }

    pub fn slots(&self) -> usize {
        self.slots
    }

    /// Hand a job to an idle slot or queue it; refuse it with 503 when every slot is busy
    /// and `capacity` jobs are already waiting.
    pub fn submit(&self, job: Job) -> Result<(), ApiError> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        let free = self.slots.saturating_sub(queue.busy_slots);
        if queue.jobs.len() >= self.capacity + free {
            return Err(ApiError::queue_full(queue.waiting(self.slots)));
        }
        queue.jobs.push_back(job);
        self.metrics
            .queued
            .store(queue.waiting(self.slots) as u64, Ordering::Relaxed);
        drop(queue);
        self.ready.notify_one();
        Ok(())
    }

    fn next_job(&self) -> Job {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(job) = queue.jobs.pop_front() {
                queue.busy_slots += 1;
                self.metrics
                    .queued
                    .store(queue.waiting(self.slots) as u64, Ordering::Relaxed);
                return job;
            }
            queue = self.ready.wait(queue).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A slot's job is done: the slot is free for the next one.
    fn release_slot(&self) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.busy_slots = queue.busy_slots.saturating_sub(1);
    }

    fn serve_slot(
        &self,
        model: &Model,
        options: SessionOptions,
        started: std::sync::mpsc::Sender<Result<(), String>>,
    ) {
        let mut session = match model.session(options) {
            Ok(s) => {
                let _ = started.send(Ok(()));
                s
            }
            Err(e) => {
                let _ = started.send(Err(e.to_string()));
                return;
            }
        };
        drop(started);
        let mut learned = Learned::default();
        loop {
            let job = self.next_job();
            if job.events.is_closed() || job.cancel.load(Ordering::Relaxed) {
                self.metrics
                    .requests_cancelled
                    .fetch_add(1, Ordering::Relaxed);
                self.release_slot();
                continue;
            }
            self.metrics.processing.fetch_add(1, Ordering::Relaxed);
            session.clear();
            let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                run_job(&mut session, &mut learned, &job)
            }));
            let event = match run {
                Ok(Ok(outcome)) => {
                    self.metrics.record(&outcome.stats);
                    match outcome.finish {
                        Finish::Cancelled => {
                            self.metrics
                                .requests_cancelled
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        Finish::Timeout => {
                            self.metrics
                                .requests_timed_out
                                .fetch_add(1, Ordering::Relaxed);
                        }
                        _ => {}
                    }
                    Event::Done(outcome)
                }
                Ok(Err(e)) => {
                    self.metrics.requests_failed.fetch_add(1, Ordering::Relaxed);
                    Event::Failed(e)
                }
                Err(panic) => {
                    self.metrics.requests_failed.fetch_add(1, Ordering::Relaxed);
                    let what = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "unknown panic".into());
                    Event::Failed(ApiError::internal(format!(
                        "the generation panicked: {what}"
                    )))
                }
            };
            session.clear();
            self.metrics.processing.fetch_sub(1, Ordering::Relaxed);
            self.release_slot();
            let _ = job.events.send(event);
        }
    }
}

/// What a slot keeps learning across jobs: draft counts per grammar, and the draft policy's
/// cost model per policy.
#[derive(Default)]
struct Learned {
    drafts: HashMap<u64, DraftModel>,
    tuners: Vec<DraftTuner>,
}

/// Draft counts of at most this many grammars are kept per slot (then they start afresh).
const MAX_DRAFT_MODELS: usize = 64;

impl Learned {
    fn parts(&mut self, key: u64, policy: DraftPolicy) -> (&mut DraftModel, &mut DraftTuner) {
        if !self.drafts.contains_key(&key) && self.drafts.len() >= MAX_DRAFT_MODELS {
            self.drafts.clear();
        }
        let drafts = self
            .drafts
            .entry(key)
            .or_insert_with(|| DraftModel::new(key));
        let index = match self.tuners.iter().position(|t| t.policy == policy) {
            Some(i) => i,
            None => {
                self.tuners.push(DraftTuner::new(policy));
                self.tuners.len() - 1
            }
        };
        (drafts, &mut self.tuners[index])
    }
}

/// Text as it streams: UTF-8 completed across tokens, stop strings found across token
/// boundaries, and the tail that may begin a stop string held back until it is decided.
#[derive(Debug, Default)]
pub struct TextTracker {
    utf8: Utf8Stream,
    stop: Vec<String>,
    text: String,
    emitted: usize,
    tokens: Vec<TokenId>,
}

impl TextTracker {
    pub fn new(stop: Vec<String>) -> TextTracker {
        TextTracker {
            stop: stop.into_iter().filter(|s| !s.is_empty()).collect(),
            ..Default::default()
        }
    }

    /// Add a token: the text that may be sent now, and the stop string if one appeared
    /// (the text is then cut before it).
    pub fn push(&mut self, token: TokenId, bytes: &[u8]) -> (String, Option<String>) {
        self.tokens.push(token);
        self.utf8.push(bytes, &mut self.text);
        let first_stop = self
            .stop
            .iter()
            .filter_map(|s| self.text.find(s.as_str()).map(|at| (at, s)))
            .min_by_key(|(at, _)| *at);
        if let Some((at, word)) = first_stop {
            let word = word.clone();
            let cut = at.max(self.emitted);
            let delta = self.text[self.emitted..cut].to_string();
            self.text.truncate(cut);
            self.emitted = cut;
            return (delta, Some(word));
        }
        let mut keep = self.text.len();
        for s in &self.stop {
            if let Some(h) = (1..s.len())
                .rev()
                .find(|&h| s.is_char_boundary(h) && self.text.ends_with(&s[..h]))
            {
                keep = keep.min(self.text.len() - h);
            }
        }
        let keep = keep.max(self.emitted);
        let delta = self.text[self.emitted..keep].to_string();
        self.emitted = keep;
        (delta, None)
    }

    /// End of generation without a stop string: whatever was held back.
    pub fn finish(&mut self) -> String {
        self.utf8.finish(&mut self.text);
        let delta = self.text[self.emitted..].to_string();
        self.emitted = self.text.len();
        delta
    }
}

/// A job's engine constraint, its draft key, and whether it is triggered.
type EngineJob = (Box<dyn TokenConstraint>, u64, bool);

fn run_job(
    session: &mut Session<'_>,
    learned: &mut Learned,
    job: &Job,
) -> Result<Outcome, ApiError> {
    let mut request = GenerationRequest {
        prompt: job.prompt.clone(),
        max_tokens: job.max_tokens,
        sampling: job.sampling.clone(),
        logprobs: job.logprobs,
    };
    let control = Control::cancelled_by(&job.cancel).with_stop_strings(&job.stop);
    let mut tracker = TextTracker::new(job.stop.clone());
    let mut stop_word = None;
    let mut timed_out = false;
    let result = {
        let mut observer = |event: &TokenEvent<'_>| -> anyhow::Result<()> {
            let (delta, stop) = tracker.push(event.token, event.bytes);
            if stop.is_some() {
                stop_word = stop;
            }
            if !delta.is_empty() && job.events.send(Event::Delta(delta)).is_err() {
                job.cancel.store(true, Ordering::Relaxed);
            }
            if job.deadline.is_some_and(|d| Instant::now() >= d) {
                timed_out = true;
                job.cancel.store(true, Ordering::Relaxed);
            }
            Ok(())
        };
        let model = session.model();
        let vocab = model.vocabulary();
        let d = &job.decode;
        let (healed_n, healed) =
            if job.token_healing && !matches!(job.constraint, JobConstraint::LlamaGrammar(_)) {
                healing_plan(&vocab, &request.prompt, TOKEN_HEALING_MAX_BACK)
            } else {
                (0, Vec::new())
            };
        let healing = healed_n > 0 && healed_n < request.prompt.len();
        if healing {
            request.prompt.truncate(request.prompt.len() - healed_n);
        }
        let lookahead = if d.method == Method::Naive {
            Some(0)
        } else {
            d.k
        };
        let options = Options {
            lookahead,
            ..Options::default()
        };
        // The engine's constraint (plain or triggered), if any.
        let engine: anyhow::Result<Option<EngineJob>> = match &job.constraint {
            JobConstraint::Engine { grammar, key } => engine_constraint(grammar, &vocab, options)
                .map(|c| Some((c, *key, matches!(grammar, EngineGrammar::Triggered(_))))),
            _ => Ok(None),
        };
        match (&job.constraint, engine) {
            (_, Err(e)) => Err(e),
            (JobConstraint::LlamaGrammar(config), _) => Decoder::new(config, model)
                .and_then(|mut decoder| decoder.run(session, &request, &control, &mut observer)),
            (JobConstraint::None, Ok(None)) if !healing => {
                let rule = ChoiceRule::Free(Sampler::new(request.sampling.clone()));
                Sequence::new(vocab, &request, rule)
                    .and_then(|seq| sequence::run(session, seq, &control, &mut observer))
            }
            (_, Ok(engine)) => {
                let (inner, key, triggered) = match engine {
                    Some((c, key, triggered)) => (Some(c), key, triggered),
                    None => (None, 0, false),
                };
                let mut constraint: Box<dyn TokenConstraint> = match (healing, inner) {
                    (true, inner) => Box::new(HealedConstraint::new(healed.clone(), inner, &vocab)),
                    (false, Some(c)) => c,
                    (false, None) => unreachable!("free jobs without healing are handled above"),
                };
                let opts = EngineDecodeOptions {
                    // Free text must be the unconstrained model's: sample first.
                    opportunistic: d.opportunistic || triggered,
                    draft: d.draft,
                    draft_threshold: d.draft_threshold,
                    template: d.method == Method::Template,
                };
                let (drafts, tuner) = learned.parts(key, d.draft_policy);
                let rule = ChoiceRule::Engine {
                    constraint: &mut *constraint,
                    chooser: Chooser::new(
                        request.sampling.clone(),
                        vocab.len(),
                        opts.opportunistic,
                    ),
                    drafts,
                    tuner,
                    opts,
                };
                Sequence::new(vocab.clone(), &request, rule)
                    .map(|seq| {
                        if healing {
                            seq.healed(healed_n, &healed)
                        } else {
                            seq
                        }
                    })
                    .and_then(|seq| sequence::run(session, seq, &control, &mut observer))
            }
        }
    };
    let result = result.map_err(|e| ApiError::from_anyhow(&e, "prompt"))?;
    let finish = match result.finish_reason {
        FinishReason::Eos => Finish::Eos,
        FinishReason::Length => Finish::Length,
        FinishReason::GrammarEnd => Finish::GrammarEnd,
        FinishReason::Stop => Finish::Stop(
            stop_word
                .clone()
                .or_else(|| job.stop.first().cloned())
                .unwrap_or_default(),
        ),
        FinishReason::Cancelled if timed_out => Finish::Timeout,
        FinishReason::Cancelled => Finish::Cancelled,
    };
    if stop_word.is_none() {
        let tail = tracker.finish();
        if !tail.is_empty() {
            let _ = job.events.send(Event::Delta(tail));
        }
    }
    Ok(Outcome {
        text: tracker.text,
        tokens: result.tokens,
        logprobs: result.logprobs,
        finish,
        stats: result.stats,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn feed(stop: &[&str], pieces: &[&str]) -> (Vec<String>, Option<String>, String) {
        let mut t = TextTracker::new(stop.iter().map(|s| s.to_string()).collect());
        let mut deltas = Vec::new();
        for (i, p) in pieces.iter().enumerate() {
            let (d, stop) = t.push(TokenId(i as u32), p.as_bytes());
            deltas.push(d);
            if stop.is_some() {
                return (deltas, stop, t.text);
            }
        }
        deltas.push(t.finish());
        (deltas, None, t.text)
    }

    #[test]
    fn a_stop_string_across_tokens_is_cut_and_never_sent() {
        let (deltas, stop, text) = feed(&["END"], &["abc E", "N", "D more"]);
        assert_eq!(stop.as_deref(), Some("END"));
        assert_eq!(text, "abc ");
        assert_eq!(deltas.concat(), "abc ");
        assert_eq!(deltas[0], "abc ", "the `E` is held back");
    }

    #[test]
    fn held_back_text_is_released_when_it_is_not_a_stop() {
        let (deltas, stop, text) = feed(&["END"], &["x E", "Nd", " y"]);
        assert_eq!(stop, None);
        assert_eq!(text, "x ENd y");
        assert_eq!(deltas.concat(), text);
        assert_eq!(deltas[0], "x ");
    }
}
