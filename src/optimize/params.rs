//! Differentiable parameters declared in the scene (`[[parameter]]`): how each is read
//! from and written into a [`Model`], and how its gradient is assembled from the per-class
//! [`Gradients`] of the adjoint (spec §7.5 "zone / log parameters", "initial state").
//!
//! Working variable: θ = value, or θ = ln(value) with `log = true` (then
//! $d\mathcal L/d\theta=\text{value}\cdot d\mathcal L/d\,\text{value}$).

use crate::model::{euler_rotation, state_direction, Model};
use crate::scene::{ParamKind, ParamSpec};
use crate::solver::gradient::Gradients;
use nalgebra::Vector3;

/// A resolved scalar parameter.
#[derive(Clone, Debug)]
pub struct Param {
    pub name: String,
    pub kind: ParamKind,
    pub body: usize,
    /// Elements (youngs_modulus) or empty.
    pub elements: Vec<usize>,
    pub component: usize,
    /// Global force-group index (force_scale).
    pub force: usize,
    /// Global muscle-group index (muscle_activation).
    pub muscle: usize,
    /// Activation knot of the muscle group (muscle_activation).
    pub knot: usize,
    pub seed: u64,
    /// Obstacle index (friction, obstacle_offset).
    pub obstacle: usize,
    /// Global compliant attachment group (attachment_stiffness, attachment_offset).
    pub attachment: usize,
    pub log: bool,
    pub fd_step: Option<f64>,
    /// Value in the base model (for Young's modulus: the mean over `elements`).
    pub base_value: f64,
    /// `optimize` bounds in user units (`lower`/`upper`), if declared.
    pub lower: Option<f64>,
    pub upper: Option<f64>,
    /// `optimize` starting value in user units (`initial`), if declared.
    pub initial: Option<f64>,
    /// `optimize` variable scale (`scale`, default 1).
    pub scale: f64,
    /// Index of the declaring `[[parameter]]` entry.
    pub index: usize,
}

pub fn kind_name(k: ParamKind) -> &'static str {
    match k {
        ParamKind::YoungsModulus => "youngs_modulus",
        ParamKind::PoissonRatio => "poisson_ratio",
        ParamKind::Density => "density",
        ParamKind::DampingAlpha => "damping_alpha",
        ParamKind::DampingBeta => "damping_beta",
        ParamKind::InitialTranslation => "initial_translation",
        ParamKind::InitialRotation => "initial_rotation",
        ParamKind::InitialVelocity => "initial_velocity",
        ParamKind::InitialStateDirection => "initial_state_direction",
        ParamKind::ForceScale => "force_scale",
        ParamKind::Gravity => "gravity",
        ParamKind::MuscleActivation => "muscle_activation",
        ParamKind::Friction => "friction",
        ParamKind::ObstacleOffset => "obstacle_offset",
        ParamKind::BodyFriction => "body_friction",
        ParamKind::AttachmentStiffness => "attachment_stiffness",
        ParamKind::AttachmentOffset => "attachment_offset",
    }
}

fn is_vector(k: ParamKind) -> bool {
    matches!(
        k,
        ParamKind::InitialTranslation
            | ParamKind::InitialRotation
            | ParamKind::InitialVelocity
            | ParamKind::Gravity
            | ParamKind::ObstacleOffset
            | ParamKind::AttachmentOffset
    )
}

fn is_positive(k: ParamKind) -> bool {
    matches!(
        k,
        ParamKind::YoungsModulus
            | ParamKind::Density
            | ParamKind::DampingAlpha
            | ParamKind::DampingBeta
            | ParamKind::ForceScale
            | ParamKind::MuscleActivation
            | ParamKind::Friction
            | ParamKind::BodyFriction
            | ParamKind::AttachmentStiffness
    )
}

/// Resolve and expand the declared parameters (vector kinds without `component` become
/// three, muscle activations without `knot` one per knot). Errors name the `parameter[i]`
/// key.
pub fn expand(specs: &[ParamSpec], model: &Model) -> Result<Vec<Param>, (String, String)> {
    let mut out = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let key = format!("parameter[{i}]");
        let elements = resolve_elements(s, &key, model)?;
        let force = resolve_force(s, &key, model)?;
        let muscle = resolve_muscle(s, &key, model)?;
        let obstacle = resolve_obstacle(s, &key, model)?;
        if s.log && !is_positive(s.kind) {
            return Err((
                format!("{key}.log"),
                format!(
                    "`log = true` needs a positive parameter, not {}",
                    kind_name(s.kind)
                ),
            ));
        }
        if let Some(st) = s.fd_step {
            if !(st.is_finite() && st > 0.0) {
                return Err((format!("{key}.fd_step"), "expected a step > 0".into()));
            }
        }
        let attachment = resolve_attachment(s, &key, model)?;
        let knots = resolve_knots(s, &key, model, muscle)?;
        let nknots = if s.kind == ParamKind::MuscleActivation {
            model.muscles[muscle].knots.len()
        } else {
            1
        };
        let comps = components(s, &key)?;
        for (c, knot) in comps
            .iter()
            .flat_map(|&c| knots.iter().map(move |&k| (c, k)))
        {
            let mut name = s.name.clone().unwrap_or_else(|| default_name(s, obstacle));
            if is_vector(s.kind) {
                name.push_str(&format!(".{}", ["x", "y", "z"][c]));
            }
            if nknots > 1 {
                name.push_str(&format!(".knot{knot}"));
            }
            if s.log {
                name = format!("log {name}");
            }
            let lower = s.lower.map(|b| b.get(c));
            let upper = s.upper.map(|b| b.get(c));
            let initial = s.initial.map(|b| b.get(c));
            check_bounds(&key, s, lower, upper, initial)?;
            let mut p = Param {
                lower,
                upper,
                initial,
                scale: s.scale.unwrap_or(1.0),
                index: i,
                name,
                kind: s.kind,
                body: s.body,
                elements: elements.clone(),
                component: c,
                force,
                muscle,
                knot,
                seed: s.seed.unwrap_or(1),
                obstacle,
                attachment,
                log: s.log,
                fd_step: s.fd_step,
                base_value: 0.0,
            };
            p.base_value = p.value(model);
            if p.log && p.base_value.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
                return Err((
                    format!("{key}.log"),
                    format!(
                        "`log = true` needs a value > 0, but {} is {}",
                        p.name, p.base_value
                    ),
                ));
            }
            out.push(p);
        }
    }
    Ok(out)
}

/// The elements of a `youngs_modulus` parameter (its region's, or the whole body's); none
/// for other kinds. Checks the body index.
fn resolve_elements(
    s: &ParamSpec,
    key: &str,
    model: &Model,
) -> Result<Vec<usize>, (String, String)> {
    if s.body >= model.bodies.len() {
        return Err((
            format!("{key}.body"),
            format!(
                "body {} does not exist (scene has {})",
                s.body,
                model.bodies.len()
            ),
        ));
    }
    let body = &model.bodies[s.body];
    Ok(if s.kind == ParamKind::YoungsModulus {
        match s.region {
            Some(r) => body.regions.get(r).cloned().ok_or((
                format!("{key}.region"),
                format!(
                    "region {r} does not exist (body has {})",
                    body.regions.len()
                ),
            ))?,
            None => body.elements.clone().collect(),
        }
    } else {
        if s.region.is_some() {
            return Err((
                format!("{key}.region"),
                "only `youngs_modulus` takes a region".into(),
            ));
        }
        vec![]
    })
}

/// The global force group of a `force_scale` parameter (the body's `force`-th).
fn resolve_force(s: &ParamSpec, key: &str, model: &Model) -> Result<usize, (String, String)> {
    Ok(if s.kind == ParamKind::ForceScale {
        let local = s.force.unwrap_or(0);
        let globals: Vec<usize> = (0..model.forces.len())
            .filter(|&g| model.forces[g].body == s.body)
            .collect();
        *globals.get(local).ok_or((
            format!("{key}.force"),
            format!("force {local} does not exist on body {}", s.body),
        ))?
    } else {
        0
    })
}

/// The global muscle group of a `muscle_activation` parameter (the body's `muscle`-th).
fn resolve_muscle(s: &ParamSpec, key: &str, model: &Model) -> Result<usize, (String, String)> {
    Ok(if s.kind == ParamKind::MuscleActivation {
        let local = s.muscle.unwrap_or(0);
        let globals: Vec<usize> = (0..model.muscles.len())
            .filter(|&g| model.muscles[g].body == s.body)
            .collect();
        *globals.get(local).ok_or((
            format!("{key}.muscle"),
            format!("muscle group {local} does not exist on body {}", s.body),
        ))?
    } else {
        if s.muscle.is_some() {
            return Err((
                format!("{key}.muscle"),
                "only `muscle_activation` takes a muscle group".into(),
            ));
        }
        0
    })
}

/// The obstacle of a `friction` or `obstacle_offset` parameter.
fn resolve_obstacle(s: &ParamSpec, key: &str, model: &Model) -> Result<usize, (String, String)> {
    Ok(
        if matches!(s.kind, ParamKind::Friction | ParamKind::ObstacleOffset) {
            let o = s.obstacle.ok_or((
                format!("{key}.obstacle"),
                format!(
                    "`{}` needs `obstacle` (an [[obstacle]] index)",
                    kind_name(s.kind)
                ),
            ))?;
            if o >= model.obstacles.len() {
                return Err((
                    format!("{key}.obstacle"),
                    format!(
                        "obstacle {o} does not exist (scene has {})",
                        model.obstacles.len()
                    ),
                ));
            }
            o
        } else {
            if s.obstacle.is_some() {
                return Err((
                    format!("{key}.obstacle"),
                    "only `friction` and `obstacle_offset` take an obstacle".into(),
                ));
            }
            0
        },
    )
}

/// The global compliant attachment group of an `attachment_*` parameter.
fn resolve_attachment(s: &ParamSpec, key: &str, model: &Model) -> Result<usize, (String, String)> {
    Ok(
        if matches!(
            s.kind,
            ParamKind::AttachmentStiffness | ParamKind::AttachmentOffset
        ) {
            let local = s.attachment.unwrap_or(0);
            match model
            .attachments
            .iter()
            .position(|g| g.body == s.body && g.index == local)
        {
            Some(g) => g,
            None => {
                return Err((
                    format!("{key}.attachment"),
                    format!(
                        "body {} has no compliant attachment {local} (a `[[body.attachment]]` with compliance > 0; hard ones are Dirichlet groups)",
                        s.body
                    ),
                ))
            }
        }
        } else {
            if s.attachment.is_some() {
                return Err((
                    format!("{key}.attachment"),
                    "only `attachment_stiffness` and `attachment_offset` take an attachment".into(),
                ));
            }
            0
        },
    )
}

/// The knots of a `muscle_activation` parameter (`knot`, or all of the group's).
fn resolve_knots(
    s: &ParamSpec,
    key: &str,
    model: &Model,
    muscle: usize,
) -> Result<Vec<usize>, (String, String)> {
    Ok(if s.kind == ParamKind::MuscleActivation {
        let nk = model.muscles[muscle].knots.len();
        match s.knot {
            Some(k) if k < nk => vec![k],
            Some(k) => {
                return Err((
                    format!("{key}.knot"),
                    format!("knot {k} does not exist (the muscle group has {nk})"),
                ))
            }
            None => (0..nk).collect(),
        }
    } else {
        if s.knot.is_some() {
            return Err((
                format!("{key}.knot"),
                "only `muscle_activation` takes a knot".into(),
            ));
        }
        vec![0]
    })
}

/// The components of a vector parameter (`component`, or all three).
fn components(s: &ParamSpec, key: &str) -> Result<Vec<usize>, (String, String)> {
    Ok(if is_vector(s.kind) {
        match s.component {
            Some(c) if c < 3 => vec![c],
            Some(c) => {
                return Err((
                    format!("{key}.component"),
                    format!("expected 0, 1 or 2, got {c}"),
                ))
            }
            None => vec![0, 1, 2],
        }
    } else {
        vec![0]
    })
}

/// Default parameter name: `kind[owner]` with the attachment, region, force group and
/// muscle group it refers to.
fn default_name(s: &ParamSpec, obstacle: usize) -> String {
    let owner = if matches!(s.kind, ParamKind::Friction | ParamKind::ObstacleOffset) {
        obstacle.to_string()
    } else if s.kind == ParamKind::BodyFriction {
        "bodies".to_string()
    } else {
        s.body.to_string()
    };
    let mut n = format!("{}[{}]", kind_name(s.kind), owner);
    if let Some(a) = s.attachment {
        n.push_str(&format!(".attachment{a}"));
    }
    if let Some(r) = s.region {
        n.push_str(&format!(".region{r}"));
    }
    if s.kind == ParamKind::ForceScale {
        n.push_str(&format!(".force{}", s.force.unwrap_or(0)));
    }
    if s.kind == ParamKind::MuscleActivation {
        n.push_str(&format!(".muscle{}", s.muscle.unwrap_or(0)));
    }
    n
}

/// Checks of the `optimize` keys of `parameter[i]` for one component.
fn check_bounds(
    key: &str,
    s: &ParamSpec,
    lower: Option<f64>,
    upper: Option<f64>,
    initial: Option<f64>,
) -> Result<(), (String, String)> {
    let vector = is_vector(s.kind) && s.component.is_none();
    for (name, v) in [
        ("lower", s.lower),
        ("upper", s.upper),
        ("initial", s.initial),
    ] {
        if let Some(crate::scene::PerComponent::Three(_)) = v {
            if !vector {
                return Err((
                    format!("{key}.{name}"),
                    "three values need a vector kind without `component`".into(),
                ));
            }
        }
    }
    for (name, v) in [("lower", lower), ("upper", upper), ("initial", initial)] {
        if let Some(v) = v {
            if !v.is_finite() {
                return Err((
                    format!("{key}.{name}"),
                    format!("expected a finite number, got {v}"),
                ));
            }
            if s.log && v <= 0.0 {
                return Err((
                    format!("{key}.{name}"),
                    format!("`log = true` needs positive values, got {v}"),
                ));
            }
        }
    }
    if let (Some(l), Some(u)) = (lower, upper) {
        if l >= u {
            return Err((
                format!("{key}.upper"),
                format!("expected lower < upper, got [{l}, {u}]"),
            ));
        }
    }
    if let Some(sc) = s.scale {
        if !(sc.is_finite() && sc > 0.0) {
            return Err((
                format!("{key}.scale"),
                format!("expected a scale > 0, got {sc}"),
            ));
        }
    }
    Ok(())
}

impl Param {
    /// Value in user units.
    pub fn value(&self, m: &Model) -> f64 {
        let b = self.body;
        match self.kind {
            ParamKind::YoungsModulus => {
                self.elements
                    .iter()
                    .map(|&e| m.params.youngs[e])
                    .sum::<f64>()
                    / self.elements.len() as f64
            }
            ParamKind::PoissonRatio => m.params.nu[b],
            ParamKind::Density => m.params.density[b],
            ParamKind::DampingAlpha => m.params.alpha[b],
            ParamKind::DampingBeta => m.params.beta0[b],
            ParamKind::InitialTranslation => m.offsets[b].translation[self.component],
            ParamKind::InitialRotation => m.offsets[b].euler[self.component],
            ParamKind::InitialVelocity => m.offsets[b].velocity[self.component],
            ParamKind::InitialStateDirection => m
                .state_directions
                .iter()
                .find(|(s, _)| *s == self.seed)
                .map(|d| d.1)
                .unwrap_or(0.0),
            ParamKind::ForceScale => m.forces[self.force].scale,
            ParamKind::Gravity => m.gravity[self.component],
            ParamKind::MuscleActivation => m.muscles[self.muscle].knots[self.knot],
            ParamKind::Friction => m.obstacles[self.obstacle].friction,
            ParamKind::ObstacleOffset => m.obstacles[self.obstacle].offset[self.component],
            ParamKind::BodyFriction => m.contact.body_friction,
            ParamKind::AttachmentStiffness => m.attachments[self.attachment].stiffness,
            ParamKind::AttachmentOffset => m.attachments[self.attachment].offset[self.component],
        }
    }

    /// Working variable θ from a value.
    pub fn to_theta(&self, value: f64) -> f64 {
        if self.log {
            value.ln()
        } else {
            value
        }
    }
    /// Value from the working variable θ.
    pub fn from_theta(&self, theta: f64) -> f64 {
        if self.log {
            theta.exp()
        } else {
            theta
        }
    }

    /// Write a value (user units) into the model. Young's modulus is not set here: E
    /// parameters compose as independent factors on the base moduli, see [`apply_all`].
    pub fn set(&self, m: &mut Model, value: f64) {
        let b = self.body;
        match self.kind {
            ParamKind::YoungsModulus => {}
            ParamKind::PoissonRatio => m.params.nu[b] = value,
            ParamKind::Density => m.params.density[b] = value,
            ParamKind::DampingAlpha => m.params.alpha[b] = value,
            ParamKind::DampingBeta => m.params.beta0[b] = value,
            ParamKind::InitialTranslation => m.offsets[b].translation[self.component] = value,
            ParamKind::InitialRotation => m.offsets[b].euler[self.component] = value,
            ParamKind::InitialVelocity => m.offsets[b].velocity[self.component] = value,
            ParamKind::InitialStateDirection => {
                m.state_directions.retain(|(s, _)| *s != self.seed);
                m.state_directions.push((self.seed, value));
            }
            ParamKind::ForceScale => m.forces[self.force].scale = value,
            ParamKind::Gravity => m.gravity[self.component] = value,
            ParamKind::MuscleActivation => m.muscles[self.muscle].knots[self.knot] = value,
            ParamKind::Friction => m.obstacles[self.obstacle].friction = value,
            ParamKind::ObstacleOffset => m.obstacles[self.obstacle].offset[self.component] = value,
            ParamKind::BodyFriction => m.contact.body_friction = value,
            ParamKind::AttachmentStiffness => m.attachments[self.attachment].stiffness = value,
            ParamKind::AttachmentOffset => {
                m.attachments[self.attachment].offset[self.component] = value
            }
        }
        if matches!(
            self.kind,
            ParamKind::InitialTranslation
                | ParamKind::InitialRotation
                | ParamKind::InitialVelocity
                | ParamKind::InitialStateDirection
        ) {
            m.refresh_initial();
        }
    }

    /// $d\mathcal L/d\theta$ at the model `m` built by [`apply_all`] with this parameter at
    /// `value` (user units).
    pub fn gradient(&self, m: &Model, g: &Gradients, value: f64) -> f64 {
        let b = self.body;
        let dvalue = match self.kind {
            // E_e = E_e^base * prod_p (v_p / v_p^base)  =>  dE_e/dv_p = E_e / v_p
            ParamKind::YoungsModulus => self
                .elements
                .iter()
                .map(|&e| m.params.youngs[e] / value * g.youngs[e])
                .sum(),
            ParamKind::PoissonRatio => g.nu[b],
            ParamKind::Density => g.density[b],
            ParamKind::DampingAlpha => g.alpha[b],
            ParamKind::DampingBeta => g.beta0[b],
            ParamKind::InitialTranslation => m.bodies[b]
                .nodes
                .clone()
                .map(|i| g.x0[3 * i + self.component])
                .sum(),
            ParamKind::InitialVelocity => m.bodies[b]
                .nodes
                .clone()
                .map(|i| g.v0[3 * i + self.component])
                .sum(),
            ParamKind::InitialRotation => {
                let (_, dr) = euler_rotation(m.offsets[b].euler);
                let c = Vector3::from(m.bodies[b].center);
                m.bodies[b]
                    .nodes
                    .clone()
                    .map(|i| {
                        let p = Vector3::new(
                            m.base_x0[3 * i],
                            m.base_x0[3 * i + 1],
                            m.base_x0[3 * i + 2],
                        );
                        let gi = Vector3::new(g.x0[3 * i], g.x0[3 * i + 1], g.x0[3 * i + 2]);
                        gi.dot(&(dr[self.component] * (p - c)))
                    })
                    .sum()
            }
            ParamKind::InitialStateDirection => {
                let (dx, dv) = state_direction(self.seed, g.x0.len());
                dx.iter().zip(&g.x0).map(|(a, b)| a * b).sum::<f64>()
                    + dv.iter().zip(&g.v0).map(|(a, b)| a * b).sum::<f64>()
            }
            ParamKind::ForceScale => g.force_scale[self.force],
            ParamKind::Gravity => g.gravity[self.component],
            ParamKind::MuscleActivation => g.muscle_activation[self.muscle][self.knot],
            ParamKind::Friction => g.friction[self.obstacle],
            ParamKind::ObstacleOffset => g.obstacle_offset[self.obstacle][self.component],
            ParamKind::BodyFriction => g.body_friction,
            ParamKind::AttachmentStiffness => g.attachment_stiffness[self.attachment],
            ParamKind::AttachmentOffset => g.attachment_offset[self.attachment][self.component],
        };
        if self.log {
            value * dvalue
        } else {
            dvalue
        }
    }

    /// Default central-difference step in θ (the sweep of [`crate::optimize::gradcheck`]
    /// brackets it from ×10 downwards): 1e-3 for log parameters; 1e-3 relative for other
    /// material scalars (1e-3 absolute at 0); β₀: 1e-3·max(β₀, h); α: 1e-3·max(α, 1/h);
    /// translations: 1e-3 of the body's largest extent; rotations 1e-3 rad; velocities
    /// 1e-3 m/s; seeded state direction 0.1; gravity 1e-3·max(|g_c|, 1); obstacle and
    /// attachment offsets 1e-3 of the median element edge; friction 1e-3·max(μ, 0.01).
    pub fn default_fd_step(&self, m: &Model) -> f64 {
        if let Some(s) = self.fd_step {
            return s;
        }
        if self.log {
            return 1e-3;
        }
        let v = self.value(m).abs();
        match self.kind {
            ParamKind::InitialTranslation => {
                let b = &m.bodies[self.body];
                let mut lo = [f64::INFINITY; 3];
                let mut hi = [f64::NEG_INFINITY; 3];
                for i in b.nodes.clone() {
                    for d in 0..3 {
                        lo[d] = lo[d].min(m.rest[i][d]);
                        hi[d] = hi[d].max(m.rest[i][d]);
                    }
                }
                1e-3 * (0..3).map(|d| hi[d] - lo[d]).fold(0.0, f64::max)
            }
            ParamKind::InitialRotation => 1e-3,
            ParamKind::InitialVelocity => 1e-3,
            ParamKind::InitialStateDirection => 1e-1,
            ParamKind::Gravity => 1e-3 * v.max(1.0),
            // 1e-3 of the median element edge
            ParamKind::ObstacleOffset => 2e-3 * m.contact_margin.max(1e-6),
            ParamKind::Friction | ParamKind::BodyFriction => 1e-3 * v.max(0.01),
            ParamKind::AttachmentOffset => 2e-3 * m.contact_margin.max(1e-6),
            // β₀ enters as β₀/h and α as αh: scale the step by the time step.
            ParamKind::DampingBeta => 1e-3 * v.max(m.h),
            ParamKind::DampingAlpha => 1e-3 * v.max(1.0 / m.h),
            _ => 1e-3 * if v > 0.0 { v } else { 1.0 },
        }
    }
}

/// The model at parameter values `values` (user units): a copy of `base` with every
/// parameter applied. Young's-modulus parameters multiply the base moduli of their element
/// sets by `value / base_value`, so overlapping sets (a region and its whole body)
/// compose as independent factors and the parametrization is the same at every point.
pub fn apply_all(params: &[Param], base: &Model, values: &[f64]) -> Model {
    let mut m = base.clone();
    let mut factor = vec![1.0; base.num_elements()];
    for (p, &v) in params.iter().zip(values) {
        if p.kind == ParamKind::YoungsModulus {
            for &e in &p.elements {
                factor[e] *= v / p.base_value;
            }
        } else {
            p.set(&mut m, v);
        }
    }
    for (e, f) in factor.iter().enumerate() {
        m.params.youngs[e] = base.params.youngs[e] * f;
    }
    m
}
