//! Small value checks shared by the scene's validation (`validate`, `contact`): each returns
//! `Err((key path, message))`.

/// A check result: `Err((key path, message))`.
pub(super) type Check = Result<(), (String, String)>;

pub(super) fn finite3(key: &str, v: &[f64; 3]) -> Check {
    if v.iter().all(|x| x.is_finite()) {
        Ok(())
    } else {
        Err((key.into(), "expected three finite numbers".into()))
    }
}
pub(super) fn positive(key: &str, v: f64) -> Check {
    if v.is_finite() && v > 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("expected a finite value > 0, got {v}")))
    }
}
pub(super) fn nonneg(key: &str, v: f64) -> Check {
    if v.is_finite() && v >= 0.0 {
        Ok(())
    } else {
        Err((key.into(), format!("expected a finite value >= 0, got {v}")))
    }
}
