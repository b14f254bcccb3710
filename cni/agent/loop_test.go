package agent

import (
	"context"
	"io"
	"log/slog"
	"net/netip"
	"path/filepath"
	"testing"
	"time"

	"veclane.dev/cni/cluster"
	"veclane.dev/cni/internal/testetcd"
)

func eventually(t *testing.T, what string, within time.Duration, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// The agent as it runs: it registers its node, follows etcd's changes as they happen,
// rebuilds a restarted daemon within seconds, and leaves the dataplane alone while
// etcd is down.
func TestRunFollowsTheClusterAndSurvivesItsParts(t *testing.T) {
	srv := testetcd.Start(t)
	s := cluster.NewStore(srv.Client(t))
	ctx := context.Background()
	a := netip.MustParseAddr
	if err := s.PutNetwork(ctx, cluster.Network{Name: "blue", VNI: 56, Range: netip.MustParsePrefix("10.1.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Register(ctx, cluster.Node{Name: "n2", VTEP: a("192.0.2.2")}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cmd, d := startDaemon(t, dir)
	rctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		done <- Run(rctx, cluster.NewStore(srv.Client(t)), Config{
			Node:      cluster.Node{Name: "n1", VTEP: a("192.0.2.1")},
			Uplinks:   Uplinks{"": "uplink"},
			CtlSocket: filepath.Join(dir, "ctl.sock"),
			LeaseTTL:  5 * time.Second,
			// Long: a restarted daemon must be noticed by its socket, not by the resync.
			Resync:     time.Minute,
			MaxBackoff: 200 * time.Millisecond,
			Log:        slog.New(slog.NewTextHandler(io.Discard, nil)),
		})
	}()
	tunnels := func(d *Daemon) string {
		_, tuns := held(t, d)
		return tuns
	}
	// It registered itself, and created blue.
	eventually(t, "n1 registered", 5*time.Second, func() bool {
		snap, err := s.Snapshot(ctx)
		return err == nil && len(snap.Nodes) == 2
	})
	eventually(t, "blue created", 5*time.Second, func() bool { n, _ := held(t, d); return n == "blue/56,local/7" })
	// A pod appears on n2: a route, hence a tunnel, follows.
	pod := cluster.PodAttachment{Network: "blue", ContainerID: "c2", IfName: "net1", Node: "n2", Address: a("10.1.0.3")}
	if err := s.PutAttachment(ctx, pod); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the route to a new pod", 5*time.Second, func() bool { return tunnels(d) == "blue 56 192.0.2.2 1" })
	// The daemon is killed and restarted empty: rebuilt within seconds (its new control
	// socket is noticed), long before the resync.
	cmd.Kill()
	_, d = startDaemon(t, dir)
	eventually(t, "a restarted daemon rebuilt", 5*time.Second, func() bool { return tunnels(d) == "blue 56 192.0.2.2 1" })
	// etcd goes away: the daemon keeps what it has.
	srv.Stop()
	time.Sleep(2 * time.Second)
	if got := tunnels(d); got != "blue 56 192.0.2.2 1" {
		t.Fatalf("with etcd down the daemon's state changed to %q", got)
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}
