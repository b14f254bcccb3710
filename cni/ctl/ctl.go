// Package ctl is a client of the veclane daemon's control API: one JSON object per line on
// its control socket (`ctl.sock`), a reply line for every request line. It holds the
// requests the CNI plugin and the node agent make; `veclane ctl` is the same API as text.
package ctl

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"time"
)

// Client is a connection to one daemon.
type Client struct {
	conn net.Conn
	r    *bufio.Reader
	path string
}

// Dial connects to the control socket at path.
func Dial(path string) (*Client, error) {
	c, err := net.DialTimeout("unix", path, 5*time.Second)
	if err != nil {
		return nil, fmt.Errorf("daemon at %s: %w", path, err)
	}
	return &Client{conn: c, r: bufio.NewReader(c), path: path}, nil
}

// Gone reports whether err says there is no daemon at all (no socket, nobody listening):
// the case in which a deletion has nothing left to delete.
func Gone(err error) bool {
	return errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ECONNREFUSED)
}

// Close closes the connection.
func (c *Client) Close() error { return c.conn.Close() }

// Error is a request the daemon refused, with its reason.
type Error struct{ Message string }

func (e *Error) Error() string { return "daemon: " + e.Message }

// NoInterface reports whether err is the daemon saying that an interface does not exist.
func NoInterface(err error) bool {
	var e *Error
	return errors.As(err, &e) && strings.HasPrefix(e.Message, "no interface")
}

// APIVersion is the control API version this client speaks (the daemon's api::API_VERSION).
const APIVersion = 1

// Call sends a request and decodes the reply into out (nil: only success matters).
func (c *Client) Call(req map[string]any, out any) error {
	withVersion := make(map[string]any, len(req)+1)
	for k, v := range req {
		withVersion[k] = v
	}
	withVersion["api"] = APIVersion
	b, err := json.Marshal(withVersion)
	if err != nil {
		return err
	}
	if err := c.conn.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		return err
	}
	if _, err := c.conn.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("daemon at %s: %w", c.path, err)
	}
	line, err := c.r.ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("daemon at %s: reading the reply to %s: %w", c.path, req["request"], err)
	}
	var head struct {
		Reply   string `json:"reply"`
		Message string `json:"message"`
		API     *int   `json:"api"`
	}
	if err := json.Unmarshal(line, &head); err != nil {
		return fmt.Errorf("daemon at %s: a reply that is not JSON: %w", c.path, err)
	}
	if head.Reply == "error" {
		return &Error{Message: head.Message}
	}
	if head.API == nil || *head.API != APIVersion {
		got := "none"
		if head.API != nil {
			got = fmt.Sprint(*head.API)
		}
		return fmt.Errorf("daemon at %s speaks control API %s and this agent speaks %d: use matching builds", c.path, got, APIVersion)
	}
	if out != nil {
		return json.Unmarshal(line, out)
	}
	return nil
}

// Device is the kind-specific part of an interface, as `show interface` reports it.
type Device struct {
	Kind       string  `json:"kind"`
	HostIfName string  `json:"host_if_name"`
	HostMAC    string  `json:"host_mac"`
	Netns      *string `json:"netns"`
	Socket     string  `json:"socket"`
	ID         uint32  `json:"id"`
	Mode       string  `json:"mode"`
}

// Interface is one interface as `show interface` reports it.
type Interface struct {
	Name      string   `json:"name"`
	Index     uint32   `json:"index"`
	Device    Device   `json:"device"`
	MAC       string   `json:"mac"`
	AdminUp   bool     `json:"admin_up"`
	Connected bool     `json:"connected"`
	Table     uint32   `json:"table"`
	Network   *string  `json:"network"`
	Addresses []string `json:"addresses"`
	MTU       uint16   `json:"mtu"`
	Pod       *string  `json:"pod"`
	RxPackets uint64   `json:"rx_packets"`
	TxPackets uint64   `json:"tx_packets"`
}

// Interfaces returns every interface of the daemon.
func (c *Client) Interfaces() ([]Interface, error) {
	var r struct {
		Interfaces []Interface `json:"interfaces"`
	}
	err := c.Call(map[string]any{"request": "show_interface"}, &r)
	return r.Interfaces, err
}

// Interface returns one interface; an error NoInterface recognises if there is none.
func (c *Client) Interface(name string) (Interface, error) {
	var r struct {
		Interfaces []Interface `json:"interfaces"`
	}
	if err := c.Call(map[string]any{"request": "show_interface", "name": name}, &r); err != nil {
		return Interface{}, err
	}
	if len(r.Interfaces) != 1 {
		return Interface{}, &Error{Message: "no interface " + name}
	}
	return r.Interfaces[0], nil
}

// TapSpec is `create interface tap`.
type TapSpec struct {
	Name       string
	HostIfName string
	Netns      string
	Network    string
	Pod        string
	Queues     uint16
	MTU        uint16
	HostMAC    string
	MAC        string
}

// CreateTap creates a tap in a pod's namespace; the name the daemon gave it.
func (c *Client) CreateTap(s TapSpec) (string, error) {
	req := map[string]any{"request": "create_tap", "host-if-name": s.HostIfName, "name": s.Name}
	opt(req, "netns", s.Netns)
	opt(req, "network", s.Network)
	opt(req, "pod", s.Pod)
	opt(req, "host-mac", s.HostMAC)
	opt(req, "mac", s.MAC)
	if s.Queues != 0 {
		req["queues"] = s.Queues
	}
	if s.MTU != 0 {
		req["mtu"] = s.MTU
	}
	return c.created(req)
}

// MemifSpec is `create interface memif ... master`.
type MemifSpec struct {
	Name       string
	Socket     string
	ID         uint32
	Netns      string
	Network    string
	Pod        string
	RingSize   uint32
	BufferSize uint32
	Queues     uint16
	MTU        uint16
	MAC        string
	// Mode is "ethernet" (default) or "ip" (bare IPv4 packets).
	Mode string
	// RxMode "polling" keeps the workers holding its queues polling; "" the daemon's mode.
	RxMode string
}

// CreateMemif creates a memif master listening in a pod's namespace; the name it got.
func (c *Client) CreateMemif(s MemifSpec) (string, error) {
	req := map[string]any{"request": "create_memif", "id": s.ID, "socket": s.Socket, "role": "master", "name": s.Name}
	opt(req, "netns", s.Netns)
	opt(req, "network", s.Network)
	opt(req, "pod", s.Pod)
	opt(req, "mac", s.MAC)
	opt(req, "mode", s.Mode)
	opt(req, "rx-mode", s.RxMode)
	if s.RingSize != 0 {
		req["ring-size"] = s.RingSize
	}
	if s.BufferSize != 0 {
		req["buffer-size"] = s.BufferSize
	}
	if s.Queues != 0 {
		req["rx-queues"] = s.Queues
		req["tx-queues"] = s.Queues
	}
	if s.MTU != 0 {
		req["mtu"] = s.MTU
	}
	return c.created(req)
}

func opt(req map[string]any, k, v string) {
	if v != "" {
		req[k] = v
	}
}

func (c *Client) created(req map[string]any) (string, error) {
	var r struct {
		Name string `json:"name"`
	}
	err := c.Call(req, &r)
	return r.Name, err
}

// DeleteInterface deletes an interface (with its addresses, routes and neighbours).
func (c *Client) DeleteInterface(name string) error {
	return c.Call(map[string]any{"request": "delete_interface", "name": name}, nil)
}

// HostRoute adds (or deletes) the route to one address through an interface, in a network's
// VRF: a pod's address.
func (c *Client) HostRoute(add bool, addr netip.Addr, iface, network string) error {
	route := map[string]any{"prefix": netip.PrefixFrom(addr, 32).String(), "via": addr.String(), "interface": iface}
	opt(route, "network", network)
	return c.Call(map[string]any{"request": "ip_route", "add": add, "route": route}, nil)
}

// Neighbor adds (or deletes) a static neighbour.
func (c *Client) Neighbor(add bool, iface string, ip netip.Addr, mac string) error {
	return c.Call(map[string]any{"request": "set_ip_neighbor", "delete": !add, "neighbor": map[string]any{
		"interface": iface, "ip": ip.String(), "mac": mac,
	}}, nil)
}

// FibEntry is one entry of a table, as `show ip fib` reports it.
type FibEntry struct {
	Table  uint32       `json:"table"`
	Prefix netip.Prefix `json:"prefix"`
	Path   string       `json:"path"`
}

// Fib returns the entries of one table.
func (c *Client) Fib(table uint32) ([]FibEntry, error) {
	var r struct {
		Entries []FibEntry `json:"entries"`
	}
	err := c.Call(map[string]any{"request": "show_ip_fib", "table": table}, &r)
	return r.Entries, err
}
