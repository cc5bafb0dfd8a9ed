//! The settings' own value types and parsers: durations, the repair interval, retention, secrets, AWS names.

use super::*;

/// The repair loop's interval as given: a duration, or none (`0`/`off`: no loop). A type of
/// its own: clap takes a field of type `Option<_>` for an optional flag.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairInterval(pub Option<Duration>);

/// A window of at least a minute: a pass must see an order for longer than its grace.
pub(crate) fn parse_repair_window(raw: &str) -> Result<Duration, String> {
    let window = parse_duration(raw)?;
    match window >= Duration::from_secs(60) {
        true => Ok(window),
        false => Err("the repair window is a minute or more".to_owned()),
    }
}

pub(crate) fn parse_repair_interval(raw: &str) -> Result<RepairInterval, String> {
    match raw.trim() {
        "0" | "off" => Ok(RepairInterval(None)),
        other => parse_duration(other).map(|d| RepairInterval(Some(d))),
    }
}

/// How long closed executions are kept, as given: a duration, or none (`off`: for ever).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Retention(pub Option<Duration>);

pub(crate) fn parse_retention(raw: &str) -> Result<Retention, String> {
    match raw.trim() {
        "off" => Ok(Retention(None)),
        other => parse_duration(other).map(|d| Retention(Some(d))),
    }
}

/// A value parser for a secret: a value it refuses is not quoted in the error (clap quotes the
/// value it was given, and a mistyped secret is still a secret, now on stderr and in the logs).
#[derive(Clone, Copy)]
pub(crate) struct Secret<T>(pub(crate) fn(&str) -> Result<T, String>);

impl<T: Clone + Send + Sync + 'static> TypedValueParser for Secret<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg.map_or_else(|| "the secret".to_owned(), ToString::to_string);
        let parsed = match value.to_str() {
            Some(raw) => (self.0)(raw),
            None => Err("it is not valid UTF-8".to_owned()),
        };
        parsed.map_err(|reason| {
            clap::Error::raw(
                ErrorKind::ValueValidation,
                format!("invalid value for '{flag}' (not shown: it is a secret): {reason}\n"),
            )
            .with_cmd(cmd)
        })
    }
}

pub(crate) fn parse_token(raw: &str) -> Result<OperatorToken, String> {
    let token = raw.trim();
    if token.len() < 16 {
        return Err("an operator token needs at least 16 characters".to_owned());
    }
    if !token.bytes().all(|b| b.is_ascii_graphic()) {
        return Err("an operator token is printable ASCII without spaces".to_owned());
    }
    Ok(OperatorToken::new(token))
}

pub(crate) fn parse_region(raw: &str) -> Result<String, String> {
    let ok = !raw.is_empty()
        && raw
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
    if ok {
        Ok(raw.to_owned())
    } else {
        Err("a region is lowercase letters, digits and hyphens (e.g. us-east-1)".to_owned())
    }
}

pub(crate) fn parse_account_id(raw: &str) -> Result<String, String> {
    if raw.len() == 12 && raw.bytes().all(|b| b.is_ascii_digit()) {
        Ok(raw.to_owned())
    } else {
        Err("an account id is 12 digits".to_owned())
    }
}

pub(crate) fn parse_url(raw: &str) -> Result<String, String> {
    let url = raw.trim_end_matches('/');
    match url.split_once("://") {
        Some(("http" | "https", rest))
            if !rest.is_empty() && !rest.contains(char::is_whitespace) =>
        {
            Ok(url.to_owned())
        }
        _ => Err("a URL starts with http:// or https:// and has a host".to_owned()),
    }
}

pub(crate) fn parse_arn(raw: &str) -> Result<String, String> {
    let parts: Vec<&str> = raw.splitn(6, ':').collect();
    if parts.len() == 6 && parts[0] == "arn" && !parts[1].is_empty() && !parts[2].is_empty() {
        Ok(raw.to_owned())
    } else {
        Err("an ARN looks like arn:aws:SERVICE:REGION:ACCOUNT:RESOURCE".to_owned())
    }
}

/// DynamoDB's table name rule: 3–255 of letters, digits, `_`, `-` and `.`.
pub(crate) fn parse_table(raw: &str) -> Result<String, String> {
    let ok = (3..=255).contains(&raw.len())
        && raw
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    if ok {
        Ok(raw.to_owned())
    } else {
        Err("a table name is 3 to 255 letters, digits, '_', '-' or '.'".to_owned())
    }
}

pub(crate) fn parse_duration(raw: &str) -> Result<Duration, String> {
    let d = humantime::parse_duration(raw).map_err(|e| e.to_string())?;
    if d < Duration::from_secs(1) {
        return Err("at least 1s".to_owned());
    }
    Ok(d)
}
