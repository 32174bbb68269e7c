//! `diffphd mesh`: inspect, check, convert and voxelize meshes.
//!
//! Exit codes (see [`super`]): `mesh check` exits 1 when the mesh has defects (each printed
//! on stdout); every command exits 2 when its input cannot be read or parsed, or the output
//! cannot be written. `convert`, `voxelize` and `generate` never replace an existing file
//! (`voxelize` without `--out` included) unless `--overwrite` is given.
//!
//! This toolbox is apart from the simulation path: it uses the mesh readers, writers and
//! validation the simulation uses, plus reports, surfaces and voxelization that only it uses.

use crate::failure::Failure;
use anyhow::anyhow;
use diffphd::mesh::info::{mesh_info, MeshInfo};
use diffphd::mesh::readers::read_mesh_with_source;
use diffphd::mesh::trisurf::{read_surface, write_surface, SurfaceFormat};
use diffphd::mesh::validate::{remove_unreferenced_nodes, validate_and_fix};
use diffphd::mesh::voxelize::{voxelize, VoxelizeOptions};
use diffphd::mesh::writers::{output_paths, write_mesh, write_mesh_msh, MshVersion};
use diffphd::mesh::{shapes, MeshFormat};
use std::path::{Path, PathBuf};

#[derive(clap::Subcommand, Debug)]
pub enum MeshCommand {
    /// Counts, bounding box, volume, quality and defects of a volumetric mesh.
    Info {
        /// Mesh file: .node/.ele (TetGen), .msh (gmsh 2.2/4.1 ASCII), .mesh (MEDIT), .vtk
        /// (legacy ASCII), .vtu (VTK XML), .bin (DiffPD).
        file: PathBuf,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List every defect (inverted or degenerate elements, unreferenced nodes, non-manifold
    /// faces); exit 1 if there is any, 0 otherwise. A file with duplicate elements is not
    /// read at all (exit 2).
    Check {
        file: PathBuf,
        /// List at most this many defects of each kind (0 = all).
        #[arg(long, default_value_t = 0)]
        max_per_kind: usize,
    },
    /// Convert between mesh formats (chosen by extension: .node/.ele, .msh, .mesh, .vtk,
    /// .vtu, .bin).
    Convert {
        input: PathBuf,
        output: PathBuf,
        /// gmsh file version for .msh output.
        #[arg(long, value_enum, default_value = "4.1")]
        gmsh_version: GmshVersion,
        /// Multiply all coordinates by this factor (DiffPD's .bin meshes are unit-size).
        #[arg(long)]
        scale: Option<f64>,
        /// Drop unreferenced nodes, reorient inverted tets / mirrored hexes and reject
        /// invalid meshes before writing.
        #[arg(long)]
        fix: bool,
        /// Replace an existing output file (refused otherwise).
        #[arg(long)]
        overwrite: bool,
    },
    /// Turn a closed triangle surface (.obj, .off, .ply, .stl) into a hex8 (or tet4) voxel
    /// mesh of the cells whose centre is inside.
    Voxelize {
        surface: PathBuf,
        /// Voxel edge length, in the surface's units.
        #[arg(long)]
        dx: f64,
        /// Split every voxel into six tetrahedra (conforming Kuhn split).
        #[arg(long)]
        tet: bool,
        /// Output mesh (default: `<surface stem>_hex.vtk` or `_tet.vtk` next to the surface).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Replace an existing output file (refused otherwise).
        #[arg(long)]
        overwrite: bool,
        /// Voxelize a surface with holes or non-manifold edges (majority vote of three ray
        /// directions) instead of failing.
        #[arg(long)]
        allow_open: bool,
        /// Keep every face-connected piece instead of only the largest.
        #[arg(long)]
        keep_all_components: bool,
        /// Print the report as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Write an analytic closed surface (sphere or torus) as a triangle mesh.
    Generate {
        /// Surface to write.
        #[arg(value_enum)]
        shape: Shape,
        /// Output surface (.obj, .off, .ply, .stl).
        #[arg(long)]
        out: PathBuf,
        /// Sphere radius, or the torus tube radius.
        #[arg(long, default_value_t = 1.0)]
        radius: f64,
        /// Torus: distance from the centre to the tube centre.
        #[arg(long, default_value_t = 2.0)]
        major_radius: f64,
        /// Sphere: icosahedron subdivisions (20 x 4^n triangles, n <= 7).
        #[arg(long, default_value_t = 4)]
        subdivisions: u32,
        /// Torus: segments around the tube (the ring gets `major/radius` times as many,
        /// at least 3).
        #[arg(long, default_value_t = 32)]
        segments: usize,
        /// Replace an existing output file (refused otherwise).
        #[arg(long)]
        overwrite: bool,
    },
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum GmshVersion {
    #[value(name = "2.2")]
    V22,
    #[value(name = "4.1")]
    V41,
}

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    Sphere,
    Torus,
}

/// Exit-2 failure carrying the error's own message only (a `MeshError` already names its
/// cause, so the `{:#}` chain would repeat it).
fn bad_input(e: impl std::fmt::Display) -> Failure {
    Failure::input(anyhow!("{e}"))
}

pub fn run(cmd: &MeshCommand) -> Result<(), Failure> {
    match cmd {
        MeshCommand::Info { file, json } => info(file, *json),
        MeshCommand::Check { file, max_per_kind } => check(file, *max_per_kind),
        MeshCommand::Convert {
            input,
            output,
            gmsh_version,
            scale,
            fix,
            overwrite,
        } => {
            refuse_existing(&output_paths(output), *overwrite)?;
            convert(input, output, *gmsh_version, *scale, *fix)
        }
        MeshCommand::Voxelize {
            surface,
            dx,
            tet,
            out,
            allow_open,
            keep_all_components,
            json,
            overwrite,
        } => {
            let opts = VoxelizeOptions {
                dx: *dx,
                tets: *tet,
                allow_open: *allow_open,
                keep_all_components: *keep_all_components,
            };
            let out = match out {
                Some(p) => p.clone(),
                None => default_voxel_path(surface, opts.tets),
            };
            refuse_existing(&output_paths(&out), *overwrite)?;
            voxelize_cmd(surface, &opts, &out, *json)
        }
        MeshCommand::Generate {
            shape,
            out,
            radius,
            major_radius,
            subdivisions,
            segments,
            overwrite,
        } => {
            refuse_existing(std::slice::from_ref(out), *overwrite)?;
            generate(
                *shape,
                out,
                *radius,
                *major_radius,
                *subdivisions,
                *segments,
            )
        }
    }
}

/// Refuses to replace a file this command did not create, unless `--overwrite` was given.
fn refuse_existing(paths: &[PathBuf], overwrite: bool) -> Result<(), Failure> {
    if overwrite {
        return Ok(());
    }
    match paths.iter().find(|p| p.exists()) {
        Some(p) => Err(Failure::input(anyhow!(
            "{}: already exists; pass --overwrite to replace it",
            p.display()
        ))),
        None => Ok(()),
    }
}

/// `<surface stem>_hex.vtk` (or `_tet.vtk`) next to the surface.
fn default_voxel_path(surface: &Path, tets: bool) -> PathBuf {
    let stem = surface
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let suffix = if tets { "tet" } else { "hex" };
    surface.with_file_name(format!("{stem}_{suffix}.vtk"))
}

fn load(file: &Path) -> Result<(diffphd::mesh::Mesh, MeshInfo), Failure> {
    if SurfaceFormat::from_path(file).is_some() {
        return Err(Failure::input(anyhow!(
            "{}: a triangle surface, not a volume mesh; use `diffphd mesh voxelize`",
            file.display()
        )));
    }
    let (mesh, source) = read_mesh_with_source(file).map_err(bad_input)?;
    let info = mesh_info(&mesh, Some(&source));
    Ok((mesh, info))
}

fn fmt3(p: [f64; 3]) -> String {
    format!("[{:.6}, {:.6}, {:.6}]", p[0], p[1], p[2])
}

/// Human-readable report.
pub fn format_info(file: &Path, i: &MeshInfo) -> String {
    let mut s = String::new();
    let mut line = |k: &str, v: String| s.push_str(&format!("{k:<20}{v}\n"));
    let fmt = match (i.format, i.index_base) {
        (Some(f), Some(b)) => format!(" ({f}, index base {b})"),
        (Some(f), None) => format!(" ({f})"),
        _ => String::new(),
    };
    line("file", format!("{}{fmt}", file.display()));
    line("elements", format!("{} {}", i.elements, i.element));
    line("nodes", i.nodes.to_string());
    let size = [0, 1, 2].map(|d| i.bbox_max[d] - i.bbox_min[d]);
    line(
        "bounding box",
        format!(
            "{} .. {} (size {})",
            fmt3(i.bbox_min),
            fmt3(i.bbox_max),
            fmt3(size)
        ),
    );
    line("volume", format!("{:.6e}", i.volume));
    line(
        "element volume",
        format!(
            "min {:.6e}, max {:.6e}",
            i.min_element_volume, i.max_element_volume
        ),
    );
    if let (Some(a), Some(b)) = (i.min_dihedral_deg, i.max_dihedral_deg) {
        line("dihedral angles", format!("min {a:.3} deg, max {b:.3} deg"));
    }
    if let Some(q) = i.min_scaled_jacobian {
        line("scaled Jacobian", format!("min {q:.4}"));
    }
    line("boundary faces", i.boundary_faces.to_string());
    line("components", i.components.to_string());
    let regions: Vec<String> = i
        .regions
        .iter()
        .map(|r| {
            format!(
                "{}: {} elements (volume {:.4e})",
                r.tag, r.elements, r.volume
            )
        })
        .collect();
    line("region tags", regions.join("; "));
    line("inverted elements", i.inverted_elements.to_string());
    line("degenerate elements", i.degenerate_elements.to_string());
    line("duplicate elements", i.duplicate_elements.to_string());
    line("unreferenced nodes", i.unreferenced_nodes.to_string());
    line("non-manifold faces", i.non_manifold_faces.to_string());
    line(
        "defects",
        match i.defects.len() {
            0 => "none".into(),
            n => format!("{n} (run `diffphd mesh check` to list them)"),
        },
    );
    s
}

fn info(file: &Path, json: bool) -> Result<(), Failure> {
    let (_, info) = load(file)?;
    if json {
        let text = serde_json::to_string_pretty(&info).map_err(Failure::run)?;
        println!("{text}");
    } else {
        print!("{}", format_info(file, &info));
    }
    Ok(())
}

fn check(file: &Path, max_per_kind: usize) -> Result<(), Failure> {
    let (_, info) = load(file)?;
    let defects = info.defects();
    if defects.is_empty() {
        println!(
            "{}: ok ({} {} elements, {} nodes, no defects)",
            file.display(),
            info.elements,
            info.element,
            info.nodes
        );
        return Ok(());
    }
    println!("(element and node numbers are 0-based positions in file order)");
    let mut k = 0;
    while k < defects.len() {
        let kind = defects[k].kind;
        let end = defects[k..]
            .iter()
            .position(|d| d.kind != kind)
            .map_or(defects.len(), |p| k + p);
        for (m, d) in defects[k..end].iter().enumerate() {
            if max_per_kind > 0 && m == max_per_kind {
                println!("  ... and {} more {} defects", end - k - m, kind.name());
                break;
            }
            println!("{}: {}", file.display(), d.message);
        }
        k = end;
    }
    Err(Failure::run(anyhow!(
        "{}: {} defect(s) found",
        file.display(),
        defects.len()
    )))
}

fn convert(
    input: &Path,
    output: &Path,
    version: GmshVersion,
    scale: Option<f64>,
    fix: bool,
) -> Result<(), Failure> {
    let format = MeshFormat::from_path(output).ok_or_else(|| {
        Failure::input(anyhow!(
            "{}: cannot tell the output format from the extension (use .node, .ele, .msh, .mesh, .vtk, .vtu or .bin)",
            output.display()
        ))
    })?;
    let (mut mesh, _) = load(input)?;
    if let Some(s) = scale {
        if !(s.is_finite() && s != 0.0) {
            return Err(Failure::input(anyhow!(
                "--scale must be finite and non-zero, found {s}"
            )));
        }
        for p in &mut mesh.nodes {
            *p = p.map(|c| c * s);
        }
    }
    if fix {
        let dropped = remove_unreferenced_nodes(&mut mesh);
        if dropped > 0 {
            eprintln!("dropped {dropped} unreferenced node(s)");
        }
        let r = validate_and_fix(&mut mesh)
            .map_err(|e| bad_input(format!("{}: {e}", input.display())))?;
        if !r.flipped.is_empty() {
            eprintln!("reoriented {} element(s)", r.flipped.len());
        }
    }
    let written = match (format, version) {
        (MeshFormat::Gmsh, GmshVersion::V22) => write_mesh_msh(output, &mesh, MshVersion::V22),
        _ => write_mesh(output, &mesh),
    };
    written.map_err(bad_input)?;
    println!(
        "wrote {} ({}, {} {} elements, {} nodes)",
        output.display(),
        format,
        mesh.num_elements(),
        mesh.kind,
        mesh.num_nodes()
    );
    Ok(())
}

fn voxelize_cmd(
    surface: &Path,
    opts: &VoxelizeOptions,
    out: &Path,
    json: bool,
) -> Result<(), Failure> {
    let surf = read_surface(surface).map_err(Failure::input)?;
    let (mesh, report) =
        voxelize(&surf, opts).map_err(|e| Failure::input(anyhow!("{}: {e}", surface.display())))?;
    write_mesh(out, &mesh).map_err(bad_input)?;
    if json {
        let text = serde_json::to_string_pretty(&report).map_err(Failure::run)?;
        println!("{text}");
        return Ok(());
    }
    let t = &report.surface;
    println!(
        "surface: {} vertices, {} triangles, {} edges; boundary edges {}, non-manifold edges {}, inconsistently oriented edges {}, degenerate triangles {}{}",
        t.vertices,
        t.triangles,
        t.edges,
        t.boundary_edges,
        t.non_manifold_edges,
        t.inconsistent_edges,
        t.degenerate_triangles,
        if t.is_watertight() { " (watertight)" } else { " (NOT watertight)" }
    );
    println!(
        "grid: {} x {} x {} cells of dx = {}, origin {}",
        report.grid[0],
        report.grid[1],
        report.grid[2],
        report.dx,
        fmt3(report.origin)
    );
    println!(
        "voxels: {} in {} component(s){}; cells with split ray votes: {}",
        report.voxels,
        report.components,
        if report.dropped_components.is_empty() {
            String::new()
        } else {
            format!(
                ", dropped smaller pieces of {:?} voxels",
                report.dropped_components
            )
        },
        report.split_votes
    );
    println!(
        "volume: voxels {:.6e}, surface {:.6e} (ratio {:.4})",
        report.voxel_volume,
        report.surface_volume,
        report.voxel_volume / report.surface_volume
    );
    println!(
        "wrote {} ({} {} elements, {} nodes)",
        out.display(),
        mesh.num_elements(),
        mesh.kind,
        mesh.num_nodes()
    );
    Ok(())
}

fn generate(
    shape: Shape,
    out: &Path,
    radius: f64,
    major: f64,
    subdivisions: u32,
    segments: usize,
) -> Result<(), Failure> {
    if !(radius.is_finite() && radius > 0.0) {
        return Err(Failure::input(anyhow!(
            "--radius must be positive, found {radius}"
        )));
    }
    let surf = match shape {
        Shape::Sphere => {
            if subdivisions > 7 {
                return Err(Failure::input(anyhow!("--subdivisions is at most 7")));
            }
            shapes::icosphere(radius, [0.0; 3], subdivisions)
        }
        Shape::Torus => {
            if !(major.is_finite() && major > radius) {
                return Err(Failure::input(anyhow!(
                    "--major-radius must exceed --radius ({major} <= {radius})"
                )));
            }
            let n = segments.clamp(3, 4096);
            let ring = ((n as f64 * major / radius).ceil() as usize).clamp(3, 65536);
            shapes::torus(major, radius, [0.0; 3], ring, n)
        }
    };
    write_surface(out, &surf).map_err(bad_input)?;
    println!(
        "wrote {} ({} vertices, {} triangles, enclosed volume {:.6e})",
        out.display(),
        surf.vertices.len(),
        surf.triangles.len(),
        surf.signed_volume()
    );
    Ok(())
}
