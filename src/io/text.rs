//! Decimal text for numbers in the text formats this crate writes (mesh files, `.vtu`
//! frames): the shortest representation that parses back to the same `f64`, so every
//! write/read round trip is exact.

use std::fmt::Write as _;

/// Appends `x` in the shortest form that parses back to the same `f64` (exponent notation
/// outside `[1e-4, 1e15)`).
pub fn push_real(out: &mut String, x: f64) {
    let a = x.abs();
    // Writing to a String cannot fail.
    let _ = if x == 0.0 || (1e-4..1e15).contains(&a) {
        write!(out, "{x}")
    } else {
        write!(out, "{x:e}")
    };
}

/// Appends `x y z`.
pub fn push_point(out: &mut String, p: &[f64; 3]) {
    for (d, &c) in p.iter().enumerate() {
        if d > 0 {
            out.push(' ');
        }
        push_real(out, c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reals_round_trip_and_switch_to_exponents_outside_the_plain_range() {
        for x in [
            0.0,
            -0.0,
            1e-4,
            0.1,
            1.0 / 3.0,
            123456.789,
            1e15,
            5e-324,
            -f64::MAX,
        ] {
            let mut s = String::new();
            push_real(&mut s, x);
            assert_eq!(
                s.parse::<f64>().expect("parses").to_bits(),
                x.to_bits(),
                "{s}"
            );
        }
        let mut s = String::new();
        push_point(&mut s, &[1.5, 1e20, 2e-5]);
        assert_eq!(s, "1.5 1e20 2e-5");
    }
}
