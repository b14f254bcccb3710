//! Any bytes into the control-message parser: no panic, and what parses re-encodes to itself.
#![no_main]

use libfuzzer_sys::fuzz_target;
use memif::msg::Msg;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = Msg::parse(data) {
        let again = Msg::parse(&m.encode()).expect("our own encoding parses");
        assert_eq!(again, m);
        let _ = format!("{m:?}");
    }
});
