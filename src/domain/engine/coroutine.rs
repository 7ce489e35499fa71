//! The turn as a coroutine: the engine's code is straight-line `async fn`s whose only await is
//! `Run::ask`, and [`TurnRun`] polls that future by hand with a no-op waker. No executor, no
//! thread, no clock: a `Pending` here never means "wait for I/O", only "the turn asked
//! something", and the next poll happens when the caller brings the answer.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};

use super::{answer_kind, EngineError, Run, Step};
use crate::domain::effect::{Answer, Request, TurnOutcome};

/// What `ask` and the driver hand each other: the request the turn waits on, then its answer.
#[derive(Debug, Default)]
pub(super) struct Exchange {
    request: Option<Request>,
    answer: Option<Answer>,
}

/// Shared by the run (inside the future) and its driver. Never contended: the driver touches it
/// only between polls. A mutex rather than a `RefCell` because the run must be `Send`.
pub(super) type Slot = Arc<Mutex<Exchange>>;

fn lock(slot: &Slot) -> MutexGuard<'_, Exchange> {
    // Poisoning needs a panic while the lock is held; the contents are plain data either way.
    slot.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// `ask`'s future: the first poll leaves the request and suspends; a later poll returns the
/// answer the driver put in.
pub(super) struct Ask<'s> {
    slot: &'s Slot,
    request: Option<Request>,
}

impl<'s> Ask<'s> {
    pub(super) fn new(slot: &'s Slot, request: Request) -> Ask<'s> {
        Ask {
            slot,
            request: Some(request),
        }
    }
}

impl Future for Ask<'_> {
    type Output = Answer;

    fn poll(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<Answer> {
        let this = self.get_mut();
        let mut exchange = lock(this.slot);
        if let Some(request) = this.request.take() {
            exchange.request = Some(request);
            return Poll::Pending;
        }
        match exchange.answer.take() {
            Some(answer) => Poll::Ready(answer),
            None => Poll::Pending,
        }
    }
}

type TurnFuture<'a> = Pin<Box<dyn Future<Output = Result<TurnOutcome, EngineError>> + Send + 'a>>;

enum Phase<'a> {
    /// The turn's future; `waiting` once it has asked and not been answered yet.
    Running { turn: TurnFuture<'a>, waiting: bool },
    /// EV-1: a duplicate is done before it starts; the first resume hands this out.
    Finished(Box<TurnOutcome>),
    /// Done or failed: nothing left to run.
    Over,
}

/// A turn in progress (see [`super::Engine::start`]). `Send`, so an async caller may hold it
/// across its own awaits while it performs the requests.
pub struct TurnRun<'a> {
    phase: Phase<'a>,
    slot: Slot,
    /// Every answer fed in, in order: the LC-4 log a fresh run replays to reach this point.
    log: Vec<Answer>,
}

// The pipeline holds a run across `.await`s inside spawned tasks.
const _: () = {
    const fn assert_send<T: Send>() {}
    assert_send::<TurnRun<'static>>();
};

impl<'a> TurnRun<'a> {
    /// The bytes the suspended turn's future takes (test-only: the size guard in tests.rs).
    #[cfg(test)]
    pub(super) fn future_bytes(&self) -> usize {
        match &self.phase {
            Phase::Running { turn, .. } => std::mem::size_of_val(&**turn),
            _ => 0,
        }
    }

    pub(super) fn running(mut run: Run<'a>, slot: Slot) -> TurnRun<'a> {
        // `run` is used in place, not rebound: a rebinding would be a second copy of the run
        // (1.9 KB) in the future's layout.
        let turn: TurnFuture<'a> = Box::pin(async move {
            run.run().await?;
            Ok(run.finish())
        });
        TurnRun {
            phase: Phase::Running {
                turn,
                waiting: false,
            },
            slot,
            log: Vec::new(),
        }
    }

    pub(super) fn finished(outcome: TurnOutcome) -> TurnRun<'a> {
        TurnRun {
            phase: Phase::Finished(Box::new(outcome)),
            slot: Slot::default(),
            log: Vec::new(),
        }
    }

    /// Feeds the answer to the request last returned (`None` on the first call) and runs on to
    /// the next request (`Need`) or the end of the turn (`Done`).
    ///
    /// An answer of the wrong kind is [`EngineError::AnswerMismatch`] and ends the run, as does
    /// any other engine error. After `Done` or an error every call is [`EngineError::TurnOver`].
    /// `None` while a request waits ([`EngineError::AnswerMissing`]) and an answer before the
    /// first request ([`EngineError::UnaskedAnswer`]) are refused and leave the run as it was.
    pub fn resume(&mut self, answer: Option<Answer>) -> Result<Step, EngineError> {
        let index = self.log.len();
        let waiting = match &self.phase {
            Phase::Over => return Err(EngineError::TurnOver),
            Phase::Finished(_) | Phase::Running { waiting: false, .. } => false,
            Phase::Running { waiting: true, .. } => true,
        };
        match (waiting, answer) {
            (false, Some(answer)) => Err(EngineError::UnaskedAnswer {
                index,
                got: answer_kind(&answer),
            }),
            (true, None) => Err(EngineError::AnswerMissing { index }),
            (true, Some(answer)) => {
                self.log.push(answer.clone());
                lock(&self.slot).answer = Some(answer);
                self.poll()
            }
            (false, None) => self.poll(),
        }
    }

    /// The answers fed in so far, in order. A fresh run fed this log (`Engine::replay`) is where
    /// this one is: what the LC-4 write-ahead records.
    pub fn answers(&self) -> &[Answer] {
        &self.log
    }

    /// Whether the turn has ended (`Done` or an error was returned).
    pub fn is_over(&self) -> bool {
        matches!(self.phase, Phase::Over)
    }

    fn poll(&mut self) -> Result<Step, EngineError> {
        let turn = match std::mem::replace(&mut self.phase, Phase::Over) {
            Phase::Finished(outcome) => return Ok(Step::Done(outcome)),
            Phase::Running { turn, .. } => turn,
            Phase::Over => return Err(EngineError::TurnOver),
        };
        let mut turn = turn;
        let mut cx = Context::from_waker(Waker::noop());
        match turn.as_mut().poll(&mut cx) {
            Poll::Ready(result) => result.map(|outcome| Step::Done(Box::new(outcome))),
            Poll::Pending => {
                let request = lock(&self.slot)
                    .request
                    .take()
                    .expect("the turn suspends only in `ask`, which leaves its request");
                self.phase = Phase::Running {
                    turn,
                    waiting: true,
                };
                Ok(Step::Need(request))
            }
        }
    }
}
