//! Drucker–Prager sand piles: the free-surface slope against the angle of repose.
//!
//! **What the slope of a pile is in this model.** A pile's flank is built by surface
//! avalanches, i.e. steady simple shear. With the non-associated return (flow along dev τ)
//! the normal stresses become equal in steady shear, and the cone ‖dev τ‖ ≤ 3αp gives the
//! friction coefficient τ/p = 3α/√2 (checked point-wise by
//! `mpm_constitutive::drucker_prager_steady_shear_friction`). With Klár et al.'s α (a cone
//! fitted to Mohr–Coulomb in triaxial compression) the repose angle is therefore
//! atan(√6 sin φ/(3 − sin φ)) = 29.6° for φ = 25° and 39.3° for φ = 35°, not φ.
//! `Plasticity::drucker_prager_repose(φ)` takes α = √2 tan φ/3 (τ̄/p = tan φ) instead.
//!
//! **Slow pour (the CI test, plane strain).** Sand is placed cell by cell two cells above
//! the resting sand at the symmetry wall (x = x₀, slip) on a sticky floor, every 30 ms, and
//! released at 0.3 m/s; then the pile settles. The slope is the least-squares fit to the
//! highest particle per h/2-wide column between 20 % and 80 % of the peak, right of the
//! shoulder (the last column at ≥ 80 %). ν = 0.3, E = 3e5 Pa, ρ = 1600 kg/m³, 8 particles
//! per cell, h = 1/32, volume correction on. Plane strain is imposed by zeroing every node's
//! z-velocity (a slab one cell thick between slip walls is *not* enough: the slab's own nodes
//! are free and the sand escapes sideways).
//!
//! | cone, φ | 1.5 s pour + 1 s (CI) | 3 s pour + 1 s (script) |
//! |---|---|---|
//! | repose, 25° | 25.8° | 22.8° |
//! | repose, 35° | 36.5° | 35.9° |
//! | Klár, 25° (predicted 29.6°) | 31.2° | |
//! | Klár, 35° (predicted 39.3°) | 36.2° | |
//!
//! **Column collapse** (the earlier protocol, `#[ignore]`d measurements): a column of
//! 0.3 × 0.3 m is preloaded behind a wall with grid damping 20 s⁻¹ for 0.3 s, released and
//! settles for 1 s. The deposit arrests below the cone's shear angle (a collapse is not a
//! repose test): Klár's cone gives 23.1° (φ = 25°) and 27.3° (35°) at h = 1/32, 23.4° and
//! 29.7° at h = 1/64. See docs/mpm.md, "MPM core".

use diffphd_mpm::mpm::{
    BodySpec, ElasticModel, GridSpec, Lattice, Material, Plasticity, SimParams, Simulation,
    WallKind,
};
use nalgebra::Vector3;

/// Fits the slope [°] of the surface right of the peak (20–80 % of the peak height).
fn flank_angle(sim: &Simulation, h: f64, y0: f64, cells_x: usize) -> f64 {
    let fit = flank_fit(sim, h, y0, cells_x);
    assert!(fit.is_some(), "flank too short to fit");
    fit.unwrap_or(f64::NAN)
}

/// The fit of [`flank_angle`], `None` when fewer than 6 surface columns lie on the flank.
fn flank_fit(sim: &Simulation, h: f64, y0: f64, cells_x: usize) -> Option<f64> {
    let bin = h / 2.0;
    let mut top = vec![f64::NEG_INFINITY; 2 * cells_x];
    for x in &sim.particles().x {
        let i = (x[0] / bin) as usize;
        top[i] = top[i].max(x[1] - y0);
    }
    let peak = top.iter().cloned().fold(0.0, f64::max);
    let ipeak = top.iter().position(|&y| y == peak).unwrap_or(0);
    let pts: Vec<(f64, f64)> = (ipeak..top.len())
        .filter(|&i| top[i] > 0.2 * peak && top[i] < 0.8 * peak)
        .map(|i| ((i as f64 + 0.5) * bin, top[i]))
        .collect();
    if pts.len() < 6 {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    Some((-sxy / sxx).atan().to_degrees())
}

/// Collapses a column (width = height = 0.3 m) at h = 1/res and returns the fitted slope [°].
fn pile_angle(phi: f64, res: usize) -> f64 {
    let h = 1.0 / res as f64;
    let (width, height) = (0.3, 0.3);
    let t = 3;
    let cells_x = (1.2 / h) as usize;
    let cells_y = ((height + 0.05) / h) as usize + 2 * t;
    let mut spec = GridSpec::new([0.0; 3], [cells_x, cells_y, 2 * t + 1], h, WallKind::Slip);
    spec.walls[2] = WallKind::Sticky; // floor (y−)
    spec.walls[3] = WallKind::Separating; // ceiling (y+)
    let (x0, y0, z0) = (t as f64 * h, t as f64 * h, t as f64 * h);
    let particles = Lattice::new([0.0; 3], h, 8)
        .seed_box([x0, y0, z0], [x0 + width, y0 + height, z0 + h])
        .unwrap();
    let material = Material {
        plasticity: Plasticity::DruckerPrager {
            friction_angle_deg: phi,
            volume_correction: true,
        },
        ..Material::elastic(1600.0, 3e5, 0.3, ElasticModel::StvkHencky)
    };
    let body = BodySpec {
        particles,
        material,
        velocity: Vector3::zeros(),
        angular_velocity: Vector3::zeros(),
    };
    let params = SimParams {
        gravity: Vector3::new(0.0, -9.81, 0.0),
    };
    let mut sim = Simulation::new(spec, params, vec![body], 1 << 30).unwrap();
    let dt = sim.cfl_time_step(0.3);
    let (preload, settle, damping) = (0.3, 1.0, 20.0);
    let pre_steps = (preload / dt).ceil() as usize;
    let steps = pre_steps + (settle / dt).ceil() as usize;
    let gate = x0 + width - 0.5 * h;
    for s in 0..steps {
        let held = s < pre_steps;
        sim.step_with(dt, |grid, dt| {
            for idx in 0..grid.mass().len() {
                let x = grid.node_position(idx)[0];
                let v = &mut grid.velocity_mut()[idx];
                v[2] = 0.0;
                if held {
                    *v *= 1.0 - damping * dt;
                    if x >= gate && v[0] > 0.0 {
                        v[0] = 0.0;
                    }
                }
            }
        })
        .unwrap();
    }
    let angle = flank_angle(&sim, h, y0, cells_x);
    eprintln!(
        "phi {phi}, h = 1/{res}: {} particles, {steps} substeps, kinetic {:.2e} J, \
         slope {angle:.2}°",
        sim.particles().len(),
        sim.diagnostics().kinetic
    );
    angle
}

/// Column collapses are not repose tests (the deposit arrests below the cone's shear angle);
/// kept as a measurement, `#[ignore]`d (23.1° and 27.3° with Klár's cone).
#[test]
#[ignore]
fn drucker_prager_pile_25_degrees_and_35_is_steeper() {
    let a25 = pile_angle(25.0, 32);
    assert!((a25 - 25.0).abs() <= 5.0, "slope {a25}° for φ = 25°");
    let a35 = pile_angle(35.0, 32);
    assert!(
        a35 > a25 + 2.0,
        "φ = 35° gives {a35}°, φ = 25° gives {a25}°"
    );
}

/// Fails at present (27.3° at CI size): see the module docs.
#[test]
#[ignore]
fn drucker_prager_pile_35_degrees() {
    let angle = pile_angle(35.0, 32);
    assert!((angle - 35.0).abs() <= 5.0, "slope {angle}°");
}

/// The finer run of the issue (±3°), about a minute in release mode: passes (23.4°).
#[test]
#[ignore]
fn drucker_prager_pile_fine_25_degrees() {
    let angle = pile_angle(25.0, 64);
    assert!((angle - 25.0).abs() <= 3.0, "slope {angle}° for φ = 25°");
}

/// The finer run of the issue (±3°), about a minute in release mode: fails (29.7°).
#[test]
#[ignore]
fn drucker_prager_pile_fine_35_degrees() {
    let angle = pile_angle(35.0, 64);
    assert!((angle - 35.0).abs() <= 3.0, "slope {angle}° for φ = 35°");
}

/// The flank fit of [`flank_fit`], started right of the pile's shoulder (the last surface
/// column at ≥ 80 % of the peak) so that holes left by the source at the symmetry wall do not
/// enter it.
fn shoulder_flank_fit(sim: &Simulation, h: f64, y0: f64, cells_x: usize) -> Option<f64> {
    let bin = h / 2.0;
    let mut top = vec![f64::NEG_INFINITY; 2 * cells_x];
    for x in &sim.particles().x {
        let i = (x[0] / bin) as usize;
        top[i] = top[i].max(x[1] - y0);
    }
    let peak = top.iter().cloned().fold(0.0, f64::max);
    let shoulder = top.iter().rposition(|&y| y >= 0.8 * peak)?;
    let pts: Vec<(f64, f64)> = (shoulder..top.len())
        .filter(|&i| top[i] > 0.2 * peak && top[i] < 0.8 * peak)
        .map(|i| ((i as f64 + 0.5) * bin, top[i]))
        .collect();
    if pts.len() < 6 {
        return None;
    }
    let n = pts.len() as f64;
    let mx = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = pts.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = pts.iter().map(|p| (p.0 - mx).powi(2)).sum();
    Some((-sxy / sxx).atan().to_degrees())
}

/// A slow pour (plane strain, against the symmetry wall): every 30 ms one cell of sand (8
/// particles per cell, two cells wide) is placed two cells above the resting sand at the wall
/// (particles slower than 0.1 m/s) and released at 0.3 m/s, for `pour_time`, then the pile
/// settles for `settle`. Returns the shoulder flank slope [°].
fn slow_pour_angle(plasticity: Plasticity, res: usize, pour_time: f64, settle: f64) -> f64 {
    let h = 1.0 / res as f64;
    let t = 3;
    let cells_x = (1.0 / h) as usize;
    let cells_y = (0.6 / h) as usize + 2 * t;
    let mut spec = GridSpec::new([0.0; 3], [cells_x, cells_y, 2 * t + 1], h, WallKind::Slip);
    spec.walls[2] = WallKind::Sticky;
    spec.walls[3] = WallKind::Separating;
    let (x0, y0, z0) = (t as f64 * h, t as f64 * h, t as f64 * h);
    let material = Material {
        plasticity,
        ..Material::elastic(1600.0, 3e5, 0.3, ElasticModel::StvkHencky)
    };
    let params = SimParams {
        gravity: Vector3::new(0.0, -9.81, 0.0),
    };
    let mut sim = Simulation::new(spec, params, vec![], 1 << 30).unwrap();
    let dt = diffphd_mpm::mpm::cfl_time_step(&[material], h, 2.0, 0.3);
    let emit_every = (0.03 / dt).round() as usize;
    let lattice = Lattice::new([0.0; 3], h, 8);
    let steps = ((pour_time + settle) / dt) as usize;
    for s in 0..steps {
        if s % emit_every == 0 && (s as f64) * dt < pour_time {
            let p = sim.particles();
            let top =
                p.x.iter()
                    .zip(&p.v)
                    .filter(|(x, v)| x[0] < x0 + 2.0 * h && v.norm() < 0.1)
                    .map(|(x, _)| x[1])
                    .fold(y0, f64::max);
            let sy = ((top + 2.0 * h) / h).ceil() * h;
            let particles = lattice
                .seed_box([x0, sy, z0], [x0 + 2.0 * h, sy + h, z0 + h])
                .unwrap();
            let body = BodySpec {
                particles,
                material,
                velocity: Vector3::new(0.0, -0.3, 0.0),
                angular_velocity: Vector3::zeros(),
            };
            sim.add_body(body, 1 << 30).unwrap();
        }
        sim.step_with(dt, |grid, _| {
            grid.velocity_mut().iter_mut().for_each(|v| v[2] = 0.0);
        })
        .unwrap();
    }
    let angle = shoulder_flank_fit(&sim, h, y0, cells_x).unwrap_or(f64::NAN);
    eprintln!(
        "slow pour {plasticity:?}, h = 1/{res}: {} particles, kinetic {:.2e} J, slope {angle:.2}°",
        sim.particles().len(),
        sim.diagnostics().kinetic
    );
    angle
}

/// Both repose angles, poured at the same time (one thread each).
fn slow_pour_pair(pour_time: f64, settle: f64) -> (f64, f64) {
    std::thread::scope(|sc| {
        let a = sc.spawn(|| {
            slow_pour_angle(
                Plasticity::drucker_prager_repose(25.0, true),
                32,
                pour_time,
                settle,
            )
        });
        let b = slow_pour_angle(
            Plasticity::drucker_prager_repose(35.0, true),
            32,
            pour_time,
            settle,
        );
        (a.join().unwrap_or(f64::NAN), b)
    })
}

/// The pile at CI size: slowly poured piles of the repose cone stand at φ ± 5° for
/// φ = 25° and 35° (measured 25.8° and 36.5°; 1.5 s of pouring, 1 s of settling, 816
/// particles each).
#[test]
fn drucker_prager_poured_piles_stand_at_the_repose_angle() {
    let (a25, a35) = slow_pour_pair(1.5, 1.0);
    assert!((a25 - 25.0).abs() <= 5.0, "slope {a25}° for φ = 25°");
    assert!((a35 - 35.0).abs() <= 5.0, "slope {a35}° for φ = 35°");
}

/// The same at script size (3 s of pouring, 1616 particles each), ±3°: measured 22.8° and
/// 35.9°; about 3 minutes (`scripts/mpm_seed_scenes.sh`).
#[test]
#[ignore]
fn drucker_prager_pile_fine_poured() {
    let (a25, a35) = slow_pour_pair(3.0, 1.0);
    assert!((a25 - 25.0).abs() <= 3.0, "slope {a25}° for φ = 25°");
    assert!((a35 - 35.0).abs() <= 3.0, "slope {a35}° for φ = 35°");
}
