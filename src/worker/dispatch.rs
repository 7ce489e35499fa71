//! Key-ordered dispatch inside one partition: at most one turn per conversation in flight, many
//! conversations in parallel, a bound on how many run at once. Pure bookkeeping; the coordinator
//! owns one per assigned partition.

use std::collections::{HashMap, VecDeque};

/// Records of one partition waiting for their conversation or for a free slot.
#[derive(Debug)]
pub struct KeyedQueue<R> {
    /// Per key, the records after the one that holds the key (running or ready).
    waiting: HashMap<String, VecDeque<R>>,
    /// Records whose key is free but that wait for a slot, in arrival order.
    ready: VecDeque<(String, R)>,
    /// Keys held by a running or ready record.
    held: HashMap<String, ()>,
    running: usize,
    max_running: usize,
    buffered: usize,
}

impl<R> KeyedQueue<R> {
    pub fn new(max_running: usize) -> Self {
        KeyedQueue {
            waiting: HashMap::new(),
            ready: VecDeque::new(),
            held: HashMap::new(),
            running: 0,
            max_running: max_running.max(1),
            buffered: 0,
        }
    }

    /// Accepts a record; it runs after every earlier record of the same key.
    pub fn push(&mut self, key: String, record: R) {
        self.buffered += 1;
        if self.held.contains_key(&key) {
            self.waiting.entry(key).or_default().push_back(record);
        } else {
            self.held.insert(key.clone(), ());
            self.ready.push_back((key, record));
        }
    }

    /// The next record allowed to start now, if any; the caller must call [`Self::finish`] for it.
    pub fn next_to_run(&mut self) -> Option<(String, R)> {
        if self.running >= self.max_running {
            return None;
        }
        let next = self.ready.pop_front()?;
        self.running += 1;
        self.buffered -= 1;
        Some(next)
    }

    /// The record of `key` finished: the key's next record (if any) becomes ready.
    pub fn finish(&mut self, key: &str) {
        self.running = self.running.saturating_sub(1);
        match self.waiting.get_mut(key).and_then(VecDeque::pop_front) {
            Some(next) => {
                if self.waiting.get(key).is_some_and(VecDeque::is_empty) {
                    self.waiting.remove(key);
                }
                self.ready.push_back((key.to_owned(), next));
            }
            None => {
                self.held.remove(key);
            }
        }
    }

    pub fn running(&self) -> usize {
        self.running
    }

    /// Records accepted but not started.
    pub fn buffered(&self) -> usize {
        self.buffered
    }

    /// Drops every record not yet started (a revoked partition's buffer is never processed).
    pub fn drain_unstarted(&mut self) -> usize {
        self.take_unstarted().len()
    }

    /// Takes out every record not yet started, ready ones first, then the waiting ones.
    pub fn take_unstarted(&mut self) -> Vec<R> {
        let mut out = Vec::with_capacity(self.buffered);
        out.extend(self.ready.drain(..).map(|(_, r)| r));
        out.extend(self.waiting.drain().flat_map(|(_, q)| q));
        self.held.clear();
        self.buffered = 0;
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn one_per_key_many_keys() {
        let mut q = KeyedQueue::new(10);
        q.push("a".into(), 1);
        q.push("a".into(), 2);
        q.push("b".into(), 3);
        assert_eq!(q.next_to_run(), Some(("a".into(), 1)));
        assert_eq!(q.next_to_run(), Some(("b".into(), 3)));
        assert_eq!(q.next_to_run(), None, "a:2 waits for a:1");
        q.finish("a");
        assert_eq!(q.next_to_run(), Some(("a".into(), 2)));
    }

    #[test]
    fn bounded_running() {
        let mut q = KeyedQueue::new(2);
        for (i, k) in ["a", "b", "c"].iter().enumerate() {
            q.push((*k).into(), i);
        }
        assert!(q.next_to_run().is_some() && q.next_to_run().is_some());
        assert_eq!(q.next_to_run(), None);
        assert_eq!(q.buffered(), 1);
        q.finish("a");
        assert_eq!(q.next_to_run(), Some(("c".into(), 2)));
    }

    proptest! {
        // Per key, records start in arrival order and never overlap.
        #[test]
        fn per_key_order_and_exclusion(
            keys in prop::collection::vec(0u8..5, 1..200),
            finish_order in prop::collection::vec(any::<prop::sample::Index>(), 0..400),
            cap in 1usize..6,
        ) {
            let mut q = KeyedQueue::new(cap);
            for (i, k) in keys.iter().enumerate() {
                q.push(format!("k{k}"), i);
            }
            let mut running: Vec<(String, usize)> = Vec::new();
            let mut started: HashMap<String, Vec<usize>> = HashMap::new();
            let mut picks = finish_order.into_iter();
            loop {
                while let Some((k, r)) = q.next_to_run() {
                    prop_assert!(!running.iter().any(|(rk, _)| *rk == k), "two runs of {}", k);
                    started.entry(k.clone()).or_default().push(r);
                    running.push((k, r));
                    prop_assert!(running.len() <= cap);
                }
                if running.is_empty() {
                    break;
                }
                let i = picks.next().map_or(0, |ix| ix.index(running.len()));
                let (k, _) = running.remove(i);
                q.finish(&k);
            }
            let total: usize = started.values().map(Vec::len).sum();
            prop_assert_eq!(total, keys.len());
            for list in started.values() {
                prop_assert!(list.windows(2).all(|w| w[0] < w[1]));
            }
        }
    }
}
