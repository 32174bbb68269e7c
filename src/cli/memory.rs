//! Memory guards (issue 18): estimate what a run will hold before allocating it and refuse
//! (exit 2) with the estimate when it exceeds the memory available or `--max-memory`.
//!
//! Estimated: the rollout tape of `grad`, `gradcheck` and `optimize` — `48·n` bytes per kept
//! state (positions and velocities of `n` nodes), `⌊frames/K⌋ + 1` kept states plus one
//! recomputed segment of `K` states with `backward.checkpoint_every = K > 1`. The factor and
//! the mesh are not estimated here (the mesh readers and generators guard their own sizes).

use super::Failure;

/// Parse a byte count: `123`, `1e9`, `512K`, `64M`, `8G`, `1T` (binary multiples; `KiB`,
/// `MB`, … are read the same).
pub fn parse_bytes(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let digits_end = t
        .find(|c: char| c.is_ascii_alphabetic() && c != 'e' && c != 'E')
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(digits_end);
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("{s:?}: expected a byte count like 8G, 512M or 1e9"))?;
    let mult = match unit
        .trim()
        .to_ascii_uppercase()
        .trim_end_matches("IB")
        .trim_end_matches('B')
    {
        "" => 1u64,
        "K" => 1 << 10,
        "M" => 1 << 20,
        "G" => 1 << 30,
        "T" => 1 << 40,
        _ => return Err(format!("{s:?}: unknown unit (use K, M, G or T)")),
    };
    let bytes = v * mult as f64;
    if !(bytes.is_finite() && bytes >= 1.0 && bytes < u64::MAX as f64) {
        return Err(format!("{s:?}: expected a positive byte count"));
    }
    Ok(bytes as u64)
}

/// `MemAvailable` of /proc/meminfo, if readable.
pub fn available_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// Bytes of the rollout tape (see the module doc).
pub fn tape_bytes(nodes: usize, frames: usize, checkpoint_every: usize) -> u64 {
    let k = checkpoint_every.max(1) as u64;
    let per_state = 48 * nodes as u64;
    let kept = (frames as u64 / k).saturating_add(1);
    let segment = if k > 1 { k } else { 0 };
    per_state.saturating_mul(kept.saturating_add(segment))
}

fn human(b: u64) -> String {
    let b = b as f64;
    if b >= (1u64 << 30) as f64 {
        format!("{:.2} GiB", b / (1u64 << 30) as f64)
    } else {
        format!("{:.1} MiB", b / (1u64 << 20) as f64)
    }
}

/// Refuse `what` (needing about `estimate` bytes) above `--max-memory` or the memory
/// available now.
pub fn check(what: &str, estimate: u64, max_memory: Option<u64>) -> Result<(), Failure> {
    let (limit, name) = match (max_memory, available_bytes()) {
        (Some(m), Some(a)) if a < m => (a, "the memory available"),
        (Some(m), _) => (m, "--max-memory"),
        (None, Some(a)) => (a, "the memory available"),
        (None, None) => return Ok(()),
    };
    if estimate > limit {
        return Err(Failure::input(anyhow::anyhow!(
            "{what} needs about {} (estimate), more than {name} ({}); use fewer frames, a larger backward.checkpoint_every, or a larger --max-memory",
            human(estimate),
            human(limit)
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn byte_counts_parse() {
        assert_eq!(parse_bytes("123").unwrap(), 123);
        assert_eq!(parse_bytes("1e9").unwrap(), 1_000_000_000);
        assert_eq!(parse_bytes("512M").unwrap(), 512 << 20);
        assert_eq!(parse_bytes("8GiB").unwrap(), 8 << 30);
        assert_eq!(parse_bytes("2k").unwrap(), 2048);
        for bad in ["", "x", "-1", "0", "nan", "1Q", "inf"] {
            assert!(parse_bytes(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tape_estimate_counts_kept_states() {
        assert_eq!(tape_bytes(10, 9, 1), 48 * 10 * 10);
        assert_eq!(tape_bytes(10, 9, 3), 48 * 10 * (4 + 3));
        assert_eq!(tape_bytes(usize::MAX, usize::MAX, 1), u64::MAX);
    }

    #[test]
    fn over_the_limit_is_bad_input_naming_the_estimate() {
        let e = check("grad's tape", 2 << 30, Some(1 << 30)).err().unwrap();
        assert_eq!(e.code, 2);
        let m = e.error.to_string();
        assert!(
            m.contains("2.00 GiB") && m.contains("--max-memory") || m.contains("available"),
            "{m}"
        );
        assert!(check("x", 1 << 20, Some(1 << 30)).is_ok());
    }
}
