//! Thin, safe wrappers over the few system calls that neither `std`, `nix` nor `socket2`
//! wraps. The only place in the crate where `unsafe` code is allowed; each call is one
//! small function with its safety argument beside it.

pub mod tcp_info;
