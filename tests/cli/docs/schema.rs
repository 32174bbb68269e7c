//! The published JSON Schema of the scene format (issue 17 item 6): the committed
//! `docs/scene.schema.json` equals the one generated from the serde types, and the values it
//! lists for hand-written parts are the ones the scene loader accepts.

use crate::common;

fn base() -> String {
    common::fixture("scenes/schema/base", &[])
}

#[test]
fn committed_schema_equals_the_generated_one() {
    let path = common::repo().join("docs/scene.schema.json");
    let committed = std::fs::read_to_string(&path).expect("docs/scene.schema.json");
    let generated = diffphd::scene::json_schema();
    assert!(
        committed == generated,
        "docs/scene.schema.json is stale: regenerate it with `diffphd schema > docs/scene.schema.json`"
    );
    let v: serde_json::Value = serde_json::from_str(&generated).unwrap();
    assert_eq!(v["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(
        v["additionalProperties"], false,
        "unknown top-level keys refused"
    );
    // Every top-level key of every shipped scene is a property of the schema.
    let props = v["properties"].as_object().unwrap();
    for e in std::fs::read_dir(common::repo().join("scenes")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) != Some("toml") {
            continue;
        }
        let t: toml::Table = toml::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        for k in t.keys() {
            assert!(
                props.contains_key(k),
                "{}: `{k}` not in the schema",
                p.display()
            );
        }
    }
}

#[test]
fn hand_written_enum_schemas_list_values_the_loader_accepts() {
    let schema: serde_json::Value = serde_json::from_str(&diffphd::scene::json_schema()).unwrap();
    let text = schema.to_string();
    let cases = [
        (
            "backward.filter",
            &diffphd::scene::HESSIAN_FILTER_VALUES[..],
        ),
        (
            "backward.method",
            &diffphd::scene::ADJOINT_METHOD_VALUES[..],
        ),
        (
            "body.0.material.model",
            &["corotated", "neohookean", "neo_hookean", "neo-hookean"][..],
        ),
    ];
    for (key, values) in cases {
        for v in values {
            assert!(
                text.contains(&format!("\"{v}\"")),
                "{v} missing from the schema"
            );
            let set = format!("{key}=\"{v}\"");
            let r = diffphd::scene::load_str(
                &base(),
                std::path::Path::new("s.toml"),
                std::slice::from_ref(&set),
            );
            // Range/combination rules may refuse a value (e.g. pcg with contact), never the type.
            if let Err(e) = &r {
                assert!(
                    matches!(e, diffphd::scene::SceneError::Invalid { .. }),
                    "{set}: {e}"
                );
            }
        }
        let bad = format!("{key}=\"no_such_value\"");
        assert!(diffphd::scene::load_str(&base(), std::path::Path::new("s.toml"), &[bad]).is_err());
    }
}
