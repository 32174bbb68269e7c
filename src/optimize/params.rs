//! Differentiable parameters declared in the scene (`[[parameter]]`): the generic half of
//! every parameter class — expansion into scalars with names and bounds, the log transform,
//! the model at a parameter vector — iterating the registry of [`super::classes`], where
//! each class says how it is read from and written into a [`Model`] and read out of the
//! per-class [`Gradients`] of the adjoint (spec §7.5 "zone / log parameters", "initial state").
//!
//! Working variable: θ = value, or θ = ln(value) with `log = true` (then
//! $d\mathcal L/d\theta=\text{value}\cdot d\mathcal L/d\,\text{value}$).

pub use super::classes::api::Param;
use super::classes::{self, only, Owner, ParamClass, Shape};
use crate::model::Model;
use crate::scene::{ParamKind, ParamSpec};
use crate::solver::gradient::Gradients;

/// The scene key of a `kind` (`youngs_modulus`, …): its registered class's key.
pub fn kind_name(k: ParamKind) -> &'static str {
    classes::of_kind(k).map_or("unregistered", |c| c.key())
}

/// Resolve and expand the declared parameters (vector kinds without `component` become
/// three, muscle activations without `knot` one per knot). Errors name the `parameter[i]`
/// key.
pub fn expand(specs: &[ParamSpec], model: &Model) -> Result<Vec<Param>, (String, String)> {
    let mut out = Vec::new();
    for (i, s) in specs.iter().enumerate() {
        let class = classes::of_kind(s.kind).ok_or_else(|| {
            (
                format!("parameter[{i}].kind"),
                format!("no registered class for {:?}", s.kind),
            )
        })?;
        out.extend(expand_one(i, class, s, model)?);
    }
    check_nu_once(&out)?;
    Ok(out)
}

/// A body's ν set twice — its `poisson_ratio` and a `poisson_ratio_field` on it, or two
/// fields sharing an element — would overwrite one another (ν is a value, not a factor
/// like E): an error naming the later declaration.
fn check_nu_once(params: &[Param]) -> Result<(), (String, String)> {
    use classes::material::{poisson_ratio::PoissonRatio, poisson_ratio_field};
    let scalar = PoissonRatio.key();
    let mut owner: std::collections::HashMap<usize, usize> = Default::default();
    for p in params
        .iter()
        .filter(|p| p.key() == poisson_ratio_field::KEY)
    {
        let clash = params
            .iter()
            .find(|q| q.key() == scalar && q.body == p.body)
            .map(|q| q.index)
            .or_else(|| owner.get(&p.elements[0]).copied().filter(|&i| i != p.index));
        if let Some(other) = clash {
            let (first, later) = (other.min(p.index), other.max(p.index));
            return Err((
                format!("parameter[{later}].kind"),
                format!(
                    "parameter[{first}] already sets the Poisson ratio of these elements of \
                     body {} (`poisson_ratio` and `poisson_ratio_field` on one body, or two \
                     fields sharing an element, overwrite each other)",
                    p.body
                ),
            ));
        }
        owner.insert(p.elements[0], p.index);
    }
    Ok(())
}

/// The scalar parameters of declaration `i` (`s`) as parameters of `class` (the class of
/// `s.kind`, or one the scene format does not name: a test's).
pub fn expand_one(
    i: usize,
    class: &'static dyn ParamClass,
    s: &ParamSpec,
    model: &Model,
) -> Result<Vec<Param>, (String, String)> {
    let mut out = Vec::new();
    let key = format!("parameter[{i}]");
    let elements = resolve_elements(class, s, &key, model)?;
    let force = resolve_force(class, s, &key, model)?;
    let muscle = resolve_muscle(class, s, &key, model)?;
    let obstacle = resolve_obstacle(class, s, &key, model)?;
    if s.log && !class.positive() {
        return Err((
            format!("{key}.log"),
            format!(
                "`log = true` needs a positive parameter, not {}",
                class.key()
            ),
        ));
    }
    if let Some(st) = s.fd_step {
        if !(st.is_finite() && st > 0.0) {
            return Err((format!("{key}.fd_step"), "expected a step > 0".into()));
        }
    }
    let attachment = resolve_attachment(class, s, &key, model)?;
    let knots = resolve_knots(class, s, &key, model, muscle)?;
    let nknots = if class.shape() == Shape::Knots {
        model.muscles[muscle].knots.len()
    } else {
        1
    };
    let vector = class.shape() == Shape::Vector3;
    let comps = components(vector, s, &key)?;
    // a field: one scalar per element (named by its index in the body), else one with all
    let field = class.shape() == Shape::Elements;
    let first = model.bodies[s.body].elements.start;
    let sets: Vec<Vec<usize>> = if field {
        elements.iter().map(|&e| vec![e]).collect()
    } else {
        vec![elements]
    };
    if s.regularize.is_some() && !field {
        return Err((
            format!("{key}.regularize"),
            only(|c| c.shape() == Shape::Elements, "`regularize`"),
        ));
    }
    for ((c, knot), elements) in comps
        .iter()
        .flat_map(|&c| knots.iter().map(move |&k| (c, k)))
        .flat_map(|ck| sets.iter().map(move |els| (ck, els)))
    {
        let mut name = s
            .name
            .clone()
            .unwrap_or_else(|| default_name(class, s, obstacle));
        if vector {
            name.push_str(&format!(".{}", ["x", "y", "z"][c]));
        }
        if nknots > 1 {
            name.push_str(&format!(".knot{knot}"));
        }
        if field {
            name.push_str(&format!(".e{}", elements[0] - first));
        }
        if s.log {
            name = format!("log {name}");
        }
        let lower = s.lower.map(|b| b.get(c));
        let upper = s.upper.map(|b| b.get(c));
        let initial = s.initial.map(|b| b.get(c));
        check_bounds(&key, (class, vector), s, lower, upper, initial)?;
        let mut p = Param {
            lower,
            upper,
            initial,
            scale: s.scale.unwrap_or(1.0),
            index: i,
            name,
            class,
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
    Ok(out)
}

/// The elements of a class that takes a region (its region's, or the whole body's); none
/// for other classes. Checks the body index.
fn resolve_elements(
    class: &dyn ParamClass,
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
    Ok(if class.refs().region {
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
                only(|c| c.refs().region, "a region"),
            ));
        }
        vec![]
    })
}

/// The global force group of a class that takes one (the body's `force`-th).
fn resolve_force(
    class: &dyn ParamClass,
    s: &ParamSpec,
    key: &str,
    model: &Model,
) -> Result<usize, (String, String)> {
    Ok(if class.refs().force {
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

/// The global muscle group of a class that takes one (the body's `muscle`-th).
fn resolve_muscle(
    class: &dyn ParamClass,
    s: &ParamSpec,
    key: &str,
    model: &Model,
) -> Result<usize, (String, String)> {
    Ok(if class.refs().muscle {
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
                only(|c| c.refs().muscle, "a muscle group"),
            ));
        }
        0
    })
}

/// The obstacle of a class that takes one (required).
fn resolve_obstacle(
    class: &dyn ParamClass,
    s: &ParamSpec,
    key: &str,
    model: &Model,
) -> Result<usize, (String, String)> {
    Ok(if class.refs().obstacle {
        let o = s.obstacle.ok_or((
            format!("{key}.obstacle"),
            format!("`{}` needs `obstacle` (an [[obstacle]] index)", class.key()),
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
                only(|c| c.refs().obstacle, "an obstacle"),
            ));
        }
        0
    })
}

/// The global compliant attachment group of a class that takes one.
fn resolve_attachment(
    class: &dyn ParamClass,
    s: &ParamSpec,
    key: &str,
    model: &Model,
) -> Result<usize, (String, String)> {
    if !class.refs().attachment {
        if s.attachment.is_some() {
            return Err((
                format!("{key}.attachment"),
                only(|c| c.refs().attachment, "an attachment"),
            ));
        }
        return Ok(0);
    }
    let local = s.attachment.unwrap_or(0);
    model
        .attachments
        .iter()
        .position(|g| g.body == s.body && g.index == local)
        .ok_or_else(|| {
            (
                format!("{key}.attachment"),
                format!(
                    "body {} has no compliant attachment {local} (a `[[body.attachment]]` with compliance > 0; hard ones are Dirichlet groups)",
                    s.body
                ),
            )
        })
}

/// The knots of a [`Shape::Knots`] class (`knot`, or all of the group's).
fn resolve_knots(
    class: &dyn ParamClass,
    s: &ParamSpec,
    key: &str,
    model: &Model,
    muscle: usize,
) -> Result<Vec<usize>, (String, String)> {
    Ok(if class.shape() == Shape::Knots {
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
                only(|c| c.shape() == Shape::Knots, "a knot"),
            ));
        }
        vec![0]
    })
}

/// The components of a vector parameter (`component`, or all three).
fn components(vector: bool, s: &ParamSpec, key: &str) -> Result<Vec<usize>, (String, String)> {
    Ok(if vector {
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
fn default_name(class: &dyn ParamClass, s: &ParamSpec, obstacle: usize) -> String {
    let owner = match class.owner() {
        Owner::Obstacle => obstacle.to_string(),
        Owner::Scene(label) => label.to_string(),
        Owner::Body => s.body.to_string(),
    };
    let mut n = format!("{}[{}]", class.key(), owner);
    if let Some(a) = s.attachment {
        n.push_str(&format!(".attachment{a}"));
    }
    if let Some(r) = s.region {
        n.push_str(&format!(".region{r}"));
    }
    if class.refs().force {
        n.push_str(&format!(".force{}", s.force.unwrap_or(0)));
    }
    if class.refs().muscle {
        n.push_str(&format!(".muscle{}", s.muscle.unwrap_or(0)));
    }
    n
}

/// Checks of the `optimize` keys of `parameter[i]` for one component: finite, inside the
/// class's physical range ([`ParamClass::domain`]), positive with `log`, lower < upper.
fn check_bounds(
    key: &str,
    (class, vector): (&dyn ParamClass, bool),
    s: &ParamSpec,
    lower: Option<f64>,
    upper: Option<f64>,
    initial: Option<f64>,
) -> Result<(), (String, String)> {
    let vector = vector && s.component.is_none();
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
            let d = class.domain();
            if !d.contains(v) {
                let low = if d.lower_closed { ">=" } else { ">" };
                return Err((
                    format!("{key}.{name}"),
                    format!(
                        "{} needs {low} {} and < {}, got {v}",
                        class.key(),
                        d.lower,
                        d.upper
                    ),
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
    /// The scene key of its class.
    pub fn key(&self) -> &'static str {
        self.class.key()
    }

    /// Value in user units.
    pub fn value(&self, m: &Model) -> f64 {
        self.class.value(self, m)
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
        self.class.set(self, m, value)
    }

    /// $d\mathcal L/d\theta$ at the model `m` built by [`apply_all`] with this parameter at
    /// `value` (user units): the class's $d\mathcal L/d\,\text{value}$, times `value` for a
    /// log parameter.
    pub fn gradient(&self, m: &Model, g: &Gradients, value: f64) -> f64 {
        let dvalue = self.class.gradient(self, m, g, value);
        if self.log {
            value * dvalue
        } else {
            dvalue
        }
    }

    /// Central-difference step in θ (the sweep of [`crate::optimize::gradcheck`] brackets it
    /// from ×10 downwards): `fd_step` if declared, 1e-3 for log parameters, else the class's
    /// ([`ParamClass::fd_step`]).
    pub fn default_fd_step(&self, m: &Model) -> f64 {
        if let Some(s) = self.fd_step {
            return s;
        }
        if self.log {
            return 1e-3;
        }
        self.class.fd_step(self, m, self.value(m).abs())
    }
}

/// The model at parameter values `values` (user units): a copy of `base` with every
/// parameter applied ([`ParamClass::apply`]). Young's-modulus parameters multiply the base
/// moduli of their element sets by `value / base_value`, so overlapping sets (a region and
/// its whole body) compose as independent factors and the parametrization is the same at
/// every point.
pub fn apply_all(params: &[Param], base: &Model, values: &[f64]) -> Model {
    let mut m = base.clone();
    let mut factor = vec![1.0; base.num_elements()];
    for (p, &v) in params.iter().zip(values) {
        p.class.apply(p, &mut m, v, &mut factor);
    }
    for (e, f) in factor.iter().enumerate() {
        m.params.youngs[e] = base.params.youngs[e] * f;
    }
    m
}
