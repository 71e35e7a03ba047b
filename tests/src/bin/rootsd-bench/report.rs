//! The benchmark's results: one [`Row`] per target, printed as a table or as JSON, and judged
//! against its target. Nothing here measures anything.

use std::fmt::Write as _;

use serde_json::{Value, json};

/// What a target bounds: the ratio against the limit, or rootsd's own figure (memory, where
/// the issue sets absolute budgets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Of {
    Ratio,
    Rootsd,
}

/// A target: `of` must be at most (or at least) `value`.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    pub of: Of,
    pub at_most: bool,
    pub value: f64,
}

impl Target {
    pub fn ratio_at_most(value: f64) -> Self {
        Self {
            of: Of::Ratio,
            at_most: true,
            value,
        }
    }

    pub fn ratio_at_least(value: f64) -> Self {
        Self {
            of: Of::Ratio,
            at_most: false,
            value,
        }
    }

    pub fn rootsd_at_most(value: f64) -> Self {
        Self {
            of: Of::Rootsd,
            at_most: true,
            value,
        }
    }
}

/// One measured figure: rootsd's, the limit's from the same run, and the target.
#[derive(Clone, Debug)]
pub struct Row {
    /// Stable identifier for scripts (`fanout_1000`, `relay_p50`, …).
    pub id: String,
    pub what: String,
    pub unit: &'static str,
    pub rootsd: f64,
    pub limit: Option<f64>,
    /// What the limit is: the program and what it does.
    pub limit_what: String,
    /// How many measurements the figures summarise (per side).
    pub samples: usize,
    pub target: Target,
    /// Anything a reader needs to interpret the row.
    pub note: Option<String>,
}

impl Row {
    /// rootsd / limit.
    pub fn ratio(&self) -> Option<f64> {
        self.limit.filter(|l| *l > 0.0).map(|l| self.rootsd / l)
    }

    pub fn met(&self) -> bool {
        let value = match self.target.of {
            Of::Ratio => match self.ratio() {
                Some(ratio) => ratio,
                None => return false,
            },
            Of::Rootsd => self.rootsd,
        };
        if self.target.at_most {
            value <= self.target.value
        } else {
            value >= self.target.value
        }
    }

    fn target_text(&self) -> String {
        let op = if self.target.at_most { "≤" } else { "≥" };
        match self.target.of {
            Of::Ratio => format!("ratio {op} {}", self.target.value),
            Of::Rootsd => format!("{op} {} {}", number(self.target.value), self.unit),
        }
    }
}

/// A figure with as many digits as it needs to be read at a glance.
fn number(value: f64) -> String {
    let magnitude = value.abs();
    if magnitude >= 100.0 {
        format!("{value:.0}")
    } else if magnitude >= 10.0 {
        format!("{value:.1}")
    } else {
        format!("{value:.2}")
    }
}

/// The results as a Markdown table (what, rootsd, limit, ratio, target, met).
pub fn table(rows: &[Row]) -> String {
    let mut lines = vec![[
        "what".to_owned(),
        "rootsd".to_owned(),
        "limit".to_owned(),
        "ratio".to_owned(),
        "target".to_owned(),
        "met".to_owned(),
    ]];
    for row in rows {
        lines.push([
            row.what.clone(),
            format!("{} {}", number(row.rootsd), row.unit),
            row.limit
                .map_or_else(|| "—".to_owned(), |l| format!("{} {}", number(l), row.unit)),
            row.ratio()
                .map_or_else(|| "—".to_owned(), |r| format!("{r:.2}")),
            row.target_text(),
            if row.met() { "yes" } else { "NO" }.to_owned(),
        ]);
    }
    let widths: Vec<usize> = (0..6)
        .map(|c| {
            lines
                .iter()
                .map(|l| l[c].chars().count())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate() {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, width)| format!("{cell:<width$}"))
            .collect();
        let _ = writeln!(out, "| {} |", cells.join(" | "));
        if i == 0 {
            let rule: Vec<String> = widths.iter().map(|w| "-".repeat(*w)).collect();
            let _ = writeln!(out, "|-{}-|", rule.join("-|-"));
        }
    }
    out
}

/// The notes of the rows that have one, one per line, for under the table.
pub fn notes(rows: &[Row]) -> String {
    let mut out = String::new();
    for row in rows {
        let _ = writeln!(out, "- {}: limit = {}.", row.what, row.limit_what);
        if let Some(note) = &row.note {
            let _ = writeln!(out, "  {note}");
        }
    }
    out
}

/// The results as JSON: one object per row with numeric fields and units.
pub fn json(rows: &[Row], mode: &str, wall_secs: f64, load: [f64; 2]) -> Value {
    json!({
        "benchmark": "rootsd-bench",
        "mode": mode,
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "cores": std::thread::available_parallelism().map_or(1, |n| n.get()),
        "wall_seconds": wall_secs,
        "load_average": {"start": load[0], "end": load[1]},
        "rows": rows.iter().map(|row| json!({
            "id": row.id,
            "what": row.what,
            "unit": row.unit,
            "rootsd": row.rootsd,
            "limit": row.limit,
            "limit_what": row.limit_what,
            "ratio": row.ratio(),
            "target": {
                "of": match row.target.of { Of::Ratio => "ratio", Of::Rootsd => "rootsd" },
                "op": if row.target.at_most { "<=" } else { ">=" },
                "value": row.target.value,
            },
            "met": row.met(),
            "samples": row.samples,
            "note": row.note,
        })).collect::<Vec<_>>(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(rootsd: f64, limit: Option<f64>, target: Target) -> Row {
        Row {
            id: "x".into(),
            what: "x".into(),
            unit: "ms",
            rootsd,
            limit,
            limit_what: "x".into(),
            samples: 1,
            target,
            note: None,
        }
    }

    #[test]
    fn targets_judge_the_ratio_or_the_figure() {
        assert!(row(2.0, Some(1.0), Target::ratio_at_most(2.0)).met());
        assert!(!row(2.1, Some(1.0), Target::ratio_at_most(2.0)).met());
        assert!(row(0.96, Some(1.0), Target::ratio_at_least(0.95)).met());
        assert!(!row(0.9, Some(1.0), Target::ratio_at_least(0.95)).met());
        assert!(row(7.9, None, Target::rootsd_at_most(8.0)).met());
        assert!(!row(1.0, None, Target::ratio_at_most(2.0)).met());
    }
}
