//! The runner's unit tests: shares, quotas, the pacer, the start line.

use super::*;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Instant;

#[test]
fn shares_cover_every_call_and_differ_by_one_at_most() {
    for (total, connections) in [(10, 3), (2000, 2000), (7, 1), (10_000, 64)] {
        let shares: Vec<u64> = (0..connections)
            .map(|i| share(total, connections, i))
            .collect();
        assert_eq!(shares.iter().sum::<u64>(), total);
        let (min, max) = (shares.iter().min(), shares.iter().max());
        assert!(max.unwrap() - min.unwrap() <= 1, "{shares:?}");
    }
    assert_eq!(warmup_share(100, 10_000, 9_999), 1);
    assert_eq!(warmup_share(0, 4, 0), 0);
}

#[test]
fn a_pool_gives_out_each_call_once_among_threads() {
    let pool = CallPool::new(10_000);
    let taken: u64 = std::thread::scope(|s| {
        let threads: Vec<_> = (0..4)
            .map(|_| s.spawn(|| std::iter::from_fn(|| pool.take().then_some(())).count()))
            .collect();
        threads.into_iter().map(|t| t.join().unwrap() as u64).sum()
    });
    assert_eq!(taken, 10_000);
    assert!(!pool.take(), "an empty pool stays empty");
    // A paced run keeps each connection's share of the schedule; a timed one its window.
    let paced = RunConfig {
        calls: 10,
        rate: Some(100.0),
        ..RunConfig::default()
    };
    let pool = Arc::new(CallPool::new(10));
    let quota = Quota::new(&paced, Instant::now(), 3, 0, &pool);
    assert!(matches!(quota, Quota::Calls(4)), "{quota:?}");
    let quota = Quota::new(&RunConfig::default(), Instant::now(), 3, 0, &pool);
    assert!(matches!(quota, Quota::Pool(_)), "{quota:?}");
}

#[test]
fn engines_by_connections_and_transport() {
    use TransportKind::*;
    let cpus = 2;
    let pick = |engine: Engine, kind, c| engine.pick(kind, c, cpus);
    assert_eq!(pick(Engine::Auto, Tcp, 1).unwrap(), Engine::Blocking);
    assert_eq!(pick(Engine::Auto, Tcp, 2).unwrap(), Engine::Blocking);
    assert_eq!(pick(Engine::Auto, Tcp, 3).unwrap(), Engine::Evloop);
    assert_eq!(pick(Engine::Auto, CurlReuse, 64).unwrap(), Engine::Blocking);
    // A shared connection goes to one event loop, one worker or many.
    assert_eq!(pick(Engine::Auto, H2Mux, 1).unwrap(), Engine::Evloop);
    assert_eq!(pick(Engine::Auto, H2Mux, 2).unwrap(), Engine::Evloop);
    assert_eq!(pick(Engine::Auto, GrpcMux, 1).unwrap(), Engine::Evloop);
    assert_eq!(pick(Engine::Auto, GrpcMux, 64).unwrap(), Engine::Evloop);
    assert_eq!(pick(Engine::Auto, H2, 2).unwrap(), Engine::Blocking);
    assert_eq!(pick(Engine::Auto, Grpc, 64).unwrap(), Engine::Blocking);
    assert_eq!(
        pick(Engine::Evloop, HttpKeepalive, 1).unwrap(),
        Engine::Evloop
    );
    assert_eq!(pick(Engine::Blocking, Tcp, 1024).unwrap(), Engine::Blocking);
    assert!(matches!(
        pick(Engine::Auto, CurlFresh, 1025),
        Err(LoadLimitError::TooManyWorkers { max: 1024, .. })
    ));
    assert!(matches!(
        pick(Engine::Blocking, Tcp, 1025),
        Err(LoadLimitError::TooManyWorkers { evloop: true, .. })
    ));
    assert!(matches!(
        pick(Engine::Evloop, CurlReuse, 8),
        Err(LoadLimitError::NoEventLoop { .. })
    ));
    assert!(matches!(
        pick(Engine::Auto, Tcp, 10_001),
        Err(LoadLimitError::TooManyConnections { .. })
    ));
    let curl_message = pick(Engine::Auto, CurlReuse, 2000).unwrap_err().to_string();
    assert!(curl_message.contains("1024"), "{curl_message}");
}

#[test]
fn pacer_staggers_connections_and_counts_late_calls() {
    let start = Instant::now();
    let mut late = 0;
    // 1000 calls/s over 4 connections: each calls every 4 ms, the second 1 ms after
    // the first.
    let mut second = Pacer::new(Some(1000.0), 4, 1).unwrap();
    let first_due = second.next(start, &mut late);
    assert_eq!(first_due.at - start, Duration::from_millis(1));
    assert_eq!(
        second.next(start, &mut late).at - start,
        Duration::from_millis(5)
    );
    // A schedule that started long ago: its next call is late, and not waited for.
    let long_ago = start - Duration::from_secs(1);
    let due = second.next(long_ago, &mut late);
    assert_eq!((due.wait, late), (Duration::ZERO, 1));
    assert!(Pacer::new(None, 4, 1).is_none());
}

#[test]
fn a_thread_that_fails_before_the_start_stops_the_others() {
    let started = std::sync::atomic::AtomicUsize::new(0);
    let result = run_threads(4, &|i| format!("test-{i}"), |i, start_line| {
        if i == 2 {
            start_line.abort();
            return Err(RunTransportError::Runtime(std::io::Error::other("no fds")));
        }
        start_line.wait()?;
        started.fetch_add(1, Relaxed);
        Ok(Finished {
            tally: Tally::default(),
            ended: Instant::now(),
        })
    });
    assert!(
        matches!(result, Err(RunTransportError::Runtime(_))),
        "{result:?}"
    );
    assert_eq!(
        started.load(Relaxed),
        0,
        "no thread went past the start line"
    );
    let ok = run_threads(3, &|i| format!("test-{i}"), |_, start_line| {
        start_line.wait()?;
        let mut tally = Tally::default();
        tally.per_connection.add(1);
        Ok(Finished {
            tally,
            ended: Instant::now(),
        })
    });
    let (tally, _) = ok.unwrap();
    assert_eq!(tally.per_connection.connections, 3);
}

#[test]
fn a_start_line_called_off_releases_those_waiting() {
    let line = StartLine::new(3);
    std::thread::scope(|s| {
        let waiting = s.spawn(|| line.wait());
        std::thread::sleep(Duration::from_millis(20));
        line.abort();
        assert!(matches!(
            waiting.join().unwrap(),
            Err(RunTransportError::Aborted)
        ));
    });
    let line = StartLine::new(2);
    std::thread::scope(|s| {
        let other = s.spawn(|| line.wait());
        assert!(line.wait().is_ok());
        assert!(other.join().unwrap().is_ok());
    });
}
