//! The store's behaviour, written once and run against every back-end
//! (`sqlite.rs` and `postgres/` each instantiate [`store_suite!`]), so the
//! local file and the shared database can never drift apart: the same
//! calls, the same rows, the same refusals.

use std::collections::HashSet;
use std::sync::Mutex;

use super::*;

/// Opens the back-end under test: each call a new connection to the same
/// (fresh) database.
pub(crate) type Open<'a> = &'a (dyn Fn() -> Box<dyn Store> + Sync);

/// A `#[test]` per suite function, each with a fresh database from
/// `$fresh` (an expression returning `(guard, opener)`; the guard keeps the
/// database alive for the test).
macro_rules! store_suite {
    ($fresh:expr) => {
        $crate::store::suite::store_suite!(@tests $fresh;
            agents_and_runtimes_round_trip,
            remove_runtime_deletes_only_the_record_it_was_shown,
            heartbeat_and_set_offline_refuse_a_replaced_endpoint,
            invocations_insert_filter_and_status,
            lease_next_is_fifo_and_one_at_a_time_per_agent,
            finish_delivered_and_failed,
            a_late_delivery_report_counts_while_nobody_leased_the_message_again,
            a_message_that_keeps_failing_is_given_up_and_the_queue_moves_on,
            an_undeliverable_message_fails_at_once_and_cancel_takes_only_waiting_ones,
            a_batch_is_leased_finished_and_released_together,
            release_by_lease_expiry_and_by_runtime,
            two_processes_leasing_concurrently_deliver_each_invocation_once,
            an_attempt_names_the_host_of_its_runtime,
            a_follower_is_woken_by_a_change_to_a_message,
        );
    };
    (@tests $fresh:expr; $($name:ident),+ $(,)?) => {$(
        #[test]
        fn $name() {
            let (_guard, open) = $fresh;
            $crate::store::suite::$name(&open);
        }
    )+};
}
pub(crate) use store_suite;

pub(crate) fn runtime(id: &str, agent: &str, endpoint_id: &str) -> RuntimeRecord {
    RuntimeRecord {
        id: id.into(),
        agent: agent.into(),
        kind: "INTERACTIVE".into(),
        connector: "INTERACTIVE".into(),
        max_concurrent: 1,
        status: RuntimeStatus::Online,
        host: Some("host1".into()),
        endpoint: Some("/run/x.sock".into()),
        endpoint_id: Some(endpoint_id.into()),
        pid: Some(4242),
        last_heartbeat: Some(1_000),
        heartbeat_ms: 2_000,
        provider: Some("an-adapter".into()),
        conversation_id: Some("sess-1".into()),
        status_reason: None,
        updated: 1_000,
    }
}

pub(crate) fn send(s: &dyn Store, to: &str, body: &str, now: u64) -> Invocation {
    s.insert_invocation(&NewInvocation {
        from: "user",
        to,
        body,
        status: InvocationStatus::Pending,
        reason: None,
        now,
    })
    .unwrap()
}

pub(crate) fn evidence(submitted: u64) -> Evidence {
    Evidence {
        echoed: submitted - 20,
        entered: submitted - 10,
        submitted,
        enter_presses: 1,
        style: "enter".into(),
        stop_reason: None,
    }
}

pub(crate) fn agents_and_runtimes_round_trip(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    let a = s.ensure_agent("alice", 10).unwrap();
    assert_eq!(
        a,
        Agent {
            id: "alice".into(),
            created: 10
        }
    );
    assert_eq!(s.ensure_agent("alice", 99).unwrap().created, 10);
    assert_eq!(s.agent("alice").unwrap(), Some(a));
    assert_eq!(s.agent("nobody").unwrap(), None);

    let mut r = runtime("rt-b", "bob", "ep1");
    s.save_runtime(&r).unwrap();
    assert_eq!(s.runtime("rt-b").unwrap(), Some(r.clone()));
    assert_eq!(s.agent("bob").unwrap().unwrap().created, 1_000);
    let ids: Vec<_> = s.agents().unwrap().into_iter().map(|a| a.id).collect();
    assert_eq!(ids, ["alice", "bob"]);

    // Upsert replaces the whole row, NULLs included.
    r.status = RuntimeStatus::Draining;
    r.pid = None;
    r.conversation_id = None;
    r.status_reason = Some("draining for upgrade".into());
    r.last_heartbeat = Some(u64::from(u32::MAX) + 7);
    s.save_runtime(&r).unwrap();
    s.save_runtime(&runtime("rt-a", "alice", "ep9")).unwrap();
    assert_eq!(s.runtime("rt-b").unwrap(), Some(r));
    let ids: Vec<_> = s.runtimes().unwrap().into_iter().map(|r| r.id).collect();
    assert_eq!(ids, ["rt-a", "rt-b"]);
    assert_eq!(s.runtime("rt-zzz").unwrap(), None);
}

pub(crate) fn remove_runtime_deletes_only_the_record_it_was_shown(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    s.save_runtime(&runtime("rt", "bob", "ep1")).unwrap();
    let seen = s.runtime("rt").unwrap().unwrap();
    // A heartbeat since: the record read is not the record any more.
    assert!(s.heartbeat("rt", "ep1", 5_000, 9_000).unwrap());
    assert!(!s.remove_runtime(&seen).unwrap());
    assert!(s.runtime("rt").unwrap().is_some());
    let seen = s.runtime("rt").unwrap().unwrap();
    assert!(s.remove_runtime(&seen).unwrap());
    assert_eq!(s.runtime("rt").unwrap(), None);
    assert!(!s.remove_runtime(&seen).unwrap());
}

pub(crate) fn heartbeat_and_set_offline_refuse_a_replaced_endpoint(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    s.save_runtime(&runtime("rt", "bob", "ep1")).unwrap();
    send(s, "bob", "hi", 1);
    let (_, att) = s
        .lease_next("bob", "rt", "ep1", 100, 1_100)
        .unwrap()
        .unwrap();

    assert!(s.heartbeat("rt", "ep1", 500, 5_000).unwrap());
    assert_eq!(s.runtime("rt").unwrap().unwrap().last_heartbeat, Some(500));
    assert_eq!(s.attempts(&att.invocation).unwrap()[0].lease_until, 5_000);
    // Never shortens a lease.
    assert!(s.heartbeat("rt", "ep1", 600, 4_000).unwrap());
    assert_eq!(s.attempts(&att.invocation).unwrap()[0].lease_until, 5_000);

    // A new start replaces the endpoint: the old one's heartbeat and offline are refused.
    s.save_runtime(&runtime("rt", "bob", "ep2")).unwrap();
    let before = s.runtime("rt").unwrap();
    assert!(!s.heartbeat("rt", "ep1", 700, 9_000).unwrap());
    assert!(!s
        .set_offline("rt", "ep1", "old supervisor exited", 700)
        .unwrap());
    assert_eq!(s.runtime("rt").unwrap(), before);
    assert_eq!(s.attempts(&att.invocation).unwrap()[0].lease_until, 5_000);
    assert!(!s.heartbeat("nope", "ep2", 700, 9_000).unwrap());

    assert!(s.set_offline("rt", "ep2", "child exited", 800).unwrap());
    let r = s.runtime("rt").unwrap().unwrap();
    assert_eq!(r.status, RuntimeStatus::Offline);
    assert_eq!(r.status_reason.as_deref(), Some("child exited"));
    assert_eq!((r.endpoint, r.endpoint_id, r.pid), (None, None, None));
    assert_eq!(r.host.as_deref(), Some("host1"));
    assert_eq!(r.updated, 800);
    // Once offline, the endpoint id is gone too.
    assert!(!s.heartbeat("rt", "ep2", 900, 9_000).unwrap());
}

pub(crate) fn invocations_insert_filter_and_status(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    let a = send(s, "bob", "one", 10);
    assert!(a.id.starts_with("inv_") && a.id.len() == 16, "{}", a.id);
    assert!(a.id[4..]
        .bytes()
        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)));
    assert_eq!(
        (a.status, a.attempts, a.delivered, a.created),
        (InvocationStatus::Pending, 0, None, 10)
    );
    let b = s
        .insert_invocation(&NewInvocation {
            from: "user",
            to: "carol",
            body: "two",
            status: InvocationStatus::Unavailable,
            reason: Some("no runtime serves carol"),
            now: 11,
        })
        .unwrap();
    let c = send(s, "bob", "three", 12);
    assert!(a.seq < b.seq && b.seq < c.seq);
    assert_eq!(s.invocation(&b.id).unwrap(), Some(b.clone()));
    assert_eq!(s.invocation("inv_000000000000").unwrap(), None);

    let all = s.invocations(&InvocationFilter::default()).unwrap();
    assert_eq!(all, [a.clone(), b.clone(), c.clone()]);
    let bobs = s
        .invocations(&InvocationFilter {
            to: Some("bob"),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(bobs, [a.clone(), c.clone()]);
    let unavailable = s
        .invocations(&InvocationFilter {
            status: Some(InvocationStatus::Unavailable),
            ..Default::default()
        })
        .unwrap();
    assert_eq!(unavailable, vec![b.clone()]);

    assert!(s
        .set_invocation_status(&b.id, InvocationStatus::Pending, None, 20)
        .unwrap());
    let b2 = s.invocation(&b.id).unwrap().unwrap();
    assert_eq!((b2.status, b2.reason), (InvocationStatus::Pending, None));
    assert!(s
        .set_invocation_status(&a.id, InvocationStatus::Delivered, None, 30)
        .unwrap());
    assert_eq!(s.invocation(&a.id).unwrap().unwrap().delivered, Some(30));
    assert!(!s
        .set_invocation_status("inv_nope", InvocationStatus::Failed, Some("x"), 30)
        .unwrap());
}

pub(crate) fn lease_next_is_fifo_and_one_at_a_time_per_agent(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    let first = send(s, "bob", "1", 1);
    let second = send(s, "bob", "2", 2);
    let other = send(s, "carol", "x", 3);

    let (inv, att) = s.lease_next("bob", "rt", "ep", 100, 200).unwrap().unwrap();
    assert_eq!(inv.id, first.id);
    assert_eq!(
        (inv.status, inv.attempts),
        (InvocationStatus::Delivering, 1)
    );
    assert_eq!(s.invocation(&first.id).unwrap(), Some(inv.clone()));
    assert_eq!(
        att,
        Attempt {
            id: att.id,
            invocation: first.id.clone(),
            runtime: "rt".into(),
            endpoint_id: "ep".into(),
            started: 100,
            lease_until: 200,
            finished: None,
            outcome: AttemptOutcome::InProgress,
            reason: None,
            evidence: None,
            host: None,
        }
    );
    // bob has one DELIVERING: nothing more for bob, but carol is independent.
    assert_eq!(s.lease_next("bob", "rt", "ep", 101, 200).unwrap(), None);
    let (c, _) = s
        .lease_next("carol", "rt2", "ep2", 101, 200)
        .unwrap()
        .unwrap();
    assert_eq!(c.id, other.id);
    assert_eq!(s.lease_next("dave", "rt3", "ep3", 101, 200).unwrap(), None);

    assert!(s
        .finish_attempt(att.id, &AttemptResult::Delivered(evidence(150)), 160)
        .unwrap());
    let (next, _) = s.lease_next("bob", "rt", "ep", 170, 300).unwrap().unwrap();
    assert_eq!(next.id, second.id);
}

pub(crate) fn finish_delivered_and_failed(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    let inv = send(s, "bob", "hello", 1);

    // Failed: back to PENDING with the reason, attempt FAILED.
    let (_, a1) = s.lease_next("bob", "rt", "ep", 10, 100).unwrap().unwrap();
    let failed = AttemptResult::Failed("prompt never echoed".into());
    assert!(s.finish_attempt(a1.id, &failed, 20).unwrap());
    let now = s.invocation(&inv.id).unwrap().unwrap();
    assert_eq!(now.status, InvocationStatus::Pending);
    assert_eq!(now.reason.as_deref(), Some("prompt never echoed"));
    // A finished attempt cannot be finished again, and nothing changes.
    assert!(!s
        .finish_attempt(a1.id, &AttemptResult::Delivered(evidence(30)), 30)
        .unwrap());
    assert_eq!(s.invocation(&inv.id).unwrap().unwrap(), now);
    assert!(!s.finish_attempt(9_999, &failed, 30).unwrap());

    // Retry, delivered: evidence stored, delivered = submitted, reason cleared.
    let (again, a2) = s.lease_next("bob", "rt", "ep", 40, 100).unwrap().unwrap();
    assert_eq!(again.attempts, 2);
    let ev = evidence(55);
    assert!(s
        .finish_attempt(a2.id, &AttemptResult::Delivered(ev.clone()), 60)
        .unwrap());
    let done = s.invocation(&inv.id).unwrap().unwrap();
    assert_eq!(done.status, InvocationStatus::Delivered);
    assert_eq!(done.delivered, Some(55));
    assert_eq!(done.reason, None);
    assert_eq!(done.attempts, 2);

    let atts = s.attempts(&inv.id).unwrap();
    assert_eq!(atts.len(), 2);
    assert_eq!(atts[0].outcome, AttemptOutcome::Failed);
    assert_eq!(atts[0].finished, Some(20));
    assert_eq!(atts[0].reason.as_deref(), Some("prompt never echoed"));
    assert_eq!(atts[0].evidence, None);
    assert_eq!(atts[1].outcome, AttemptOutcome::Delivered);
    assert_eq!(atts[1].finished, Some(60));
    assert_eq!(atts[1].evidence, Some(ev));
    assert_eq!(s.lease_next("bob", "rt", "ep", 70, 100).unwrap(), None);
}

pub(crate) fn a_message_that_keeps_failing_is_given_up_and_the_queue_moves_on(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    let stuck = send(s, "bob", "never echoes", 1);
    let next = send(s, "bob", "fine", 2);
    for n in 1..=MAX_FAILED_ATTEMPTS {
        let (inv, a) = s.lease_next("bob", "rt", "ep", 10, 100).unwrap().unwrap();
        assert_eq!(inv.id, stuck.id, "attempt {n} takes the oldest");
        let failed = AttemptResult::Failed("did not echo".into());
        assert!(s.finish_attempt(a.id, &failed, 20).unwrap());
    }
    let given_up = s.invocation(&stuck.id).unwrap().unwrap();
    assert_eq!(given_up.status, InvocationStatus::Failed);
    assert_eq!(
        given_up.reason.as_deref(),
        Some("gave up after 5 failed attempts; the last: did not echo")
    );
    let (inv, _) = s.lease_next("bob", "rt", "ep", 30, 100).unwrap().unwrap();
    assert_eq!(inv.id, next.id);
}

pub(crate) fn an_undeliverable_message_fails_at_once_and_cancel_takes_only_waiting_ones(
    open: Open<'_>,
) {
    let s = open();
    let s = s.as_ref();
    let bad = send(s, "bob", "x", 1);
    let (_, a) = s.lease_next("bob", "rt", "ep", 10, 100).unwrap().unwrap();
    // Leased: not cancellable while it is being delivered.
    assert!(!s.fail_waiting(&bad.id, "cancelled").unwrap());
    let why = AttemptResult::Undeliverable("its sender is invalid".into());
    assert!(s.finish_attempt(a.id, &why, 20).unwrap());
    let failed = s.invocation(&bad.id).unwrap().unwrap();
    assert_eq!(failed.status, InvocationStatus::Failed);
    assert_eq!(failed.reason.as_deref(), Some("its sender is invalid"));

    let waiting = send(s, "bob", "y", 2);
    assert!(s.fail_waiting(&waiting.id, "cancelled by carol").unwrap());
    let cancelled = s.invocation(&waiting.id).unwrap().unwrap();
    assert_eq!(cancelled.status, InvocationStatus::Failed);
    assert_eq!(cancelled.reason.as_deref(), Some("cancelled by carol"));
    assert!(!s.fail_waiting("inv_000000000000", "cancelled").unwrap());
    assert_eq!(s.lease_next("bob", "rt", "ep", 30, 100).unwrap(), None);
}

/// A batch: the oldest `limit` pending, each with its own attempt; no
/// second lease while any is out; finished together; released together.
pub(crate) fn a_batch_is_leased_finished_and_released_together(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    let sent: Vec<Invocation> = (0..5).map(|i| send(s, "bob", "m", i)).collect();
    let batch = s.lease_batch("bob", "rt", "ep", 10, 100, 3).unwrap();
    let ids: Vec<&str> = batch.iter().map(|(inv, _)| inv.id.as_str()).collect();
    let oldest: Vec<&str> = sent[..3].iter().map(|inv| inv.id.as_str()).collect();
    assert_eq!(ids, oldest);
    let attempts: Vec<i64> = batch.iter().map(|(_, a)| a.id).collect();
    let mut distinct = attempts.clone();
    distinct.dedup();
    assert_eq!(distinct.len(), 3);
    assert!(s
        .lease_batch("bob", "rt", "ep", 11, 100, 3)
        .unwrap()
        .is_empty());

    // Two of them finished: the third (already gone) is left alone.
    assert!(s
        .finish_attempt(attempts[2], &AttemptResult::Failed("x".into()), 15)
        .unwrap());
    let done = s
        .finish_attempts(&attempts, &AttemptResult::Delivered(evidence(50)), 60)
        .unwrap();
    assert_eq!(done, 2);
    for inv in &sent[..2] {
        let now = s.invocation(&inv.id).unwrap().unwrap();
        assert_eq!(
            (now.status, now.delivered),
            (InvocationStatus::Delivered, Some(50))
        );
    }

    // The next batch holds what is left, oldest first; a restart puts
    // all of it back.
    let again = s.lease_batch("bob", "rt", "ep", 70, 100, 10).unwrap();
    let ids: Vec<&str> = again.iter().map(|(inv, _)| inv.id.as_str()).collect();
    assert_eq!(ids, [&sent[2].id, &sent[3].id, &sent[4].id]);
    let released = s.release_attempts(Some("rt"), 80, "restarted").unwrap();
    assert_eq!(released.len(), 3);
    for inv in &sent[2..] {
        let now = s.invocation(&inv.id).unwrap().unwrap();
        assert_eq!(now.status, InvocationStatus::Pending);
    }
}

pub(crate) fn release_by_lease_expiry_and_by_runtime(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    let b = send(s, "bob", "b", 1);
    let c = send(s, "carol", "c", 2);
    let d = send(s, "dave", "d", 3);
    let (_, ab) = s.lease_next("bob", "rt-b", "e1", 10, 100).unwrap().unwrap();
    let (_, ac) = s
        .lease_next("carol", "rt-c", "e2", 10, 500)
        .unwrap()
        .unwrap();
    let (_, ad) = s
        .lease_next("dave", "rt-d", "e3", 10, 500)
        .unwrap()
        .unwrap();

    // Only bob's lease has run out at 200.
    let stale = s.stale_attempts(200).unwrap();
    assert_eq!(stale, vec![ab.clone()], "stale_attempts changes nothing");
    assert_eq!(s.stale_attempts(200).unwrap().len(), 1);
    assert_eq!(
        s.stale_attempts(100).unwrap(),
        [],
        "lease_until is inclusive"
    );

    let released = s.release_attempts(None, 200, "lease expired").unwrap();
    assert_eq!(released.len(), 1);
    assert_eq!(released[0].id, ab.id);
    assert_eq!(released[0].outcome, AttemptOutcome::Abandoned);
    assert_eq!(released[0].finished, Some(200));
    assert_eq!(released[0].reason.as_deref(), Some("lease expired"));
    assert_eq!(s.attempts(&b.id).unwrap(), released);
    let b_now = s.invocation(&b.id).unwrap().unwrap();
    assert_eq!(b_now.status, InvocationStatus::Pending);
    assert_eq!(b_now.reason.as_deref(), Some("lease expired"));
    assert_eq!(s.stale_attempts(200).unwrap(), []);

    // By runtime: carol's attempt goes regardless of its lease; dave's stays.
    let released = s
        .release_attempts(Some("rt-c"), 300, "runtime restarted")
        .unwrap();
    assert_eq!(released.iter().map(|a| a.id).collect::<Vec<_>>(), [ac.id]);
    assert_eq!(
        s.invocation(&c.id).unwrap().unwrap().status,
        InvocationStatus::Pending
    );
    assert_eq!(
        s.invocation(&d.id).unwrap().unwrap().status,
        InvocationStatus::Delivering
    );
    assert_eq!(s.attempts(&d.id).unwrap(), vec![ad.clone()]);
    // A released attempt's failure cannot be reported afterwards (a late
    // delivery can: a_late_delivery_report_counts_…).
    assert!(!s
        .finish_attempt(ac.id, &AttemptResult::Failed("late".into()), 400)
        .unwrap());
    assert_eq!(
        s.invocation(&c.id).unwrap().unwrap().status,
        InvocationStatus::Pending
    );
    // Released invocations are leased again.
    let (again, _) = s
        .lease_next("bob", "rt-b", "e4", 600, 900)
        .unwrap()
        .unwrap();
    assert_eq!((again.id, again.attempts), (b.id, 2));
}

pub(crate) fn two_processes_leasing_concurrently_deliver_each_invocation_once(open: Open<'_>) {
    const N: usize = 200;
    {
        let s = open();
        for i in 0..N {
            send(s.as_ref(), "bob", &format!("msg {i}"), i as u64);
        }
    }
    let leased = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        let workers: Vec<_> = (0..2)
            .map(|w| {
                let leased = &leased;
                scope.spawn(move || {
                    let s = open();
                    let (rt, ep) = (format!("rt{w}"), format!("ep{w}"));
                    let mut mine = 0;
                    loop {
                        let now = crate::time::unix_millis();
                        match s.lease_next("bob", &rt, &ep, now, now + 60_000).unwrap() {
                            Some((inv, att)) => {
                                leased.lock().unwrap().push(inv.id.clone());
                                let ev = evidence(now + 30);
                                assert!(s
                                    .finish_attempt(att.id, &AttemptResult::Delivered(ev), now)
                                    .unwrap());
                                mine += 1;
                            }
                            None => {
                                let left = s
                                    .invocations(&InvocationFilter {
                                        to: Some("bob"),
                                        ..Default::default()
                                    })
                                    .unwrap()
                                    .into_iter()
                                    .filter(|i| i.status != InvocationStatus::Delivered)
                                    .count();
                                if left == 0 {
                                    return mine;
                                }
                                std::thread::yield_now();
                            }
                        }
                    }
                })
            })
            .collect();
        let per_worker: Vec<usize> = workers.into_iter().map(|w| w.join().unwrap()).collect();
        assert_eq!(per_worker.iter().sum::<usize>(), N, "{per_worker:?}");
    });

    let leased = leased.lock().unwrap();
    let unique: HashSet<_> = leased.iter().collect();
    assert_eq!((leased.len(), unique.len()), (N, N));

    let s = open();
    let all = s.invocations(&InvocationFilter::default()).unwrap();
    assert_eq!(all.len(), N);
    // One at a time, so the lease order is the queue order.
    let in_order: Vec<_> = all.iter().map(|i| &i.id).collect();
    assert_eq!(leased.iter().collect::<Vec<_>>(), in_order);
    for inv in &all {
        assert_eq!(inv.status, InvocationStatus::Delivered, "{inv:?}");
        assert_eq!(inv.attempts, 1, "{inv:?}");
        let atts = s.attempts(&inv.id).unwrap();
        assert_eq!(atts.len(), 1);
        assert_eq!(atts[0].outcome, AttemptOutcome::Delivered);
    }
}

pub(crate) fn a_late_delivery_report_counts_while_nobody_leased_the_message_again(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    let m = send(s, "bob", "typed while the host was cut off", 1);
    let (_, att) = s.lease_next("bob", "rt", "ep", 100, 200).unwrap().unwrap();
    // The lease ran out while the host could not reach the store.
    let released = s.release_attempts(None, 300, "its lease expired").unwrap();
    assert_eq!(released.len(), 1);
    assert!(s
        .finish_attempt(att.id, &AttemptResult::Delivered(evidence(150)), 400)
        .unwrap());
    let now_is = s.invocation(&m.id).unwrap().unwrap();
    assert_eq!(now_is.status, InvocationStatus::Delivered);
    assert_eq!(
        s.attempts(&m.id).unwrap()[0].outcome,
        AttemptOutcome::Delivered
    );

    // Leased again meanwhile: the late report changes nothing (the new
    // attempt delivers it), and a failure is never taken late.
    let n = send(s, "bob", "leased again", 2);
    let (_, first) = s.lease_next("bob", "rt", "ep", 500, 600).unwrap().unwrap();
    s.release_attempts(None, 700, "its lease expired").unwrap();
    let (_, second) = s
        .lease_next("bob", "rt", "ep2", 800, 9_000)
        .unwrap()
        .unwrap();
    assert!(!s
        .finish_attempt(first.id, &AttemptResult::Delivered(evidence(650)), 900)
        .unwrap());
    assert_eq!(
        s.invocation(&n.id).unwrap().unwrap().status,
        InvocationStatus::Delivering
    );
    assert!(s
        .finish_attempt(second.id, &AttemptResult::Failed("no echo".into()), 950)
        .unwrap());
    s.release_attempts(Some("rt"), 960, "restarted").unwrap();
    assert!(!s
        .finish_attempt(second.id, &AttemptResult::Failed("late".into()), 970)
        .unwrap());
}

pub(crate) fn an_attempt_names_the_host_of_its_runtime(open: Open<'_>) {
    let s = open();
    let s = s.as_ref();
    s.save_runtime(&runtime("rt-b", "bob", "ep1")).unwrap();
    let m = send(s, "bob", "hi", 1);
    let (_, att) = s
        .lease_next("bob", "rt-b", "ep1", 100, 200)
        .unwrap()
        .unwrap();
    assert_eq!(att.host.as_deref(), Some("host1"));
    assert_eq!(s.attempts(&m.id).unwrap()[0].host.as_deref(), Some("host1"));
}

pub(crate) fn a_follower_is_woken_by_a_change_to_a_message(open: Open<'_>) {
    let s = open();
    let follow = s.follow(None).unwrap();
    // Whatever the follower was told while it started up.
    while follow.wait(std::time::Duration::from_millis(200)) {}
    let writer = open();
    send(writer.as_ref(), "bob", "wake up", 1);
    assert!(
        follow.wait(std::time::Duration::from_secs(10)),
        "a stored message woke no follower"
    );
}
