//! Generates the gRPC code of `proto/rpcbench.proto` (messages, client and server) and
//! `proto/wstest.proto`, and the encoded file descriptor set that server reflection serves.
//!
//! The .proto is compiled by protox, a protobuf compiler in Rust, rather than by the
//! `protoc` binary that tonic-prost-build runs by default: a build then needs nothing
//! outside Cargo, on CI and on any machine.

use prost::Message as _;

/// The serde side of WSTest's messages (`proto/wstest.proto`), which every encoding but
/// protobuf writes through serde (crates/base/src/encoding/): the derives, WSTest's own field names
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
    const PROTO: &str = "../../proto/rpcbench.proto";
    const WSTEST: &str = "../../proto/wstest.proto";
    println!("cargo:rerun-if-changed={PROTO}");
    println!("cargo:rerun-if-changed={WSTEST}");
    let fds = protox::compile([PROTO, WSTEST], ["../../proto"])?;
    let out = std::path::PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("rpcbench_descriptor.bin"), fds.encode_to_vec())?;
    let mut build = tonic_prost_build::configure()
        .build_transport(false)
        .bytes(".rpcbench.v1");
    for (path, attribute) in wstest_serde() {
        build = if path.matches('.').count() == 3 {
            build.type_attribute(path, attribute)
        } else {
            build.field_attribute(path, attribute)
        };
    }
    build.compile_fds(fds)?;
    Ok(())
}
