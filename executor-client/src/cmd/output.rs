//! Human output: aligned tables, colour only on a terminal, ages, outputs in a few words.

use std::io::{IsTerminal, Write};

use argo_results_client::controller::{Decision, PodPhase, decide};
use argo_results_client::proto::{NodeResult, ResultState};
use clap::ValueEnum;
use serde::Serialize;

use super::failure::Failure;

/// `-o` of a command that shows one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

/// `-o` of the commands that list things (`get`, `list`, `runs`), as kubectl's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ListFormat {
    /// Aligned columns.
    Table,
    /// The table with more columns.
    Wide,
    /// The API's JSON, indented.
    Json,
    /// The same as YAML.
    Yaml,
    /// KIND/NAME, one a line, as kubectl's (result/NODE, workflow/NAME, run/WORKFLOW).
    Name,
}

/// `--no-headers`, as kubectl's, for a command that prints a table.
#[derive(Debug, Clone, Copy, clap::Args)]
pub struct Headers {
    /// Print the table's rows without its header line, as kubectl's.
    #[arg(long)]
    pub no_headers: bool,
}

impl Headers {
    /// Whether the header line is printed.
    pub fn shown(self) -> bool {
        !self.no_headers
    }
}

/// `kind/name`, a line each, as kubectl's `-o name`.
pub fn names<'a>(kind: &str, names: impl IntoIterator<Item = &'a str>) -> String {
    names
        .into_iter()
        .map(|name| format!("{kind}/{name}\n"))
        .collect()
}

/// Writes `text` to stdout; a closed stdout (`| head`) ends the command quietly.
pub fn emit(text: &str) -> Result<(), Failure> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(Failure::StdoutClosed),
        Err(e) => Err(Failure::Other(format!("cannot write to stdout: {e}"))),
    }
}

/// Whether to colour stdout: a terminal, and `NO_COLOR` unset.
pub fn colour() -> bool {
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none()
}

/// A cell and the ANSI colour it is shown in on a terminal.
#[derive(Debug, Clone)]
pub struct Cell {
    text: String,
    ansi: Option<&'static str>,
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Cell { text, ansi: None }
    }
}

impl Cell {
    /// A cell shown in `ansi` (an SGR code such as `32`) on a terminal.
    pub fn coloured(text: String, ansi: &'static str) -> Self {
        Cell {
            text,
            ansi: Some(ansi),
        }
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        text.to_owned().into()
    }
}

/// A state, coloured by what it means for the node.
pub fn state_cell(state: ResultState) -> Cell {
    let ansi = match state {
        ResultState::Expected => "2",
        ResultState::Reporting => "33",
        ResultState::Completed => "32",
        ResultState::Abandoned => "31",
    };
    Cell::coloured(state.as_str().to_owned(), ansi)
}

/// A node's phase as Argo names it (`NodePhase`), from its result: `expected` is Pending
/// (registered, nothing reported), `reporting` Running, `abandoned` Error (Argo's "pod
/// deleted"), and `completed` how the step ended as the controller reads a result whose
/// pod is gone: its `phase`, else its `exitCode` (`0` Succeeded, else Failed), else Error.
pub fn phase(result: &NodeResult) -> &'static str {
    match result.state {
        ResultState::Expected => "Pending",
        ResultState::Reporting => "Running",
        ResultState::Abandoned => "Error",
        ResultState::Completed => match decide(PodPhase::Gone, Some(result)) {
            Decision::Succeeded { .. } => "Succeeded",
            Decision::Failed { .. } => "Failed",
            _ => "Error",
        },
    }
}

/// A phase, coloured as Argo's UI colours it.
pub fn phase_cell(phase: &'static str) -> Cell {
    let ansi = match phase {
        "Pending" => "2",
        "Running" => "33",
        "Succeeded" => "32",
        _ => "31",
    };
    Cell::coloured(phase.to_owned(), ansi)
}

/// One line of cells, each padded to its column's width but the last.
fn line(cells: Vec<Cell>, widths: &[usize], colour: bool) -> String {
    let last = cells.len().saturating_sub(1);
    let mut line = String::new();
    for (i, (cell, width)) in cells.into_iter().zip(widths).enumerate() {
        let pad = if i == last {
            0
        } else {
            width.saturating_sub(cell.text.chars().count()) + 3
        };
        match cell.ansi {
            Some(ansi) if colour => line.push_str(&format!("\x1b[{ansi}m{}\x1b[0m", cell.text)),
            _ => line.push_str(&cell.text),
        }
        line.push_str(&" ".repeat(pad));
    }
    line.trim_end().to_owned() + "\n"
}

/// Rows under a header (`headers`: shown), each column as wide as its widest cell.
pub fn table(header: &[&str], rows: Vec<Vec<Cell>>, headers: Headers) -> String {
    let mut widths = vec![0; header.len()];
    if headers.shown() {
        widths = header.iter().map(|h| h.chars().count()).collect();
    }
    for row in &rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.text.chars().count());
        }
    }
    let colour = colour();
    let mut out = String::new();
    if headers.shown() {
        out = line(
            header.iter().map(|h| Cell::from(*h)).collect(),
            &widths,
            colour,
        );
    }
    for row in rows {
        out.push_str(&line(row, &widths, colour));
    }
    out
}

/// One row of a table printed as it streams, with fixed column widths.
pub fn stream_row(cells: Vec<Cell>, widths: &[usize]) -> String {
    line(cells, widths, colour())
}

/// How long ago an RFC 3339 time was, in kubectl's style: 45s, 12m, 3h, 5d.
pub fn age(time: &str) -> String {
    let Ok(then) = time.parse::<jiff::Timestamp>() else {
        return "?".into();
    };
    let seconds = jiff::Timestamp::now().duration_since(then).as_secs().max(0);
    match seconds {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

fn count(n: usize, one: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {one}s")
    }
}

/// Argo's outputs in a few words: `2 parameters, 1 artifact, result`.
pub fn outputs_summary(result: &NodeResult) -> String {
    let Some(outputs) = result
        .outputs
        .as_ref()
        .and_then(|raw| serde_json::from_str::<serde_json::Value>(raw.get()).ok())
    else {
        return "-".into();
    };
    let items = |key: &str| {
        outputs
            .get(key)
            .and_then(|v| v.as_array())
            .map_or(0, Vec::len)
    };
    let mut parts = Vec::new();
    if items("parameters") > 0 {
        parts.push(count(items("parameters"), "parameter"));
    }
    if items("artifacts") > 0 {
        parts.push(count(items("artifacts"), "artifact"));
    }
    for key in ["result", "exitCode"] {
        if outputs.get(key).is_some_and(|v| !v.is_null()) {
            parts.push(key.to_owned());
        }
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(", ")
    }
}

/// `value` as indented JSON (fields in their order) or as YAML (keys sorted, as kubectl
/// does), with a final newline.
pub fn document(value: &impl Serialize, format: Format) -> Result<String, Failure> {
    let failed = |e: serde_json::Error| Failure::Other(e.to_string());
    match format {
        Format::Yaml => {
            let json = serde_json::to_value(value).map_err(failed)?;
            Ok(super::yaml::to_yaml(&json))
        }
        _ => Ok(serde_json::to_string_pretty(value).map_err(failed)? + "\n"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let rows = vec![
            vec![Cell::from("etl-1"), Cell::from("completed")],
            vec![Cell::from("etl-100"), Cell::from("expected")],
        ];
        let shown = Headers { no_headers: false };
        assert_eq!(
            table(&["NODE", "STATE"], rows.clone(), shown),
            "NODE      STATE\netl-1     completed\netl-100   expected\n"
        );
        let hidden = Headers { no_headers: true };
        assert_eq!(
            table(&["NODE", "STATE"], rows, hidden),
            "etl-1     completed\netl-100   expected\n"
        );
        assert_eq!(
            table(
                &["A-LONG-HEADER", "B"],
                vec![vec![Cell::from("x"), Cell::from("y")]],
                hidden
            ),
            "x   y\n"
        );
    }

    #[test]
    fn names_are_kind_slash_name() {
        assert_eq!(
            names("result", ["wf-1", "wf-2"]),
            "result/wf-1\nresult/wf-2\n"
        );
        assert_eq!(names("workflow", []), "");
    }
}
