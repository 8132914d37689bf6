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

/// The static table (Appendix A), from index 1.
const STATIC_TABLE: [(&str, &str); STATIC_ENTRIES] = [
    (":authority", ""),
    (":method", "GET"),
    (":method", "POST"),
    (":path", "/"),
    (":path", "/index.html"),
    (":scheme", "http"),
    (":scheme", "https"),
    (":status", "200"),
    (":status", "204"),
    (":status", "206"),
    (":status", "304"),
    (":status", "400"),
    (":status", "404"),
    (":status", "500"),
    ("accept-charset", ""),
    ("accept-encoding", "gzip, deflate"),
    ("accept-language", ""),
    ("accept-ranges", ""),
    ("accept", ""),
    ("access-control-allow-origin", ""),
    ("age", ""),
    ("allow", ""),
    ("authorization", ""),
    ("cache-control", ""),
    ("content-disposition", ""),
    ("content-encoding", ""),
    ("content-language", ""),
    ("content-length", ""),
    ("content-location", ""),
    ("content-range", ""),
    ("content-type", ""),
    ("cookie", ""),
    ("date", ""),
    ("etag", ""),
    ("expect", ""),
    ("expires", ""),
    ("from", ""),
    ("host", ""),
    ("if-match", ""),
    ("if-modified-since", ""),
    ("if-none-match", ""),
    ("if-range", ""),
    ("if-unmodified-since", ""),
    ("last-modified", ""),
    ("link", ""),
    ("location", ""),
    ("max-forwards", ""),
    ("proxy-authenticate", ""),
    ("proxy-authorization", ""),
    ("range", ""),
    ("referer", ""),
    ("refresh", ""),
    ("retry-after", ""),
    ("server", ""),
    ("set-cookie", ""),
    ("strict-transport-security", ""),
    ("transfer-encoding", ""),
    ("user-agent", ""),
    ("vary", ""),
    ("via", ""),
    ("www-authenticate", ""),
];

/// The length in bits of each symbol's Huffman code (Appendix B), the last the end of
/// string (EOS). The code is canonical: codes of one length are consecutive, in symbol
/// order, and each length's first code follows the last of the length before, so the
/// lengths alone make the codes ([`huffman`]).
const HUFFMAN_BITS: [u8; 257] = [
    13, 23, 28, 28, 28, 28, 28, 28, 28, 24, 30, 28, 28, 30, 28, 28, 28, 28, 28, 28, 28, 28, 30, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 6, 10, 10, 12, 13, 6, 8, 11, 10, 10, 8, 11, 8, 6, 6, 6, 5, 5,
    5, 6, 6, 6, 6, 6, 6, 6, 7, 8, 15, 6, 12, 10, 13, 6, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7,
    7, 7, 7, 7, 7, 7, 7, 7, 8, 7, 8, 13, 19, 13, 14, 6, 15, 5, 6, 5, 6, 5, 6, 6, 6, 5, 7, 7, 6, 6,
    6, 5, 6, 7, 6, 5, 5, 6, 7, 7, 7, 7, 7, 15, 11, 14, 13, 28, 20, 22, 20, 20, 22, 22, 22, 23, 22,
    23, 23, 23, 23, 23, 24, 23, 24, 24, 22, 23, 24, 23, 23, 23, 23, 21, 22, 23, 22, 23, 23, 24, 22,
    21, 20, 22, 22, 23, 23, 21, 23, 22, 22, 24, 21, 22, 23, 23, 21, 21, 22, 21, 23, 22, 23, 23, 20,
    22, 22, 22, 23, 22, 22, 23, 26, 26, 20, 19, 22, 23, 22, 25, 26, 26, 26, 27, 27, 26, 24, 25, 19,
    21, 26, 27, 27, 26, 27, 24, 21, 21, 26, 26, 28, 27, 27, 27, 20, 24, 20, 21, 22, 21, 21, 23, 22,
    22, 25, 25, 24, 24, 26, 23, 26, 27, 26, 26, 27, 27, 27, 27, 27, 28, 27, 27, 27, 27, 27, 26, 30,
];

/// The end-of-string symbol, which a string must not contain.
const EOS: usize = 256;

/// Why a header block cannot be decoded (RFC 7541 §3: a connection error).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub(super) enum DecodeError {
    /// The block ended inside a field.
    #[error("header block cut short")]
    Truncated,
    /// An index past both tables, or index 0.
    #[error("header index out of range")]
    BadIndex,
    /// An integer too large for any field or table.
    #[error("integer overflow in a header block")]
    Overflow,
    /// Bad Huffman code: EOS, or padding longer than 7 bits or not all ones.
    #[error("bad Huffman code")]
    Huffman,
    /// A size update past the table size this side allows, or after a field.
    #[error("bad dynamic table size update")]
    SizeUpdate,
}

/// Largest integer a block may carry: far above any table or string this side accepts.
const MOST_INTEGER: usize = 1 << 24;

/// The response decoder of one connection: the server's dynamic table as its blocks
/// build it.
#[derive(Debug)]
pub(super) struct Decoder {
    /// The entries, newest first: index 62 is the front.
    table: std::collections::VecDeque<Entry>,
    /// Their size as §4.1 counts it.
    size: usize,
    /// The table's size now, as the server's size updates set it.
    max: usize,
    /// The most a size update may set: this side's SETTINGS_HEADER_TABLE_SIZE (it sends
    /// none, so the default).
    limit: usize,
    /// A Huffman-coded name and value, decoded.
    name_buf: Vec<u8>,
    value_buf: Vec<u8>,
}

impl Default for Decoder {
    fn default() -> Self {
        Decoder {
            table: std::collections::VecDeque::new(),
            size: 0,
            max: DEFAULT_TABLE_SIZE,
            limit: DEFAULT_TABLE_SIZE,
            name_buf: Vec::new(),
            value_buf: Vec::new(),
        }
    }
}

impl Decoder {
    /// Decodes `block`, a whole header block, handing each field to `field` in order,
    /// as name and value. Fields added to the table are added whatever `field` says, so
    /// the table stays in step with the server's even when `field` fails; `field`'s first
    /// failure is returned once the block is done.
    pub fn decode<E>(
        &mut self,
        mut block: &[u8],
        mut field: impl FnMut(&[u8], &[u8]) -> Result<(), E>,
    ) -> Result<Result<(), E>, DecodeError> {
        let mut verdict = Ok(());
        let mut first = true;
        while let Some(&byte) = block.first() {
            let Decoder {
                table,
                name_buf,
                value_buf,
                ..
            } = self;
            let r = if byte & 0x80 != 0 {
                let (name, value) = entry(table, read_integer(&mut block, 7)?)?;
                field(name, value)
            } else if byte & 0xe0 == 0x20 {
                let max = read_integer(&mut block, 5)?;
                if !first || max > self.limit {
                    return Err(DecodeError::SizeUpdate);
                }
                self.max = max;
                self.evict(0);
                continue;
            } else {
                // Incremental indexing: a 6-bit name index; without indexing and never
                // indexed, 4 bits.
                let indexing = byte & 0xc0 == 0x40;
                let index = read_integer(&mut block, if indexing { 6 } else { 4 })?;
                let name = match index {
                    0 => read_string(name_buf, &mut block)?,
                    _ => entry(table, index)?.0,
                };
                let value = read_string(value_buf, &mut block)?;
                let r = field(name, value);
                if indexing {
                    let (name, value): Entry = (name.into(), value.into());
                    self.insert(name, value);
                }
                r
            };
            if verdict.is_ok() {
                verdict = r;
            }
            first = false;
        }
        Ok(verdict)
    }

    /// Adds an entry, evicting the oldest to make room; an entry larger than the table
    /// empties it and is not added (§4.4).
    fn insert(&mut self, name: Box<[u8]>, value: Box<[u8]>) {
        let size = name.len() + value.len() + ENTRY_OVERHEAD;
        if size > self.max {
            self.evict(self.max);
            return;
        }
        self.evict(size);
        self.table.push_front((name, value));
        self.size += size;
    }

    /// Evicts the oldest entries until `room` more bytes fit.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.max {
            let Some((name, value)) = self.table.pop_back() else {
                break;
            };
            self.size -= name.len() + value.len() + ENTRY_OVERHEAD;
        }
    }
}

/// The entry at `index` in the static table, then in `table` (the dynamic one).
fn entry(
    table: &std::collections::VecDeque<Entry>,
    index: usize,
) -> Result<(&[u8], &[u8]), DecodeError> {
    match index {
        0 => Err(DecodeError::BadIndex),
        1..=STATIC_ENTRIES => {
            let (name, value) = STATIC_TABLE[index - 1];
            Ok((name.as_bytes(), value.as_bytes()))
        }
        _ => table
            .get(index - STATIC_ENTRIES - 1)
            .map(|(n, v)| (&**n, &**v))
            .ok_or(DecodeError::BadIndex),
    }
}

/// Reads a string literal off the front of `block`: its bytes, or, when Huffman-coded,
/// their decoding in `buf`.
fn read_string<'r, 'b: 'r>(
    buf: &'r mut Vec<u8>,
    block: &mut &'b [u8],
) -> Result<&'r [u8], DecodeError> {
    let coded = block.first().is_some_and(|b| b & 0x80 != 0);
    let len = read_integer(block, 7)?;
    let (raw, rest) = block.split_at_checked(len).ok_or(DecodeError::Truncated)?;
    *block = rest;
    if !coded {
        return Ok(raw);
    }
    buf.clear();
    huffman().decode(raw, buf)?;
    Ok(buf)
}

/// Reads an integer with a `prefix`-bit prefix off the front of `block` (§5.1).
fn read_integer(block: &mut &[u8], prefix: u32) -> Result<usize, DecodeError> {
    let (&first, mut rest) = block.split_first().ok_or(DecodeError::Truncated)?;
    let max = (1usize << prefix) - 1;
    let mut value = usize::from(first) & max;
    if value == max {
        let mut shift = 0;
        loop {
            let (&b, more) = rest.split_first().ok_or(DecodeError::Truncated)?;
            rest = more;
            value += usize::from(b & 0x7f) << shift;
            // Zero bytes add nothing, but the shift still grows.
            if value > MOST_INTEGER || shift > MOST_INTEGER.ilog2() {
                return Err(DecodeError::Overflow);
            }
            if b & 0x80 == 0 {
                break;
            }
            shift += 7;
        }
    }
    *block = rest;
    Ok(value)
}

/// The Huffman decoder, built once from [`HUFFMAN_BITS`].
fn huffman() -> &'static Huffman {
    static HUFFMAN: std::sync::OnceLock<Huffman> = std::sync::OnceLock::new();
    HUFFMAN.get_or_init(Huffman::new)
}

/// A Huffman decoder that takes four bits at a step: for each node of the code's tree
/// (a state) and each nibble, the node the nibble leads to and the symbol it completes,
/// if any (the shortest code is 5 bits, so a nibble completes at most one).
struct Huffman {
    steps: Vec<[Step; 16]>,
    /// Whether a string may end at each node: on the all-ones path from the root (EOS's
    /// prefix), at most 7 bits down (§5.2).
    may_end: Vec<bool>,
}

/// One step of [`Huffman`]: the next node, the symbol completed on the way (or none),
/// or a failure (EOS decoded).
#[derive(Clone, Copy, Default)]
struct Step {
    next: u8,
    symbol: Option<u8>,
    fails: bool,
}

impl Huffman {
    fn new() -> Huffman {
        // The tree: for each internal node, its two children, a node or a symbol.
        #[derive(Clone, Copy)]
        enum Child {
            None,
            Node(usize),
            Leaf(usize),
        }
        let mut tree: Vec<[Child; 2]> = vec![[Child::None; 2]];
        let mut order: Vec<usize> = (0..HUFFMAN_BITS.len()).collect();
        order.sort_by_key(|&s| (HUFFMAN_BITS[s], s));
        let (mut code, mut prev) = (0u32, HUFFMAN_BITS[order[0]]);
        for (i, &symbol) in order.iter().enumerate() {
            let bits = HUFFMAN_BITS[symbol];
            if i > 0 {
                code = (code + 1) << (bits - prev);
            }
            prev = bits;
            let mut node = 0;
            for depth in (0..bits).rev() {
                let bit = ((code >> depth) & 1) as usize;
                node = match tree[node][bit] {
                    _ if depth == 0 => {
                        tree[node][bit] = Child::Leaf(symbol);
                        break;
                    }
                    Child::Node(next) => next,
                    _ => {
                        tree.push([Child::None; 2]);
                        let next = tree.len() - 1;
                        tree[node][bit] = Child::Node(next);
                        next
                    }
                };
            }
        }
        let mut may_end = vec![false; tree.len()];
        let mut node = 0;
        for _ in 0..8 {
            may_end[node] = true;
            match tree[node][1] {
                Child::Node(next) => node = next,
                _ => break,
            }
        }
        let steps = (0..tree.len())
            .map(|state| {
                let mut row = [Step::default(); 16];
                for (nibble, step) in row.iter_mut().enumerate() {
                    let mut node = state;
                    for shift in (0..4).rev() {
                        match tree[node][(nibble >> shift) & 1] {
                            Child::Node(next) => node = next,
                            Child::Leaf(EOS) | Child::None => {
                                step.fails = true;
                                break;
                            }
                            Child::Leaf(symbol) => {
                                step.symbol = Some(symbol as u8);
                                node = 0;
                            }
                        }
                    }
                    step.next = node as u8;
                }
                row
            })
            .collect();
        Huffman { steps, may_end }
    }

    /// Appends the decoding of `coded` to `out`.
    fn decode(&self, coded: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        let mut state = 0usize;
        for &byte in coded {
            for nibble in [byte >> 4, byte & 0x0f] {
                let step = self.steps[state][usize::from(nibble)];
                if step.fails {
                    return Err(DecodeError::Huffman);
                }
                if let Some(symbol) = step.symbol {
                    out.push(symbol);
                }
                state = usize::from(step.next);
            }
        }
        if self.may_end[state] {
            Ok(())
        } else {
            Err(DecodeError::Huffman)
        }
    }
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

    /// Decodes `hex` (spaces ignored) into its fields, as strings.
    fn decoded(dec: &mut Decoder, hex: &str) -> Result<Vec<(String, String)>, DecodeError> {
        let hex: String = hex.split_whitespace().collect();
        let block: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap())
            .collect();
        let mut got = Vec::new();
        let verdict = dec.decode(&block, |n, v| {
            got.push((
                String::from_utf8(n.to_vec()).unwrap(),
                String::from_utf8(v.to_vec()).unwrap(),
            ));
            Ok::<(), ()>(())
        })?;
        assert_eq!(verdict, Ok(()));
        Ok(got)
    }

    fn fields(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect()
    }

    /// RFC 7541 C.4: three requests with Huffman coding, on one table.
    #[test]
    fn the_rfc_huffman_requests_decode() {
        let mut dec = Decoder::default();
        let first = [
            (":method", "GET"),
            (":scheme", "http"),
            (":path", "/"),
            (":authority", "www.example.com"),
        ];
        let got = decoded(&mut dec, "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff");
        assert_eq!(got, Ok(fields(&first)));
        assert_eq!(dec.size, 57);
        let got = decoded(&mut dec, "8286 84be 5886 a8eb 1064 9cbf");
        let mut second = first.to_vec();
        second.push(("cache-control", "no-cache"));
        assert_eq!(got, Ok(fields(&second)));
        assert_eq!(dec.size, 110);
        let got = decoded(
            &mut dec,
            "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
        );
        let third = [
            (":method", "GET"),
            (":scheme", "https"),
            (":path", "/index.html"),
            (":authority", "www.example.com"),
            ("custom-key", "custom-value"),
        ];
        assert_eq!(got, Ok(fields(&third)));
        assert_eq!(dec.size, 164);
    }

    /// Evictions: a table of 60 bytes holds one 57-byte entry; the next evicts it.
    #[test]
    fn entries_are_evicted_oldest_first() {
        let mut dec = Decoder::default();
        let got = decoded(&mut dec, "3f1d 418c f1e3 c2e5 f23a 6ba0 ab90 f4ff be");
        // A size update to 60 (31 + 29), then :authority added and read back as 62.
        let authority = (":authority", "www.example.com");
        assert_eq!(got, Ok(fields(&[authority, authority])));
        let got = decoded(&mut dec, "5886 a8eb 1064 9cbf be");
        let cache = ("cache-control", "no-cache");
        assert_eq!(got, Ok(fields(&[cache, cache])));
        assert_eq!((dec.table.len(), dec.size), (1, 53));
        assert_eq!(decoded(&mut dec, "bf"), Err(DecodeError::BadIndex));
    }

    #[test]
    fn bad_blocks_are_errors() {
        let mut dec = Decoder::default();
        // Index 0; past both tables; cut short; a size update after a field or above
        // 4096; an integer without end; a string longer than the block.
        for (hex, e) in [
            ("80", DecodeError::BadIndex),
            ("be", DecodeError::BadIndex),
            ("41", DecodeError::Truncated),
            ("82 20", DecodeError::SizeUpdate),
            ("3f e2 1f", DecodeError::SizeUpdate),
            ("ff ff ff", DecodeError::Truncated),
            ("ff 80 80 80 80 80 80 80 80 80 80 01", DecodeError::Overflow),
            ("ff ff ff ff ff 7f", DecodeError::Overflow),
            ("41 05 61", DecodeError::Truncated),
            // Huffman: EOS itself (30 ones), then 8 bits of padding.
            ("41 84 ff ff ff ff", DecodeError::Huffman),
            ("41 82 1f ff", DecodeError::Huffman),
            // Padding that is not all ones: 'a' (00011) then 000.
            ("41 81 18", DecodeError::Huffman),
        ] {
            assert_eq!(decoded(&mut dec, hex), Err(e), "{hex}");
        }
        // 'a' then 111 pads well.
        assert_eq!(
            decoded(&mut dec, "41 81 1f"),
            Ok(fields(&[(":authority", "a")]))
        );
    }
}
