//! What `rpcbench report` reads: a run's or a sweep's JSON, or a DNS diagnosis, told
//! apart by their fields, each refused with the file's name and the field at fault.

use crate::dnsdiag::DnsDiagnosis;
use crate::report::Report;
use crate::report::sweep::SweepReport;
use serde::Deserialize;
use std::path::{Path, PathBuf};

/// One input file's contents: a run or a sweep.
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// `rpcbench --out`.
    Run(Box<Report>),
    /// `rpcbench sweep --out`.
    Sweep(Box<SweepReport>),
    /// `rpcbench dns NAME --out`.
    Dns(Box<DnsDiagnosis>),
}

/// Why a report could not be built.
#[derive(Debug, thiserror::Error)]
pub enum BuildReportError {
    #[error("cannot read {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("{path} is not an rpcbench JSON report: {source}")]
    Parse {
        path: PathBuf,
        source: serde_json::Error,
    },
    #[error("no inputs: a report needs at least one rpcbench JSON result")]
    NoInputs,
    #[error("cannot write {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

/// Reads a JSON file of type `T`.
pub fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<T, BuildReportError> {
    let value: serde_json::Value = read_json_value(path)?;
    parse_value(path, value)
}

/// Reads a file as JSON of any shape.
pub(super) fn read_json_value(path: &Path) -> Result<serde_json::Value, BuildReportError> {
    let bytes = std::fs::read(path).map_err(|source| BuildReportError::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&bytes).map_err(|source| BuildReportError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads JSON already parsed as `T`, naming `path` in the error.
pub(super) fn parse_value<T: for<'de> Deserialize<'de>>(
    path: &Path,
    value: serde_json::Value,
) -> Result<T, BuildReportError> {
    serde_json::from_value(value).map_err(|source| BuildReportError::Parse {
        path: path.to_path_buf(),
        source,
    })
}

/// The fields only a sweep's JSON has at its top level: what tells a sweep from a run,
/// before either is parsed strictly (unknown fields denied).
pub(super) const SWEEP_FIELDS: [&str; 2] = ["axis", "series"];

/// The fields only a DNS diagnosis has at its top level.
pub(super) const DNS_FIELDS: [&str; 3] = ["candidates", "queries", "lookup_us"];

/// Reads a run, a sweep or a DNS diagnosis, telling them apart by the fields only a sweep
/// has (`axis`, `series`) and those only a diagnosis has (`candidates`, `queries`,
/// `lookup_us`).
pub fn read_input(path: &Path) -> Result<Input, BuildReportError> {
    let value = read_json_value(path)?;
    if DNS_FIELDS.iter().all(|f| value.get(f).is_some()) {
        parse_value(path, value).map(|d| Input::Dns(Box::new(d)))
    } else if SWEEP_FIELDS.iter().all(|f| value.get(f).is_some()) {
        parse_value(path, value).map(|s| Input::Sweep(Box::new(s)))
    } else {
        parse_value(path, value).map(|r| Input::Run(Box::new(r)))
    }
}
