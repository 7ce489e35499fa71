//! Greedy shrinking of a failing conversation: drop runs of turns, then simplify each turn, keeping
//! every change after which the conversation still fails the same way.

use super::grammar::Conversation;

/// At most this many candidate runs, so a shrink always ends quickly.
const BUDGET: usize = 2_000;

pub fn shrink(c: &Conversation, still_fails: impl Fn(&Conversation) -> bool) -> Conversation {
    let mut best = c.clone();
    let mut runs = 0;
    let try_it = |cand: Conversation, best: &mut Conversation, runs: &mut usize| -> bool {
        if *runs >= BUDGET || cand == *best {
            return false;
        }
        *runs += 1;
        if still_fails(&cand) {
            *best = cand;
            true
        } else {
            false
        }
    };
    loop {
        let mut progress = false;
        // Runs of turns, longest first.
        let mut chunk = best.turns.len() / 2;
        while chunk >= 1 {
            let mut start = 0;
            while start + chunk <= best.turns.len() {
                let mut cand = best.clone();
                cand.turns.drain(start..start + chunk);
                if !cand.turns.is_empty() && try_it(cand, &mut best, &mut runs) {
                    progress = true;
                } else {
                    start += 1;
                }
            }
            chunk /= 2;
        }
        if best.stickiness {
            let mut cand = best.clone();
            cand.stickiness = false;
            progress |= try_it(cand, &mut best, &mut runs);
        }
        // Simplify one turn at a time.
        for i in 0..best.turns.len() {
            let edits: [fn(&mut Conversation, usize); 9] = [
                |c, i| c.turns[i].crash = None,
                |c, i| c.turns[i].redeliver = false,
                |c, i| c.turns[i].restart = false,
                |c, i| c.turns[i].after_ms = 1000,
                |c, i| c.turns[i].pt_br = false,
                |c, i| c.turns[i].classifier = None,
                |c, i| c.turns[i].router = None,
                |c, i| c.turns[i].interpreter = None,
                |c, i| c.turns[i].tools.clear(),
            ];
            for edit in edits {
                let mut cand = best.clone();
                edit(&mut cand, i);
                progress |= try_it(cand, &mut best, &mut runs);
            }
            let keys: Vec<String> = best.turns[i].tools.keys().cloned().collect();
            for key in keys {
                let mut cand = best.clone();
                cand.turns[i].tools.remove(&key);
                progress |= try_it(cand, &mut best, &mut runs);
            }
        }
        if !progress || runs >= BUDGET {
            return best;
        }
    }
}
