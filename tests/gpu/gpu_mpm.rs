//! The MLS-MPM substep on a device (`diffphd::gpu::mpm`, kernels/mpm.cu and sort.cu) against
//! the CPU reference (`diffphd_mpm::mpm::Simulation::step`): elastic (fixed-corotated and
//! Neo-Hookean), von Mises and Drucker–Prager (Klár's α and the repose variant with the volume
//! correction) scenes of ≈ 300 particles, a few substeps each. The CPU's P2G is a gather over
//! bins in a fixed order that the device's sort reproduces, so the particle states agree to
//! round-off (the bound 1e-10 of each field's largest entry); the launch and copy counts per
//! substep prove the device path ran resident.

use crate::on_every_device;

use diffphd::gpu::mpm::DeviceMpm;
use diffphd::gpu::sort::{download_index32, upload_index32, KeyValueSort};
use diffphd::gpu::{Counted, Device, Emulator};
use diffphd_mpm::mpm::{
    BodySpec, ElasticModel, GridSpec, Lattice, Material, MpmError, Plasticity, SimParams,
    Simulation, WallKind,
};
use nalgebra::{Matrix3, Vector3};

on_every_device! {
    merge_sort_is_the_stable_cpu_sort_and_bins_match => merge_sort_is_the_stable_cpu_sort_and_bins_match_on;
    mpm_elastic_substeps_match_the_cpu => mpm_elastic_substeps_match_the_cpu_on;
    mpm_von_mises_substeps_match_the_cpu => mpm_von_mises_substeps_match_the_cpu_on;
    mpm_drucker_prager_substeps_match_the_cpu => mpm_drucker_prager_substeps_match_the_cpu_on;
    mpm_failures_are_the_cpu_errors_and_keep_the_state => mpm_failures_are_the_cpu_errors_and_keep_the_state_on;
}

const H: f64 = 0.1;
const DT: f64 = 2e-3;
const SUBSTEPS: usize = 5;

/// A body of jittered particles (8 a cell) in the box [lo, hi] with velocity field
/// v₀ + G (x − x̄) and APIC C = G.
fn body(lo: [f64; 3], hi: [f64; 3], material: Material, v0: [f64; 3], seed: u64) -> BodySpec {
    let lattice = Lattice {
        origin: [0.0; 3],
        h: H,
        ppc: 8,
        jitter: 0.5,
        seed,
    };
    BodySpec {
        particles: lattice.seed_box(lo, hi).unwrap(),
        material,
        velocity: Vector3::from(v0),
        angular_velocity: Vector3::zeros(),
    }
}

/// A 12³-cell grid (h = 0.1, 2,197 nodes, 3 wall layers: sticky below, slip on the sides,
/// separating above) with `bodies`, gravity −9.81 z, and each body's velocity gradient.
fn scene(bodies: Vec<(BodySpec, Matrix3<f64>)>) -> Simulation {
    let mut spec = GridSpec::new([0.0; 3], [12, 12, 12], H, WallKind::Slip);
    spec.walls[4] = WallKind::Sticky;
    spec.walls[5] = WallKind::Separating;
    let grads: Vec<Matrix3<f64>> = bodies.iter().map(|b| b.1).collect();
    let specs = bodies.into_iter().map(|b| b.0).collect();
    let params = SimParams {
        gravity: Vector3::new(0.0, 0.0, -9.81),
    };
    let mut sim = Simulation::new(spec, params, specs, 1 << 30).unwrap();
    let p = sim.particles_mut();
    let mut groups: Vec<Vec<usize>> = vec![Vec::new(); grads.len()];
    for (i, &m) in p.material().to_vec().iter().enumerate() {
        groups[m as usize].push(i);
    }
    for (g, idx) in grads.iter().zip(&groups) {
        let centroid = idx.iter().map(|&i| p.x[i]).sum::<Vector3<f64>>() / idx.len() as f64;
        for &i in idx {
            p.v[i] += g * (p.x[i] - centroid);
            p.c[i] = *g;
        }
    }
    sim
}

/// Largest |a − b| over a field divided by the field's largest |b| (0 when both vanish).
pub(crate) fn field_error(a: &[f64], b: &[f64]) -> f64 {
    let diff = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f64::max);
    let scale = b.iter().map(|y| y.abs()).fold(0.0, f64::max);
    if diff == 0.0 {
        0.0
    } else {
        diff / scale
    }
}

pub(crate) struct Fields {
    pub(crate) x: Vec<f64>,
    pub(crate) v: Vec<f64>,
    pub(crate) c: Vec<f64>,
    pub(crate) f: Vec<f64>,
    strain: Vec<f64>,
    correction: Vec<f64>,
}

pub(crate) fn fields(sim: &Simulation) -> Fields {
    let p = sim.particles();
    let vec = |v: &[Vector3<f64>]| {
        v.iter()
            .flat_map(|a| a.iter().copied().collect::<Vec<_>>())
            .collect()
    };
    let mat = |v: &[Matrix3<f64>]| {
        v.iter()
            .flat_map(|a| a.iter().copied().collect::<Vec<_>>())
            .collect()
    };
    Fields {
        x: vec(&p.x),
        v: vec(&p.v),
        c: mat(&p.c),
        f: mat(&p.f),
        strain: p.plastic.iter().map(|s| s.plastic_strain).collect(),
        correction: p.plastic.iter().map(|s| s.log_volume_correction).collect(),
    }
}

/// Runs `SUBSTEPS` substeps on the CPU and on `dev`; checks every field to 1e-10 of its
/// largest entry, the last grid v* too, and the launches and copies of each substep. Returns
/// the CPU's final fields (for the scene's own checks).
fn compare<D: Device + Clone>(dev: &D, name: &str, sim: Simulation) -> Fields {
    let mut cpu = sim.clone();
    let counted = Counted::new(dev.clone());
    let mut gpu = DeviceMpm::new(counted.clone(), &sim).unwrap();
    let n = sim.particles().len();
    let passes = (n as f64).log2().ceil() as u64;
    for s in 0..SUBSTEPS {
        cpu.step(DT).unwrap();
        let before = counted.traffic().unwrap();
        gpu.substep(DT).unwrap();
        let span = counted.traffic().unwrap().since(&before);
        // prepare, iota, the merge passes, bin starts, P2G, grid update, G2P, the failure sum
        assert_eq!(span.launches, passes + 7, "{name}: launches in substep {s}");
        assert_eq!(
            (span.downloads, span.uploads),
            (1, 0),
            "{name}: copies in substep {s}"
        );
        if s == 0 {
            // the node masses of the first substep depend on the positions only, which are
            // the same: equal bits prove that the device gathers in the CPU's order
            let (gm, _) = gpu.grid().unwrap();
            assert!(
                gm == cpu.grid().mass(),
                "{name}: first-substep node masses differ"
            );
        }
    }
    assert_eq!(gpu.substep_count(), SUBSTEPS as u64);
    let (gm, gv) = gpu.grid().unwrap();
    let cpu_gv: Vec<f64> = cpu
        .grid()
        .velocity()
        .iter()
        .flat_map(|v| [v.x, v.y, v.z])
        .collect();
    let grid_m = field_error(&gm, cpu.grid().mass());
    let grid_v = field_error(&gv, &cpu_gv);
    let mut back = sim.clone();
    gpu.download(&mut back).unwrap();
    let (a, b) = (fields(&back), fields(&cpu));
    let errors = [
        ("x", field_error(&a.x, &b.x)),
        ("v", field_error(&a.v, &b.v)),
        ("C", field_error(&a.c, &b.c)),
        ("F", field_error(&a.f, &b.f)),
        ("plastic strain", field_error(&a.strain, &b.strain)),
        (
            "volume correction",
            field_error(&a.correction, &b.correction),
        ),
        ("grid mass", grid_m),
        ("grid v*", grid_v),
    ];
    eprintln!("{name}: {n} particles, {SUBSTEPS} substeps, relative errors {errors:?}");
    for (what, e) in errors {
        assert!(
            e <= 1e-10,
            "{name}: {what} differs by {e:e} of its largest entry"
        );
    }
    // the motion is not trivial: particles moved and C is not zero
    let moved =
        a.x.iter()
            .zip(&fields(&sim).x)
            .map(|(p, q)| (p - q).abs())
            .fold(0.0, f64::max);
    assert!(moved > 1e-3, "{name}: particles moved only {moved}");
    b
}

fn shear(rate: f64) -> Matrix3<f64> {
    Matrix3::new(0.0, rate, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0)
}

/// Fixed-corotated and Neo-Hookean bodies moving into each other, sheared and spun.
fn mpm_elastic_substeps_match_the_cpu_on<D: Device + Clone>(dev: &D) {
    let fc = Material::elastic(1000.0, 1e4, 0.3, ElasticModel::FixedCorotated);
    let nh = Material::elastic(800.0, 2e4, 0.4, ElasticModel::NeoHookean);
    let spin = Matrix3::new(0.0, -2.0, 0.0, 2.0, 0.0, 0.0, 0.0, 0.0, 0.5);
    let sim = scene(vec![
        (
            body(
                [0.35, 0.35, 0.35],
                [0.55, 0.65, 0.6],
                fc,
                [0.8, 0.0, -0.3],
                1,
            ),
            spin,
        ),
        (
            body([0.6, 0.4, 0.35], [0.8, 0.6, 0.55], nh, [-0.5, 0.2, 0.0], 2),
            shear(3.0),
        ),
    ]);
    compare(dev, "elastic", sim);
}

/// A von Mises (StVK–Hencky) body sheared past its yield stress.
fn mpm_von_mises_substeps_match_the_cpu_on<D: Device + Clone>(dev: &D) {
    let mut m = Material::elastic(1000.0, 1e4, 0.3, ElasticModel::StvkHencky);
    m.plasticity = Plasticity::VonMises { yield_stress: 10.0 };
    let sim = scene(vec![(
        body(
            [0.35, 0.35, 0.35],
            [0.75, 0.65, 0.65],
            m,
            [0.3, 0.0, -0.5],
            3,
        ),
        shear(5.0),
    )]);
    let cpu = compare(dev, "von Mises", sim);
    let yielded = cpu.strain.iter().filter(|&&s| s > 0.0).count();
    assert!(
        yielded > cpu.strain.len() / 2,
        "only {yielded} particles yielded"
    );
}

/// Drucker–Prager sand: Klár's α under compression and shear, and the repose variant with the
/// volume correction pulled apart (the tension case) then sheared.
fn mpm_drucker_prager_substeps_match_the_cpu_on<D: Device + Clone>(dev: &D) {
    let hencky = Material::elastic(1600.0, 1e4, 0.3, ElasticModel::StvkHencky);
    let klar = Material {
        plasticity: Plasticity::DruckerPrager {
            friction_angle_deg: 30.0,
            volume_correction: false,
        },
        ..hencky
    };
    let repose = Material {
        plasticity: Plasticity::drucker_prager_repose(30.0, true),
        ..hencky
    };
    let squeeze = Matrix3::new(-2.0, 3.0, 0.0, 0.0, -1.0, 0.0, 0.0, 0.0, -1.0);
    let stretch = Matrix3::new(2.0, 1.0, 0.0, 0.0, 2.0, 0.0, 0.0, 0.0, 2.0);
    let sim = scene(vec![
        (
            body(
                [0.35, 0.35, 0.35],
                [0.55, 0.65, 0.6],
                klar,
                [0.0, 0.0, -0.5],
                4,
            ),
            squeeze,
        ),
        (
            body(
                [0.6, 0.35, 0.35],
                [0.8, 0.65, 0.6],
                repose,
                [0.0, 0.0, 0.0],
                5,
            ),
            stretch,
        ),
    ]);
    let cpu = compare(dev, "Drucker-Prager", sim);
    assert!(cpu.strain.iter().any(|&s| s > 0.0), "no particle yielded");
    assert!(
        cpu.correction.iter().any(|&c| c != 0.0),
        "the volume correction never changed"
    );
}

/// A particle outside the grid (P2G) and a particle over the CFL bound (G2P) give the CPU's
/// error for the same particle, and the device state stays the one before the substep.
fn mpm_failures_are_the_cpu_errors_and_keep_the_state_on<D: Device + Clone>(dev: &D) {
    let m = Material::elastic(1000.0, 1e4, 0.3, ElasticModel::FixedCorotated);
    let base = scene(vec![(
        body([0.35, 0.35, 0.35], [0.55, 0.55, 0.55], m, [0.0; 3], 6),
        Matrix3::zeros(),
    )]);
    // outside: particle 5 beyond the grid's far face
    let mut sim = base.clone();
    sim.particles_mut().x[5] = Vector3::new(1.25, 0.4, 0.4);
    let mut gpu = DeviceMpm::new(dev.clone(), &sim).unwrap();
    let cpu_err = sim.clone().step(DT).unwrap_err();
    let err = gpu.substep(DT).unwrap_err();
    assert!(
        matches!(cpu_err, MpmError::OutsideGrid { particle: 5, .. }),
        "{cpu_err}"
    );
    assert_eq!(err.to_string(), cpu_err.to_string());
    // CFL: particle 7 at 5 km/s moves more than h in one substep
    let mut sim = base;
    sim.particles_mut().v[7] = Vector3::new(5000.0, 0.0, 0.0);
    let mut gpu = DeviceMpm::new(dev.clone(), &sim).unwrap();
    let cpu_err = sim.clone().step(DT).unwrap_err();
    let err = gpu.substep(DT).unwrap_err();
    let (
        MpmError::Cfl { particle: a, .. },
        diffphd::gpu::mpm::DeviceMpmError::Mpm(MpmError::Cfl { particle: b, .. }),
    ) = (&cpu_err, &err)
    else {
        panic!("CPU {cpu_err}, device {err}");
    };
    assert_eq!(a, b);
    assert_eq!(gpu.substep_count(), 0);
    let mut back = sim.clone();
    gpu.download(&mut back).unwrap();
    assert_eq!(
        fields(&back).x,
        fields(&sim).x,
        "state changed by a failed substep"
    );
    assert_eq!(fields(&back).v, fields(&sim).v);
}

/// The device sort equals a stable CPU sort by key (ties in index order) on random keys with
/// many ties, for lengths that are and are not powers of two; the bin ranges equal the CPU's
/// counting-sort starts; a sort is ⌈log₂ n⌉ merge-pass launches.
fn merge_sort_is_the_stable_cpu_sort_and_bins_match_on<D: Device + Clone>(dev: &D) {
    let dev = Counted::new(dev.clone());
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for &(n, bins) in &[
        (0usize, 3usize),
        (1, 4),
        (2, 2),
        (7, 3),
        (64, 10),
        (300, 37),
        (1000, 5),
    ] {
        let keys: Vec<i32> = (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                (state % bins as u64) as i32
            })
            .collect();
        let mut s = KeyValueSort::new(&dev, n).unwrap();
        *s.keys_mut() = upload_index32(&dev, &keys).unwrap();
        s.iota(&dev).unwrap();
        let before = dev.traffic().unwrap();
        s.sort(&dev).unwrap();
        let span = dev.traffic().unwrap().since(&before);
        let passes = if n > 1 {
            (n as f64).log2().ceil() as u64
        } else {
            0
        };
        assert_eq!(span.launches, passes, "n = {n}");
        let got_k = download_index32(&dev, s.keys(), n).unwrap();
        let got_v = download_index32(&dev, s.values(), n).unwrap();
        let mut expect: Vec<(i32, i32)> = keys.iter().copied().zip(0..).collect();
        expect.sort_by_key(|&(k, _)| k); // stable: ties keep index order
        assert_eq!(
            got_k,
            expect.iter().map(|e| e.0).collect::<Vec<_>>(),
            "n = {n}"
        );
        assert_eq!(
            got_v,
            expect.iter().map(|e| e.1).collect::<Vec<_>>(),
            "n = {n}"
        );
        let mut start = dev.zeros_index32(bins + 1).unwrap();
        s.bin_starts(&dev, bins, &mut start).unwrap();
        let got = download_index32(&dev, &start, bins + 1).unwrap();
        let mut counting = vec![0i32; bins + 1];
        for &k in &keys {
            counting[k as usize + 1] += 1;
        }
        for c in 1..=bins {
            counting[c] += counting[c - 1];
        }
        assert_eq!(got, counting, "n = {n}");
    }
}
