//! Where a valid mapping's parts are written: the spans of `default_level`,
//! of each level's name and `on_failure`, and of each QoS entry, so that a
//! later consumer of the mapping (`qoslane slurm-config`, its QoS check)
//! names the line of what it cannot use, as the validator's diagnostics do.
//! Pure: the file's text in, spans out; a part not found has no span.

use super::keys;
use super::yaml::{self, Node, NodeKind, Span};

/// One level as written.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LevelPlace {
    pub name: String,
    /// The level's name value.
    pub name_span: Span,
    /// Its `on_failure` value, when it has one.
    pub on_failure: Option<Span>,
    /// Each QoS entry: its name as written, and where.
    pub qos: Vec<(String, Span)>,
}

/// The places of a mapping's parts.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Places {
    /// The `default_level` value.
    pub default_level: Option<Span>,
    /// The top-level `on_failure` value.
    pub on_failure: Option<Span>,
    /// The `levels` key.
    pub levels_key: Option<Span>,
    pub levels: Vec<LevelPlace>,
}

impl Places {
    /// The places of `src`'s parts; none when it is not a YAML mapping.
    pub fn of(src: &str) -> Self {
        let Ok(Some(root)) = yaml::parse(src) else {
            return Self::default();
        };
        let mut out = Self::default();
        for (k, v) in entries(&root) {
            match scalar(k) {
                Some(key) if key == keys::DEFAULT_LEVEL.name => out.default_level = Some(v.span),
                Some(key) if key == keys::ON_FAILURE.name => out.on_failure = Some(v.span),
                Some(key) if key == keys::LEVELS.name => {
                    out.levels_key = Some(k.span);
                    if let NodeKind::Seq(items) = &v.kind {
                        out.levels = items.iter().map(level_place).collect();
                    }
                }
                _ => {}
            }
        }
        out
    }

    /// The level named `name`.
    pub fn level(&self, name: &str) -> Option<&LevelPlace> {
        self.levels.iter().find(|l| l.name == name)
    }

    /// Where QoS `qos` is listed (Slurm's names are case-insensitive: any
    /// case), and in which level.
    pub fn qos(&self, qos: &str) -> Option<(&LevelPlace, Span)> {
        self.levels.iter().find_map(|l| {
            l.qos
                .iter()
                .find(|(q, _)| q.eq_ignore_ascii_case(qos))
                .map(|(_, s)| (l, *s))
        })
    }
}

fn entries(node: &Node) -> &[(Node, Node)] {
    match &node.kind {
        NodeKind::Map(e) => e,
        _ => &[],
    }
}

fn scalar(node: &Node) -> Option<&str> {
    match &node.kind {
        NodeKind::Scalar { value, .. } => Some(value),
        _ => None,
    }
}

fn level_place(item: &Node) -> LevelPlace {
    let mut l = LevelPlace {
        name_span: item.span,
        ..LevelPlace::default()
    };
    for (k, v) in entries(item) {
        match scalar(k) {
            Some(key) if key == keys::NAME.name => {
                scalar(v).unwrap_or_default().clone_into(&mut l.name);
                l.name_span = v.span;
            }
            Some(key) if key == keys::LEVEL_ON_FAILURE.name => l.on_failure = Some(v.span),
            Some(key) if key == keys::QOS.name => {
                if let NodeKind::Seq(qs) = &v.kind {
                    l.qos = qs
                        .iter()
                        .filter_map(|q| Some((scalar(q)?.to_owned(), q.span)))
                        .collect();
                }
            }
            _ => {}
        }
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parts_are_found_where_they_are_written() {
        let src = "default_level: normal\non_failure: fail_job\nlevels:\n  - name: gold\n    \
                   qos: [gold, Platinum]\n    on_failure: continue\n  - name: normal\n    \
                   qos:\n      - normal\n";
        let p = Places::of(src);
        assert_eq!(p.default_level.map(|s| (s.line, s.col)), Some((1, 16)));
        assert_eq!(p.on_failure.map(|s| s.line), Some(2));
        assert_eq!(p.levels_key.map(|s| s.line), Some(3));
        let gold = p.level("gold").unwrap();
        assert_eq!((gold.name_span.line, gold.name_span.col), (4, 11));
        assert_eq!(gold.on_failure.map(|s| s.line), Some(6));
        let (l, s) = p.qos("platinum").unwrap();
        assert_eq!((l.name.as_str(), s.line, s.col), ("gold", 5, 17));
        assert_eq!(p.qos("normal").unwrap().1.line, 9);
        assert!(p.qos("silver").is_none());
        assert_eq!(Places::of("not: [yaml"), Places::default());
    }
}
