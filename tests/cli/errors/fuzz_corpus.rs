//! The fuzz targets' bodies (`fuzz/bodies`, the same functions `fuzz/` wraps for
//! cargo-fuzz) over the repository's own inputs and deterministic mutations of them: no reader
//! may panic on a truncated, garbled or near-valid file. This runs on stable in CI, so a change
//! of a reader's API, or a panic on an input one edit away from a shipped file, fails here
//! without the nightly fuzz build (which `scripts/fuzz_build.sh` still does on demand).

use std::path::{Path, PathBuf};

/// Files of the repository under `dir` (relative to the root) whose name ends with one of
/// `exts` and that are at most `max_bytes` long, sorted (so the corpus is the same on every
/// machine).
fn seeds(dir: &str, exts: &[&str], max_bytes: u64) -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut out = Vec::new();
    let mut stack = vec![root.join(dir)];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if exts.iter().any(|x| p.to_string_lossy().ends_with(x))
                && e.metadata().is_ok_and(|m| m.len() <= max_bytes)
            {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// xorshift64*: a fixed, platform-independent sequence.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Byte strings that turn a valid number or keyword into an edge case.
const INTERESTING: &[&[u8]] = &[
    b"-",
    b"9",
    b"e",
    b"\n",
    b" ",
    b"0",
    b"nan",
    b"1e309",
    b"-1",
    b"\"",
    b"[",
    b"=",
    b"\0",
    b"4294967297",
    b"18446744073709551616",
];

/// `seed` itself, its truncations at k/8 of its length, and `n` copies with 1–4 random edits
/// each (overwrite, insert an interesting token, delete a range, duplicate a range).
fn mutations(seed: &[u8], n: usize, salt: u64) -> Vec<Vec<u8>> {
    let mut out = vec![seed.to_vec()];
    out.extend((1..8).map(|k| seed[..seed.len() * k / 8].to_vec()));
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ salt.wrapping_mul(0x100_0000_01B3));
    for _ in 0..n {
        let mut m = seed.to_vec();
        for _ in 0..1 + rng.below(4) {
            let at = rng.below(m.len() + 1);
            match rng.below(4) {
                0 if at < m.len() => m[at] = rng.next() as u8,
                1 => {
                    let tok = INTERESTING[rng.below(INTERESTING.len())];
                    m.splice(at..at, tok.iter().copied());
                }
                2 => {
                    let end = (at + 1 + rng.below(16)).min(m.len());
                    m.drain(at.min(end)..end);
                }
                _ => {
                    let end = (at + 1 + rng.below(32)).min(m.len());
                    let piece = m[at.min(end)..end].to_vec();
                    m.splice(at..at, piece);
                }
            }
        }
        out.push(m);
    }
    out
}

/// Run `body` over every mutation of every seed; returns the number of inputs (so a test can
/// check that its corpus is not empty — an empty corpus would pass vacuously).
fn run(seeds: &[PathBuf], n: usize, body: impl Fn(&[u8])) -> usize {
    let mut count = 0;
    for (i, p) in seeds.iter().enumerate() {
        let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        for m in mutations(&bytes, n, i as u64) {
            body(&m);
            count += 1;
        }
    }
    count
}

#[test]
fn fuzz_bodies_survive_mutated_scene_files() {
    let mut s = seeds("scenes", &[".toml"], 16 << 10);
    s.extend(seeds("tests/fixtures/scenes", &[".toml"], 16 << 10));
    assert!(s.len() >= 40, "scene corpus too small: {}", s.len());
    let n = run(&s, 12, diffphd_fuzz_bodies::scene);
    assert!(n >= 40 * 20);
    // a `contact_force` term's measurement file, behind the body's `#forces` line
    let forces = seeds("scenes/dice", &["force.csv"], 64 << 10);
    assert_eq!(forces.len(), 1);
    run(&forces, 24, |d| {
        let mut f = b"#forces\n".to_vec();
        f.extend_from_slice(d);
        diffphd_fuzz_bodies::scene(&f)
    });
}

#[test]
fn fuzz_bodies_survive_mutated_mesh_files() {
    let small = 64 << 10;
    let mut total = 0;
    for ext in ["msh", "mesh", "vtk", "vtu"] {
        let mut s = seeds("tests/fixtures", &[&format!(".{ext}")], small);
        s.extend(seeds("meshes", &[&format!(".{ext}")], small));
        assert!(!s.is_empty(), "no .{ext} seed");
        total += run(&s, 24, |d| diffphd_fuzz_bodies::mesh(ext, d));
    }
    // TetGen pairs: `.node`, a `---` line, `.ele`.
    let nodes = seeds("tests/fixtures/meshes", &[".node"], small);
    assert!(!nodes.is_empty());
    for node in &nodes {
        let ele = node.with_extension("ele");
        let mut pair = std::fs::read(node).unwrap();
        pair.extend_from_slice(b"\n---\n");
        pair.extend(std::fs::read(&ele).unwrap_or_default());
        for m in mutations(&pair, 12, 7) {
            diffphd_fuzz_bodies::mesh_tetgen(&m);
            total += 1;
        }
    }
    assert!(total > 200);
}

#[test]
fn fuzz_bodies_survive_mutated_frames_surfaces_and_logs() {
    let plys = seeds("scenes/dice", &[".ply"], 64 << 10);
    assert!(!plys.is_empty());
    run(&plys[..1], 12, diffphd_fuzz_bodies::ply_frame);
    let objs = seeds("meshes", &["sphere.obj"], 64 << 10);
    assert_eq!(objs.len(), 1);
    // The surface body reads its first byte as the format selector (0: OBJ).
    run(&objs, 8, |d| {
        let mut sel = vec![0u8];
        sel.extend_from_slice(d);
        diffphd_fuzz_bodies::surface(&sel)
    });
    let logs = seeds("tests/fixtures/logs", &[".json"], 64 << 10);
    assert!(logs.len() >= 2);
    run(&logs, 12, diffphd_fuzz_bodies::plot_json);
}
