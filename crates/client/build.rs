//! Refuses to build the client, whose curl transports measure the system libcurl, with a
//! libcurl the curl crate bundled instead.

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
/// the next build works.
fn require_system_libcurl() {
    let found = std::process::Command::new("pkg-config")
        .args(["--exists", "libcurl"])
        .status()
        .is_ok_and(|s| s.success());
    let bundled = std::env::var_os("DEP_CURL_STATIC").is_some();
    let why = match (found, bundled) {
        (true, false) => return,
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

fn main() {
    require_system_libcurl();
}
