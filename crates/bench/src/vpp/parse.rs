//! Reading VPP's CLI output: interface counters (`show interface`), drops (`show errors`),
//! the TSC rate (`show cpu`) and per-node clocks (`show runtime`).

/// One interface of `show interface`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VppInterface {
    pub name: String,
    pub index: u32,
    pub up: bool,
    pub rx_packets: u64,
    pub rx_bytes: u64,
    pub tx_packets: u64,
    pub tx_bytes: u64,
    /// `drops`: frames this interface's graph path dropped.
    pub drops: u64,
    pub rx_miss: u64,
    pub tx_error: u64,
    /// Every counter as printed, in order (including the ones above).
    pub counters: Vec<(String, u64)>,
}

impl VppInterface {
    fn add(&mut self, name: &str, value: u64) {
        match name {
            "rx packets" => self.rx_packets = value,
            "rx bytes" => self.rx_bytes = value,
            "tx packets" => self.tx_packets = value,
            "tx bytes" => self.tx_bytes = value,
            "drops" => self.drops = value,
            "rx-miss" => self.rx_miss = value,
            "tx-error" => self.tx_error = value,
            _ => {}
        }
        self.counters.push((name.to_string(), value));
    }
}

/// Parses `show interface`: a header, then per interface a line `name idx state [mtu]
/// [counter value]` starting in column 0 and one indented `counter value` line per further
/// counter (counters that are zero are not printed).
pub fn parse_show_interface(out: &str) -> Vec<VppInterface> {
    let mut v: Vec<VppInterface> = Vec::new();
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.is_empty() {
            continue;
        }
        let counter = if line.starts_with(char::is_whitespace) {
            // A further counter of the current interface (or the header: no interface yet).
            if v.is_empty() {
                continue;
            }
            &words[..]
        } else {
            let (Some(name), Some(Ok(index)), Some(state)) = (
                words.first(),
                words.get(1).map(|w| w.parse::<u32>()),
                words.get(2),
            ) else {
                continue;
            };
            v.push(VppInterface {
                name: (*name).to_string(),
                index,
                up: *state == "up",
                ..Default::default()
            });
            // The MTU column (`9000/0/0/0`) exists since VPP 19.04.
            let rest = &words[3..];
            match rest.first() {
                Some(w)
                    if w.contains('/') && w.bytes().all(|b| b.is_ascii_digit() || b == b'/') =>
                {
                    &rest[1..]
                }
                _ => rest,
            }
        };
        if let Some((last, name)) = counter.split_last()
            && !name.is_empty()
            && let Ok(value) = last.parse::<u64>()
            && let Some(i) = v.last_mut()
        {
            i.add(&name.join(" "), value);
        }
    }
    v
}

/// Frames interface `ifname`'s memif device dropped because the peer's ring was full, from
/// `show errors` (`count node reason severity` lines, one per thread and node: node
/// `<ifname>-tx`, reason `no free tx slots`).
pub fn no_free_tx_slots(show_errors: &str, ifname: &str) -> u64 {
    let node = format!("{ifname}-tx");
    show_errors
        .lines()
        .filter(|l| l.contains("no free tx slots"))
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let count = w.next()?.parse::<u64>().ok()?;
            (w.next()? == node).then_some(count)
        })
        .sum()
}

/// VPP's clock rate in ticks per nanosecond from `show cpu` (`Base frequency:  2.10 GHz`,
/// VPP's measured TSC rate).
pub fn parse_base_ghz(out: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix("Base frequency:"))
        .and_then(|rest| rest.split_whitespace().next()?.parse::<f64>().ok())
        .filter(|ghz| *ghz > 0.0)
}

/// The harness's name for VPP node `name`: per-interface output nodes (`memif1/1-output`,
/// `memif1/1-tx`) folded into one per kind (`interface-output`, `memif-tx`) so that rows of
/// different topologies line up; every other node keeps VPP's name.
fn node_column(name: &str) -> String {
    if let Some(dev) = name.strip_suffix("-output")
        && dev.contains('/')
    {
        return "interface-output".into();
    }
    if let Some(dev) = name.strip_suffix("-tx")
        && let Some((kind, _)) = dev.split_once('/')
    {
        let kind = kind.trim_end_matches(|c: char| c.is_ascii_digit());
        return format!("{kind}-tx");
    }
    name.to_string()
}

/// Parses `show runtime`: per thread a `Thread N name (lcore C)` line (absent with no
/// workers), `Time T, …`, a header, then per node `name state calls vectors suspends clocks
/// vectors/call`, where the state may be two words (`interrupt wait`) and clocks are per
/// vector (per call for a node without vectors). Returns the worker threads (thread 0, VPP's
/// main thread, only when it is the only one), clocks in nanoseconds at `tsc_per_ns`.
pub fn parse_show_runtime(out: &str, tsc_per_ns: f64) -> Vec<api::WorkerRuntime> {
    let mut threads: Vec<(usize, api::WorkerRuntime)> = Vec::new();
    let new = |core| api::WorkerRuntime {
        worker: 0,
        core,
        seconds: 0.0,
        busy_seconds: 0.0,
        loops: 0,
        sleeps: 0,
        stalls: 0,
        nodes: Vec::new(),
    };
    for line in out.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["Thread", n, ..] => {
                let core = line
                    .split_once("(lcore ")
                    .and_then(|(_, r)| r.trim_end_matches(')').trim().parse().ok());
                threads.push((n.parse().unwrap_or(threads.len()), new(core)));
            }
            ["Time", t, ..] => {
                if threads.is_empty() {
                    threads.push((0, new(None)));
                }
                if let Some(w) = threads.last_mut() {
                    w.1.seconds = t.trim_end_matches(',').parse().unwrap_or(0.0);
                    // `loops/sec L`: loops over the interval.
                    if let Some(i) = words.iter().position(|w| *w == "loops/sec")
                        && let Some(l) = words.get(i + 1).and_then(|l| l.parse::<f64>().ok())
                    {
                        w.1.loops = (l * w.1.seconds) as u64;
                    }
                }
            }
            [name, .., calls, vectors, suspends, clocks, per_call] if words.len() >= 7 => {
                let (Ok(calls), Ok(vectors), Ok(_), Ok(clocks), Ok(_)) = (
                    calls.parse::<u64>(),
                    vectors.parse::<u64>(),
                    suspends.parse::<u64>(),
                    clocks.parse::<f64>(),
                    per_call.parse::<f64>(),
                ) else {
                    continue;
                };
                let Some(w) = threads.last_mut() else {
                    continue;
                };
                let state = words[1..words.len() - 5].join(" ");
                let kind = match state.as_str() {
                    "polling" | "interrupt wait" => "input",
                    _ => "internal",
                };
                let per = if vectors > 0 { vectors } else { calls };
                let ns = (clocks * per as f64 / tsc_per_ns).round() as u64;
                let column = node_column(name);
                match w.1.nodes.iter_mut().find(|n| n.name == column) {
                    Some(n) => {
                        n.calls += calls;
                        n.vectors += vectors;
                        n.clocks += ns;
                    }
                    None => w.1.nodes.push(api::NodeRuntime {
                        name: column,
                        kind: kind.into(),
                        calls,
                        vectors,
                        clocks: ns,
                    }),
                }
            }
            _ => {}
        }
    }
    if threads.len() > 1 {
        threads.retain(|(n, _)| *n != 0);
    }
    threads
        .into_iter()
        .enumerate()
        .map(|(i, (_, mut w))| {
            w.worker = i;
            w
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_show_interface() {
        let out = "              Name               Idx    State  MTU (L3/IP4/IP6/MPLS)     Counter          Count     
local0                            0     down          0/0/0/0       
memif1/0                          1      up          9000/0/0/0     rx packets               5000000
                                                                    rx bytes               320000000
                                                                    drops                          3
                                                                    ip4                      5000000
                                                                    rx-miss                       12
memif1/1                          2      up          9000/0/0/0     tx packets               4999997
                                                                    tx bytes               319999808
                                                                    tx-error                       1
";
        let v = parse_show_interface(out);
        assert_eq!(v.len(), 3);
        assert_eq!(
            (v[0].name.as_str(), v[0].index, v[0].up),
            ("local0", 0, false)
        );
        assert!(v[0].counters.is_empty());
        let a = &v[1];
        assert_eq!(
            (
                a.name.as_str(),
                a.up,
                a.rx_packets,
                a.rx_bytes,
                a.drops,
                a.rx_miss
            ),
            ("memif1/0", true, 5_000_000, 320_000_000, 3, 12)
        );
        assert!(a.counters.contains(&("ip4".into(), 5_000_000)));
        let b = &v[2];
        assert_eq!(
            (
                b.name.as_str(),
                b.tx_packets,
                b.tx_bytes,
                b.tx_error,
                b.rx_packets
            ),
            ("memif1/1", 4_999_997, 319_999_808, 1, 0)
        );
        // Before VPP 19.04 there was no MTU column.
        let old = "              Name               Idx       State          Counter          Count
memif1/0                          1         up       rx packets                    10
";
        let v = parse_show_interface(old);
        assert_eq!((v[0].name.as_str(), v[0].rx_packets), ("memif1/0", 10));
        assert!(parse_show_interface("garbage\n").is_empty());
    }

    #[test]
    fn parses_show_runtime_per_worker_in_nanoseconds() {
        // VPP 25.10's layout, two threads, a multinet path (abridged).
        let out = "Thread 0 vpp_main (lcore 0)
Time 2.0, 10 sec internal node vector rate 0.00 loops/sec 1020.00
  vector rates in 0.0000e0, out 0.0000e0, drop 0.0000e0, punt 0.0000e0
             Name                 State         Calls          Vectors        Suspends         Clocks       Vectors/Call
unix-epoll-input                 polling              2040               0               0          4.20e4            0.00
---------------
Thread 1 vpp_wk_0 (lcore 1)
Time 2.0, 10 sec internal node vector rate 256.00 loops/sec 20000.00
  vector rates in 5.0000e6, out 5.0000e6, drop 0.0000e0, punt 0.0000e0
             Name                 State         Calls          Vectors        Suspends         Clocks       Vectors/Call
ethernet-input                   active             39062        10000000               0          8.00e0          256.00
ip4-vxlan-bypass                 active             19531         5000000               0          4.20e0          256.00
memif-input                      polling            40000        10000000               0          2.10e1          250.00
memif1/0-output                  active             19531         5000000               0          2.00e0          256.00
memif1/0-tx                      active             19531         5000000               0          4.20e1          256.00
memif1/1-output                  active             19531         5000000               0          2.00e0          256.00
memif1/1-tx                      active             19531         5000000               0          3.80e1          256.00
vxlan4-input                     active             19531         5000000               0          1.05e1          256.00
some-process                 interrupt wait            3               0               0          1.00e3            0.00
";
        let w = parse_show_runtime(out, 2.1);
        assert_eq!(
            w.len(),
            1,
            "the main thread is left out once there are workers"
        );
        let w = &w[0];
        assert_eq!(
            (w.worker, w.core, w.seconds, w.loops),
            (0, Some(1), 2.0, 40_000)
        );
        let node = |n: &str| w.nodes.iter().find(|x| x.name == n).unwrap().clone();
        let input = node("memif-input");
        assert_eq!((input.kind.as_str(), input.vectors), ("input", 10_000_000));
        // 21 ticks a packet at 2.1 GHz: 10 ns a packet.
        assert_eq!(input.clocks, 100_000_000);
        assert_eq!(node("vxlan4-input").clocks, 25_000_000);
        // Per-interface output nodes fold into one column per kind.
        let tx = node("memif-tx");
        assert_eq!(
            (tx.vectors, tx.clocks),
            (10_000_000, 100_000_000 + 90_476_190)
        );
        assert_eq!(node("interface-output").vectors, 10_000_000);
        assert!(!w.nodes.iter().any(|n| n.name.contains('/')));
        assert_eq!(node("some-process").kind, "input");
        // Through the harness's own arithmetic: ns per packet per node.
        let costs = crate::dut::node_costs(std::slice::from_ref(w));
        let cost = |n: &str| costs.iter().find(|c| c.0 == n).unwrap().1;
        assert!((cost("memif-input") - 10.0).abs() < 1e-9);
        assert!((cost("ethernet-input") - 8.0 / 2.1).abs() < 1e-6);
        // A single-threaded VPP has no Thread lines: its one thread is the worker.
        let single = "Time 1.0, 10 sec internal node vector rate 1.00 loops/sec 5.00
             Name                 State         Calls          Vectors        Suspends         Clocks       Vectors/Call
memif-input                      polling               10             100               0          1.00e1           10.00
";
        let w = parse_show_runtime(single, 1.0);
        assert_eq!((w.len(), w[0].core, w[0].nodes[0].clocks), (1, None, 1000));
        assert!(parse_show_runtime("garbage", 1.0).is_empty());
    }

    #[test]
    fn memif_drops_for_a_full_ring_are_read_per_interface_and_thread() {
        let out = "   Count                  Node                              Reason               Severity
      4386                memif1/1-tx                       no free tx slots               error
        10                memif1/10-tx                      no free tx slots               error
         7                memif1/1-tx                       no free tx slots               error
         3              ip4-input                     ip4 ttl <= 1                     error
";
        assert_eq!(no_free_tx_slots(out, "memif1/1"), 4393);
        assert_eq!(no_free_tx_slots(out, "memif1/10"), 10);
        assert_eq!(no_free_tx_slots(out, "memif1/0"), 0);
    }

    #[test]
    fn reads_the_tsc_rate_from_show_cpu() {
        let out = "Model name:               Intel(R) Xeon(R) CPU E5-2667 v4 @ 3.20GHz
Microarch model (family): [0x6] Broadwell ([0x4f] Broadwell-EP/EX) stepping 0x1
Flags:                    sse3 pclmulqdq ssse3 sse41 sse42 avx rdrand avx2 bmi2 rtm
Base frequency:           3.19 GHz
";
        assert_eq!(parse_base_ghz(out), Some(3.19));
        assert_eq!(parse_base_ghz("Base frequency: 0.00 GHz"), None);
        assert_eq!(parse_base_ghz(""), None);
    }
}
