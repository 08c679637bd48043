//! The Markdown report: a header saying where and how it was made, then one
//! table per section.
//!
//! A row that could not be measured keeps its place and says why, so a
//! reader sees what is missing instead of a shorter table.

use crate::machine::Machine;
use crate::stats::Summary;

pub struct Section {
    pub title: String,
    /// Shown above the table: what the section compares.
    pub intro: String,
    pub rows: Vec<Row>,
    /// Shown below the table: how each measurement is taken.
    pub method: Vec<String>,
}

pub struct Row {
    pub measurement: String,
    pub system: String,
    /// The measured summary, or why there is none.
    pub result: Result<Summary, String>,
    /// The target and whether this run met it; empty when none applies.
    pub target: String,
}

impl Row {
    pub fn new(measurement: &str, system: &str, result: Result<Summary, String>) -> Self {
        Self {
            measurement: measurement.to_owned(),
            system: system.to_owned(),
            result,
            target: String::new(),
        }
    }
}

/// What the header says of the report's numbers, and what it says once a
/// section measured alone was spliced in.
const ONE_RUN: &str = "Every number below comes from that one run, side by side;";
const ONE_RUN_BUT_ALONE: &str = "Every number below comes from that one run, side by side, \
     except in a section that says it was measured alone;";

pub fn render(machine: &Machine, command: &str, sections: &[Section]) -> String {
    let mut md = String::from("# Benchmarks\n\n");
    md.push_str(&format!(
        "Made by `{command}` on {} (after `cargo build --release --workspace` and `scripts/build-plugins`, \
         which build what it measures). {ONE_RUN} numbers from other machines or runs are not comparable. \
         Medians; p99 is the nearest-rank percentile. MB = 10^6 bytes.\n\n",
        machine.date
    ));
    md.push_str("| machine | |\n|---|---|\n");
    for (key, value) in machine.facts() {
        md.push_str(&format!("| {key} | {} |\n", cell(value)));
    }
    for section in sections {
        md.push_str(&render_section(section, None));
    }
    md
}

/// What a section measured alone says of its run: the command, when, the
/// build, and the load (the report's header is about another run).
pub fn provenance(machine: &Machine, command: &str) -> String {
    let fact = |key: &str| {
        machine
            .facts()
            .find(|(k, _)| *k == key)
            .map_or("unknown", |(_, v)| v)
            .to_owned()
    };
    format!(
        "Measured alone by `{command}` on {} ({}), on the machine above; load average {} \
         at the start and {} at the end. Its rows compare with each other, not with the \
         other sections'.",
        machine.date,
        fact("agent-comms"),
        fact("load average at start"),
        fact("load average at end")
    )
}

/// `existing` (a report) with `sections`, measured alone, in place of the
/// ones of the same titles (or after the last), each with its
/// [`provenance`]; the header then says that some sections were.
pub fn splice(existing: &str, provenance: &str, sections: &[Section]) -> String {
    let mut md = existing.trim_end().replacen(ONE_RUN, ONE_RUN_BUT_ALONE, 1);
    md.push('\n');
    for section in sections {
        let fresh = render_section(section, Some(provenance));
        let heading = format!("\n## {}\n", section.title);
        match md.find(&heading) {
            Some(start) => {
                let body = start + heading.len();
                let end = md[body..].find("\n## ").map_or(md.len(), |i| body + i);
                md.replace_range(start..end, &fresh);
            }
            None => md.push_str(&fresh),
        }
    }
    md
}

/// One section: its heading, intro (and where it was measured, when not
/// in the report's own run), table and method.
fn render_section(section: &Section, provenance: Option<&str>) -> String {
    let mut md = format!("\n## {}\n\n{}\n\n", section.title, section.intro);
    if let Some(line) = provenance {
        md.push_str(&format!("{line}\n\n"));
    }
    if !section.rows.is_empty() {
        md.push_str("| measurement | system | median | p99 | n | target |\n");
        md.push_str("|---|---|---:|---:|---:|---|\n");
        for row in &section.rows {
            let (median, p99, n) = match &row.result {
                Ok(s) => (
                    s.median.to_string(),
                    s.p99.map_or_else(|| "—".to_owned(), |q| q.to_string()),
                    s.samples.to_string(),
                ),
                Err(why) => (format!("failed: {why}"), "—".to_owned(), "—".to_owned()),
            };
            md.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                cell(&row.measurement),
                cell(&row.system),
                cell(&median),
                p99,
                n,
                cell(&row.target)
            ));
        }
    }
    if !section.method.is_empty() {
        if !section.rows.is_empty() {
            md.push('\n');
        }
        for line in &section.method {
            md.push_str(&format!("- {line}\n"));
        }
    }
    md
}

/// Text made safe for a table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Both summaries, when both rows were measured.
pub fn both<'a>(
    a: &'a Result<Summary, String>,
    b: &'a Result<Summary, String>,
) -> Option<(&'a Summary, &'a Summary)> {
    a.as_ref().ok().zip(b.as_ref().ok())
}

/// "`target`: met" or "missed"; "not judged" when a row it depends on
/// could not be measured.
pub fn judge(target: &str, met: Option<bool>) -> String {
    let verdict = match met {
        Some(true) => "met",
        Some(false) => "**missed**",
        None => "not judged",
    };
    format!("{target}: {verdict}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(title: &str, intro: &str) -> Section {
        Section {
            title: title.to_owned(),
            intro: intro.to_owned(),
            rows: Vec::new(),
            method: vec!["how".to_owned()],
        }
    }

    #[test]
    fn splice_replaces_a_section_in_place_and_appends_a_new_one() {
        let report = format!(
            "# Benchmarks\n\n{ONE_RUN} etc.\n\n## A\n\nold a\n\n## B\n\nold b\n\n## C\n\nold c\n"
        );
        let md = splice(
            &report,
            "Measured alone.",
            &[section("B", "new b"), section("D", "new d")],
        );
        assert_eq!(
            md,
            format!(
                "# Benchmarks\n\n{ONE_RUN_BUT_ALONE} etc.\n\n## A\n\nold a\n\n\
                 ## B\n\nnew b\n\nMeasured alone.\n\n- how\n\n## C\n\nold c\n\n\
                 ## D\n\nnew d\n\nMeasured alone.\n\n- how\n"
            )
        );
    }
}
