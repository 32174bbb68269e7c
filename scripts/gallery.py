"""Render one gallery picture of a simulated scene, off-screen, with PyVista.

    python scripts/gallery.py SCENE.toml FRAMES_DIR OUT.png [--trail]

FRAMES_DIR holds the `.vtu` frames `diffphd simulate` wrote for SCENE.toml
(`--set output.format=vtu`). The picture shows the first frame as a grey ghost, the last
frame's volume coloured by its von Mises stress (Pa, log scale) and, with `--trail`, two
intermediate frames as fainter ghosts (for scenes whose bodies travel). Planes and spheres of
the scene's `[[obstacle]]`s are drawn at their start positions. An MPM–rigid run
(`particles_*.vtu`, `rigid_*.vtu`) shows the last frame's particles as points coloured by their
von Mises stress, the first frame's particles as a faint ghost, and the rigid bodies' surfaces.

Rendering needs no display: VTK's wheels fall back to EGL or OSMesa off screen (VTK >= 9.4;
measured with PyVista 0.49.1 and VTK 9.7.2 on a machine without an X server).
"""

import argparse
import pathlib
import sys
import tomllib

import numpy as np
import pyvista as pv

pv.OFF_SCREEN = True
SIZE = (640, 420)


def frames(directory, prefix="frame"):
    files = sorted(pathlib.Path(directory).glob(f"{prefix}_*.vtu"))
    if not files:
        sys.exit(f"{directory}: no {prefix}_*.vtu files (simulate with --set output.format=vtu)")
    return files


def stress_bar(title):
    return {"title": title, "fmt": "%.0e", "n_labels": 3, "title_font_size": 14,
            "label_font_size": 12, "vertical": True, "position_x": 0.86, "position_y": 0.1,
            "height": 0.8, "width": 0.06}


def von_mises(data):
    """von Mises stress (Pa) of each point: the written field, or from the stress tensor's
    diagonal and off-diagonal parts (`stress_diagonal`, `stress_off_diagonal`) where the
    frames carry only those."""
    if "von_mises_stress" in data.keys():
        return np.asarray(data["von_mises_stress"], float)
    d = np.asarray(data["stress_diagonal"], float)
    o = np.asarray(data["stress_off_diagonal"], float)
    dev = (d[:, 0] - d[:, 1]) ** 2 + (d[:, 1] - d[:, 2]) ** 2 + (d[:, 2] - d[:, 0]) ** 2
    return np.sqrt(0.5 * dev + 3.0 * np.sum(o * o, axis=1))


def mpm_picture(scene, directory, plotter):
    """Particles (first frame ghost, last frame by von Mises stress) and rigid surfaces; returns
    the bounds of what was drawn."""
    parts = frames(directory, "particles")
    first, last = pv.read(parts[0]), pv.read(parts[-1])
    plotter.add_mesh(first, color="#b0b0b0", opacity=0.15, point_size=3,
                     render_points_as_spheres=True)
    stress = np.maximum(von_mises(last.point_data), 1e-3)
    last.point_data["von Mises stress (Pa)"] = stress
    plotter.add_mesh(last, scalars="von Mises stress (Pa)", log_scale=True, cmap="viridis",
                     point_size=5, render_points_as_spheres=True,
                     scalar_bar_args=stress_bar("von Mises stress (Pa)"))
    bounds = [list(first.bounds), list(last.bounds)]
    rigid = sorted(pathlib.Path(directory).glob("rigid_*.vtu"))
    if rigid:
        body = pv.read(rigid[-1])
        plotter.add_mesh(body, color="#9aa6b2", opacity=0.55, smooth_shading=True)
        bounds.append(list(body.bounds))
    b = np.array(bounds)
    return [b[:, i].min() if i % 2 == 0 else b[:, i].max() for i in range(6)], parts


def obstacles(scene, bounds, plotter):
    """Draw the scene's static obstacle geometry: planes as a patch under the bodies."""
    lo, hi = np.array(bounds[0::2]), np.array(bounds[1::2])
    size = float(np.max(hi - lo)) * 1.6 + 1e-9
    for ob in scene.get("obstacle", []):
        if ob.get("type") == "plane":
            normal = np.array(ob["normal"], float)
            centre = np.array(ob["point"], float)
            mid = 0.5 * (lo + hi)
            centre = mid - np.dot(mid - centre, normal) / np.dot(normal, normal) * normal
            patch = pv.Plane(center=centre, direction=normal, i_size=size, j_size=size)
            plotter.add_mesh(patch, color="#d9d4c7", opacity=0.6)
        elif ob.get("type") == "sphere":
            s = pv.Sphere(radius=float(ob["radius"]), center=ob["center"], theta_resolution=48,
                          phi_resolution=48)
            plotter.add_mesh(s, color="#9aa6b2", opacity=0.5, smooth_shading=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("scene")
    ap.add_argument("frames_dir")
    ap.add_argument("out")
    ap.add_argument("--trail", action="store_true")
    args = ap.parse_args()
    scene = tomllib.loads(pathlib.Path(args.scene).read_text())
    if any(pathlib.Path(args.frames_dir).glob("particles_*.vtu")):
        plotter = pv.Plotter(off_screen=True, window_size=SIZE)
        plotter.set_background("white")
        merged, files = mpm_picture(scene, args.frames_dir, plotter)
        obstacles(scene, merged, plotter)
        finish(scene, merged, plotter, args.out)
        print(f"{args.out}: frames {files[0].name} .. {files[-1].name}")
        return
    files = frames(args.frames_dir)
    first = pv.read(files[0])
    last = pv.read(files[-1])
    plotter = pv.Plotter(off_screen=True, window_size=SIZE)
    plotter.set_background("white")
    plotter.add_mesh(first.extract_surface(algorithm="dataset_surface"), color="#b0b0b0", opacity=0.25)
    if args.trail and len(files) > 3:
        for k in (len(files) // 3, 2 * len(files) // 3):
            plotter.add_mesh(pv.read(files[k]).extract_surface(algorithm="dataset_surface"), color="#8fa8c8", opacity=0.3)
    stress = np.maximum(np.asarray(last.cell_data["von_mises_stress"], float), 1e-3)
    last.cell_data["von Mises stress (Pa)"] = stress
    plotter.add_mesh(
        last,
        scalars="von Mises stress (Pa)",
        log_scale=True,
        cmap="viridis",
        show_edges=last.n_cells <= 4000,
        edge_color="#30303080",
        scalar_bar_args=stress_bar("von Mises stress (Pa)"),
    )
    bounds = np.array(first.bounds)
    bl = np.array(last.bounds)
    merged = [min(bounds[i], bl[i]) if i % 2 == 0 else max(bounds[i], bl[i]) for i in range(6)]
    obstacles(scene, merged, plotter)
    finish(scene, merged, plotter, args.out)
    print(f"{args.out}: frames {files[0].name} .. {files[-1].name}")


def finish(scene, merged, plotter, out):
    """Camera from the scene's gravity (up = −g), framing `merged`, and the screenshot."""
    up = np.array(scene.get("simulation", {}).get("gravity", [0.0, 0.0, -9.81]), float)
    up = -up / np.linalg.norm(up) if np.linalg.norm(up) > 0 else np.array([0.0, 0.0, 1.0])
    side = np.cross(up, [0.0, 1.0, 0.0] if abs(up[1]) < 0.9 else [1.0, 0.0, 0.0])
    view = 0.6 * side - np.cross(up, side) + 0.55 * up
    plotter.view_vector(tuple(view), viewup=tuple(up))
    plotter.reset_camera(bounds=merged)
    extent = np.array(merged[1::2]) - np.array(merged[0::2])
    tall = abs(np.dot(extent, up)) > 1.5 * np.max(np.abs(extent - np.dot(extent, up) * up))
    plotter.camera.zoom(1.0 if tall else 1.2)
    plotter.screenshot(out)


if __name__ == "__main__":
    main()
