//! A minimal QUIC client on quinn alone, the crate rpcbench's `quic` transport uses: to
//! tell what quinn costs a call from what rpcbench adds. No runner, no histogram, no
//! phases, no timeouts: one connection, one bidirectional stream per call, nothing else.
//!
//! ```text
//! RPCBENCH_CA=ca.pem cargo run --release --example quic_ref -- ADDR N [--payload BYTES] [--warmup W]
//! ```
//!
//! Connects to `ADDR` (an `rpcbench-echo --quic` port, `127.0.0.1:7443`) with ALPN
//! `rpcbench`, verifying the server against the CA in the file `RPCBENCH_CA` (the echo
//! server's `--ca-out`), makes W warm-up calls (default 200) and then N timed calls on
//! that one connection, one stream at a time: the request frame with a 64-byte payload,
//! the stream finished, the response frame read to the stream's end, as rpcbench's `quic`
//! sends it. Each reply is checked: the same seq, status 0, the payload back. Each call is
//! timed with `std::time::Instant` from before the stream is opened to after the whole
//! reply is read, which is what rpcbench times for its persistent transports. The last
//! line is `mean_us <mean>`, over the N timed calls.

mod common;

use rpcbench::wire::{self, Request, Response};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: RPCBENCH_CA=PEM quic_ref ADDR N [--payload BYTES] [--warmup W]";

fn main() -> ExitCode {
    common::client_only("quic_ref", USAGE, run)
}

fn run(args: &[String]) -> Result<Duration, String> {
    let (addr, args, rt) = common::client_setup(args, 200, USAGE)?;
    let (calls, warmup) = (args.calls, args.warmup);
    let payload = args.payload();
    let config = client_config()?;
    rt.block_on(async move {
        let local = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        let endpoint = quinn::Endpoint::client(local).map_err(|e| format!("bind: {e}"))?;
        let conn = endpoint
            .connect_with(config, addr, &addr.ip().to_string())
            .map_err(|e| format!("connect: {e}"))?
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let mut total = Duration::ZERO;
        for seq in 0..warmup + calls {
            let started = Instant::now();
            call(&conn, seq, &payload).await?;
            if seq >= warmup {
                total += started.elapsed();
            }
        }
        conn.close(0u32.into(), b"");
        endpoint.wait_idle().await;
        Ok(total.div_f64(calls as f64))
    })
}

/// TLS 1.3 with ALPN `rpcbench`, trusting the CA in the file `RPCBENCH_CA`.
fn client_config() -> Result<quinn::ClientConfig, String> {
    let path = std::env::var("RPCBENCH_CA").map_err(|_| format!("RPCBENCH_CA unset\n{USAGE}"))?;
    let ca = CertificateDer::from_pem_file(&path).map_err(|e| format!("{path}: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca).map_err(|e| format!("{path}: {e}"))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|e| e.to_string())?
        .with_root_certificates(roots)
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"rpcbench".to_vec()];
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// One call: a new stream, the request frame, the whole reply read and checked.
async fn call(conn: &quinn::Connection, seq: u64, payload: &[u8]) -> Result<(), String> {
    let request = Request {
        seq,
        reply_len: None,
        delay_us: 0,
        payload: payload.to_vec(),
    };
    let mut frame = Vec::new();
    wire::encode_frame(&request, &mut frame);
    let (mut send, mut recv) = conn.open_bi().await.map_err(|e| format!("stream: {e}"))?;
    send.write_all(&frame)
        .await
        .map_err(|e| format!("send: {e}"))?;
    send.finish().map_err(|e| format!("finish: {e}"))?;
    let reply = recv
        .read_to_end(wire::DEFAULT_MAX_FRAME as usize)
        .await
        .map_err(|e| format!("reply: {e}"))?;
    let (resp, _): (Response, _) = wire::decode_frame(&reply, wire::DEFAULT_MAX_FRAME)
        .map_err(|e| format!("reply: {e}"))?
        .ok_or("reply: cut short")?;
    if resp.seq != seq || resp.status != 0 || resp.payload != payload {
        return Err(format!("call {seq}: a reply that is not its echo"));
    }
    Ok(())
}
