//! Documented command-line defaults match the code (issue 18, "promises that stay true"):
//! `docs/cli.md` is the reference generated from the clap definitions, and every default a
//! hand-written document states for a flag (`| \`--rtol R\` | \`1e-4\` |` table rows and
//! "`--flag`, default V" / "`--flag` (default V)" prose) is the one the program has.

use crate::common;

#[test]
fn committed_cli_reference_equals_the_generated_one() {
    let path = common::repo().join("docs/cli.md");
    let committed = std::fs::read_to_string(&path).expect("docs/cli.md");
    assert!(
        committed == diffphd_cli::command::markdown(),
        "docs/cli.md is stale: regenerate it with `diffphd schema --cli > docs/cli.md`"
    );
}

/// The code's defaults of flag `--long`, over every command that has it.
fn code_defaults(long: &str) -> Vec<String> {
    diffphd_cli::command::defaults()
        .into_iter()
        .filter(|(_, l, _)| l == long)
        .map(|(_, _, d)| d)
        .collect()
}

fn same_value(doc: &str, code: &str) -> bool {
    match (doc.parse::<f64>(), code.parse::<f64>()) {
        (Ok(a), Ok(b)) => a == b,
        _ => doc == code,
    }
}

/// (flag, documented default) pairs stated by one markdown line.
fn documented(line: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    let cells: Vec<&str> = line.split('|').map(str::trim).collect();
    // Table row: | `--flag VALUE` | `default` | meaning |
    if cells.len() >= 4 && cells[1].starts_with("`--") {
        let flag = cells[1]
            .trim_matches('`')
            .split([' ', '`', ','])
            .next()
            .unwrap_or("");
        let d = cells[2];
        if d.len() > 2 && d.starts_with('`') && d.ends_with('`') && !d[1..d.len() - 1].contains('`')
        {
            found.push((flag.to_string(), d.trim_matches('`').to_string()));
        }
    }
    // Prose: `--flag`, default V / `--flag` (default V) / `--flag` (default: V)
    for (i, _) in line.match_indices("`--") {
        let rest = &line[i + 1..];
        let Some(end) = rest.find('`') else { continue };
        let flag = rest[..end].split(' ').next().unwrap_or("");
        let after = rest[end + 1..].trim_start_matches([',', ' ', '(']);
        if let Some(v) = after.strip_prefix("default") {
            let v = v.trim_start_matches([':', ' ']);
            let v: String = v
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "._-+".contains(*c))
                .collect();
            if !v.is_empty() {
                found.push((flag.to_string(), v.trim_end_matches('.').to_string()));
            }
        }
    }
    found
}

#[test]
fn documented_cli_defaults_match_the_code() {
    let mut files = vec![common::repo().join("README.md")];
    for e in std::fs::read_dir(common::repo().join("docs")).unwrap() {
        let p = e.unwrap().path();
        // docs/cli.md is generated from the code (checked above), not a statement about it.
        if p.extension().and_then(|x| x.to_str()) == Some("md") && !p.ends_with("cli.md") {
            files.push(p);
        }
    }
    let (mut checked, mut wrong) = (0, Vec::new());
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap();
        for (n, line) in text.lines().enumerate() {
            for (flag, doc) in documented(line) {
                let code = code_defaults(flag.trim_start_matches("--"));
                if code.is_empty() {
                    continue; // no clap default: the document describes a scene key or a rule
                }
                checked += 1;
                if !code.iter().any(|c| same_value(&doc, c)) {
                    wrong.push(format!(
                        "{}:{}: {flag} documented default {doc}, code {code:?}",
                        f.file_name().unwrap().to_string_lossy(),
                        n + 1
                    ));
                }
            }
        }
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
    assert!(
        checked >= 4,
        "only {checked} documented defaults found: the scan is broken"
    );
}

#[test]
fn the_scan_reads_tables_and_prose() {
    assert_eq!(
        documented("| `--rtol R` | `1e-4` | relative tolerance |"),
        vec![("--rtol".to_string(), "1e-4".to_string())]
    );
    assert_eq!(
        documented("in chunks (`--max-array-size`, default 1000) is submitted"),
        vec![("--max-array-size".to_string(), "1000".to_string())]
    );
    assert!(same_value("0", "0.0") && !same_value("4", "5"));
}
