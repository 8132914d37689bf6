//! `getsockopt(IPPROTO_TCP, TCP_INFO)`: the kernel's own view of one TCP connection
//! (smoothed RTT, minimum RTT, retransmits), as [`TcpInfo`].
//!
//! Neither `nix` 0.29 nor `socket2` wraps `TCP_INFO`, so this module makes the one
//! `getsockopt` call itself, into the `libc` crate's `tcp_info` (Linux's
//! `include/uapi/linux/tcp.h` layout, with the fields up to 6.x kernels). The kernel
//! copies at most the length it is given and says how much it wrote, so on an older
//! kernel the later fields are simply not filled, and [`TcpInfo`] says so with `None`.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd};

/// What one `TCP_INFO` read tells about a connection: the fields rpcbench reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TcpInfo {
    /// `tcpi_state`: the TCP state (1 = established; see `linux/tcp_states.h`).
    pub state: u8,
    /// `tcpi_retransmits`: retransmission timeouts in a row for the segment now
    /// outstanding (reset when it is acknowledged), not a total.
    pub retransmits: u8,
    /// `tcpi_rtt`: the smoothed round-trip time, in microseconds.
    pub rtt_us: u32,
    /// `tcpi_rttvar`: its mean deviation, in microseconds.
    pub rttvar_us: u32,
    /// `tcpi_lost`: segments the kernel currently believes lost.
    pub lost: u32,
    /// `tcpi_total_retrans`: segments retransmitted over the connection's life, the SYN
    /// (a connect's retried SYN counts here) and data alike.
    pub total_retrans: u32,
    /// `tcpi_bytes_acked`: bytes sent and acknowledged over the connection's life, the
    /// SYN's sequence number included (Linux 4.1+).
    pub bytes_acked: Option<u64>,
    /// `tcpi_bytes_received`: bytes received in order, the peer's SYN not counted (Linux
    /// 4.1+).
    pub bytes_received: Option<u64>,
    /// `tcpi_segs_out`: segments sent, retransmits included (Linux 4.2+).
    pub segs_out: Option<u32>,
    /// `tcpi_min_rtt`: the smallest RTT sample over a windowed filter, in microseconds
    /// (Linux 4.9+).
    pub min_rtt_us: Option<u32>,
    /// `tcpi_total_rto`: retransmission timeouts over the connection's life, a SYN's
    /// included (Linux 6.7+).
    pub total_rto: Option<u16>,
}

// The kernel's offsets (`pahole` of `struct tcp_info` on 6.x) of the fields read past
// the classic part: a layout mistake would read the wrong field, so it fails the build.
const _: () = {
    use std::mem::offset_of;
    assert!(offset_of!(libc::tcp_info, tcpi_total_retrans) == 100);
    assert!(offset_of!(libc::tcp_info, tcpi_bytes_acked) == 120);
    assert!(offset_of!(libc::tcp_info, tcpi_bytes_received) == 128);
    assert!(offset_of!(libc::tcp_info, tcpi_segs_out) == 136);
    assert!(offset_of!(libc::tcp_info, tcpi_min_rtt) == 148);
    assert!(offset_of!(libc::tcp_info, tcpi_total_rto) == 240);
};

/// Reads `TCP_INFO` of the TCP socket `fd`. Fails with the kernel's error on a socket
/// that is not TCP (`EOPNOTSUPP`) or not a socket (`ENOTSOCK`).
pub fn tcp_info(fd: BorrowedFd<'_>) -> std::io::Result<TcpInfo> {
    // SAFETY: `libc::tcp_info` is plain integers, for which all-zero bytes are a valid
    // value.
    let mut raw: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `fd` is an open descriptor for the borrow's lifetime; `raw` is a writable
    // buffer of `len` bytes that outlives the call, and the kernel writes at most `len`
    // bytes into it and stores the number written in `len`.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&raw mut raw).cast::<libc::c_void>(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let len = len as usize;
    use std::mem::offset_of;
    // Filled by the kernel when its answer reaches past the field.
    let has = |offset: usize, size: usize| len >= offset + size;
    Ok(TcpInfo {
        state: raw.tcpi_state,
        retransmits: raw.tcpi_retransmits,
        rtt_us: raw.tcpi_rtt,
        rttvar_us: raw.tcpi_rttvar,
        lost: raw.tcpi_lost,
        total_retrans: raw.tcpi_total_retrans,
        bytes_acked: has(offset_of!(libc::tcp_info, tcpi_bytes_acked), 8)
            .then_some(raw.tcpi_bytes_acked),
        bytes_received: has(offset_of!(libc::tcp_info, tcpi_bytes_received), 8)
            .then_some(raw.tcpi_bytes_received),
        segs_out: has(offset_of!(libc::tcp_info, tcpi_segs_out), 4).then_some(raw.tcpi_segs_out),
        min_rtt_us: has(offset_of!(libc::tcp_info, tcpi_min_rtt), 4).then_some(raw.tcpi_min_rtt),
        total_rto: has(offset_of!(libc::tcp_info, tcpi_total_rto), 2).then_some(raw.tcpi_total_rto),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsFd;

    #[test]
    fn reads_a_loopback_connection() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        for _ in 0..10 {
            client.write_all(b"ping").unwrap();
            let mut buf = [0u8; 4];
            server.read_exact(&mut buf).unwrap();
            server.write_all(&buf).unwrap();
            client.read_exact(&mut buf).unwrap();
        }
        let info = tcp_info(client.as_fd()).unwrap();
        assert_eq!(info.state, 1, "established");
        assert!(info.rtt_us > 0, "{info:?}");
        assert_eq!(info.total_retrans, 0, "{info:?}");
        // The handshake and ten requests, at least.
        assert!(info.segs_out.unwrap() >= 11, "{info:?}");
        let min = info.min_rtt_us.unwrap();
        assert!(
            min > 0 && min <= info.rtt_us + info.rttvar_us * 4,
            "{info:?}"
        );
    }

    #[test]
    fn refuses_what_is_not_tcp() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert!(tcp_info(a.as_fd()).is_err());
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        assert!(tcp_info(udp.as_fd()).is_err());
    }
}
