//! Parameter classes: one small unit per `[[parameter]] kind` (spec §7.5 "zone / log
//! parameters", "initial state"), registered by one line in [`CLASSES`].
//!
//! A class states what differs between kinds — its scene key, shape, the owners it refers to
//! (region, force group, muscle group, obstacle, attachment), its physical range, and how a
//! value is read from ([`ParamClass::value`]) and written into ([`ParamClass::set`]) a
//! [`Model`], read out of the adjoint's per-class sums ([`ParamClass::gradient`],
//! $d\mathcal L/d\,\text{value}$), stepped by the central differences
//! ([`ParamClass::fd_step`]) and written back into the scene TOML
//! ([`ParamClass::write_back`]). Everything else — expansion into scalars and their names,
//! the log transform $\theta=\ln v$, bounds, gradcheck, the write-back driver — is generic
//! and iterates the registry ([`super::params`], [`super::writeback`]).
//!
//! The folders name the forward map a class differentiates: `material/` (the PD weights,
//! masses and damping of [`crate::model::Derived`]), `initial/` (the initial state
//! $x_0,v_0$), `loads/` (external forces, gravity, muscles), `contact/` (obstacles, body–body
//! contact, compliant attachments).

pub mod contact;
#[cfg(test)]
mod dummy;
#[cfg(test)]
mod fd;
pub mod initial;
pub mod loads;
pub mod material;

use super::params::Param;
use super::writeback::{SceneText, Walk};
use crate::model::Model;
use crate::scene::ParamKind;
use crate::solver::gradient::Gradients;

/// Every parameter class, one registration line each (the order is the order of the
/// "only … takes …" messages).
#[rustfmt::skip]
pub static CLASSES: &[&dyn ParamClass] = &[
    &material::youngs_modulus::YoungsModulus,
    &material::poisson_ratio::PoissonRatio,
    &material::density::Density,
    &material::damping_alpha::DampingAlpha,
    &material::damping_beta::DampingBeta,
    &initial::translation::InitialTranslation,
    &initial::rotation::InitialRotation,
    &initial::velocity::InitialVelocity,
    &initial::state_direction::InitialStateDirection,
    &loads::force_scale::ForceScale,
    &loads::gravity::Gravity,
    &loads::muscle_activation::MuscleActivation,
    &contact::friction::Friction,
    &contact::static_friction::StaticFriction,
    &contact::obstacle_offset::ObstacleOffset,
    &contact::body_friction::BodyFriction,
    &contact::body_static_friction::BodyStaticFriction,
    &contact::attachment_stiffness::AttachmentStiffness,
    &contact::attachment_offset::AttachmentOffset,
    &material::youngs_modulus_field::YoungsModulusField,
    #[cfg(test)] &dummy::GravityMagnitude,
];

/// How one `[[parameter]]` declaration expands into scalar parameters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Shape {
    /// One scalar.
    Scalar,
    /// A 3-vector: one scalar per `component` (all three without one), named `.x/.y/.z`.
    Vector3,
    /// One scalar per activation knot of a muscle group (`knot`, or every knot), named
    /// `.knotK` when the group has several.
    Knots,
    /// One scalar per element of the region (or of the whole body), named `.eK` with K the
    /// element's index in its body.
    Elements,
}

/// The owners a class refers to besides its body: the `[[parameter]]` keys it takes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Refs {
    /// `region` (a `[[body.region]]` of the body; omitted: every element).
    pub region: bool,
    /// `force` (the body's force group, default 0).
    pub force: bool,
    /// `muscle` (the body's muscle group, default 0) and `knot`.
    pub muscle: bool,
    /// `obstacle` (an `[[obstacle]]` index, required).
    pub obstacle: bool,
    /// `attachment` (the body's compliant attachment, default 0).
    pub attachment: bool,
}

/// Whose parameter it is, for the default name `kind[owner]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The body (`body`, default 0).
    Body,
    /// The obstacle (`obstacle`).
    Obstacle,
    /// The whole scene, with this label.
    Scene(&'static str),
}

/// The physical range of a value: $v>\text{lower}$ (or $\ge$ when `lower_closed`) and
/// $v<\text{upper}$; values outside stop the optimizer (`optimize`'s domain error).
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Domain {
    pub lower: f64,
    pub lower_closed: bool,
    pub upper: f64,
}

impl Domain {
    /// Every real number.
    pub const REAL: Domain = Domain {
        lower: f64::NEG_INFINITY,
        lower_closed: false,
        upper: f64::INFINITY,
    };
    /// $v>0$.
    pub const POSITIVE: Domain = Domain {
        lower: 0.0,
        lower_closed: false,
        upper: f64::INFINITY,
    };
    /// $v\ge0$.
    pub const NON_NEGATIVE: Domain = Domain {
        lower: 0.0,
        lower_closed: true,
        upper: f64::INFINITY,
    };

    /// Whether `v` is in the range (a finite check is separate).
    pub fn contains(&self, v: f64) -> bool {
        let above = if self.lower_closed {
            v >= self.lower
        } else {
            v > self.lower
        };
        above && v < self.upper
    }
}

/// One parameter class (module doc). `p` is a resolved scalar parameter of this class;
/// values are in user units.
pub trait ParamClass: Sync {
    /// The scene key (`kind = "…"`).
    fn key(&self) -> &'static str;
    /// How a declaration expands.
    fn shape(&self) -> Shape {
        Shape::Scalar
    }
    /// The owner keys it takes.
    fn refs(&self) -> Refs {
        Refs::default()
    }
    /// Whose parameter it is (default name).
    fn owner(&self) -> Owner {
        Owner::Body
    }
    /// Whether values are positive, so that `log = true` is allowed.
    fn positive(&self) -> bool {
        false
    }
    /// Physical range.
    fn domain(&self) -> Domain {
        Domain::REAL
    }
    /// The value in `m`.
    fn value(&self, p: &Param, m: &Model) -> f64;
    /// Write `v` into `m` (refreshing what depends on it).
    fn set(&self, p: &Param, m: &mut Model, v: f64);
    /// Apply `v` while building the model at a parameter vector
    /// ([`super::params::apply_all`]): [`ParamClass::set`], unless the class composes with
    /// others (Young's moduli multiply `youngs_factor`, applied after every parameter).
    fn apply(&self, p: &Param, m: &mut Model, v: f64, youngs_factor: &mut [f64]) {
        let _ = youngs_factor;
        self.set(p, m, v);
    }
    /// $d\mathcal L/d\,\text{value}$ from the adjoint's sums `g`, at the model `m` built with
    /// this parameter at `v`.
    fn gradient(&self, p: &Param, m: &Model, g: &Gradients, v: f64) -> f64;
    /// Default central-difference step in the value (not log, no `fd_step`), given
    /// $|v|$: 1e-3 relative, 1e-3 absolute at 0.
    fn fd_step(&self, p: &Param, m: &Model, abs_value: f64) -> f64 {
        let _ = (p, m);
        1e-3 * if abs_value > 0.0 { abs_value } else { 1.0 }
    }
    /// Write `v` back into the scene's TOML (or say in a note why not).
    fn write_back(&self, w: &mut SceneText<'_>, p: &Param, v: f64) -> Walk<()>;
}

impl std::fmt::Debug for dyn ParamClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.key())
    }
}

/// What a class declares, for listings (the Python package, `diffphd` reports): key,
/// shape, owner keys, whether `log` is allowed, physical range.
#[derive(Clone, Debug, serde::Serialize)]
pub struct ClassInfo {
    pub key: &'static str,
    pub shape: Shape,
    pub refs: Refs,
    pub positive: bool,
    pub domain: Domain,
}

impl dyn ParamClass {
    /// Its declared properties.
    pub fn info(&self) -> ClassInfo {
        ClassInfo {
            key: self.key(),
            shape: self.shape(),
            refs: self.refs(),
            positive: self.positive(),
            domain: self.domain(),
        }
    }
}

/// Every registered class's [`ClassInfo`], in registration order.
pub fn list() -> Vec<ClassInfo> {
    CLASSES.iter().map(|c| c.info()).collect()
}

/// The registered class of key `key`.
pub fn find(key: &str) -> Option<&'static dyn ParamClass> {
    CLASSES.iter().copied().find(|c| c.key() == key)
}

/// The scene key of a [`ParamKind`] (its serde name).
pub fn kind_key(kind: ParamKind) -> String {
    match serde_json::to_value(kind) {
        Ok(serde_json::Value::String(s)) => s,
        _ => format!("{kind:?}"),
    }
}

/// The registered class of a scene `kind`.
pub fn of_kind(kind: ParamKind) -> Option<&'static dyn ParamClass> {
    find(&kind_key(kind))
}

/// "only `a` takes …" / "only `a` and `b` take …": the classes whose [`Refs`] satisfy
/// `takes`, for the error of a key given to a class that does not take it.
pub(crate) fn only(takes: impl Fn(&dyn ParamClass) -> bool, what: &str) -> String {
    let keys: Vec<String> = CLASSES
        .iter()
        .filter(|c| takes(**c))
        .map(|c| format!("`{}`", c.key()))
        .collect();
    let verb = if keys.len() == 1 { "takes" } else { "take" };
    let list = match keys.split_last() {
        Some((last, rest)) if !rest.is_empty() => format!("{} and {last}", rest.join(", ")),
        _ => keys.join(""),
    };
    format!("only {list} {verb} {what}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every `kind` of the scene format has a registered class, and every registered class
    /// but the test-only ones is a `kind` of the scene format.
    #[test]
    fn every_scene_kind_has_one_class() {
        let schema = serde_json::to_value(schemars::schema_for!(ParamKind)).unwrap();
        let mut kinds: Vec<String> = Vec::new();
        let mut walk = vec![&schema];
        while let Some(v) = walk.pop() {
            match v {
                serde_json::Value::Object(o) => {
                    // undocumented variants are an `enum` list, documented ones a `const`
                    if let Some(serde_json::Value::Array(e)) = o.get("enum") {
                        kinds.extend(e.iter().filter_map(|s| s.as_str().map(String::from)));
                    }
                    if let Some(serde_json::Value::String(c)) = o.get("const") {
                        kinds.push(c.clone());
                    }
                    walk.extend(o.values());
                }
                serde_json::Value::Array(a) => walk.extend(a),
                _ => {}
            }
        }
        assert_eq!(kinds.len(), 20, "{kinds:?}");
        for k in &kinds {
            let kind: ParamKind = serde_json::from_value(serde_json::json!(k)).unwrap();
            assert_eq!(of_kind(kind).map(|c| c.key()), Some(k.as_str()));
            assert_eq!(crate::optimize::params::kind_name(kind), k);
        }
        let registered: Vec<&str> = CLASSES.iter().map(|c| c.key()).collect();
        let test_only = [dummy::GravityMagnitude.key()];
        for k in registered {
            assert!(
                kinds.iter().any(|s| s == k) || test_only.contains(&k),
                "{k} is registered but not a scene kind"
            );
        }
        // keys are unique
        for (i, a) in CLASSES.iter().enumerate() {
            assert!(
                CLASSES[..i].iter().all(|b| b.key() != a.key()),
                "{}",
                a.key()
            );
        }
    }

    #[test]
    fn only_lists_the_classes_that_take_a_key() {
        assert_eq!(
            only(|c| c.refs().region, "a region"),
            "only `youngs_modulus` and `youngs_modulus_field` take a region"
        );
        assert_eq!(
            only(|c| c.refs().obstacle, "an obstacle"),
            "only `friction`, `static_friction` and `obstacle_offset` take an obstacle"
        );
    }

    #[test]
    fn domains() {
        assert!(Domain::NON_NEGATIVE.contains(0.0) && !Domain::POSITIVE.contains(0.0));
        assert!(!Domain::REAL.contains(f64::INFINITY) && Domain::REAL.contains(-1e300));
    }
}
