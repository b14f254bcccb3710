package ctl

import (
	"net/netip"
)

// The requests, as crates/api/src/lib.rs's `Request` (`#[serde(tag = "request",
// rename_all = "snake_case")]`) and the specs of crates/api/src/config spell them: the
// interface specs' fields are kebab-case, the others as declared. An optional field of the
// daemon's (`Option`, or a default) is omitted when zero here; where zero is a value of its
// own, the field is a pointer.

// ShowVersion is `show version`.
type ShowVersion struct{}

// ShowInterface is `show interface [NAME]`: every interface, or the one named.
type ShowInterface struct {
	Name string `json:"name,omitempty"`
}

// ShowRxPlacement is `show interface rx-placement`.
type ShowRxPlacement struct{}

// DeleteInterface deletes an interface with its addresses, routes, neighbours and queues.
type DeleteInterface struct {
	Name string `json:"name"`
}

// CreateTap is `create interface tap` (the daemon's TapSpec): a tap device, in a pod's
// namespace if Netns is set.
type CreateTap struct {
	// HostIfName is the device's name in its namespace.
	HostIfName string `json:"host-if-name"`
	Netns      string `json:"netns,omitempty"`
	// Name is the daemon's interface's; default tap<N>.
	Name string `json:"name,omitempty"`
	// Queues default to one per worker.
	Queues uint16 `json:"queues,omitempty"`
	MTU    uint16 `json:"mtu,omitempty"`
	// HostMAC is the pod side's MAC, MAC the daemon side's.
	HostMAC     string         `json:"host-mac,omitempty"`
	MAC         string         `json:"mac,omitempty"`
	Addresses   []netip.Prefix `json:"addresses,omitempty"`
	Table       uint32         `json:"table,omitempty"`
	Network     string         `json:"network,omitempty"`
	RxPlacement []int          `json:"rx-placement,omitempty"`
	// Up is the administrative state at creation (default up).
	Up *bool `json:"up,omitempty"`
	// Pod is the container id the interface belongs to.
	Pod string `json:"pod,omitempty"`
	// AllowedSources, if set, are the only sources the daemon takes packets from on it
	// (anti-spoofing); nil: no check, an empty list: no source at all.
	AllowedSources *[]netip.Prefix `json:"allowed-sources,omitempty"`
}

// Role is a memif role.
type Role string

// The memif roles.
const (
	Master Role = "master"
	Slave  Role = "slave"
)

// CreateMemif is `create interface memif` (the daemon's MemifSpec).
type CreateMemif struct {
	ID uint32 `json:"id"`
	// Socket is a path, `@name` (abstract), or relative to the daemon's runtime directory.
	Socket     string `json:"socket"`
	Role       Role   `json:"role"`
	Name       string `json:"name,omitempty"`
	RxQueues   uint16 `json:"rx-queues,omitempty"`
	TxQueues   uint16 `json:"tx-queues,omitempty"`
	RingSize   uint32 `json:"ring-size,omitempty"`
	BufferSize uint32 `json:"buffer-size,omitempty"`
	// RegionLimitMiB: master only, the most MiB the peer's regions may take (0: the
	// daemon's default, what the rings can use twice over).
	RegionLimitMiB uint32         `json:"region-limit-mib,omitempty"`
	Secret         string         `json:"secret,omitempty"`
	MAC            string         `json:"mac,omitempty"`
	Addresses      []netip.Prefix `json:"addresses,omitempty"`
	Table          uint32         `json:"table,omitempty"`
	RxPlacement    []int          `json:"rx-placement,omitempty"`
	Up             *bool          `json:"up,omitempty"`
	Network        string         `json:"network,omitempty"`
	MTU            uint16         `json:"mtu,omitempty"`
	// Netns: a master listens in this namespace (a pod's).
	Netns string `json:"netns,omitempty"`
	Pod   string `json:"pod,omitempty"`
	// Mode is "ethernet" (default) or "ip" (bare IPv4 packets).
	Mode string `json:"mode,omitempty"`
	// RxMode "polling" keeps the workers holding its queues polling; "" the daemon's mode.
	RxMode string `json:"rx-mode,omitempty"`
	UseDMA bool   `json:"use-dma,omitempty"`
	// AllowedSources as CreateTap's.
	AllowedSources *[]netip.Prefix `json:"allowed-sources,omitempty"`
}

// SetAllowedSources replaces an interface's allowed sources (nil: no check).
type SetAllowedSources struct {
	Interface string          `json:"interface"`
	Sources   *[]netip.Prefix `json:"sources"`
}

// RouteSpec is a static route (`ip route`).
type RouteSpec struct {
	Prefix netip.Prefix `json:"prefix"`
	// Via is the next hop's address, or "drop".
	Via string `json:"via"`
	// Interface towards the next hop; default the one whose subnet holds it.
	Interface string `json:"interface,omitempty"`
	Table     uint32 `json:"table,omitempty"`
	// Network is the network whose VRF the route is in (excludes Table).
	Network string `json:"network,omitempty"`
}

// IPRoute adds or deletes a static route (deleting ignores Via and Interface).
type IPRoute struct {
	Add   bool      `json:"add"`
	Route RouteSpec `json:"route"`
}

// NeighborSpec is a static ARP entry.
type NeighborSpec struct {
	Interface string     `json:"interface"`
	IP        netip.Addr `json:"ip"`
	MAC       string     `json:"mac"`
}

// SetIPNeighbor adds (or with Delete deletes) a static neighbour.
type SetIPNeighbor struct {
	Neighbor NeighborSpec `json:"neighbor"`
	Delete   bool         `json:"delete,omitempty"`
}

// ShowIPFib is `show ip fib`: one table's routes, or every table's when Table is nil.
type ShowIPFib struct {
	Table *uint32 `json:"table,omitempty"`
}

// ShowNetwork lists the networks.
type ShowNetwork struct{}

// NetworkAdd adds a network with its VRF (the daemon's NetworkSpec).
type NetworkAdd struct {
	Name   string         `json:"name"`
	VNI    uint32         `json:"vni"`
	Ranges []netip.Prefix `json:"ranges"`
	// Uplink is where its tunnels leave; none keeps the network on this node.
	Uplink string `json:"uplink,omitempty"`
	// DF on the tunnels' outer header (default true).
	DF *bool `json:"df,omitempty"`
	// Owner is the controller that manages it.
	Owner string `json:"owner,omitempty"`
}

// NetworkDel deletes a network no interface is attached to.
type NetworkDel struct {
	Name string `json:"name"`
}

// ShowVxlanTunnel lists the VXLAN tunnels.
type ShowVxlanTunnel struct{}

func (ShowVersion) RequestName() string       { return "show_version" }
func (ShowInterface) RequestName() string     { return "show_interface" }
func (ShowRxPlacement) RequestName() string   { return "show_rx_placement" }
func (DeleteInterface) RequestName() string   { return "delete_interface" }
func (CreateTap) RequestName() string         { return "create_tap" }
func (CreateMemif) RequestName() string       { return "create_memif" }
func (SetAllowedSources) RequestName() string { return "set_allowed_sources" }
func (IPRoute) RequestName() string           { return "ip_route" }
func (SetIPNeighbor) RequestName() string     { return "set_ip_neighbor" }
func (ShowIPFib) RequestName() string         { return "show_ip_fib" }
func (ShowNetwork) RequestName() string       { return "show_network" }
func (NetworkAdd) RequestName() string        { return "network_add" }
func (NetworkDel) RequestName() string        { return "network_del" }
func (ShowVxlanTunnel) RequestName() string   { return "show_vxlan_tunnel" }

func (ShowVersion) reply() Version         { return Version{} }
func (ShowInterface) reply() Interfaces    { return Interfaces{} }
func (ShowRxPlacement) reply() RxPlacement { return RxPlacement{} }
func (DeleteInterface) reply() Ok          { return Ok{} }
func (CreateTap) reply() Created           { return Created{} }
func (CreateMemif) reply() Created         { return Created{} }
func (SetAllowedSources) reply() Ok        { return Ok{} }
func (IPRoute) reply() Ok                  { return Ok{} }
func (SetIPNeighbor) reply() Ok            { return Ok{} }
func (ShowIPFib) reply() Fib               { return Fib{} }
func (ShowNetwork) reply() Networks        { return Networks{} }
func (NetworkAdd) reply() Ok               { return Ok{} }
func (NetworkDel) reply() Ok               { return Ok{} }
func (ShowVxlanTunnel) reply() Tunnels     { return Tunnels{} }

// Do sends a request whose reply is Ok.
func (c *Client) Do(req Request[Ok]) error {
	_, err := Call(c, req)
	return err
}

// Create sends a request that creates an interface; the name the daemon gave it.
func (c *Client) Create(req Request[Created]) (string, error) {
	r, err := Call(c, req)
	return r.Name, err
}

// Interfaces returns every interface of the daemon.
func (c *Client) Interfaces() ([]Interface, error) {
	r, err := Call[Interfaces](c, ShowInterface{})
	return r.Interfaces, err
}

// Interface returns one interface; an error NoInterface recognises if there is none.
func (c *Client) Interface(name string) (Interface, error) {
	r, err := Call[Interfaces](c, ShowInterface{Name: name})
	if err != nil {
		return Interface{}, err
	}
	if len(r.Interfaces) != 1 {
		return Interface{}, &Error{Code: CodeNoInterface, Message: "no interface named " + name}
	}
	return r.Interfaces[0], nil
}

// DeleteInterface deletes an interface (with its addresses, routes and neighbours).
func (c *Client) DeleteInterface(name string) error {
	return c.Do(DeleteInterface{Name: name})
}

// HostRoute adds (or deletes) the route to one address through an interface, in a network's
// VRF: a pod's address.
func (c *Client) HostRoute(add bool, addr netip.Addr, iface, network string) error {
	return c.Do(IPRoute{Add: add, Route: RouteSpec{
		Prefix: netip.PrefixFrom(addr, 32), Via: addr.String(), Interface: iface, Network: network,
	}})
}

// Neighbor adds (or deletes) a static neighbour.
func (c *Client) Neighbor(add bool, iface string, ip netip.Addr, mac string) error {
	return c.Do(SetIPNeighbor{Delete: !add, Neighbor: NeighborSpec{Interface: iface, IP: ip, MAC: mac}})
}

// Fib returns the entries of one table.
func (c *Client) Fib(table uint32) ([]FibEntry, error) {
	r, err := Call[Fib](c, ShowIPFib{Table: &table})
	return r.Entries, err
}

// Networks returns the daemon's networks.
func (c *Client) Networks() ([]Network, error) {
	r, err := Call[Networks](c, ShowNetwork{})
	return r.Networks, err
}

// Tunnels returns the daemon's VXLAN tunnels.
func (c *Client) Tunnels() ([]Tunnel, error) {
	r, err := Call[Tunnels](c, ShowVxlanTunnel{})
	return r.Tunnels, err
}
