//! Known answers of the MLS-MPM substep: free fall and projectile motion against the discrete
//! (symplectic Euler) solution, exact conservation of linear and APIC angular momentum, the
//! CFL and finiteness guards, the memory refusal and the substep seam.

use diffphd_mpm::mpm::{
    BodySpec, ElasticModel, GridSpec, Lattice, Material, MpmError, Plasticity, SimParams,
    Simulation, WallKind,
};
use nalgebra::{Matrix3, Vector3};

const BUDGET: u64 = 1 << 30;

fn grid(cells: usize, h: f64) -> GridSpec {
    GridSpec::new([0.0; 3], [cells; 3], h, WallKind::Sticky)
}

fn block(lo: [f64; 3], hi: [f64; 3], h: f64, material: Material) -> BodySpec {
    BodySpec {
        particles: Lattice::new([0.0; 3], h, 8).seed_box(lo, hi).unwrap(),
        material,
        velocity: Vector3::zeros(),
        angular_velocity: Vector3::zeros(),
    }
}

fn jelly() -> Material {
    Material::elastic(1000.0, 1e4, 0.3, ElasticModel::FixedCorotated)
}

/// x_n = x₀ + nΔt v₀ + Δt² g n(n+1)/2 and v_n = v₀ + nΔt g (symplectic Euler), for every
/// particle of an elastic block, to 1e-10 relative.
fn check_ballistic(v0: Vector3<f64>) {
    let h = 1.0 / 32.0;
    let g = Vector3::new(0.0, -9.81, 0.0);
    let mut body = block([0.4, 0.45, 0.45], [0.55, 0.6, 0.6], h, jelly());
    body.velocity = v0;
    let mut sim =
        Simulation::new(grid(32, h), SimParams { gravity: g }, vec![body], BUDGET).unwrap();
    let x0 = sim.particles().x.clone();
    let dt = 1e-3;
    let steps = 100;
    for _ in 0..steps {
        sim.step(dt).unwrap();
    }
    let n = steps as f64;
    let dx = n * dt * v0 + dt * dt * g * n * (n + 1.0) / 2.0;
    let v = v0 + n * dt * g;
    let mut worst_x: f64 = 0.0;
    let mut worst_v: f64 = 0.0;
    for (p, x) in sim.particles().x.iter().enumerate() {
        worst_x = worst_x.max((x - x0[p] - dx).norm() / dx.norm());
        worst_v = worst_v.max((sim.particles().v[p] - v).norm() / v.norm());
    }
    eprintln!("ballistic rel. errors x {worst_x:e}, v {worst_v:e}");
    assert!(
        worst_x < 1e-10 && worst_v < 1e-10,
        "rel. errors x {worst_x:e}, v {worst_v:e}"
    );
}

#[test]
fn free_fall_matches_discrete_solution() {
    check_ballistic(Vector3::zeros());
}

#[test]
fn projectile_matches_discrete_solution() {
    check_ballistic(Vector3::new(1.5, 2.0, -0.5));
}

/// Linear and angular momentum (with the APIC affine term) are conserved to 1e-10 of
/// Σ m|x||v| per substep, and equal the grid's momenta after P2G.
fn check_momentum(material: Material, f0: Matrix3<f64>, expect_plastic: bool) {
    let h = 1.0 / 32.0;
    let mut body = block([0.35, 0.4, 0.45], [0.6, 0.55, 0.6], h, material);
    body.velocity = Vector3::new(0.3, -0.2, 0.1);
    body.angular_velocity = Vector3::new(1.0, -2.0, 3.0);
    let params = SimParams {
        gravity: Vector3::zeros(),
    };
    let mut sim = Simulation::new(grid(32, h), params, vec![body], BUDGET).unwrap();
    for (k, f) in sim.particles_mut().f.iter_mut().enumerate() {
        // A deformed, non-uniform start so the elastic forces are nonzero.
        *f = f0 * (1.0 + 1e-3 * ((k % 7) as f64));
    }
    let dt = 0.3 * sim.cfl_time_step(0.5).min(1e-3);
    let mut before = sim.diagnostics();
    let mut worst: f64 = 0.0;
    for _ in 0..40 {
        sim.substep_free_motion(dt).unwrap();
        let (pg, lg) = sim.grid().momenta();
        let scale = before.momentum_scale;
        assert!((pg - before.linear_momentum).norm() < 1e-10 * scale);
        assert!(
            (lg - before.angular_momentum).norm() < 1e-10 * scale,
            "grid L {lg} vs particles {}",
            before.angular_momentum
        );
        sim.finish_substep().unwrap();
        let after = sim.diagnostics();
        let dp = (after.linear_momentum - before.linear_momentum).norm() / scale;
        let dl = (after.angular_momentum - before.angular_momentum).norm() / scale;
        worst = worst.max(dp).max(dl);
        before = after;
    }
    eprintln!(
        "worst momentum change per step {worst:e}, elastic {:e}",
        before.elastic
    );
    assert!(worst < 1e-10, "worst momentum change per step {worst:e}");
    assert!(before.elastic > 0.0);
    let plastic: f64 = (0..sim.particles().len())
        .map(|i| sim.plastic_strain(i))
        .sum();
    assert_eq!(plastic > 0.0, expect_plastic, "plastic measure {plastic}");
}

fn start_deformation() -> Matrix3<f64> {
    Matrix3::new(1.03, 0.02, 0.0, -0.01, 0.98, 0.015, 0.0, 0.01, 1.01)
}

#[test]
fn momentum_conserved_fixed_corotated() {
    check_momentum(jelly(), start_deformation(), false);
}

#[test]
fn momentum_conserved_neo_hookean() {
    let m = Material::elastic(1000.0, 1e4, 0.3, ElasticModel::NeoHookean);
    check_momentum(m, start_deformation(), false);
}

#[test]
fn momentum_conserved_through_von_mises_return() {
    let m = Material {
        plasticity: Plasticity::VonMises { yield_stress: 20.0 },
        ..Material::elastic(1000.0, 1e4, 0.3, ElasticModel::StvkHencky)
    };
    check_momentum(m, start_deformation(), true);
}

#[test]
fn momentum_conserved_through_drucker_prager_return() {
    let m = Material {
        plasticity: Plasticity::DruckerPrager {
            friction_angle_deg: 30.0,
            volume_correction: true,
        },
        ..Material::elastic(1000.0, 1e4, 0.3, ElasticModel::StvkHencky)
    };
    let squeeze = Matrix3::new(0.97, 0.03, 0.0, -0.01, 0.98, 0.02, 0.0, 0.01, 0.99);
    check_momentum(m, squeeze, true);
}

fn two_bodies(fast: f64) -> Simulation {
    let h = 1.0 / 32.0;
    let slow = block([0.2, 0.5, 0.5], [0.3, 0.6, 0.6], h, jelly());
    let mut quick = block([0.6, 0.5, 0.5], [0.7, 0.6, 0.6], h, jelly());
    quick.velocity = Vector3::new(fast, 0.0, 0.0);
    let params = SimParams {
        gravity: Vector3::zeros(),
    };
    Simulation::new(grid(32, h), params, vec![slow, quick], BUDGET).unwrap()
}

#[test]
fn cfl_guard_names_substep_and_particle_and_keeps_state() {
    let h = 1.0 / 32.0;
    let dt = 1e-3;
    // 1.5 h per substep for the second body only.
    let mut sim = two_bodies(1.5 * h / dt);
    let first_fast = sim
        .particles()
        .material()
        .iter()
        .position(|&m| m == 1)
        .unwrap();
    let small = 1e-6;
    sim.step(small).unwrap();
    sim.step(small).unwrap();
    let x_before = sim.particles().x.clone();
    let err = sim.step(dt).unwrap_err();
    match err {
        MpmError::Cfl {
            substep,
            particle,
            distance,
            ..
        } => {
            assert_eq!(substep, 2);
            assert_eq!(particle, first_fast);
            assert!((distance - 1.5 * h).abs() < 1e-9, "{distance}");
        }
        other => panic!("expected the CFL guard, got {other}"),
    }
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("particle {first_fast}")) && msg.contains("substep 2"),
        "{msg}"
    );
    assert_eq!(
        sim.particles().x,
        x_before,
        "a refused substep leaves the particles"
    );
    // Below the bound the same state steps.
    assert!(sim.cfl_time_step(0.9) < h / (1.5 * h / dt));
    sim.step(0.5 * dt).unwrap();
}

#[test]
fn non_finite_velocity_is_refused() {
    let mut sim = two_bodies(0.0);
    let last = sim.particles().len() - 1;
    sim.particles_mut().v[last] = Vector3::new(f64::NAN, 0.0, 0.0);
    let err = sim.step(1e-4).unwrap_err();
    assert!(
        matches!(err, MpmError::NonFinite { substep: 0, .. }),
        "{err}"
    );
    assert!(err.to_string().contains("non-finite velocity"), "{err}");
}

#[test]
fn memory_budget_refuses_before_allocating() {
    let h = 1.0 / 32.0;
    let body = block([0.4; 3], [0.6; 3], h, jelly());
    let n = body.particles.positions.len() as u64;
    let spec = grid(32, h);
    let need = diffphd_mpm::mpm::memory_estimate(&spec, n);
    let err = Simulation::new(
        spec,
        SimParams {
            gravity: Vector3::zeros(),
        },
        vec![body],
        need - 1,
    )
    .unwrap_err();
    assert_eq!(
        err,
        MpmError::MemoryBudget {
            needed_bytes: need,
            budget_bytes: need - 1,
            nodes: 33 * 33 * 33,
            particles: n,
        }
    );
}

#[test]
fn invalid_material_and_grid_are_named() {
    let h = 1.0 / 32.0;
    let mut m = jelly();
    m.poisson_ratio = 0.5;
    let err = Simulation::new(
        grid(32, h),
        SimParams {
            gravity: Vector3::zeros(),
        },
        vec![
            block([0.4; 3], [0.5; 3], h, jelly()),
            block([0.6; 3], [0.7; 3], h, m),
        ],
        BUDGET,
    )
    .unwrap_err();
    assert!(
        err.to_string().contains("material 1: poisson_ratio = 0.5"),
        "{err}"
    );
    let vm = Material {
        plasticity: Plasticity::VonMises { yield_stress: 1.0 },
        ..jelly()
    };
    assert!(vm
        .validate(0)
        .unwrap_err()
        .to_string()
        .contains("stvk_hencky"));
    let err = Simulation::new(
        grid(6, h),
        SimParams {
            gravity: Vector3::zeros(),
        },
        vec![],
        BUDGET,
    )
    .unwrap_err();
    assert!(err.to_string().contains("cells = 6"), "{err}");
}

#[test]
fn contact_seam_sees_v_star_and_its_changes_reach_the_particles() {
    let mut sim = two_bodies(0.0);
    let dt = 1e-4;
    // Stop every node: all particles must end with zero velocity.
    sim.step_with(dt, |grid, _| {
        assert!(grid.mass().iter().sum::<f64>() > 0.0);
        grid.velocity_mut()
            .iter_mut()
            .for_each(|v| *v = Vector3::zeros());
    })
    .unwrap();
    assert!(sim.particles().v.iter().all(|v| v.norm() == 0.0));
    // The stencil weights of a particle sum to one and point at nodes with mass.
    sim.substep_free_motion(dt).unwrap();
    let sum: f64 = sim.particle_stencil(0).map(|(_, w)| w).sum();
    assert!((sum - 1.0).abs() < 1e-14);
    assert!(sim
        .particle_stencil(0)
        .all(|(i, w)| w == 0.0 || sim.grid().mass()[i] > 0.0));
    let err = sim.substep_free_motion(dt).unwrap_err();
    assert!(matches!(err, MpmError::SubstepOrder { .. }));
    sim.finish_substep().unwrap();
    assert!(matches!(
        sim.finish_substep(),
        Err(MpmError::SubstepOrder { .. })
    ));
}

#[test]
fn same_input_gives_bitwise_same_output() {
    let run = || {
        let mut sim = two_bodies(0.5);
        for (k, f) in sim.particles_mut().f.iter_mut().enumerate() {
            *f = start_deformation() * (1.0 + 1e-3 * ((k % 5) as f64));
        }
        for _ in 0..5 {
            sim.step(1e-4).unwrap();
        }
        sim.particles().x.clone()
    };
    assert_eq!(run(), run());
}

/// The per-node gather equals an independent particle-by-particle scatter of the same
/// formula (mass and momentum, to round-off).
#[test]
fn gather_p2g_matches_a_scatter_reference() {
    let mut sim = two_bodies(0.4);
    for (k, f) in sim.particles_mut().f.iter_mut().enumerate() {
        *f = start_deformation() * (1.0 + 1e-3 * ((k % 5) as f64));
    }
    sim.step(1e-4).unwrap(); // nonzero C
    let dt = 1e-4;
    let spec = *sim.grid().spec();
    let h = spec.h;
    let n_nodes = sim.grid().mass().len();
    let mut mass = vec![0.0; n_nodes];
    let mut momentum = vec![Vector3::zeros(); n_nodes];
    let p = sim.particles();
    for i in 0..p.len() {
        let mat = &sim.materials()[p.material()[i] as usize];
        let m = p.mass()[i];
        let affine = m * p.c[i]
            - dt * 4.0 / (h * h) * p.volume()[i] * mat.first_piola(&p.f[i]) * p.f[i].transpose();
        let xi = (p.x[i] - Vector3::from(spec.origin)) / h;
        let base = xi.map(|s| (s - 0.5).floor());
        for dz in 0..3 {
            for dy in 0..3 {
                for dx in 0..3 {
                    let node = base + Vector3::new(dx as f64, dy as f64, dz as f64);
                    let w: f64 = (0..3)
                        .map(|a| {
                            let r = (xi[a] - node[a]).abs();
                            if r < 0.5 {
                                0.75 - r * r
                            } else {
                                0.5 * (1.5 - r).powi(2)
                            }
                        })
                        .product();
                    let idx =
                        sim.grid()
                            .index(node[0] as usize, node[1] as usize, node[2] as usize);
                    let dpos = (node - xi) * h;
                    mass[idx] += w * m;
                    momentum[idx] += w * (m * p.v[i] + affine * dpos);
                }
            }
        }
    }
    sim.substep_free_motion(dt).unwrap(); // no gravity, walls untouched: v = momentum / mass
    let total: f64 = mass.iter().sum();
    let pscale: f64 = momentum.iter().map(|q| q.norm()).sum();
    for idx in 0..n_nodes {
        let m = sim.grid().mass()[idx];
        assert!(
            (m - mass[idx]).abs() < 1e-13 * total,
            "node {idx}: {m} vs {}",
            mass[idx]
        );
        let q = m * sim.grid().velocity()[idx];
        assert!(
            (q - momentum[idx]).norm() < 1e-12 * pscale,
            "node {idx}: {q} vs {}",
            momentum[idx]
        );
    }
}

#[test]
fn add_body_between_substeps() {
    let h = 1.0 / 32.0;
    let mut sim = two_bodies(0.3);
    sim.step(1e-4).unwrap();
    let before = sim.diagnostics();
    let n0 = sim.particles().len();
    let mut extra = block([0.4, 0.75, 0.4], [0.5, 0.8, 0.5], h, jelly());
    extra.velocity = Vector3::new(0.0, -1.0, 0.0);
    let added = extra.particles.positions.len();
    let need = diffphd_mpm::mpm::memory_estimate(sim.grid().spec(), (n0 + added) as u64);
    let err = sim.add_body(extra.clone(), need - 1).unwrap_err();
    assert!(matches!(err, MpmError::MemoryBudget { .. }), "{err}");
    assert_eq!(sim.particles().len(), n0, "a refused body is not added");
    sim.add_body(extra, need).unwrap();
    assert_eq!(sim.particles().len(), n0 + added);
    assert_eq!(sim.materials().len(), 3);
    assert_eq!(sim.particles().material()[n0], 2);
    let after = sim.diagnostics();
    let m_extra = after.mass - before.mass;
    let dp = after.linear_momentum - before.linear_momentum;
    assert!((dp - m_extra * Vector3::new(0.0, -1.0, 0.0)).norm() < 1e-12);
    // Steps on with exact momentum conservation (no gravity, no walls touched).
    sim.step(1e-4).unwrap();
    let p = sim.diagnostics().linear_momentum;
    assert!((p - after.linear_momentum).norm() < 1e-12 * after.momentum_scale);
    // Not between the halves of a substep.
    sim.substep_free_motion(1e-4).unwrap();
    let again = block([0.4, 0.2, 0.4], [0.45, 0.25, 0.45], h, jelly());
    assert!(matches!(
        sim.add_body(again, u64::MAX),
        Err(MpmError::SubstepOrder { .. })
    ));
}

/// The substep's per-particle stages and its node gather run on the current rayon pool
/// (`transfer`'s module doc): an elastic block thrown at a von Mises block that yields on a
/// sticky floor, 200 substeps, gives bitwise the same particle states (x, v, C, F and the
/// plastic state) on 1 and 3 threads.
#[test]
fn substeps_are_bitwise_the_same_on_any_number_of_threads() {
    let h = 1.0 / 32.0;
    let run = |threads: usize| {
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap();
        pool.install(|| {
            let dough = Material {
                plasticity: Plasticity::VonMises { yield_stress: 50.0 },
                ..Material::elastic(1000.0, 1e4, 0.3, ElasticModel::StvkHencky)
            };
            let mut thrown = block([0.2, 0.15, 0.4], [0.4, 0.3, 0.6], h, jelly());
            thrown.velocity = Vector3::new(1.0, -0.5, 0.1);
            let soft = block([0.5, 0.1, 0.4], [0.75, 0.3, 0.6], h, dough);
            let params = SimParams {
                gravity: Vector3::new(0.0, -9.81, 0.0),
            };
            let mut sim = Simulation::new(grid(32, h), params, vec![thrown, soft], BUDGET).unwrap();
            for _ in 0..200 {
                sim.step(5e-4).unwrap();
            }
            sim.particles().clone()
        })
    };
    let (one, three) = (run(1), run(3));
    let yielded = one
        .plastic
        .iter()
        .filter(|s| **s != Default::default())
        .count();
    eprintln!(
        "{} particles, {yielded} with a plastic state after 0.1 s",
        one.x.len()
    );
    assert!(yielded > 0, "the von Mises block must yield");
    assert!(
        one.x == three.x && one.v == three.v,
        "positions or velocities differ"
    );
    assert!(one.c == three.c && one.f == three.f, "C or F differ");
    assert!(one.plastic == three.plastic, "plastic states differ");
}
