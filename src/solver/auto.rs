//! `solver.method = "auto"` (issue 37 item 1): the method of a scene chosen once, before the
//! first step, by a rule over deterministic quantities of the model and its symbolic analysis
//! (never over measured timings), so that the same scene picks the same method on any machine
//! and load. The rule ([`choose_method`], in this order):
//!
//! 1. **Device backend** → accurate PD (`diffphd`): the device runs the PD iteration only.
//! 2. **Stiffness contrast** $\max_eE_e/\min_eE_e\ge$ [`CONTRAST_NEWTON`] → Newton. PD's
//!    contraction rate is set by the spread of the stiffness around the one constant matrix
//!    $A$; Newton's factor of the true Hessian does not care. Measured (docs/BENCHMARKS.md,
//!    "Speed and accuracy against Newton", total time Newton / PD): twist bands 1000×, 975
//!    DoF, 0.31; armadillo 1000×, 44k DoF, 0.33 (Newton 3× faster even at the largest size);
//!    the Crab at 1000× under contact did not converge with PD (docs/paper-scenes.md).
//! 3. Otherwise the **per-iteration cost model**: one PD iteration costs the three axes'
//!    pairs of triangular solves, $C_{PD}=4Z$ flops ($Z$ = stored entries of the axes'
//!    factors, [`crate::linalg::SystemPlan::axis_nnz_factor`]), plus the local step; one Newton
//!    iteration a numeric factorization of the $3\times3$-block Hessian on the same node
//!    graph, whose column counts are three times the scalar factor's over three times the
//!    columns: $C_N=9F$ ($F=\sum_jc_j^2$ over the axes' factors,
//!    [`crate::linalg::SystemPlan::axis_factor_flops`]). The ratio $\rho=C_N/C_{PD}$ is the
//!    number of PD iterations one Newton iteration costs; it grows with the fill of the
//!    factor (about $n^{1/3}$ on 3D meshes). Newton is chosen when $\rho\le$
//!    [`BREAK_EVEN_RATIO`], the ratio at which the measured total times cross (module
//!    constant docs). Contact adds work to both methods per iteration (a contact solve on
//!    their own factor) and does not move the crossing in the measurements (the bouncing
//!    ball with contact, 5.4k DoF: 0.77, between the contact-free cantilevers' 0.61 and 0.88),
//!    so contact counts are logged but not part of the rule.
//!
//! 3a. (before the cost model) a contact-free scene whose **stiffness number**
//!    $s=\max_eh^2E_e/(\rho_eV_e^{2/3})\le$ [`STIFFNESS_NUMBER_PD`] → PD: inertia dominates
//!    its steps and PD converges in few iterations (the Plant: $\rho=110$, yet PD 2.23× faster).
//!
//! **Per frame** ([`FrameRule`], `solver::stepper::auto::AutoStepper`). The per-scene choice is
//! the method of the first frame; then each frame's iteration counts decide the next, in PD
//! units ([`frame_cost`]: a PD frame its PD and Newton–Krylov GMRES iterations, a Newton
//! frame [`NEWTON_FACTORIZATION_COST`] per factorization, a measured exchange rate):
//! - PD current: a frame that costs more than the last Newton frame makes Newton current from
//!   the next frame (before any Newton frame the per-scene choice of PD stands).
//! - Newton current: once a Newton frame's cost $c$ is known, a frame at or past the next probe
//!   frame is first solved by PD capped at $\lfloor$[`PROBE_SHARE`]$\cdot c\rfloor$ iterations
//!   (a *probe*). If PD converges within the cap its result is the frame's and PD becomes
//!   current; if not, Newton solves the frame from the step's start and the next probe waits
//!   [`PROBE_BACKOFF`] frames, twice as long after each failure (at most
//!   [`PROBE_BACKOFF_MAX`]). A switch from PD back to Newton defers the next probe the same way.
//! - When the last active contact releases, the next frame probes (the gap back to
//!   [`PROBE_BACKOFF`]): free flight is where PD needs few iterations. Once a frame has ended
//!   in contact, a probe counts the Newton frame's factorizations at the contact rate
//!   ([`NEWTON_FACTORIZATION_COST_CONTACT`]): PD's iterations then carry contact solves (a
//!   bouncing body's probes after each release meet the next landing).
//! - A Newton frame without a factorization (prescribed or free motion: nothing to solve)
//!   leaves the reference cost as it was.
//! - Newton current and missing its stopping test on a frame that PD's retry solves: PD is
//!   current from the next frame and stays current, whatever its cost, until a frame ends
//!   without active contacts (`pd_held`). Measured on the Oreo (CI size): Newton's NCP step
//!   finds no merit decrease when the claws first press into the stack (frames 5–6), and a
//!   hand-back to Newton under the same contact missed again two frames later.
//!
//! The exchange rate is measured: until session 22 the rule counted $\rho$ per
//! factorization, which overstates a factorization 3–16× against a PD iteration; on the
//! twisted bands (1000×, $\rho=77$) PD's probes then succeeded and PD, 2.1× slower there
//! forward, kept the frames. The rule reads iteration and contact counts only, so a scene
//! takes the same methods on the same frames on any machine. On a device there is no
//! switching (`auto` is PD there).
//!
//! Explicit choices (`diffphd`, `diffpd`, `newton`) are never changed. A step of a method
//! chosen by `auto` that misses its stopping test is retried from the step's start with the
//! other method (`solver::stepper::auto::AutoStepper`); explicit choices are not retried.

use crate::linalg::SystemPlan;
use crate::model::{Model, SolverMethod};

/// Stiffness contrast at and above which `auto` picks Newton.
pub const CONTRAST_NEWTON: f64 = 100.0;

/// Largest cost ratio $\rho=C_N/C_{PD}$ (PD iterations per Newton iteration, module docs) at
/// which `auto` picks Newton. Derived from the frontier (docs/BENCHMARKS.md, total time
/// Newton / PD at equal accuracy, > 1: PD faster) with $\rho$ from this analysis:
/// cantilever 20×5×5 hex (2,268 DoF, $\rho=131$): 0.61; cantilever_diffpd 32×8×8 hex (8,019
/// DoF, $\rho=217$): 0.88; bouncing ball (5,445 DoF, contact, $\rho=268$): 0.77; the Plant
/// (29,763 DoF, its mesh is not in the repository): 2.23. A power law through the two
/// contact-free cantilevers ($r\propto\rho^{0.73}$) crosses 1 at $\rho\approx260$ and puts
/// the Plant's 2.23 at $\rho\approx780$; 300 keeps every scene measured faster with Newton
/// on Newton (the ball at 268) and the Plant on PD. The lead's frontier re-run on an idle
/// machine is the check of this constant.
pub const BREAK_EVEN_RATIO: f64 = 300.0;

/// The deterministic inputs of the rule.
#[derive(Clone, Debug, serde::Serialize)]
pub struct MethodQuantities {
    /// Free degrees of freedom (3 × nodes − prescribed).
    pub free_dofs: usize,
    /// Stored entries of the three axes' Cholesky factors of $A$.
    pub nnz_factor: usize,
    /// Flops of factoring the three axes' systems ($\sum_jc_j^2$ per axis).
    pub factor_flops: f64,
    /// $\max_eE_e/\min_eE_e$ over the elements with a free degree of freedom
    /// ([`free_stiffness_range`]).
    pub stiffness_contrast: f64,
    /// Contact candidates: the boundary nodes when the scene has obstacles or body contact,
    /// else 0.
    pub contact_candidates: usize,
    /// The run's backend is a device (`--backend cuda` or `emulator`).
    pub device: bool,
    /// $\max_e h^2E_e/(\rho_e V_e^{2/3})$: the stiffness of an element against its inertia
    /// over one step ([`STIFFNESS_NUMBER_PD`]).
    pub stiffness_number: f64,
}

impl MethodQuantities {
    /// The quantities of `model` with the symbolic analysis `plan` of its PD matrix.
    pub fn of(model: &Model, plan: &SystemPlan) -> Self {
        let contact_candidates = if model.obstacles.is_empty() && !model.contact.bodies {
            0
        } else {
            model.boundary_nodes.len()
        };
        let (lo, hi) = free_stiffness_range(model);
        MethodQuantities {
            free_dofs: plan.free_dofs(),
            nnz_factor: plan.axis_nnz_factor(),
            factor_flops: plan.axis_factor_flops(),
            stiffness_contrast: if lo > 0.0 && hi.is_finite() {
                hi / lo
            } else {
                1.0
            },
            contact_candidates,
            device: false,
            stiffness_number: stiffness_number(model),
        }
    }

    /// PD iterations one Newton iteration costs, $\rho=9F/4Z$ (module docs).
    pub fn cost_ratio(&self) -> f64 {
        9.0 * self.factor_flops / (4.0 * self.nnz_factor.max(1) as f64)
    }
}

/// $(\min_eE_e,\max_eE_e)$ over the elements with at least one free degree of freedom: an
/// element whose every node is prescribed on every axis (a claw driven by its motion, a
/// clamped block) adds nothing to the system either method solves, so its stiffness does
/// not count in the contrast (the Oreo's 2e7 Pa claws: contrast 100 of its free bodies, not
/// 1000).
pub fn free_stiffness_range(model: &Model) -> (f64, f64) {
    let mut fixed = vec![[false; 3]; model.num_nodes()];
    for g in &model.dirichlet {
        for &n in &g.nodes {
            for (f, &a) in fixed[n].iter_mut().zip(&g.axes) {
                *f |= a;
            }
        }
    }
    let free = |e: usize| {
        model.conn[model.conn_ptr[e]..model.conn_ptr[e + 1]]
            .iter()
            .any(|&n| fixed[n].iter().any(|&f| !f))
    };
    (0..model.num_elements())
        .filter(|&e| free(e))
        .map(|e| model.params.youngs[e])
        .fold((f64::INFINITY, 0.0f64), |(lo, hi), e| {
            (lo.min(e), hi.max(e))
        })
}

/// $\max_e h^2E_e/(\rho_eV_e^{2/3})$ over the elements ($V_e^{1/3}$: the element's size; 0
/// for a model without elements).
pub fn stiffness_number(model: &Model) -> f64 {
    let h2 = model.h * model.h;
    (0..model.num_elements())
        .map(|e| {
            let rho = model.params.density[model.elem_body[e]];
            let l2 = model.elem_volume[e].abs().powf(2.0 / 3.0);
            if rho > 0.0 && l2 > 0.0 {
                h2 * model.params.youngs[e] / (rho * l2)
            } else {
                0.0
            }
        })
        .fold(0.0, f64::max)
}

/// Largest stiffness number $s=\max_eh^2E_e/(\rho_eV_e^{2/3})$ at which `auto` picks PD on
/// a contact-free scene whatever the cost ratio. $A=M/h^2+\sum w_sG^TG$ and the step's
/// Hessian differ by the local steps' $\Delta A$, which is of the order of the stiffness
/// terms; the smaller they are against the inertia ($s$), the faster PD contracts, while a
/// Newton iteration costs the same. Measured (frontier, docs/BENCHMARKS.md; PD iterations
/// per Newton iteration at equal accuracy, $N_{PD}/N_N=\rho/r$ with $r$ the total-time
/// ratio Newton/PD): the Plant ($s=148$, $\rho=110$) 49 — PD 2.23× faster; cantilever ($s=390$
/// in its soft part, 3,900 in its 10× region) 215 and cantilever_diffpd ($s=1000$) 247 —
/// Newton faster. The bouncing ball ($s=205$, $\rho=268$, 348, Newton 1.3× faster) has
/// contact, which adds PD iterations: the rule applies to contact-free scenes only. 200 is
/// between the Plant and the cantilever's soft part; the one winning PD scene makes this a
/// single-point calibration (docs/scene-format.md, "The rule checked").
pub const STIFFNESS_NUMBER_PD: f64 = 200.0;

/// The resolved method of `solver.method = "auto"` and why (logged in `log.json`,
/// `grad.json`, `optimize.json`).
#[derive(Clone, Debug, serde::Serialize)]
pub struct MethodChoice {
    pub method: SolverMethod,
    /// One line: the rule that decided and its numbers.
    pub reason: String,
    pub quantities: MethodQuantities,
}

/// The rule of the module docs: a pure function of the quantities.
pub fn choose_method(q: &MethodQuantities) -> MethodChoice {
    let (method, reason) = if q.device {
        (
            SolverMethod::Diffphd,
            "device backend: the device runs the PD method".to_string(),
        )
    } else if q.stiffness_contrast >= CONTRAST_NEWTON {
        (
            SolverMethod::Newton,
            format!(
                "stiffness contrast {:.3e} >= {CONTRAST_NEWTON:e}: PD converges slowly",
                q.stiffness_contrast
            ),
        )
    } else if q.contact_candidates == 0 && q.stiffness_number <= STIFFNESS_NUMBER_PD {
        (
            SolverMethod::Diffphd,
            format!(
                "stiffness number {:.0} <= {STIFFNESS_NUMBER_PD:.0} without contact: PD converges in few iterations",
                q.stiffness_number
            ),
        )
    } else if q.cost_ratio() <= BREAK_EVEN_RATIO {
        (
            SolverMethod::Newton,
            format!(
                "a Newton iteration costs {:.0} PD iterations (<= {BREAK_EVEN_RATIO:.0}): factor flops {:.3e}, nnz(L) {}",
                q.cost_ratio(),
                q.factor_flops,
                q.nnz_factor
            ),
        )
    } else {
        (
            SolverMethod::Diffphd,
            format!(
                "a Newton iteration costs {:.0} PD iterations (> {BREAK_EVEN_RATIO:.0}): factor flops {:.3e}, nnz(L) {}",
                q.cost_ratio(),
                q.factor_flops,
                q.nnz_factor
            ),
        )
    };
    MethodChoice {
        method,
        reason,
        quantities: q.clone(),
    }
}

/// Largest cost ratio $\rho$ at which `backward.adjoint = "auto"` solves every frame
/// directly on the CPU. A frame's GMRES adjoint costs $n_g$ products with $\Delta A$ and
/// $A^{-1}$ solves ($n_g$ = 85–143 per frame on the frontier scenes), the direct one a
/// numeric factorization of $K$ ($9F$) and two solves: by flops the direct solve wins for
/// $\rho\lesssim n_g$, and the supernodal factorization runs its flops several times faster
/// than the memory-bound triangular solves, which moves the crossing up. Measured
/// (docs/benchmarks-log.md "The backward: the direct adjoint is the faster CPU method at
/// these sizes", one thread, idle): direct-first 1.11–1.63× faster than GMRES on every
/// frontier scene, up to the Plant (29,763 DoF); 1000 keeps those scenes direct with room.
pub const DIRECT_ADJOINT_RATIO: f64 = 1000.0;

/// Estimated bytes of the direct adjoint's factor of $K$ ($3\times3$ blocks on the node
/// graph: about three times the stored entries of the three axes' factors, 8 bytes each,
/// and as much again of work space).
pub fn direct_adjoint_bytes(q: &MethodQuantities) -> u64 {
    2 * 8 * 3 * q.nnz_factor as u64
}

/// The resolved `backward.adjoint = "auto"`: the settings of the frame solve and why.
#[derive(Clone, Debug, serde::Serialize)]
pub struct AdjointChoice {
    /// Every eligible frame solved directly.
    pub direct_first: bool,
    /// GMRES iterations before a frame is handed to the direct solve (0: never).
    pub direct_after: usize,
    pub reason: String,
}

/// `backward.adjoint = "auto"` (the rule of [`DIRECT_ADJOINT_RATIO`]): on a device the
/// device policy (GMRES, handed to the host factorization past
/// [`crate::model::DEFAULT_DIRECT_AFTER`] when its rate says so); on the CPU the direct
/// solve when $K$'s estimated factor fits `budget` (bytes; `None`: no limit known) and
/// $\rho\le$ [`DIRECT_ADJOINT_RATIO`]; GMRES with the hand-over where it fits but costs
/// more; GMRES alone where it does not fit.
pub fn choose_adjoint(q: &MethodQuantities, budget: Option<u64>) -> AdjointChoice {
    let bytes = direct_adjoint_bytes(q);
    let fits = budget.is_none_or(|b| bytes <= b);
    let handover = crate::model::DEFAULT_DIRECT_AFTER;
    if q.device {
        return AdjointChoice {
            direct_first: false,
            direct_after: handover,
            reason: "device backend: device GMRES, host factorization past its policy".into(),
        };
    }
    if !fits {
        return AdjointChoice {
            direct_first: false,
            direct_after: 0,
            reason: format!(
                "the direct adjoint's factor (~{bytes} bytes) exceeds the memory budget: GMRES"
            ),
        };
    }
    if q.cost_ratio() <= DIRECT_ADJOINT_RATIO {
        AdjointChoice {
            direct_first: true,
            direct_after: handover,
            reason: format!(
                "a factorization of K costs {:.0} A^-1 solves (<= {DIRECT_ADJOINT_RATIO:.0}) and fits (~{bytes} bytes): direct",
                q.cost_ratio()
            ),
        }
    } else {
        AdjointChoice {
            direct_first: false,
            direct_after: handover,
            reason: format!(
                "a factorization of K costs {:.0} A^-1 solves (> {DIRECT_ADJOINT_RATIO:.0}): GMRES, direct past {handover} iterations",
                q.cost_ratio()
            ),
        }
    }
}

/// Share of the last Newton frame's cost (in PD iterations) that a probe of PD may spend
/// (the probe's PD iteration cap): a probe that converges within it makes PD the current
/// method (PD is then at least 1/`PROBE_SHARE` times cheaper on that frame); one that does
/// not costs this share of a Newton frame. With [`PROBE_BACKOFF`] a scene where Newton
/// always wins pays 2 failed probes in its first 10 frames (5 % of the Newton time) and 4
/// in 40 (2.5 %).
pub const PROBE_SHARE: f64 = 0.25;

/// Frames from a failed probe (or a switch from PD back to Newton) to the next probe; the
/// gap doubles at each failure, up to [`PROBE_BACKOFF_MAX`], and returns to this value when
/// the last contact of the scene releases.
pub const PROBE_BACKOFF: usize = 4;

/// Largest gap between probes.
pub const PROBE_BACKOFF_MAX: usize = 64;

/// What one Newton iteration (assembly, factorization, solve and line search: one
/// factorization) costs in PD units (a PD iteration or a GMRES iteration of the
/// Newton–Krylov phase), the per-frame rule's exchange rate. Measured, not derived: the flop
/// ratio $\rho$ of the per-scene rule overstates it 3–16× (a PD iteration is mostly its local
/// step, which the flop count leaves out, and a supernodal factorization runs its flops
/// several times faster than triangular solves run theirs). Time per factorization of
/// `--solver newton` over time per PD unit of `--solver diffphd`, the same frames, one
/// thread (`simulate`, frame seconds from `log.json`; 2026-12-06, session 22, the machine
/// loaded by one helper's build, both methods under the same load): cantilever 33.5 ($\rho$
/// 131), cantilever_diffpd 36.9 (217), twist_bands_tet 21.4 (77), routing_tendon 19.9
/// (113), sysid_cantilever 16.8 (63), armadillo_twist 31.1 (491), Plant 32 (110): 17–37 over
/// contact-free scenes from 480 to 43k DoF, hex and tet. 25 is their middle (within 1.5× of
/// every one); the constant is the same on every machine, so the rule stays a function of
/// iteration counts. Under contact a PD unit also runs a contact solve and a factorization
/// costs about 10 units (the bouncing ball, `grad`, idle: 15 of PD's 25 forward seconds in
/// contact solves): the rule then undercounts PD's frames, which errs toward PD.
pub const NEWTON_FACTORIZATION_COST: f64 = 25.0;

/// [`NEWTON_FACTORIZATION_COST`] once a frame has ended in contact: a factorization then
/// costs about 10 PD units, because each PD iteration also runs a contact solve (the
/// bouncing ball above). The per-frame rule scales a probe's budget by the ratio of the two
/// (a probe under contact gets the same share of a Newton frame's *time* as one without).
/// With the contact-free rate the ball's four failed probes after its first landing (frames
/// 18, 23, 27, 35: one in contact, three just after a release, each meeting the next
/// landing; budget 25 each) cost 8–9.5 % of its forward at one thread and 11–13 % at two
/// (their `missed_seconds`, session 28). Per-frame contact (the last frame's) gave the rate
/// to frame 18's probe only.
pub const NEWTON_FACTORIZATION_COST_CONTACT: f64 = 10.0;

/// What one frame costs in PD units ([`NEWTON_FACTORIZATION_COST`]): a PD frame its PD
/// iterations plus the GMRES iterations of its Newton–Krylov phase plus
/// [`NEWTON_FACTORIZATION_COST`] per factorization of its direct fallback; a Newton frame
/// [`NEWTON_FACTORIZATION_COST`] per factorization. Deterministic: counts, not clocks.
/// The counts: `pd_units` = PD iterations + Newton–Krylov GMRES iterations of a PD frame
/// (ignored for a Newton frame), `factorizations` of Newton or of PD's direct fallback.
pub fn frame_cost(method: SolverMethod, pd_units: usize, factorizations: usize) -> f64 {
    let k = NEWTON_FACTORIZATION_COST * factorizations as f64;
    match method {
        SolverMethod::Newton => k,
        _ => pd_units as f64 + k,
    }
}

/// How `auto` solves a frame under the per-frame rule ([`FrameRule::plan`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FramePlan {
    /// The current method (PD or Newton), retried with the other on a miss.
    Current(SolverMethod),
    /// PD capped at `budget` iterations from the step's start; on a miss Newton from the
    /// step's start.
    ProbePd { budget: usize },
}

/// What a frame did, as the per-frame rule reads it.
#[derive(Clone, Copy, Debug)]
pub struct FrameOutcome {
    /// The method whose converged (or last) attempt is the frame's result.
    pub solved_by: SolverMethod,
    /// The frame was a probe of PD.
    pub probed: bool,
    /// The cost of the attempt that solved it ([`frame_cost`]).
    pub cost: f64,
    /// The frame's active contacts at its end.
    pub active_contacts: usize,
}

/// The state of `auto`'s per-frame rule between frames (module docs, "Per frame").
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FrameRule {
    /// The method the next frame runs (or probes PD against).
    pub current: SolverMethod,
    /// The cost of the last frame Newton solved, in PD iterations.
    pub newton_cost: Option<f64>,
    /// The first frame at which a Newton frame probes PD.
    pub next_probe: usize,
    /// The current gap between probes.
    pub backoff: usize,
    /// The last frame ended with active contacts.
    pub in_contact: bool,
    /// Some frame so far ended with active contacts: probes count a Newton frame at the
    /// contact rate ([`NEWTON_FACTORIZATION_COST_CONTACT`]) from then on.
    pub had_contact: bool,
    /// Newton missed its stopping test on a frame that PD then solved: PD stays current
    /// (whatever its cost) until a frame ends without active contacts.
    pub pd_held: bool,
    /// Per-frame switching applies (off on a device: `auto` is PD there).
    pub switching: bool,
}

impl FrameRule {
    /// The rule before the first frame: the per-scene choice `choice` is the current method.
    pub fn start(choice: &MethodChoice) -> Self {
        FrameRule {
            current: choice.method,
            newton_cost: None,
            next_probe: 0,
            backoff: PROBE_BACKOFF,
            in_contact: false,
            had_contact: false,
            pd_held: false,
            switching: !choice.quantities.device,
        }
    }

    /// How frame `frame` is solved: PD or Newton as current; a Newton frame at or past
    /// `next_probe`, once a Newton frame's cost is known, probes PD with a budget of
    /// [`PROBE_SHARE`] of that cost, counted at the contact rate
    /// ([`NEWTON_FACTORIZATION_COST_CONTACT`]) once a frame has ended in contact.
    pub fn plan(&self, frame: usize) -> FramePlan {
        match (self.current, self.newton_cost) {
            (SolverMethod::Newton, Some(c)) if self.switching && frame >= self.next_probe => {
                let rate = if self.had_contact {
                    NEWTON_FACTORIZATION_COST_CONTACT / NEWTON_FACTORIZATION_COST
                } else {
                    1.0
                };
                FramePlan::ProbePd {
                    budget: ((PROBE_SHARE * c * rate).floor() as usize).max(1),
                }
            }
            (m, _) => FramePlan::Current(m),
        }
    }

    /// The rule after frame `frame` with outcome `o`.
    pub fn after(&self, frame: usize, o: &FrameOutcome) -> FrameRule {
        let mut r = *self;
        if !self.switching {
            return r;
        }
        let defer = |r: &mut FrameRule| {
            r.next_probe = frame + r.backoff;
            r.backoff = (2 * r.backoff).min(PROBE_BACKOFF_MAX);
        };
        match (self.current, o.solved_by) {
            (_, SolverMethod::Newton) => {
                if o.cost > 0.0 {
                    // a frame without a factorization (nothing to solve: prescribed or free
                    // motion) says nothing about what a Newton frame costs
                    r.newton_cost = Some(o.cost);
                }
                if o.probed || self.current != SolverMethod::Newton {
                    // a failed probe, or PD missed its stopping test: Newton, probe later
                    r.current = SolverMethod::Newton;
                    defer(&mut r);
                }
            }
            (SolverMethod::Newton, _) if !o.probed => {
                // Newton missed and PD solved the frame (the retry): PD from the next frame,
                // held there through the contact episode (a Newton miss under contact is a
                // state Newton's NCP step fails on, and the next frames are like it)
                r.current = SolverMethod::Diffphd;
                r.pd_held = true;
            }
            _ => {
                // PD solved it (as current or as a successful probe): PD stays current while
                // a frame costs no more than the last Newton frame (before any Newton frame
                // the per-scene choice of PD stands)
                let dearer = self.newton_cost.is_some_and(|c| o.cost > c);
                if dearer && !self.pd_held {
                    r.current = SolverMethod::Newton;
                    defer(&mut r);
                } else {
                    r.current = SolverMethod::Diffphd;
                }
            }
        }
        let in_contact = o.active_contacts > 0;
        if self.in_contact && !in_contact {
            // the last contact released: the state PD is fast on may be back
            r.next_probe = frame + 1;
            r.backoff = PROBE_BACKOFF;
        }
        r.in_contact = in_contact;
        r.had_contact |= in_contact;
        if !in_contact {
            r.pd_held = false;
        }
        r
    }
}

/// The method a step of a method chosen by `auto` is retried with when it misses its
/// stopping test: the other one of the pair.
pub fn other_method(m: SolverMethod) -> SolverMethod {
    match m {
        SolverMethod::Newton => SolverMethod::Diffphd,
        _ => SolverMethod::Newton,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(dofs: usize, ratio: f64, contrast: f64) -> MethodQuantities {
        // nnz and flops with the given cost ratio 9F/4Z
        let z = 10 * dofs;
        MethodQuantities {
            free_dofs: dofs,
            nnz_factor: z,
            factor_flops: ratio * 4.0 * z as f64 / 9.0,
            stiffness_contrast: contrast,
            contact_candidates: 0,
            device: false,
            stiffness_number: 1e3,
        }
    }

    #[test]
    fn small_homogeneous_scenes_pick_newton_large_ones_pd() {
        let small = choose_method(&q(2268, 128.0, 1.0));
        assert_eq!(small.method, SolverMethod::Newton, "{}", small.reason);
        assert!(small.reason.contains("128"), "{}", small.reason);
        assert_eq!(
            choose_method(&q(8019, 300.0, 1.0)).method,
            SolverMethod::Newton
        );
        let large = choose_method(&q(29763, 301.0, 1.0));
        assert_eq!(large.method, SolverMethod::Diffphd, "{}", large.reason);
    }

    #[test]
    fn contrast_picks_newton_at_any_size_and_the_device_pd() {
        let c = choose_method(&q(44241, 5000.0, 1000.0));
        assert_eq!(c.method, SolverMethod::Newton);
        assert!(c.reason.contains("contrast"), "{}", c.reason);
        assert_eq!(
            choose_method(&q(44241, 5000.0, 99.0)).method,
            SolverMethod::Diffphd
        );
        let mut d = q(100, 1.0, 1000.0);
        d.device = true;
        let c = choose_method(&d);
        assert_eq!(c.method, SolverMethod::Diffphd);
        assert!(c.reason.contains("device"), "{}", c.reason);
    }

    #[test]
    fn the_adjoint_is_direct_where_it_fits_and_pays() {
        let small = q(2268, 128.0, 1.0);
        let c = choose_adjoint(&small, None);
        assert!(c.direct_first, "{}", c.reason);
        let c = choose_adjoint(&small, Some(direct_adjoint_bytes(&small) - 1));
        assert!(!c.direct_first && c.direct_after == 0, "{}", c.reason);
        let c = choose_adjoint(&q(200_000, 5000.0, 1.0), None);
        assert!(!c.direct_first && c.direct_after == 150, "{}", c.reason);
        let mut d = small.clone();
        d.device = true;
        let c = choose_adjoint(&d, None);
        assert!(
            !c.direct_first && c.reason.contains("device"),
            "{}",
            c.reason
        );
    }

    /// The Plant (s = 148, ρ = 110, no contact) picks PD; the same numbers with contact (the
    /// bouncing ball's case) or a stiffer body (cantilever_diffpd, s = 1000) Newton.
    #[test]
    fn soft_against_inertia_contact_free_scenes_pick_pd() {
        let mut plant = q(29634, 110.0, 1.0);
        plant.stiffness_number = 148.0;
        let c = choose_method(&plant);
        assert_eq!(c.method, SolverMethod::Diffphd, "{}", c.reason);
        assert!(c.reason.contains("stiffness number 148"), "{}", c.reason);
        let mut ball = plant.clone();
        ball.contact_candidates = 890;
        assert_eq!(choose_method(&ball).method, SolverMethod::Newton);
        let mut stiff = plant.clone();
        stiff.stiffness_number = 1000.0;
        assert_eq!(choose_method(&stiff).method, SolverMethod::Newton);
        let mut contrast = plant;
        contrast.stiffness_contrast = 100.0;
        assert_eq!(choose_method(&contrast).method, SolverMethod::Newton);
    }

    fn outcome(solved_by: SolverMethod, probed: bool, cost: f64, contacts: usize) -> FrameOutcome {
        FrameOutcome {
            solved_by,
            probed,
            cost,
            active_contacts: contacts,
        }
    }

    /// Per frame: Newton first, PD probed at a quarter of a Newton frame's cost; a failed
    /// probe backs off 4, 8, 16 … frames; a PD frame dearer than a Newton frame hands back to
    /// Newton; a probe under contact gets the contact rate's budget; the last contact's
    /// release probes at once; no switching on a device.
    #[test]
    fn the_per_frame_rule_probes_backs_off_and_switches() {
        use SolverMethod::{Diffphd as Pd, Newton};
        let choice = choose_method(&q(2268, 100.0, 1.0));
        assert_eq!(choice.method, Newton);
        let r = FrameRule::start(&choice);
        assert_eq!(r.plan(1), FramePlan::Current(Newton), "no cost known yet");
        let r = r.after(1, &outcome(Newton, false, 400.0, 0));
        assert_eq!(r.plan(2), FramePlan::ProbePd { budget: 100 });
        // a failed probe: Newton solves it, the next probe 4 frames later, then 8
        let r = r.after(2, &outcome(Newton, true, 400.0, 0));
        assert_eq!(r.plan(5), FramePlan::Current(Newton));
        assert_eq!(r.plan(6), FramePlan::ProbePd { budget: 100 });
        let r = r.after(6, &outcome(Newton, true, 400.0, 0));
        assert_eq!(r.next_probe, 14);
        // a successful probe makes PD current; a PD frame dearer than Newton's hands back
        let r = r.after(14, &outcome(Pd, true, 30.0, 0));
        assert_eq!(r.plan(15), FramePlan::Current(Pd));
        let r = r.after(15, &outcome(Pd, false, 399.0, 3));
        assert_eq!(r.current, Pd);
        let r = r.after(16, &outcome(Pd, false, 401.0, 3));
        assert_eq!((r.current, r.next_probe), (Newton, 16 + 16));
        // once a frame ended in contact, a probe counts the Newton frame at the contact rate:
        // 400 · 10/25
        assert_eq!(r.plan(32), FramePlan::ProbePd { budget: 40 });
        // contact releases: probe at the next frame, the gap back to 4, at the contact rate
        // (the scene has had contact)
        let r = r.after(17, &outcome(Newton, false, 400.0, 0));
        assert_eq!(
            (r.plan(18), r.backoff),
            (FramePlan::ProbePd { budget: 40 }, 4)
        );
        // before any Newton frame the per-scene choice of PD stands, whatever a frame costs
        let mut pd = choice.clone();
        pd.method = Pd;
        let r = FrameRule::start(&pd);
        assert_eq!(r.after(1, &outcome(Pd, false, 1e6, 0)).current, Pd);
        // a PD miss retried by Newton gives the reference: PD frames dearer hand back
        let r = r.after(1, &outcome(Newton, false, 100.0, 0));
        assert_eq!(r.current, Newton);
        let mut dev = pd.clone();
        dev.quantities.device = true;
        let r = FrameRule::start(&dev);
        assert_eq!(r.after(1, &outcome(Pd, false, 1e9, 0)).current, Pd);
    }

    /// A Newton frame without a factorization keeps the reference cost (no probe at a zero
    /// budget); a Newton miss that PD's retry solves makes PD current and holds it through
    /// the contact episode, whatever its cost; the release hands the rule back (the Oreo).
    #[test]
    fn a_newton_miss_under_contact_holds_pd_until_release() {
        use SolverMethod::{Diffphd as Pd, Newton};
        let r = FrameRule::start(&choose_method(&q(900, 24.0, 100.0)));
        assert_eq!(r.current, Newton);
        let r = r.after(1, &outcome(Newton, false, 0.0, 0));
        assert_eq!(
            (r.newton_cost, r.plan(2)),
            (None, FramePlan::Current(Newton))
        );
        // frame 5: Newton misses under contact, PD's retry solves it
        let r = r.after(5, &outcome(Pd, false, 11.0, 84));
        assert_eq!((r.current, r.pd_held), (Pd, true));
        // a PD frame dearer than any Newton frame stays PD while contact lasts
        let r = r.after(6, &outcome(Pd, false, 1e6, 67));
        assert_eq!((r.current, r.pd_held), (Pd, true));
        // contact released: the hold ends, the normal rule again; no Newton frame has been
        // costed (frame 1 had no factorization), so PD stands
        let r = r.after(7, &outcome(Pd, false, 5.0, 0));
        assert!(!r.pd_held);
        let held = r.after(8, &outcome(Pd, false, 1e6, 0));
        assert_eq!(held.current, Pd);
        // with a Newton frame's cost known, a dearer PD frame hands back
        let r = FrameRule {
            newton_cost: Some(100.0),
            ..r
        };
        assert_eq!(r.after(8, &outcome(Pd, false, 1e6, 0)).current, Newton);
    }

    /// The rule reads only its inputs: the same quantities give the same choice.
    #[test]
    fn the_choice_is_a_function_of_the_quantities() {
        for (r, c) in [(10.0, 1.0), (299.0, 50.0), (1e4, 1.0), (1e4, 200.0)] {
            let a = choose_method(&q(1000, r, c));
            let b = choose_method(&q(1000, r, c));
            assert_eq!((a.method, a.reason), (b.method, b.reason));
        }
        assert_eq!(other_method(SolverMethod::Newton), SolverMethod::Diffphd);
        assert_eq!(other_method(SolverMethod::Diffphd), SolverMethod::Newton);
    }
}
