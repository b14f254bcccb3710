package ctl_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"veclane.dev/cni/ctl"
)

// fakeDaemon answers each request line on a socket with the next of replies (made one line),
// and hands the request lines it read to the test.
func fakeDaemon(t *testing.T, replies ...string) (*ctl.Client, <-chan string) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "ctl.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	got := make(chan string, len(replies))
	go func() {
		conn, err := l.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		r := bufio.NewReader(conn)
		for _, reply := range replies {
			line, err := r.ReadString('\n')
			if err != nil {
				return
			}
			got <- strings.TrimSuffix(line, "\n")
			var b bytes.Buffer
			if err := json.Compact(&b, []byte(reply)); err != nil {
				b.WriteString(reply)
			}
			if _, err := conn.Write(append(b.Bytes(), '\n')); err != nil {
				return
			}
		}
	}()
	c, err := ctl.Dial(sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c, got
}

const ok = `{"reply":"ok","api":1}`

// Every request's line, field for field as the daemon's serde schema has it, and how each
// kind of reply is read.
func TestRequestsAndReplies(t *testing.T) {
	yes := false
	for _, c := range []struct {
		name  string
		call  func(*ctl.Client) error
		reply string
		// want is the request line; check looks at the call's error.
		want  string
		check func(*testing.T, error)
	}{
		{
			name: "create_tap: kebab-case fields, zero ones left out",
			call: func(c *ctl.Client) error {
				_, err := c.Create(ctl.CreateTap{HostIfName: "eth1", Netns: "/run/netns/p", Name: "pod-1", MTU: 1500, Pod: "c1"})
				return err
			},
			reply: `{"reply":"created","api":1,"name":"pod-1","index":3}`,
			want:  `{"request":"create_tap","api":1,"host-if-name":"eth1","netns":"/run/netns/p","name":"pod-1","mtu":1500,"pod":"c1"}`,
		},
		{
			name: "create_memif: id 0 and the role are always sent",
			call: func(c *ctl.Client) error {
				_, err := c.Create(ctl.CreateMemif{Socket: "@s", Role: ctl.Master, RxQueues: 2, TxQueues: 2, RingSize: 512, RxMode: "polling", Up: &yes})
				return err
			},
			reply: `{"reply":"created","api":1,"name":"memif0/0","index":1}`,
			want:  `{"request":"create_memif","api":1,"id":0,"socket":"@s","role":"master","rx-queues":2,"tx-queues":2,"ring-size":512,"up":false,"rx-mode":"polling"}`,
		},
		{
			name:  "ip_route: add is sent when false",
			call:  func(c *ctl.Client) error { return c.HostRoute(false, netip.MustParseAddr("10.1.0.5"), "tap0", "blue") },
			reply: ok,
			want:  `{"request":"ip_route","api":1,"add":false,"route":{"prefix":"10.1.0.5/32","via":"10.1.0.5","interface":"tap0","network":"blue"}}`,
		},
		{
			name: "set_ip_neighbor",
			call: func(c *ctl.Client) error {
				return c.Neighbor(true, "tap0", netip.MustParseAddr("10.1.0.5"), "02:00:00:00:00:01")
			},
			reply: ok,
			want:  `{"request":"set_ip_neighbor","api":1,"neighbor":{"interface":"tap0","ip":"10.1.0.5","mac":"02:00:00:00:00:01"}}`,
		},
		{
			name:  "show_ip_fib: table 0 is a table",
			call:  func(c *ctl.Client) error { _, err := c.Fib(0); return err },
			reply: `{"reply":"fib","api":1,"entries":[{"table":0,"prefix":"10.0.0.0/24","path":"glean uplink"}]}`,
			want:  `{"request":"show_ip_fib","api":1,"table":0}`,
		},
		{
			name: "network_add",
			call: func(c *ctl.Client) error {
				return c.Do(ctl.NetworkAdd{Name: "blue", VNI: 56, Ranges: []netip.Prefix{netip.MustParsePrefix("10.1.0.0/16")}, Owner: "veclane-agent"})
			},
			reply: ok,
			want:  `{"request":"network_add","api":1,"name":"blue","vni":56,"ranges":["10.1.0.0/16"],"owner":"veclane-agent"}`,
		},
		{
			name:  "a request without fields",
			call:  func(c *ctl.Client) error { _, err := c.Interfaces(); return err },
			reply: `{"reply":"interfaces","api":1,"interfaces":[]}`,
			want:  `{"request":"show_interface","api":1}`,
		},
		{
			name:  "no_interface is NoInterface",
			call:  func(c *ctl.Client) error { return c.DeleteInterface("x") },
			reply: `{"reply":"error","api":1,"code":"no_interface","message":"no interface named \"x\" (have: uplink)"}`,
			want:  `{"request":"delete_interface","api":1,"name":"x"}`,
			check: wantError(ctl.CodeNoInterface, true),
		},
		{
			name:  "an older daemon's error without a code: NoInterface reads the message",
			call:  func(c *ctl.Client) error { return c.DeleteInterface("x") },
			reply: `{"reply":"error","api":1,"message":"no interface named \"x\" (have: uplink)"}`,
			want:  `{"request":"delete_interface","api":1,"name":"x"}`,
			check: wantError("", true),
		},
		{
			name:  "a code is never second-guessed by the message",
			call:  func(c *ctl.Client) error { return c.Do(ctl.NetworkDel{Name: "blue"}) },
			reply: `{"reply":"error","api":1,"code":"refused","message":"no interface may be attached to blue"}`,
			want:  `{"request":"network_del","api":1,"name":"blue"}`,
			check: wantError(ctl.CodeRefused, false),
		},
		{
			name:  "the daemon's version error is an error reply",
			call:  func(c *ctl.Client) error { _, err := c.Networks(); return err },
			reply: `{"reply":"error","api":2,"code":"version","message":"this daemon speaks control API 2"}`,
			want:  `{"request":"show_network","api":1}`,
			check: wantError(ctl.CodeVersion, false),
		},
		{
			name:  "a reply of another API version is not read",
			call:  func(c *ctl.Client) error { _, err := c.Networks(); return err },
			reply: `{"reply":"networks","api":2,"networks":[]}`,
			want:  `{"request":"show_network","api":1}`,
			check: wantText("speaks control API 2"),
		},
		{
			name:  "a reply of another kind than the request's is not read",
			call:  func(c *ctl.Client) error { _, err := c.Tunnels(); return err },
			reply: ok,
			want:  `{"request":"show_vxlan_tunnel","api":1}`,
			check: wantText(`"ok" reply, not "tunnels"`),
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			cl, got := fakeDaemon(t, c.reply)
			err := c.call(cl)
			if line := <-got; line != c.want {
				t.Errorf("sent\n%s\nwant\n%s", line, c.want)
			}
			if c.check == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			c.check(t, err)
		})
	}
}

func wantError(code ctl.ErrorCode, noInterface bool) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		e, ok := err.(*ctl.Error)
		if !ok || !ctl.Refused(err) {
			t.Fatalf("%T %v, want a *ctl.Error", err, err)
		}
		if e.Code != code || ctl.NoInterface(err) != noInterface {
			t.Fatalf("code %q, NoInterface %v; want %q, %v", e.Code, ctl.NoInterface(err), code, noInterface)
		}
	}
}

func wantText(text string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		if err == nil || ctl.Refused(err) || !strings.Contains(err.Error(), text) {
			t.Fatalf("%v, want a client's error with %q", err, text)
		}
	}
}

// A reply's fields land in the typed reply.
func TestRepliesDecode(t *testing.T) {
	cl, _ := fakeDaemon(t, `{"reply":"interfaces","api":1,"interfaces":[{"name":"pod-1","index":2,
		"device":{"kind":"memif","role":"master","socket":"@veclane-eth1","id":0,"ring_size":512,"buffer_size":2048,"netns":"/run/netns/p","mode":"ip"},
		"mac":"02:fe:00:00:00:02","admin_up":true,"connected":false,"table":1,"network":"blue","addresses":["10.1.0.1/24"],
		"mtu":9000,"peer":null,"rx_queues":0,"tx_queues":0,"rx_packets":5,"rx_bytes":0,"tx_packets":7,"tx_bytes":0,
		"rx_errors":0,"tx_no_room":0,"connects":0,"disconnects":0,"last_disconnect_reason":null,"pod":"c1"}]}`)
	i, err := cl.Interface("pod-1")
	if err != nil {
		t.Fatal(err)
	}
	if i.Device.Kind != "memif" || i.Device.Role != ctl.Master || i.Device.Mode != "ip" || *i.Device.Netns != "/run/netns/p" ||
		*i.Network != "blue" || *i.Pod != "c1" || i.Addresses[0] != netip.MustParsePrefix("10.1.0.1/24") || i.MTU != 9000 || i.TxPackets != 7 {
		t.Fatalf("%+v", i)
	}
}
