//! Generates the gRPC code of `proto/rpcbench.proto` (messages, client and server) and
//! the encoded file descriptor set that server reflection serves.
//!
//! The .proto is compiled by protox, a protobuf compiler in Rust, rather than by the
//! `protoc` binary that tonic-prost-build runs by default: a build then needs nothing
//! outside Cargo, on CI and on any machine.

use prost::Message as _;

/// Refuses to build without the system libcurl. Without it the curl crate quietly builds
/// a bundled libcurl (no TLS, another version), so the `curl-*` figures would depend on
/// which machine built rpcbench (issue #12).
///
/// Two checks, because one cannot see the other's case. pkg-config tells whether the
/// system libcurl is there now. But curl-sys's build script runs once and its output is
/// cached: a first build without `libcurl4-openssl-dev` builds the bundled copy, and a
/// build after installing the package keeps it. curl-sys says that it built the bundled
/// copy (`cargo:static=1`), which cargo hands to the build scripts of the packages that
/// depend on it directly as `DEP_CURL_STATIC` (why curl-sys is a direct dependency).
///
/// Both cases get one message with the whole fix, as a `cargo::error` (one line, no panic
/// and no backtrace hint): a first build on a machine without the package has already
/// built the bundled copy by the time this runs, so the message names the package and the
/// `cargo clean` that drops the copy (for this build's profile: `cargo clean -p curl-sys`
/// cleans only the dev profile, so after `cargo build --release` it removes nothing), and
/// the next build works. Returns false when the build must stop.
fn require_system_libcurl() -> bool {
    let found = std::process::Command::new("pkg-config")
        .args(["--exists", "libcurl"])
        .status()
        .is_ok_and(|s| s.success());
    let bundled = std::env::var_os("DEP_CURL_STATIC").is_some();
    let why = match (found, bundled) {
        (true, false) => return true,
        (false, _) => "pkg-config did not find the system libcurl",
        (true, true) => {
            "curl-sys built its bundled libcurl before the system one was installed, and keeps it"
        }
    };
    println!(
        "cargo::error=rpcbench links the system libcurl, but {why}. Fix: `sudo apt-get install \
         libcurl4-openssl-dev pkg-config` (Debian, Ubuntu; or set PKG_CONFIG_PATH to where \
         libcurl.pc is), then `{}`, then build again",
        clean_curl_sys()
    );
    false
}

/// The `cargo clean` that removes curl-sys's build in this build's profile, read from
/// where cargo builds it (`target/[TRIPLE/]PROFILE_DIR/build/...`): the dev profile's
/// directory is `debug`, release's `release`, a custom profile's its name.
fn clean_curl_sys() -> String {
    let out = std::env::var("OUT_DIR").unwrap_or_default();
    let parts: Vec<&str> = out.split(std::path::MAIN_SEPARATOR).collect();
    let profile = parts
        .iter()
        .rposition(|&p| p == "build")
        .and_then(|i| i.checked_sub(1))
        .map_or("debug", |i| parts[i]);
    match profile {
        "debug" => "cargo clean -p curl-sys".to_string(),
        "release" => "cargo clean --release -p curl-sys".to_string(),
        custom => format!("cargo clean --profile {custom} -p curl-sys"),
    }
}

/// The serde side of WSTest's messages (`proto/wstest.proto`), which every encoding but
/// protobuf writes through serde (src/encoding/): the derives, WSTest's own field names
/// where prost's differ (`Next`, `Strng`, ...), bytes as base64 text in JSON, and the
/// list's depth guard, which stops a list deeper than rpcbench's cap before recursing
/// further.
fn wstest_serde() -> Vec<(String, String)> {
    const DERIVE: &str = "#[derive(serde::Serialize, serde::Deserialize)]";
    const MESSAGES: [&str; 11] = [
        "TestStruct",
        "TestNode",
        "Synthetic",
        "EchoVoid",
        "EchoVoidResponse",
        "EchoStruct",
        "EchoStructResponse",
        "EchoList",
        "EchoListResponse",
        "EchoSynthetic",
        "EchoSyntheticResponse",
    ];
    let mut attributes: Vec<(String, String)> = MESSAGES
        .iter()
        .map(|m| (format!(".rpcbench.v1.{m}"), DERIVE.to_string()))
        .collect();
    let renamed = [
        ("Synthetic.Strng", "Strng"),
        ("Synthetic.Strct", "Strct"),
        ("EchoStructResponse.EchoStructResult", "EchoStructResult"),
        ("EchoListResponse.EchoListResult", "EchoListResult"),
        (
            "EchoSyntheticResponse.EchoSyntheticResult",
            "EchoSyntheticResult",
        ),
    ];
    for (field, name) in renamed {
        attributes.push((
            format!(".rpcbench.v1.{field}"),
            format!("#[serde(rename = \"{name}\")]"),
        ));
    }
    attributes.push((
        ".rpcbench.v1.Synthetic.Barray".to_string(),
        "#[serde(rename = \"Barray\", with = \"crate::encoding::wstest::base64_bytes\")]"
            .to_string(),
    ));
    attributes.push((
        ".rpcbench.v1.TestNode.Next".to_string(),
        "#[serde(rename = \"Next\", default, deserialize_with = \"crate::encoding::wstest::next_node\")]"
            .to_string(),
    ));
    attributes
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    if !require_system_libcurl() {
        return Ok(());
    }
    const PROTO: &str = "proto/rpcbench.proto";
    const WSTEST: &str = "proto/wstest.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    println!("cargo:rerun-if-changed={WSTEST}");
    let fds = protox::compile([PROTO, WSTEST], ["proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("rpcbench_descriptor.bin"), fds.encode_to_vec())?;
    let mut build = tonic_prost_build::configure()
        // The client and server are generic over the body and connector; no
        // tonic::transport conveniences are generated (we connect through our own
        // connector and serve on our own hyper listener).
        .build_transport(false)
        .bytes(".rpcbench.v1");
    for (path, attribute) in wstest_serde() {
        // `.package.Message` or `.package.Message.field`.
        build = if path.matches('.').count() == 3 {
            build.type_attribute(path, attribute)
        } else {
            build.field_attribute(path, attribute)
        };
    }
    build.compile_fds(fds)?;
    // Prometheus's exposition messages (prometheus/client_model, committed verbatim), for
    // the agent's protobuf /metrics with native histograms. Messages only.
    const METRICS: &str = "proto/io/prometheus/client/metrics.proto";
    println!("cargo:rerun-if-changed={METRICS}");
    let fds = protox::compile([METRICS], ["proto"])?;
    tonic_prost_build::configure()
        .build_client(false)
        .build_server(false)
        .build_transport(false)
        .compile_fds(fds)?;
    Ok(())
}
