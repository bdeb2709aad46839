//! A bounded pool of workers for fabric reads: `workers` threads take items
//! in order from one queue and the results come back in the items' order.
//! Each item is a short sequence of `smpquery` runs, each bounded by the
//! caller's deadline, so a hung query holds one worker, never the run.
//! Bounded because every query is a process and an SMP client (ibsim, the
//! simulator, has 10 client slots; a real switch's SMA answers one at a
//! time).

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// The most workers any read uses.
pub const MAX_WORKERS: usize = 16;

/// `f` over `items` on at most `workers` threads (1..=[`MAX_WORKERS`]).
pub fn map<T: Sync, R: Send>(items: &[T], workers: usize, f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    let workers = workers.clamp(1, MAX_WORKERS).min(items.len());
    if workers <= 1 {
        return items.iter().map(f).collect();
    }
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<(usize, R)>> = Mutex::new(Vec::with_capacity(items.len()));
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(item) = items.get(i) else { break };
                    let r = f(item);
                    results
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner)
                        .push((i, r));
                }
            });
        }
    });
    let mut done = results
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    done.sort_unstable_by_key(|(i, _)| *i);
    done.into_iter().map(|(_, r)| r).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_keep_the_items_order_and_workers_are_bounded() {
        let running = AtomicUsize::new(0);
        let peak = AtomicUsize::new(0);
        let items: Vec<u32> = (0..40).collect();
        let out = map(&items, 3, |&i| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            peak.fetch_max(now, Ordering::SeqCst);
            std::thread::sleep(std::time::Duration::from_millis(1));
            running.fetch_sub(1, Ordering::SeqCst);
            i * 2
        });
        assert_eq!(out, items.iter().map(|i| i * 2).collect::<Vec<_>>());
        assert!(peak.load(Ordering::SeqCst) <= 3, "peak {peak:?}");
        assert_eq!(map(&[] as &[u32], 4, |&i| i), Vec::<u32>::new());
    }
}
