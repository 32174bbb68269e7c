//! The one font of the plots: DejaVu Sans (Bitstream Vera licence with DejaVu's public-domain
//! changes; text in `cli/assets/DejaVuSans.LICENSE`), compiled into the binary so that
//! plotting needs no fontconfig or system font on a fresh machine. Registered with plotters as
//! the family `sans-serif` (ab_glyph rasterizes it for PNG; SVG names the family and the
//! viewer draws the text).

use plotters::style::{register_font, FontStyle};
use std::sync::Once;

static DEJAVU_SANS: &[u8] = include_bytes!("../../assets/DejaVuSans.ttf");

/// Register the font once per process (later calls do nothing).
pub fn register() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // The bytes are a valid TrueType font (checked by the test below), so this cannot
        // fail; if it ever did, plotting would report the missing font as its error.
        let _ = register_font("sans-serif", FontStyle::Normal, DEJAVU_SANS);
    });
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_embedded_font_parses() {
        assert!(
            super::register_font("sans-serif", super::FontStyle::Normal, super::DEJAVU_SANS)
                .is_ok()
        );
    }
}
