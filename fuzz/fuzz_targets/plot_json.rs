//! A JSON log (`optimize.json` or a simulation's `log.json`) → SVG, as `diffphd plot` does it.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) {
        let _ = diffphd_cli::plot::render_log(&v, &[], diffphd_cli::plot::Format::Svg);
    }
});
