//! Each codec alone, in-process: what encoding a WSTest request and decoding its reply
//! costs with no transport, no envelope and no copies around them, the figure
//! `report/encodings.sh` holds each codec's in-call `encode` + `decode` against (goal G4:
//! within 1.5 times), as djkoloski's rust_serialization_benchmark times formats.
//!
//! ```text
//! cargo run --release --example codec_time -- ENCODING MESSAGE [ITERATIONS]
//! ```
//!
//! Makes the message of seq 1, then for ITERATIONS (default 10,000) times, with the
//! monotonic clock around the codec only: encodes the request into a buffer kept between
//! iterations (as a call's payload buffer is), and decodes the reply (the server's echo,
//! encoded once beforehand) and checks it echoes the request (as the runner does). Prints
//! `encode_us <mean> decode_us <mean>`.

use rpcbench::encoding::{CallId, EncodingKind, Message};
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || -> ! {
        eprintln!("usage: codec_time ENCODING MESSAGE [ITERATIONS]");
        std::process::exit(2)
    };
    let (Some(encoding), Some(message)) = (args.first(), args.get(1)) else {
        usage()
    };
    let encoding: EncodingKind = encoding.parse().unwrap_or_else(|e| {
        eprintln!("codec_time: {e}");
        std::process::exit(2)
    });
    let message: Message = message.parse().unwrap_or_else(|e| {
        eprintln!("codec_time: {e}");
        std::process::exit(2)
    });
    let iterations: u32 = args
        .get(2)
        .map_or(10_000, |n| n.parse().unwrap_or_else(|_| usage()));
    let request = message.request(1);
    let id = CallId::of_call(1);
    let mut reply_body = Vec::new();
    encoding
        .encode_reply(&request.clone().into_reply(), &id, &mut reply_body)
        .expect("the reply encodes");
    let (mut encode, mut decode) = (Duration::ZERO, Duration::ZERO);
    let mut out = Vec::new();
    for _ in 0..iterations {
        out.clear();
        let started = Instant::now();
        encoding
            .encode_request(&request, &id, &mut out)
            .expect("the request encodes");
        encode += started.elapsed();
        let started = Instant::now();
        let (back, _) = encoding
            .decode_reply(message.operation(), &reply_body)
            .expect("the reply decodes");
        decode += started.elapsed();
        assert!(back.echoes(&request), "the reply echoes the request");
        std::hint::black_box(&out);
    }
    let mean = |d: Duration| d.as_secs_f64() * 1e6 / f64::from(iterations);
    println!("encode_us {} decode_us {}", mean(encode), mean(decode));
}
