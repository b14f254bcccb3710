package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/ctl"
	"veclane.dev/cni/internal/testbin"
	"veclane.dev/cni/internal/testetcd"
)

// bin holds the plugins (veclane-cni, veclane-ipam) and cnitool, built once: the plugin is
// tested as a runtime runs it, through cnitool (pinned by go.mod's tool directive) and by
// hand where cnitool has no say (GC's valid attachments, STATUS).
var bin string

func TestMain(m *testing.M) { testbin.Main(m, &bin, "veclane-cni", "veclane-ipam", "cnitool") }

// needRoot skips (outside CI) when namespaces cannot be made here.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		if os.Getenv("CI") != "" {
			t.Fatal("CI: the CNI plugin tests need root (network namespaces)")
		}
		t.Skip("SKIPPED: needs root for network namespaces")
	}
}

// testDaemon is a daemon with networks blue and red, for the life of the test.
type testDaemon struct{ *testbin.Daemon }

func startDaemon(t *testing.T, dir string) testDaemon {
	t.Helper()
	return testDaemon{testbin.StartDaemon(t, dir, testbin.BlueAndRed)}
}

func (d testDaemon) sock() string { return d.Socket() }

func (d testDaemon) interfaces(t *testing.T) []ctl.Interface {
	t.Helper()
	c, err := ctl.Dial(d.sock())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ifs, err := c.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	return ifs
}

// netns makes a namespace for the life of the test; its path.
func netns(t *testing.T, name string) string {
	t.Helper()
	name = testbin.Netns(t, "vlcni-"+name+"-")
	testbin.Run(t, "ip", "netns", "exec", name, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1")
	return "/var/run/netns/" + name
}

// writeConf writes network `name`'s configuration where cnitool looks.
func writeConf(t *testing.T, dir, file, name, network, endpoint, sock, iface string) string {
	t.Helper()
	c := fmt.Sprintf(`{"cniVersion":"1.1.0","name":%q,"type":"veclane-cni","network_name":%q,
		"interface":%s,"ctl_socket":%q,"etcd_endpoints":[%q],
		"ipam":{"type":"veclane-ipam","network_name":%q,"range":"10.1.0.0/24","etcd_endpoints":[%q]}}`,
		name, network, iface, sock, endpoint, network, endpoint)
	if err := os.WriteFile(filepath.Join(dir, file), []byte(c), 0o644); err != nil {
		t.Fatal(err)
	}
	return c
}

type cni struct {
	netDir string
}

// tool runs cnitool; its stdout, and an error with its stderr.
func (c *cni) tool(verb, network, ns string) (string, error) {
	cmd := exec.Command(filepath.Join(bin, "cnitool"), verb, network, ns)
	cmd.Env = append(os.Environ(), "CNI_PATH="+bin, "NETCONFPATH="+c.netDir, "CNI_IFNAME=eth1", "VECLANE_NODE=n1")
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("cnitool %s %s: %v: %s%s", verb, network, err, errb.String(), out.String())
	}
	return out.String(), err
}

// execPlugin runs veclane-cni itself as a runtime would, with env (NAME=VALUE) on top; its
// stdout, and an error with its stderr when it fails.
func execPlugin(command, container, ns, conf string, env ...string) ([]byte, error) {
	cmd := exec.Command(filepath.Join(bin, "veclane-cni"))
	cmd.Env = append(append(os.Environ(), "CNI_COMMAND="+command, "CNI_CONTAINERID="+container,
		"CNI_IFNAME=eth1", "CNI_NETNS="+ns, "CNI_PATH="+bin, "VECLANE_NODE=n1"), env...)
	cmd.Stdin = strings.NewReader(conf)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %s: %v: %s%s", command, container, err, errb.String(), out.String())
	}
	return out.Bytes(), nil
}

// plugin runs veclane-cni (see execPlugin); its stdout as JSON and whether it succeeded.
func plugin(t *testing.T, command, container, ns, conf string, env ...string) (map[string]any, bool) {
	t.Helper()
	out, err := execPlugin(command, container, ns, conf, env...)
	var m map[string]any
	if len(out) > 0 {
		if e := json.Unmarshal(out, &m); e != nil {
			t.Fatalf("%s: stdout is not JSON: %q", command, out)
		}
	}
	return m, err == nil
}

type podResult struct {
	Interfaces []struct {
		Name       string `json:"name"`
		Mac        string `json:"mac"`
		Sandbox    string `json:"sandbox"`
		SocketPath string `json:"socketPath"`
	} `json:"interfaces"`
	IPs []struct {
		Address string `json:"address"`
		Gateway string `json:"gateway"`
	} `json:"ips"`
}

func ping(ns, dst string, n int) int {
	name := filepath.Base(ns)
	out, _ := exec.Command("ip", "netns", "exec", name, "ping", "-c", fmt.Sprint(n), "-i", "0.2", "-W", "1", dst).Output()
	var got int
	for _, part := range strings.Split(string(out), ", ") {
		if strings.HasSuffix(part, " received") {
			fmt.Sscan(strings.TrimSuffix(part, " received"), &got)
		}
	}
	return got
}

func attachments(t *testing.T, c *clientv3.Client) []cluster.PodAttachment {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	s, err := cluster.NewStore(c).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return s.Attachments
}

func allocated(t *testing.T, c *clientv3.Client, network string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := c.Get(ctx, "/veclane/ipam/v1/"+network+"/ips/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err != nil {
		t.Fatal(err)
	}
	return r.Count
}

// pods is the scene of TestPodsGetInterfacesOnTheirNetworks: etcd, a daemon, cnitool's
// configurations (blue and red on taps, blue on memif) and the pods' namespaces.
type pods struct {
	etcd               *testetcd.Server
	ec                 *clientv3.Client
	d                  testDaemon
	c                  *cni
	memifConf          string
	b1, b2, r1, m1, m2 string
}

func (f *pods) add(t *testing.T, network, ns string) podResult {
	t.Helper()
	out, err := f.c.tool("add", network, ns)
	if err != nil {
		t.Fatal(err)
	}
	var r podResult
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	return r
}

func TestPodsGetInterfacesOnTheirNetworks(t *testing.T) {
	needRoot(t)
	f := &pods{etcd: testetcd.Start(t), d: startDaemon(t, t.TempDir()), c: &cni{netDir: t.TempDir()}}
	f.ec = f.etcd.Client(t)
	tap := `{"kind":"tap","mtu":1500}`
	writeConf(t, f.c.netDir, "10-blue.conf", "blue", "blue", f.etcd.Endpoint, f.d.sock(), tap)
	writeConf(t, f.c.netDir, "20-red.conf", "red", "red", f.etcd.Endpoint, f.d.sock(), tap)
	f.memifConf = writeConf(t, f.c.netDir, "30-blue-memif.conf", "blue-memif", "blue", f.etcd.Endpoint, f.d.sock(), `{"kind":"memif","ring_size":512}`)
	f.b1, f.b2, f.r1, f.m1, f.m2 = netns(t, "b1"), netns(t, "b2"), netns(t, "r1"), netns(t, "m1"), netns(t, "m2")
	f.taps(t)
	f.memif(t)
	f.failedAddsUndoThemselves(t)
	f.gcAndTheDaemonGone(t)
}

// taps: two blue pods and a red one (blue's first address again); blue pods reach each
// other, red reaches nothing of blue's; CHECK passes.
func (f *pods) taps(t *testing.T) {
	rb1, rb2, rr1 := f.add(t, "blue", f.b1), f.add(t, "blue", f.b2), f.add(t, "red", f.r1)
	if rb1.IPs[0].Address != "10.1.0.1/32" || rb2.IPs[0].Address != "10.1.0.2/32" || rr1.IPs[0].Address != "10.1.0.1/32" {
		t.Fatalf("addresses: %+v %+v %+v", rb1.IPs, rb2.IPs, rr1.IPs)
	}
	if len(rb1.Interfaces) != 2 || rb1.Interfaces[1].Name != "eth1" || rb1.Interfaces[1].Sandbox != f.b1 {
		t.Fatalf("interfaces: %+v", rb1.Interfaces)
	}
	if n := ping(f.b1, "10.1.0.2", 3); n != 3 {
		t.Fatalf("b1 -> b2 over blue: %d of 3", n)
	}
	if n := ping(f.r1, "10.1.0.2", 2); n != 0 {
		t.Fatalf("red reached blue's 10.1.0.2: %d", n)
	}
	if a := attachments(t, f.ec); len(a) != 3 {
		t.Fatalf("attachments: %+v", a)
	}
	if _, err := f.c.tool("check", "blue", f.b1); err != nil {
		t.Fatal(err)
	}
	// Each pod's interface takes packets from the pod's own address only.
	checkSources(t, f.d.interfaces(t), attachments(t, f.ec))
}

// checkSources: every attached pod's interface in the daemon allows exactly the pod's
// address as a source.
func checkSources(t *testing.T, ifs []ctl.Interface, atts []cluster.PodAttachment) {
	t.Helper()
	byName := map[string]ctl.Interface{}
	for _, i := range ifs {
		byName[i.Name] = i
	}
	for _, a := range atts {
		i, ok := byName[a.Interface.Name]
		want := []netip.Prefix{netip.PrefixFrom(a.Address, 32)}
		if !ok || i.AllowedSources == nil || !slices.Equal(*i.AllowedSources, want) {
			t.Fatalf("%s: allowed sources %v, want %v", a.Interface.Name, i.AllowedSources, want)
		}
	}
}

// memif: a pod's memif master and stand-in device; DEL twice; ip mode and rx_mode polling
// passed on; a bad mode refused.
func (f *pods) memif(t *testing.T) {
	// memif: the master listens in the pod's namespace; a dummy eth1 there has the address.
	rm := f.add(t, "blue-memif", f.m1)
	if rm.Interfaces[1].SocketPath != "@veclane-eth1" || rm.IPs[0].Address != "10.1.0.3/32" {
		t.Fatalf("memif result: %+v", rm)
	}
	if out := testbin.Run(t, "ip", "-n", filepath.Base(f.m1), "-br", "addr", "show", "eth1"); !strings.Contains(out, "10.1.0.3/32") {
		t.Fatalf("m1's eth1: %s", out)
	}
	var pods []string
	for _, i := range f.d.interfaces(t) {
		if i.Pod != nil {
			pods = append(pods, i.Device.Kind+":"+i.Name)
		}
	}
	if len(pods) != 4 {
		t.Fatalf("pod interfaces in the daemon: %v", pods)
	}

	// DEL twice; the pod's address and attachment go, its interface too.
	for range 2 {
		if _, err := f.c.tool("del", "blue", f.b2); err != nil {
			t.Fatal(err)
		}
	}
	if n := ping(f.b1, "10.1.0.2", 1); n != 0 {
		t.Fatal("b2 still answers after DEL")
	}
	if n := allocated(t, f.ec, "blue"); n != 2 {
		t.Fatalf("blue allocations after DEL: %d", n)
	}
	if _, err := f.c.tool("del", "blue-memif", f.m1); err != nil {
		t.Fatal(err)
	}
	// memif in ip mode (bare IPv4): the daemon's interface says so.
	// It routes for 10.9.0.0/24 (a CNF): those sources pass too.
	// A zero-copy CNF's memory: its regions may take 300 MiB.
	ipConf := strings.Replace(f.memifConf, `"kind":"memif"`, `"kind":"memif","mode":"ip","rx_mode":"polling","forwards":["10.9.0.7/24"],"region_limit_mib":300`, 1)
	if r, ok := plugin(t, "ADD", "c-ip", f.m2, ipConf); !ok {
		t.Fatalf("ADD in ip mode: %v", r)
	}
	found := false
	for _, i := range f.d.interfaces(t) {
		if i.Pod != nil && *i.Pod == "c-ip" {
			found = i.Device.Mode == "ip" && i.Device.RegionLimitMiB == 300
			var want []netip.Prefix
			for _, a := range attachments(t, f.ec) {
				if a.ContainerID == "c-ip" {
					want = []netip.Prefix{netip.PrefixFrom(a.Address, 32), netip.MustParsePrefix("10.9.0.0/24")}
				}
			}
			if i.AllowedSources == nil || !slices.Equal(*i.AllowedSources, want) {
				t.Fatalf("c-ip's allowed sources: %v, want %v", i.AllowedSources, want)
			}
		}
	}
	if !found {
		t.Fatalf("no memif in ip mode for c-ip: %+v", f.d.interfaces(t))
	}
	cl, err := ctl.Dial(f.d.sock())
	if err != nil {
		t.Fatal(err)
	}
	pl, err := ctl.Call[ctl.RxPlacement](cl, ctl.ShowRxPlacement{})
	if err != nil {
		t.Fatal(err)
	}
	cl.Close()
	polled := false
	for _, p := range pl.Placement {
		polled = polled || (strings.HasPrefix(p.Interface, "pod-") && p.Mode == "polling")
	}
	if !polled {
		t.Fatalf("rx_mode polling not passed on: %+v", pl)
	}
	if r, ok := plugin(t, "DEL", "c-ip", f.m2, ipConf); !ok {
		t.Fatalf("DEL in ip mode: %v", r)
	}
	if r, ok := plugin(t, "ADD", "c-bad", f.m2, strings.Replace(f.memifConf, `"kind":"memif"`, `"kind":"memif","mode":"punt"`, 1)); ok || r["code"] != float64(7) {
		t.Fatalf("ADD with mode punt: %v", r)
	}
	if out := testbin.Run(t, "ip", "-n", filepath.Base(f.m1), "-o", "link"); strings.Contains(out, "eth1") {
		t.Fatalf("m1's dummy stayed: %s", out)
	}

}

// failedAddsUndoThemselves: an ADD that fails before or after the interface was made
// keeps no address, no interface, no device.
func (f *pods) failedAddsUndoThemselves(t *testing.T) {
	// A failed ADD undoes itself: no network "green" in the daemon, so no address is kept.
	green := strings.Replace(f.memifConf, `"network_name":"blue"`, `"network_name":"green"`, 2)
	green = strings.Replace(green, `"kind":"memif","ring_size":512`, `"kind":"tap"`, 1)
	if r, ok := plugin(t, "ADD", "c-green", f.b2, green); ok || !strings.Contains(fmt.Sprint(r["msg"]), "green") {
		t.Fatalf("ADD on a network the daemon lacks: %v", r)
	}
	if n := allocated(t, f.ec, "green"); n != 0 {
		t.Fatalf("the failed ADD kept %d address(es)", n)
	}
	if out := testbin.Run(t, "ip", "-n", filepath.Base(f.b2), "-o", "link"); strings.Contains(out, "eth1") {
		t.Fatalf("the failed ADD left a device: %s", out)
	}

	// etcd for attachments unreachable (IPAM's fine): the network's record is read before
	// anything is made, so nothing is, and the address goes back.
	noEtcd := strings.Replace(f.memifConf, `"etcd_endpoints":["`+f.etcd.Endpoint+`"],`+"\n\t\t"+`"ipam"`, `"etcd_endpoints":["http://127.0.0.1:1"],"ipam"`, 1)
	if noEtcd == f.memifConf {
		t.Fatal("could not point the attachments at a dead etcd")
	}
	f.refusedAndUndone(t, "c-noetcd", f.m2, noEtcd, 11, "etcd")
	// A failure after the interface was made (recording the attachment: a node name etcd
	// refuses) undoes the interface, the stand-in and the address.
	f.refusedAndUndone(t, "c-badnode", f.m2, f.memifConf, 11, "recording the attachment", "VECLANE_NODE=bad node")

	// The host's namespace as CNI_NETNS (a runtime's mistake, or a forged call): refused
	// before anything is made.
	f.refusedAndUndone(t, "c-host", fmt.Sprintf("/proc/%d/ns/net", os.Getpid()), f.memifConf, 4, "is the host's")
	// Routes outside the cluster's record of the network (a default route from IPAM's
	// routes): refused, as the node agent would refuse to restore it.
	st := cluster.NewStore(f.ec)
	ctx := context.Background()
	if err := st.PutNetwork(ctx, cluster.Network{Name: "blue", VNI: 56, Range: netip.MustParsePrefix("10.1.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	defaultRoute := strings.Replace(f.memifConf, `"range":"10.1.0.0/24",`, `"range":"10.1.0.0/24","routes":[{"dst":"0.0.0.0/0"}],`, 1)
	f.refusedAndUndone(t, "c-default", f.m2, defaultRoute, 7, "route 0.0.0.0/0 is not inside the range")
	if err := st.DeleteNetwork(ctx, "blue"); err != nil {
		t.Fatal(err)
	}
}

// refusedAndUndone runs an ADD on blue that must fail with code and a message containing
// msg, and checks it left nothing: no interface, no stand-in in ns, no address.
func (f *pods) refusedAndUndone(t *testing.T, container, ns, conf string, code int, msg string, env ...string) {
	t.Helper()
	blueBefore := allocated(t, f.ec, "blue")
	if r, ok := plugin(t, "ADD", container, ns, conf, env...); ok || r["code"] != float64(code) || !strings.Contains(fmt.Sprint(r["msg"]), msg) {
		t.Fatalf("ADD %s: %v, want code %d and %q", container, r, code, msg)
	}
	for _, i := range f.d.interfaces(t) {
		if i.Pod != nil && *i.Pod == container {
			t.Fatalf("the failed ADD %s left %s", container, i.Name)
		}
	}
	if n := allocated(t, f.ec, "blue"); n != blueBefore {
		t.Fatalf("the failed ADD %s kept its address: %d allocations, were %d", container, n, blueBefore)
	}
	if strings.HasPrefix(ns, "/var/run/netns/") {
		if out := testbin.Run(t, "ip", "-n", filepath.Base(ns), "-o", "link"); strings.Contains(out, "eth1") {
			t.Fatalf("the failed ADD %s left the stand-in: %s", container, out)
		}
	}
}

// gcAndTheDaemonGone: GC with no valid attachment removes red's pod; with the daemon killed
// STATUS says so and DEL still succeeds.
func (f *pods) gcAndTheDaemonGone(t *testing.T) {
	// GC with no valid attachment: red's pod goes (its interface, attachment, address).
	red := strings.Replace(f.memifConf, `"network_name":"blue"`, `"network_name":"red"`, 2)
	red = strings.Replace(red, `"kind":"memif","ring_size":512`, `"kind":"tap"`, 1)
	red = strings.Replace(red, `"type":"veclane-cni"`, `"type":"veclane-cni","cni.dev/valid-attachments":[]`, 1)
	if r, ok := plugin(t, "GC", "", "", red); !ok {
		t.Fatalf("GC: %v", r)
	}
	if n := allocated(t, f.ec, "red"); n != 0 {
		t.Fatalf("red allocations after GC: %d", n)
	}
	for _, i := range f.d.interfaces(t) {
		if i.Network != nil && *i.Network == "red" {
			t.Fatalf("GC left %s", i.Name)
		}
	}

	// The daemon dies: STATUS says so, DEL still succeeds (and frees the address).
	f.d.Kill()
	if r, ok := plugin(t, "STATUS", "", "", f.memifConf); ok || r["code"] != float64(50) {
		t.Fatalf("STATUS with the daemon down: %v", r)
	}
	if _, err := f.c.tool("del", "blue", f.b1); err != nil {
		t.Fatal(err)
	}
	if n := allocated(t, f.ec, "blue"); n != 0 {
		t.Fatalf("blue allocations after DEL: %d", n)
	}
	if a := attachments(t, f.ec); len(a) != 0 {
		t.Fatalf("attachments left: %+v", a)
	}
}
