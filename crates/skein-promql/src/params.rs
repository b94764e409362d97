//! The Prometheus API's parameters: times (RFC 3339 or Unix seconds) and
//! durations (`5m`, `1h30m`, or seconds as a float).

use crate::Error;

/// A time parameter in milliseconds.
pub fn parse_time(name: &str, s: &str) -> Result<i64, Error> {
    let bad = || {
        Error::BadData(format!(
            "invalid parameter {name:?}: cannot parse {s:?} to a valid timestamp"
        ))
    };
    if let Ok(f) = s.parse::<f64>() {
        if !f.is_finite() {
            return Err(bad());
        }
        return Ok((f * 1000.0).round() as i64);
    }
    rfc3339_ms(s).ok_or_else(bad)
}

/// A duration parameter in milliseconds.
pub fn parse_duration(name: &str, s: &str) -> Result<i64, Error> {
    let bad = || {
        Error::BadData(format!(
            "invalid parameter {name:?}: cannot parse {s:?} to a valid duration"
        ))
    };
    if let Ok(f) = s.parse::<f64>() {
        if !f.is_finite() || f.abs() > (i64::MAX / 1000) as f64 {
            return Err(bad());
        }
        return Ok((f * 1000.0).round() as i64);
    }
    duration_ms(s).ok_or_else(bad)
}

/// A Prometheus duration (`1y2w3d4h5m6s7ms`, units descending, each once).
pub fn duration_ms(s: &str) -> Option<i64> {
    const UNITS: [(&str, i64); 8] = [
        ("y", 365 * 86_400_000),
        ("w", 7 * 86_400_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("ms", 1),
        ("m", 60_000),
        ("s", 1000),
        ("", 0),
    ];
    if s.is_empty() {
        return None;
    }
    let mut rest = s;
    let mut total: i64 = 0;
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let n: i64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, mult) = UNITS[..7].iter().find(|(u, _)| rest.starts_with(u))?;
        rest = &rest[unit.len()..];
        total = total.checked_add(n.checked_mul(*mult)?)?;
    }
    Some(total)
}

/// `YYYY-MM-DDTHH:MM:SS[.fff](Z|±HH:MM)` to milliseconds.
fn rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20
        || b[4] != b'-'
        || b[7] != b'-'
        || !(b[10] == b'T' || b[10] == b't')
        || b[13] != b':'
        || b[16] != b':'
    {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    let mut i = 19;
    let mut frac_ms = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        let digits = &s[start..i];
        let padded: String = digits.chars().chain(std::iter::repeat('0')).take(3).collect();
        frac_ms = padded.parse().ok()?;
    }
    let offset_min = match b.get(i)? {
        b'Z' | b'z' if i + 1 == b.len() => 0,
        c @ (b'+' | b'-') if b.len() == i + 6 => {
            let oh = num(i + 1..i + 3)?;
            let om = num(i + 4..i + 6)?;
            let o = oh * 60 + om;
            if *c == b'-' { -o } else { o }
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let days = days_from_civil(y, mo, d);
    Some(((days * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60) * 1000) + frac_ms)
}

fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_and_durations_parse_as_prometheus_reads_them() {
        assert_eq!(parse_time("time", "1700000000.5").unwrap(), 1_700_000_000_500);
        assert_eq!(parse_time("time", "2023-11-14T22:13:20Z").unwrap(), 1_700_000_000_000);
        assert_eq!(
            parse_time("time", "2023-11-14T23:13:20.250+01:00").unwrap(),
            1_700_000_000_250
        );
        assert!(parse_time("time", "yesterday").is_err());
        assert_eq!(parse_duration("step", "15").unwrap(), 15_000);
        assert_eq!(parse_duration("step", "1m30s").unwrap(), 90_000);
        assert_eq!(parse_duration("step", "250ms").unwrap(), 250);
        assert!(parse_duration("step", "5x").is_err());
    }
}
