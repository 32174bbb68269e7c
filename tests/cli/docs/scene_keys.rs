//! Every key the scene schema accepts is documented in docs/scene-format.md, and every key
//! the documentation lists is accepted (issue 18). The key list is read from the schema
//! itself: each table is probed with an unknown key, and `deny_unknown_fields` answers with
//! the keys it expects. The doc's "Key index" section must equal the generated list; on a
//! mismatch the test prints the section to paste.

use crate::common;

/// A scene that has every table (so each can be probed).
fn full() -> String {
    common::fixture("scenes/scene_keys/full", &[])
}

/// The keys the schema expects at `table` (a `--set` path; "" = top level), after the
/// optional `prep` overrides.
fn keys(table: &str, prep: &[&str]) -> Vec<String> {
    let probe = if let Some(t) = table.strip_prefix('=') {
        // an externally tagged enum (selectors): replace it by an unknown variant
        format!("{t}={{ __probe__ = 1 }}")
    } else if table.is_empty() {
        "__probe__=1".to_string()
    } else {
        format!("{table}.__probe__=1")
    };
    let mut sets: Vec<String> = prep.iter().map(|s| s.to_string()).collect();
    sets.push(probe);
    let err = diffphd::scene::load_str(&full(), std::path::Path::new("full.toml"), &sets)
        .err()
        .unwrap_or_else(|| panic!("{table}: the probe was accepted"))
        .to_string();
    let expected = err
        .split_once("expected")
        .unwrap_or_else(|| panic!("{table}: {err}"))
        .1;
    let expected = expected.split(" (after").next().unwrap();
    let mut out: Vec<String> = expected
        .split('`')
        .skip(1)
        .step_by(2)
        .map(|s| s.to_string())
        .collect();
    assert!(!out.is_empty(), "{table}: {err}");
    out.sort();
    out
}

/// (heading, probe path, preparing overrides) of every table of the schema. A path starting
/// with `=` is an externally tagged enum, probed with an unknown variant. Muscle fibre fields
/// are an untagged enum (serde names no keys for it) and are not probed; neither are the
/// unit variants `motion = { type = "fixed" }` and `profile = { type = "constant" }`, which
/// serde accepts with any extra key (a known gap, see docs/RELIABILITY.md).
fn tables() -> Vec<(String, &'static str, Vec<&'static str>)> {
    let sel = "=body.0.region.0.select";
    let rows: Vec<(&str, &str, Vec<&str>)> = vec![
        ("top level", "", vec![]),
        (HEADER, "simulation", vec![]),
        (HEADER, "body.0", vec![]),
        (HEADER, "body.0.mesh", vec![]),
        (HEADER, "body.0.transform", vec![]),
        (HEADER, "body.0.material", vec![]),
        (HEADER, "body.0.region.0", vec![]),
        ("element selectors (`select` of regions and muscles)", sel, vec![]),
        ("node selectors (`select` of dirichlet, forces, attachments, node_target)", "=body.0.dirichlet.0.select", vec![]),
        ("selector `box`", "body.0.region.0.select.box", vec![]),
        ("selector `half_space`", "body.0.region.0.select.half_space", vec!["body.0.region.0.select={ half_space = { point = [0, 0, 0], normal = [1, 0, 0] } }"]),
        ("selector `sphere`", "body.0.region.0.select.sphere", vec!["body.0.region.0.select={ sphere = { center = [0, 0, 0], radius = 1.0 } }"]),
        (HEADER, "body.0.damping", vec![]),
        (HEADER, "body.0.dirichlet.0", vec![]),
        ("motion `translate`", "body.0.dirichlet.0.motion", vec!["body.0.dirichlet.0.motion={ type = \"translate\", velocity = [0, 0, 0] }"]),
        ("motion `rotate`", "body.0.dirichlet.0.motion", vec![]),
        (HEADER, "body.0.initial", vec![]),
        ("initial `twist`", "body.0.initial.twist", vec![]),
        (HEADER, "body.0.force.0", vec![]),
        ("force `twist`", "body.0.force.1.twist", vec![]),
        ("profile `ramp`", "body.0.force.0.profile", vec![]),
        ("profile `window`", "body.0.force.0.profile", vec!["body.0.force.0.profile={ type = \"window\", start = 0.0, end = 1.0 }"]),
        ("profile `table`", "body.0.force.0.profile", vec!["body.0.force.0.profile={ type = \"table\", times = [0.0], values = [1.0] }"]),
        (HEADER, "body.0.muscle.0", vec![]),
        (HEADER, "body.0.attachment.0", vec![]),
        (HEADER, "solver", vec![]),
        (HEADER, "output", vec![]),
        (HEADER, "backward", vec![]),
        (HEADER, "loss", vec![]),
        (HEADER, "loss.reference", vec![]),
        ("loss term `tracking`", "loss.term.0", vec!["loss.term.0={ type = \"tracking\" }"]),
        ("loss term `center_of_mass`", "loss.term.0", vec!["loss.term.0={ type = \"center_of_mass\", target = [0, 0, 0] }"]),
        ("loss term `center_of_mass_direction`", "loss.term.0", vec!["loss.term.0={ type = \"center_of_mass_direction\", direction = [1, 0, 0] }"]),
        ("loss term `node_target`", "loss.term.0", vec!["loss.term.0={ type = \"node_target\", select = { all = true }, target = [0, 0, 0] }"]),
        ("loss term `random_linear`", "loss.term.0", vec![]),
        ("loss term `chamfer`", "loss.term.0", vec!["loss.term.0={ type = \"chamfer\" }"]),
        ("chamfer `captures` entry", "loss.term.0.captures.0", vec!["loss.term.0={ type = \"chamfer\", captures = [{ frame = 1, file = \"a.ply\" }] }"]),
        ("loss term `contact_force`", "loss.term.0", vec!["loss.term.0={ type = \"contact_force\", file = \"f.csv\" }"]),
        (HEADER, "parameter.0", vec![]),
        ("parameter `regularize`", "parameter.0.regularize", vec![]),
        (HEADER, "obstacle.0", vec![]),
        (HEADER, "contact", vec![]),
        (HEADER, "contact.penalty", vec![]),
        (HEADER, "optimize", vec![]),
        (HEADER, "mpm", vec![]),
        (HEADER, "mpm_body.0", vec!["mpm_body=[{}]"]),
        (HEADER, "rigid_body.0", vec!["rigid_body=[{}]"]),
    ];
    rows.into_iter()
        .map(|(heading, path, prep)| {
            let heading = if heading == HEADER {
                header_of(path)
            } else {
                heading.to_string()
            };
            (heading, path, prep)
        })
        .collect()
}

/// Marks a row of [`tables`] whose heading is its table's TOML header ([`header_of`]).
const HEADER: &str = "";

/// The TOML header of the table at a probe path: `simulation` → `[simulation]`, `body.0` →
/// `[[body]]` (an array entry), `body.0.mesh` → `[body.mesh]`.
fn header_of(path: &str) -> String {
    let name: Vec<&str> = path
        .split('.')
        .filter(|s| s.parse::<usize>().is_err())
        .collect();
    let name = name.join(".");
    if path
        .rsplit('.')
        .next()
        .is_some_and(|s| s.parse::<usize>().is_ok())
    {
        format!("[[{name}]]")
    } else {
        format!("[{name}]")
    }
}

fn index() -> String {
    let mut s = String::new();
    for (heading, path, prep) in tables() {
        let k: Vec<String> = keys(path, &prep).iter().map(|k| format!("`{k}`")).collect();
        let heading = if heading.starts_with('[') {
            format!("`{heading}`")
        } else {
            heading
        };
        s.push_str(&format!("- {heading}: {}\n", k.join(", ")));
    }
    s
}

#[test]
fn scene_format_key_index_matches_the_schema() {
    let doc = std::fs::read_to_string(common::repo().join("docs/scene-format.md")).unwrap();
    let (start, end) = ("<!-- key-index:start -->\n", "<!-- key-index:end -->");
    let a = doc
        .find(start)
        .expect("docs/scene-format.md has a key index")
        + start.len();
    let b = doc[a..].find(end).expect("key index end") + a;
    let want = index();
    assert!(
        doc[a..b] == want,
        "docs/scene-format.md's key index differs from the schema; it should read:\n{want}"
    );
    // Every key of the index is also documented in prose/tables somewhere in the docs
    // (scene-format.md, or contact.md / optimize.md for the tables they own).
    let mut all = doc[..a].to_string() + &doc[b..];
    for f in ["docs/contact.md", "docs/optimize.md"] {
        all.push_str(&std::fs::read_to_string(common::repo().join(f)).unwrap());
    }
    let mut missing = Vec::new();
    for (heading, path, prep) in tables() {
        for k in keys(path, &prep) {
            // a key, an assignment, or a table header (`[simulation]`, `[body.mesh]`, `[[loss.term]]`)
            let forms = [
                format!("`{k}`"),
                format!("`{k} "),
                format!("{k} ="),
                format!("[{k}]"),
                format!(".{k}]"),
            ];
            if !forms.iter().any(|f| all.contains(f.as_str())) {
                missing.push(format!("{heading}: {k}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "keys accepted but not documented: {missing:?}"
    );
}

/// The documented keys of the tables in scene-format.md (first column, `| \`key\` |`) are all
/// accepted by some table of the schema.
#[test]
fn every_documented_key_is_accepted() {
    let doc = std::fs::read_to_string(common::repo().join("docs/scene-format.md")).unwrap();
    let mut accepted = std::collections::BTreeSet::new();
    for (_, path, prep) in tables() {
        accepted.extend(keys(path, &prep));
    }
    let mut unknown = Vec::new();
    let mut in_key_table = false;
    for line in doc.lines() {
        if !line.starts_with('|') {
            in_key_table = false;
            continue;
        }
        if line.starts_with("| key |") {
            in_key_table = true;
            continue;
        }
        let Some(cell) = line.strip_prefix("| `").filter(|_| in_key_table) else {
            continue;
        };
        let key = cell.split('`').next().unwrap();
        // sub-table rows (`[body.mesh]`) are tables, `twist.axis` is key `axis` of `twist`
        if key.starts_with('[') {
            continue;
        }
        let key = key.rsplit('.').next().unwrap();
        if !accepted.contains(key) {
            unknown.push(key.to_string());
        }
    }
    assert!(
        unknown.is_empty(),
        "documented but not accepted: {unknown:?}"
    );
}
