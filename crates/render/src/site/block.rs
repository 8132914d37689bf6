//! The page's parts ([`Block`]), which `page.rs` lists and `markdown.rs` and `html.rs`
//! write, and [`esc`], the escaping every text of the HTML page and of its SVG charts gets.

use crate::render::Grid;

/// One piece of the page, in the order it is read.
#[derive(Debug)]
pub enum Block<'a> {
    /// The page's title (`#`, `<h1>`).
    Title(String),
    /// A section's heading (`##`, `<h2>`).
    Section(String),
    /// A heading inside a section (`###`, `<h3>`).
    Subsection(String),
    /// A paragraph.
    Text(String),
    /// A bulleted list; `alert` marks it as failures (bold red in HTML).
    List { items: Vec<String>, alert: bool },
    /// A table; its `failed` cells are shown as failures.
    Table(Table),
    /// A chart, with its caption under it.
    Chart(&'a Chart),
    /// Command lines, as a shell block.
    Code(Vec<String>),
}

/// One chart of a sweep: its file name, the SVG, and the caption that says how to read it.
#[derive(Debug, Clone, PartialEq)]
pub struct Chart {
    /// File name beside README.md, e.g. `latency-throughput.svg`.
    pub file: String,
    /// What the chart shows and how its marks are defined, for the page under it.
    pub caption: Option<String>,
    /// The chart itself.
    pub svg: String,
}

/// A table of text cells, some of them marked as failures.
#[derive(Debug)]
pub struct Table {
    pub grid: Grid,
    /// (row, column) of each cell that reports a failure.
    pub failed: Vec<(usize, usize)>,
}

impl From<Grid> for Block<'_> {
    fn from(grid: Grid) -> Self {
        Block::Table(Table {
            grid,
            failed: Vec::new(),
        })
    }
}

impl Block<'_> {
    /// A list of plain items.
    pub(super) fn list(items: impl IntoIterator<Item = String>) -> Self {
        Block::List {
            items: items.into_iter().collect(),
            alert: false,
        }
    }
}

/// Escapes text for HTML and XML.
pub fn esc(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}
