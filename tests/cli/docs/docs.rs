//! Docs that stay true (issue 39 item 5): every TOML block of README.md and docs/*.md is
//! validated by the binary (a whole scene by `simulate --dry-run`, a fragment appended to
//! tests/fixtures/docs/base_scene.toml, a sweep file by `sweep plan`), every documented
//! default of docs/scene-format.md's key tables equals the resolved scene's, and every
//! documented `diffphd` command line runs with `--dry-run` (scene commands) or into a
//! scratch folder (`sweep plan`). What cannot run here is skipped with its reason; the skips
//! are counted and capped, so a new untested block or command fails the test.

use crate::common;
use std::path::{Path, PathBuf};

/// Skipped TOML blocks and command lines allowed (each skip prints its reason).
const MAX_SKIPPED_BLOCKS: usize = 2;
const MAX_SKIPPED_COMMANDS: usize = 22;
/// The key tables must yield at least this many compared defaults.
const MIN_DEFAULTS_COMPARED: usize = 40;

/// The documentation files: README.md and docs/*.md (sorted).
fn doc_files() -> Vec<PathBuf> {
    let root = common::repo();
    let mut files: Vec<PathBuf> = std::fs::read_dir(root.join("docs"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files.insert(0, root.join("README.md"));
    files
}

/// The fenced blocks of `text` whose info string is one of `langs`: (first line, body).
fn blocks(text: &str, langs: &[&str]) -> Vec<(usize, String)> {
    let mut out = vec![];
    // Inside a fence: (selected, first line, body).
    let mut cur: Option<(bool, usize, String)> = None;
    for (i, line) in text.lines().enumerate() {
        let t = line.trim_start();
        match cur.as_mut() {
            Some(_) if t.starts_with("```") => {
                let (selected, first, body) = cur.take().unwrap();
                if selected {
                    out.push((first, body));
                }
            }
            Some((_, _, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None => {
                if let Some(info) = t.strip_prefix("```") {
                    cur = Some((langs.contains(&info.trim()), i + 1, String::new()));
                }
            }
        }
    }
    out
}

/// `diffphd <args>` in `dir`: exit code, stdout and stderr together.
fn diffphd(dir: &Path, args: &[&str]) -> (i32, String) {
    let (code, out, err) = common::run_in(dir, args);
    (code, out + &err)
}

fn base_scene() -> String {
    std::fs::read_to_string(common::repo().join("tests/fixtures/docs/base_scene.toml")).unwrap()
}

/// Check one TOML block; `Err(reason)` when it is skipped.
fn check_toml_block(where_: &str, body: &str, tmp: &Path) -> Result<(), String> {
    let repo = common::repo();
    if body.contains("[[axis]]") || body.contains("[sample]") {
        if !body.contains("scene = ") {
            return Err("a fragment of a sweep file (no `scene`)".into());
        }
        // A sweep file: its scene path is relative to it; put it beside a copy of the scene.
        let scene: toml::Table = toml::from_str(body).unwrap_or_else(|e| panic!("{where_}: {e}"));
        let rel = scene["scene"].as_str().unwrap();
        let name = Path::new(rel).file_name().unwrap();
        let d = tmp.join("sweep");
        std::fs::create_dir_all(d.join("sweeps")).unwrap();
        std::fs::copy(repo.join("scenes").join(name), d.join(name)).unwrap();
        std::fs::write(d.join("sweeps/doc.sweep.toml"), body).unwrap();
        let (code, out) = diffphd(
            &d,
            &["sweep", "plan", "sweeps/doc.sweep.toml", "--out", "plan"],
        );
        assert_eq!(
            code, 0,
            "{where_}: the documented sweep file is refused:\n{out}"
        );
        return Ok(());
    }
    if body.contains("file = \"") {
        return Err("names data files the docs do not ship".into());
    }
    let text = if body.contains("schema_version") {
        body.to_string()
    } else {
        format!("{}\n{body}", base_scene())
    };
    std::fs::write(tmp.join("block.toml"), &text).unwrap();
    let (code, out) = diffphd(tmp, &["simulate", "block.toml", "--dry-run"]);
    assert_eq!(
        code, 0,
        "{where_}: the documented TOML is refused:\n{out}\n--- block:\n{body}"
    );
    Ok(())
}

#[test]
fn every_toml_block_of_the_docs_is_a_valid_scene_or_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let (mut checked, mut skipped) = (0, vec![]);
    for f in doc_files() {
        let text = std::fs::read_to_string(&f).unwrap();
        for (line, body) in blocks(&text, &["toml"]) {
            let where_ = format!("{}:{line}", f.display());
            match check_toml_block(&where_, &body, tmp.path()) {
                Ok(()) => checked += 1,
                Err(why) => {
                    eprintln!("SKIPPED {where_}: {why}");
                    skipped.push(where_);
                }
            }
        }
    }
    eprintln!("{checked} TOML blocks validated, {} skipped", skipped.len());
    assert!(checked >= 9, "only {checked} TOML blocks validated");
    assert!(
        skipped.len() <= MAX_SKIPPED_BLOCKS,
        "{} TOML blocks skipped (cap {MAX_SKIPPED_BLOCKS}): {skipped:?}",
        skipped.len()
    );
}

/// A documented default (a TOML literal in backticks) as a value; `None` for prose.
fn literal(cell: &str) -> Option<toml::Value> {
    let c = cell.trim();
    let lit = c.strip_prefix('`')?.strip_suffix('`')?;
    if lit.contains('`') {
        return None;
    }
    let t: toml::Table = toml::from_str(&format!("v = {lit}")).ok()?;
    t.get("v").cloned()
}

fn same(a: &toml::Value, b: &toml::Value) -> bool {
    use toml::Value as V;
    let num = |v: &V| match v {
        V::Integer(i) => Some(*i as f64),
        V::Float(f) => Some(*f),
        _ => None,
    };
    match (a, b) {
        (V::Array(x), V::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q))
        }
        _ => match (num(a), num(b)) {
            (Some(p), Some(q)) => (p - q).abs() <= 1e-12 * p.abs().max(q.abs()),
            _ => a == b,
        },
    }
}

#[test]
fn every_documented_default_is_the_resolved_one() {
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("base.toml"), base_scene()).unwrap();
    let (code, out) = diffphd(tmp.path(), &["simulate", "base.toml", "--dry-run"]);
    assert_eq!(code, 0, "{out}");
    let resolved: toml::Table = toml::from_str(&out).unwrap_or_else(|e| panic!("{e}\n{out}"));
    let doc = std::fs::read_to_string(common::repo().join("docs/scene-format.md")).unwrap();
    // The tables under these headings, and where their keys are in the resolved scene.
    let sections: [(&str, &[&str]); 7] = [
        ("## `[simulation]`", &["simulation"]),
        ("### `[body.mesh]`", &["body", "mesh"]),
        ("### `[body.material]`", &["body", "material"]),
        ("### `[body.damping]`", &["body", "damping"]),
        ("## `[solver]`", &["solver"]),
        ("## `[output]`", &["output"]),
        ("## `[backward]`", &["backward"]),
    ];
    let mut at: Option<&toml::Value> = None;
    let mut default_col = None;
    let (mut compared, mut drift) = (0, vec![]);
    for line in doc.lines() {
        if line.starts_with("## ") || line.starts_with("### ") {
            at = sections
                .iter()
                .find(|(h, _)| line.starts_with(h))
                .map(|(_, path)| {
                    let mut v = resolved
                        .get(path[0])
                        .unwrap_or_else(|| panic!("{:?}", path));
                    for k in &path[1..] {
                        if let toml::Value::Array(a) = v {
                            v = &a[0];
                        }
                        v = v.get(k).unwrap_or_else(|| panic!("{path:?}"));
                    }
                    v
                });
            default_col = None;
            continue;
        }
        let Some(table) = at else { continue };
        if !line.starts_with('|') {
            continue;
        }
        let cells: Vec<&str> = line.split('|').map(str::trim).collect();
        if cells.get(1) == Some(&"key") {
            default_col = cells.iter().position(|c| *c == "default");
            continue;
        }
        let (Some(col), Some(key)) = (default_col, cells.get(1)) else {
            continue;
        };
        let key = key.trim_matches('`');
        let (Some(doc_value), Some(actual)) =
            (cells.get(col).and_then(|c| literal(c)), table.get(key))
        else {
            continue;
        };
        compared += 1;
        if !same(&doc_value, actual) {
            drift.push(format!("{key}: documented {doc_value}, resolved {actual}"));
        }
    }
    eprintln!("{compared} documented defaults compared");
    assert!(
        drift.is_empty(),
        "docs/scene-format.md defaults drifted: {drift:#?}"
    );
    assert!(
        compared >= MIN_DEFAULTS_COMPARED,
        "only {compared} defaults compared (the tables' layout changed?)"
    );
}

/// The documented command lines (`sh` blocks, continuation lines joined, comments cut).
fn commands() -> Vec<(String, String)> {
    let mut out = vec![];
    // docs/tutorial.md's commands run for real, in order, in tests/cli/docs/tutorial.rs.
    for f in doc_files()
        .into_iter()
        .filter(|f| !f.ends_with("docs/tutorial.md"))
    {
        let text = std::fs::read_to_string(&f).unwrap();
        for (line, body) in blocks(&text, &["sh", "bash", "console"]) {
            let joined = body.replace("\\\n", " ");
            for l in joined.lines() {
                let l = l.split(" #").next().unwrap().trim();
                if !l.is_empty() && !l.starts_with('#') {
                    out.push((format!("{}:{line}", f.display()), l.to_string()));
                }
            }
        }
    }
    out
}

/// Shell words of a simple command line (single and double quotes; no expansions).
fn words(l: &str) -> Option<Vec<String>> {
    if l.contains('$') || l.contains('|') || l.contains(';') || l.contains('<') {
        return None;
    }
    let (mut out, mut cur, mut quote, mut any) = (vec![], String::new(), None, false);
    for c in l.chars() {
        match (quote, c) {
            (None, '\'' | '"') => (quote, any) = (Some(c), true),
            (Some(q), c) if c == q => quote = None,
            (None, ' ') => {
                if any {
                    out.push(std::mem::take(&mut cur));
                    any = false;
                }
            }
            _ => {
                cur.push(c);
                any = true;
            }
        }
    }
    if any {
        out.push(cur);
    }
    Some(out)
}

/// The TOML block that follows the sentence "`NAME` is ..." in the docs: a scene the docs
/// define in the text (e.g. docs/gradcheck.md's `cantilever_check.toml`).
fn documented_scene(name: &str) -> Option<String> {
    let key = format!("`{name}` is a");
    doc_files().into_iter().find_map(|f| {
        let text = std::fs::read_to_string(&f).ok()?;
        let at = text.find(&key)?;
        blocks(&text[at..], &["toml"])
            .into_iter()
            .next()
            .map(|b| b.1)
    })
}

/// Run one documented command line with CI overrides; `Err(reason)` when skipped.
fn check_command(where_: &str, line: &str, tmp: &Path, beam: &Path) -> Result<(), String> {
    let Some(w) = words(line) else {
        return Err("shell expansion or pipeline".into());
    };
    if w.first().map(String::as_str) != Some("diffphd") {
        return Err(format!("not a diffphd command (`{}`)", w[0]));
    }
    let cmd = w.get(1).map(String::as_str).unwrap_or("");
    let repo = common::repo();
    let mut args: Vec<String> = w[1..].to_vec();
    match cmd {
        "simulate" | "grad" | "gradcheck" | "optimize" => {
            let scene = &args[1];
            let path = if scene == "beam.toml" {
                beam.to_path_buf()
            } else if repo.join(scene).is_file() {
                repo.join(scene)
            } else if let Some(text) = documented_scene(scene) {
                let p = tmp.join(scene);
                std::fs::write(&p, text).unwrap();
                p
            } else {
                return Err(format!("scene {scene} is not shipped"));
            };
            args[1] = path.display().to_string();
            // --out into the scratch folder; --dry-run writes nothing and runs no step.
            if let Some(i) = args.iter().position(|a| a == "--out") {
                args[i + 1] = tmp.join("out").display().to_string();
            }
            args.push("--dry-run".into());
        }
        "sweep" if args.get(1).map(String::as_str) == Some("plan") => {
            if !args.get(2).is_some_and(|f| repo.join(f).is_file()) {
                return Err("the sweep file is the reader's own, not shipped".into());
            }
            if let Some(i) = args.iter().position(|a| a == "--out") {
                args.drain(i..i + 2);
            }
            args.push("--out".into());
            args.push(tmp.join("plan").display().to_string());
            args.push("--overwrite".into());
        }
        "plot" => {
            // The documented log is the reader's own run: plot the fixture log of its kind
            // (tests/fixtures/logs/), into the scratch folder.
            let kind = if args[1].ends_with("optimize.json") {
                "optimize.json"
            } else {
                "log.json"
            };
            args[1] = repo
                .join("tests/fixtures/logs")
                .join(kind)
                .display()
                .to_string();
            if let Some(i) = args.iter().position(|a| a == "-o" || a == "--output") {
                let name = Path::new(&args[i + 1]).file_name().unwrap().to_owned();
                args[i + 1] = tmp.join(name).display().to_string();
            } else {
                return Err("no -o: would write into the repository".into());
            }
        }
        "sweep" => return Err("sweep run/collect/emit/task run whole sweeps".into()),
        _ => return Err(format!("`diffphd {cmd}` is not run by this test")),
    }
    let a: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, out) = diffphd(&repo, &a);
    assert_eq!(code, 0, "{where_}: `{line}` (run as {a:?}) failed:\n{out}");
    Ok(())
}

#[test]
fn every_documented_scene_command_runs_with_dry_run() {
    let tmp = tempfile::tempdir().unwrap();
    // The worked example's `beam.toml` is the TOML block just above its commands.
    let doc = std::fs::read_to_string(common::repo().join("docs/scene-format.md")).unwrap();
    let beam_text = doc
        .split("## Worked example")
        .nth(1)
        .map(|s| blocks(s, &["toml"]))
        .and_then(|b| b.into_iter().next())
        .expect("the worked example's scene")
        .1;
    let beam = tmp.path().join("beam.toml");
    std::fs::write(&beam, beam_text).unwrap();
    let (mut ran, mut skipped) = (0, vec![]);
    for (where_, line) in commands() {
        match check_command(&where_, &line, tmp.path(), &beam) {
            Ok(()) => ran += 1,
            Err(why) => {
                eprintln!("SKIPPED {where_}: `{line}`: {why}");
                skipped.push(line);
            }
        }
    }
    eprintln!("{ran} documented commands ran, {} skipped", skipped.len());
    assert!(ran >= 10, "only {ran} documented commands ran");
    assert!(
        skipped.len() <= MAX_SKIPPED_COMMANDS,
        "{} documented commands skipped (cap {MAX_SKIPPED_COMMANDS})",
        skipped.len()
    );
}
