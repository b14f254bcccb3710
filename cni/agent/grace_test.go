package agent

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"veclane.dev/cni/cluster"
)

// A node whose lease expired is routed to for the grace period from when it was first found
// gone, then forgotten; one that registers again is as new; grace 0 drops it at once.
func TestNodesStayRoutedForTheirGrace(t *testing.T) {
	n1 := cluster.Node{Name: "n1", VTEP: netip.MustParseAddr("192.0.2.1")}
	n2 := cluster.Node{Name: "n2", VTEP: netip.MustParseAddr("192.0.2.2")}
	names := func(ns []cluster.Node) string {
		var s []string
		for _, n := range ns {
			s = append(s, n.Name)
		}
		return strings.Join(s, ",")
	}
	var m nodeMemory
	t0 := time.Unix(1000, 0)
	grace := time.Minute
	if got, p := m.withGrace([]cluster.Node{n1, n2}, t0, grace); names(got) != "n1,n2" || len(p) != 0 {
		t.Fatalf("%s %v", names(got), p)
	}
	got, p := m.withGrace([]cluster.Node{n1}, t0.Add(10*time.Second), grace)
	if names(got) != "n1,n2" || len(p) != 1 || !strings.Contains(p[0], "node n2: its lease expired 0s ago") || !strings.Contains(p[0], "for 1m0s more") {
		t.Fatalf("%s %v", names(got), p)
	}
	if got, p := m.withGrace([]cluster.Node{n1}, t0.Add(69*time.Second), grace); names(got) != "n1,n2" || !strings.Contains(p[0], "expired 59s ago") {
		t.Fatalf("%s %v", names(got), p)
	}
	if got, p := m.withGrace([]cluster.Node{n1}, t0.Add(71*time.Second), grace); names(got) != "n1" || len(p) != 0 {
		t.Fatalf("past its grace: %s %v", names(got), p)
	}
	// Back, then gone again: a new grace from then.
	m.withGrace([]cluster.Node{n1, n2}, t0.Add(80*time.Second), grace)
	if got, _ := m.withGrace([]cluster.Node{n1}, t0.Add(200*time.Second), grace); names(got) != "n1,n2" {
		t.Fatalf("gone again: %s", names(got))
	}
	var none nodeMemory
	none.withGrace([]cluster.Node{n1, n2}, t0, 0)
	if got, _ := none.withGrace([]cluster.Node{n1}, t0, 0); names(got) != "n1" {
		t.Fatalf("grace 0: %s", names(got))
	}
}
