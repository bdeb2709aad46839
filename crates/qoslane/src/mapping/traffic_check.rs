//! A level's `sm_traffic` in the validator: each entry read into an
//! [`SmTraffic`], and no path record query matched by two entries (the
//! same PKey, service ID range or QoS class on two levels, or twice in
//! one) — refused at the line, the first one named.

use super::diagnostic::Diagnostic;
use super::shape::Cx;
use super::traffic::{SmTraffic, TrafficField};
use super::yaml::{Node, Span};

/// An entry already read, where, and in which level.
pub(super) struct SeenTraffic {
    traffic: SmTraffic,
    span: Span,
    level: String,
}

impl Cx {
    /// A level's `sm_traffic` list: the valid entries with their places,
    /// and whether the whole list is valid.
    pub(super) fn sm_traffic(&mut self, node: &Node) -> (Vec<(SmTraffic, Span)>, bool) {
        let Some(items) = self.seq(node, "`sm_traffic`") else {
            return (Vec::new(), false);
        };
        let mut out = Vec::new();
        let mut ok = true;
        for item in items {
            if self.budget.step() {
                break;
            }
            let Some(s) = self.string(item, "an `sm_traffic` entry") else {
                ok = false;
                continue;
            };
            match SmTraffic::parse(s) {
                Ok(t) => out.push((t, item.span)),
                Err(msg) => {
                    self.err(
                        Diagnostic::error(item.span, msg)
                            .label("not SM traffic")
                            .help(
                                "e.g. `ipoib`, `rds`, `pkey 0x8001`, \
                                 `service-id 0x10000ce100415453`, `qos-class 3`",
                            ),
                    );
                    ok = false;
                }
            }
        }
        (out, ok)
    }

    /// Refuses every entry of `level` that matches a path record query an
    /// entry seen before matches (on any level, this one too): the SM can
    /// answer one SL only. Returns whether there was none.
    pub(super) fn traffic_overlaps(
        &mut self,
        seen: &mut Vec<SeenTraffic>,
        level: &str,
        entries: &[(SmTraffic, Span)],
    ) -> bool {
        let mut ok = true;
        for (t, span) in entries {
            if let Some(first) = seen.iter().find(|s| s.traffic.overlaps(t)) {
                let msg = if first.level == level {
                    format!(
                        "sm_traffic `{t}` overlaps `{}` in the same level `{level}`",
                        first.traffic
                    )
                } else {
                    format!(
                        "sm_traffic `{t}` of level `{level}` overlaps `{}` of level `{}`: the \
                         SM answers a path record with one SL",
                        first.traffic, first.level
                    )
                };
                let d = Diagnostic::error(*span, msg)
                    .label(format!("{} in both", t.field.as_str()))
                    .related(first.span, format!("in level `{}` here", first.level));
                self.err(if t.written == first.traffic.written {
                    d
                } else {
                    d.help(format!(
                        "`{t}` and `{}` both match {} {}",
                        first.traffic,
                        t.field.as_str(),
                        shared(t, &first.traffic)
                    ))
                });
                ok = false;
            } else {
                seen.push(SeenTraffic {
                    traffic: t.clone(),
                    span: *span,
                    level: level.to_owned(),
                });
            }
        }
        ok
    }
}

/// The values two overlapping entries share, as `0x…` or `0x…-0x…`.
fn shared(a: &SmTraffic, b: &SmTraffic) -> String {
    let (lo, hi) = (a.first.max(b.first), a.last.min(b.last));
    let n = |v: u64| {
        if a.field == TrafficField::QosClass {
            v.to_string()
        } else {
            format!("{v:#x}")
        }
    };
    if lo == hi {
        n(lo)
    } else {
        format!("{}-{}", n(lo), n(hi))
    }
}
