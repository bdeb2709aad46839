//! `qoslane validate FILE`: every problem at once, with places.

use std::io::Write;
use std::path::Path;

use crate::cli::Format;
use crate::config;
use crate::error::{Error, Result};
use crate::exit_code::ExitClass;
use crate::mapping::diagnostic::{JsonDiagnostic, render_all};
use crate::mapping::validate_str;

pub fn run(file: &Path, format: Format) -> Result<ExitClass> {
    let text = config::read_text(file)?;
    let v = validate_str(&text);
    let name = file.display().to_string();
    let errors = v.errors().count();
    let warnings = v.diagnostics.len() - errors;
    let mut out = std::io::stdout().lock();
    let w = Error::output;
    match format {
        Format::Json => {
            let list: Vec<JsonDiagnostic<'_>> = v.diagnostics.iter().map(Into::into).collect();
            let s =
                serde_json::to_string_pretty(&list).map_err(|e| Error::Internal(e.to_string()))?;
            writeln!(out, "{s}").map_err(w)?;
        }
        Format::Human => {
            let mut err = std::io::stderr().lock();
            write!(err, "{}", render_all(&v.diagnostics, &name, &text)).map_err(w)?;
            match &v.mapping {
                Some(m) => writeln!(
                    out,
                    "{name}: valid: {} levels, default `{}`, fabric_check {}, sha256 {}{}",
                    m.levels().len(),
                    m.default_level().name,
                    m.fabric_check.as_str(),
                    config::sha256_hex(text.as_bytes()),
                    plural_warnings(" (", warnings, ")")
                )
                .map_err(w)?,
                None => writeln!(
                    err,
                    "{name}: invalid: {errors} error{}{}",
                    if errors == 1 { "" } else { "s" },
                    plural_warnings(", ", warnings, "")
                )
                .map_err(w)?,
            }
        }
    }
    Ok(if errors > 0 {
        ExitClass::InvalidMapping
    } else {
        ExitClass::Ok
    })
}

fn plural_warnings(before: &str, n: usize, after: &str) -> String {
    match n {
        0 => String::new(),
        1 => format!("{before}1 warning{after}"),
        n => format!("{before}{n} warnings{after}"),
    }
}
