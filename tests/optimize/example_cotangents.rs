//! `examples/cotangents.rs` (the public-API example of caller-supplied cotangents), run.

#[allow(dead_code)]
#[path = "../../examples/cotangents.rs"]
mod example;

use crate::common::repo;

/// The example's gradient in log E of region 0, whose cotangents it injects on every frame
/// by hand, against a central difference of its own loss (the region's `scale` override
/// moves ln E by ±ε): agreement to 1e-5 relative at ε = 1e-4, on a non-zero reference.
#[test]
fn cotangent_example_gradient_matches_a_central_difference() {
    let scene = repo().join("tests/fixtures/torch_cantilever.toml");
    let scene = scene.to_str().expect("utf-8 path");
    let (loss, grads) = example::run(scene, &[]).expect("the example runs");
    assert_eq!(grads[0].0, "log youngs_modulus[0].region0");
    assert!(loss > 0.0 && grads.len() == 6);
    let eps = 1e-4;
    let at = |s: f64| {
        let set = format!("body.0.region.0.scale={}", s.exp());
        example::run(scene, &[set]).expect("the example runs").0
    };
    let fd = (at(eps) - at(-eps)) / (2.0 * eps);
    let adjoint = grads[0].1;
    assert!(adjoint.abs() > 1e-3 * loss, "{adjoint} vs loss {loss}");
    assert!(
        (fd - adjoint).abs() <= 1e-5 * adjoint.abs(),
        "adjoint {adjoint}, central difference {fd}"
    );
}
