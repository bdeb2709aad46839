//! A level's `node_settings` in the validator: each entry's path and value
//! read (absolute, normalised, under /sys/ or /proc/sys/; one line, no
//! YAML 1.1 octal), each path once per level.

use super::diagnostic::Diagnostic;
use super::keys::{self, Place};
use super::once::{ListWords, Named};
use super::shape::Cx;
use super::types::{NodeSetting, SettingPath};
use super::yaml::{Node, NodeKind};

impl Cx {
    pub(super) fn node_settings(&mut self, node: &Node) -> Option<Vec<NodeSetting>> {
        let words = ListWords {
            what: "`node_settings`",
            verb: "listed",
            twice: |name| format!("node setting `{name}` is listed twice in this level"),
        };
        self.named_list(node, &words, |cx, item| {
            let f = cx.fields(item, Place::NodeSetting)?;
            let path_node = f.get(&keys::PATH);
            let path = path_node.and_then(|n| {
                let s = cx.string(n, "`path`")?;
                match SettingPath::new(s) {
                    Ok(p) => Some(p),
                    Err(msg) => {
                        cx.err(
                            Diagnostic::error(n.span, msg)
                                .label("bad path")
                                .help("node settings are absolute, normalised paths under /sys/ or /proc/sys/"),
                        );
                        None
                    }
                }
            });
            let value = f
                .get(&keys::VALUE)
                .and_then(|n| {
                    let s = cx.string(n, "`value`")?;
                    // A plain number with a leading zero is octal to YAML 1.1
                    // (Ansible, which templates this file) and decimal here.
                    let plain = matches!(n.kind, NodeKind::Scalar { plain: true, .. });
                    if plain
                        && s.len() > 1
                        && s.starts_with('0')
                        && s.bytes().all(|b| b.is_ascii_digit())
                    {
                        cx.err(
                            Diagnostic::error(
                                n.span,
                                format!("`value: {s}` has a leading zero: YAML 1.1 (Ansible) reads it as octal"),
                            )
                            .label("leading zero")
                            .help(format!("quote it to write it as it is (\"{s}\"), or write the number without the zero")),
                        );
                        return None;
                    }
                    if s.contains(['\n', '\r', '\0']) {
                        cx.err(
                            Diagnostic::error(
                                n.span,
                                "a node setting value must be one line with no NUL",
                            )
                            .label("multi-line value"),
                        );
                        return None;
                    }
                    Some(s.to_owned())
                });
            let (Some(path), Some(value)) = (path, value) else {
                return None;
            };
            Some(Named {
                name: path.as_str().to_owned(),
                span: path_node.map_or(item.span, |n| n.span),
                value: NodeSetting { path, value },
            })
        })
    }
}
