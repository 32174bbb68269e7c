#!/usr/bin/env python3
"""Speed/accuracy frontier benchmark (issue 14): how fast each solver method reaches a given
accuracy, against a tight Newton oracle. Not a test. Python 3 standard library only; run it
through scripts/bench_frontier.sh (which builds the release binary first).

For every scene:
  1. the oracle: `diffphd grad --solver newton` with newton_tol = --oracle-tol (<= 1e-10), on the
     same PD energy and the same contact model, once; its final state, the largest node
     displacement from rest over its rollout and its gradient are the reference;
  2. every method (diffphd, diffphd:paper, diffpd, newton, newton:FILTER) at its default
     settings, and at a ladder of tolerances, backward.rel_tol coupled to it for the PD
     methods: solver.residual_tol for diffphd (its default accurate mode, where the force
     balance test decides and solver.rel_tol is only the hand-over point to Newton-Krylov),
     solver.rel_tol for diffpd and for diffphd:paper (solver.mode = "paper": the paper's
     dual gate), solver.newton_tol for Newton;
  3. per run: forward s, backward s, iterations, adjoint iterations,
       state error = max_i |x_i - x*_i| (final frame) / max_{t,i} |x*_{t,i} - X_i| (oracle),
       gradient error = ||g - g*|| / ||g*|| over the scene's declared [[parameter]]s;
  4. the speed-up of diffphd over every other method at equal accuracy: each method's Pareto
     frontier (time vs error) is interpolated log-log at a list of error levels, forward
     (forward s vs state error), backward (backward s vs gradient error) and fwd+bwd
     (total s vs gradient error).
Output: a markdown report (tables to append to docs/benchmarks-log.md; headline rows go to docs/BENCHMARKS.md), frontier.json and
frontier.csv in --out, plus every run's grad.json and stderr.

  scripts/bench_frontier.sh --quick
  scripts/bench_frontier.sh --scenes cantilever,bouncing_ball --frames 20 --threads 1
  scripts/bench_frontier.sh --scenes plant --plant-mesh /path/to/plant.bin
  scripts/bench_frontier.sh --analyze-only --out out/bench_frontier   # re-print, no runs
  scripts/bench_frontier.sh --self-test                                # the analysis, synthetic

Speed-up cells: t_method / t_diffphd at that error (> 1: diffphd is faster). A method whose
cheapest run is already more accurate than the level has only an upper bound on its time
there; the ratio then carries '<=' or '>=' ('~' when both bound), 'n/r' means the other
method never reached the level in the ladder, 'D n/r' that diffphd did not.
"""

import argparse
import csv
import json
import math
import os
import platform
import resource
import subprocess
import sys
import time

# Scene keys the ladders set (one place, in case the settings vocabulary changes).
# diffphd's accurate mode (the default): the force-balance tolerance is its accuracy knob.
ACCURATE_TOL_KEYS = ["solver.residual_tol", "backward.rel_tol"]
# diffpd and diffphd:paper: the dual gate.
PD_TOL_KEYS = ["solver.rel_tol", "backward.rel_tol"]
PAPER_MODE_SET = 'solver.mode="paper"'
NEWTON_TOL_KEY = "solver.newton_tol"
NEWTON_FILTER_KEY = "solver.newton_filter"
ORACLE_SETS = ["solver.newton_max_iterations=200"]
PLANT_MESH_KEY = "body.0.mesh.file"

SCENES = ["cantilever", "cantilever_diffpd", "twist_bands_tet", "bouncing_ball",
          "armadillo_twist", "plant"]
FULL_FRAMES = {"cantilever": 100, "cantilever_diffpd": 25, "twist_bands_tet": 40,
               "bouncing_ball": 40, "armadillo_twist": 5, "plant": 200}
# CI size: bouncing_ball needs ~17 frames to reach the ground, so 20 include the contact.
QUICK_FRAMES = {"cantilever": 5, "cantilever_diffpd": 3, "twist_bands_tet": 6,
                "bouncing_ball": 20, "armadillo_twist": 2, "plant": 3}
QUICK_SCENES = ["cantilever", "twist_bands_tet", "bouncing_ball"]
FULL_PD_TOLS = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]
QUICK_PD_TOLS = [1e-2, 1e-4, 1e-6, 1e-8]
FULL_NEWTON_TOLS = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8]
QUICK_NEWTON_TOLS = [1e-3, 1e-6]
FULL_METHODS = ["diffphd", "diffpd", "newton", "newton:ppn"]
QUICK_METHODS = ["diffphd", "diffpd", "newton"]
LEVELS = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6]
# The accuracy target of issue 14 (state error, gradient error) of the default settings.
TARGET_STATE, TARGET_GRAD = 1e-5, 1e-3
BASE = "diffphd"
ERR_FLOOR = 1e-16
# "wall": the phases' wall seconds from grad.json; "cpu": scaled by the run's process
# CPU/wall ratio (--clock cpu, for loaded machines).
CLOCK = "wall"
TIME_FLOOR = 1e-6


# ---------------------------------------------------------------- analysis (pure functions)

def state_error(x, x_ref, scale):
    """max_i |x_i - x_ref_i| / scale (positions flat, 3 per node)."""
    if len(x) != len(x_ref):
        raise ValueError("state sizes differ: %d vs %d" % (len(x), len(x_ref)))
    worst = 0.0
    for i in range(0, len(x), 3):
        d = math.sqrt(sum((x[i + k] - x_ref[i + k]) ** 2 for k in range(3)))
        if not math.isfinite(d):
            return math.inf
        worst = max(worst, d)
    return worst / scale if scale > 0 else math.inf


def gradient_error_per_parameter(g, g_ref):
    """Issue 37's per-parameter error: max_i |g_i - g*_i| / max(|g*_i|, 1e-3 max_j |g*_j|)."""
    if len(g) != len(g_ref) or not g_ref:
        return None
    top = max(abs(b) for b in g_ref)
    errs = [abs(a - b) / max(abs(b), 1e-3 * top) if max(abs(b), top) > 0 else abs(a - b)
            for a, b in zip(g, g_ref)]
    return max(errs) if all(math.isfinite(e) for e in errs) else math.inf


def gradient_error(g, g_ref):
    """||g - g_ref|| / ||g_ref||."""
    if len(g) != len(g_ref):
        raise ValueError("gradient sizes differ: %d vs %d" % (len(g), len(g_ref)))
    num = math.sqrt(sum((a - b) ** 2 for a, b in zip(g, g_ref)))
    den = math.sqrt(sum(b * b for b in g_ref))
    if not math.isfinite(num):
        return math.inf
    return num / den if den > 0 else (0.0 if num == 0 else math.inf)


def pareto(points):
    """Pareto frontier of (time, error) points: sorted by time, each more accurate than every
    cheaper one. Non-finite errors are dropped; errors and times are floored (log scale)."""
    pts = sorted((max(t, TIME_FLOOR), max(e, ERR_FLOOR)) for t, e in points
                 if t is not None and e is not None and math.isfinite(e) and math.isfinite(t))
    front, best = [], math.inf
    for t, e in pts:
        if e < best:
            front.append((t, e))
            best = e
    return front


def time_at(front, level):
    """(time, kind) to reach error <= level on a frontier, log-log interpolated between the two
    frontier points around it. kind: 'exact'; 'upper' when the cheapest point is already more
    accurate than the level (the time is an upper bound); None when the level is never reached."""
    if not front:
        return None, None
    t0, e0 = front[0]
    if level >= e0:
        return t0, ("exact" if level == e0 else "upper")
    for (ta, ea), (tb, eb) in zip(front, front[1:]):
        if ea >= level >= eb:
            if ea == eb:
                return tb, "exact"
            s = (math.log(level) - math.log(ea)) / (math.log(eb) - math.log(ea))
            return math.exp(math.log(ta) + s * (math.log(tb) - math.log(ta))), "exact"
    return None, None


def speedup(front_other, front_base, level):
    """(ratio, text) of t_other / t_base at equal error `level`."""
    to, ko = time_at(front_other, level)
    tb, kb = time_at(front_base, level)
    if tb is None and to is None:
        return None, "-"
    if tb is None:
        return None, "D n/r"
    if to is None:
        return math.inf, "n/r"
    r = to / tb
    prefix = {("exact", "exact"): "", ("exact", "upper"): ">=", ("upper", "exact"): "<=",
              ("upper", "upper"): "~"}[(ko, kb)]
    return r, "%s%.2f" % (prefix, r)


PHASES = [("forward", "fwd s vs state err", "forward_s", "state_error"),
          ("backward", "bwd s vs grad err", "backward_s", "gradient_error"),
          ("total", "fwd+bwd s vs grad err", "total_s", "gradient_error")]


def analyse_scene(oracle, runs, levels):
    """Fill state/gradient errors into `runs` (dicts from `load_run`) and return the speed-up
    table: {other_method: {phase: [(level, ratio, text)]}} plus the frontiers."""
    for r in runs:
        if r.get("positions") is None or oracle is None:
            r["state_error"] = r["gradient_error"] = None
            continue
        r["state_error"] = state_error(r["positions"], oracle["positions"],
                                       oracle["max_displacement"])
        r["gradient_error"] = gradient_error(r["gradient"], oracle["gradient"])
        r["gradient_error_per_parameter"] = gradient_error_per_parameter(r["gradient"],
                                                                         oracle["gradient"])
        r["total_s"] = r["forward_s"] + r["backward_s"]
    methods = []
    for r in runs:
        if r["method"] not in methods:
            methods.append(r["method"])
    fronts = {}
    for m in methods:
        ok = [r for r in runs if r["method"] == m and r.get("state_error") is not None]
        fronts[m] = {ph: pareto([(r[tk], r[ek]) for r in ok]) for ph, _, tk, ek in PHASES}
    table = {}
    if BASE in fronts:
        for m in methods:
            if m == BASE:
                continue
            table[m] = {ph: [(lv,) + speedup(fronts[m][ph], fronts[BASE][ph], lv) for lv in levels]
                        for ph, _, _, _ in PHASES}
    return fronts, table


def fmt_e(v):
    if v is None:
        return "-"
    if not math.isfinite(v):
        return "inf"
    return "%.1e" % v


def fmt_s(v):
    return "-" if v is None else ("%.3g" % v if v < 100 else "%.0f" % v)


def scene_markdown(sc, levels):
    """Markdown tables of one analysed scene."""
    out = []
    o = sc.get("oracle") or {}
    head = "### %s: %s nodes, %d frames, %s thread(s)" % (
        sc["name"], o.get("nodes", "?"), sc["frames"], sc["threads"])
    out.append(head)
    out.append("")
    if o.get("positions") is None:
        out.append("Oracle failed: %s" % o.get("error", "no grad.json"))
        out.append("")
    else:
        out.append("Oracle: newton, newton_tol = %g: forward %s s, backward %s s, %d Newton "
                   "iterations%s; max displacement from rest %.4g m; |g*| = %.4g." % (
                       sc["oracle_tol"], fmt_s(o["forward_s"]), fmt_s(o["backward_s"]),
                       o["iterations"],
                       ", NOT CONVERGED in %d frames" % o["fwd_nonconverged"]
                       if o["fwd_nonconverged"] else "",
                       o["max_displacement"],
                       math.sqrt(sum(g * g for g in o["gradient"]))))
        out.append("")
    out.append("| method | setting | fwd s | bwd s | process cpu s | iters | adj iters | state err "
               "| grad err | notes |")
    out.append("|---|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in sc["runs"]:
        notes = list(r.get("notes", []))
        if r["setting"] == "default" and r.get("state_error") is not None:
            ok = (r["state_error"] <= TARGET_STATE and r["gradient_error"] <= TARGET_GRAD)
            notes.append("meets target" if ok else "misses target (%g / %g)" % (
                TARGET_STATE, TARGET_GRAD))
            notes.append("per-parameter grad err %s" % fmt_e(r.get("gradient_error_per_parameter")))
        if r.get("frame_methods") and (len(r["frame_methods"]) > 1
                                       or r["method"] == "auto"):
            notes.append("ran " + ", ".join("%s %d frames" % kv
                                            for kv in sorted(r["frame_methods"].items())))
        elif r.get("resolved_method") and r["resolved_method"] != r["method"]:
            notes.append("ran %s" % r["resolved_method"])
        if r.get("error"):
            out.append("| %s | %s | - | - | - | - | - | - | - | %s |" % (
                r["method"], r["setting"], r["error"][:90].replace("|", "/")))
            continue
        out.append("| %s | %s | %s | %s | %s | %d | %d | %s | %s | %s |" % (
            r["method"], r["setting"], fmt_s(r["forward_s"]), fmt_s(r["backward_s"]),
            fmt_s(r.get("process_cpu_s")),
            r["iterations"], r["adjoint_iterations"], fmt_e(r.get("state_error")),
            fmt_e(r.get("gradient_error")), "; ".join(notes)))
    out.append("")
    if sc.get("speedup"):
        out.append("Speed-up of %s at equal accuracy (t_method / t_%s, > 1: %s faster):" % (
            BASE, BASE, BASE))
        out.append("")
        out.append("| vs | phase | " + " | ".join("err %.0e" % lv for lv in levels) + " |")
        out.append("|---|---|" + "---:|" * len(levels))
        for m, phases in sc["speedup"].items():
            for ph, label, _, _ in PHASES:
                cells = [c[2] for c in phases[ph]]
                out.append("| %s | %s | %s |" % (m, label, " | ".join(cells)))
        out.append("")
    return "\n".join(out)


# ---------------------------------------------------------------- runs

def frame_methods(ev):
    """Frames per method that solved them (grad.json evaluation.frames[].method; `auto`
    switches per frame), e.g. {"newton": 4, "diffphd": 6}; {} when not recorded."""
    out = {}
    for f in ev.get("frames") or []:
        m = f.get("method")
        if m:
            out[m] = out.get(m, 0) + 1
    return out


def defaults_summary(scenes):
    """Issue 37's check: the defaults (`auto`) against the faster of Newton's and PD's
    defaults, per phase (ratio t_auto / min(t_newton, t_diffphd); <= 1.10 is "within 10 %"),
    with auto's per-frame methods, the share of its forward spent on attempts it threw away
    (failed probes and retries, `missed_seconds`: measured inside one run, so the host's drift
    moves it little, unlike the ratios) and per-parameter gradient error."""
    out = ["### The defaults against the faster method (issue 37)", "",
           "Ratio = t_auto / min(t_newton, t_diffphd), each method at its defaults "
           "(<= 1.10: within 10 %; < 1: faster than both).", "",
           "| scene | auto ran | fwd ratio | bwd ratio | total ratio | auto total s | "
           "newton total s | diffphd total s | auto missed / rest of fwd | "
           "auto per-param grad err | auto state err |",
           "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for sc in scenes:
        d = {r["method"]: r for r in sc.get("runs", []) if r["setting"] == "default"
             and r.get("forward_s") is not None and not r.get("error")}
        if not all(m in d for m in ("auto", "newton", "diffphd")):
            continue
        a, n, p = d["auto"], d["newton"], d["diffphd"]
        tot = lambda r: r["forward_s"] + r["backward_s"]
        ratio = lambda k: k(a) / max(min(k(n), k(p)), 1e-12)
        ran = ", ".join("%s %d" % kv for kv in sorted((a.get("frame_methods") or {}).items()))
        missed = a.get("missed_s")
        share = ("%.1f %%" % (100.0 * missed / max(a["forward_s"] - missed, 1e-12))
                 if missed is not None else "–")
        out.append("| %s | %s | %.2f | %.2f | %.2f | %s | %s | %s | %s | %s | %s |" % (
            sc["name"], ran or a.get("resolved_method") or "?",
            ratio(lambda r: r["forward_s"]), ratio(lambda r: r["backward_s"]), ratio(tot),
            fmt_s(tot(a)), fmt_s(tot(n)), fmt_s(tot(p)), share,
            fmt_e(a.get("gradient_error_per_parameter")), fmt_e(a.get("state_error"))))
    out.append("")
    return "\n".join(out)


def load_run(d):
    """Read one run folder (grad.json, rc, stderr.txt) into a flat record; with repeats
    (sub-folders rep1, rep2, ... from --repeat) the times are the minimum over them."""
    rec = load_one(d)
    reps = sorted(e for e in (os.listdir(d) if os.path.isdir(d) else [])
                  if e.startswith("rep") and e[3:].isdigit())
    more = [load_one(os.path.join(d, e)) for e in reps]
    more = [r for r in more if r.get("positions") is not None]
    if rec.get("positions") is not None and more:
        # three or more runs: the median; two: the faster
        for k in ("forward_s", "backward_s", "process_cpu_s", "process_wall_s"):
            xs = sorted(x for x in [rec.get(k)] + [r.get(k) for r in more] if x is not None)
            if xs:
                rec[k] = xs[len(xs) // 2] if len(xs) >= 3 else xs[0]
    rec["repeats"] = 1 + len(reps)
    return rec


def load_one(d):
    """One run folder, without its repeats."""
    rec = {"dir": d}
    rc_path = os.path.join(d, "rc")
    rec["rc"] = int(open(rc_path).read().strip()) if os.path.exists(rc_path) else None
    gpath = os.path.join(d, "grad.json")
    if not os.path.exists(gpath):
        err = ""
        spath = os.path.join(d, "stderr.txt")
        if os.path.exists(spath):
            lines = [l for l in open(spath).read().splitlines() if l.strip()]
            err = lines[-1] if lines else ""
        rec["error"] = (err or "no grad.json") + (" (exit %s)" % rec["rc"])
        rec["positions"] = None
        return rec
    g = json.load(open(gpath))
    ev = g["evaluation"]
    fs = g.get("final_state")
    if fs is None:
        raise SystemExit("%s has no final_state: the binary predates `grad --final-state`" % gpath)
    fwd, bwd = ev["forward_seconds"], ev["backward_seconds"]
    ppath = os.path.join(d, "process.json")
    proc = json.load(open(ppath)) if os.path.exists(ppath) else {}
    rec["process_wall_s"], rec["process_cpu_s"] = proc.get("wall_seconds"), proc.get("cpu_seconds")
    rec["clock"] = "wall"
    if CLOCK == "cpu" and proc.get("wall_seconds") and proc.get("cpu_seconds"):
        # The process's CPU/wall ratio applied to its phases: on a loaded machine this
        # estimates what the phases would take on an idle one (one thread per run).
        ratio = min(1.0, proc["cpu_seconds"] / proc["wall_seconds"])
        fwd, bwd = fwd * ratio, bwd * ratio
        rec["clock"] = "cpu"
    rec.update({
        "forward_s": fwd, "backward_s": bwd,
        "setup_s": ev.get("setup_seconds"),
        "iterations": ev["pd_iterations"], "adjoint_iterations": ev["adjoint_iterations"],
        "fwd_nonconverged": len(ev.get("nonconverged_forward_frames", [])),
        "bwd_nonconverged": len(ev.get("nonconverged_backward_frames", [])),
        "loss": ev["loss"], "gradient": ev["gradient"], "parameters": g.get("parameters"),
        "positions": fs["positions"], "max_displacement": fs["max_displacement"],
        "nodes": len(fs["positions"]) // 3, "git_commit": g.get("git_commit"),
        "resolved_method": g.get("method"), "method_reason": g.get("method_reason"),
        "frame_methods": frame_methods(ev),
        # `auto`'s failed probes and retries (their wall seconds, inside this run)
        # (None from a binary older than the key: then the first probe's frame would carry it)
        "missed_s": (sum(f.get("missed_seconds") or 0.0 for f in ev.get("frames") or [])
                     if any("missed_seconds" in f for f in ev.get("frames") or [])
                     or not any("probe_budget" in f or "retried_from" in f
                                for f in ev.get("frames") or []) else None),
    })
    notes = []
    if rec["fwd_nonconverged"]:
        notes.append("fwd not converged in %d frames" % rec["fwd_nonconverged"])
    if rec["bwd_nonconverged"]:
        notes.append("adjoint not converged in %d frames" % rec["bwd_nonconverged"])
    if rec["rc"] not in (0, None):
        notes.append("exit %d" % rec["rc"])
    rec["notes"] = notes
    return rec


def run_grad(args, scene_path, frames, solver, sets, d):
    """One `diffphd grad --final-state` run into folder d (reused with --resume when the same
    command already completed there). Returns the wall seconds spent (0 when reused)."""
    cmd = [args.bin, "grad", scene_path, "--out", d, "--threads", str(args.threads),
           "--frames", str(frames), "--solver", solver, "--quiet", "--overwrite", "--final-state"]
    for s in sets:
        cmd += ["--set", s]
    os.makedirs(d, exist_ok=True)
    cmd_path = os.path.join(d, "cmd.json")
    if args.resume and os.path.exists(cmd_path) and os.path.exists(os.path.join(d, "rc")):
        if json.load(open(cmd_path)) == cmd:
            return 0.0
    with open(cmd_path, "w") as f:
        json.dump(cmd, f)
    t0 = time.time()
    ru0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        with open(os.path.join(d, "stderr.txt"), "w") as err:
            p = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=err,
                               timeout=args.timeout or None)
        rc = p.returncode
    except subprocess.TimeoutExpired:
        rc = 124
        with open(os.path.join(d, "stderr.txt"), "a") as err:
            err.write("timeout: killed after %s s\n" % args.timeout)
        gj = os.path.join(d, "grad.json")
        if os.path.exists(gj):
            os.remove(gj)
    ru1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    wall = time.time() - t0
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    with open(os.path.join(d, "process.json"), "w") as f:
        json.dump({"wall_seconds": wall, "cpu_seconds": cpu}, f)
    with open(os.path.join(d, "rc"), "w") as f:
        f.write("%d\n" % rc)
    return wall


def ladder(method, args):
    """[(setting label, extra --set list)] of one method: default settings, then the ladder.
    `newton:FILTER` sets the Newton filter; `diffphd:paper` the paper's stopping rule."""
    meth, _, variant = method.partition(":")
    if meth == "auto":
        # issue 37: the rule's choice at its defaults only (the ladders are its two methods')
        return meth, [("default", [])]
    if meth == "newton":
        base = ['%s="%s"' % (NEWTON_FILTER_KEY, variant)] if variant else []
    elif meth == "diffphd" and variant == "paper":
        base = [PAPER_MODE_SET]
    elif variant:
        raise SystemExit("unknown method variant %r (newton:FILTER or diffphd:paper)" % method)
    else:
        base = []
    rows = [] if args.no_defaults else [("default", base)]
    if getattr(args, "no_ladder", False):
        return meth, rows
    if meth == "newton":
        for t in args.newton_tols:
            rows.append(("newton_tol=%g" % t, base + ["%s=%g" % (NEWTON_TOL_KEY, t)]))
    else:
        keys = ACCURATE_TOL_KEYS if (meth == "diffphd" and not variant) else PD_TOL_KEYS
        name = keys[0].split(".", 1)[1]
        for t in args.pd_tols:
            rows.append(("%s=%g" % (name, t), base + ["%s=%g" % (k, t) for k in keys]))
    return meth, rows


def scene_file(name):
    if name.endswith(".toml") or os.sep in name:
        return name, os.path.splitext(os.path.basename(name))[0]
    return os.path.join("scenes", name + ".toml"), name


def run_scene(args, name, log):
    path, key = scene_file(name)
    per_scene = {}
    for part in (args.frames or "").split(","):
        if "=" in part:
            k, v = part.split("=", 1)
            per_scene[k.strip()] = int(v)
    every = int(args.frames) if args.frames and "=" not in args.frames else None
    frames = per_scene.get(key) or every or \
        (QUICK_FRAMES if args.quick else FULL_FRAMES).get(key, 0) or None
    if frames is None:
        raise SystemExit("--frames is needed for scene %s (no default frame count)" % name)
    base_sets = list(args.set)
    if key == "plant":
        base_sets.append('%s="%s"' % (PLANT_MESH_KEY, args.plant_mesh))
    sdir = os.path.join(args.out, key)
    t_scene = time.time()
    log("== %s (%s, %d frames)" % (key, path, frames))
    wall = {}
    od = os.path.join(sdir, "oracle")
    oracle_sets = base_sets + ORACLE_SETS + ["%s=%g" % (NEWTON_TOL_KEY, args.oracle_tol)] \
        + list(args.oracle_set)
    wall["oracle"] = run_grad(args, path, frames, "newton", oracle_sets, od)
    log("   oracle: %.1f s" % wall["oracle"])
    runs = []
    plan = []
    for method in args.methods:
        meth, rows = ladder(method, args)
        for label, sets in rows:
            d = os.path.join(sdir, method.replace(":", "_"), label.replace("=", "_"))
            plan.append((method, meth, label, sets, d))
    # repeats interleaved (every run once, then every run again ...), as farm-bench pairs
    # its commands, so that a change of load spreads over all methods
    for k in range(args.repeat):
        for method, meth, label, sets, d in plan:
            dk = d if k == 0 else os.path.join(d, "rep%d" % k)
            wall[method] = wall.get(method, 0.0) + run_grad(
                args, path, frames, meth, base_sets + sets, dk)
    for method, meth, label, sets, d in plan:
        r = load_run(d)
        r.update({"method": method, "setting": label})
        runs.append(r)
        log("   %-11s %-16s %s" % (method, label,
                                    "  " + r["error"] if r.get("error") else "done"))
    return {"name": key, "path": path, "frames": frames, "threads": args.threads,
            "oracle_tol": args.oracle_tol, "dir": sdir, "wall_seconds": wall,
            "scene_wall_seconds": time.time() - t_scene}


def analyse(scene_meta, levels):
    """Load a scene's run folders (as listed in its metadata) and analyse them."""
    sc = dict(scene_meta)
    o = load_run(os.path.join(sc["dir"], "oracle"))
    if o.get("positions") is None:
        o = {"error": o.get("error"), "positions": None}
    sc["oracle"] = o
    runs = []
    for r in sc["run_dirs"]:
        rec = load_run(r["dir"])
        rec.update({"method": r["method"], "setting": r["setting"]})
        runs.append(rec)
    fronts, table = analyse_scene(o if o.get("positions") is not None else None, runs, levels)
    sc["runs"], sc["fronts"], sc["speedup"] = runs, fronts, table
    return sc


def finite(v):
    """JSON-safe copy: non-finite floats become strings ("inf", "nan")."""
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [finite(x) for x in v]
    return v


def strip(sc):
    """A scene record without the big arrays, for frontier.json."""
    out = {k: v for k, v in sc.items() if k not in ("runs", "oracle")}
    drop = ("positions",)
    out["oracle"] = {k: v for k, v in (sc.get("oracle") or {}).items() if k not in drop}
    out["runs"] = [{k: v for k, v in r.items() if k not in drop} for r in sc["runs"]]
    out["speedup"] = {m: {ph: [{"level": c[0], "ratio": c[1], "text": c[2]} for c in cells]
                          for ph, cells in phases.items()}
                      for m, phases in sc["speedup"].items()}
    return out


def machine_line():
    cpu = platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = " ".join("%.1f" % v for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True).stdout.strip() or "?"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        commit += "+dirty" if dirty else ""
    except OSError:
        commit = "?"
    return "%s, %d cores; load average %s; commit %s; %s" % (
        cpu, os.cpu_count() or 0, load, commit, time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()))


def report(meta, levels):
    scenes = [analyse(s, levels) for s in meta["scenes"]]
    lines = ["## Frontier benchmark (%s)" % meta["label"], "",
             "Started: %s. Finished: %s." % (meta["machine_start"], meta.get("machine_end", "?")),
             "Threads %s; repeats %s (interleaved; median of >= 3, else fastest); PD ladder (diffphd: solver.residual_tol; "
             "diffpd, diffphd:paper: solver.rel_tol; backward.rel_tol with it) %s; Newton ladder %s; oracle newton_tol %g; times: %s. "
             "Command: `%s`." % (
                 meta["threads"], meta.get("repeat", 1),
                 "none (--no-ladder)" if meta.get("no_ladder") else
                 ", ".join("%g" % t for t in meta["pd_tols"]),
                 "none (--no-ladder)" if meta.get("no_ladder") else
                 ", ".join("%g" % t for t in meta["newton_tols"]), meta["oracle_tol"],
                 "phase wall seconds (grad.json)" if CLOCK == "wall" else
                 "phase seconds x the run's process CPU/wall ratio (--clock cpu)",
                 meta["command"]),
             "State error: max node distance to the oracle's final state / the oracle's largest "
             "displacement from rest; gradient error: ||g - g*|| / ||g*|| over the declared "
             "parameters. Target of the default settings: state <= %g, gradient <= %g." % (
                 TARGET_STATE, TARGET_GRAD), ""]
    # the commits the measured binaries were built from (grad.json), which need not be the
    # checkout's (machine lines above)
    short = lambda c: c[:10] + ("+dirty" if c.endswith("dirty") else "")
    built = sorted({short(str(r.get("git_commit"))) for sc in scenes
                    for r in list(sc.get("runs", [])) + [sc.get("oracle") or {}]
                    if r.get("git_commit")})
    lines.insert(-1, "Binaries built from commit(s): %s." % (", ".join(built) or "?"))
    for sc in scenes:
        lines.append(scene_markdown(sc, levels))
        w = sc.get("wall_seconds", {})
        if w:
            lines.append("Wall seconds spent (incl. process start, mesh load): " + ", ".join(
                "%s %.0f" % (k, v) for k, v in w.items()) + "; scene total %.0f." % sum(w.values()))
            lines.append("")
    lines.append(defaults_summary(scenes))
    md = "\n".join(lines)
    with open(os.path.join(meta["out"], "frontier.md"), "w") as f:
        f.write(md + "\n")
    with open(os.path.join(meta["out"], "frontier.json"), "w") as f:
        json.dump(finite({"meta": meta, "levels": levels, "scenes": [strip(s) for s in scenes]}),
                  f, indent=1)
    with open(os.path.join(meta["out"], "frontier.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["scene", "frames", "threads", "method", "setting", "forward_s", "backward_s",
                    "iterations", "adjoint_iterations", "state_error", "gradient_error",
                    "fwd_nonconverged", "bwd_nonconverged", "rc", "error"])
        for sc in scenes:
            for r in sc["runs"]:
                w.writerow([sc["name"], sc["frames"], sc["threads"], r["method"], r["setting"],
                            r.get("forward_s"), r.get("backward_s"), r.get("iterations"),
                            r.get("adjoint_iterations"), r.get("state_error"),
                            r.get("gradient_error"), r.get("fwd_nonconverged"),
                            r.get("bwd_nonconverged"), r.get("rc"), r.get("error", "")])
    return md


# ---------------------------------------------------------------- self-test

def self_test():
    """The analysis on synthetic input: errors, Pareto frontier, log-log interpolation and
    the speed-up's bound markers."""
    assert state_error([0, 0, 0, 1, 1, 1], [0, 0, 0, 1, 1, 3], 4.0) == 0.5
    assert abs(gradient_error([1.0, 2.0], [1.0, 1.0]) - 1 / math.sqrt(2)) < 1e-15
    # (time, error): (3, 1e-2) is dominated by (2, 1e-3).
    f = pareto([(1.0, 1e-1), (3.0, 1e-2), (2.0, 1e-3), (4.0, 1e-5), (5.0, float("nan"))])
    assert f == [(1.0, 1e-1), (2.0, 1e-3), (4.0, 1e-5)], f
    t, k = time_at(f, 1e-4)  # halfway in log error between (2, 1e-3) and (4, 1e-5)
    assert k == "exact" and abs(t - math.sqrt(8)) < 1e-12, (t, k)
    assert time_at(f, 1.0) == (1.0, "upper")
    assert time_at(f, 1e-6) == (None, None)
    g = pareto([(10.0, 1e-2), (20.0, 1e-4)])
    r, text = speedup(g, f, 1e-3)  # other: sqrt(200), base: 2
    assert abs(r - math.sqrt(200) / 2) < 1e-12 and text == "%.2f" % r, (r, text)
    assert speedup(g, f, 1e-1)[1].startswith("<=")   # other's cheapest run beats the level
    assert speedup(g, f, 1e-5)[1] == "n/r"
    assert speedup(f, g, 1e-5)[1] == "D n/r"
    runs = [{"method": "diffphd", "setting": "a", "forward_s": 1.0, "backward_s": 1.0,
             "positions": [0.0, 0.0, 1e-3], "gradient": [1.0, 0.0]},
            {"method": "newton", "setting": "b", "forward_s": 4.0, "backward_s": 0.5,
             "positions": [0.0, 0.0, 1e-3], "gradient": [1.0, 0.0]}]
    oracle = {"positions": [0.0, 0.0, 0.0], "max_displacement": 1.0, "gradient": [1.0, 0.0]}
    fronts, table = analyse_scene(oracle, runs, [1e-3, 1e-2])
    assert runs[0]["state_error"] == 1e-3 and runs[0]["gradient_error"] == 0.0
    assert [c[2] for c in table["newton"]["forward"]] == ["4.00", "~4.00"], table
    assert [c[2] for c in table["newton"]["backward"]] == ["~0.50", "~0.50"], table
    # the ladders: diffphd's accurate mode ladders its force-balance tolerance, the gate
    # methods their dual-gate tolerance
    class A:
        no_defaults, pd_tols, newton_tols = False, [1e-4], [1e-6]
    assert ladder("diffphd", A)[1] == [
        ("default", []),
        ("residual_tol=0.0001", ["solver.residual_tol=0.0001", "backward.rel_tol=0.0001"])]
    assert ladder("diffphd:paper", A)[1][1] == (
        "rel_tol=0.0001", [PAPER_MODE_SET, "solver.rel_tol=0.0001", "backward.rel_tol=0.0001"])
    assert ladder("diffpd", A)[1][1][0] == "rel_tol=0.0001"
    assert ladder("newton:ppn", A) == ("newton", [
        ("default", ['solver.newton_filter="ppn"']),
        ("newton_tol=1e-06", ['solver.newton_filter="ppn"', "solver.newton_tol=1e-06"])])
    print("bench_frontier self-test: ok")


# ---------------------------------------------------------------- main

def floats(s):
    return [float(v) for v in s.replace(",", " ").split()]


def words(s):
    return s.replace(",", " ").split()


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenes", type=words, help="scene names (scenes/NAME.toml) or paths, "
                    "comma-separated; default: all six (--quick: %s)" % ",".join(QUICK_SCENES))
    ap.add_argument("--frames", help="frames for every scene (N), or per scene "
                    "(NAME=N,NAME=N; the others at their default)")
    ap.add_argument("--quick", action="store_true",
                    help="CI size: few frames, coarse ladders, methods %s" % ",".join(QUICK_METHODS))
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--methods", type=words,
                    help="e.g. diffphd,diffphd:paper,diffpd,newton,newton:ppn")
    ap.add_argument("--pd-tols", type=floats, help="tolerance ladder of the PD methods "
                    "(solver.residual_tol for diffphd, solver.rel_tol for diffpd and "
                    "diffphd:paper)")
    ap.add_argument("--newton-tols", type=floats, help="newton_tol ladder")
    ap.add_argument("--oracle-tol", type=float, default=1e-10,
                    help="newton_tol of the oracle (<= 1e-10; Newton may stall at round-off "
                    "below that, which the report flags as not converged)")
    ap.add_argument("--oracle-set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra override for the oracle only (repeatable)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="extra override for every run, oracle included (repeatable)")
    ap.add_argument("--no-defaults", action="store_true", help="skip the default-settings rows")
    ap.add_argument("--levels", type=floats, default=LEVELS,
                    help="error levels of the speed-up table")
    ap.add_argument("--plant-mesh", help="DiffPD's plant.bin (default: "
                    "$DIFFPHD_ANCHOR_MESHES/plant.bin)")
    ap.add_argument("--out", default="out/bench_frontier")
    ap.add_argument("--bin", default="target/release/diffphd")
    ap.add_argument("--timeout", type=float, default=0, help="seconds per run (0: none)")
    ap.add_argument("--no-ladder", action="store_true",
                    help="run every method at its defaults only (no tolerance ladders)")
    ap.add_argument("--repeat", type=int, default=1,
                    help="run every ladder rung and default row N times and keep the fastest "
                    "forward and backward (noisy machines); the oracle runs once")
    ap.add_argument("--resume", action="store_true",
                    help="reuse run folders whose command already completed")
    ap.add_argument("--label", default="", help="label of the report header")
    ap.add_argument("--clock", choices=["wall", "cpu"], default="wall",
                    help="wall: the phases' wall seconds (idle machine); cpu: scaled by each "
                    "run's process CPU/wall ratio (an estimate for a loaded machine; "
                    "meaningful with --threads 1)")
    ap.add_argument("--analyze-only", action="store_true",
                    help="re-analyse the runs recorded in --out/frontier.json; no runs")
    ap.add_argument("--self-test", action="store_true")
    args = ap.parse_args()
    global CLOCK
    CLOCK = args.clock
    if args.self_test:
        self_test()
        return 0
    if args.analyze_only:
        meta = json.load(open(os.path.join(args.out, "frontier.json")))["meta"]
        print(report(meta, args.levels))
        return 0
    args.scenes = args.scenes or (QUICK_SCENES if args.quick else SCENES)
    args.methods = args.methods or (QUICK_METHODS if args.quick else FULL_METHODS)
    args.pd_tols = args.pd_tols or (QUICK_PD_TOLS if args.quick else FULL_PD_TOLS)
    args.newton_tols = args.newton_tols or (QUICK_NEWTON_TOLS if args.quick else FULL_NEWTON_TOLS)
    if args.oracle_tol > 1e-10:
        print("warning: --oracle-tol %g is looser than 1e-10" % args.oracle_tol, file=sys.stderr)
    if BASE not in args.methods:
        print("warning: %s is not among --methods: no speed-ups" % BASE, file=sys.stderr)
    missing = [scene_file(s)[0] for s in args.scenes if not os.path.isfile(scene_file(s)[0])]
    if missing:
        print("error: no such scene file: %s" % ", ".join(missing), file=sys.stderr)
        return 2
    if any(scene_file(s)[1] == "plant" for s in args.scenes):
        if not args.plant_mesh and os.environ.get("DIFFPHD_ANCHOR_MESHES"):
            args.plant_mesh = os.path.join(os.environ["DIFFPHD_ANCHOR_MESHES"], "plant.bin")
        if not args.plant_mesh or not os.path.isfile(args.plant_mesh):
            print("error: the plant scene needs DiffPD's plant.bin: pass --plant-mesh PATH or set "
                  "DIFFPHD_ANCHOR_MESHES (got %r)" % args.plant_mesh, file=sys.stderr)
            return 2
        args.plant_mesh = os.path.abspath(args.plant_mesh)
    if not os.access(args.bin, os.X_OK):
        print("error: %s is not an executable (cargo build --release first)" % args.bin,
              file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    meta = {"label": args.label or ("quick" if args.quick else "full"), "out": args.out,
            "command": " ".join(["scripts/bench_frontier.sh"] + sys.argv[1:]),
            "machine_start": machine_line(), "threads": args.threads,
            "pd_tols": args.pd_tols, "newton_tols": args.newton_tols,
            "oracle_tol": args.oracle_tol, "methods": args.methods, "repeat": args.repeat,
            "no_ladder": args.no_ladder,
            "scenes": []}
    log = lambda m: print(m, file=sys.stderr, flush=True)  # noqa: E731
    log("machine: " + meta["machine_start"])
    for s in args.scenes:
        sm = run_scene(args, s, log)
        sm["run_dirs"] = []
        for method in args.methods:
            _, rows = ladder(method, args)
            for label, _ in rows:
                sm["run_dirs"].append({"method": method, "setting": label, "dir": os.path.join(
                    sm["dir"], method.replace(":", "_"), label.replace("=", "_"))})
        meta["scenes"].append(sm)
        meta["machine_end"] = machine_line()
        report(meta, args.levels)  # keep frontier.json current after every scene
    print(report(meta, args.levels))
    log("wrote %s/frontier.{md,json,csv}" % args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
