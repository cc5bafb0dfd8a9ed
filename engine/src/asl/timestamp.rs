//! The timestamp format of Choice rules and Wait states: RFC 3339 as Step Functions reads it —
//! `YYYY-MM-DDTHH:MM:SS`, optional fractional seconds (1–9 digits), then `Z` or `±HH:MM`.
//! Strict on purpose: an uppercase `T`, seconds and an offset are required, because a value
//! that is not a timestamp must make `Timestamp*` comparisons false rather than be guessed at.

use chrono::{DateTime, FixedOffset, NaiveDate, NaiveDateTime, NaiveTime};

/// Parses a Step Functions timestamp; `None` when `s` is not one.
pub fn parse_timestamp(s: &str) -> Option<DateTime<FixedOffset>> {
    let b = s.as_bytes();
    // Shortest form: "YYYY-MM-DDTHH:MM:SSZ" (20 bytes).
    if b.len() < 20 {
        return None;
    }
    let year = digits(b, 0, 4)?;
    let month = digits(b, 5, 2)?;
    let day = digits(b, 8, 2)?;
    let hour = digits(b, 11, 2)?;
    let minute = digits(b, 14, 2)?;
    let second = digits(b, 17, 2)?;
    let separators = [(4, b'-'), (7, b'-'), (10, b'T'), (13, b':'), (16, b':')];
    if separators.iter().any(|&(i, c)| b[i] != c) {
        return None;
    }

    let mut rest = &b[19..];
    let mut nanos = 0u32;
    if let Some(after_dot) = rest.strip_prefix(b".") {
        let count = after_dot.iter().take_while(|c| c.is_ascii_digit()).count();
        if count == 0 || count > 9 {
            return None;
        }
        let fraction = digits(after_dot, 0, count)?;
        nanos = fraction * 10u32.pow(9 - count as u32);
        rest = &after_dot[count..];
    }

    let offset_seconds = match rest {
        b"Z" => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let hours = digits(&[*h1, *h2], 0, 2)?;
            let minutes = digits(&[*m1, *m2], 0, 2)?;
            if hours > 23 || minutes > 59 {
                return None;
            }
            let magnitude = (hours * 3600 + minutes * 60) as i32;
            if *sign == b'-' { -magnitude } else { magnitude }
        }
        _ => return None,
    };

    let date = NaiveDate::from_ymd_opt(year as i32, month, day)?;
    // `from_hms_nano_opt` would accept a leap second (nanos ≥ 1e9) — seconds are already ≤ 59.
    if second > 59 {
        return None;
    }
    let time = NaiveTime::from_hms_nano_opt(hour, minute, second, nanos)?;
    let offset = FixedOffset::east_opt(offset_seconds)?;
    NaiveDateTime::new(date, time)
        .and_local_timezone(offset)
        .single()
}

/// The decimal number in `b[start..start + len]`, if those bytes are all ASCII digits.
fn digits(b: &[u8], start: usize, len: usize) -> Option<u32> {
    let slice = b.get(start..start + len)?;
    slice.iter().try_fold(0u32, |acc, &c| {
        c.is_ascii_digit().then(|| acc * 10 + u32::from(c - b'0'))
    })
}

#[cfg(test)]
mod tests {
    use super::parse_timestamp;

    #[test]
    fn accepts_utc_offsets_and_fractions() {
        for ok in [
            "2012-10-09T19:00:55Z",
            "2012-10-09T19:00:55+01:00",
            "2012-10-09T19:00:55-05:30",
            "2012-10-09T19:00:55.1Z",
            "2012-10-09T19:00:55.123456789Z",
            "2016-02-29T00:00:00Z",
        ] {
            assert!(parse_timestamp(ok).is_some(), "{ok}");
        }
    }

    #[test]
    fn rejects_everything_that_is_not_strict_rfc3339() {
        for bad in [
            "",
            "2012-10-09T19:00:55",
            "2012-10-09",
            "2012-10-09t19:00:55Z",
            "2012-10-09 19:00:55Z",
            "2012-10-09T19:00Z",
            "2012-10-09T19:00:55z",
            "2012-10-09T19:00:55.Z",
            "2012-10-09T19:00:55.1234567890Z",
            "2012-10-09T19:00:60Z",
            "2016-12-05T25:29:29Z",
            "2016-13-05T21:29:29Z",
            "2015-02-29T00:00:00Z",
            "05-12-2016T21:29:29Z",
            "2012-10-09T19:00:55+0100",
            "2012-10-09T19:00:55+24:00",
            "2012-10-09T19:00:55Z ",
            "２012-10-09T19:00:55Z",
        ] {
            assert!(parse_timestamp(bad).is_none(), "{bad}");
        }
    }

    #[test]
    fn offsets_compare_as_instants() {
        let utc = parse_timestamp("2012-10-09T19:00:55Z").unwrap();
        let plus_one = parse_timestamp("2012-10-09T20:00:55+01:00").unwrap();
        assert_eq!(utc, plus_one);
    }
}
