//! `--set key.path=value` overrides applied to the parsed TOML table before typing.
//!
//! Path segments are table keys; an array of tables is indexed by a number segment
//! (`body.0.material.youngs_modulus=2e6`) or `key[0]` (`body[0].material...`). The value is
//! parsed as a TOML value (`1e6`, `true`, `"text"`, `[1, 2, 3]`, `{ a = 1 }`); anything that
//! does not parse is taken as a string. Intermediate tables are created as needed.

use super::SceneError;
use toml::{Table, Value};

/// Apply one `path=value` expression.
pub fn apply(root: &mut Table, expr: &str) -> Result<(), SceneError> {
    let err = |msg: &str| SceneError::Override {
        expr: expr.to_string(),
        msg: msg.to_string(),
    };
    let (path, raw) = expr
        .split_once('=')
        .ok_or_else(|| err("expected KEY.PATH=VALUE"))?;
    let path = path.trim();
    if path.is_empty() {
        return Err(err("empty key path"));
    }
    let value = parse_value(raw.trim());
    let mut segs: Vec<String> = Vec::new();
    for part in path.split('.') {
        // split `name[3]` into `name`, `3`
        if let Some((name, rest)) = part.split_once('[') {
            let idx = rest
                .strip_suffix(']')
                .ok_or_else(|| err("unbalanced [ ] in key path"))?;
            if !name.is_empty() {
                segs.push(name.to_string());
            }
            segs.push(idx.to_string());
        } else {
            segs.push(part.to_string());
        }
    }
    let mut cur: &mut Value = &mut Value::Table(std::mem::take(root));
    // Work on an owned Value and put it back at the end.
    let result = set_path(&mut cur, &segs, value, &err);
    if let Value::Table(t) = std::mem::replace(cur, Value::Boolean(false)) {
        *root = t;
    }
    result
}

fn set_path(
    cur: &mut &mut Value,
    segs: &[String],
    value: Value,
    err: &dyn Fn(&str) -> SceneError,
) -> Result<(), SceneError> {
    let mut node: &mut Value = cur;
    for (k, seg) in segs.iter().enumerate() {
        let last = k + 1 == segs.len();
        match node {
            Value::Table(t) => {
                if last {
                    t.insert(seg.clone(), value);
                    return Ok(());
                }
                let next_is_index = segs[k + 1].parse::<usize>().is_ok();
                node = t.entry(seg.clone()).or_insert_with(|| {
                    if next_is_index {
                        Value::Array(vec![])
                    } else {
                        Value::Table(Table::new())
                    }
                });
            }
            Value::Array(a) => {
                let i: usize = seg
                    .parse()
                    .map_err(|_| err(&format!("`{seg}` must be an array index here")))?;
                if i >= a.len() {
                    return Err(err(&format!(
                        "index {i} out of range (array has {} entries)",
                        a.len()
                    )));
                }
                if last {
                    a[i] = value;
                    return Ok(());
                }
                node = &mut a[i];
            }
            _ => {
                return Err(err(&format!(
                    "`{seg}`: the key before it is not a table or array"
                )))
            }
        }
    }
    Ok(())
}

fn parse_value(raw: &str) -> Value {
    let doc = format!("v = {raw}");
    match toml::from_str::<Table>(&doc) {
        Ok(mut t) => t
            .remove("v")
            .unwrap_or_else(|| Value::String(raw.to_string())),
        Err(_) => Value::String(raw.to_string()),
    }
}

/// Test fixture: `tests/fixtures/<name>.toml` with `sets` applied by [`apply`], as TOML text
/// (the unit tests' scenes are files, as the integration tests' are). Without sets the
/// file's text as it is.
#[cfg(test)]
pub(crate) fn fixture(name: &str, sets: &[&str]) -> String {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(format!("{name}.toml"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if sets.is_empty() {
        return text;
    }
    let mut table: Table =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for s in sets {
        apply(&mut table, s).unwrap_or_else(|e| panic!("{}: {s}: {e}", path.display()));
    }
    toml::to_string(&table).expect("a TOML table serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_nested_keys_and_array_entries() {
        let mut t: Table =
            toml::from_str("a = { b = 1 }\nbody = [{ name = \"x\" }, { name = \"y\" }]").unwrap();
        apply(&mut t, "a.b=2.5").unwrap();
        apply(&mut t, "body.1.name=z").unwrap();
        apply(&mut t, "body[0].material.e=[1, 2]").unwrap();
        apply(&mut t, "new.key=true").unwrap();
        assert_eq!(t["a"]["b"].as_float(), Some(2.5));
        assert_eq!(t["body"][1]["name"].as_str(), Some("z"));
        assert_eq!(t["body"][0]["material"]["e"].as_array().unwrap().len(), 2);
        assert_eq!(t["new"]["key"].as_bool(), Some(true));
        assert!(apply(&mut t, "body.7.name=q").is_err());
        assert!(apply(&mut t, "novalue").is_err());
        assert!(apply(&mut t, "a.b.c=1").is_err());
    }
}
