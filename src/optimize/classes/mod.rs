//! Parameter classes: one small unit per `[[parameter]] kind` (spec §7.5 "zone / log
//! parameters", "initial state"), registered by one line in [`CLASSES`].
//!
//! A class states what differs between kinds — its scene key, shape, the owners it refers to
//! (region, force group, muscle group, obstacle, attachment), its physical range, and how a
//! value is read from ([`ParamClass::value`]) and written into ([`ParamClass::set`]) a
//! [`crate::model::Model`], read out of the adjoint's per-class sums ([`ParamClass::gradient`],
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

pub mod api;
pub mod contact;
#[cfg(test)]
mod dummy;
#[cfg(test)]
mod fd;
pub mod initial;
pub mod loads;
pub mod material;

use crate::scene::ParamKind;
pub use api::{ClassInfo, Domain, Owner, ParamClass, Refs, Shape};

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
    &material::poisson_ratio_field::PoissonRatioField,
    #[cfg(test)] &dummy::GravityMagnitude,
];

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
        assert_eq!(kinds.len(), 21, "{kinds:?}");
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
            "only `youngs_modulus`, `youngs_modulus_field` and `poisson_ratio_field` take a region"
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
