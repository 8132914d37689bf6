//! The rules every XML body (XML-RPC, SOAP) is held to, event by event, before its codec
//! acts on the event: a [`Guard`] holds nothing but a few counters, so that what an XML
//! parser can be made to do by a hostile body never starts. The codecs' reader
//! (`xml.rs`) shows it each event as it reads it, so a body is parsed once.
//!
//! - **No DTD.** Any `<!DOCTYPE` is refused at its event ([`DecodeError::Doctype`]): the
//!   billion laughs (entities of entities, 10^9 expansions from under 1 KiB), quadratic
//!   blowup (one large entity referenced many times), `SYSTEM "file:///etc/passwd"` and
//!   parameter entities naming a URL all live in a DTD. Nothing is expanded, no file is
//!   opened, no connection made. SOAP 1.1 forbids DTDs anyway; XML-RPC never needs one.
//! - **Only the five predefined entities and character references** (`&lt;`, `&#233;`):
//!   without a DTD any other name is undeclared, so not well formed.
//! - **At most [`MAX_DEPTH`] elements deep**, counted here before a codec's recursive descent
//!   goes that far (100,000 nested `<value><array><data>` would take the stack).
//! - **Well formed**: matching end tags, one root, UTF-8 throughout (a declaration naming
//!   another encoding is refused as such, [`DecodeError::Charset`]).

use super::DecodeError;
use quick_xml::events::Event;

/// The deepest element nesting an XML body may have. WSTest's deepest call, an
/// `EchoList` of 64 nodes in XML-RPC, is about 200 elements deep (three per node plus the
/// envelope); SOAP's is about 70.
pub const MAX_DEPTH: usize = 300;

/// `body` as text, or why it is not UTF-8.
pub fn utf8<'a>(codec: &'static str, body: &'a [u8]) -> Result<&'a str, DecodeError> {
    std::str::from_utf8(body).map_err(|e| {
        DecodeError::Malformed(codec, format!("not UTF-8 at byte {}", e.valid_up_to()))
    })
}

/// The rules of this module, held to one event at a time: what a reader shows it, in
/// order, from the first event to `Eof`.
#[derive(Debug)]
pub struct Guard {
    codec: &'static str,
    depth: usize,
    roots: usize,
}

impl Guard {
    /// A guard for a body of `codec`.
    pub fn new(codec: &'static str) -> Guard {
        Guard {
            codec,
            depth: 0,
            roots: 0,
        }
    }

    /// A reader's error at byte `at`, as the malformed body it means.
    pub fn malformed(&self, at: u64, what: impl std::fmt::Display) -> DecodeError {
        DecodeError::Malformed(self.codec, format!("{what} at byte {at}"))
    }

    /// Holds `event`, read up to byte `at`, to the rules.
    pub fn event(&mut self, at: u64, event: &Event) -> Result<(), DecodeError> {
        match event {
            Event::DocType(_) => {
                return Err(DecodeError::Doctype(format!(
                    "a DOCTYPE at byte {at}: DTDs are refused unread"
                )));
            }
            Event::Decl(decl) => match decl.encoding() {
                Some(Ok(name))
                    if !name.eq_ignore_ascii_case("utf-8")
                        && !name.eq_ignore_ascii_case("utf8") =>
                {
                    return Err(DecodeError::Charset(format!(
                        "the XML declaration names encoding {name:?}; this server reads UTF-8 only"
                    )));
                }
                _ => {}
            },
            Event::Start(_) | Event::Empty(_) if self.depth == 0 && self.roots > 0 => {
                return Err(self.malformed(at, "a second root element"));
            }
            Event::Start(_) => {
                self.depth += 1;
                if self.depth == 1 {
                    self.roots += 1;
                }
                if self.depth > MAX_DEPTH {
                    return Err(DecodeError::TooDeep(format!(
                        "XML nested deeper than {MAX_DEPTH} elements"
                    )));
                }
            }
            Event::Empty(_) if self.depth == 0 => self.roots += 1,
            Event::End(_) => self.depth = self.depth.saturating_sub(1),
            Event::GeneralRef(r) => {
                let known = matches!(&**r, "lt" | "gt" | "amp" | "apos" | "quot");
                if !known && !matches!(r.resolve_char_ref(), Ok(Some(_))) {
                    return Err(self.malformed(at, format_args!("an undeclared entity &{};", &**r)));
                }
            }
            Event::Text(t) if self.depth == 0 && !t.trim_ascii().is_empty() => {
                return Err(self.malformed(at, "text outside the root element"));
            }
            Event::Eof if self.roots == 0 => return Err(self.malformed(at, "no element")),
            Event::Eof if self.depth > 0 => return Err(self.malformed(at, "cut short")),
            _ => {}
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use quick_xml::reader::Reader;

    /// The guard over the whole of `body`, in a pass of its own: the elements it holds.
    fn check(codec: &'static str, body: &[u8]) -> Result<usize, DecodeError> {
        let text = utf8(codec, body)?;
        let mut reader = Reader::from_str(text);
        let mut guard = Guard::new(codec);
        let mut elements = 0;
        loop {
            let event = reader
                .read_event()
                .map_err(|e| guard.malformed(reader.buffer_position(), e))?;
            let end = matches!(event, Event::Eof);
            elements += usize::from(matches!(event, Event::Start(_) | Event::Empty(_)));
            guard.event(reader.buffer_position(), &event)?;
            if end {
                return Ok(elements);
            }
        }
    }

    fn kind(body: &str) -> &'static str {
        match check("xml", body.as_bytes()) {
            Ok(_) => "ok",
            Err(DecodeError::Doctype(_)) => "doctype",
            Err(DecodeError::TooDeep(_)) => "deep",
            Err(DecodeError::Charset(_)) => "charset",
            Err(DecodeError::Malformed(..)) => "malformed",
            Err(e) => panic!("unexpected {e}"),
        }
    }

    #[test]
    fn well_formed_bodies_pass_and_their_elements_are_counted() {
        let body =
            "<?xml version='1.0' encoding='UTF-8'?>\n<a x='1'><b>&lt;&#233;&#xE9;</b><c/></a>\n";
        assert_eq!(check("xml", body.as_bytes()), Ok(3));
        assert_eq!(kind("<a/>"), "ok");
        assert_eq!(kind("<!-- hi --><a><![CDATA[<&>]]></a>"), "ok");
    }

    #[test]
    fn every_dtd_is_refused_at_its_event() {
        let laughs = {
            let mut d =
                String::from("<?xml version=\"1.0\"?>\n<!DOCTYPE lolz [\n<!ENTITY lol \"lol\">\n");
            for n in 1..10 {
                let refs = format!("&lol{};", n - 1)
                    .repeat(10)
                    .replace("&lol0;", "&lol;");
                d += &format!("<!ENTITY lol{n} \"{refs}\">\n");
            }
            d + "]>\n<lolz>&lol9;</lolz>"
        };
        assert!(laughs.len() < 1024, "{}", laughs.len());
        let quadratic = format!(
            "<!DOCTYPE q [<!ENTITY a \"{}\">]><q>{}</q>",
            "x".repeat(64 << 10),
            "&a;".repeat(16_000)
        );
        for body in [
            laughs.as_str(),
            quadratic.as_str(),
            "<!DOCTYPE r SYSTEM \"file:///etc/passwd\"><r>&x;</r>",
            "<!DOCTYPE r [<!ENTITY % p SYSTEM \"http://127.0.0.1:9/x.dtd\"> %p;]><r/>",
        ] {
            assert_eq!(kind(body), "doctype");
        }
    }

    #[test]
    fn depth_is_capped_before_any_tree_is_built() {
        let nested = |n: usize| "<a>".repeat(n) + &"</a>".repeat(n);
        assert_eq!(kind(&nested(MAX_DEPTH)), "ok");
        assert_eq!(kind(&nested(MAX_DEPTH + 1)), "deep");
        let hostile = "<value><array><data>".repeat(100_000);
        assert_eq!(kind(&hostile), "deep");
    }

    #[test]
    fn what_is_not_well_formed_is_malformed() {
        for body in [
            "",
            "   ",
            "<a>",
            "<a></b>",
            "<a/><b/>",
            "<a/>tail",
            "<a>&nbsp;</a>",
            "<a>&#0;</a>",
            "<a",
        ] {
            assert_eq!(kind(body), "malformed", "{body:?}");
        }
        assert!(matches!(
            check("xml", b"<a>\xff</a>"),
            Err(DecodeError::Malformed(..))
        ));
        assert_eq!(
            kind("<?xml version='1.0' encoding='ISO-8859-1'?><a/>"),
            "charset"
        );
        assert_eq!(kind("<?xml version='1.0' encoding='utf-8'?><a/>"), "ok");
    }
}
