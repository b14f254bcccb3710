package main

import (
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"
)

func TestBadArgumentsAreRefusedWithTheirFlag(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, c := range []struct {
		vtep, uplink string
		want         string
	}{
		{"", "eth0", "--vtep"},
		{"fd00::1", "eth0", "--vtep"},
		{"192.0.2.1", "", "no uplink"},
	} {
		err := run(log, "http://127.0.0.1:1", "n1", c.vtep, c.uplink, "/nonexistent", time.Second, time.Second, pairs{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("vtep %q uplink %q: %v, want %q", c.vtep, c.uplink, err, c.want)
		}
	}
	p := pairs{}
	if err := p.Set("storage=eth1"); err != nil || p["storage"] != "eth1" {
		t.Fatalf("pairs: %v %v", p, err)
	}
	if err := p.Set("storage"); err == nil {
		t.Fatal("NAME without =INTERFACE accepted")
	}
}
