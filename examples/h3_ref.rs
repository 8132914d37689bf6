//! A minimal HTTP/3 client on hyperium's `h3` over `h3-quinn` alone, the crates rpcbench's
//! `h3` transport uses: to tell what they cost a call from what rpcbench adds. No runner,
//! no histogram, no phases, no timeouts: the canonical `h3` client loop (the connection
//! driven by a task of its own on a current-thread runtime), nothing else.
//!
//! ```text
//! RPCBENCH_CA=ca.pem cargo run --release --example h3_ref -- ADDR N [--payload BYTES] [--warmup W]
//! ```
//!
//! Connects to `ADDR` (an `rpcbench-echo --quic` port, `127.0.0.1:7443`) with ALPN `h3`,
//! verifying the server against the CA in the file `RPCBENCH_CA` (the echo server's
//! `--ca-out`), makes W warm-up calls (default 200) and then N timed calls on that one
//! connection, one request at a time: `POST /echo` with a 64-byte payload and the call's
//! `x-rpcbench-seq` header, as rpcbench's `h3` sends it. Each reply is checked: status
//! 200, the same seq header, the payload back. Each call is timed with
//! `std::time::Instant` from before the request is sent to after the whole reply is read,
//! which is what rpcbench times for its persistent transports. The last line is
//! `mean_us <mean>`, over the N timed calls.

mod common;

use bytes::{Buf, Bytes};
use rpcbench::wire::SEQ_HEADER;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

const USAGE: &str = "usage: RPCBENCH_CA=PEM h3_ref ADDR N [--payload BYTES] [--warmup W]";

type SendRequest = h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>;

fn main() -> ExitCode {
    common::client_only("h3_ref", USAGE, run)
}

fn run(args: &[String]) -> Result<Duration, String> {
    let (addr, args, rt) = common::client_setup(args, 200, USAGE)?;
    let (calls, warmup) = (args.calls, args.warmup);
    let payload = Bytes::from(args.payload());
    let config = client_config()?;
    rt.block_on(async move {
        let local = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        let endpoint = quinn::Endpoint::client(local).map_err(|e| format!("bind: {e}"))?;
        let conn = endpoint
            .connect_with(config, addr, &addr.ip().to_string())
            .map_err(|e| format!("connect: {e}"))?
            .await
            .map_err(|e| format!("handshake: {e}"))?;
        let (mut driver, mut send) = h3::client::new(h3_quinn::Connection::new(conn))
            .await
            .map_err(|e| format!("h3: {e}"))?;
        let driving = tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        let uri: hyper::Uri = format!("https://{addr}/echo")
            .parse()
            .map_err(|e| format!("{e}"))?;
        let mut total = Duration::ZERO;
        for seq in 0..warmup + calls {
            let started = Instant::now();
            call(&mut send, &uri, seq, &payload).await?;
            if seq >= warmup {
                total += started.elapsed();
            }
        }
        drop(send);
        driving.abort();
        endpoint.close(0x100u32.into(), b"");
        endpoint.wait_idle().await;
        Ok(total.div_f64(calls as f64))
    })
}

/// TLS 1.3 with ALPN `h3`, trusting the CA in the file `RPCBENCH_CA`.
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
    tls.alpn_protocols = vec![b"h3".to_vec()];
    let crypto =
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).map_err(|e| e.to_string())?;
    Ok(quinn::ClientConfig::new(Arc::new(crypto)))
}

/// One call: `POST /echo` with its seq, the whole reply read and checked.
async fn call(
    send: &mut SendRequest,
    uri: &hyper::Uri,
    seq: u64,
    payload: &Bytes,
) -> Result<(), String> {
    let req = hyper::Request::post(uri.clone())
        .header(SEQ_HEADER, seq)
        .body(())
        .map_err(|e| e.to_string())?;
    let mut stream = send
        .send_request(req)
        .await
        .map_err(|e| format!("send: {e}"))?;
    stream
        .send_data(payload.clone())
        .await
        .map_err(|e| format!("send: {e}"))?;
    stream.finish().await.map_err(|e| format!("finish: {e}"))?;
    let resp = stream
        .recv_response()
        .await
        .map_err(|e| format!("reply: {e}"))?;
    let mut body = Vec::with_capacity(payload.len());
    while let Some(mut chunk) = stream
        .recv_data()
        .await
        .map_err(|e| format!("reply: {e}"))?
    {
        while chunk.has_remaining() {
            let part = chunk.chunk();
            body.extend_from_slice(part);
            let n = part.len();
            chunk.advance(n);
        }
    }
    let seq_back = resp.headers().get(SEQ_HEADER).and_then(|v| v.to_str().ok());
    if resp.status() != 200 || seq_back != Some(&seq.to_string()) || body != payload[..] {
        return Err(format!("call {seq}: a reply that is not its echo"));
    }
    Ok(())
}
