//! Drake's convex Hunt–Crossley contact model in the *lagged* approximation, one contact point.
//!
//! Source: Drake, `multibody/contact_solvers/sap/sap_hunt_crossley_constraint.{h,cc}`
//! (`SapHuntCrossleyConstraint` with `SapHuntCrossleyApproximation::kLagged`), and Castro,
//! Permenter, Han, "An unconstrained convex formulation of compliant contact", IEEE T-RO 39(2),
//! 2023 (the "lagged" model; seed ref. \[35\]). Written from the equations, not from the code.
//!
//! Contact frame: v_c = (v_t1, v_t2, v_n) with the normal n̂ pointing out of the rigid geometry
//! into the other body, so v_n > 0 is *separating*; the penetration is x = −φ and ẋ = −v_n.
//!
//! **Normal impulse** (linear compliance with Hunt–Crossley dissipation, penetration
//! linearised in time x ≈ x₀ + δt·ẋ):
//!
//!   n(v_n) = δt · (f_e0 − δt·k·v_n)₊ · (1 − d·v_n)₊,   f_e0 = k·x₀ = −k·φ₀,
//!
//! non-increasing in v_n, zero for v_n ≥ v̂ = min(f_e0/(δt·k), 1/d). Its antiderivative with
//! N(0) = 0, for v < v̂,
//!
//!   N(v) = δt·\[f_e0·v − (f_e0·d + δt·k)·v²/2 + δt·k·d·v³/3\],   and N(v) = N(v̂) for v ≥ v̂.
//!
//! **Regularised friction, lagged**: the friction bound uses the step-start normal impulse
//!
//!   n₀ = (δt·f_e0)₊ · (1 − d·v_n0)₊,
//!
//! and the soft norm ‖v_t‖ₛ = √(‖v_t‖² + ε²) − ε with ε = max(v_s, μ·σ·w·n₀) (v_s the stiction
//! tolerance, σ SAP's regularisation, w a Delassus estimate; σ = 0 gives ε = v_s).
//!
//! **Cost, impulse, Hessian** (γ = −∂ℓ/∂v_c, G = ∂²ℓ/∂v_c², S = √(‖v_t‖² + ε²)):
//!
//!   ℓ(v_c) = −N(v_n) + μ·n₀·‖v_t‖ₛ,
//!   γ = (−μ·n₀·v_t/S, n(v_n)),
//!   G = [\[μ·n₀·(I − v_t v_tᵀ/S²)/S, 0\], \[0, −n′(v_n)\]],
//!   n′(v) = −δt·\[δt·k·(1 − d·v) + d·(f_e0 − δt·k·v)\]  (v < v̂; 0 otherwise).
//!
//! G is PSD (n′ ≤ 0 and I − v_t v_tᵀ/S² ≻ 0), so ℓ is convex; ‖γ_t‖ ≤ μ·n₀ (Coulomb, lagged).
//! Drake defaults (`geometry::DefaultProximityProperties`, `MultibodyPlantConfig`,
//! `SapSolverParameters`): point stiffness 1e6 N/m, Hunt–Crossley dissipation 50 s/m,
//! friction 0.5, stiction tolerance 1e-4 m/s, σ = 1e-3.

use nalgebra::{Matrix2, Matrix3, Vector2, Vector3};

use super::ContactError;

/// Parameters of the lagged compliant model (SI units).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaggedParams {
    /// Point-contact stiffness k \[N/m\]; must be > 0. Drake default 1e6.
    pub stiffness: f64,
    /// Hunt–Crossley dissipation d \[s/m\]; ≥ 0. Drake default 50.
    pub dissipation: f64,
    /// Coulomb friction coefficient μ; ≥ 0. Drake default 0.5.
    pub friction: f64,
    /// Stiction tolerance v_s \[m/s\]; > 0. Drake default 1e-4.
    pub stiction_tolerance: f64,
    /// SAP friction regularisation σ (dimensionless); ≥ 0. Drake's SAP default 1e-3.
    pub sigma: f64,
}

impl Default for LaggedParams {
    fn default() -> Self {
        Self {
            stiffness: 1.0e6,
            dissipation: 50.0,
            friction: 0.5,
            stiction_tolerance: 1.0e-4,
            sigma: 1.0e-3,
        }
    }
}

impl LaggedParams {
    /// Per-particle MPM contact defaults, those of the seed authors' GPU MPM code
    /// (`multibody/gpu_mpm` in the authors' Drake fork: `MpmConfigParams::contact_stiffness`
    /// = 1e5 N/m, `contact_damping` = 0, stiction tolerance `config::epsv` = 1e-3 m/s), with
    /// friction μ = 0.5 and σ = 1e-3 as in [`Default`].
    ///
    /// Why not Drake's rigid-body defaults: the block-diagonal quasi-Newton method converges at
    /// a rate set by how far each contact's Hessian G_c dominates the masses of its 27 stencil
    /// nodes, G_c·w_c with w_c = Σ_k w_ck²/m_k the Delassus diagonal. On gram-scale nodes at
    /// δt = 0.1 ms the friction term μ·n₀/v_s is the largest: with v_s = 1e-4 m/s (Drake's
    /// `MultibodyPlantConfig::stiction_tolerance`) it is ~10² × the nodes' effective mass. Drake's
    /// own bounds are relative to w (SAP's near-rigid threshold caps the normal Hessian at
    /// 4π²/(β²w); σ caps friction at 1/(σw) = 10³/w), so they do not act in this regime. The
    /// seed's values keep G·w = O(1–10). Measured on the panel squeeze (docs/mpm.md): Drake
    /// defaults need 215–1819 quasi-Newton iterations per substep on average (max 6808), these
    /// 6–14 (max 16), at ε_r = 5e-2.
    pub fn mpm_default() -> Self {
        Self {
            stiffness: 1.0e5,
            dissipation: 0.0,
            stiction_tolerance: 1.0e-3,
            ..Self::default()
        }
    }

    /// Checks every field's domain; the error names the first bad field.
    pub fn validate(&self) -> Result<(), ContactError> {
        let checks: [(&'static str, f64, bool, &'static str); 5] = [
            (
                "stiffness",
                self.stiffness,
                self.stiffness > 0.0,
                "must be positive and finite",
            ),
            (
                "dissipation",
                self.dissipation,
                self.dissipation >= 0.0,
                "must be non-negative and finite",
            ),
            (
                "friction",
                self.friction,
                self.friction >= 0.0,
                "must be non-negative and finite",
            ),
            (
                "stiction_tolerance",
                self.stiction_tolerance,
                self.stiction_tolerance > 0.0,
                "must be positive and finite",
            ),
            (
                "sigma",
                self.sigma,
                self.sigma >= 0.0,
                "must be non-negative and finite",
            ),
        ];
        for (name, value, ok, reason) in checks {
            if !ok || !value.is_finite() {
                return Err(ContactError::InvalidParameter {
                    name,
                    value,
                    reason,
                });
            }
        }
        Ok(())
    }
}

/// One registered contact point of the lagged model: everything that is frozen at
/// registration (time step, penetration, lagged normal impulse, regularisation).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LaggedContact {
    k: f64,
    d: f64,
    mu: f64,
    dt: f64,
    fe0: f64,
    n0: f64,
    eps: f64,
}

impl LaggedContact {
    /// Registers a contact: `dt` the (sub)step, `phi0` the step-start signed distance
    /// (negative inside), `vn0` the step-start normal velocity (positive separating),
    /// `delassus` an estimate w of the contact's Delassus operator (1/kg; only used with σ > 0).
    pub fn new(
        params: &LaggedParams,
        dt: f64,
        phi0: f64,
        vn0: f64,
        delassus: f64,
    ) -> Result<Self, ContactError> {
        params.validate()?;
        if !(dt > 0.0 && dt.is_finite()) {
            return Err(ContactError::InvalidParameter {
                name: "dt",
                value: dt,
                reason: "must be positive and finite",
            });
        }
        for (name, value) in [("phi0", phi0), ("vn0", vn0), ("delassus", delassus)] {
            if !value.is_finite() {
                return Err(ContactError::InvalidParameter {
                    name,
                    value,
                    reason: "must be finite",
                });
            }
        }
        let fe0 = -params.stiffness * phi0;
        let n0 = (dt * fe0).max(0.0) * (1.0 - params.dissipation * vn0).max(0.0);
        let eps = params
            .stiction_tolerance
            .max(params.friction * params.sigma * delassus.max(0.0) * n0);
        Ok(Self {
            k: params.stiffness,
            d: params.dissipation,
            mu: params.friction,
            dt,
            fe0,
            n0,
            eps,
        })
    }

    /// The lagged normal impulse n₀ that bounds friction.
    pub fn n0(&self) -> f64 {
        self.n0
    }

    /// The friction regularisation ε of the soft norm.
    pub fn epsilon_soft(&self) -> f64 {
        self.eps
    }

    /// v̂ = min(f_e0/(δt·k), 1/d): the normal velocity above which n(v) = 0.
    fn v_hat(&self) -> f64 {
        let vx = self.fe0 / (self.dt * self.k);
        let vd = if self.d > 0.0 {
            1.0 / self.d
        } else {
            f64::INFINITY
        };
        vx.min(vd)
    }

    /// Normal impulse n(v_n) ≥ 0 (module doc).
    pub fn normal_impulse(&self, vn: f64) -> f64 {
        let fe = self.fe0 - self.dt * self.k * vn;
        let damping = 1.0 - self.d * vn;
        if fe <= 0.0 || damping <= 0.0 {
            return 0.0;
        }
        self.dt * fe * damping
    }

    /// n′(v_n) ≤ 0 (module doc).
    fn normal_impulse_derivative(&self, vn: f64) -> f64 {
        let fe = self.fe0 - self.dt * self.k * vn;
        let damping = 1.0 - self.d * vn;
        if fe <= 0.0 || damping <= 0.0 {
            return 0.0;
        }
        -self.dt * (self.dt * self.k * damping + self.d * fe)
    }

    /// N(v) = ∫₀^v n, clamped at v̂ (module doc).
    fn antiderivative(&self, vn: f64) -> f64 {
        let v = vn.min(self.v_hat());
        let (dt, k, d, fe0) = (self.dt, self.k, self.d, self.fe0);
        dt * v * (fe0 - 0.5 * (fe0 * d + dt * k) * v + dt * k * d * v * v / 3.0)
    }

    /// S = √(‖v_t‖² + ε²) and the soft norm ‖v_t‖ₛ = S − ε (computed without cancellation).
    fn soft(&self, vt: &Vector2<f64>) -> (f64, f64) {
        let t2 = vt.norm_squared();
        let s = (t2 + self.eps * self.eps).sqrt();
        (s, t2 / (s + self.eps))
    }

    /// ℓ(v_c) = −N(v_n) + μ·n₀·‖v_t‖ₛ.
    pub fn cost(&self, vc: &Vector3<f64>) -> f64 {
        let (_, soft) = self.soft(&vc.xy());
        -self.antiderivative(vc.z) + self.mu * self.n0 * soft
    }

    /// γ = −∂ℓ/∂v_c = (−μ·n₀·v_t/S, n(v_n)).
    pub fn impulse(&self, vc: &Vector3<f64>) -> Vector3<f64> {
        let vt = vc.xy();
        let (s, _) = self.soft(&vt);
        let gt = vt * (-self.mu * self.n0 / s);
        Vector3::new(gt.x, gt.y, self.normal_impulse(vc.z))
    }

    /// G = ∂²ℓ/∂v_c² (PSD).
    pub fn hessian(&self, vc: &Vector3<f64>) -> Matrix3<f64> {
        let vt = vc.xy();
        let (s, _) = self.soft(&vt);
        let gt = (Matrix2::identity() - vt * vt.transpose() / (s * s)) * (self.mu * self.n0 / s);
        let mut g = Matrix3::zeros();
        g.fixed_view_mut::<2, 2>(0, 0).copy_from(&gt);
        g[(2, 2)] = -self.normal_impulse_derivative(vc.z);
        g
    }

    /// Cost, impulse and Hessian together.
    pub fn eval(&self, vc: &Vector3<f64>) -> (f64, Vector3<f64>, Matrix3<f64>) {
        (self.cost(vc), self.impulse(vc), self.hessian(vc))
    }
}

/// An orthonormal contact frame R = \[t₁ t₂ n̂\] (columns, world) with n̂ the given unit normal.
pub fn contact_frame(normal: &Vector3<f64>) -> Matrix3<f64> {
    let n = normal.normalize();
    // Pick the world axis least aligned with n for a well-conditioned tangent.
    let a = if n.x.abs() < 0.57 {
        Vector3::x()
    } else if n.y.abs() < 0.57 {
        Vector3::y()
    } else {
        Vector3::z()
    };
    let t1 = (a - n * n.dot(&a)).normalize();
    let t2 = n.cross(&t1);
    Matrix3::from_columns(&[t1, t2, n])
}
