//! Any bytes as a request head to the metrics endpoint's parser: no panic, and what parses is
//! the request line's own words (a method and a path with no space in them, the path without
//! its query).
#![no_main]

use daemon::metrics_http::parse_request;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some(r) = parse_request(data) {
        let line = std::str::from_utf8(data).unwrap().lines().next().unwrap();
        assert!(line.starts_with(r.method), "{line:?}");
        assert!(!r.method.contains(' ') && !r.path.contains(' ') && !r.path.contains('?'));
        assert!(line.contains(r.path));
    }
});
