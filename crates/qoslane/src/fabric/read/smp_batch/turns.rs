//! The Gets of one batch taken in turn by destination LID, none with more
//! than its cap in flight: the order [`super`]'s flight sends them in.

use std::collections::{HashMap, VecDeque};

use crate::fabric::read::mad::Get;

/// The Gets of a batch grouped by destination LID, the destinations taken
/// in turn, none with more than `cap` in flight.
pub(super) struct Turns {
    /// The Gets' indices, grouped by destination (in order within each).
    order: Vec<usize>,
    /// Per destination: its next place in `order`, its end there, and how
    /// many of its Gets are in flight.
    dests: Vec<Dest>,
    /// The destination (its index in `dests`) of each Get.
    dest_of: Vec<usize>,
    /// The destinations with Gets left and room: the next send's is the
    /// front's.
    ready: VecDeque<usize>,
    cap: usize,
}

struct Dest {
    next: usize,
    end: usize,
    in_flight: usize,
}

impl Turns {
    pub(super) fn new(gets: &[Get], cap: usize) -> Self {
        let mut index: HashMap<u16, usize> = HashMap::new();
        let mut counts: Vec<usize> = Vec::new();
        let dest_of: Vec<usize> = gets
            .iter()
            .map(|g| {
                let n = index.len();
                let d = *index.entry(g.route.dlid()).or_insert(n);
                if d == counts.len() {
                    counts.push(0);
                }
                counts[d] += 1;
                d
            })
            .collect();
        let mut dests = Vec::with_capacity(counts.len());
        let mut start = 0;
        for c in counts {
            dests.push(Dest {
                next: start,
                end: start,
                in_flight: 0,
            });
            start += c;
        }
        let mut order = vec![0; gets.len()];
        for (i, &d) in dest_of.iter().enumerate() {
            order[dests[d].end] = i;
            dests[d].end += 1;
        }
        Self {
            order,
            ready: (0..dests.len()).collect(),
            dests,
            dest_of,
            cap: cap.max(1),
        }
    }

    /// The next Get to send, its destination's turn taken.
    pub(super) fn next(&mut self) -> Option<usize> {
        let d = self.ready.pop_front()?;
        let dest = &mut self.dests[d];
        let i = self.order[dest.next];
        dest.next += 1;
        dest.in_flight += 1;
        if dest.next < dest.end && dest.in_flight < self.cap {
            self.ready.push_back(d);
        }
        Some(i)
    }

    /// Get `i` is done (answered or given up): room for its destination.
    pub(super) fn done(&mut self, i: usize) {
        let d = self.dest_of[i];
        let dest = &mut self.dests[d];
        let full = dest.in_flight >= self.cap;
        dest.in_flight = dest.in_flight.saturating_sub(1);
        if full && dest.next < dest.end {
            self.ready.push_back(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::read::mad::{Attr, Route};

    fn get(lid: u16, modifier: u32) -> Get {
        Get {
            route: Route::Lid(lid),
            attr: Attr::SlToVl,
            modifier,
        }
    }

    /// The destinations are taken in turn, each Get once, in its own
    /// order within its destination; none has more than the cap in flight,
    /// and one at its cap is taken again when a Get of it is done.
    #[test]
    fn the_destinations_take_turns_none_past_its_cap() {
        // LID 1: Gets 0, 1, 2, 5; LID 2: 3, 6; LID 3: 4.
        let gets = [
            get(1, 0),
            get(1, 1),
            get(1, 2),
            get(2, 0),
            get(3, 0),
            get(1, 3),
            get(2, 1),
        ];
        let mut t = Turns::new(&gets, 2);
        let mut sent = Vec::new();
        while let Some(i) = t.next() {
            sent.push(i);
        }
        // Two of LID 1 and of LID 2, one of LID 3 (it has one), in turn.
        assert_eq!(sent, [0, 3, 4, 1, 6]);
        assert_eq!(t.next(), None, "LID 1 is at its cap");
        // LID 2's done: it has nothing left, LID 1 still at its cap.
        t.done(3);
        assert_eq!(t.next(), None);
        // One of LID 1's done: its next two, one at a time.
        t.done(0);
        assert_eq!(t.next(), Some(2));
        assert_eq!(t.next(), None);
        t.done(1);
        assert_eq!(t.next(), Some(5));
        assert_eq!(t.next(), None);
        for i in [2, 4, 5, 6] {
            t.done(i);
        }
        assert_eq!(t.next(), None, "every Get was taken once");
    }

    /// Directed-route Gets share the permissive LID: one destination, so
    /// the cap is the window of them all, as before destinations took
    /// turns.
    #[test]
    fn directed_route_gets_are_one_destination() {
        let gets: Vec<Get> = (0..5)
            .map(|i| Get {
                route: Route::Directed(vec![1, i]),
                attr: Attr::NodeInfo,
                modifier: 0,
            })
            .collect();
        let mut t = Turns::new(&gets, 3);
        let firsts: Vec<usize> = std::iter::from_fn(|| t.next()).collect();
        assert_eq!(firsts, [0, 1, 2]);
        t.done(1);
        assert_eq!(t.next(), Some(3));
        assert_eq!(t.next(), None);
    }

    /// A batch of none, and a cap of 0 taken as 1.
    #[test]
    fn no_gets_and_a_zero_cap() {
        assert_eq!(Turns::new(&[], 4).next(), None);
        let gets = [get(7, 0), get(7, 1)];
        let mut t = Turns::new(&gets, 0);
        assert_eq!(t.next(), Some(0));
        assert_eq!(t.next(), None);
        t.done(0);
        assert_eq!(t.next(), Some(1));
    }
}
