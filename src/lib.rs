//! diffphd: differentiable Projective Dynamics (DiffPhD) for heterogeneous, hyperelastic,
//! contact-rich elastodynamics. See `ARCHITECTURE.md` for the data flow and the module map.
//!
//! Data flows one way: [`scene`] (validated TOML) → [`scene::resolve`](mod@scene::resolve) → [`model::Model`]
//! (mesh + per-element arrays) → [`linalg`] (assembled global matrix `A`, its persistent
//! plan and factor) → [`solver::Simulator::step`] rollout (tape) → loss →
//! [`solver::backward`] adjoint → gradients.

// Numerical kernels index several arrays with the same node/sample/axis index, mirroring
// the equations; iterator rewrites would obscure them.
#![allow(clippy::needless_range_loop)]

pub mod cancel;
pub mod contact;
pub mod diagnostics;
pub mod gpu;
pub mod io;
pub mod linalg;
pub mod material;
pub mod mesh;
pub mod model;
pub mod mpm;
pub mod optimize;
pub mod output;
pub mod scene;
pub mod session;
pub mod solver;
pub mod sweep;

/// Every error of the library, one variant per layer (each layer's enum carries the failing
/// index: node, element, frame, body, key), for the CLI and Python to map to exit codes
/// ([`Error::exit_code`]) and exception classes. Display is the layer's message, unchanged
/// (`#[error(transparent)]`).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Scene(#[from] scene::SceneError),
    #[error(transparent)]
    Model(#[from] scene::resolve::ModelError),
    #[error(transparent)]
    Build(#[from] model::BuildError),
    #[error(transparent)]
    Mesh(#[from] mesh::MeshError),
    #[error(transparent)]
    Linalg(#[from] linalg::LinalgError),
    #[error(transparent)]
    Solver(#[from] solver::SolverError),
    #[error(transparent)]
    Offload(#[from] solver::offload::OffloadError),
    #[error(transparent)]
    Gpu(#[from] gpu::GpuError),
    #[error(transparent)]
    GpuSystem(#[from] gpu::system::GpuSystemError),
    #[error(transparent)]
    Unavailable(#[from] gpu::Unavailable),
    #[error(transparent)]
    Problem(#[from] optimize::problem::ProblemError),
    #[error(transparent)]
    Setup(#[from] optimize::lbfgs::SetupError),
    #[error(transparent)]
    Writeback(#[from] optimize::writeback::WritebackError),
    #[error(transparent)]
    Sweep(#[from] sweep::SweepError),
    #[error(transparent)]
    Plot(#[from] sweep::plot::PlotError),
    #[error(transparent)]
    Metric(#[from] sweep::collect::MetricError),
    #[error(transparent)]
    Vtu(#[from] io::vtu::VtuError),
    #[error(transparent)]
    Ply(#[from] io::ply::PlyReadError),
    #[error(transparent)]
    Outdir(#[from] io::outdir::OutdirError),
    #[error(transparent)]
    MpmScene(#[from] mpm::MpmSceneError),
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

impl Error {
    /// The CLI's exit code for this error: 3 for a step that missed its stopping test under
    /// `on_nonconvergence = "error"` ([`solver::SolverError::exit_code`]), 2 for bad input
    /// (scene, mesh, model, sweep and plot requests, an unavailable backend, a start inside
    /// an obstacle), 1 for a failure while running.
    pub fn exit_code(&self) -> i32 {
        match self {
            Error::Solver(e) => e.exit_code(),
            Error::Scene(_)
            | Error::Model(_)
            | Error::Build(_)
            | Error::Mesh(_)
            | Error::Problem(_)
            | Error::Setup(_)
            | Error::Sweep(_)
            | Error::Plot(_)
            | Error::Metric(_)
            | Error::Ply(_)
            | Error::MpmScene(_)
            | Error::Unavailable(_) => 2,
            _ => 1,
        }
    }
}
