//! Shared by the pod tests: tap pods wired as the CNI plugin wires them, and small programs
//! run inside their namespaces.

#![allow(dead_code)]

use std::process::{Command, Stdio};

use crate::daemon_common::Daemon;
use crate::kernel_common::{Lab, unable};

pub fn skip() -> bool {
    if let Some(why) = unable() {
        assert!(std::env::var_os("CI").is_none(), "CI: {why}");
        eprintln!("SKIPPED: {why}");
        return true;
    }
    false
}

pub const CONFIG: &str = "[daemon]\nmode = \"interrupt\"\nbuffers = 4096\n\n\
     [[network]]\nname = \"blue\"\nvni = 56\nranges = [\"10.1.0.0/16\"]\n\n\
     [[network]]\nname = \"red\"\nvni = 88\nranges = [\"10.1.0.0/16\"]\n\n";

pub fn interface(d: &Daemon, name: &str) -> api::InterfaceInfo {
    let r = d
        .api()
        .call(&api::Request::ShowInterface {
            name: Some(name.into()),
        })
        .unwrap();
    let api::Reply::Interfaces { mut interfaces } = r else {
        panic!("{r:?}")
    };
    interfaces.remove(0)
}

/// Gives pod `ns` a tap `eth1` on `network` with `addr`, wired as the CNI plugin does: the
/// pod has `addr/32`, the network's range through gateway 169.254.1.1 (our side's MAC,
/// permanent), and the daemon a host route and a static neighbour to the pod; our side takes
/// packets from `addr` only (anti-spoofing). Returns our interface's name.
pub fn tap_pod(d: &Daemon, lab: &Lab, pod: &str, network: &str, addr: &str) -> String {
    let out = d.ok(&format!(
        "create interface tap host-if-name eth1 netns {} network {network} pod cid-{pod} \
         allowed-sources {addr}/32",
        lab.ns(pod)
    ));
    let name = out.split_whitespace().next().unwrap().to_string();
    let i = interface(d, &name);
    let api::DeviceInfo::Tap { host_mac, .. } = i.device else {
        panic!("{i:?}")
    };
    assert_eq!(i.pod.as_deref(), Some(format!("cid-{pod}").as_str()));
    d.ok(&format!(
        "ip route add {addr}/32 via {addr} {name} network {network}"
    ));
    d.ok(&format!("set ip neighbor {name} {addr} {host_mac}"));
    let gw_mac = i.mac.to_string();
    for cmd in [
        vec!["ip", "addr", "add", &format!("{addr}/32"), "dev", "eth1"],
        vec![
            "ip",
            "route",
            "add",
            "169.254.1.1",
            "dev",
            "eth1",
            "scope",
            "link",
        ],
        vec![
            "ip",
            "route",
            "add",
            "10.1.0.0/16",
            "via",
            "169.254.1.1",
            "dev",
            "eth1",
        ],
        vec![
            "ip",
            "neigh",
            "add",
            "169.254.1.1",
            "lladdr",
            &gw_mac,
            "dev",
            "eth1",
            "nud",
            "permanent",
        ],
    ] {
        lab.exec(pod, &cmd);
    }
    name
}

/// A Python program in namespace `ns`, its stdin and stdout piped.
pub fn python(lab: &Lab, ns: &str, code: &str) -> std::process::Child {
    Command::new("ip")
        .args(["netns", "exec", &lab.ns(ns), "python3", "-c", code])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap()
}

/// One line of `c`'s output (a reader per call: for programs that print a line at a time).
pub fn wait_line(c: &mut std::process::Child) -> String {
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(c.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    line.trim().to_string()
}

/// TCP servers on `tcp` ports (each sends its name and a newline, then echoes) and UDP ones
/// on `udp` ports (each answers its name), in pod `ns`: killed when dropped.
pub struct Server(std::process::Child);

impl Server {
    pub fn start(lab: &Lab, ns: &str, name: &str, tcp: &[u16], udp: &[u16]) -> Server {
        let code = format!(
            "import socket,threading\nname={name:?}\n\
             def serve(c):\n  c.sendall((name+'\\n').encode())\n  try:\n    while True:\n      \
             d=c.recv(100)\n      if not d: break\n      c.sendall(d)\n  except Exception: pass\n  \
             c.close()\n\
             def tcp(p):\n  s=socket.socket()\n  s.setsockopt(socket.SOL_SOCKET,socket.SO_REUSEADDR,1)\n  \
             s.bind(('0.0.0.0',p))\n  s.listen(128)\n  while True:\n    c,_=s.accept()\n    \
             threading.Thread(target=serve,args=(c,),daemon=True).start()\n\
             def udp(p):\n  u=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)\n  \
             u.bind(('0.0.0.0',p))\n  while True:\n    d,a=u.recvfrom(100)\n    \
             u.sendto(name.encode(),a)\n\
             for p in {tcp:?}: threading.Thread(target=tcp,args=(p,),daemon=True).start()\n\
             for p in {udp:?}: threading.Thread(target=udp,args=(p,),daemon=True).start()\n\
             import time\ntime.sleep(0.2)\nprint('ready',flush=True)\nthreading.Event().wait()\n"
        );
        Server::program(lab, ns, &code)
    }

    /// A Python program in pod `ns` that prints `ready` once it serves.
    pub fn program(lab: &Lab, ns: &str, code: &str) -> Server {
        let mut c = python(lab, ns, code);
        assert_eq!(wait_line(&mut c), "ready");
        Server(c)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
