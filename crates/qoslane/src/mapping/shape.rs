//! The shape of a mapping file, the first stage of [`super::validate`]: each
//! YAML mapping has only its declared keys ([`super::keys`]), once each,
//! with the required ones; scalars are the strings, names, integers and
//! words they must be, with YAML 1.1's traps (Ansible's booleans, octal)
//! refused. Every problem becomes a [`Diagnostic`], collected in [`Cx`].

use std::collections::HashMap;

use super::diagnostic::Diagnostic;
use super::keys::{self, Form, Key, Place};
use super::yaml::{self, Budget, Node, NodeKind};

/// The longest name accepted for a level or a QoS (they end up in metric
/// labels and environment values).
pub const MAX_NAME_LEN: usize = 64;

/// What one validation collects.
pub struct Cx {
    pub diags: Vec<Diagnostic>,
    /// Spent: every loop stops, and the caller gets no answer.
    pub budget: Budget,
}

/// The first occurrence of each known key of a YAML mapping.
pub struct Fields<'n> {
    place: Place,
    found: HashMap<&'n str, (&'n Node, &'n Node)>,
    /// Known keys an unknown key was taken for (`servce_level`): their
    /// absence is already reported, as that key's "did you mean".
    suggested: Vec<&'static str>,
}

impl<'n> Fields<'n> {
    /// The value of `key` (declared at this mapping's place), unless absent
    /// or null.
    pub fn get(&self, key: &Key) -> Option<&'n Node> {
        debug_assert_eq!(
            key.place, self.place,
            "`{}` read at another place",
            key.name
        );
        self.found
            .get(key.name)
            .map(|(_, v)| *v)
            .filter(|v| !v.is_null())
    }
}

impl Cx {
    pub fn err(&mut self, d: Diagnostic) {
        self.diags.push(d);
    }

    /// Checks that `node` is a mapping of the keys declared at `place`
    /// ([`keys`](super::keys)), each once, with every required one.
    pub fn fields<'n>(&mut self, node: &'n Node, place: Place) -> Option<Fields<'n>> {
        let what = place.what();
        let NodeKind::Map(entries) = &node.kind else {
            self.err(
                Diagnostic::error(
                    node.span,
                    format!(
                        "expected {what} (a mapping of keys), found {}",
                        node.describe()
                    ),
                )
                .label(format!("expected {what}")),
            );
            return None;
        };
        let known: Vec<&'static str> = keys::at(place).map(|k| k.name).collect();
        let mut found: HashMap<&'n str, (&'n Node, &'n Node)> = HashMap::new();
        let mut suggested = Vec::new();
        for (k, v) in entries {
            if self.budget.step() {
                break;
            }
            let NodeKind::Scalar { value: key, .. } = &k.kind else {
                self.err(Diagnostic::error(
                    k.span,
                    format!("keys of {what} must be plain names"),
                ));
                continue;
            };
            if let Some((first, _)) = found.get(key.as_str()) {
                self.err(
                    Diagnostic::error(k.span, format!("duplicate key `{key}` in {what}"))
                        .label("defined again here")
                        .related(first.span, "first defined here"),
                );
                continue;
            }
            if !known.contains(&key.as_str()) {
                let mut d = Diagnostic::error(k.span, format!("unknown key `{key}` in {what}"))
                    .label("unknown key");
                d = match nearest(key, &known) {
                    Some(s) => {
                        suggested.push(s);
                        d.help(format!("did you mean `{s}`?"))
                    }
                    None => d.help(format!("known keys: {}", known.join(", "))),
                };
                self.err(d);
                continue;
            }
            found.insert(key.as_str(), (k, v));
        }
        let f = Fields {
            place,
            found,
            suggested,
        };
        for key in keys::at(place).filter(|k| k.required) {
            // A misspelt key is reported once, as unknown with a
            // suggestion, not a second time as a missing one.
            if f.get(key).is_none() && !f.suggested.contains(&key.name) {
                let span = f.found.get(key.name).map_or(node.span, |(k, _)| k.span);
                let name = key.name;
                self.err(
                    Diagnostic::error(span, format!("{} has no `{name}`", place.this()))
                        .label(format!("`{name}` is required here")),
                );
            }
        }
        Some(f)
    }

    pub fn seq<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n [Node]> {
        if let NodeKind::Seq(items) = &node.kind {
            Some(items)
        } else {
            self.err(
                Diagnostic::error(
                    node.span,
                    format!("expected a list for {what}, found {}", node.describe()),
                )
                .label("expected a list"),
            );
            None
        }
    }

    /// A string value. Plain scalars that YAML 1.1 (and so Ansible) reads as
    /// booleans or null are refused: they mean something else to the tools
    /// around this file.
    pub fn string<'n>(&mut self, node: &'n Node, what: &str) -> Option<&'n str> {
        match &node.kind {
            NodeKind::Scalar {
                value,
                plain: false,
            } => Some(value),
            NodeKind::Scalar { value, plain: true } => {
                if yaml::is_null(value) {
                    self.err(
                        Diagnostic::error(
                            node.span,
                            format!("expected a string for {what}, found null"),
                        )
                        .label("empty value"),
                    );
                    None
                } else if is_yaml11_bool(value) {
                    self.err(
                        Diagnostic::error(
                            node.span,
                            format!("`{value}` is a boolean in YAML 1.1 (Ansible reads it as one), not a string"),
                        )
                        .label("ambiguous value")
                        .help(format!("quote it if you mean the string: \"{value}\"")),
                    );
                    None
                } else {
                    Some(value)
                }
            }
            _ => {
                self.err(
                    Diagnostic::error(
                        node.span,
                        format!("expected a string for {what}, found {}", node.describe()),
                    )
                    .label("expected a string"),
                );
                None
            }
        }
    }

    /// A decimal integer in `0..=max`, written plainly.
    pub fn integer(&mut self, node: &Node, key: &str, max: u64) -> Option<u64> {
        let range = format!("`{key}` must be an integer from 0 to {max}");
        let value = match &node.kind {
            NodeKind::Scalar { value, plain: true } if !yaml::is_null(value) => value,
            NodeKind::Scalar {
                value,
                plain: false,
            } => {
                self.err(
                    Diagnostic::error(node.span, format!("{range}, found the string \"{value}\""))
                        .label("quoted")
                        .help("write the number without quotes"),
                );
                return None;
            }
            _ => {
                self.err(
                    Diagnostic::error(node.span, format!("{range}, found {}", node.describe()))
                        .label("expected an integer"),
                );
                return None;
            }
        };
        let digits = value.strip_prefix('-').unwrap_or(value);
        if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
            self.err(
                Diagnostic::error(node.span, format!("{range}, found `{value}`"))
                    .label("not a decimal integer"),
            );
            return None;
        }
        if digits.len() > 1 && digits.starts_with('0') {
            self.err(
                Diagnostic::error(
                    node.span,
                    format!("{range}, found `{value}` with a leading zero"),
                )
                .label("leading zero")
                .help(
                    "YAML 1.1 (Ansible) reads a leading zero as octal; write the number without it",
                ),
            );
            return None;
        }
        match (value.starts_with('-'), value.parse::<u64>()) {
            (false, Ok(n)) if n <= max => Some(n),
            _ => {
                self.err(
                    Diagnostic::error(node.span, format!("{range}, found {value}"))
                        .label("out of range"),
                );
                None
            }
        }
    }

    /// One of the words `key` declares ([`Form::Choice`]).
    pub fn choice<T: Copy>(
        &mut self,
        node: &Node,
        key: &Key,
        parse: fn(&str) -> Option<T>,
    ) -> Option<T> {
        let Form::Choice(names) = key.form else {
            unreachable!("`{}` is not declared a choice", key.name)
        };
        let key = key.name;
        // `off` is a documented value of `fabric_check`: take the plain word
        // even though YAML 1.1 would read it as a boolean.
        let s = match &node.kind {
            NodeKind::Scalar { value, .. } if !node.is_null() => value.as_str(),
            _ => {
                self.err(
                    Diagnostic::error(
                        node.span,
                        format!(
                            "`{key}` must be one of {}, found {}",
                            names.join(", "),
                            node.describe()
                        ),
                    )
                    .label("expected a word"),
                );
                return None;
            }
        };
        let v = parse(s);
        if v.is_none() {
            let mut d = Diagnostic::error(
                node.span,
                format!("`{key}` must be one of {}, found `{s}`", names.join(", ")),
            )
            .label("unknown value");
            if let Some(n) = nearest(s, names) {
                d = d.help(format!("did you mean `{n}`?"));
            }
            self.err(d);
        }
        v
    }

    pub fn name(&mut self, node: &Node, what: &str) -> Option<String> {
        let s = self.string(node, what)?;
        if s.is_empty() || s.len() > MAX_NAME_LEN || !s.bytes().all(is_name_byte) {
            self.err(
                Diagnostic::error(
                    node.span,
                    format!(
                        "{what} `{}` must be 1 to {MAX_NAME_LEN} letters, digits, `_`, `-` or `.`",
                        s.escape_debug()
                    ),
                )
                .label("invalid name"),
            );
            return None;
        }
        Some(s.to_owned())
    }
}

pub fn is_name_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.')
}

/// Plain words YAML 1.1 resolves to booleans.
fn is_yaml11_bool(s: &str) -> bool {
    matches!(
        s.to_ascii_lowercase().as_str(),
        "y" | "yes" | "n" | "no" | "true" | "false" | "on" | "off"
    )
}

/// The known word closest to `word`, when it is close enough to be a typo.
/// A word whose length differs by more than the distance allowed is skipped
/// unmeasured (the distance is at least the difference): `default_level`
/// is looked up among every level name.
pub fn nearest<'a>(word: &str, known: &[&'a str]) -> Option<&'a str> {
    let chars = word.chars().count();
    known
        .iter()
        .filter(|k| k.chars().count().abs_diff(chars) <= (k.len() / 3).max(2))
        .map(|k| (strsim::damerau_levenshtein(word, k), *k))
        .filter(|(d, k)| *d <= (k.len() / 3).max(2))
        .min_by_key(|(d, _)| *d)
        .map(|(_, k)| k)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_skips_words_of_another_length_only_when_they_cannot_be_near() {
        assert_eq!(nearest("normla", &["normal", "high"]), Some("normal"));
        assert_eq!(nearest("hig", &["normal", "high"]), Some("high"));
        assert_eq!(
            nearest("mission-critcal", &["mission-critical"]),
            Some("mission-critical")
        );
        assert_eq!(nearest("x", &["mission-critical"]), None);
    }
}
