//! The layers of `src/lib.rs`'s map, held where the compiler cannot hold them. Between
//! crates Cargo refuses an import of a crate above (each `Cargo.toml` lists only the crates
//! below). Inside a crate, this test reads the code's paths (`crate::x`, a comment's words
//! left out) and finds no module that names one of a higher layer, and no circle of
//! modules naming each other; and no `mod.rs` grows past a map and shared types.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Every top-level module, by crate directory, with its layer in the map (1 kinds and
/// units ... 8 CLI).
const LAYERS: [(&str, &[(&str, u8)]); 7] = [
    (
        "crates/base",
        &[
            ("units", 1),
            ("wire", 1),
            ("encoding", 1),
            ("proto", 1),
            ("host", 1),
            ("placement", 1),
            ("measure", 1),
            ("sys", 1),
            ("logs", 1),
            ("link", 1),
            ("listener", 1),
        ],
    ),
    ("crates/server", &[("server", 2), ("tcpinfo", 2)]),
    (
        "crates/client",
        &[
            ("dnsdiag", 3),
            ("resolve", 3),
            ("transport", 3),
            ("runner", 3),
            ("preflight", 3),
        ],
    ),
    ("crates/report", &[("report", 4)]),
    (
        "crates/analysis",
        &[
            ("physics", 5),
            ("model", 5),
            ("compare", 5),
            ("analysis", 5),
        ],
    ),
    ("crates/render", &[("render", 6), ("site", 6)]),
    (".", &[("bench", 7), ("sweep", 7), ("agent", 7), ("cli", 8)]),
];

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// The `.rs` files under `dir`, recursively.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut dirs = vec![dir.to_path_buf()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                dirs.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The code of a file without its comments (line comments and doc comments; the code has
/// no block comments).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            // `//` inside a string literal ("http://") is rare in a path's line; cutting
            // there only drops words, never adds a path.
            Some(at) => &l[..at],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The top-level modules a file's code names as `crate::x`.
fn named(code: &str) -> BTreeSet<String> {
    code.match_indices("crate::")
        .filter(|(at, _)| {
            // Not the tail of another path (`rpcbench_base::crate::` cannot occur, but a
            // word like `subcrate::` could).
            !code[..*at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
        .map(|(at, _)| {
            code[at + "crate::".len()..]
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect::<String>()
        })
        .filter(|m| !m.is_empty())
        .collect()
}

/// Each crate's modules and, for each, the modules of the same crate or below its code
/// names.
fn arrows() -> Vec<(&'static str, BTreeMap<String, BTreeSet<String>>)> {
    LAYERS
        .iter()
        .map(|(dir, modules)| {
            let src = root().join(dir).join("src");
            let mut out: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
            for file in rust_files(&src) {
                let rel = file.strip_prefix(&src).unwrap();
                let first = rel.components().next().unwrap().as_os_str();
                let module = first.to_string_lossy().trim_end_matches(".rs").to_string();
                if module == "lib" {
                    continue;
                }
                assert!(
                    modules.iter().any(|(m, _)| *m == module),
                    "{}: a module the layer map of this test does not place",
                    file.display()
                );
                let text = std::fs::read_to_string(&file).unwrap();
                let names = named(&code(&text));
                let entry = out.entry(module.clone()).or_default();
                entry.extend(names.into_iter().filter(|n| *n != module));
            }
            (*dir, out)
        })
        .collect()
}

fn layer_of(module: &str) -> Option<u8> {
    LAYERS
        .iter()
        .flat_map(|(_, ms)| ms.iter())
        .find(|(m, _)| *m == module)
        .map(|&(_, l)| l)
}

#[test]
fn no_module_names_one_of_a_higher_layer() {
    let mut bad = Vec::new();
    let mut checked = 0;
    for (dir, modules) in arrows() {
        for (module, names) in &modules {
            let own = layer_of(module).unwrap();
            for n in names {
                checked += 1;
                match layer_of(n) {
                    Some(l) if l <= own => {}
                    Some(l) => bad.push(format!(
                        "{dir}: {module} (layer {own}) names {n} (layer {l})"
                    )),
                    None => {} // a re-export at the crate root (`crate::init_tracing`)
                }
            }
        }
    }
    assert!(checked > 50, "only {checked} arrows read");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn no_circle_of_modules_inside_a_crate() {
    for (dir, modules) in arrows() {
        // Depth-first, each module's arrows restricted to its own crate.
        fn visit(
            m: &str,
            modules: &BTreeMap<String, BTreeSet<String>>,
            path: &mut Vec<String>,
            done: &mut BTreeSet<String>,
        ) -> Option<Vec<String>> {
            if let Some(at) = path.iter().position(|p| p == m) {
                let mut circle = path[at..].to_vec();
                circle.push(m.to_string());
                return Some(circle);
            }
            if done.contains(m) {
                return None;
            }
            path.push(m.to_string());
            for n in modules.get(m).into_iter().flatten() {
                if modules.contains_key(n)
                    && let Some(c) = visit(n, modules, path, done)
                {
                    return Some(c);
                }
            }
            path.pop();
            done.insert(m.to_string());
            None
        }
        let mut done = BTreeSet::new();
        for m in modules.keys() {
            if let Some(circle) = visit(m, &modules, &mut Vec::new(), &mut done) {
                panic!("{dir}: a circle of modules: {}", circle.join(" -> "));
            }
        }
    }
}

#[test]
fn the_path_reader_sees_what_it_should() {
    let text = "use crate::wire::Frame; // crate::cli\n/// [`crate::sweep`]\nfn f() { crate::units::x(); }";
    assert_eq!(
        named(&code(text)),
        ["units", "wire"].map(String::from).into_iter().collect()
    );
}

/// A `mod.rs` is a folder's map and the types its files share, not a concern of its own:
/// none is longer than 400 lines.
#[test]
fn no_mod_rs_holds_more_than_a_map() {
    let mut dirs = vec![root().join("src")];
    for c in std::fs::read_dir(root().join("crates")).unwrap() {
        dirs.push(c.unwrap().path().join("src"));
    }
    let mut long = Vec::new();
    let mut seen = 0;
    for dir in dirs {
        for file in rust_files(&dir) {
            if file.file_name().is_some_and(|n| n == "mod.rs") {
                seen += 1;
                let lines = std::fs::read_to_string(&file).unwrap().lines().count();
                if lines > 400 {
                    long.push(format!("{}: {lines} lines", file.display()));
                }
            }
        }
    }
    assert!(seen > 15, "only {seen} mod.rs files found");
    assert!(long.is_empty(), "{}", long.join("\n"));
}
