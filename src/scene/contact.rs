//! Scene schema of rigid obstacles (`[[obstacle]]`) and of the contact model (`[contact]`).
//! Every key is documented in `docs/contact.md`. Units: SI (m, s, N).

use crate::model::{ContactModel, ContactSettings, Motion};
use serde::{Deserialize, Serialize};

use super::checks::{finite3, nonneg, positive, Check};

/// Shape of an obstacle. The obstacle is a solid; the bodies live outside it (for `plane`:
/// on the side the normal points to).
#[derive(Clone, Copy, Debug, Serialize, Deserialize, PartialEq, Eq, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ObstacleKind {
    /// Half-space $\{x:(x-p)\cdot n<0\}$ (free side: $(x-p)\cdot n\ge0$); keys `point`, `normal`.
    #[serde(alias = "halfspace", alias = "half_space", alias = "ground")]
    Plane,
    /// Solid ball; keys `center`, `radius`.
    Sphere,
    /// Solid axis-aligned box (in its reference pose); keys `min`, `max`.
    Box,
    /// Solid capsule around the segment `a`–`b`; key `radius`.
    Capsule,
    /// Solid capped cylinder with axis `a`–`b`; key `radius`.
    Cylinder,
}

/// `[[obstacle]]`: a rigid obstacle with a prescribed (static, translating or rotating)
/// motion and Coulomb friction.
#[derive(Clone, Debug, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ObstacleSpec {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(rename = "type")]
    pub kind: ObstacleKind,
    /// `plane`: a point on the plane.
    #[serde(default)]
    pub point: Option<[f64; 3]>,
    /// `plane`: outward normal (pointing into free space; normalised on load).
    #[serde(default)]
    pub normal: Option<[f64; 3]>,
    /// `sphere`: centre.
    #[serde(default)]
    pub center: Option<[f64; 3]>,
    /// `sphere`, `capsule`, `cylinder`: radius (m).
    #[serde(default)]
    pub radius: Option<f64>,
    /// `box`: minimum corner.
    #[serde(default)]
    pub min: Option<[f64; 3]>,
    /// `box`: maximum corner.
    #[serde(default)]
    pub max: Option<[f64; 3]>,
    /// `capsule`, `cylinder`: first axis end point.
    #[serde(default)]
    pub a: Option<[f64; 3]>,
    /// `capsule`, `cylinder`: second axis end point.
    #[serde(default)]
    pub b: Option<[f64; 3]>,
    /// Coulomb friction coefficient μ (0 = frictionless); with `static_friction` the dynamic
    /// (kinetic) coefficient $\mu_k$ of sliding contact.
    #[serde(default)]
    pub friction: f64,
    /// Static friction coefficient $\mu_s\ge$ `friction` (the coefficient at rest; the law
    /// falls to `friction` above `contact.stick_slip_speed`). Default: equal to `friction`.
    /// NCP contact only (refused with `contact.model = "penalty"` and in MPM scenes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub static_friction: Option<f64>,
    /// Restitution coefficient $e_r\in\[0,1\]$ (velocity post-correction of spec §6.2 step 24;
    /// not differentiated).
    #[serde(default)]
    pub restitution: f64,
    /// Prescribed rigid motion (`fixed`, `translate`, `rotate`; a rotation's default centre
    /// is the obstacle's own centre).
    #[serde(default)]
    pub motion: Motion,
}

fn nonzero3(key: &str, v: &[f64; 3]) -> Check {
    finite3(key, v)?;
    if v.iter().map(|x| x * x).sum::<f64>() > 0.0 {
        Ok(())
    } else {
        Err((key.into(), "expected a non-zero vector".into()))
    }
}

/// A static coefficient `value` (key `key`), when given, is finite and at least the dynamic
/// one (`dynamic_key` = `dynamic`).
fn static_at_least(key: &str, value: Option<f64>, dynamic_key: &str, dynamic: f64) -> Check {
    let Some(v) = value else { return Ok(()) };
    nonneg(key, v)?;
    if v < dynamic {
        return Err((
            key.into(),
            format!("expected a static coefficient >= {dynamic_key} ({dynamic}), got {v}"),
        ));
    }
    Ok(())
}

fn require<T: Copy>(k: &str, field: &str, v: Option<T>, kind: &str) -> Result<T, (String, String)> {
    v.ok_or((
        format!("{k}.{field}"),
        format!("a `{kind}` obstacle needs `{field}`"),
    ))
}

impl ObstacleSpec {
    /// Name of the shape as written in scene files.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            ObstacleKind::Plane => "plane",
            ObstacleKind::Sphere => "sphere",
            ObstacleKind::Box => "box",
            ObstacleKind::Capsule => "capsule",
            ObstacleKind::Cylinder => "cylinder",
        }
    }

    /// Range and presence checks; errors are `(key path, message)`.
    pub fn validate(&self, k: &str) -> Check {
        let kind = self.kind_name();
        let allowed: &[&str] = match self.kind {
            ObstacleKind::Plane => &["point", "normal"],
            ObstacleKind::Sphere => &["center", "radius"],
            ObstacleKind::Box => &["min", "max"],
            ObstacleKind::Capsule | ObstacleKind::Cylinder => &["a", "b", "radius"],
        };
        let present = [
            ("point", self.point.is_some()),
            ("normal", self.normal.is_some()),
            ("center", self.center.is_some()),
            ("radius", self.radius.is_some()),
            ("min", self.min.is_some()),
            ("max", self.max.is_some()),
            ("a", self.a.is_some()),
            ("b", self.b.is_some()),
        ];
        for (name, is) in present {
            if is && !allowed.contains(&name) {
                return Err((
                    format!("{k}.{name}"),
                    format!(
                        "not a key of a `{kind}` obstacle (it takes {})",
                        allowed.join(", ")
                    ),
                ));
            }
        }
        match self.kind {
            ObstacleKind::Plane => {
                finite3(
                    &format!("{k}.point"),
                    &require(k, "point", self.point, kind)?,
                )?;
                nonzero3(
                    &format!("{k}.normal"),
                    &require(k, "normal", self.normal, kind)?,
                )?;
            }
            ObstacleKind::Sphere => {
                finite3(
                    &format!("{k}.center"),
                    &require(k, "center", self.center, kind)?,
                )?;
                positive(
                    &format!("{k}.radius"),
                    require(k, "radius", self.radius, kind)?,
                )?;
            }
            ObstacleKind::Box => {
                let lo = require(k, "min", self.min, kind)?;
                let hi = require(k, "max", self.max, kind)?;
                finite3(&format!("{k}.min"), &lo)?;
                finite3(&format!("{k}.max"), &hi)?;
                if (0..3).any(|d| hi[d] <= lo[d]) {
                    return Err((
                        format!("{k}.max"),
                        "every component of `max` must exceed `min`".into(),
                    ));
                }
            }
            ObstacleKind::Capsule | ObstacleKind::Cylinder => {
                let a = require(k, "a", self.a, kind)?;
                let b = require(k, "b", self.b, kind)?;
                finite3(&format!("{k}.a"), &a)?;
                finite3(&format!("{k}.b"), &b)?;
                let len2: f64 = (0..3).map(|d| (b[d] - a[d]).powi(2)).sum();
                if len2 == 0.0 {
                    return Err((format!("{k}.b"), "`a` and `b` must differ".into()));
                }
                positive(
                    &format!("{k}.radius"),
                    require(k, "radius", self.radius, kind)?,
                )?;
            }
        }
        nonneg(&format!("{k}.friction"), self.friction)?;
        static_at_least(
            &format!("{k}.static_friction"),
            self.static_friction,
            "friction",
            self.friction,
        )?;
        if !(self.restitution.is_finite() && (0.0..=1.0).contains(&self.restitution)) {
            return Err((
                format!("{k}.restitution"),
                format!("expected 0 <= e <= 1, got {}", self.restitution),
            ));
        }
        match &self.motion {
            Motion::Fixed => {}
            Motion::Translate { velocity } => finite3(&format!("{k}.motion.velocity"), velocity)?,
            Motion::Rotate { axis, rate, center } => {
                nonzero3(&format!("{k}.motion.axis"), axis)?;
                if !rate.is_finite() {
                    return Err((format!("{k}.motion.rate"), "expected a finite rate".into()));
                }
                if let Some(c) = center {
                    finite3(&format!("{k}.motion.center"), c)?;
                }
            }
        }
        Ok(())
    }
}

impl ContactSettings {
    /// Range checks; errors are `(key path, message)`.
    pub fn validate(&self, k: &str) -> Check {
        nonneg(&format!("{k}.smoothing"), self.smoothing)?;
        if let Some(m) = self.margin {
            nonneg(&format!("{k}.margin"), m)?;
        }
        positive(&format!("{k}.tolerance"), self.tolerance)?;
        if self.max_newton == 0 {
            return Err((format!("{k}.max_newton"), "expected at least 1".into()));
        }
        positive(&format!("{k}.max_seconds"), self.max_seconds)?;
        positive(&format!("{k}.scale_floor"), self.scale_floor)?;
        positive(&format!("{k}.s_floor"), self.s_floor)?;
        let p = &self.penalty;
        positive(&format!("{k}.penalty.stiffness"), p.stiffness)?;
        if !(p.power.is_finite() && p.power >= 2.0) {
            return Err((
                format!("{k}.penalty.power"),
                format!("expected p >= 2, got {}", p.power),
            ));
        }
        nonneg(
            &format!("{k}.penalty.friction_viscosity"),
            p.friction_viscosity,
        )?;
        positive(&format!("{k}.penalty.velocity_epsilon"), p.velocity_epsilon)?;
        nonneg(&format!("{k}.body_friction"), self.body_friction)?;
        static_at_least(
            &format!("{k}.body_static_friction"),
            self.body_static_friction,
            "body_friction",
            self.body_friction,
        )?;
        positive(&format!("{k}.stick_slip_speed"), self.stick_slip_speed)?;
        nonneg(&format!("{k}.compliance"), self.compliance)?;
        if self.compliance > 0.0 && self.model == ContactModel::Penalty {
            return Err((
                format!("{k}.compliance"),
                "compliance is a parameter of model = \"ncp\" (the penalty model has its own stiffness)".into(),
            ));
        }
        if self
            .body_static_friction
            .is_some_and(|s| s != self.body_friction)
            && self.model == ContactModel::Penalty
        {
            return Err((
                format!("{k}.body_static_friction"),
                "static friction above body_friction needs model = \"ncp\"".into(),
            ));
        }
        if self.bodies && self.model == ContactModel::Penalty {
            return Err((
                format!("{k}.bodies"),
                "contact between bodies needs model = \"ncp\"".into(),
            ));
        }
        if self.self_contact && !self.bodies {
            return Err((
                format!("{k}.self_contact"),
                "self-contact needs bodies = true".into(),
            ));
        }
        Ok(())
    }
}
