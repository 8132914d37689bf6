//! The HPACK encoding (RFC 7541) of the requests of one multiplexed HTTP/2 connection
//! (`h2_mux_wire`), written by hand instead of through the `h2` crate's encoder, which
//! builds a header entry per field, hashes it into its table and copies it for every
//! request: 12% of `h2-mux`'s client CPU at `-c 64` (perf, 2026-12-07).
//!
//! A request's fields repeat from call to call but for its seq, so the encoder keeps the
//! table small and simple, as it may (§2.3.2: the encoder decides what enters the table):
//! - a field the static table holds whole (`:method: POST`, `:scheme: http`) is its index;
//! - any other field is added to the server's dynamic table the first time, while the
//!   table has room, and sent as its index from then on; nothing is ever evicted to make
//!   room, so a field that does not fit is sent as a literal each time;
//! - a field the caller marks volatile (the seq: a new value in every request) is sent
//!   as a literal never indexed, as the server sends its own.
//!
//! Strings go raw, without Huffman coding: a few bytes more per new field, no work per
//! byte. When the server's SETTINGS lower the table below what this encoder uses, the
//! next header block starts with a size update and the oldest entries are dropped, as the
//! server's decoder drops them (§4.3, §6.3).

/// Every entry's overhead in the table's size (§4.1).
const ENTRY_OVERHEAD: usize = 32;

/// The table size both ends start with, before any SETTINGS (RFC 9113 §6.5.2).
pub(super) const DEFAULT_TABLE_SIZE: usize = 4096;

/// Entries in the static table (Appendix A).
const STATIC_ENTRIES: usize = 61;

/// Static-table entries this encoder uses whole: name, value, index.
const STATIC_FIELDS: [(&[u8], &[u8], usize); 4] = [
    (b":method", b"POST", 3),
    (b":method", b"GET", 2),
    (b":scheme", b"http", 6),
    (b":scheme", b"https", 7),
];

/// The static-table index of `name`, for the names requests carry.
fn static_name(name: &[u8]) -> Option<usize> {
    Some(match name {
        b":authority" => 1,
        b":method" => 2,
        b":path" => 4,
        b":scheme" => 6,
        b"content-length" => 28,
        b"content-type" => 31,
        b"user-agent" => 58,
        _ => return None,
    })
}

/// A field in the dynamic table: its name and value.
type Entry = (Box<[u8]>, Box<[u8]>);

/// The request encoder of one connection; it mirrors the server's dynamic table.
#[derive(Debug)]
pub(super) struct Encoder {
    /// The entries this encoder added, oldest first: the newest is index 62.
    table: Vec<Entry>,
    /// Their size as §4.1 counts it.
    size: usize,
    /// The most the table may hold.
    max: usize,
    /// A size update the next header block must start with.
    update: Option<usize>,
}

impl Default for Encoder {
    fn default() -> Self {
        Encoder {
            table: Vec::new(),
            size: 0,
            max: DEFAULT_TABLE_SIZE,
            update: None,
        }
    }
}

impl Encoder {
    /// The server's SETTINGS_HEADER_TABLE_SIZE: a table smaller than the one in use
    /// shrinks to it, from its oldest entries, with the next block's size update. A larger
    /// one changes nothing: this encoder never needs more than the default.
    pub fn set_max(&mut self, max: usize) {
        if max >= self.max {
            return;
        }
        self.max = max;
        while self.size > max {
            let (name, value) = self.table.remove(0);
            self.size -= name.len() + value.len() + ENTRY_OVERHEAD;
        }
        self.update = Some(max);
    }

    /// Starts a header block in `out`.
    pub fn begin(&mut self, out: &mut Vec<u8>) {
        if let Some(max) = self.update.take() {
            integer(out, 0x20, 5, max);
        }
    }

    /// Appends the field `name: value` to the block in `out`; `volatile` for a value that
    /// changes with every request.
    pub fn field(&mut self, out: &mut Vec<u8>, name: &[u8], value: &[u8], volatile: bool) {
        if let Some(&(_, _, index)) = STATIC_FIELDS
            .iter()
            .find(|(n, v, _)| *n == name && *v == value)
        {
            return integer(out, 0x80, 7, index);
        }
        if !volatile {
            let found = self
                .table
                .iter()
                .rposition(|(n, v)| **n == *name && **v == *value);
            if let Some(at) = found {
                let index = STATIC_ENTRIES + self.table.len() - at;
                return integer(out, 0x80, 7, index);
            }
        }
        let entry = name.len() + value.len() + ENTRY_OVERHEAD;
        let indexed = !volatile && self.size + entry <= self.max;
        // Incremental indexing (a 6-bit name index); never indexed, or without indexing
        // (4 bits).
        let (pattern, prefix) = match (indexed, volatile) {
            (true, _) => (0x40, 6),
            (false, true) => (0x10, 4),
            (false, false) => (0x00, 4),
        };
        match static_name(name) {
            Some(index) => integer(out, pattern, prefix, index),
            None => {
                integer(out, pattern, prefix, 0);
                string(out, name);
            }
        }
        string(out, value);
        if indexed {
            self.table.push((name.into(), value.into()));
            self.size += entry;
        }
    }
}

/// Appends `value` as an HPACK integer with a `prefix`-bit prefix, the byte's other bits
/// `pattern` (§5.1).
fn integer(out: &mut Vec<u8>, pattern: u8, prefix: u32, value: usize) {
    let max = (1usize << prefix) - 1;
    if value < max {
        out.push(pattern | value as u8);
        return;
    }
    out.push(pattern | max as u8);
    let mut rest = value - max;
    while rest >= 0x80 {
        out.push(0x80 | (rest & 0x7f) as u8);
        rest >>= 7;
    }
    out.push(rest as u8);
}

/// Appends `s` as a raw string literal (§5.2, no Huffman coding).
fn string(out: &mut Vec<u8>, s: &[u8]) {
    integer(out, 0, 7, s.len());
    out.extend_from_slice(s);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The examples of RFC 7541 Appendix C.2 and C.3 that this encoder's choices produce.
    #[test]
    fn the_rfc_examples() {
        // C.1.2: 1337 with a 5-bit prefix.
        let mut out = Vec::new();
        integer(&mut out, 0, 5, 1337);
        assert_eq!(out, [0x1f, 0x9a, 0x0a]);
        // C.2.1: a literal with indexing and a new name.
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        enc.field(&mut out, b"custom-key", b"custom-header", false);
        let mut want = vec![0x40, 0x0a];
        want.extend_from_slice(b"custom-key");
        want.push(0x0d);
        want.extend_from_slice(b"custom-header");
        assert_eq!(out, want);
        assert_eq!(enc.size, 55);
        // C.2.4 and C.3.1: indexed fields, and a literal with indexing and an indexed name.
        let mut enc = Encoder::default();
        let mut out = Vec::new();
        enc.field(&mut out, b":method", b"GET", false);
        enc.field(&mut out, b":scheme", b"http", false);
        enc.field(&mut out, b":path", b"/", false);
        enc.field(&mut out, b":authority", b"www.example.com", false);
        // ":path: /" is static entry 4 whole; this encoder adds it to the table instead,
        // so the RFC's block differs there: 0x84 becomes 0x44 0x01 '/'.
        let mut want = vec![0x82, 0x86, 0x44, 0x01, b'/', 0x41, 0x0f];
        want.extend_from_slice(b"www.example.com");
        assert_eq!(out, want);
        // C.3.2: the same again is all indexes: the authority is now 62, the path 63.
        let mut out = Vec::new();
        enc.field(&mut out, b":method", b"GET", false);
        enc.field(&mut out, b":scheme", b"http", false);
        enc.field(&mut out, b":path", b"/", false);
        enc.field(&mut out, b":authority", b"www.example.com", false);
        assert_eq!(out, [0x82, 0x86, 0x80 | 63, 0x80 | 62]);
    }

    #[test]
    fn volatile_fields_are_never_indexed() {
        let mut enc = Encoder::default();
        for seq in [b"1".as_slice(), b"2"] {
            let mut out = Vec::new();
            enc.field(&mut out, b"x-rpcbench-seq", seq, true);
            let mut want = vec![0x10, 14];
            want.extend_from_slice(b"x-rpcbench-seq");
            want.push(1);
            want.extend_from_slice(seq);
            assert_eq!(out, want);
        }
        assert!(enc.table.is_empty());
    }

    #[test]
    fn a_full_table_takes_no_more_and_a_smaller_one_is_announced() {
        let mut enc = Encoder::default();
        let big = vec![b'a'; DEFAULT_TABLE_SIZE - ENTRY_OVERHEAD - 4];
        let mut out = Vec::new();
        enc.field(&mut out, b"big", &big, false);
        assert_eq!(out[0], 0x40, "added");
        out.clear();
        enc.field(&mut out, b"more", b"x", false);
        assert_eq!(out[0], 0x00, "no room: a literal");
        out.clear();
        enc.field(&mut out, b"more", b"x", false);
        assert_eq!(out[0], 0x00, "still a literal");
        // The server allows 100 bytes: the big entry goes, and the next block says so.
        enc.set_max(100);
        assert_eq!((enc.size, enc.table.len()), (0, 0));
        out.clear();
        enc.begin(&mut out);
        assert_eq!(out, [0x20 | 31, 100 - 31]);
        out.clear();
        enc.begin(&mut out);
        assert!(out.is_empty(), "announced once");
        // A larger table later changes nothing.
        enc.set_max(1 << 20);
        assert_eq!(enc.max, 100);
    }
}
