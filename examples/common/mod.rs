//! What the reference clients (`crr_ref`, `unix_ref`, `h2_ref`) share: their command line
//! after the address, `N [--payload BYTES] [--warmup W]`.

/// How many calls a reference client makes, and of what.
pub struct ClientArgs {
    /// Timed calls.
    pub calls: u64,
    /// Request payload bytes.
    pub payload_len: usize,
    /// Untimed calls before them.
    pub warmup: u64,
}

impl ClientArgs {
    /// Parses `N [--payload BYTES] [--warmup W]`, warm-up `warmup` unless the flag says
    /// otherwise; the error names what is wrong, then `usage`.
    pub fn parse(args: &[String], warmup: u64, usage: &str) -> Result<ClientArgs, String> {
        let n = args.first().ok_or(format!("N is missing\n{usage}"))?;
        let calls: u64 = n.parse().map_err(|e| format!("N {n:?}: {e}"))?;
        if calls == 0 {
            return Err("N must be at least 1".into());
        }
        let mut parsed = ClientArgs {
            calls,
            payload_len: 64,
            warmup,
        };
        let mut it = args[1..].iter();
        while let Some(flag) = it.next() {
            let value = it.next().ok_or(format!("{flag} needs a value"))?;
            match flag.as_str() {
                "--payload" => {
                    parsed.payload_len = value.parse().map_err(|e| format!("--payload: {e}"))?
                }
                "--warmup" => {
                    parsed.warmup = value.parse().map_err(|e| format!("--warmup: {e}"))?
                }
                _ => return Err(format!("unknown flag {flag}\n{usage}")),
            }
        }
        Ok(parsed)
    }

    /// The request payload: bytes 0, 1, 2, ... wrapping at 256.
    pub fn payload(&self) -> Vec<u8> {
        (0..self.payload_len).map(|i| i as u8).collect()
    }
}
