//! The mapping's `exports:` in the validator: a site's edits of the export
//! table ([`crate::libraries::TABLE`]). `add` entries read (a variable's
//! name that changes nothing but the library's SL or traffic class, not
//! one of the table's, not added twice; what it carries; its link layers,
//! a traffic class on RoCE only), `drop` names read (each one of the
//! table's, once).

use super::diagnostic::Diagnostic;
use super::keys::{self, Place};
use super::once::{ListWords, Named};
use super::shape::{Cx, nearest};
use super::types::{ExportsEdit, SiteExport};
use super::yaml::Node;
use crate::libraries::{self, Carries, Layers};

impl Cx {
    pub(super) fn exports(&mut self, node: &Node) -> Option<ExportsEdit> {
        let f = self.fields(node, Place::Exports)?;
        let drop = match f.get(&keys::EXPORTS_DROP) {
            None => Some(Vec::new()),
            Some(n) => self.export_drops(n),
        };
        let add = match f.get(&keys::EXPORTS_ADD) {
            None => Some(Vec::new()),
            Some(n) => self.export_adds(n),
        };
        Some(ExportsEdit {
            add: add?,
            drop: drop?,
        })
    }

    fn export_drops(&mut self, node: &Node) -> Option<Vec<String>> {
        let known: Vec<&str> = libraries::TABLE.iter().map(|e| e.variable).collect();
        let words = ListWords {
            what: "`drop`",
            verb: "listed",
            twice: |name| format!("`{name}` is dropped twice"),
        };
        self.named_list(node, &words, |cx, item| {
            let name = cx.string(item, "a variable to drop")?;
            if libraries::find(name).is_none() {
                let d = Diagnostic::error(
                    item.span,
                    format!(
                        "`{}` is not a variable of qoslane's export table: nothing to drop",
                        name.escape_debug()
                    ),
                )
                .label("not in the table");
                cx.err(match nearest(name, &known) {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(format!("the table: {}", known.join(", "))),
                });
                return None;
            }
            Some(Named {
                value: name.to_owned(),
                name: name.to_owned(),
                span: item.span,
            })
        })
    }

    fn export_adds(&mut self, node: &Node) -> Option<Vec<SiteExport>> {
        let words = ListWords {
            what: "`add`",
            verb: "added",
            twice: |name| format!("`{name}` is added twice"),
        };
        self.named_list(node, &words, |cx, item| {
            let f = cx.fields(item, Place::ExportEntry)?;
            let var_node = f.get(&keys::EXPORT_VARIABLE);
            let variable = var_node.and_then(|n| {
                let s = cx.string(n, "`variable`")?;
                if let Some(why) = libraries::refuse_site_variable(s) {
                    cx.err(Diagnostic::error(n.span, why).label("not exported"));
                    return None;
                }
                if let Some(e) = libraries::find(s) {
                    cx.err(
                        Diagnostic::error(
                            n.span,
                            format!("`{s}` is in qoslane's export table already ({})", e.library),
                        )
                        .label("already exported")
                        .help("to change how it is exported, drop it and add it back"),
                    );
                    return None;
                }
                Some(s.to_owned())
            });
            let carries = f
                .get(&keys::EXPORT_VALUE)
                .and_then(|n| cx.choice(n, &keys::EXPORT_VALUE, Carries::parse));
            let layers = match (f.get(&keys::EXPORT_LINK_LAYER), carries) {
                (None, Some(Carries::ServiceLevel)) => Some(Layers::Both),
                (None, _) => Some(Layers::Roce),
                (Some(n), c) => cx
                    .choice(n, &keys::EXPORT_LINK_LAYER, Layers::parse)
                    .and_then(|l| {
                        if c == Some(Carries::TrafficClass) && l != Layers::Roce {
                            cx.err(
                                Diagnostic::error(
                                    n.span,
                                    format!(
                                        "a traffic class is exported on RoCE ports only, not `{}`",
                                        l.as_str()
                                    ),
                                )
                                .label("not on InfiniBand")
                                .help(
                                    "on a native InfiniBand port a traffic class breaks \
                                     NVSHMEM's IBGDA path (NVIDIA/nvshmem#45): write `roce`",
                                ),
                            );
                            return None;
                        }
                        Some(l)
                    }),
            };
            let (Some(variable), Some(carries), Some(layers)) = (variable, carries, layers) else {
                return None;
            };
            Some(Named {
                name: variable.clone(),
                span: var_node.map_or(item.span, |n| n.span),
                value: SiteExport {
                    variable,
                    carries,
                    layers,
                },
            })
        })
    }
}
