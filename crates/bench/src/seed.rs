//! The seeds' published throughput as data (Tables 5 to 8 of the Intel technology guide
//! "Intel® Data Streaming Accelerator (Intel® DSA) - Calico VPP Multinet with Intel® DSA on 4th
//! Gen Intel® Xeon® Scalable Processor", Tables 5 and 6 of "Intel® Data Streaming Accelerator
//! (DSA) – Offloading Memory Copying in VPP by Shared Memory Packet Interface (memif) Plugin
//! with Intel® DSA on 4th Gen Intel® Xeon® Scalable Processors"), and a table that puts it
//! beside ours by frame size.
//!
//! The seeds publish Gbps only. We convert to packet rates reading the Gbps as L1 at the
//! TRex-side frame size S (`Mpps = Gbps·1000 / (8·(S+20))`), the one reading under which every
//! DSA column is flat in pps. The conversion is ours, not the seeds'.

use std::fmt::Write as _;

/// Mpps from an L1 rate in Gbps at frame size `size` B (20 B of preamble, SFD and inter-frame
/// gap per frame).
pub fn mpps_from_l1_gbps(gbps: f64, size: usize) -> f64 {
    gbps * 1000.0 / (8.0 * (size as f64 + 20.0))
}

/// One published column: Gbps at each x (frame size in B, or VPP worker cores).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeedColumn {
    /// Short column header.
    pub name: &'static str,
    /// Which seed table, and what was measured.
    pub source: &'static str,
    pub gbps: &'static [(usize, f64)],
}

impl SeedColumn {
    /// The published Gbps at `x`, if the seed has it.
    pub fn gbps_at(&self, x: usize) -> Option<f64> {
        self.gbps.iter().find(|(at, _)| *at == x).map(|&(_, g)| g)
    }
}

/// Throughput against frame size on one VPP worker core (MTU 1500, and MTU 9000 for the last
/// two columns).
pub const BY_SIZE: [SeedColumn; 8] = [
    SeedColumn {
        name: "single SW",
        source: "seed 000 Table 5: Calico VPP singlenet, SW memif",
        gbps: &[
            (128, 5.60),
            (256, 9.87),
            (512, 15.86),
            (1024, 24.03),
            (1500, 28.83),
        ],
    },
    SeedColumn {
        name: "multi SW",
        source: "seed 000 Table 5: Calico VPP multinet (VXLAN), SW memif",
        gbps: &[
            (128, 4.17),
            (256, 7.50),
            (512, 12.61),
            (1024, 19.28),
            (1500, 24.20),
        ],
    },
    SeedColumn {
        name: "single DSA",
        source: "seed 000 Table 6: Calico VPP singlenet, DSA memif",
        gbps: &[
            (128, 6.59),
            (256, 12.35),
            (512, 23.80),
            (1024, 46.23),
            (1500, 68.82),
        ],
    },
    SeedColumn {
        name: "multi DSA",
        source: "seed 000 Table 6: Calico VPP multinet (VXLAN), DSA memif",
        gbps: &[
            (128, 4.87),
            (256, 9.11),
            (512, 17.57),
            (1024, 34.34),
            (1500, 50.07),
        ],
    },
    SeedColumn {
        name: "memif SW",
        source: "seed 001 Table 5: VPP memif only (no VXLAN), software copy",
        gbps: &[
            (64, 9.99),
            (128, 13.97),
            (256, 23.98),
            (512, 37.94),
            (1024, 47.77),
            (1500, 63.85),
        ],
    },
    SeedColumn {
        name: "memif DSA",
        source: "seed 001 Table 5: VPP memif only (no VXLAN), DSA copy (use-dma)",
        gbps: &[
            (64, 9.95),
            (128, 17.95),
            (256, 33.94),
            (512, 63.88),
            (1024, 131.69),
            (1500, 185.37),
        ],
    },
    SeedColumn {
        name: "memif SW 9k",
        source: "seed 001 Table 6: VPP memif only (no VXLAN), software copy, MTU 9000",
        gbps: &[
            (64, 9.98),
            (128, 13.98),
            (256, 23.96),
            (512, 37.94),
            (1024, 47.92),
            (1500, 63.90),
            (1800, 69.85),
        ],
    },
    SeedColumn {
        name: "memif DSA 9k",
        source: "seed 001 Table 6: VPP memif only (no VXLAN), DSA copy (use-dma), MTU 9000",
        gbps: &[
            (64, 9.95),
            (128, 17.96),
            (256, 34.02),
            (512, 65.64),
            (1024, 131.64),
            (1500, 185.58),
            (1800, 199.53),
        ],
    },
];

/// The frame size of the core-scaling tables ([`BY_CORES`]).
pub const CORE_SCALING_SIZE: usize = 1024;

/// Throughput against VPP worker cores at 1024 B, MTU 1500; x is the number of cores. The
/// 100 GbE line rate caps the top. Seed 000 gives 46.24 here and 46.23 in Table 6 for the same
/// point; both are kept as published.
pub const BY_CORES: [SeedColumn; 4] = [
    SeedColumn {
        name: "single SW",
        source: "seed 000 Table 7: Calico VPP singlenet, SW memif, 1024 B",
        gbps: &[
            (1, 24.03),
            (2, 43.46),
            (3, 64.76),
            (4, 78.45),
            (5, 92.49),
            (6, 98.98),
        ],
    },
    SeedColumn {
        name: "multi SW",
        source: "seed 000 Table 7: Calico VPP multinet (VXLAN), SW memif, 1024 B",
        gbps: &[
            (1, 19.28),
            (2, 36.96),
            (3, 56.93),
            (4, 72.76),
            (5, 89.89),
            (6, 100.00),
        ],
    },
    SeedColumn {
        name: "single DSA",
        source: "seed 000 Table 8: Calico VPP singlenet, DSA memif, 1024 B",
        gbps: &[(1, 46.24), (2, 83.17), (3, 99.51)],
    },
    SeedColumn {
        name: "multi DSA",
        source: "seed 000 Table 8: Calico VPP multinet (VXLAN), DSA memif, 1024 B",
        gbps: &[(1, 34.34), (2, 67.14), (3, 98.41)],
    },
];

/// One of our results for the comparison table.
#[derive(Debug, Clone, PartialEq)]
pub struct Ours {
    /// Column header, e.g. `veclane/single NDR`.
    pub label: String,
    /// Frame size in B.
    pub size: usize,
    pub mpps: f64,
}

const MISSING: &str = "–";

/// A text table, one row per frame size (those of [`BY_SIZE`] and of `ours`), with the seed
/// columns in Mpps beside the Gbps they came from, then one column per label of `ours` (in
/// order of first appearance). A size a column lacks shows "–"; of repeated (label, size)
/// pairs the first is shown.
pub fn compare_table(ours: &[Ours]) -> String {
    table(
        "Seed reference beside ours: Mpps by frame size S.\n",
        "size B",
        &BY_SIZE,
        |size| size,
        ours,
    )
}

/// The core-scaling tables ([`BY_CORES`], seed 000 Tables 7 and 8, at 1024 B) beside ours:
/// `ours[i].size` is a worker count here, and its Mpps a result at 1024 B.
pub fn compare_cores_table(ours: &[Ours]) -> String {
    table(
        "Seed reference beside ours: Mpps by worker cores, 1024 B frames.\n",
        "cores",
        &BY_CORES,
        |_| CORE_SCALING_SIZE,
        ours,
    )
}

/// The table of [`compare_table`] with rows keyed by `x` (a frame size, or a core count),
/// `size_of(x)` the frame size the Gbps of row `x` convert at.
fn table(
    title: &str,
    x_name: &str,
    columns: &[SeedColumn],
    size_of: fn(usize) -> usize,
    ours: &[Ours],
) -> String {
    let mut labels: Vec<&str> = Vec::new();
    for o in ours {
        if !labels.contains(&o.label.as_str()) {
            labels.push(&o.label);
        }
    }
    let mut xs: Vec<usize> = columns
        .iter()
        .flat_map(|c| c.gbps.iter().map(|&(s, _)| s))
        .chain(ours.iter().map(|o| o.size))
        .collect();
    xs.sort_unstable();
    xs.dedup();

    let mut header: Vec<String> = vec![x_name.into()];
    header.extend(columns.iter().map(|c| c.name.to_string()));
    header.extend(labels.iter().map(|l| l.to_string()));
    let rows: Vec<Vec<String>> = xs
        .iter()
        .map(|&x| {
            let mut row = vec![x.to_string()];
            row.extend(columns.iter().map(|c| match c.gbps_at(x) {
                Some(g) => format!("{:.2} ({g:.2})", mpps_from_l1_gbps(g, size_of(x))),
                None => MISSING.into(),
            }));
            row.extend(labels.iter().map(|&l| {
                match ours.iter().find(|o| o.label == l && o.size == x) {
                    Some(o) if o.mpps.is_finite() => format!("{:.2}", o.mpps),
                    _ => MISSING.into(),
                }
            }));
            row
        })
        .collect();

    let mut out = String::from(title);
    out.push_str(
        "Hardware differs. Seeds: Intel Xeon servers with DSA, TRex on a 100 GbE NIC (E810),\n  \
         VPP memif, one VPP worker core. Ours: this 2-vCPU VM, no NIC, veclane's memif generator.\n\
         Seed cells: Mpps (published Gbps), Mpps = Gbps*1000/(8*(S+20)), i.e. the Gbps read as L1\n  \
         at the TRex-side frame size S (our conversion; docs/benchmarking.md, \"Published figures\").\n\
         Ours: receiver-measured Mpps; S = memif buffer bytes, no FCS.\n\
         The 64 B memif cells are 10 GbE line rate (14.88 Mpps): a cap, not VPP.\n\
         Columns:\n",
    );
    for c in columns {
        let _ = writeln!(out, "  {:<12} {}", c.name, c.source);
    }
    for l in &labels {
        let _ = writeln!(out, "  {l:<12} ours");
    }
    out.push('\n');
    let widths: Vec<usize> = (0..header.len())
        .map(|i| {
            rows.iter()
                .map(|r| r[i].chars().count())
                .chain([header[i].chars().count()])
                .max()
                .unwrap_or(0)
        })
        .collect();
    for line in [&header].into_iter().chain(&rows) {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .map(|(cell, &w)| format!("{cell:>w$}"))
            .collect();
        let _ = writeln!(out, "{}", cells.join("  "));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ours(label: &str, size: usize, mpps: f64) -> Ours {
        Ours {
            label: label.into(),
            size,
            mpps,
        }
    }

    /// The seeds' Mpps, recomputed from their Gbps tables by our conversion.
    #[test]
    fn conversion_reproduces_the_reference_table() {
        let expected: [(usize, [Option<f64>; 6]); 6] = [
            (64, [None, None, None, None, Some(14.87), Some(14.81)]),
            (128, [4.73, 3.52, 5.57, 4.11, 11.80, 15.16].map(Some)),
            (256, [4.47, 3.40, 5.59, 4.13, 10.86, 15.37].map(Some)),
            (512, [3.73, 2.96, 5.59, 4.13, 8.91, 15.01].map(Some)),
            (1024, [2.88, 2.31, 5.54, 4.11, 5.72, 15.77].map(Some)),
            (1500, [2.37, 1.99, 5.66, 4.12, 5.25, 15.24].map(Some)),
        ];
        for (size, row) in expected {
            for (column, want) in BY_SIZE.iter().zip(row) {
                let got = column.gbps_at(size).map(|g| mpps_from_l1_gbps(g, size));
                match (got, want) {
                    (Some(g), Some(w)) => {
                        assert!((g - w).abs() < 0.005, "{} {size}: {g}", column.name)
                    }
                    (None, None) => {}
                    _ => panic!("{} {size}: {got:?} vs {want:?}", column.name),
                }
            }
        }
    }

    #[test]
    fn core_scaling_is_at_1024_bytes() {
        assert_eq!(
            BY_CORES[0].gbps_at(1),
            BY_SIZE[0].gbps_at(CORE_SCALING_SIZE)
        );
        assert_eq!(BY_CORES[1].gbps_at(6), Some(100.0));
        assert_eq!(BY_CORES[2].gbps_at(4), None);
    }

    #[test]
    fn table_puts_seed_rows_beside_ours() {
        let t = compare_table(&[
            ours("veclane/single NDR", 1500, 3.1),
            ours("veclane/single NDR", 9000, 0.8),
            ours("testpmd NDR", 64, 5.0),
        ]);
        for text in [
            "2-vCPU VM, no NIC",
            "Intel Xeon servers with DSA",
            "100 GbE",
            "Gbps*1000/(8*(S+20))",
            "single SW    seed 000 Table 5",
            "multi DSA    seed 000 Table 6",
            "memif DSA    seed 001 Table 5",
            "memif DSA 9k seed 001 Table 6",
            "veclane/single NDR ours",
        ] {
            assert!(t.contains(text), "missing {text:?} in\n{t}");
        }
        let row = |size: &str| {
            t.lines()
                .find(|l| l.split_whitespace().next() == Some(size))
                .unwrap_or_else(|| panic!("no {size} row in\n{t}"))
                .split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect::<Vec<_>>()
        };
        assert_eq!(
            row("1500"),
            [
                "1500",
                "2.37 (28.83)",
                "1.99 (24.20)",
                "5.66 (68.82)",
                "4.12 (50.07)",
                "5.25 (63.85)",
                "15.24 (185.37)",
                "5.25 (63.90)",
                "15.26 (185.58)",
                "3.10",
                "–"
            ]
        );
        assert_eq!(
            row("64"),
            [
                "64",
                "–",
                "–",
                "–",
                "–",
                "14.87 (9.99)",
                "14.81 (9.95)",
                "14.85 (9.98)",
                "14.81 (9.95)",
                "–",
                "5.00"
            ]
        );
        assert_eq!(row("9000")[1..9], ["–"; 8]);
        assert_eq!(row("9000")[9], "0.80");
    }

    #[test]
    fn columns_line_up() {
        let t = compare_table(&[ours("veclane", 128, 1.0)]);
        let table: Vec<&str> = t.lines().skip_while(|l| !l.is_empty()).skip(1).collect();
        assert_eq!(table.len(), 8, "header and seven sizes:\n{t}");
        let width = table[0].chars().count();
        assert!(table.iter().all(|l| l.chars().count() == width), "\n{t}");
    }

    #[test]
    fn core_table_converts_at_1024_bytes_and_keys_ours_by_workers() {
        let t = compare_cores_table(&[
            ours("veclane/single multinet", 1, 2.5),
            ours("veclane/single multinet", 2, 4.0),
        ]);
        assert!(t.contains("by worker cores, 1024 B"), "{t}");
        assert!(t.contains("multi SW     seed 000 Table 7"), "{t}");
        let row: Vec<&str> = t
            .lines()
            .find(|l| l.split_whitespace().next() == Some("1"))
            .unwrap()
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            row,
            [
                "1",
                "2.88 (24.03)",
                "2.31 (19.28)",
                "5.54 (46.24)",
                "4.11 (34.34)",
                "2.50"
            ]
        );
    }
}
