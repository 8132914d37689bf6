use rpcbench::wire::{self, Request, Response};
use std::io::{Read, Write};
use std::net::TcpListener;
fn main() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    println!("listening tcp {}", l.local_addr().unwrap());
    for s in l.incoming() {
        let mut s = s.unwrap();
        std::thread::spawn(move || {
            s.set_nodelay(true).unwrap();
            let mut buf = vec![0u8; 65536];
            let mut have = 0;
            let mut out = Vec::new();
            loop {
                let n = match s.read(&mut buf[have..]) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => n,
                };
                have += n;
                let mut used_total = 0;
                while let Ok(Some((req, used))) =
                    wire::decode_frame::<Request>(&buf[used_total..have], 1 << 24)
                {
                    used_total += used;
                    let resp = Response {
                        seq: req.seq,
                        status: 0,
                        server_ns: 1,
                        payload: req.payload,
                    };
                    wire::encode_frame(&resp, &mut out);
                }
                buf.copy_within(used_total..have, 0);
                have -= used_total;
                s.write_all(&out).unwrap();
                out.clear();
            }
        });
    }
}
