package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"veclane.dev/cni/internal/testetcd"
)

func TestNetworksAreValidatedAndVNIsUnique(t *testing.T) {
	srv := testetcd.Start(t)
	s := NewStore(srv.Client(t))
	ctx := context.Background()
	blue := Network{Name: "blue", VNI: 56, Range: netip.MustParsePrefix("10.1.0.0/16")}
	if err := s.PutNetwork(ctx, blue); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		n    Network
		want string
	}{
		{Network{Name: "red", VNI: 56, Range: blue.Range}, "vni 56 is network blue's"},
		{Network{Name: "red", VNI: 1 << 24, Range: blue.Range}, "not in 1..16777215"},
		{Network{Name: "red", VNI: 88, Range: netip.MustParsePrefix("10.1.0.1/16")}, "host bits set"},
		{Network{Name: "r/d", VNI: 88, Range: blue.Range}, "must be 1 to 31 letters"},
		{Network{Name: "a-very-long-network-name-of-32-ch", VNI: 88, Range: blue.Range}, "must be 1 to 31 letters"},
	} {
		if err := s.PutNetwork(ctx, c.n); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("PutNetwork(%+v) = %v, want %q", c.n, err, c.want)
		}
	}
	// Replacing blue itself keeps its VNI.
	blue.PhysicalNetwork = "storage"
	if err := s.PutNetwork(ctx, blue); err != nil {
		t.Fatal(err)
	}
	// A value written by hand that is not a network is reported, not used.
	if _, err := srv.Client(t).Put(ctx, networksPrefix+"junk", "{"); err != nil {
		t.Fatal(err)
	}
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Networks) != 1 || snap.Networks[0].PhysicalNetwork != "storage" {
		t.Fatalf("networks: %+v", snap.Networks)
	}
	if len(snap.Invalid) != 1 || !strings.Contains(snap.Invalid[0], "junk") {
		t.Fatalf("invalid: %v", snap.Invalid)
	}
}

// Writers racing to give one VNI to different networks: exactly one wins.
func TestOneVNIOneNetworkUnderConcurrentWriters(t *testing.T) {
	srv := testetcd.Start(t)
	ctx := context.Background()
	errs := make(chan error, 8)
	for i := range 8 {
		s := NewStore(srv.Client(t))
		go func() {
			errs <- s.PutNetwork(ctx, Network{Name: fmt.Sprintf("net%d", i), VNI: 42, Range: netip.MustParsePrefix("10.1.0.0/16")})
		}()
	}
	won := 0
	for range 8 {
		if err := <-errs; err == nil {
			won++
		} else if !strings.Contains(err.Error(), "vni 42 is network") {
			t.Fatal(err)
		}
	}
	snap, err := NewStore(srv.Client(t)).Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if won != 1 || len(snap.Networks) != 1 {
		t.Fatalf("%d writers won, %d networks hold vni 42", won, len(snap.Networks))
	}
}

// A node is in the cluster while its agent renews its lease: revoked, it leaves at once;
// abandoned (a crashed agent), it leaves when the lease expires.
func TestNodesLeaveWithTheirLease(t *testing.T) {
	srv := testetcd.Start(t)
	s := NewStore(srv.Client(t))
	ctx := context.Background()
	nodes := func() []string {
		snap, err := s.Snapshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, n := range snap.Nodes {
			names = append(names, n.Name)
		}
		return names
	}
	a, err := s.Register(ctx, Node{Name: "a", VTEP: netip.MustParseAddr("192.168.0.1")}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Register(ctx, Node{Name: "b", VTEP: netip.MustParseAddr("192.168.0.2")}, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	// Renewed past several TTLs.
	time.Sleep(3 * time.Second)
	if got := strings.Join(nodes(), ","); got != "a,b" {
		t.Fatalf("nodes %s", got)
	}
	if err := a.Close(ctx, s); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(nodes(), ","); got != "b" {
		t.Fatalf("after a left: %s", got)
	}
	b.Abandon()
	start := time.Now()
	for len(nodes()) != 0 {
		if time.Since(start) > 10*time.Second {
			t.Fatal("an abandoned lease of 2 s did not expire within 10 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if _, err := s.Register(ctx, Node{Name: "c", VTEP: netip.MustParseAddr("fd00::1")}, time.Second); err == nil {
		t.Fatal("an IPv6 VTEP was accepted")
	}
}

func TestWatchWakesOnEveryChange(t *testing.T) {
	srv := testetcd.Start(t)
	s := NewStore(srv.Client(t))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w := s.Watch(ctx, snap.Revision)
	p := PodAttachment{Network: "blue", ContainerID: "c1", IfName: "net1", Node: "a", Address: netip.MustParseAddr("10.1.0.2")}
	if err := s.PutAttachment(ctx, p); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up for a new attachment")
	}
	if err := s.DeleteAttachment(ctx, "blue", "c1", "net1"); err != nil {
		t.Fatal(err)
	}
	select {
	case <-w:
	case <-time.After(5 * time.Second):
		t.Fatal("no wake-up for a deleted attachment")
	}
	cancel()
	for range w {
	}
}

// A pod's allowed sources: its address and what it forwards, or nothing checked; an
// attachment recorded before the field existed gets the check.
func TestAllowedSourcesOfAnAttachment(t *testing.T) {
	a := PodAttachment{Address: netip.MustParseAddr("10.1.0.5"), Interface: &PodInterface{}}
	if got := a.AllowedSources(); got == nil || fmt.Sprint(*got) != "[10.1.0.5/32]" {
		t.Fatalf("default: %v", got)
	}
	a.Interface.Forwards = []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24")}
	if got := a.AllowedSources(); got == nil || fmt.Sprint(*got) != "[10.1.0.5/32 10.9.0.0/24]" {
		t.Fatalf("forwards: %v", got)
	}
	a.Interface.AnySource = true
	if got := a.AllowedSources(); got != nil {
		t.Fatalf("any source: %v", *got)
	}
	var old PodAttachment
	if err := json.Unmarshal([]byte(`{"address":"10.1.0.6","interface":{"kind":"tap"}}`), &old); err != nil {
		t.Fatal(err)
	}
	if got := old.AllowedSources(); got == nil || fmt.Sprint(*got) != "[10.1.0.6/32]" {
		t.Fatalf("an older record: %v", got)
	}
}

// What anyone who can write to etcd could put there for an agent to act on: a network and a
// node under another's key, an attachment under another's key, and attachments whose address,
// routes or gateway leave their network's range. The snapshot refuses each, saying why, and
// keeps the good ones (an attachment of a network it does not hold is kept: its range is
// checked where it is used).
func TestSnapshotRefusesRecordsTheirKeysOrNetworksDoNotVouchFor(t *testing.T) {
	srv := testetcd.Start(t)
	c := srv.Client(t)
	s := NewStore(c)
	ctx := context.Background()
	p := netip.MustParsePrefix
	a := netip.MustParseAddr
	if err := s.PutNetwork(ctx, Network{Name: "blue", VNI: 56, Range: p("10.1.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	put := func(key string, v any) {
		t.Helper()
		b, _ := json.Marshal(v)
		if _, err := c.Put(ctx, key, string(b)); err != nil {
			t.Fatal(err)
		}
	}
	att := func(cid string, addr netip.Addr, gw netip.Addr, routes ...netip.Prefix) PodAttachment {
		return PodAttachment{Network: "blue", ContainerID: cid, IfName: "net1", Node: "n1", Address: addr,
			Interface: &PodInterface{Kind: "tap", Netns: "/var/run/netns/x", Name: "pod-x", Gateway: gw, Routes: routes}}
	}
	ll := a("169.254.1.1")
	put(networksPrefix+"red", Network{Name: "blue", VNI: 88, Range: p("0.0.0.0/0")})
	put(nodesPrefix+"n1", Node{Name: "n1", VTEP: a("192.0.2.1")})
	put(nodesPrefix+"n2", Node{Name: "n1", VTEP: a("192.0.2.9")})
	good := []PodAttachment{
		att("good", a("10.1.0.5"), ll, p("10.1.0.0/16")),
		att("gw-in-range", a("10.1.0.6"), a("10.1.0.1"), p("10.1.4.0/24")),
		{Network: "green", ContainerID: "elsewhere", IfName: "net1", Node: "n1", Address: a("10.9.0.1")},
	}
	for _, g := range good {
		put(attachmentKey(g.Network, g.ContainerID, g.IfName), g)
	}
	refused := map[string]struct {
		att  PodAttachment
		want string
	}{
		"default-route": {att("default-route", a("10.1.0.7"), ll, p("0.0.0.0/0")), "route 0.0.0.0/0 is not inside the range"},
		"wider-route":   {att("wider-route", a("10.1.0.8"), ll, p("10.0.0.0/8")), "route 10.0.0.0/8 is not inside the range"},
		"other-route":   {att("other-route", a("10.1.0.9"), ll, p("10.1.0.0/16"), p("192.168.0.0/24")), "route 192.168.0.0/24 is not inside"},
		"outside":       {att("outside", a("10.2.0.1"), ll), "address 10.2.0.1 is outside the range"},
		"gateway":       {att("gateway", a("10.1.0.10"), a("192.168.0.1")), "gateway 192.168.0.1 is neither link-local"},
	}
	for cid, r := range refused {
		put(attachmentKey("blue", cid, "net1"), r.att)
	}
	// Another pod's record under c9's key.
	put(attachmentKey("blue", "c9", "net1"), good[0])
	refused["c9"] = struct {
		att  PodAttachment
		want string
	}{want: "whose key is /veclane/v1/attachments/blue/good/net1"}

	snap, err := s.Snapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Nodes) != 1 || snap.Nodes[0].VTEP != a("192.0.2.1") {
		t.Fatalf("nodes: %+v", snap.Nodes)
	}
	var kept []string
	for _, x := range snap.Attachments {
		kept = append(kept, x.ContainerID)
	}
	if fmt.Sprint(kept) != "[good gw-in-range elsewhere]" {
		t.Fatalf("kept %v", kept)
	}
	invalid := strings.Join(snap.Invalid, "\n")
	if len(snap.Networks) != 1 || snap.Networks[0].Range != p("10.1.0.0/16") {
		t.Fatalf("networks: %+v", snap.Networks)
	}
	if !strings.Contains(invalid, networksPrefix+`red: the record names network "blue" but is under network "red"'s key`) {
		t.Errorf("the network under another's key: %s", invalid)
	}
	if !strings.Contains(invalid, nodesPrefix+`n2: the record names node "n1" but is under node "n2"'s key`) {
		t.Errorf("the node under another's key: %s", invalid)
	}
	for cid, r := range refused {
		if !strings.Contains(invalid, attachmentKey("blue", cid, "net1")+": ") || !strings.Contains(invalid, r.want) {
			t.Errorf("%s: want %q in\n%s", cid, r.want, invalid)
		}
	}
	if len(snap.Invalid) != 2+len(refused) {
		t.Fatalf("invalid:\n%s", invalid)
	}
}

// A network's pod routes widen what its pods may route through veclane, and nothing else.
func TestPodRoutes(t *testing.T) {
	p := netip.MustParsePrefix
	pods := Network{Name: "pods", VNI: 1, Range: p("10.244.0.0/16"), PodRoutes: []netip.Prefix{p("0.0.0.0/0")}}
	blue := Network{Name: "blue", VNI: 2, Range: p("10.1.0.0/16"), PodRoutes: []netip.Prefix{p("10.96.0.0/12")}}
	for _, c := range []struct {
		n    *Network
		r    string
		want bool
	}{
		{&pods, "0.0.0.0/0", true}, {&pods, "192.168.0.0/24", true},
		{&blue, "10.1.4.0/24", true}, {&blue, "10.96.0.0/12", true}, {&blue, "10.96.0.10/32", true},
		{&blue, "10.0.0.0/8", false}, {&blue, "0.0.0.0/0", false}, {&blue, "10.2.0.0/16", false},
	} {
		if got := c.n.Routable(p(c.r)); got != c.want {
			t.Errorf("%s routes %s: %v, want %v", c.n.Name, c.r, got, c.want)
		}
	}
	for _, bad := range []Network{
		{Name: "x", VNI: 9, Range: p("10.0.0.0/8"), PodRoutes: []netip.Prefix{p("10.1.2.3/16")}},
		{Name: "x", VNI: 9, Range: p("10.0.0.0/8"), PodRoutes: []netip.Prefix{{}}},
		{Name: "x", VNI: 9, Range: p("10.0.0.0/8"), Origin: "someone"},
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: valid", bad)
		}
	}
	ll := netip.MustParseAddr("169.254.1.1")
	a := PodAttachment{Network: "pods", ContainerID: "c", IfName: "eth0", Node: "n", Address: netip.MustParseAddr("10.244.0.5"),
		Interface: &PodInterface{Kind: "tap", Netns: "/proc/1/ns/net", Name: "pod-c", Gateway: ll, Routes: []netip.Prefix{p("0.0.0.0/0")}}}
	if err := a.InNetwork(&pods); err != nil {
		t.Errorf("a default route on pods: %v", err)
	}
	a.Network, a.Address = "blue", netip.MustParseAddr("10.1.0.5")
	if err := a.InNetwork(&blue); err == nil || !strings.Contains(err.Error(), "route 0.0.0.0/0 is not inside the range") {
		t.Errorf("a default route on blue: %v", err)
	}
}
