//! The mapping's `exports:` in the validator: a site's edits of the export
//! table ([`crate::libraries::TABLE`]). `add` entries read (a variable's
//! name that changes nothing but the library's SL or traffic class, not
//! one of the table's, not added twice; what it carries; its link layers,
//! a traffic class on RoCE only), `drop` names read (each one of the
//! table's, once).

use super::diagnostic::Diagnostic;
use super::keys::{self, Place};
use super::once::Once;
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
        let items = self.seq(node, "`drop`")?;
        let known: Vec<&str> = libraries::TABLE.iter().map(|e| e.variable).collect();
        let mut out = Vec::new();
        let mut ok = true;
        let mut seen = Once::new();
        for item in items {
            if self.budget.step() {
                break;
            }
            let Some(name) = self.string(item, "a variable to drop") else {
                ok = false;
                continue;
            };
            if libraries::find(name).is_none() {
                let mut d = Diagnostic::error(
                    item.span,
                    format!(
                        "`{}` is not a variable of qoslane's export table: nothing to drop",
                        name.escape_debug()
                    ),
                )
                .label("not in the table");
                d = match nearest(name, &known) {
                    Some(s) => d.help(format!("did you mean `{s}`?")),
                    None => d.help(format!("the table: {}", known.join(", "))),
                };
                self.err(d);
                ok = false;
                continue;
            }
            if let Some(d) = seen.again(name, item.span, "listed", || {
                format!("`{name}` is dropped twice")
            }) {
                self.err(d);
                ok = false;
                continue;
            }
            out.push(name.to_owned());
        }
        ok.then_some(out)
    }

    fn export_adds(&mut self, node: &Node) -> Option<Vec<SiteExport>> {
        let items = self.seq(node, "`add`")?;
        let mut out = Vec::new();
        let mut ok = true;
        let mut seen = Once::new();
        for item in items {
            if self.budget.step() {
                break;
            }
            let Some(f) = self.fields(item, Place::ExportEntry) else {
                ok = false;
                continue;
            };
            let var_node = f.get(&keys::EXPORT_VARIABLE);
            let variable = var_node.and_then(|n| {
                let s = self.string(n, "`variable`")?;
                if let Some(why) = libraries::refuse_site_variable(s) {
                    self.err(Diagnostic::error(n.span, why).label("not exported"));
                    return None;
                }
                if let Some(e) = libraries::find(s) {
                    self.err(
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
                .and_then(|n| self.choice(n, &keys::EXPORT_VALUE, Carries::parse));
            let layers = match (f.get(&keys::EXPORT_LINK_LAYER), carries) {
                (None, Some(Carries::ServiceLevel)) => Some(Layers::Both),
                (None, _) => Some(Layers::Roce),
                (Some(n), c) => self
                    .choice(n, &keys::EXPORT_LINK_LAYER, Layers::parse)
                    .and_then(|l| {
                        if c == Some(Carries::TrafficClass) && l != Layers::Roce {
                            self.err(
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
                ok = false;
                continue;
            };
            let span = var_node.map_or(item.span, |n| n.span);
            if let Some(d) = seen.again(&variable, span, "added", || {
                format!("`{variable}` is added twice")
            }) {
                self.err(d);
                ok = false;
                continue;
            }
            out.push(SiteExport {
                variable,
                carries,
                layers,
            });
        }
        ok.then_some(out)
    }
}
