//! "A name once per list", decided in one place: the first time a name is
//! seen its place is kept; the second time, the diagnostic names both places
//! (`VERB again here`, `first VERB here`). Every list of the mapping whose
//! entries are named (`devices`, a level's `node_settings`, the `exports:`
//! drops and adds) is read by [`Cx::named_list`]: each entry by its own
//! reader, then its name checked here.

use std::collections::HashMap;

use super::diagnostic::Diagnostic;
use super::shape::Cx;
use super::yaml::{Node, Span};

/// One entry of a named list as its reader read it: the value, its name and
/// where to point when the name comes again.
pub struct Named<T> {
    pub value: T,
    pub name: String,
    pub span: Span,
}

/// How a named list says itself: `what` in "expected a list for WHAT", the
/// list's own verb (`listed`, `dropped`, `added`) and the message for a name
/// written twice.
pub struct ListWords<'a> {
    pub what: &'a str,
    pub verb: &'a str,
    pub twice: fn(&str) -> String,
}

impl Cx {
    /// Reads the list `node`, each item by `entry` (`None`: it said why),
    /// each name once (a second is an error naming both places). The whole
    /// list is `None` when any item failed, every item's diagnostics said;
    /// the item budget stops the walk of a huge list.
    pub(super) fn named_list<T>(
        &mut self,
        node: &Node,
        words: &ListWords<'_>,
        mut entry: impl FnMut(&mut Self, &Node) -> Option<Named<T>>,
    ) -> Option<Vec<T>> {
        let items = self.seq(node, words.what)?;
        let mut out = Vec::new();
        let mut ok = true;
        let mut seen = Once::new();
        for item in items {
            if self.budget.step() {
                break;
            }
            let Some(n) = entry(self, item) else {
                ok = false;
                continue;
            };
            if let Some(d) = seen.again(&n.name, n.span, words.verb, || (words.twice)(&n.name)) {
                self.err(d);
                ok = false;
                continue;
            }
            out.push(n.value);
        }
        ok.then_some(out)
    }
}

/// The names of one list seen so far, with where each was first written.
#[derive(Debug, Default)]
pub struct Once {
    seen: HashMap<String, Span>,
}

impl Once {
    pub fn new() -> Self {
        Self::default()
    }

    /// `name` at `span`: `None` the first time (kept), else the error
    /// `message` at `span`, labelled `VERB again here` and pointing at the
    /// first place (`first VERB here`). `verb` is the list's own word
    /// (`listed`, `dropped`, `added`).
    pub fn again(
        &mut self,
        name: &str,
        span: Span,
        verb: &str,
        message: impl FnOnce() -> String,
    ) -> Option<Diagnostic> {
        if let Some(first) = self.seen.get(name) {
            return Some(
                Diagnostic::error(span, message())
                    .label(format!("{verb} again here"))
                    .related(*first, format!("first {verb} here")),
            );
        }
        self.seen.insert(name.to_owned(), span);
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(line: usize) -> Span {
        Span {
            line,
            col: 5,
            start: line * 10,
            end: line * 10 + 3,
        }
    }

    #[test]
    fn the_second_time_names_both_places_with_the_lists_word() {
        let mut once = Once::new();
        assert!(
            once.again("mlx5_0", at(3), "listed", || unreachable!())
                .is_none()
        );
        assert!(
            once.again("mlx5_1", at(4), "listed", || unreachable!())
                .is_none()
        );
        let d = once
            .again("mlx5_0", at(7), "listed", || {
                "device `mlx5_0` is listed twice".into()
            })
            .expect("a name seen before is a diagnostic");
        let text = format!("{d:?}");
        assert!(text.contains("device `mlx5_0` is listed twice"), "{text}");
        assert!(text.contains("listed again here"), "{text}");
        assert!(text.contains("first listed here"), "{text}");
        assert!(
            text.contains("line: 7") && text.contains("line: 3"),
            "{text}"
        );
    }

    #[test]
    fn names_are_compared_exactly() {
        let mut once = Once::new();
        assert!(
            once.again("UCX_IB_SL", at(1), "added", String::new)
                .is_none()
        );
        assert!(
            once.again("ucx_ib_sl", at(2), "added", String::new)
                .is_none()
        );
    }
}
