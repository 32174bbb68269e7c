//! Parameter kinds of issue 16, item 6, declared as `[[parameter]]`s and checked end to end
//! by `gradcheck`'s own sweep (≤ 1e-4 relative): the Coulomb coefficient of body–body
//! contact (`body_friction`, smoothed contact), the stiffness of a compliant attachment
//! (`attachment_stiffness`, log) and the translation of its target (`attachment_offset`,
//! three components); their write-back into `optimized.toml`; and the errors that name the
//! key.

use crate::common;

use diffphd::optimize::problem::Problem;

/// A stiff 1×1×1 hex cube (`e_cube`) thrown onto a soft 2×2×1 hex slab clamped at its
/// bottom (body–body contact, μ = 0.3, smoothed FB 2ε² = 1e-10), 12 steps of 4 ms: impact,
/// compression and sliding; `params`: the `parameter` array, a TOML inline array.
fn two_bodies(params: &str) -> String {
    common::scenes::two_bodies(1e-10, 0.3, 12, params)
}

/// A 2×2×2 hex block (0.1 m) hanging from a compliant attachment of its top face to a
/// translating target point, under gravity with mass damping; a second, hard attachment
/// (compliance 0: a Dirichlet group) holds one bottom corner node; `params`: the
/// `parameter` array, a TOML inline array.
fn hanging(params: &str) -> String {
    common::fixture(
        "scenes/hanging_attachment",
        &[&format!("parameter={params}")],
    )
}

const ATTACHMENT_PARAMS: &str = r#"[
  { kind = "attachment_stiffness", attachment = 1, log = true },
  { kind = "attachment_offset", attachment = 1 },
]"#;

/// `body_friction` through smoothed body–body contact with sliding: adjoint against
/// central differences within 1e-4, and the horizon really has frictional contacts.
#[test]
fn body_friction_gradient_matches_finite_differences() {
    let text = two_bodies(r#"[{ kind = "body_friction" }]"#);
    let (rep, problem) = common::gradcheck_text(&text, 1e-4, 4);
    common::assert_all_pass("body friction", &rep);
    assert_eq!(problem.params[0].name, "body_friction[bodies]");
    let g = rep.rows[0].adjoint;
    assert!(g.abs() > 1e-8, "friction has no effect on the loss: {g}");
}

/// `attachment_stiffness` (log) and the three components of `attachment_offset` of a
/// moving compliant attachment: adjoint against central differences within 1e-4. The
/// attachment index counts every `[[body.attachment]]` of the body, hard ones included.
#[test]
fn attachment_gradients_match_finite_differences() {
    let (rep, problem) = common::gradcheck_text(&hanging(ATTACHMENT_PARAMS), 1e-4, 4);
    common::assert_all_pass("attachment", &rep);
    let names: Vec<&str> = problem.params.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "log attachment_stiffness[0].attachment1",
            "attachment_offset[0].attachment1.x",
            "attachment_offset[0].attachment1.y",
            "attachment_offset[0].attachment1.z"
        ]
    );
    assert!(rep.rows.iter().all(|r| r.adjoint.abs() > 1e-8));
}

/// Optimized attachment stiffness/offset and body friction are written back into the scene
/// keys they come from (`compliance` = 1/k, `target` + offset, `contact.body_friction`),
/// and the rebuilt model matches.
#[test]
fn new_kinds_are_written_back() {
    let problem = Problem::new(common::load(&hanging(ATTACHMENT_PARAMS), &[])).unwrap();
    let values = [400.0, 0.01, -0.02, 0.005];
    let wb = diffphd::optimize::writeback::write_back(&problem, &values).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    assert!(wb
        .sets
        .contains(&"body.0.attachment.1.compliance=2.5e-3".to_string()));
    let ls = common::load(&wb.toml, &[]);
    let m = diffphd::solver::Model::from_scene(&ls).unwrap();
    assert_eq!(m.attachments[0].stiffness, 400.0);
    let t = m.attachments[0].target(0, 0.0);
    assert!(
        (t[0] - 0.06).abs() < 1e-12 && (t[1] - 0.03).abs() < 1e-12 && (t[2] - 0.155).abs() < 1e-12
    );

    let problem = Problem::new(common::load(
        &two_bodies(r#"[{ kind = "body_friction" }]"#),
        &[],
    ))
    .unwrap();
    let wb = diffphd::optimize::writeback::write_back(&problem, &[0.45]).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    assert_eq!(wb.sets, ["contact.body_friction=4.5e-1"]);
}

/// Regression (issue 34): a scene text without the key a parameter is written to is an
/// error naming the key path (the TOML walk was `expect`s).
#[test]
fn write_back_names_a_missing_key() {
    let mut problem = Problem::new(common::load(&hanging(ATTACHMENT_PARAMS), &[])).unwrap();
    let mut t: toml::Table = toml::from_str(&problem.ls.effective_toml).unwrap();
    let body = t["body"].as_array_mut().unwrap()[0].as_table_mut().unwrap();
    assert!(body.remove("attachment").is_some());
    problem.ls.effective_toml = toml::to_string(&t).unwrap();
    let err = diffphd::optimize::writeback::write_back(&problem, &[400.0, 0.01, -0.02, 0.005])
        .err()
        .expect("the attachment is gone");
    assert_eq!(
        err.to_string(),
        "optimized.toml: scene key `body.0.attachment.1` is missing or not a table"
    );
}

/// Bad declarations name the key: a hard attachment (a Dirichlet group) has no stiffness,
/// an attachment index out of range, `attachment` on a kind that does not take one.
#[test]
fn bad_attachment_parameters_name_the_key() {
    let err = |params: &str| -> String {
        match Problem::new(common::load(&hanging(params), &[])) {
            Ok(_) => panic!("accepted: {params}"),
            Err(e) => e.to_string(),
        }
    };
    let e = err(r#"[{ kind = "attachment_stiffness" }]"#);
    assert!(
        e.contains("parameter[0].attachment") && e.contains("compliant attachment 0"),
        "{e}"
    );
    let e = err(r#"[{ kind = "attachment_offset", attachment = 5 }]"#);
    assert!(e.contains("parameter[0].attachment"), "{e}");
    let e = err(r#"[{ kind = "density", attachment = 1 }]"#);
    assert!(e.contains("parameter[0].attachment"), "{e}");
}

/// The value of a `youngs_modulus` parameter (issue 39): the modulus its elements share, as
/// the scene gives it (the two regions of `sysid_regions.toml`: 2e5 and 4e5 Pa), and a factor
/// 1 when their moduli differ (the whole two-region body; before, the mean, 3e5). Bounds on
/// that factor draw the one-line warning for the old meaning. At the scene's values the
/// gradient w.r.t. the factor equals the one w.r.t. its log (d/d ln f = f·d/df, f = 1): the
/// old mean-E gradient times d(mean)/d(factor) = 3e5.
#[test]
fn youngs_modulus_value_is_the_sets_modulus_or_a_factor() {
    use diffphd::optimize::classes::material::youngs_modulus::old_meaning_warnings;
    let path = common::repo().join("tests/fixtures/sysid_regions.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let params = "parameter=[{kind=\"youngs_modulus\", region=0}, {kind=\"youngs_modulus\", region=1}, {kind=\"youngs_modulus\", log=true}, {kind=\"youngs_modulus\", lower=1e4, upper=1e7}]";
    let problem = Problem::new(common::load(&text, &[params])).unwrap();
    let values: Vec<f64> = problem.params.iter().map(|p| p.base_value).collect();
    assert_eq!(values, [2e5, 4e5, 1.0, 1.0]);
    let warnings = old_meaning_warnings(&problem.params, &problem.base);
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert!(warnings[0].contains("parameter[3]"), "{}", warnings[0]);
    let ev = problem.evaluate(&problem.theta0(), true).unwrap();
    let g = &ev.gradient;
    eprintln!("gradient {g:?}");
    assert!(g[2].abs() > 0.0);
    assert!((g[3] / g[2] - 1.0).abs() < 1e-12, "{} vs {}", g[3], g[2]);
    // the factor scales both regions: its gradient is E_0·dL/dE_0 + E_1·dL/dE_1
    let by_regions = 2e5 * g[0] + 4e5 * g[1];
    assert!(
        (g[3] / by_regions - 1.0).abs() < 1e-10,
        "{} vs {by_regions}",
        g[3]
    );
}

/// A one-component offset written back as a moved origin (an attachment's `target`, an
/// obstacle's `center`/`point`) moves its parameter's `lower`/`upper` by minus the offset, so
/// the box stays where the scene put it; the rebuilt model matches.
#[test]
fn one_component_offsets_keep_their_box_when_written_back() {
    let bounds = |toml_text: &str, i: usize| -> (f64, f64) {
        let t: toml::Table = toml::from_str(toml_text).unwrap();
        let p = &t["parameter"].as_array().unwrap()[i];
        (
            p["lower"].as_float().unwrap(),
            p["upper"].as_float().unwrap(),
        )
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-15;
    // attachment 1's target x: offset 0.004 inside [-0.01, 0.02]
    let problem = Problem::new(common::load(
        &hanging(
            r#"[{ kind = "attachment_offset", attachment = 1, component = 0, lower = -0.01, upper = 0.02 }]"#,
        ),
        &[],
    ))
    .unwrap();
    let wb = diffphd::optimize::writeback::write_back(&problem, &[0.004]).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    let (lo, hi) = bounds(&wb.toml, 0);
    assert!(close(lo, -0.014) && close(hi, 0.016), "{lo} {hi}");
    // the probe's x and y and the ground's height (tests/fixtures/scenes/reproduce)
    let problem = Problem::new(common::load(
        &common::fixture("scenes/reproduce/obstacle_offset", &[]),
        &[],
    ))
    .unwrap();
    let wb = diffphd::optimize::writeback::write_back(&problem, &[0.003, -0.002, -0.0004]).unwrap();
    assert!(wb.exact, "{:?}", wb.notes);
    for (i, v, (l0, h0)) in [
        (0, 0.003, (-0.01, 0.01)),
        (1, -0.002, (-0.01, 0.01)),
        (2, -0.0004, (-0.002, 0.002)),
    ] {
        let (lo, hi) = bounds(&wb.toml, i);
        assert!(close(lo, l0 - v) && close(hi, h0 - v), "{i}: {lo} {hi}");
    }
    let t: toml::Table = toml::from_str(&wb.toml).unwrap();
    let o = t["obstacle"].as_array().unwrap();
    let center: Vec<f64> = o[1]["center"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_float().unwrap())
        .collect();
    assert!(close(center[0], 0.026) && close(center[1], 0.018) && close(center[2], 0.058));
    let point = o[0]["point"].as_array().unwrap()[2].as_float().unwrap();
    assert!(close(point, -0.0004), "{point}");
}
