//! Per-partition offset bookkeeping: which offsets are finished, the contiguous low-water mark
//! that may be committed, and the completed offsets above it, carried in the commit metadata so a
//! restarted or new owner skips turns whose outputs were already committed.

use std::collections::BTreeSet;

use base64::Engine as _;

/// Kafka's default `offset.metadata.max.bytes` is 4096; stay well inside it.
pub const METADATA_MAX_BYTES: usize = 3500;
const METADATA_PREFIX: &str = "ts1:";

/// Offsets of one partition between the last commit and now. Only delivered offsets count:
/// gaps (transaction markers, compaction) hold no record and never block the mark.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PartitionOffsets {
    /// Where this owner started: the committed offset (-1 when none was committed).
    start: i64,
    /// Offsets the previous owner recorded as finished above its committed mark: skip them.
    restored: BTreeSet<i64>,
    /// Delivered and not finished.
    in_progress: BTreeSet<i64>,
    /// Finished while an earlier delivered offset was not.
    completed: BTreeSet<i64>,
    /// One past the highest delivered offset.
    next: i64,
}

impl PartitionOffsets {
    /// Starts from a committed position (the committed offset and its metadata); -1 = none.
    pub fn from_commit(committed: i64, metadata: &str) -> Self {
        let restored = if committed >= 0 {
            decode_metadata(metadata)
                .into_iter()
                .map(|delta| committed.saturating_add(delta as i64))
                .filter(|o| *o >= committed)
                .collect()
        } else {
            BTreeSet::new()
        };
        PartitionOffsets {
            start: committed,
            restored,
            in_progress: BTreeSet::new(),
            completed: BTreeSet::new(),
            next: committed,
        }
    }

    /// The offset to commit: every delivered offset below it is finished. -1 = nothing yet.
    pub fn low_water_mark(&self) -> i64 {
        self.in_progress.first().copied().unwrap_or(self.next)
    }

    /// True when the previous owner already finished `offset` (and committed its outputs).
    pub fn is_completed(&self, offset: i64) -> bool {
        (self.start >= 0 && offset < self.start) || self.restored.contains(&offset)
    }

    /// Records delivery of `offset` (in partition order).
    pub fn deliver(&mut self, offset: i64) {
        self.in_progress.insert(offset);
        self.next = self.next.max(offset + 1);
    }

    /// Marks a delivered `offset` finished.
    pub fn complete(&mut self, offset: i64) {
        if !self.in_progress.remove(&offset) {
            return;
        }
        self.completed.insert(offset);
        let mark = self.low_water_mark();
        self.completed = self.completed.split_off(&mark);
    }

    /// The finished offsets above the mark that go in the commit metadata, and the metadata.
    ///
    /// Offsets the previous owner finished above its mark (`restored`) always go in, until the
    /// mark passes them: their outputs are committed already, so an owner after a second crash
    /// that did not know them would run them again and republish. They always fit: they are a
    /// suffix of what the previous owner encoded within the same budget, measured from a mark at
    /// least as high. This owner's completed offsets fill the rest of the budget in offset order;
    /// the outputs of those that do not fit wait for a later commit.
    pub fn commit_metadata(&self) -> (String, Vec<i64>) {
        let mark = self.low_water_mark();
        let mut chosen: BTreeSet<i64> = self.restored.range(mark..).copied().collect();
        let mut size: usize = {
            let mut prev = mark;
            chosen
                .iter()
                .map(|&o| {
                    let n = varint_len(o - prev);
                    prev = o;
                    n
                })
                .sum()
        };
        let fits = |size: usize| size.div_ceil(3) * 4 + METADATA_PREFIX.len() <= METADATA_MAX_BYTES;
        for &o in self.completed.range(mark..) {
            if chosen.contains(&o) {
                continue;
            }
            let prev = chosen.range(..o).next_back().copied().unwrap_or(mark);
            let next = chosen.range(o..).next().copied();
            // Inserting o splits the gap prev → next into prev → o → next.
            let grown = size + varint_len(o - prev) + next.map_or(0, |n| varint_len(n - o))
                - next.map_or(0, |n| varint_len(n - prev));
            if !fits(grown) {
                break;
            }
            chosen.insert(o);
            size = grown;
        }
        if chosen.is_empty() {
            return (String::new(), Vec::new());
        }
        let mut bytes = Vec::with_capacity(size);
        let mut prev = mark;
        for &o in &chosen {
            put_varint(&mut bytes, (o - prev) as u64);
            prev = o;
        }
        let encoded = base64::engine::general_purpose::STANDARD_NO_PAD.encode(&bytes);
        (
            format!("{METADATA_PREFIX}{encoded}"),
            chosen.into_iter().collect(),
        )
    }

    /// Finished offsets held above the mark (head-of-line blocking).
    pub fn pending_above_mark(&self) -> usize {
        self.completed.len()
    }

    /// Delivered offsets not finished.
    pub fn in_progress(&self) -> usize {
        self.in_progress.len()
    }
}

/// Deltas from the committed offset (first from the offset, then from the previous one).
fn decode_metadata(metadata: &str) -> Vec<u64> {
    let Some(body) = metadata.strip_prefix(METADATA_PREFIX) else {
        return Vec::new();
    };
    let Ok(bytes) = base64::engine::general_purpose::STANDARD_NO_PAD.decode(body) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    let mut absolute = 0u64;
    let mut i = 0;
    while i < bytes.len() {
        let Some((delta, used)) = get_varint(&bytes[i..]) else {
            break;
        };
        i += used;
        absolute = absolute.saturating_add(delta);
        out.push(absolute);
    }
    out
}

/// Bytes of the varint of a non-negative delta.
fn varint_len(delta: i64) -> usize {
    let bits = 64 - (delta.max(0) as u64).leading_zeros() as usize;
    bits.div_ceil(7).max(1)
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(bytes: &[u8]) -> Option<(u64, usize)> {
    let mut v = 0u64;
    for (i, &b) in bytes.iter().enumerate().take(10) {
        v |= u64::from(b & 0x7f) << (7 * i);
        if b & 0x80 == 0 {
            return Some((v, i + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn mark_stops_at_the_first_unfinished_delivery() {
        let mut p = PartitionOffsets::from_commit(10, "");
        for o in [10, 11, 13, 14] {
            p.deliver(o); // 12 is a transaction marker: never delivered
        }
        p.complete(11);
        p.complete(14);
        assert_eq!(p.low_water_mark(), 10);
        p.complete(10);
        assert_eq!(p.low_water_mark(), 13, "the gap at 12 does not block");
        let (meta, included) = p.commit_metadata();
        assert_eq!(included, vec![14]);
        let restored = PartitionOffsets::from_commit(13, &meta);
        assert!(restored.is_completed(14) && !restored.is_completed(13));
        assert!(restored.is_completed(12), "below the committed mark");
        p.complete(13);
        assert_eq!(p.low_water_mark(), 15);
    }

    /// Found by the fault harness (`turnstile chaos --fault sigkill --long --seed 2`: 9 turns'
    /// replies and events committed twice): an owner that commits before the previous owner's
    /// finished offsets are delivered again must keep them in its metadata.
    #[test]
    fn restored_offsets_survive_a_commit_made_before_their_redelivery() {
        let mut first = PartitionOffsets::from_commit(10, "");
        for o in 10..18 {
            first.deliver(o);
        }
        for o in [10, 11, 15, 17] {
            first.complete(o);
        }
        let (meta, _) = first.commit_metadata();
        // Crash. The next owner starts from (12, {15, 17}) and commits after finishing 12 and 13
        // only, before 15 and 17 are delivered again.
        let mut second = PartitionOffsets::from_commit(first.low_water_mark(), &meta);
        assert!(second.is_completed(15) && second.is_completed(17));
        second.deliver(12);
        second.deliver(13);
        second.complete(12);
        second.complete(13);
        let (meta2, _) = second.commit_metadata();
        // Crash again: the third owner must still skip 15 and 17.
        let third = PartitionOffsets::from_commit(second.low_water_mark(), &meta2);
        assert!(third.is_completed(15) && third.is_completed(17));
        assert!(!third.is_completed(14) && !third.is_completed(16));
    }

    #[test]
    fn nothing_committed_and_nothing_delivered_commits_nothing() {
        let p = PartitionOffsets::from_commit(-1, "ts1:AQ");
        assert_eq!(p.low_water_mark(), -1);
        assert!(!p.is_completed(0));
    }

    #[test]
    fn garbage_metadata_means_nothing_completed() {
        let p = PartitionOffsets::from_commit(5, "ts1:!!!");
        assert!(!p.is_completed(6));
        assert!(!PartitionOffsets::from_commit(5, "other-app-metadata").is_completed(6));
    }

    #[test]
    fn metadata_stays_within_the_broker_limit() {
        let mut p = PartitionOffsets::from_commit(0, "");
        for o in 0..200_000 {
            p.deliver(o);
        }
        for o in (1..200_000).step_by(7) {
            p.complete(o);
        }
        let (meta, included) = p.commit_metadata();
        assert!(meta.len() <= METADATA_MAX_BYTES);
        assert!(!included.is_empty() && included.len() < p.pending_above_mark());
    }

    /// A previous owner's finished offsets fill most of the budget; this owner's own completed
    /// offsets, interleaved with them, must not push them out of the metadata (they would run
    /// and publish again after the next crash).
    #[test]
    fn restored_offsets_are_never_dropped_for_new_ones() {
        let mut first = PartitionOffsets::from_commit(0, "");
        for o in 0..40_000 {
            first.deliver(o);
        }
        for o in (1..40_000).step_by(2) {
            first.complete(o);
        }
        let (meta, carried) = first.commit_metadata();
        assert!(carried.len() > 2_000, "the budget is nearly full");
        let mut second = PartitionOffsets::from_commit(0, &meta);
        for o in 0..40_000 {
            if !second.is_completed(o) {
                second.deliver(o);
            }
        }
        // Finish every even offset but 0, so the mark stays at 0 and all of them compete.
        for o in (2..40_000).step_by(2) {
            second.complete(o);
        }
        let (meta2, included) = second.commit_metadata();
        assert!(meta2.len() <= METADATA_MAX_BYTES);
        let third = PartitionOffsets::from_commit(0, &meta2);
        for o in &carried {
            assert!(included.contains(o), "restored offset {o} left out");
            assert!(
                third.is_completed(*o),
                "restored offset {o} lost on restart"
            );
        }
    }

    #[test]
    fn varint_lengths() {
        for v in [0i64, 1, 127, 128, 16_383, 16_384, 1 << 40] {
            let mut b = Vec::new();
            put_varint(&mut b, v as u64);
            assert_eq!(varint_len(v), b.len(), "{v}");
        }
    }

    proptest! {
        // The committed mark never passes an unfinished delivered offset, and what the metadata
        // says was completed survives a restart exactly.
        #[test]
        fn mark_never_passes_an_unfinished_offset(
            start in 0i64..1_000,
            gaps in prop::collection::vec(1i64..4, 1..120),
            order in prop::collection::vec(any::<prop::sample::Index>(), 0..200),
        ) {
            let mut p = PartitionOffsets::from_commit(start, "");
            let mut delivered = Vec::new();
            let mut o = start;
            for g in gaps {
                p.deliver(o);
                delivered.push(o);
                o += g;
            }
            let mut unfinished = delivered.clone();
            for ix in order {
                if unfinished.is_empty() {
                    break;
                }
                let done = unfinished.remove(ix.index(unfinished.len()));
                p.complete(done);
                let mark = p.low_water_mark();
                for u in &unfinished {
                    prop_assert!(*u >= mark, "mark {} passed unfinished {}", mark, u);
                }
                let (meta, included) = p.commit_metadata();
                let restored = PartitionOffsets::from_commit(mark, &meta);
                for d in &delivered {
                    if *d >= mark {
                        let finished = !unfinished.contains(d);
                        prop_assert_eq!(restored.is_completed(*d), finished && included.contains(d));
                    }
                }
            }
        }
    }
}
