//! The one time loop of every system: a [`TimeStepped`] system (PD's [`Simulator`], the
//! MPM–rigid system of [`crate::mpm`]) advances an opaque per-system state frame by
//! frame and reports each frame to a caller-supplied sink ([`Flow`] stops it).
//!
//! Frame t is the state after t steps of the system's frame time step Δt, at time t·Δt (the
//! start state is frame 0); what happens inside one step (PD iterations, N MPM substeps and
//! one rigid step) belongs to the system. A sink sees the system after the step (its
//! settings and counters), the frame index and time, the state and the step's statistics.
//!
//! How to add a system: implement [`TimeStepped`] (state type, statistics type, error type,
//! `frame_dt`, `advance`) and call [`run_system`]; the per-frame sinks (frame writers,
//! diagnostics, progress) are closures over [`SystemFrame`].

use super::records::error::SolverError;
use super::records::stats::StepStats;
use super::simulator::Simulator;

/// A time-stepped system with an opaque state: what [`run_system`] drives.
pub trait TimeStepped {
    /// The state carried from frame to frame (PD: positions, velocities and the previous
    /// positions; MPM: particles and rigid poses, held by the system itself).
    type State;
    /// What one step reports besides the new state.
    type Stats;
    /// Why a step failed.
    type Error;
    /// The frame time step Δt in seconds: frame t is at time t·Δt.
    fn frame_dt(&self) -> f64;
    /// Advance `state` from frame `frame − 1` to frame `frame`.
    fn advance(
        &mut self,
        frame: usize,
        state: &mut Self::State,
    ) -> Result<Self::Stats, Self::Error>;
}

/// One frame as the time loop reports it to the sink.
pub struct SystemFrame<'a, S: TimeStepped + ?Sized> {
    /// The system after the step.
    pub system: &'a S,
    /// Frame index t (the state after t steps).
    pub frame: usize,
    /// Simulated time t·Δt.
    pub time: f64,
    /// The state of frame t.
    pub state: &'a S::State,
    /// The step's statistics.
    pub stats: &'a S::Stats,
}

/// What a sink tells the time loop after a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flow {
    Continue,
    /// End the rollout after this frame (an interrupt, a failed check, enough frames).
    Stop,
}

/// Why a rollout ended early: the step failed (`S`: the system's error, PD's
/// [`SolverError`] by default), or the sink returned an error.
#[derive(Debug)]
pub enum RolloutError<E, S = SolverError> {
    Step { frame: usize, error: S },
    Sink(E),
}

/// Where a rollout of [`run_system`] ended: the last frame taken and its state.
#[derive(Debug)]
pub struct SystemEnd<T> {
    pub frame: usize,
    pub state: T,
    /// The sink asked to stop before `to`.
    pub stopped: bool,
}

/// The time loop: steps frames `from + 1 ..= to` of `system` from `state` (frame `from`) and
/// reports every frame to `sink`, which may stop the loop ([`Flow::Stop`]) or fail it.
pub fn run_system<S: TimeStepped, E>(
    system: &mut S,
    from: usize,
    to: usize,
    mut state: S::State,
    mut sink: impl FnMut(SystemFrame<'_, S>) -> Result<Flow, E>,
) -> Result<SystemEnd<S::State>, RolloutError<E, S::Error>> {
    let dt = system.frame_dt();
    for frame in from + 1..=to {
        let stats = system
            .advance(frame, &mut state)
            .map_err(|error| RolloutError::Step { frame, error })?;
        let event = SystemFrame {
            system: &*system,
            frame,
            time: frame as f64 * dt,
            state: &state,
            stats: &stats,
        };
        if sink(event).map_err(RolloutError::Sink)? == Flow::Stop {
            return Ok(SystemEnd {
                frame,
                state,
                stopped: frame < to,
            });
        }
    }
    Ok(SystemEnd {
        frame: to,
        state,
        stopped: false,
    })
}

/// PD's state in the time loop: $x_t$, $v_t=(x_t-x_{t-1})/h$ and $x_{t-1}$ (empty before
/// the first step).
#[derive(Clone, Debug, Default)]
pub struct PdState {
    pub x: Vec<f64>,
    pub v: Vec<f64>,
    pub x_prev: Vec<f64>,
}

/// PD (and Newton, DiffPD: the method is the simulator's) as a time-stepped system: one
/// [`Simulator::step`] per frame with the implicit-Euler velocity $v_{t+1}=(x_{t+1}-x_t)/h$
/// (spec §3; `h` is the model's one time step).
impl<'m> TimeStepped for Simulator<'m> {
    type State = PdState;
    type Stats = StepStats;
    type Error = SolverError;

    fn frame_dt(&self) -> f64 {
        self.model.h
    }

    fn advance(&mut self, frame: usize, s: &mut PdState) -> Result<StepStats, SolverError> {
        let h = self.model.h;
        let (xn, stats) = self.step(frame, &s.x, &s.v)?;
        s.v = xn.iter().zip(&s.x).map(|(a, b)| (a - b) / h).collect();
        s.x_prev = std::mem::replace(&mut s.x, xn);
        Ok(stats)
    }
}
