//! Cooperative cancellation of a running solve (issue 34 item 5): a [`Cancel`] token that
//! the iteration loops poll once per iteration — PD (host and resident), Newton, DiffPD's
//! L-BFGS, the NCP contact solves, the backward's fixed-point and Krylov iterations and the
//! MPM substeps — and that a caller trips from another thread (a Ctrl-C handler, Python's
//! signal watcher, a deadline). A tripped poll is a typed [`Cancelled`] naming the loop and
//! its iteration; each layer carries it up in its own error (`LinalgError::Cancelled`,
//! `SolverError::Cancelled { frame, .. }`, `MpmStepError::Cancelled`).
//!
//! A token that is never tripped changes nothing: polling reads one atomic and does no
//! arithmetic on the solver's numbers, so results are bitwise those of an unpolled run.
//!
//! The token reaches the simulators in one of two ways: a caller that builds the simulator
//! sets its `cancel` field; a caller that runs library code which builds simulators itself
//! (`optimize::Problem::evaluate`, `session::Tape::record`) installs the token for the
//! duration of the call ([`Cancel::install`]), and every simulator built on that thread
//! during the call takes it ([`Cancel::current`]) — as rayon's `install` makes a pool the
//! current one.
//!
//! This module is a leaf: it imports nothing from the crate.

use std::cell::RefCell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

/// The loop in which a cancellation was observed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// A PD iteration of the forward step (host or resident loop, and the Newton–Krylov
    /// phase of `mode = "accurate"`).
    Pd,
    /// A Newton iteration (`method = "newton"`, the direct fallback).
    Newton,
    /// An L-BFGS iteration of `method = "diffpd"`.
    DiffPd,
    /// A semismooth-Newton iteration of an NCP contact solve.
    Contact,
    /// A fixed-point iteration of a backward (adjoint) solve.
    Adjoint,
    /// An application of the operator $K$ inside GMRES, CG or Steihaug–Toint CG (the
    /// backward's adjoint solves, the forward's Newton–Krylov phase and polish); the
    /// iteration counts the applications of that solve.
    Krylov,
    /// An MPM substep.
    Mpm,
}

impl std::fmt::Display for Stage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Stage::Pd => "PD iteration",
            Stage::Newton => "Newton iteration",
            Stage::DiffPd => "DiffPD iteration",
            Stage::Contact => "contact Newton iteration",
            Stage::Adjoint => "adjoint iteration",
            Stage::Krylov => "Krylov operator application",
            Stage::Mpm => "MPM substep",
        })
    }
}

/// A poll found the token tripped: in `stage`, before its iteration `iteration` (0-based:
/// the iterations before it completed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("cancelled at {stage} {iteration}")]
pub struct Cancelled {
    pub stage: Stage,
    pub iteration: usize,
}

#[derive(Debug)]
struct Inner {
    flag: Arc<AtomicBool>,
    deadline: Option<Instant>,
    /// Polls left before the token trips by itself ([`Cancel::after_polls`]).
    polls_left: Option<AtomicUsize>,
    /// Polls so far ([`Cancel::polls`]).
    polls: AtomicUsize,
}

/// A cancellation token: cheap to clone (one `Arc`); clones share one flag. The default token
/// never trips and costs one branch per poll.
#[derive(Clone, Debug, Default)]
pub struct Cancel(Option<Arc<Inner>>);

thread_local! {
    static CURRENT: RefCell<Cancel> = RefCell::new(Cancel::default());
}

impl Cancel {
    /// A token that never trips.
    pub fn never() -> Cancel {
        Cancel(None)
    }

    /// A token tripped by [`Cancel::cancel`] on it or a clone.
    pub fn new() -> Cancel {
        Cancel::with_flag(Arc::new(AtomicBool::new(false)))
    }

    /// A token tripped by setting `flag` (a signal handler's flag, shared with code that
    /// polls it between frames).
    pub fn with_flag(flag: Arc<AtomicBool>) -> Cancel {
        Cancel(Some(Arc::new(Inner {
            flag,
            deadline: None,
            polls_left: None,
            polls: AtomicUsize::new(0),
        })))
    }

    /// A token that trips by itself at `deadline` (and also by [`Cancel::cancel`]).
    pub fn with_deadline(deadline: Instant) -> Cancel {
        Cancel(Some(Arc::new(Inner {
            flag: Arc::new(AtomicBool::new(false)),
            deadline: Some(deadline),
            polls_left: None,
            polls: AtomicUsize::new(0),
        })))
    }

    /// A token that lets `polls` polls pass and trips at the next one: a work budget in
    /// iterations, and what the tests use to cancel inside a chosen loop.
    pub fn after_polls(polls: usize) -> Cancel {
        Cancel(Some(Arc::new(Inner {
            flag: Arc::new(AtomicBool::new(false)),
            deadline: None,
            polls_left: Some(AtomicUsize::new(polls)),
            polls: AtomicUsize::new(0),
        })))
    }

    /// Trip the token (and every clone of it). Nothing for [`Cancel::never`].
    pub fn cancel(&self) {
        if let Some(i) = &self.0 {
            i.flag.store(true, Ordering::SeqCst);
        }
    }

    /// Whether the token has tripped, without counting a poll or reading the clock.
    pub fn is_cancelled(&self) -> bool {
        self.0
            .as_ref()
            .is_some_and(|i| i.flag.load(Ordering::SeqCst))
    }

    /// The polls made on this token and its clones so far (0 for [`Cancel::never`]): the
    /// iterations a run took, over every loop that polls.
    pub fn polls(&self) -> usize {
        self.0
            .as_ref()
            .map_or(0, |i| i.polls.load(Ordering::Relaxed))
    }

    /// Whether the token can trip at all (`false` for [`Cancel::never`]).
    pub fn is_active(&self) -> bool {
        self.0.is_some()
    }

    /// One poll, at iteration `iteration` of the loop `stage`: `Err` once the token has
    /// tripped (a tripped token stays tripped, so every enclosing loop sees it too).
    #[inline]
    pub fn poll(&self, stage: Stage, iteration: usize) -> Result<(), Cancelled> {
        match &self.0 {
            None => Ok(()),
            Some(i) => {
                if Self::trips(i) {
                    Err(Cancelled { stage, iteration })
                } else {
                    Ok(())
                }
            }
        }
    }

    fn trips(i: &Inner) -> bool {
        i.polls.fetch_add(1, Ordering::Relaxed);
        if i.flag.load(Ordering::SeqCst) {
            return true;
        }
        let expired = i.deadline.is_some_and(|d| Instant::now() >= d);
        let spent = i.polls_left.as_ref().is_some_and(|n| {
            n.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |k| k.checked_sub(1))
                .is_err()
        });
        if expired || spent {
            i.flag.store(true, Ordering::SeqCst);
        }
        expired || spent
    }

    /// Run `f` with this token as the thread's current one ([`Cancel::current`]); the
    /// previous one is restored afterwards, also when `f` unwinds.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Cancel>);
        impl Drop for Restore {
            fn drop(&mut self) {
                if let Some(prev) = self.0.take() {
                    CURRENT.with(|c| *c.borrow_mut() = prev);
                }
            }
        }
        let prev = CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), self.clone()));
        let _restore = Restore(Some(prev));
        f()
    }

    /// The token installed on this thread by [`Cancel::install`] ([`Cancel::never`] outside
    /// one): what a newly built simulator polls.
    pub fn current() -> Cancel {
        CURRENT.with(|c| c.borrow().clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_never_trips() {
        let c = Cancel::never();
        c.cancel();
        assert!((0..1000).all(|k| c.poll(Stage::Pd, k).is_ok()));
        assert!(!c.is_cancelled());
    }

    #[test]
    fn a_tripped_token_is_seen_by_every_clone_and_stays_tripped() {
        let c = Cancel::new();
        let d = c.clone();
        assert!(d.poll(Stage::Pd, 0).is_ok());
        c.cancel();
        assert_eq!(
            d.poll(Stage::Contact, 4),
            Err(Cancelled {
                stage: Stage::Contact,
                iteration: 4
            })
        );
        assert!(d.poll(Stage::Pd, 5).is_err());
    }

    #[test]
    fn after_polls_lets_exactly_that_many_pass() {
        let c = Cancel::after_polls(3);
        assert!((0..3).all(|k| c.poll(Stage::Newton, k).is_ok()));
        assert!(c.poll(Stage::Newton, 3).is_err());
        assert_eq!(c.polls(), 4);
        assert!(c.is_cancelled());
        assert!(c.poll(Stage::Newton, 4).is_err());
    }

    #[test]
    fn a_deadline_in_the_past_trips() {
        let c = Cancel::with_deadline(Instant::now());
        assert!(c.poll(Stage::Mpm, 0).is_err());
        assert!(c.is_cancelled());
    }

    #[test]
    fn install_scopes_the_current_token() {
        assert!(!Cancel::current().is_active());
        let c = Cancel::new();
        let seen = c.install(|| {
            let inner = Cancel::current();
            inner.cancel();
            inner.is_active()
        });
        assert!(seen && c.is_cancelled());
        assert!(!Cancel::current().is_active());
    }
}
