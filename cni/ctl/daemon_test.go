package ctl_test

import (
	"bufio"
	"encoding/json"
	"net"
	"net/netip"
	"path/filepath"
	"testing"

	"veclane.dev/cni/ctl"
	"veclane.dev/cni/internal/testbin"
)

// startDaemon runs a daemon with networks blue and red until the test ends, and connects.
func startDaemon(t *testing.T) (*testbin.Daemon, *ctl.Client) {
	t.Helper()
	d := testbin.StartDaemon(t, t.TempDir(), testbin.BlueAndRed)
	c, err := ctl.Dial(d.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return d, c
}

// The requests the plugin and the agent make, against the real daemon: each is accepted as
// sent (the daemon refuses unknown fields), and its reply reads back what was asked.
func TestTheDaemonTakesEveryRequest(t *testing.T) {
	d, c := startDaemon(t)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	green := []netip.Prefix{netip.MustParsePrefix("10.2.0.0/16")}
	must("network_add", c.Do(ctl.NetworkAdd{Name: "green", VNI: 99, Ranges: green, Owner: "veclane-agent"}))
	nets, err := c.Networks()
	must("show_network", err)
	var nw ctl.Network
	for _, n := range nets {
		if n.Name == "green" {
			nw = n
		}
	}
	if len(nets) != 3 || nw.Owner == nil || *nw.Owner != "veclane-agent" || nw.Ranges[0] != green[0] || nw.VNI != 99 {
		t.Fatalf("networks: %+v", nets)
	}
	name, err := c.Create(ctl.CreateMemif{
		Socket: filepath.Join(d.Dir, "pod.sock"), Role: ctl.Master, Name: "pod-x-eth1", Network: "green", Pod: "c1",
		RingSize: 512, BufferSize: 4096, RxQueues: 1, TxQueues: 1, MTU: 1500, MAC: "02:fe:00:00:00:09", Mode: "ip", RxMode: "polling",
		RegionLimitMiB: 40,
	})
	must("create_memif", err)
	i, err := c.Interface(name)
	must("show_interface", err)
	if i.Device.Kind != "memif" || i.Device.Mode != "ip" || i.Device.RingSize != 512 || i.Device.RegionLimitMiB != 40 || i.MTU != 1500 || i.MAC != "02:fe:00:00:00:09" ||
		i.Pod == nil || *i.Pod != "c1" || i.Network == nil || *i.Network != "green" {
		t.Fatalf("the memif as created: %+v", i)
	}
	pl, err := ctl.Call[ctl.RxPlacement](c, ctl.ShowRxPlacement{})
	must("show_rx_placement", err)
	if len(pl.Placement) == 0 || pl.Placement[0].Mode != "polling" {
		t.Fatalf("rx placement: %+v", pl)
	}
	pod := netip.MustParseAddr("10.2.0.5")
	must("ip_route add", c.HostRoute(true, pod, name, "green"))
	must("set_ip_neighbor", c.Neighbor(true, name, pod, "02:00:00:00:00:05"))
	fib, err := c.Fib(nw.Table)
	must("show_ip_fib", err)
	found := false
	for _, e := range fib {
		found = found || e.Prefix == netip.PrefixFrom(pod, 32)
	}
	if !found {
		t.Fatalf("no route to %s in table %d: %+v", pod, nw.Table, fib)
	}
	must("ip_route del", c.HostRoute(false, pod, name, "green"))
	must("set_ip_neighbor delete", c.Neighbor(false, name, pod, "02:00:00:00:00:05"))
	tuns, err := c.Tunnels()
	must("show_vxlan_tunnel", err)
	if len(tuns) != 0 {
		t.Fatalf("tunnels: %+v", tuns)
	}
	v, err := ctl.Call[ctl.Version](c, ctl.ShowVersion{})
	must("show_version", err)
	if v.Version == "" || v.Workers == 0 {
		t.Fatalf("version: %+v", v)
	}
	must("delete_interface", c.DeleteInterface(name))
	must("network_del", c.Do(ctl.NetworkDel{Name: "green"}))
}

// Services, address sets and policies against the real daemon: each request is taken as
// sent (the daemon refuses unknown fields), and show_service reads the service back.
func TestTheDaemonTakesServicesAndPolicies(t *testing.T) {
	_, c := startDaemon(t)
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	svc := ctl.ServiceAdd{
		Name: "default/web:http", Network: "blue", VIP: netip.MustParseAddr("10.96.0.10"), Port: 80, Protocol: "tcp",
		Backends: []ctl.Backend{
			{Addr: netip.MustParseAddr("10.1.0.11"), Port: 8080},
			{Addr: netip.MustParseAddr("10.1.0.12"), Port: 8080, State: "terminating"},
		},
		Local: true, AffinitySeconds: 10800,
	}
	must("service_add", c.Do(svc))
	got, err := ctl.Call[ctl.Services](c, ctl.ShowService{})
	must("show_service", err)
	if len(got.Services) != 1 || got.Services[0].Spec.Name != svc.Name || len(got.Services[0].Spec.Backends) != 2 ||
		got.Services[0].Spec.Backends[1].State != "terminating" || !got.Services[0].Spec.Local || got.Services[0].Spec.AffinitySeconds != 10800 {
		t.Fatalf("services: %+v", got)
	}
	must("address_set_add", c.Do(ctl.AddressSetAdd{Name: "frontend", Members: []netip.Prefix{netip.MustParsePrefix("10.1.0.5/32")}}))
	isolated := []ctl.Rule{}
	must("policy_add", c.Do(ctl.PolicyAdd{
		Name: "default/db", Interfaces: []string{"pod-x-eth1"},
		Ingress: &[]ctl.Rule{{
			Peers: []ctl.Peer{
				{Set: "frontend"},
				{CIDR: &ctl.CIDR{Prefix: netip.MustParsePrefix("10.0.0.0/8"), Except: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}},
			},
			Ports: []ctl.PortMatch{{Protocol: "tcp", Port: &ctl.PortRange{First: 5432, Last: 5433}}, {Protocol: "icmp"}},
		}},
		Egress: &isolated,
	}))
	pols, err := ctl.Call[ctl.Policies](c, ctl.ShowPolicy{})
	must("show_policy", err)
	if r := pols.Report; len(r.Policies) != 1 || r.Policies[0].Name != "default/db" || (*r.Policies[0].Ingress)[0].Peers[0].Set != "frontend" ||
		len(r.Sets) != 1 || r.Sets[0] != (ctl.SetInfo{Name: "frontend", Members: 1}) {
		t.Fatalf("policies: %+v", r)
	}
	must("policy_del", c.Do(ctl.PolicyDel{Name: "default/db"}))
	must("address_set_del", c.Do(ctl.AddressSetDel{Name: "frontend"}))
	must("service_del", c.Do(ctl.ServiceDel{Name: svc.Name}))
	if err := c.Do(ctl.ServiceDel{Name: svc.Name}); err == nil {
		t.Fatal("deleting a service twice")
	}
}

// What each refusal of the real daemon reads as: NoInterface for a missing interface, with
// or without codes; the code of every kind of refusal when the daemon sends codes.
func TestTheDaemonsErrorCodes(t *testing.T) {
	d, c := startDaemon(t)
	err := c.DeleteInterface("nosuch")
	if !ctl.NoInterface(err) {
		t.Fatalf("deleting an interface that is not there: %v", err)
	}
	if _, err := c.Interface("nosuch"); !ctl.NoInterface(err) {
		t.Fatalf("reading an interface that is not there: %v", err)
	}
	if err.(*ctl.Error).Code == "" {
		t.Log("the daemon sends no error codes (a build older than codes): NoInterface read the message; codes not checked")
		return
	}
	t.Log("the daemon sends error codes")
	for _, e := range []struct {
		what string
		err  error
		want ctl.ErrorCode
	}{
		{"delete_interface nosuch", err, ctl.CodeNoInterface},
		{"network_del nosuch", c.Do(ctl.NetworkDel{Name: "nosuch"}), ctl.CodeRefused},
		{"network_add blue again", c.Do(ctl.NetworkAdd{Name: "blue", VNI: 57, Ranges: []netip.Prefix{netip.MustParsePrefix("10.9.0.0/16")}}), ctl.CodeRefused},
		{"a request that is no request", rawError(t, d.Socket(), `{"request":"reboot","api":1}`), ctl.CodeMalformed},
		{"a line that is not JSON", rawError(t, d.Socket(), `show version`), ctl.CodeMalformed},
		{"another API version", rawError(t, d.Socket(), `{"request":"show_version","api":99}`), ctl.CodeVersion},
	} {
		var got *ctl.Error
		if ce, ok := e.err.(*ctl.Error); ok {
			got = ce
		}
		if got == nil || got.Code != e.want {
			t.Errorf("%s: %v (code %v), want code %q", e.what, e.err, got, e.want)
		}
	}
}

// rawError sends one line as it is, and reads its reply as an error reply.
func rawError(t *testing.T, sock, line string) error {
	t.Helper()
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte(line + "\n")); err != nil {
		t.Fatal(err)
	}
	reply, err := bufio.NewReader(conn).ReadBytes('\n')
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Reply   string        `json:"reply"`
		Code    ctl.ErrorCode `json:"code"`
		Message string        `json:"message"`
	}
	if err := json.Unmarshal(reply, &e); err != nil || e.Reply != "error" {
		t.Fatalf("%s: %s", line, reply)
	}
	return &ctl.Error{Code: e.Code, Message: e.Message}
}
