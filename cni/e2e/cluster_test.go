// Package e2e runs a whole cluster on one machine: three nodes, each a network namespace with
// a veclane daemon (interrupt mode, an AF_PACKET uplink on a veth joined to the others by a
// bridge) and a node agent, etcd, and pods in namespaces of their own given interfaces by
// cnitool through veclane-cni. It is the walk-through of docs/cluster.md, checked.
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	"veclane.dev/cni/internal/testbin"
	"veclane.dev/cni/internal/testetcd"
)

// bin holds veclane-agent, veclane-cni, veclane-ipam and cnitool, built once.
var bin string

func TestMain(m *testing.M) {
	testbin.Main(m, &bin, "veclane-agent", "veclane-cni", "veclane-ipam", "cnitool")
}

func veclaneBin(t *testing.T) string { return testbin.Veclane(t) }

// eventually retries f until it returns nil or the time is up.
func eventually(t *testing.T, within time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

type node struct {
	name, ns, vtep, dir, netDir string
	daemon                      *testbin.Daemon
	agent                       *exec.Cmd
}

func (n *node) sock() string { return filepath.Join(n.dir, "ctl.sock") }

type lab struct {
	t      *testing.T
	tag    string
	etcd   *testetcd.Server
	nodes  []*node
	netnss []string
}

func (l *lab) netns(name string) string {
	ns := l.tag + name
	testbin.Run(l.t, "ip", "netns", "add", ns)
	l.netnss = append(l.netnss, ns)
	testbin.Run(l.t, "ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
	return ns
}

func kill(c *exec.Cmd) {
	if c != nil && c.Process != nil {
		_ = c.Process.Signal(syscall.SIGKILL)
		_ = c.Wait()
	}
}

const nodeConfig = `[daemon]
mode = "interrupt"
buffers = 8192

[[af-packet]]
host-if = "v0"
name = "uplink"
addresses = ["%s/24"]
`

func (l *lab) startDaemon(n *node) {
	l.t.Helper()
	n.daemon = testbin.StartDaemon(l.t, n.dir, fmt.Sprintf(nodeConfig, n.vtep), "ip", "netns", "exec", n.ns)
}

func (l *lab) startAgent(n *node) {
	l.t.Helper()
	n.agent = exec.Command(filepath.Join(bin, "veclane-agent"), "--etcd", l.etcd.Endpoint, "--node", n.name,
		"--vtep", n.vtep, "--uplink", "uplink", "--ctl-socket", n.sock(), "--lease-ttl", "3s", "--resync", "2s",
		"--node-grace", "5s")
	n.agent.Stderr = os.Stderr
	if err := n.agent.Start(); err != nil {
		l.t.Fatal(err)
	}
}

func newLab(t *testing.T) *lab {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI: the cluster test needs root (network namespaces)")
		}
		t.Skip("SKIPPED: needs root for network namespaces")
	}
	l := &lab{t: t, tag: fmt.Sprintf("vle%d-", os.Getpid()%100000)}
	t.Cleanup(func() {
		for _, n := range l.nodes {
			kill(n.agent)
			if n.daemon != nil {
				n.daemon.Kill()
			}
		}
		for _, ns := range l.netnss {
			_ = exec.Command("ip", "netns", "del", ns).Run()
		}
	})
	l.etcd = testetcd.Start(t)
	br := l.netns("br")
	testbin.Run(t, "ip", "-n", br, "link", "add", "br0", "type", "bridge")
	testbin.Run(t, "ip", "-n", br, "link", "set", "br0", "up")
	for i := 1; i <= 3; i++ {
		n := &node{name: fmt.Sprintf("n%d", i), vtep: fmt.Sprintf("192.0.2.%d", i), dir: t.TempDir(), netDir: t.TempDir()}
		n.ns = l.netns(n.name)
		peer := fmt.Sprintf("p%d", i)
		testbin.Run(t, "ip", "-n", n.ns, "link", "add", "v0", "mtu", "9000", "type", "veth", "peer", "name", peer, "mtu", "9000", "netns", br)
		testbin.Run(t, "ip", "-n", br, "link", "set", peer, "master", "br0", "up")
		testbin.Run(t, "ip", "-n", n.ns, "link", "set", "v0", "up")
		for file, conf := range map[string]string{
			"10-blue.conf":       `"name":"blue","network_name":"blue","interface":{"kind":"tap"}`,
			"20-red.conf":        `"name":"red","network_name":"red","interface":{"kind":"tap"}`,
			"30-blue-memif.conf": `"name":"blue-memif","network_name":"blue","interface":{"kind":"memif"}`,
		} {
			c := fmt.Sprintf(`{"cniVersion":"1.1.0","type":"veclane-cni",%s,"ctl_socket":%q,"etcd_endpoints":[%q],
				"ipam":{"type":"veclane-ipam","network_name":%q,"range":"10.1.0.0/24","etcd_endpoints":[%q]}}`,
				conf, n.sock(), l.etcd.Endpoint, strings.Split(strings.Split(conf, `"network_name":"`)[1], `"`)[0], l.etcd.Endpoint)
			if err := os.WriteFile(filepath.Join(n.netDir, file), []byte(c), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		l.nodes = append(l.nodes, n)
		l.startDaemon(n)
		l.startAgent(n)
	}
	// Registered last, so it runs first: what each daemon held when the test failed.
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, n := range l.nodes {
			for _, cmd := range []string{"show network", "show interface", "show ip fib", "show vxlan tunnel", "show ip neighbors", "show errors"} {
				out, _ := exec.Command(veclaneBin(t), append([]string{"ctl", "--socket", n.sock()}, strings.Fields(cmd)...)...).CombinedOutput()
				t.Logf("%s: %s\n%s", n.name, cmd, out)
			}
		}
	})
	return l
}

func (l *lab) store() *cluster.Store { return cluster.NewStore(l.etcd.Client(l.t)) }

// cnitool runs cnitool on node n: stdout, or an error with stderr.
func (l *lab) cnitool(n *node, verb, network, ns string) (string, error) {
	c := exec.Command(filepath.Join(bin, "cnitool"), verb, network, "/var/run/netns/"+ns)
	c.Env = append(os.Environ(), "CNI_PATH="+bin, "NETCONFPATH="+n.netDir, "CNI_IFNAME=eth1", "VECLANE_NODE="+n.name)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	if err := c.Run(); err != nil {
		return "", fmt.Errorf("cnitool %s %s on %s: %v: %s", verb, network, n.name, err, errb.String())
	}
	return out.String(), nil
}

type podResult struct {
	Interfaces []struct {
		Name, Mac, Sandbox, SocketPath string
	} `json:"interfaces"`
	IPs []struct {
		Address string `json:"address"`
	} `json:"ips"`
}

// pod makes a namespace and gives it eth1 on network through node n; its result.
func (l *lab) pod(n *node, network, name string) (string, podResult) {
	l.t.Helper()
	ns := l.netns(name)
	out, err := l.cnitool(n, "add", network, ns)
	if err != nil {
		l.t.Fatal(err)
	}
	var r podResult
	if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.IPs) != 1 || len(r.Interfaces) != 2 {
		l.t.Fatalf("ADD %s: %v: %s", name, err, out)
	}
	return ns, r
}

func addr(r podResult) string { return strings.TrimSuffix(r.IPs[0].Address, "/32") }

// ping sends n pings from namespace ns; how many were answered.
func ping(ns, dst string, n int, interval string) int {
	out, _ := exec.Command("ip", "netns", "exec", ns, "ping", "-c", fmt.Sprint(n), "-i", interval, "-W", "1", dst).Output()
	got := 0
	for _, part := range strings.Split(string(out), ", ") {
		if strings.HasSuffix(part, " received") {
			fmt.Sscan(strings.TrimSuffix(part, " received"), &got)
		}
	}
	return got
}

func reaches(ns, dst string) func() error {
	return func() error {
		if ping(ns, dst, 1, "0.2") != 1 {
			return fmt.Errorf("%s cannot ping %s", ns, dst)
		}
		return nil
	}
}

// background pings continuously from ns to dst until stop is called, which returns (sent,
// received).
func background(ns, dst string) func() (int, int) {
	c := exec.Command("ip", "netns", "exec", ns, "ping", "-i", "0.05", "-W", "1", dst)
	var out bytes.Buffer
	c.Stdout = &out
	_ = c.Start()
	return func() (int, int) {
		_ = c.Process.Signal(syscall.SIGINT)
		_ = c.Wait()
		var sent, got int
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, "packets transmitted") {
				fmt.Sscanf(line, "%d packets transmitted, %d received", &sent, &got)
			}
		}
		return sent, got
	}
}

// sink counts UDP datagrams to port in ns by their first word; ready when it returns.
type sink struct {
	c   *exec.Cmd
	out *bufio.Reader
}

func udpSink(t *testing.T, ns string, port int) *sink {
	t.Helper()
	code := fmt.Sprintf(`import socket,sys,collections
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
s.bind(('0.0.0.0',%d))
s.settimeout(5)
n=collections.Counter()
print('ready',flush=True)
try:
  while True:
    d,a=s.recvfrom(65536)
    w=d.split(b'-')[0]
    n[w.decode() if w.isalpha() else 'binary']+=1
except Exception:
  pass
print(dict(n),flush=True)
`, port)
	c := exec.Command("ip", "netns", "exec", ns, "python3", "-c", code)
	stdout, _ := c.StdoutPipe()
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	s := &sink{c: c, out: bufio.NewReader(stdout)}
	if line, _ := s.out.ReadString('\n'); strings.TrimSpace(line) != "ready" {
		t.Fatalf("sink in %s: %q", ns, line)
	}
	return s
}

// counts waits for the sink to go quiet (5 s without a datagram) and returns its counts.
func (s *sink) counts() string {
	line, _ := s.out.ReadString('\n')
	_ = s.c.Wait()
	return strings.TrimSpace(line)
}

func sendUDP(t *testing.T, ns, dst string, port, n int, word string) {
	t.Helper()
	code := fmt.Sprintf(`import socket,time
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM)
for i in range(%d):
  s.sendto(b'%s-%%d'%%i,(%q,%d))
  time.sleep(0.005)
`, n, word, dst, port)
	testbin.Run(t, "ip", "netns", "exec", ns, "python3", "-c", code)
}

func daemonOf(t *testing.T, n *node) *ctl.Client {
	t.Helper()
	c, err := ctl.Dial(n.sock())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// onDaemon dials node n's daemon, asks f of it, and hangs up.
func onDaemon[T any](n *node, f func(*ctl.Client) (T, error)) (T, error) {
	c, err := ctl.Dial(n.sock())
	if err != nil {
		var none T
		return none, err
	}
	defer c.Close()
	return f(c)
}

// tunnels lists node n's VXLAN tunnels as "network>vtep".
func tunnels(n *node) ([]string, error) {
	tuns, err := onDaemon(n, (*ctl.Client).Tunnels)
	if err != nil {
		return nil, err
	}
	var v []string
	for _, tun := range tuns {
		v = append(v, fmt.Sprintf("%s>%s/%d", tun.Network, tun.Dst, tun.Routes))
	}
	return v, nil
}

// scene is TestThreeNodesBlueAndRed's cluster, its pods (their namespaces and results), and
// a deadline for etcd calls.
type scene struct {
	l                            *lab
	n1, n2, n3                   *node
	ctx                          context.Context
	st                           *cluster.Store
	b1, b2, r1, r3, m2, m3       string
	rb1, rb2, rr1, rr3, rm2, rm3 podResult
	rb3                          podResult
}

func TestThreeNodesBlueAndRed(t *testing.T) {
	l := newLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	s := &scene{l: l, n1: l.nodes[0], n2: l.nodes[1], n3: l.nodes[2], ctx: ctx, st: l.store()}
	s.networksAndPods(t)
	s.udpStaysInItsNetwork(t)
	s.memifPods(t)
	s.checkSeesAMissingTunnel(t)
	s.killedAgentAndDaemon(t)
	s.killedEtcd(t)
	s.leaseExpires(t)
	s.delAndGC(t)
}

// Networks: blue and red, applied on every node by its agent.
func (s *scene) networksAndPods(t *testing.T) {
	for _, n := range []cluster.Network{
		{Name: "blue", VNI: 56, Range: netip.MustParsePrefix("10.1.0.0/16")},
		{Name: "red", VNI: 88, Range: netip.MustParsePrefix("10.1.0.0/16")},
	} {
		if err := s.st.PutNetwork(s.ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range s.l.nodes {
		eventually(t, 20*time.Second, n.name+" has blue and red", func() error {
			c, err := ctl.Dial(n.sock())
			if err != nil {
				return err
			}
			defer c.Close()
			nets, err := c.Networks()
			if err != nil {
				return err
			}
			if len(nets) != 2 {
				return fmt.Errorf("networks: %+v", nets)
			}
			return nil
		})
	}

	// Pods: blue on n1 and n2, red on n1 and n3; blue and red hand out the same addresses.
	s.b1, s.rb1 = s.l.pod(s.n1, "blue", "b1")
	s.b2, s.rb2 = s.l.pod(s.n2, "blue", "b2")
	s.r1, s.rr1 = s.l.pod(s.n1, "red", "r1")
	s.r3, s.rr3 = s.l.pod(s.n3, "red", "r3")
	if addr(s.rb1) != "10.1.0.1" || addr(s.rb2) != "10.1.0.2" || addr(s.rr1) != "10.1.0.1" || addr(s.rr3) != "10.1.0.2" {
		t.Fatalf("addresses: %s %s %s %s", addr(s.rb1), addr(s.rb2), addr(s.rr1), addr(s.rr3))
	}
	eventually(t, 20*time.Second, "b1 reaches b2 across nodes", reaches(s.b1, "10.1.0.2"))
	eventually(t, 20*time.Second, "r1 reaches r3 across nodes", reaches(s.r1, "10.1.0.2"))
	if got := ping(s.b2, "10.1.0.1", 3, "0.2"); got != 3 {
		t.Fatalf("b2 -> b1: %d of 3", got)
	}
}

// UDP within each network, the same destination address in both: each lands in its own
// network's pod only, counted there and on the wire by VNI.
func (s *scene) udpStaysInItsNetwork(t *testing.T) {
	capFile := filepath.Join(t.TempDir(), "vxlan.pcap")
	tshark := exec.Command("ip", "netns", "exec", s.l.tag+"br", "tshark", "-q", "-i", "br0", "-f", "udp port 4789", "-w", capFile)
	if err := tshark.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second) // tshark opens the interface
	sb2, sr3 := udpSink(t, s.b2, 7000), udpSink(t, s.r3, 7000)
	sendUDP(t, s.b1, "10.1.0.2", 7000, 50, "blue")
	sendUDP(t, s.r1, "10.1.0.2", 7000, 50, "red")
	if got := sb2.counts(); got != "{'blue': 50}" {
		t.Fatalf("b2 received %s", got)
	}
	if got := sr3.counts(); got != "{'red': 50}" {
		t.Fatalf("r3 received %s", got)
	}
	_ = tshark.Process.Signal(syscall.SIGINT)
	_ = tshark.Wait()
	fields := testbin.Run(t, "tshark", "-r", capFile, "-Y", "udp.dstport == 7000", "-T", "fields", "-e", "vxlan.vni", "-e", "data.data")
	perVNI := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(fields), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		word := "other"
		switch {
		case strings.HasPrefix(f[1], "626c7565"): // "blue"
			word = "blue"
		case strings.HasPrefix(f[1], "726564"): // "red"
			word = "red"
		}
		perVNI[f[0]+":"+word]++
	}
	if perVNI["56:blue"] != 50 || perVNI["88:red"] != 50 || len(perVNI) != 2 {
		t.Fatalf("on the wire, by VNI: %v", perVNI)
	}
}

// memif pods: a generator in m2 (n2) sends to one in m3 (n3) and to b1's tap (n1).
func (s *scene) memifPods(t *testing.T) {
	s.m2, s.rm2 = s.l.pod(s.n2, "blue-memif", "m2")
	s.m3, s.rm3 = s.l.pod(s.n3, "blue-memif", "m3")
	if s.rm2.Interfaces[1].SocketPath == "" {
		t.Fatalf("memif result: %+v", s.rm2)
	}
	eventually(t, 20*time.Second, "n2 routes to m3 (its agent learned it)", routed(s.n2, "blue", addr(s.rm3)))
	gen := func(ns string, r podResult, args ...string) *exec.Cmd {
		a := append([]string{"netns", "exec", ns, veclaneBin(t), "gen", "--socket", r.Interfaces[1].SocketPath,
			"--src-mac", r.Interfaces[1].Mac, "--dst-mac", r.Interfaces[0].Mac, "--src-ip", addr(r), "--json"}, args...)
		return exec.Command("ip", a...)
	}
	rx := gen(s.m3, s.rm3, "--rx-only", "--duration", "8")
	var rxOut bytes.Buffer
	rx.Stdout = &rxOut
	if err := rx.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second)
	tx := gen(s.m2, s.rm2, "--tx-only", "--dst-ip", addr(s.rm3), "--rate", "2000", "--count", "4000", "--duration", "5")
	if out, err := tx.CombinedOutput(); err != nil {
		t.Fatalf("gen in m2: %v\n%s", err, out)
	}
	_ = rx.Wait()
	var report map[string]any
	if err := json.Unmarshal(rxOut.Bytes(), &report); err != nil {
		t.Fatalf("gen in m3: %v: %s", err, rxOut.String())
	}
	t.Logf("memif m2 -> m3 over VXLAN: %v", report)
	// The first frames may go while the tunnel's neighbour is resolved; most arrive.
	if got, _ := report["rx_packets"].(float64); got < 3000 {
		t.Fatalf("m3 received %v of 4000", report["rx_packets"])
	}
	sb1 := udpSink(t, s.b1, 5001)
	if out, err := gen(s.m2, s.rm2, "--tx-only", "--dst-ip", addr(s.rb1), "--rate", "1000", "--count", "100", "--duration", "3").CombinedOutput(); err != nil {
		t.Fatalf("gen m2 -> b1: %v\n%s", err, out)
	}
	if got := sb1.counts(); got != "{'binary': 100}" {
		t.Fatalf("b1 received from the memif pod: %s", got)
	}
}

// CHECK; a tunnel deleted by hand (the agent held still) fails it, the agent restores it.
func (s *scene) checkSeesAMissingTunnel(t *testing.T) {
	if _, err := s.l.cnitool(s.n1, "check", "blue", s.b1); err != nil {
		t.Fatal(err)
	}
	_ = s.n1.agent.Process.Signal(syscall.SIGSTOP)
	d1 := daemonOf(t, s.n1)
	if err := d1.Do(ctl.IPRoute{Add: false, Route: ctl.RouteSpec{
		Prefix: netip.MustParsePrefix("10.1.0.2/32"), Via: s.n2.vtep, Network: "blue"}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.l.cnitool(s.n1, "check", "blue", s.b1)
	if err == nil || !strings.Contains(err.Error(), "10.1.0.2") || !strings.Contains(err.Error(), "n2") {
		t.Fatalf("CHECK with blue's tunnel to n2 gone: %v", err)
	}
	_ = s.n1.agent.Process.Signal(syscall.SIGCONT)
	eventually(t, 15*time.Second, "the agent restores the tunnel; CHECK passes", func() error {
		_, err := s.l.cnitool(s.n1, "check", "blue", s.b1)
		return err
	})
}

// kill -9 the agent while traffic flows: the dataplane does not notice; a new agent
// converges without changing anything.
func (s *scene) killedAgentAndDaemon(t *testing.T) {
	stop := background(s.b1, "10.1.0.2")
	kill(s.n2.agent)
	time.Sleep(time.Second)
	before, _ := tunnels(s.n2)
	s.l.startAgent(s.n2)
	time.Sleep(3 * time.Second)
	after, _ := tunnels(s.n2)
	if fmt.Sprint(before) != fmt.Sprint(after) {
		t.Fatalf("n2's tunnels changed across its agent's restart: %v -> %v", before, after)
	}
	if sent, got := stop(); sent < 40 || got < sent-2 {
		t.Fatalf("pings while n2's agent was killed: %d of %d", got, sent)
	}

	// kill -9 the daemon: its agent rebuilds it (networks, routes, and b2's tap), with the
	// same tunnels as before and nothing stale.
	beforeKill, err := tunnels(s.n2)
	if err != nil || len(beforeKill) == 0 {
		t.Fatal(err)
	}
	sort.Strings(beforeKill)
	s.n2.daemon.Kill()
	s.l.startDaemon(s.n2)
	eventually(t, 30*time.Second, "b1 reaches b2 after n2's daemon restarted", reaches(s.b1, "10.1.0.2"))
	eventually(t, 10*time.Second, "n2's tunnels are as before its daemon died", func() error {
		now, err := tunnels(s.n2)
		sort.Strings(now)
		if err == nil && fmt.Sprint(now) != fmt.Sprint(beforeKill) {
			err = fmt.Errorf("%v, were %v", now, beforeKill)
		}
		return err
	})
}

// kill -9 etcd: forwarding goes on; STATUS says etcd is down; after etcd's restart a new
// pod gets an address nobody has.
func (s *scene) killedEtcd(t *testing.T) {
	stop := background(s.r1, "10.1.0.2")
	s.l.etcd.Stop()
	time.Sleep(2 * time.Second)
	status := exec.Command(filepath.Join(bin, "cnitool"), "status", "blue", "/var/run/netns/"+s.b1)
	status.Env = append(os.Environ(), "CNI_PATH="+bin, "NETCONFPATH="+s.n1.netDir, "VECLANE_NODE=n1")
	if out, err := status.CombinedOutput(); err == nil || !strings.Contains(string(out), "etcd") {
		t.Fatalf("STATUS with etcd down: %v: %s", err, out)
	}
	s.l.etcd.Restart(t)
	if sent, got := stop(); sent < 40 || got < sent-2 {
		t.Fatalf("pings while etcd was down: %d of %d", got, sent)
	}
	_, s.rb3 = s.l.pod(s.n3, "blue", "b3")
	if a := addr(s.rb3); a == "10.1.0.1" || a == "10.1.0.2" || a == addr(s.rm2) || a == addr(s.rm3) {
		t.Fatalf("b3 got %s, an address in use", a)
	}
}

// n3's agent dies for good while its daemon forwards on: its lease (3 s, renewed every
// second) expires 2 to 4.2 s later (etcd checks leases every half second; the agents watch),
// n1 and n2 keep routing to n3's pods for their grace (5 s), so b1 keeps reaching b3 on n3,
// and then drop their tunnels to n3: 5 s after the death they still have them, 14 s after
// (a loaded machine) they do not.
func (s *scene) leaseExpires(t *testing.T) {
	b3 := addr(s.rb3)
	eventually(t, 20*time.Second, "b1 reaches b3 on n3", reaches(s.b1, b3))
	stop := background(s.b1, b3)
	kill(s.n3.agent)
	died := time.Now()
	has := func(n *node) (bool, error) {
		v, err := tunnels(n)
		for _, tun := range v {
			if strings.Contains(tun, s.n3.vtep) {
				return true, err
			}
		}
		return false, err
	}
	time.Sleep(5*time.Second - time.Since(died))
	for _, n := range []*node{s.n1, s.n2} {
		if there, err := has(n); err != nil || !there {
			t.Fatalf("%s dropped its tunnel to n3 within the lease and the grace (%v)", n.name, err)
		}
	}
	if sent, got := stop(); sent < 50 || got < sent-2 {
		t.Fatalf("b1 to b3 while n3's agent was away: %d of %d answered", got, sent)
	}
	for _, n := range []*node{s.n1, s.n2} {
		eventually(t, 14*time.Second-time.Since(died), n.name+" drops its tunnels to n3 after the lease and the grace", func() error {
			if there, err := has(n); err != nil || there {
				return fmt.Errorf("still a tunnel to n3 (%v)", err)
			}
			return nil
		})
	}
	t.Logf("n3's tunnels gone from n1 and n2 %.1f s after its agent died (lease 3 s, grace 5 s)", time.Since(died).Seconds())
}

// DEL twice; DEL after the daemon was killed; GC with a stale attachment.
func (s *scene) delAndGC(t *testing.T) {
	for range 2 {
		if _, err := s.l.cnitool(s.n2, "del", "blue", s.b2); err != nil {
			t.Fatal(err)
		}
	}
	s.n1.daemon.Kill()
	if _, err := s.l.cnitool(s.n1, "del", "red", s.r1); err != nil {
		t.Fatal(err)
	}
	stale := cluster.PodAttachment{Network: "blue", ContainerID: "gone-pod", IfName: "eth1", Node: "n3", Address: netip.MustParseAddr("10.1.0.99")}
	if err := s.st.PutAttachment(s.ctx, stale); err != nil {
		t.Fatal(err)
	}
	gc := exec.Command(filepath.Join(bin, "veclane-cni"))
	gc.Env = append(os.Environ(), "CNI_COMMAND=GC", "CNI_PATH="+bin, "VECLANE_NODE=n3")
	conf, _ := os.ReadFile(filepath.Join(s.n3.netDir, "10-blue.conf"))
	valid := fmt.Sprintf(`[{"containerID":%q,"ifname":"eth1"},{"containerID":%q,"ifname":"eth1"}]`,
		podContainer(t, s.st, addr(s.rb3), "blue"), podContainer(t, s.st, addr(s.rm3), "blue"))
	gc.Stdin = strings.NewReader(strings.Replace(string(conf), `"type":"veclane-cni"`, `"type":"veclane-cni","cni.dev/valid-attachments":`+valid, 1))
	if out, err := gc.CombinedOutput(); err != nil {
		t.Fatalf("GC: %v\n%s", err, out)
	}
	snap, err := s.st.Snapshot(s.ctx)
	if err != nil {
		t.Fatal(err)
	}
	kept := 0
	for _, a := range snap.Attachments {
		if a.ContainerID == "gone-pod" {
			t.Fatal("GC left the stale attachment")
		}
		if a.Node == "n3" {
			kept++
		}
	}
	// n3 keeps b3 and m3 (blue) and r3 (red, another network's GC).
	if kept != 3 {
		t.Fatalf("n3's attachments after GC: %d, want 3", kept)
	}
}

// routed says whether node n's daemon routes addr in network's VRF.
func routed(n *node, network, addr string) func() error {
	return func() error {
		c, err := ctl.Dial(n.sock())
		if err != nil {
			return err
		}
		defer c.Close()
		nets, err := c.Networks()
		if err != nil {
			return err
		}
		for _, nw := range nets {
			if nw.Name != network {
				continue
			}
			fib, err := c.Fib(nw.Table)
			if err != nil {
				return err
			}
			for _, e := range fib {
				if e.Prefix == netip.MustParsePrefix(addr+"/32") {
					return nil
				}
			}
		}
		return fmt.Errorf("%s does not route %s in %s", n.name, addr, network)
	}
}

// podContainer is the container id of the pod holding addr in network.
func podContainer(t *testing.T, st *cluster.Store, addr, network string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	snap, err := st.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range snap.Attachments {
		if a.Network == network && a.Address.String() == addr {
			return a.ContainerID
		}
	}
	return ""
}
