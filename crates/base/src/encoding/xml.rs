//! What the two XML codecs (XML-RPC, SOAP) share: a pull reader over a body the
//! [`xml_guard`](super::xml_guard) passed, reading elements as the codec's own tags and
//! text with its references resolved, and the few writing helpers (escaping, xs:float and
//! base64 text). Both read straight into WSTest's types, with no tree in between.

use super::DecodeError;
use super::xml_guard::Guard;
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use bytes::Bytes;
use quick_xml::events::{BytesRef, Event};
use quick_xml::name::{QName, ResolveResult};
use quick_xml::reader::{NsReader, Reader};
use std::borrow::Cow;

/// An element opened (as the codec's tag `T`), or the open one closed.
pub(super) enum Item<T> {
    Open(T),
    Close,
}

/// What a `<value>`-like element holds: text up to its end (the end read), or an element.
pub(super) enum Content<'a, T> {
    Text(Cow<'a, str>),
    Open(T),
}

/// Reads `body` with `read`. A body `read` refuses for its shape (a bad call) is refused
/// for what the rest of it is where that comes first (not well formed, a DTD, too deep):
/// the guard then reads on to the end, as a pass of its own would have.
///
/// `namespaces` says whether the codec's names have any: SOAP's do; XML-RPC's do not, so
/// its body is read by a reader that spends nothing on resolving prefixes.
pub(super) fn read<'a, T>(
    codec: &'static str,
    body: &'a [u8],
    namespaces: bool,
    read: impl FnOnce(&mut Doc<'a>) -> Result<T, DecodeError>,
) -> Result<T, DecodeError> {
    let mut doc = Doc::open(codec, body, namespaces)?;
    match read(&mut doc) {
        Err(e @ (DecodeError::BadCall(_) | DecodeError::NoSuchOperation(_))) => {
            Err(doc.finish().err().unwrap_or(e))
        }
        other => other,
    }
}

/// A body being read, each event held to the [`Guard`] before it is acted on.
pub(super) struct Doc<'a> {
    reader: Source<'a>,
    guard: Guard,
    /// The codec's name, for errors.
    codec: &'static str,
}

impl<'a> Doc<'a> {
    /// `body`, to be read: UTF-8, or refused.
    fn open(codec: &'static str, body: &'a [u8], namespaces: bool) -> Result<Doc<'a>, DecodeError> {
        let text = super::xml_guard::utf8(codec, body)?;
        let reader = if namespaces {
            let mut reader = NsReader::from_str(text);
            reader.config_mut().expand_empty_elements = true;
            Source::Namespaced(reader)
        } else {
            let mut reader = Reader::from_str(text);
            reader.config_mut().expand_empty_elements = true;
            Source::Plain(reader)
        };
        Ok(Doc {
            reader,
            guard: Guard::new(codec),
            codec,
        })
    }

    fn malformed(&self, what: impl std::fmt::Display) -> DecodeError {
        self.guard.malformed(self.reader.buffer_position(), what)
    }

    /// Reads on to the body's end, held to the guard: past a message's end, nothing but
    /// comments and whitespace may follow it.
    pub fn finish(&mut self) -> Result<(), DecodeError> {
        while !matches!(self.guarded()?, Event::Eof) {}
        Ok(())
    }

    /// The next event, once the guard passed it (with empty elements expanded, the guard
    /// sees a Start and an End).
    fn guarded(&mut self) -> Result<Event<'a>, DecodeError> {
        let codec = self.codec;
        let event = self
            .reader
            .read_event()
            .map_err(|e| DecodeError::Malformed(codec, e.to_string()))?;
        self.guard.event(self.reader.buffer_position(), &event)?;
        Ok(event)
    }

    /// The next event, with the namespace an element is in (`None` for none), once the
    /// guard passed it.
    fn event(&mut self) -> Result<(Option<&str>, Event<'a>), DecodeError> {
        let event = self.guarded()?;
        let Event::Start(start) = &event else {
            return Ok((None, event));
        };
        let Source::Namespaced(reader) = &self.reader else {
            return Ok((None, event));
        };
        let ns = match reader.resolver().resolve_element(start.name()).0 {
            ResolveResult::Bound(n) => Some(n.0),
            ResolveResult::Unbound => None,
            ResolveResult::Unknown(prefix) => {
                return Err(DecodeError::Malformed(
                    self.codec,
                    format!("prefix {prefix:?} is bound to no namespace"),
                ));
            }
        };
        Ok((ns, event))
    }

    /// The next element opened (named by `tag` from its namespace and local name) or
    /// closed, skipping whitespace, comments and the like; text there is a bad call.
    pub fn next<T>(
        &mut self,
        tag: impl Fn(Option<&str>, &str) -> T,
    ) -> Result<Item<T>, DecodeError> {
        loop {
            let (ns, event) = self.event()?;
            match event {
                Event::Start(e) => return Ok(Item::Open(tag(ns, e.local_name().into_inner()))),
                Event::End(_) => return Ok(Item::Close),
                Event::Text(t) if t.trim_ascii().is_empty() => {}
                Event::Text(_) | Event::CData(_) | Event::GeneralRef(_) => {
                    return Err(DecodeError::BadCall("text where an element belongs".into()));
                }
                Event::Eof => return Err(self.malformed("cut short")),
                _ => {}
            }
        }
    }

    /// What the open element holds: its text up to its end, or its first element (text
    /// before it only whitespace): XML-RPC's `<value>`, whose string may be untagged.
    pub fn content<T>(
        &mut self,
        tag: impl Fn(Option<&str>, &str) -> T,
    ) -> Result<Content<'a, T>, DecodeError> {
        let mut text: Cow<'a, str> = Cow::Borrowed("");
        loop {
            let (ns, event) = self.event()?;
            let piece = match event {
                Event::Start(e) if text.trim_ascii().is_empty() => {
                    return Ok(Content::Open(tag(ns, e.local_name().into_inner())));
                }
                Event::Start(_) => {
                    return Err(DecodeError::BadCall(
                        "text and an element in one value".into(),
                    ));
                }
                Event::End(_) => return Ok(Content::Text(text)),
                other => match self.piece(other)? {
                    Some(piece) => piece,
                    None => continue,
                },
            };
            append(&mut text, piece);
        }
    }

    /// The text of the open element, up to its end: character and predefined references
    /// resolved (the guard refused any other), CDATA as it is.
    pub fn text(&mut self) -> Result<Cow<'a, str>, DecodeError> {
        let mut text: Cow<'a, str> = Cow::Borrowed("");
        loop {
            let (_, event) = self.event()?;
            let piece = match event {
                Event::End(_) => return Ok(text),
                Event::Start(_) => {
                    return Err(DecodeError::BadCall("an element inside a value".into()));
                }
                other => match self.piece(other)? {
                    Some(piece) => piece,
                    None => continue,
                },
            };
            append(&mut text, piece);
        }
    }

    /// The text an event adds, if any.
    fn piece(&self, event: Event<'a>) -> Result<Option<Cow<'a, str>>, DecodeError> {
        Ok(Some(match event {
            Event::Text(t) => t.xml10_content(),
            Event::CData(c) => c.into_inner(),
            Event::GeneralRef(r) => self.reference(&r)?,
            Event::Eof => return Err(self.malformed("cut short")),
            _ => return Ok(None),
        }))
    }

    /// A predefined entity (text of its own, nothing allocated) or a character reference
    /// (the guard refused any other).
    fn reference(&self, r: &BytesRef) -> Result<Cow<'static, str>, DecodeError> {
        Ok(Cow::Borrowed(match &**r {
            "lt" => "<",
            "gt" => ">",
            "amp" => "&",
            "apos" => "'",
            "quot" => "\"",
            _ => match r.resolve_char_ref() {
                Ok(Some(c)) => return Ok(Cow::Owned(c.to_string())),
                _ => return Err(self.malformed(format!("entity &{};", &**r))),
            },
        }))
    }

    /// Skips the rest of the element just opened.
    pub fn skip(&mut self) -> Result<(), DecodeError> {
        let mut depth = 1;
        while depth > 0 {
            match self.event()?.1 {
                Event::Start(_) => depth += 1,
                Event::End(_) => depth -= 1,
                Event::Eof => return Err(self.malformed("cut short")),
                _ => {}
            }
        }
        Ok(())
    }

    /// The namespace and local name of `qname` (a SOAP faultcode) where the reader is.
    pub fn resolve<'n>(&self, qname: &'n str) -> (Option<&str>, &'n str) {
        let Source::Namespaced(reader) = &self.reader else {
            return (None, QName(qname).local_name().into_inner());
        };
        let (ns, local) = reader.resolver().resolve_element(QName(qname));
        let ns = match ns {
            ResolveResult::Bound(n) => Some(n.0),
            _ => None,
        };
        (ns, local.into_inner())
    }
}

/// The reader under a [`Doc`]: one that resolves namespace prefixes, or one that does not.
enum Source<'a> {
    Plain(Reader<&'a [u8]>),
    Namespaced(NsReader<&'a [u8]>),
}

impl<'a> Source<'a> {
    fn read_event(&mut self) -> quick_xml::Result<Event<'a>> {
        match self {
            Source::Plain(r) => r.read_event(),
            Source::Namespaced(r) => r.read_event(),
        }
    }

    fn buffer_position(&self) -> u64 {
        match self {
            Source::Plain(r) => r.buffer_position(),
            Source::Namespaced(r) => r.buffer_position(),
        }
    }
}

fn append<'a>(text: &mut Cow<'a, str>, piece: Cow<'a, str>) {
    if text.is_empty() {
        *text = piece;
    } else {
        text.to_mut().push_str(&piece);
    }
}

/// `text` escaped for element content: `&`, `<` and `>`.
pub(super) fn escape(out: &mut Vec<u8>, text: &str) {
    let mut rest = text.as_bytes();
    while let Some(at) = rest.iter().position(|b| matches!(b, b'&' | b'<' | b'>')) {
        out.extend_from_slice(&rest[..at]);
        out.extend_from_slice(match rest[at] {
            b'&' => b"&amp;",
            b'<' => b"&lt;",
            _ => b"&gt;",
        });
        rest = &rest[at + 1..];
    }
    out.extend_from_slice(rest);
}

/// `bytes` as base64 text, appended to `out`.
pub(super) fn write_base64(out: &mut Vec<u8>, bytes: &[u8]) {
    let start = out.len();
    out.resize(start + bytes.len().div_ceil(3) * 4, 0);
    let written = STANDARD.encode_slice(bytes, &mut out[start..]).unwrap_or(0);
    out.truncate(start + written);
}

/// Base64 text, whitespace ignored (Python wraps it every 76 characters).
pub(super) fn read_base64(text: &str) -> Result<Bytes, DecodeError> {
    let packed: Cow<str> = if text.bytes().any(|b| b.is_ascii_whitespace()) {
        Cow::Owned(text.chars().filter(|c| !c.is_ascii_whitespace()).collect())
    } else {
        Cow::Borrowed(text)
    };
    STANDARD
        .decode(packed.as_bytes())
        .map(Bytes::from)
        .map_err(|e| DecodeError::BadCall(format!("not base64: {e}")))
}

/// An xs:int (or an XML-RPC `<i4>`).
pub(super) fn read_int(text: &str) -> Result<i32, DecodeError> {
    text.trim()
        .parse()
        .map_err(|_| DecodeError::BadCall(format!("{:?} is not a 32-bit int", short(text))))
}

/// A float as text: decimal digits, sign, point and exponent (xs:float's `INF`, `-INF`,
/// `NaN` too); the nearest f32 of the value, which for text an f32 wrote is that f32.
pub(super) fn read_float(text: &str) -> Result<f32, DecodeError> {
    let bad = || DecodeError::BadCall(format!("{:?} is not a float", short(text)));
    match text.trim() {
        "INF" => Ok(f32::INFINITY),
        "-INF" => Ok(f32::NEG_INFINITY),
        "NaN" => Ok(f32::NAN),
        t if !t.is_empty()
            && t.bytes()
                .all(|b| b.is_ascii_digit() || b"+-.eE".contains(&b)) =>
        {
            t.parse().map_err(|_| bad())
        }
        _ => Err(bad()),
    }
}

/// An f32 as the shortest text that reads back to the same f32 (`0.1`), or xs:float's
/// words for what is not finite.
pub(super) struct Float(pub f32);

impl std::fmt::Display for Float {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            v if v.is_nan() => f.write_str("NaN"),
            v if v == f32::INFINITY => f.write_str("INF"),
            v if v == f32::NEG_INFINITY => f.write_str("-INF"),
            v => write!(f, "{v}"),
        }
    }
}

/// At most 32 characters of `text`, for an error.
fn short(text: &str) -> &str {
    text.char_indices()
        .nth(32)
        .map_or(text, |(at, _)| &text[..at])
}
