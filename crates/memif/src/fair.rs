//! How one poll of `memif-input` shares a frame between interfaces: each interface, not
//! each queue, gets an equal share first, so a pod with sixteen queues gets what a pod with
//! one gets when both flood. What a share leaves unused (an interface with less to send)
//! goes, in a second pass, to whoever has more: nothing waits while there is room.
//!
//! Queues are kept grouped by interface; `groups` holds each interface's range of them.
//! Which interface goes first, and which of an interface's queues, rotates poll by poll.

/// The ranges of an interface's queues in `queues`, which are kept grouped by interface.
pub(crate) fn groups<T>(queues: &[(u32, T)]) -> Vec<(usize, usize)> {
    let mut v: Vec<(usize, usize)> = Vec::new();
    for (i, (ifindex, _)) in queues.iter().enumerate() {
        match v.last_mut() {
            Some(g) if queues[g.0].0 == *ifindex => g.1 = i + 1,
            _ => v.push((i, i + 1)),
        }
    }
    v
}

/// Where a queue of interface `ifindex` goes in `queues` so that they stay grouped.
pub(crate) fn insert_at<T>(queues: &[(u32, T)], ifindex: u32) -> usize {
    queues
        .iter()
        .rposition(|(i, _)| *i == ifindex)
        .map_or(queues.len(), |p| p + 1)
}

/// Takes up to `room` packets from the queues of `groups`: `take(queue, most)` receives at
/// most `most` from a queue and says how many it got. `first` is the rotating start (the
/// first group, and the first queue within each group, advance by one each poll). Returns
/// how many were taken.
pub(crate) fn share(
    groups: &[(usize, usize)],
    room: usize,
    first: usize,
    mut take: impl FnMut(usize, usize) -> usize,
) -> usize {
    let n = groups.len();
    if n == 0 || room == 0 {
        return 0;
    }
    let quota = (room / n).max(1);
    let (mut total, mut saturated) = (0, false);
    let order = |k: usize| groups[(first + k) % n];
    let within = |(a, b): (usize, usize), j: usize| a + (first + j) % (b - a);
    for k in 0..n {
        let g = order(k);
        let mut left = quota;
        for j in 0..g.1 - g.0 {
            let most = left.min(room - total);
            if most == 0 {
                break;
            }
            let got = take(within(g, j), most);
            left -= got;
            total += got;
        }
        saturated |= left == 0;
    }
    if saturated && total < room {
        for k in 0..n {
            let g = order(k);
            for j in 0..g.1 - g.0 {
                if total == room {
                    return total;
                }
                total += take(within(g, j), room - total);
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queues holding `backlog` packets each: what each interface got from one poll.
    fn poll(queues: &[(u32, usize)], room: usize, first: usize) -> Vec<usize> {
        let g = groups(queues);
        let mut left: Vec<usize> = queues.iter().map(|q| q.1).collect();
        let mut got = vec![0; g.len()];
        let total = share(&g, room, first, |i, most| {
            let n = left[i].min(most);
            left[i] -= n;
            let k = g.iter().position(|&(a, b)| (a..b).contains(&i)).unwrap();
            got[k] += n;
            n
        });
        assert_eq!(total, got.iter().sum::<usize>());
        assert!(total <= room);
        got
    }

    /// A pod with 16 full queues and a pod with one: half the frame each, whoever starts.
    #[test]
    fn an_interface_gets_its_share_however_many_queues_it_has() {
        let mut q: Vec<(u32, usize)> = (0..16).map(|_| (3, 1000)).collect();
        q.push((7, 1000));
        for first in 0..20 {
            assert_eq!(poll(&q, 256, first), [128, 128], "first {first}");
        }
    }

    /// An interface with little to send leaves its share to the others: the frame fills.
    #[test]
    fn what_a_share_leaves_goes_to_the_rest() {
        let q = [(1, 10), (2, 1000), (2, 1000), (5, 0)];
        assert_eq!(poll(&q, 256, 0), [10, 246, 0]);
        // Less than a frame in all: everything, nothing more.
        assert_eq!(poll(&[(1, 3), (2, 4)], 256, 1), [3, 4]);
        // One interface alone takes the whole frame from its queues, in turn.
        assert_eq!(poll(&[(4, 200), (4, 200)], 256, 0), [256]);
    }

    /// Queues stay grouped however they arrive.
    #[test]
    fn queues_stay_grouped_by_interface() {
        let mut q: Vec<(u32, ())> = Vec::new();
        for i in [2, 5, 2, 9, 5, 2] {
            let at = insert_at(&q, i);
            q.insert(at, (i, ()));
        }
        let order: Vec<u32> = q.iter().map(|x| x.0).collect();
        assert_eq!(order, [2, 2, 2, 5, 5, 9]);
        assert_eq!(groups(&q), [(0, 3), (3, 5), (5, 6)]);
    }
}
