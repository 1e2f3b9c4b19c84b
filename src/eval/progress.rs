//! Progress on stderr: samples done, ETA and running accuracy per method.
//!
//! On a terminal this is an `indicatif` bar (plain, uncoloured when `NO_COLOR` is set). When
//! stderr is not a terminal (a log file, CI) a bar's redraws would be noise, so a plain line is
//! printed every 5% instead. Disabled entirely when `enabled` is false (tests, `--quiet`).
//! Progress never goes to stdout, which is reserved for the result. Either display starts at
//! 0/N before the first sample runs.

use super::method::Method;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::time::Instant;

enum Display {
    Off,
    Bar(ProgressBar),
    Lines { every: u64, started: Instant },
}

/// Progress of one run.
pub struct Progress {
    display: Display,
    total: u64,
    done: u64,
    /// Of `done`, how many were finished by an earlier (resumed) run: excluded from the rate.
    resumed: u64,
    /// Running (correct, scored) per method, in run order.
    tally: Vec<(Method, u64, u64)>,
}

impl Progress {
    pub fn new(total: u64, methods: &[Method], enabled: bool) -> Progress {
        let display = if !enabled {
            Display::Off
        } else if std::io::stderr().is_terminal() {
            let colour = std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
            let template = if colour {
                "{spinner:.green} [{elapsed_precise}] {bar:30.cyan/blue} {pos}/{len} ETA {eta} {msg}"
            } else {
                "[{elapsed_precise}] {bar:30} {pos}/{len} ETA {eta} {msg}"
            };
            let bar = ProgressBar::with_draw_target(Some(total), ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template(template)
                    .expect("valid template")
                    .progress_chars("=> "),
            );
            // Drawn at once, at 0/N: the first sample can take a while (model warm-up, long
            // prompts), and a blank line until then looks like a hang.
            bar.tick();
            Display::Bar(bar)
        } else {
            eprintln!("[eval] 0/{total}");
            Display::Lines {
                every: (total / 20).max(1),
                started: Instant::now(),
            }
        };
        Progress {
            display,
            total,
            done: 0,
            resumed: 0,
            tally: methods.iter().map(|&m| (m, 0, 0)).collect(),
        }
    }

    /// One (sample, method) finished by an earlier run (`--resume`): counted in the position
    /// and the accuracies, not in the rate the ETA is computed from.
    pub fn record_resumed(&mut self, method: Method, correct: bool) {
        self.resumed += 1;
        self.record(method, correct);
        if let Display::Bar(bar) = &self.display {
            bar.reset_eta();
        }
    }

    /// One (sample, method) finished.
    pub fn record(&mut self, method: Method, correct: bool) {
        self.done += 1;
        if let Some(t) = self.tally.iter_mut().find(|t| t.0 == method) {
            t.1 += correct as u64;
            t.2 += 1;
        }
        match &self.display {
            Display::Off => {}
            Display::Bar(bar) => {
                bar.set_position(self.done);
                bar.set_message(self.accuracy_line());
            }
            Display::Lines { every, started } => {
                if self.done > self.resumed && (self.done % every == 0 || self.done == self.total) {
                    let elapsed = started.elapsed().as_secs_f64();
                    let fresh = self.done - self.resumed;
                    let remaining = self.total.saturating_sub(self.done) as f64;
                    let eta = if fresh > 0 {
                        elapsed / fresh as f64 * remaining
                    } else {
                        0.0
                    };
                    eprintln!(
                        "[eval] {}/{} ETA {:.0}s  acc: {}",
                        self.done,
                        self.total,
                        eta,
                        self.accuracy_line()
                    );
                }
            }
        }
    }

    /// `none 0.40  domino 0.42 …` for the methods seen so far.
    pub fn accuracy_line(&self) -> String {
        self.tally
            .iter()
            .filter(|t| t.2 > 0)
            .map(|(m, c, n)| format!("{m} {:.2}", *c as f64 / *n as f64))
            .collect::<Vec<_>>()
            .join("  ")
    }

    pub fn finish(&mut self) {
        if let Display::Bar(bar) = &self.display {
            bar.finish_and_clear();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn running_accuracy_per_method() {
        let mut p = Progress::new(6, &[Method::None, Method::DOMINO, Method::Naive], false);
        p.record_resumed(Method::None, true);
        p.record(Method::None, false);
        p.record(Method::DOMINO, true);
        assert_eq!(p.accuracy_line(), "none 0.50  domino 1.00");
        assert_eq!((p.done, p.resumed), (3, 1));
    }
}
