//! VPP's startup configuration and the CLI commands that build a topology on it.

use std::path::Path;

use super::{SOCKET_ID, VppConfig, memif_name};
use crate::node::mac_str;

/// The startup configuration, with every socket and log under `dir` and `tag` naming the
/// shared-memory API segment (unique per instance).
pub fn startup_conf(cfg: &VppConfig, dir: &Path, tag: &str) -> String {
    let d = dir.display();
    format!(
        r#"unix {{
  nodaemon
  cli-listen {d}/cli.sock
  cli-no-pager
  cli-no-banner
  log {d}/vpp.log
  runtime-dir {d}
  poll-sleep-usec 1000
}}
api-segment {{
  prefix {tag}
}}
socksvr {{
  socket-name {d}/api.sock
}}
statseg {{
  socket-name {d}/stats.sock
}}
cpu {{
  main-core {main}
{workers}}}
memory {{
  main-heap-size 1G
  main-heap-page-size 4K
}}
buffers {{
  buffers-per-numa 16384
  page-size 4K
}}
plugins {{
  plugin default {{ disable }}
  plugin memif_plugin.so {{ enable }}
{plugins}}}
"#,
        main = cfg.gen_cpu,
        plugins = cfg
            .topology
            .plugins
            .iter()
            .map(|p| format!("  plugin {p}_plugin.so {{ enable }}\n"))
            .collect::<String>(),
        // No workers: the main thread polls the interfaces itself (sleeping poll-sleep-usec
        // between idle loops), for tests that want VPP beside a busy CPU rather than on it.
        workers = match cfg.workers.as_slice() {
            [] => String::new(),
            w => format!(
                "  corelist-workers {}\n",
                w.iter().map(usize::to_string).collect::<Vec<_>>().join(",")
            ),
        },
    )
}

/// The CLI commands that build the topology on the memif socket `sock`, in order: the
/// socket, the memif masters, the topology's own commands, the memifs brought up.
pub fn setup_commands(cfg: &VppConfig, sock: &Path) -> Vec<String> {
    let ring = 1u32 << cfg.ring_log2;
    let bsize = cfg.buffer_size;
    // One queue pair per worker (the generator opens as many); the default is one.
    let queues = match cfg.workers.len() {
        0 | 1 => String::new(),
        n => format!(" rx-queues {n} tx-queues {n}"),
    };
    let t = &cfg.topology;
    let (sock, role) = match &t.slave_of {
        Some(p) => (p.as_path(), "slave"),
        None => (sock, "master"),
    };
    let mut v = vec![format!(
        "create memif socket id {SOCKET_ID} filename {}",
        sock.display()
    )];
    v.extend(t.memifs.iter().map(|&(id, mac)| {
        format!(
            "create interface memif id {id} socket-id {SOCKET_ID} ring-size {ring} buffer-size {bsize} hw-addr {} {role}{queues}",
            mac_str(mac)
        )
    }));
    v.extend(t.commands.iter().cloned());
    v.extend(
        t.memifs
            .iter()
            .map(|&(id, _)| format!("set interface state {} up", memif_name(id))),
    );
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vpp::VppTopology;

    fn cfg() -> VppConfig {
        VppConfig::new(0, 1)
    }

    #[test]
    fn startup_configuration() {
        let s = startup_conf(&cfg(), Path::new("/tmp/v"), "vl1vpp");
        assert_eq!(
            s,
            "unix {
  nodaemon
  cli-listen /tmp/v/cli.sock
  cli-no-pager
  cli-no-banner
  log /tmp/v/vpp.log
  runtime-dir /tmp/v
  poll-sleep-usec 1000
}
api-segment {
  prefix vl1vpp
}
socksvr {
  socket-name /tmp/v/api.sock
}
statseg {
  socket-name /tmp/v/stats.sock
}
cpu {
  main-core 0
  corelist-workers 1
}
memory {
  main-heap-size 1G
  main-heap-page-size 4K
}
buffers {
  buffers-per-numa 16384
  page-size 4K
}
plugins {
  plugin default { disable }
  plugin memif_plugin.so { enable }
}
"
        );
        // VPP's early parser only sees main-core when it comes first in the cpu section.
        let cpu = &s[s.find("cpu {").unwrap()..];
        assert!(cpu.lines().nth(1).unwrap().trim().starts_with("main-core"));
    }

    #[test]
    fn topology_commands() {
        let c = VppConfig {
            ring_log2: 11,
            buffer_size: 9216,
            ..cfg()
        };
        assert_eq!(
            setup_commands(&c, Path::new("/tmp/v/memif.sock")),
            [
                "create memif socket id 1 filename /tmp/v/memif.sock",
                "create interface memif id 0 socket-id 1 ring-size 2048 buffer-size 9216 hw-addr 02:00:00:00:00:02 master",
                "create interface memif id 1 socket-id 1 ring-size 2048 buffer-size 9216 hw-addr 02:00:00:00:01:02 master",
                "set interface ip address memif1/0 10.10.1.1/24",
                "set interface ip address memif1/1 10.10.2.1/24",
                "set ip neighbor memif1/1 10.10.2.2 02:00:00:00:00:01 static",
                "set interface state memif1/0 up",
                "set interface state memif1/1 up",
            ]
        );
        // Only memif unless the topology asks for more.
        assert!(!startup_conf(&c, Path::new("/v"), "t").contains("vxlan"));
        let vx = VppConfig {
            topology: VppTopology {
                plugins: vec!["vxlan"],
                ..c.topology.clone()
            },
            ..c
        };
        assert!(startup_conf(&vx, Path::new("/v"), "t").contains(
            "  plugin memif_plugin.so { enable }\n  plugin vxlan_plugin.so { enable }\n}"
        ));
        // Two workers: a queue pair each on both interfaces, both CPUs in the worker list.
        let two = VppConfig {
            workers: vec![1, 3],
            ..cfg()
        };
        assert!(
            setup_commands(&two, Path::new("/m"))[1].ends_with("master rx-queues 2 tx-queues 2")
        );
        assert!(startup_conf(&two, Path::new("/tmp/v"), "t").contains("corelist-workers 1,3\n"));
        // No workers: the main thread polls, and no worker list is given.
        let none = VppConfig {
            workers: vec![],
            ..cfg()
        };
        assert!(startup_conf(&none, Path::new("/v"), "t").contains("cpu {\n  main-core 0\n}\n"));
        assert!(!setup_commands(&none, Path::new("/m"))[1].contains("queues"));
    }

    #[test]
    fn a_slave_connects_to_the_socket_it_is_given() {
        let pod = VppConfig {
            topology: VppTopology {
                slave_of: Some("/node/memif.sock".into()),
                ..VppTopology::l3fwd([2, 0, 0, 0, 0, 1])
            },
            ..cfg()
        };
        let cmds = setup_commands(&pod, Path::new("/own/memif.sock"));
        assert_eq!(
            cmds[0],
            "create memif socket id 1 filename /node/memif.sock"
        );
        assert!(cmds[1].ends_with(" slave") && cmds[2].ends_with(" slave"));
    }
}
