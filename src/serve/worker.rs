//! The generation slots: one thread that owns one llama.cpp context holding a sequence per
//! slot, fed from one bounded queue, decoding every busy slot's tokens together in one
//! forward pass per step (continuous batching).
//!
//! llama.cpp objects must stay on the thread that uses them (a context is not `Send` across
//! an `.await`), so the slots live on one plain `std::thread` with one [`SharedSession`] over
//! the one loaded [`Model`]: one KV cache, `--ctx-size / --parallel` positions per slot as
//! llama-server splits its context, llama.cpp's sequence id = the slot's index. The HTTP side
//! turns a request into a [`Job`] and [`Pool::submit`]s it.
//!
//! **A step.** Free slots take waiting jobs (a new request joins the running batch at the next
//! step; the thread sleeps only when no slot is busy). Every busy slot's [`SequenceRun`] then
//! advances to its next pass — verifying the drafts of the last one, choosing and streaming a
//! token, laying out its next tokens (the token, forced text, drafts; a new job's prompt) —
//! and the parts of all slots go through llama.cpp in ONE batch. Drafts of several slots are
//! verified in that same pass. Each slot reads its logits by index within its own part, so
//! what a slot generates is the same loop as `domino generate` runs ([`crate::decode::sequence::run`] drives
//! the same [`SequenceRun`] over a context of its own). A full queue refuses the job at once
//! (503 with `Retry-After`).
//!
//! A job ends early, with what it has produced so far, when a stop string appears (the text
//! before it is kept, the stop string is not sent), when `--timeout` passes (the observer
//! raises the flag; the partial result is flagged `Finish::Timeout`), or when the client
//! goes away (the HTTP side's [`CancelOnDrop`] raises the flag: the slot is freed at the
//! next step). A panic while advancing one slot is caught and answered 500; that slot's
//! sequence is cleared and the others go on. A failed forward pass fails the jobs in it.
//!
//! Draft counts are learned per grammar across jobs: a job starts from a copy of its grammar's
//! counts and writes its own back when it ends (concurrent jobs of one grammar: the last to
//! end wins). The draft policy's cost model does not learn from shared passes (their time is
//! not one slot's); it keeps what it knows.

use super::error::ApiError;
use super::metrics::Metrics;
use crate::decode::draft_model::DraftModel;
use crate::decode::draft_policy::{DraftPolicy, DraftTuner};
use crate::decode::methods::{Decoder, DecoderConfig, Method};
use crate::decode::methods::{EngineGrammar, TOKEN_HEALING_MAX_BACK, engine_constraint};
use crate::decode::opportunistic::Chooser;
use crate::decode::sequence::logits_at;
use crate::decode::{
    ChoiceRule, Control, EngineDecodeOptions, FinishReason, GenerationRequest, GenerationResult,
    GenerationStats, Held, Sampler, SamplingConfig, Sequence, SequenceRun, TokenEvent, Utf8Stream,
};
use crate::engine::healing::{HealedConstraint, healing_plan};
use crate::engine::{Options, TokenConstraint};
use crate::runtime::{BatchPart, Model, SessionOptions, SharedSession};
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
    /// Alternatives listed per token (OpenAI `top_logprobs`, llama-server `n_probs`).
    pub top_logprobs: usize,
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
    /// Per token, the most likely tokens there and their log-probabilities (when asked for).
    pub top_logprobs: Vec<Vec<(TokenId, f32)>>,
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
    /// Start the slots' thread: one context of `options` (its positions split evenly between
    /// `slots` sequences) over `model`, and a queue of at most `capacity` waiting jobs. Fails
    /// if the context cannot be created.
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
        let worker = pool.clone();
        std::thread::Builder::new()
            .name("domino-slots".into())
            .spawn(move || worker.serve_slots(&model, options, started_tx))?;
        match started_rx.recv() {
            Ok(Ok(())) => Ok(pool),
            Ok(Err(e)) => Err(anyhow::anyhow!("cannot start the generation slots: {e}")),
            Err(_) => Err(anyhow::anyhow!(
                "cannot start the generation slots: the thread ended"
            )),
        }
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

    /// The next waiting job for a free slot: wait for one when `block`, else `None` when
    /// the queue is empty.
    fn next_job(&self, block: bool) -> Option<Job> {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if let Some(job) = queue.jobs.pop_front() {
                queue.busy_slots += 1;
                self.metrics
                    .queued
                    .store(queue.waiting(self.slots) as u64, Ordering::Relaxed);
                return Some(job);
            }
            if !block {
                return None;
            }
            queue = self.ready.wait(queue).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// A slot's job is done: the slot is free for the next one.
    fn release_slot(&self) {
        let mut queue = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        queue.busy_slots = queue.busy_slots.saturating_sub(1);
    }

    /// The slots' thread (see the module doc).
    fn serve_slots(
        &self,
        model: &Model,
        options: SessionOptions,
        started: std::sync::mpsc::Sender<Result<(), String>>,
    ) {
        let mut shared = match model.shared_session(options, self.slots) {
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
        let mut active: Vec<Option<Active>> = (0..self.slots).map(|_| None).collect();
        let mut positions: Vec<Vec<usize>> = vec![Vec::new(); self.slots];
        let mut ready: Vec<(usize, usize)> = Vec::with_capacity(self.slots);
        loop {
            // Free slots take waiting jobs; sleep only when no slot is busy.
            #[allow(clippy::needless_range_loop)] // `active` is read whole inside the loop
            for slot in 0..self.slots {
                if active[slot].is_some() {
                    continue;
                }
                let idle = active.iter().all(Option::is_none);
                let Some(job) = self.next_job(idle) else {
                    break;
                };
                if job.events.is_closed() || job.cancel.load(Ordering::Relaxed) {
                    self.metrics
                        .requests_cancelled
                        .fetch_add(1, Ordering::Relaxed);
                    self.release_slot();
                    continue;
                }
                match Active::start(job, model, &mut learned) {
                    Ok(a) => {
                        self.metrics.processing.fetch_add(1, Ordering::Relaxed);
                        active[slot] = Some(a);
                    }
                    Err(failed) => {
                        let (job, e) = *failed;
                        self.metrics.requests_failed.fetch_add(1, Ordering::Relaxed);
                        self.release_slot();
                        let _ = job.events.send(Event::Failed(e));
                    }
                }
            }

            // Every busy slot advances to its next pass (or ends).
            ready.clear();
            #[allow(clippy::needless_range_loop)] // an ended job is taken out of `active[slot]`
            for slot in 0..self.slots {
                let Some(a) = active[slot].as_mut() else {
                    continue;
                };
                let step = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                    a.advance(&mut shared, slot)
                }));
                match step {
                    Ok(Ok(Some(need_from))) => ready.push((slot, need_from)),
                    Ok(Ok(None)) => {
                        let a = active[slot].take().expect("busy slot");
                        self.end(Ok(a.finish(&mut learned)), &mut shared, slot);
                    }
                    Ok(Err(e)) => {
                        let a = active[slot].take().expect("busy slot");
                        self.end(Err((a.job, e)), &mut shared, slot);
                    }
                    Err(panic) => {
                        let a = active[slot].take().expect("busy slot");
                        let e = ApiError::internal(format!(
                            "the generation panicked: {}",
                            panic_text(&*panic)
                        ));
                        self.end(Err((a.job, e)), &mut shared, slot);
                    }
                }
            }
            if ready.is_empty() {
                continue;
            }

            // One forward pass for every slot that has tokens.
            for &(slot, need_from) in &ready {
                let len = active[slot].as_ref().expect("ready slot").run.batch().len();
                positions[slot].clear();
                positions[slot].extend(need_from..len);
            }
            let parts: Vec<BatchPart<'_>> = ready
                .iter()
                .map(|&(slot, need_from)| {
                    let tokens = active[slot].as_ref().expect("ready slot").run.batch();
                    BatchPart {
                        seq: slot,
                        tokens,
                        logits: logits_at(need_from, tokens.len(), &positions[slot]),
                    }
                })
                .collect();
            self.metrics.batch_passes.fetch_add(1, Ordering::Relaxed);
            self.metrics
                .batch_sequences
                .fetch_add(parts.len() as u64, Ordering::Relaxed);
            let tokens: usize = parts.iter().map(|p| p.tokens.len()).sum();
            self.metrics
                .batch_tokens
                .fetch_add(tokens as u64, Ordering::Relaxed);
            if let Err(e) = shared.decode(&parts) {
                drop(parts);
                let e = ApiError::internal(format!("llama.cpp could not decode: {e}"));
                for &(slot, _) in &ready {
                    let a = active[slot].take().expect("ready slot");
                    self.end(Err((a.job, e.clone())), &mut shared, slot);
                }
            }
        }
    }

    /// A job ended (or failed): its answer, its metrics, its slot freed and cleared.
    fn end(
        &self,
        outcome: Result<(Job, Outcome), (Job, ApiError)>,
        shared: &mut SharedSession<'_>,
        slot: usize,
    ) {
        shared.clear_seq(slot);
        self.metrics.processing.fetch_sub(1, Ordering::Relaxed);
        let (job, event) = match outcome {
            Ok((job, outcome)) => {
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
                (job, Event::Done(outcome))
            }
            Err((job, e)) => {
                self.metrics.requests_failed.fetch_add(1, Ordering::Relaxed);
                (job, Event::Failed(e))
            }
        };
        self.release_slot();
        let _ = job.events.send(event);
    }
}

fn panic_text(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}

/// What the slots keep learning across jobs: draft counts per grammar, and the draft policy's
/// cost model per policy. A job works on copies and writes them back when it ends.
#[derive(Default)]
struct Learned {
    drafts: HashMap<u64, DraftModel>,
    tuners: Vec<DraftTuner>,
}

/// Draft counts of at most this many grammars are kept (then they start afresh).
const MAX_DRAFT_MODELS: usize = 64;

impl Learned {
    /// Copies of the draft counts of grammar `key` and of the tuner of `policy`.
    fn take(&mut self, key: u64, policy: DraftPolicy) -> (DraftModel, DraftTuner) {
        let drafts = self
            .drafts
            .get(&key)
            .cloned()
            .unwrap_or_else(|| DraftModel::new(key));
        let tuner = self
            .tuners
            .iter()
            .find(|t| t.policy == policy)
            .cloned()
            .unwrap_or_else(|| DraftTuner::new(policy));
        (drafts, tuner)
    }

    /// A job's counts and tuner, kept for the next jobs.
    fn give_back(&mut self, key: u64, drafts: DraftModel, tuner: DraftTuner) {
        if !self.drafts.contains_key(&key) && self.drafts.len() >= MAX_DRAFT_MODELS {
            self.drafts.clear();
        }
        self.drafts.insert(key, drafts);
        match self.tuners.iter_mut().find(|t| t.policy == tuner.policy) {
            Some(t) => *t = tuner,
            None => self.tuners.push(tuner),
        }
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

/// A job that could not start, with the reason.
type ApiErrorFor = Box<(Job, ApiError)>;

/// A job in a slot: its run of the generation loop and the text it has streamed.
struct Active {
    job: Job,
    run: SequenceRun<'static>,
    tracker: TextTracker,
    stop_word: Option<String>,
    timed_out: bool,
    /// The grammar whose draft counts the run learns (engine jobs).
    draft_key: Option<u64>,
}

/// A job's choice rule, its draft-count key (engine jobs), and its token healing (how many
/// prompt tokens were backed off, and their bytes).
type JobRule = (ChoiceRule<'static>, Option<u64>, Option<(usize, Vec<u8>)>);

impl Active {
    /// Build the job's choice rule and run.
    fn start(job: Job, model: &Model, learned: &mut Learned) -> Result<Active, ApiErrorFor> {
        let built = Self::rule(&job, model, learned).and_then(|(rule, draft_key, healed)| {
            let mut request = GenerationRequest {
                prompt: job.prompt.clone(),
                max_tokens: job.max_tokens,
                sampling: job.sampling.clone(),
                logprobs: job.logprobs,
            };
            if let Some((n, _)) = &healed {
                request.prompt.truncate(request.prompt.len() - n);
            }
            let mut seq = Sequence::new(model.vocabulary(), &request, rule)?
                .with_top_logprobs(job.top_logprobs);
            if let Some((n, bytes)) = &healed {
                seq = seq.healed(*n, bytes);
            }
            let control = Control::cancelled_by(&job.cancel).with_stop_strings(&job.stop);
            Ok((SequenceRun::new(seq, &control), draft_key))
        });
        match built {
            Ok((run, draft_key)) => Ok(Active {
                tracker: TextTracker::new(job.stop.clone()),
                job,
                run,
                stop_word: None,
                timed_out: false,
                draft_key,
            }),
            Err(e) => {
                let error = ApiError::from_anyhow(&e, "prompt");
                Err(Box::new((job, error)))
            }
        }
    }

    /// The job's choice rule, owning what it uses: free sampling, llama.cpp's grammar
    /// sampler, or the engine's constraint (plain or triggered), composed with token healing
    /// when the job asks for it and the prompt's end can be healed.
    fn rule(job: &Job, model: &Model, learned: &mut Learned) -> anyhow::Result<JobRule> {
        let d = &job.decode;
        let vocab = model.vocabulary();
        if let JobConstraint::LlamaGrammar(config) = &job.constraint {
            let rule = Decoder::new(config, model)?
                .llama_grammar_rule(model, &job.sampling)?
                .ok_or_else(|| anyhow::anyhow!("internal error: not a llama.cpp grammar"))?;
            return Ok((rule, None, None));
        }
        let (healed_n, healed) = if job.token_healing {
            healing_plan(&vocab, &job.prompt, TOKEN_HEALING_MAX_BACK)
        } else {
            (0, Vec::new())
        };
        let healing = healed_n > 0 && healed_n < job.prompt.len();
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
        let (inner, key, triggered) = match &job.constraint {
            JobConstraint::Engine { grammar, key } => (
                Some(engine_constraint(grammar, &vocab, options)?),
                *key,
                matches!(grammar, EngineGrammar::Triggered(_)),
            ),
            _ => (None, 0, false),
        };
        let constraint: Box<dyn TokenConstraint> = match (healing, inner) {
            (true, inner) => Box::new(HealedConstraint::new(healed.clone(), inner, &vocab)),
            (false, Some(c)) => c,
            (false, None) => {
                return Ok((
                    ChoiceRule::Free(Sampler::new(job.sampling.clone())),
                    None,
                    None,
                ));
            }
        };
        let (drafts, tuner) = learned.take(key, d.draft_policy);
        let opts = EngineDecodeOptions {
            // Free text must be the unconstrained model's: sample first.
            opportunistic: d.opportunistic || triggered,
            draft: d.draft,
            draft_threshold: d.draft_threshold,
            template: d.method == Method::Template,
        };
        let rule = ChoiceRule::Engine {
            constraint: Held::Owned(constraint),
            chooser: Chooser::new(job.sampling.clone(), vocab.len(), opts.opportunistic),
            drafts: Held::Owned(Box::new(drafts)),
            tuner: Held::Owned(Box::new(tuner)),
            opts,
        };
        Ok((rule, Some(key), healing.then_some((healed_n, healed))))
    }

    /// Advance the run to its next pass in slot `slot` of `shared`: `Some(need_from)` when
    /// its batch is to be decoded, `None` when it has ended.
    fn advance(
        &mut self,
        shared: &mut SharedSession<'_>,
        slot: usize,
    ) -> Result<Option<usize>, ApiError> {
        let Active {
            job,
            run,
            tracker,
            stop_word,
            timed_out,
            ..
        } = self;
        let control = Control::cancelled_by(&job.cancel).with_stop_strings(&job.stop);
        let mut observer = |event: &TokenEvent<'_>| -> anyhow::Result<()> {
            let (delta, stop) = tracker.push(event.token, event.bytes);
            if stop.is_some() {
                *stop_word = stop;
            }
            if !delta.is_empty() && job.events.send(Event::Delta(delta)).is_err() {
                job.cancel.store(true, Ordering::Relaxed);
            }
            if job.deadline.is_some_and(|d| Instant::now() >= d) {
                *timed_out = true;
                job.cancel.store(true, Ordering::Relaxed);
            }
            Ok(())
        };
        run.next(&mut shared.slot(slot), &control, &mut observer)
            .map_err(|e| ApiError::from_anyhow(&e, "prompt"))
    }

    /// The ended run's outcome; its draft counts go back to `learned`.
    fn finish(self, learned: &mut Learned) -> (Job, Outcome) {
        let Active {
            job,
            run,
            mut tracker,
            stop_word,
            timed_out,
            draft_key,
        } = self;
        let (result, rule): (GenerationResult, _) = run.finish_with_rule();
        if let (Some(key), ChoiceRule::Engine { drafts, tuner, .. }) = (draft_key, rule)
            && let (Some(drafts), Some(tuner)) = (drafts.into_owned(), tuner.into_owned())
        {
            learned.give_back(key, drafts, tuner);
        }
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
        let outcome = Outcome {
            text: tracker.text,
            tokens: result.tokens,
            logprobs: result.logprobs,
            top_logprobs: result.top_logprobs,
            finish,
            stats: result.stats,
        };
        (job, outcome)
    }
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
