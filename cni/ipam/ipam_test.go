package ipam

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"veclane.dev/cni/internal/testetcd"
)

func mustConfig(t *testing.T, js string) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(js))
	if err != nil {
		t.Fatalf("ParseConfig(%s): %v", js, err)
	}
	return c
}

// The forms a configuration takes, each with the ranges it hands out ("FIRST-LAST/LEN
// SIZE") and addresses it never hands out; then what is refused, and why.
func TestConfigForms(t *testing.T) {
	for _, c := range []struct {
		js       string
		ranges   []string
		excluded []string
	}{
		// A /16: its first and last host addresses; the gateway never handed out.
		{`{"network_name":"blue","range":"10.1.0.0/16","gateway":"10.1.0.1"}`, []string{"10.1.0.1-10.1.255.254/16 65534"}, []string{"10.1.0.1"}},
		// FIRST-LAST/LEN.
		{`{"network_name":"blue","range":"10.1.0.10-10.1.0.20/24"}`, []string{"10.1.0.10-10.1.0.20/24 11"}, nil},
		// Network and broadcast are never handed out, whatever range_start and range_end
		// say; exclusions by prefix and by address; a /30 hands out two.
		{`{"network_name":"red","ipRanges":[
			{"range":"192.168.0.0/24","range_start":"192.168.0.0","range_end":"192.168.0.255","exclude":["192.168.0.8/29","192.168.0.3"]},
			{"range":"192.168.1.0/30"}]}`, []string{"192.168.0.1-192.168.0.254/24 254", "192.168.1.1-192.168.1.2/30 2"}, []string{"192.168.0.3", "192.168.0.8", "192.168.0.15"}},
	} {
		cfg := mustConfig(t, c.js)
		var got []string
		for _, r := range cfg.Ranges {
			got = append(got, fmt.Sprintf("%s-%s/%d %d", r.First, r.Last, r.Prefix.Bits(), r.Size()))
		}
		if fmt.Sprint(got) != fmt.Sprint(c.ranges) {
			t.Errorf("%s: ranges %v, want %v", c.js, got, c.ranges)
		}
		for _, x := range c.excluded {
			if !cfg.Ranges[0].excluded(netip.MustParseAddr(x)) {
				t.Errorf("%s: %s is handed out", c.js, x)
			}
		}
	}
	for _, bad := range []struct{ js, want string }{
		{`{"range":"10.0.0.0/24"}`, "network_name is missing"},
		{`{"network_name":"a/b","range":"10.0.0.0/24"}`, "may not contain"},
		{`{"network_name":"x"}`, "no range"},
		{`{"network_name":"x","range_start":"10.0.0.5"}`, "without a range"},
		{`{"network_name":"x","range":"10.0.0.0/33"}`, "not an IPv4 CIDR"},
		{`{"network_name":"x","range":"fd00::/64"}`, "not an IPv4 CIDR"},
		{`{"network_name":"x","range":"10.0.0.0/31"}`, "no host addresses"},
		{`{"network_name":"x","range":"10.0.0.0/24","range_start":"10.0.1.5"}`, "outside"},
		{`{"network_name":"x","range":"10.0.0.0/24","range_start":"10.0.0.9","range_end":"10.0.0.5"}`, "after range_end"},
		{`{"network_name":"x","range":"10.0.0.0/24","exclude":["nope"]}`, "exclude"},
		{`{"network_name":"x","range":"10.0.0.0/24","gateway":"10.9.0.1"}`, "gateway 10.9.0.1 is outside"},
		{`{"network_name":"x","ipRanges":[{"range":"10.0.0.0/24"},{"range":"10.0.0.128/25"}]}`, "overlaps"},
		{`{"network_name":"x","range":`, "ipam configuration"},
	} {
		_, err := ParseConfig([]byte(bad.js))
		if err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseConfig(%s) = %v, want an error with %q", bad.js, err, bad.want)
		}
	}
}

func att(i int) Attachment {
	return Attachment{ContainerID: fmt.Sprintf("c%03d", i), IfName: "net1"}
}

func allocate(t *testing.T, al *Allocator, c *Config, a Attachment) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := al.Allocate(ctx, c, a)
	if err != nil {
		t.Fatalf("Allocate(%v): %v", a, err)
	}
	return l.Address.String()
}

func TestLowestFreeFirstAcrossRangesAndExclusions(t *testing.T) {
	srv := testetcd.Start(t)
	al := New(srv.Client(t), "node-a")
	c := mustConfig(t, `{"network_name":"blue","ipRanges":[
		{"range":"10.1.0.0/24","range_start":"10.1.0.1","range_end":"10.1.0.6","exclude":["10.1.0.4/31"],"gateway":"10.1.0.1"},
		{"range":"10.2.0.0/30"}]}`)
	var got []string
	for i := range 5 {
		got = append(got, allocate(t, al, c, att(i)))
	}
	want := []string{"10.1.0.2/24", "10.1.0.3/24", "10.1.0.6/24", "10.2.0.1/30", "10.2.0.2/30"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("allocations %v, want %v", got, want)
	}
	ctx := context.Background()
	if _, err := al.Allocate(ctx, c, att(5)); !errors.Is(err, ErrExhausted) || !strings.Contains(err.Error(), "network blue") {
		t.Fatalf("a full network: %v", err)
	}
	// The same attachment asks again (an ADD repeated after a crash): the same address.
	if a := allocate(t, al, c, att(2)); a != "10.1.0.6/24" {
		t.Fatalf("second ADD of the same attachment got %s", a)
	}
	// DEL frees; the lowest free address is handed out next; DEL twice is fine.
	for range 2 {
		if err := al.Release(ctx, "blue", att(1)); err != nil {
			t.Fatal(err)
		}
	}
	if a := allocate(t, al, c, att(9)); a != "10.1.0.3/24" {
		t.Fatalf("after a release, got %s", a)
	}
	l, ok, err := al.Lookup(ctx, c, att(9))
	if err != nil || !ok || l.Address.String() != "10.1.0.3/24" || l.Gateway.String() != "10.1.0.1" {
		t.Fatalf("Lookup: %v %v %v", l, ok, err)
	}
	if _, ok, _ := al.Lookup(ctx, c, att(1)); ok {
		t.Fatal("a released attachment still has an address")
	}
}

func TestNetworksWithTheSameRangeDoNotClash(t *testing.T) {
	srv := testetcd.Start(t)
	al := New(srv.Client(t), "node-a")
	blue := mustConfig(t, `{"network_name":"blue","range":"10.1.0.0/16"}`)
	red := mustConfig(t, `{"network_name":"red","range":"10.1.0.0/16"}`)
	a, b := allocate(t, al, blue, att(0)), allocate(t, al, red, att(0))
	if a != "10.1.0.1/16" || b != "10.1.0.1/16" {
		t.Fatalf("blue %s, red %s: each network allocates on its own", a, b)
	}
	if err := al.Release(context.Background(), "red", att(0)); err != nil {
		t.Fatal(err)
	}
	if l, _ := al.List(context.Background(), "blue"); len(l) != 1 {
		t.Fatalf("releasing in red touched blue: %v", l)
	}
}

// Four nodes (four clients) allocate at once, 40 pods each, from one small range: every
// address is handed out once, the range fills exactly, and the records name their pods.
func TestNodesAllocatingAtOnceNeverShareAnAddress(t *testing.T) {
	srv := testetcd.Start(t)
	c := mustConfig(t, `{"network_name":"blue","range":"10.9.0.0/24","range_end":"10.9.0.160"}`)
	var wg sync.WaitGroup
	var mu sync.Mutex
	byAddr := map[string]Attachment{}
	var errs []error
	for node := range 4 {
		al := New(srv.Client(t), fmt.Sprintf("node-%d", node))
		for k := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				a := Attachment{ContainerID: fmt.Sprintf("n%d-pod%d", node, k), IfName: "eth1"}
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				defer cancel()
				l, err := al.Allocate(ctx, c, a)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
					return
				}
				if prev, dup := byAddr[l.Address.String()]; dup {
					errs = append(errs, fmt.Errorf("%s handed to %v and %v", l.Address, prev, a))
				}
				byAddr[l.Address.String()] = a
			}()
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatal(errors.Join(errs...))
	}
	if len(byAddr) != 160 {
		t.Fatalf("%d addresses for 160 pods", len(byAddr))
	}
	list, err := New(srv.Client(t), "x").List(context.Background(), "blue")
	if err != nil || len(list) != 160 || list[159].Address.String() != "10.9.0.160" {
		t.Fatalf("List: %d records, %v", len(list), err)
	}
	for _, r := range list {
		if byAddr[r.Address.String()+"/24"] != r.Attachment {
			t.Fatalf("record %v disagrees with what Allocate returned", r)
		}
	}
	if _, err := New(srv.Client(t), "x").Allocate(context.Background(), c, att(999)); !errors.Is(err, ErrExhausted) {
		t.Fatalf("the 161st: %v", err)
	}
}

func TestGCReleasesLeaksAndHalfRecords(t *testing.T) {
	srv := testetcd.Start(t)
	cl := srv.Client(t)
	al := New(cl, "node-a")
	c := mustConfig(t, `{"network_name":"blue","range":"10.1.0.0/24"}`)
	for i := range 4 {
		allocate(t, al, c, att(i))
	}
	ctx := context.Background()
	// Half records: an address without its attachment key, an attachment key without its
	// address record.
	if _, err := cl.Delete(ctx, attKey("blue", att(2))); err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Put(ctx, attKey("blue", att(7)), "10.1.0.77"); err != nil {
		t.Fatal(err)
	}
	freed, err := al.GC(ctx, "blue", []Attachment{att(0), att(3)})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	for _, f := range freed {
		addrs = append(addrs, f.Address.String())
	}
	if fmt.Sprint(addrs) != "[10.1.0.2 10.1.0.3]" {
		t.Fatalf("GC freed %v", addrs)
	}
	left, _ := al.List(ctx, "blue")
	if len(left) != 2 || left[0].Attachment != att(0) || left[1].Attachment != att(3) {
		t.Fatalf("after GC: %v", left)
	}
	resp, _ := cl.Get(ctx, Prefix+"blue/attachments/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	if resp.Count != 2 {
		t.Fatalf("%d attachment keys left, want 2", resp.Count)
	}
	// The freed addresses are handed out again, lowest first.
	if a := allocate(t, al, c, att(8)); a != "10.1.0.2/24" {
		t.Fatalf("after GC got %s", a)
	}
}

func TestEtcdDownIsAClearErrorNotAHang(t *testing.T) {
	srv := testetcd.Start(t)
	al := New(srv.Client(t), "node-a")
	c := mustConfig(t, `{"network_name":"blue","range":"10.1.0.0/24"}`)
	allocate(t, al, c, att(0))
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	_, err := al.Allocate(ctx, c, att(1))
	if err == nil || !strings.Contains(err.Error(), "etcd") {
		t.Fatalf("Allocate with etcd down: %v", err)
	}
	if time.Since(start) > 5*time.Second {
		t.Fatalf("took %v: the caller's deadline must hold", time.Since(start))
	}
	if err := al.Release(ctx, "blue", att(0)); err == nil {
		t.Fatal("Release with etcd down reported success")
	}
}
