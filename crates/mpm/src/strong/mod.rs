//! The strongly coupled, fully implicit MPM–rigid step: the baseline of the seed's speed
//! claim, reference \[10\] of `shared/seeds/convex-mpm-rigid-paper.txt` (Zong, Jiang, Han,
//! "A convex formulation of frictional contact for the material point method and rigid
//! bodies", IROS 2024), reconstructed from the seed's description of it (§I, §VI: one convex
//! problem per step over the MPM grid velocities, the rigid DoFs and the frictional contact,
//! backward Euler, a convex elastic energy, Newton with a direct solve of the full Hessian,
//! serial CPU) — its code was not read. docs/mpm.md, "Strong coupling", states what it solves
//! and where it differs from \[10\].
//!
//! One step of length Δt (no substeps):
//! 1. P2G of mass and APIC momentum (no stress): m_i, v*_i = (mv)_i/m_i + Δt g.
//! 2. Contacts registered as in the weak coupling ([`crate::contact::assemble_substep_problem`]
//!    with δt = Δt: one per particle inside a geometry at the step-start pose, lagged
//!    Hunt–Crossley model), but the rigid velocity of a contact is an unknown for the dynamic
//!    DoFs of its body instead of being frozen.
//! 3. x = (v, u) = argmin E(x) ([`problem`]): inertia of nodes and rigid DoFs, the elastic
//!    energy Σ V⁰ψ(F(v)) of the backward-Euler F(v) = (I + Δt Σ_i v_i ∇w_ipᵀ)Fⁿ, and Σ ℓ_c.
//!    ψ = μ‖ε‖² + (λ/2)(tr ε)², ε = sym(RᵀF) − I: the corotated linear energy with the
//!    rotation R lagged at the step start, convex (quadratic) in F and so in x; with ℓ_c
//!    convex, E is strongly convex.
//! 4. Newton with a sparse Cholesky factorisation of ∇²E and the exact line search
//!    ([`StrongProblem::solve_newton`]).
//! 5. G2P with the solved grid velocities (F update and the material's return mapping, as the
//!    weak coupling), then the rigid world's step with the solved MPM impulses.

pub mod problem;
pub mod step;

pub use problem::{ElasticTerm, Gradient, StrongContact, StrongProblem};
pub use step::{build_problem, strong_step, StrongSolution};
