//! The query parameters `/echo` and the WSTest routes take (`reply_len`, `delay_us`,
//! `seq`), read without allocating: they are parsed on every request.

use super::body::HttpError;

/// The parameters of `/echo`, from the query string and the seq header.
#[derive(Debug, Default, PartialEq)]
pub(super) struct EchoParams {
    pub(super) seq: Option<u64>,
    pub(super) reply_len: Option<u32>,
    pub(super) delay_us: u32,
}

impl EchoParams {
    /// Parses the query string; unknown keys are ignored, bad numbers are a 400.
    ///
    /// Splits on bytes rather than chars: `&` and `=` are ASCII, so every slice still
    /// falls on a char boundary, and this runs for every request.
    pub(super) fn parse(query: Option<&str>) -> Result<EchoParams, HttpError> {
        let mut params = EchoParams::default();
        let mut rest = query.unwrap_or("");
        while !rest.is_empty() {
            let (pair, tail) = split_at_byte(rest, b'&');
            rest = tail;
            let (key, value) = split_at_byte(pair, b'=');
            let bad = |what: &str| HttpError::BadRequest(format!("{key}={value:?} is not {what}"));
            match key {
                "reply_len" => {
                    params.reply_len = Some(value.parse().map_err(|_| bad("a byte count"))?)
                }
                "delay_us" => {
                    params.delay_us = value.parse().map_err(|_| bad("a number of microseconds"))?
                }
                "seq" => params.seq = Some(value.parse().map_err(|_| bad("an unsigned integer"))?),
                _ => {}
            }
        }
        Ok(params)
    }
}

/// `text` split at the first `sep` (which is dropped), or all of it and `""`.
fn split_at_byte(text: &str, sep: u8) -> (&str, &str) {
    match text.bytes().position(|b| b == sep) {
        Some(i) => (&text[..i], &text[i + 1..]),
        None => (text, ""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        assert_eq!(
            EchoParams::parse(Some("reply_len=10&delay_us=5&seq=7&x=1")).unwrap(),
            EchoParams {
                seq: Some(7),
                reply_len: Some(10),
                delay_us: 5
            }
        );
        assert_eq!(EchoParams::parse(None).unwrap(), EchoParams::default());
        assert!(EchoParams::parse(Some("reply_len=-1")).is_err());
        assert!(EchoParams::parse(Some("delay_us=abc")).is_err());
        assert!(EchoParams::parse(Some("reply_len")).is_err());
    }
}
